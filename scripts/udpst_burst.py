#!/usr/bin/env python3
"""udpst_burst.py - how bursty is each UDPST client's load at a fixed sending-rate row?

What it measures
----------------
Both pathsonde's `capacity -u` client and the OB-UDPST reference client (`udpst -u`)
send the RFC 9097 / UDPSTP sending-rate table.  At a fixed row both should offer the
same average rate; this script measures the *burst structure* they actually put on the
wire at that row, independently of either server:

* two throwaway network namespaces `burst-c` (client) and `burst-s` (server) joined by a
  veth pair `burst-c0`/`burst-s0` (no shaping, GRO/GSO/TSO off), with `pathsonde serve`
  (the UDPST server) in `burst-s`;
* an AF_PACKET capture on `burst-s0` (TPACKET_V2 mmap ring, so the capture costs no
  syscall per packet) that keeps every Load PDU (UDP payload id 0xBEEF) with its kernel
  receive timestamp.  On a veth the receive stamp is taken when the sender's
  `sendmsg`/`sendmmsg` hands the datagram over (netif_rx with netdev_tstamp_prequeue=1),
  so it is the departure pattern of the sender;
* per client per row: achieved IP-layer rate against the row's rate; inter-arrival gap
  distribution; "bursts" (datagrams chained by gaps < 20 us): mean/p99/max size;
  bytes in 1 ms and 100 us windows relative to the row's mean (fixed bins: p99 and max;
  sliding windows starting at each datagram: max); and the sender's own burst stamps
  (datagrams per distinct header send time).

UDP GSO: the reference client hands each firing to the kernel as one UDP_SEGMENT
super-datagram; over a veth it arrives as one skb whose IP length covers all its
1222-byte segments.  The analysis expands such an skb into its datagrams (same instant,
consecutive sequence numbers) and reports how many skbs were GSO (`gso_skb_fraction`);
`wire --no-udp-gso` turns tx-udp-segmentation off on the client veth to check that the
expansion matches what the kernel's own segmentation produces.

Optionally (`lab` sub-command) it runs the clients through a standing `pathsonde lab up`
path (tbf + Poisson cross traffic), at a fixed row (`--row N`) or with the server's Type C
search (`--row 0`), and records each client's loss ratio, delivered rate and maximum as
the lab's (pathsonde) UDPST server reported them, with the lab's truth over each test.
Variant `udpst-nogso` runs the reference with tx-udp-segmentation off on the sender
namespace's interfaces (so its firings reach the tbf as single datagrams, not as one
GSO unit).

How to run (as root; needs iproute2, ethtool, a pathsonde build and the reference binary)
----------
    python3 scripts/udpst_burst.py wire --pathsonde /work/target-burst/release/pathsonde \
        --udpst /work/shared/peers/obudpst/udpst --rows 100,150,200,300,500 --reps 2 \
        --out docs/compare/data/udpst-burst.json
    # the loaded lab comparison (takes /tmp/pathsonde-lab.lock itself):
    python3 scripts/udpst_burst.py lab --row 150 --reps 3 --duration 10 \
        --out docs/compare/data/udpst-burst.json     # merges into the same JSON
    python3 scripts/udpst_burst.py lab --row 200 --reps 2 --duration 10 \
        --variants pathsonde,udpst,udpst-nogso --key lab_row200_gso --out ...
    python3 scripts/udpst_burst.py lab --row 0 --reps 3 --duration 10 \
        --variants pathsonde,udpst,udpst-nogso --key lab_typec_gso_2 --out ...
    # internal: python3 scripts/udpst_burst.py capture --iface burst-s0 --out FILE

The namespaces are always deleted at the end (finally + signal handlers); the lab is
always brought down.
"""

import argparse
import atexit
import fcntl
import json
import mmap
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import time

NS_C, NS_S = "burst-c", "burst-s"
IF_C, IF_S = "burst-c0", "burst-s0"
ADDR_C, ADDR_S = "10.255.77.1", "10.255.77.2"
CTRL_PORT, UDPST_PORT = 5301, 24611
REC = struct.Struct("<QHIIIB")  # t_ns, ip_len, seq, send_sec, send_nsec, action

# ---------------------------------------------------------------- capture (in the server ns)

SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
PACKET_VERSION = 10
TPACKET_V2 = 1
ETH_P_IP = 0x0800
TP_STATUS_USER = 1
HDR2 = struct.Struct("<IIIHHIIHH4x")  # tpacket2_hdr (32 bytes)


def capture(args):
    frame_size, block_size, block_nr = 256, 1 << 20, 96
    frames_per_block = block_size // frame_size
    frame_nr = frames_per_block * block_nr
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
    s.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
    s.setsockopt(SOL_PACKET, PACKET_RX_RING,
                 struct.pack("IIII", block_size, block_nr, frame_size, frame_nr))
    s.bind((args.iface, ETH_P_IP))
    ring = mmap.mmap(s.fileno(), block_size * block_nr, mmap.MAP_SHARED,
                     mmap.PROT_READ | mmap.PROT_WRITE)
    stop = {"v": False}

    def on_sig(*_):
        stop["v"] = True
    signal.signal(signal.SIGTERM, on_sig)
    signal.signal(signal.SIGINT, on_sig)
    out = open(args.out, "wb")
    p = select.poll()
    p.register(s.fileno(), select.POLLIN)
    idx, n_load, n_other = 0, 0, 0
    deadline = time.monotonic() + args.max_seconds
    print("ready", flush=True)
    buf = bytearray()
    while True:
        off = idx * frame_size
        st = HDR2.unpack_from(ring, off)
        if not (st[0] & TP_STATUS_USER):
            if stop["v"] or time.monotonic() > deadline:
                break
            p.poll(50)
            continue
        status, tp_len, snaplen, mac, net, sec, nsec, _, _ = st
        # sockaddr_ll follows the header: pkttype at +10 (PACKET_OUTGOING = 4)
        pkttype = ring[off + 32 + 10]
        ip = off + net
        if pkttype != 4 and snaplen >= (net - mac) + 28 + 32 and ring[ip + 9] == 17:
            ihl = (ring[ip] & 0x0F) * 4
            ip_len = (ring[ip + 2] << 8) | ring[ip + 3]
            u = ip + ihl + 8
            if ring[u] == 0xBE and ring[u + 1] == 0xEF:
                action = ring[u + 2]
                seq, = struct.unpack_from(">I", ring, u + 4)
                ss, sn = struct.unpack_from(">II", ring, u + 20)
                buf += REC.pack(sec * 1_000_000_000 + nsec, ip_len, seq, ss, sn, action)
                n_load += 1
            else:
                n_other += 1
        struct.pack_into("<I", ring, off, 0)
        idx = (idx + 1) % frame_nr
        if len(buf) > 1 << 20:
            out.write(buf)
            buf = bytearray()
    out.write(buf)
    out.close()
    stats = s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
    pk, drops = struct.unpack("II", stats)
    print(json.dumps({"load": n_load, "other": n_other, "ring_packets": pk,
                      "ring_drops": drops}), flush=True)


# ---------------------------------------------------------------- analysis

def pct(sorted_vals, q):
    if not sorted_vals:
        return None
    k = min(len(sorted_vals) - 1, max(0, int(round(q / 100.0 * (len(sorted_vals) - 1)))))
    return sorted_vals[k]


def load_records(path):
    data = open(path, "rb").read()
    return [REC.unpack_from(data, i) for i in range(0, len(data) - len(data) % REC.size, REC.size)]


def analyze(recs, row_bps, trim_s=0.5, burst_gap_ns=20_000, seg_payload=1222,
            expand_gso=True):
    """Statistics of the testing-phase Load PDUs, trimmed by trim_s at both ends."""
    recs = [r for r in recs if r[5] == 0]  # test_action 0: testing
    # UDP GSO: a sender may hand the kernel one super-datagram holding a whole firing
    # (UDP_SEGMENT); over a veth it travels as one skb whose IP length covers every
    # segment.  Rows <= 1000 use 1222-byte payloads, so such an skb is n datagrams
    # leaving at the same instant: expand it (seq, seq+1, ...; the last one may be
    # the smaller add-on).
    gso_skbs = sum(1 for r in recs if r[1] > 28 + seg_payload)
    n_skbs = len(recs)
    if expand_gso and gso_skbs:
        ex = []
        for t, ip_len, seq, ss, sn, act in recs:
            pay = ip_len - 28
            k = 0
            while pay > 0:
                p = min(pay, seg_payload)
                ex.append((t, p + 28, seq + k, ss, sn, act))
                pay -= p
                k += 1
        recs = ex
    if len(recs) < 100:
        return {"error": f"only {len(recs)} load datagrams captured"}
    recs.sort(key=lambda r: r[0])
    t_first, t_last = recs[0][0], recs[-1][0]
    lo, hi = t_first + int(trim_s * 1e9), t_last - int(trim_s * 1e9)
    w = [r for r in recs if lo <= r[0] <= hi]
    ts = [r[0] for r in w]
    sizes = [r[1] for r in w]
    span = (ts[-1] - ts[0]) / 1e9
    total_bytes = sum(sizes[:-1])
    rate = total_bytes * 8 / span
    # sequence numbers: gaps = datagrams the capture (or the sender's kernel) missed
    seqs = sorted(r[2] for r in recs)
    seq_missing = (seqs[-1] - seqs[0] + 1) - len(set(seqs))
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    gs = sorted(gaps)
    # bursts: datagrams chained by gaps < burst_gap_ns
    bursts, cur, cur_b = [], 1, sizes[0]
    burst_bytes = []
    for g, sz in zip(gaps, sizes[1:]):
        if g < burst_gap_ns:
            cur += 1
            cur_b += sz
        else:
            bursts.append(cur)
            burst_bytes.append(cur_b)
            cur, cur_b = 1, sz
    bursts.append(cur)
    burst_bytes.append(cur_b)
    bs = sorted(bursts)
    # datagrams weighted: the burst each datagram belongs to
    dg_weighted = sorted(b for b in bursts for _ in range(b))
    mean_bps = rate

    def windows(win_ns):
        mean_bytes = mean_bps / 8 * win_ns / 1e9
        # fixed, aligned bins over the trimmed span
        nb = int((ts[-1] - ts[0]) // win_ns)
        bins = [0] * (nb + 1)
        for t, sz in zip(ts, sizes):
            bins[(t - ts[0]) // win_ns] += sz
        bins = sorted(bins[:nb])  # drop the partial last bin
        # sliding window starting at each datagram: bytes in [t_i, t_i + win)
        j, acc, smax = 0, 0, 0
        n = len(ts)
        for i in range(n):
            while j < n and ts[j] < ts[i] + win_ns:
                acc += sizes[j]
                j += 1
            smax = max(smax, acc)
            acc -= sizes[i]
        return {
            "mean_bytes": round(mean_bytes, 1),
            "bin_p50_rel": round(pct(bins, 50) / mean_bytes, 3),
            "bin_p99_rel": round(pct(bins, 99) / mean_bytes, 3),
            "bin_max_rel": round(bins[-1] / mean_bytes, 3),
            "sliding_max_rel": round(smax / mean_bytes, 3),
            "sliding_max_bytes": smax,
            "empty_bin_fraction": round(sum(1 for b in bins if b == 0) / len(bins), 4),
        }

    # the sender's own burst stamps: datagrams per distinct header send time
    per_stamp = {}
    for r in w:
        per_stamp[(r[3], r[4])] = per_stamp.get((r[3], r[4]), 0) + 1
    ps = sorted(per_stamp.values())
    return {
        "gso_skbs_seen": gso_skbs,
        "gso_skb_fraction": round(gso_skbs / max(1, n_skbs), 4),
        "datagrams": len(w),
        "span_s": round(span, 3),
        "rate_bps": round(rate),
        "rate_rel_row": round(rate / row_bps, 4) if row_bps else None,
        "mean_ip_bytes": round(sum(sizes) / len(sizes), 1),
        "seq_missing_in_capture": seq_missing,
        "gap_us": {
            "mean": round(sum(gaps) / len(gaps) / 1e3, 2),
            "p1": round(pct(gs, 1) / 1e3, 2),
            "p10": round(pct(gs, 10) / 1e3, 2),
            "p50": round(pct(gs, 50) / 1e3, 2),
            "p90": round(pct(gs, 90) / 1e3, 2),
            "p99": round(pct(gs, 99) / 1e3, 2),
            "p999": round(pct(gs, 99.9) / 1e3, 2),
            "max": round(gs[-1] / 1e3, 2),
            "frac_below_20us": round(sum(1 for g in gaps if g < burst_gap_ns) / len(gaps), 4),
            "frac_above_200us": round(sum(1 for g in gaps if g > 200_000) / len(gaps), 4),
        },
        "bursts": {
            "count": len(bursts),
            "mean": round(sum(bursts) / len(bursts), 3),
            "p50": pct(bs, 50),
            "p99": pct(bs, 99),
            "max": bs[-1],
            "max_bytes": max(burst_bytes),
            "datagram_weighted_p50": pct(dg_weighted, 50),
            "datagram_weighted_p99": pct(dg_weighted, 99),
        },
        "win_1ms": windows(1_000_000),
        "win_100us": windows(100_000),
        "sender_stamps": {
            "distinct": len(ps),
            "datagrams_per_stamp_mean": round(sum(ps) / len(ps), 3),
            "datagrams_per_stamp_p99": pct(ps, 99),
            "datagrams_per_stamp_max": ps[-1],
        },
    }


# ---------------------------------------------------------------- helpers

def sh(cmd, check=True, **kw):
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=check,
                          capture_output=True, text=True, **kw)


def row_rate_bps(row):
    """IP-layer rate of a standard-table row <= 1000 (each row N = N Mb/s)."""
    return row * 1_000_000 if row <= 1000 else None


def ns_cleanup():
    for ns in (NS_C, NS_S):
        sh(["ip", "netns", "del", ns], check=False)
    sh(["ip", "link", "del", IF_C], check=False)


def ns_setup(no_udp_gso=False):
    ns_cleanup()
    sh(["ip", "netns", "add", NS_C])
    sh(["ip", "netns", "add", NS_S])
    sh(["ip", "link", "add", IF_C, "netns", NS_C, "type", "veth", "peer", "name", IF_S,
        "netns", NS_S])
    for ns, ifc, addr in ((NS_C, IF_C, ADDR_C), (NS_S, IF_S, ADDR_S)):
        x = ["ip", "netns", "exec", ns]
        sh(x + ["ip", "link", "set", "lo", "up"])
        sh(x + ["ip", "addr", "add", addr + "/24", "dev", ifc])
        sh(x + ["ip", "link", "set", ifc, "up"])
        sh(x + ["ethtool", "-K", ifc, "gro", "off", "gso", "off", "tso", "off"], check=False)
        if no_udp_gso:
            sh(x + ["ethtool", "-K", ifc, "tx-udp-segmentation", "off"], check=False)
        sh(x + ["sysctl", "-qw", "net.core.rmem_max=67108864", "net.core.wmem_max=67108864"],
           check=False)


def start_capture(script, iface, out, ns=NS_S, max_seconds=60):
    cmd = ["ip", "netns", "exec", ns, sys.executable, script, "capture", "--iface", iface,
           "--out", out, "--max-seconds", str(max_seconds)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if line.strip() != "ready":
        raise RuntimeError("capture did not start: " + line + p.stderr.read())
    return p


def stop_capture(p):
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    try:
        return json.loads(out.strip().splitlines()[-1])
    except Exception:
        return {"error": out + err}


def client_cmd(client, args, row, server, dur, ns):
    x = ["ip", "netns", "exec", ns] if ns else []
    # row 0: no fixed row, the server's Type C search (as in the lab figures)
    if client == "pathsonde":
        rate = ["--fixed-row", str(row)] if row else ["--algorithm", "c"]
        return x + [args.pathsonde, "capacity", server, "-u"] + rate + [
            "-t", f"{dur}s", "--json", "--no-save"]
    rate = ["-I", str(row)] if row else ["-A", "C"]
    return x + [args.udpst, "-u"] + rate + ["-t", str(dur), "-f", "json", server]


def parse_client(client, text):
    """The test's delivered rate and loss as the server reported them, per sub-interval."""
    try:
        j = json.loads(text[text.index("{"):])
    except Exception:
        return {"parse_error": text[-400:]}
    if client == "udpst":
        items = j.get("Output", {}).get("IncrementalResult", [])
        subs = [{"rate_mbps": it.get("IPLayerCapacity"), "loss_ratio": it.get("LossRatio"),
                 "loss_count": it.get("LossCount"), "rtt_max_s": it.get("RTTMax")}
                for it in items]
        summ = j.get("Output", {}).get("Summary", {})
        return {"sub_intervals": subs, "error_status": j.get("ErrorStatus"),
                "summary_loss_ratio": summ.get("LossRatioSummary"),
                "summary_loss_count": summ.get("LossCount"),
                "summary_delivered_mbps": summ.get("IPLayerCapacitySummary"),
                "max_mbps": j.get("Output", {}).get("AtMax", {}).get("MaxIPLayerCapacity")}
    return {"raw_keys": list(j.keys()), "json": j}


# ---------------------------------------------------------------- wire: burst structure

def wire(args):
    script = os.path.abspath(__file__)
    procs = []

    def cleanup(*_):
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except Exception:
                    p.kill()
        ns_cleanup()
    atexit.register(cleanup)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    ns_setup(args.no_udp_gso)
    srv = subprocess.Popen(["ip", "netns", "exec", NS_S, args.pathsonde, "serve", "--bind",
                            ADDR_S, "--port", str(CTRL_PORT), "--udpst-port", str(UDPST_PORT)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(srv)
    time.sleep(1.0)
    server = f"{ADDR_S}:{UDPST_PORT}"
    results = []
    rows = [int(r) for r in args.rows.split(",")]
    for rep in range(args.reps):
        for row in rows:
            order = ["pathsonde", "udpst"] if rep % 2 == 0 else ["udpst", "pathsonde"]
            for client in order:
                cap_file = f"/tmp/burst-cap-{client}-{row}-{rep}.bin"
                cap = start_capture(script, IF_S, cap_file)
                procs.append(cap)
                t0 = time.time()
                r = sh(client_cmd(client, args, row, server, args.duration, NS_C), check=False,
                       timeout=args.duration + 30)
                time.sleep(0.3)
                capstat = stop_capture(cap)
                recs = load_records(cap_file)
                os.unlink(cap_file)
                a = analyze(recs, row_rate_bps(row))
                rep_client = parse_client(client, r.stdout)
                if client == "pathsonde":
                    rep_client = summarize_pathsonde(rep_client)
                entry = {"client": client, "row": row, "rep": rep, "started": t0,
                         "client_exit": r.returncode, "capture": capstat, "wire": a,
                         "client_report": rep_client,
                         "loadavg": open("/proc/loadavg").read().split()[:3]}
                results.append(entry)
                print(fmt_line(entry), flush=True)
                time.sleep(0.5)
    srv.terminate()
    srv.wait(5)
    merge_out(args.out, {args.key: {"setup": {"no_udp_gso": args.no_udp_gso,
        "namespaces": [NS_C, NS_S], "veth": [IF_C, IF_S], "server": "pathsonde serve "
        f"--udpst-port {UDPST_PORT}", "duration_s": args.duration, "trim_s": 0.5,
        "burst_gap_us": 20, "kernel": os.uname().release},
        "runs": results, "summary": summarize(results)}})


def summarize_pathsonde(rep):
    j = rep.get("json")
    if j is None:
        return rep
    out = {}
    # keep only small scalar facts and per-sub-interval rate/loss
    subs = []
    for k in ("sub_intervals", "intervals", "rows"):
        if isinstance(j.get(k), list):
            for it in j[k]:
                if isinstance(it, dict):
                    subs.append({kk: it.get(kk) for kk in (
                        "interval", "ip_layer_capacity_bps", "loss_ratio", "loss_count",
                        "rx_datagrams", "rtt_var_max_s")})
    out["sub_intervals"] = subs
    for k, v in j.items():
        if isinstance(v, (int, float, str, bool)) or v is None:
            out[k] = v
    return out


def fmt_line(e):
    a = e["wire"]
    if "error" in a:
        return f"{e['client']:9s} row {e['row']:4d} rep {e['rep']}: {a['error']} exit {e['client_exit']}"
    return (f"{e['client']:9s} row {e['row']:4d} rep {e['rep']}: {a['rate_bps']/1e6:7.2f} Mb/s "
            f"gap p50 {a['gap_us']['p50']:6.1f} p99 {a['gap_us']['p99']:7.1f} us  "
            f"burst mean {a['bursts']['mean']:.2f} max {a['bursts']['max']:3d}  "
            f"1ms max {a['win_1ms']['bin_max_rel']:.2f} p99 {a['win_1ms']['bin_p99_rel']:.2f}  "
            f"100us max {a['win_100us']['bin_max_rel']:.2f} p99 {a['win_100us']['bin_p99_rel']:.2f}"
            f"  stamps/dg {a['sender_stamps']['datagrams_per_stamp_mean']:.2f}"
            f"  miss {a['seq_missing_in_capture']} drops {e['capture'].get('ring_drops')}")


def summarize(results):
    """Per client and row: the median over repetitions of the headline numbers."""
    groups = {}
    for e in results:
        if "error" in e["wire"]:
            continue
        groups.setdefault((e["client"], e["row"]), []).append(e["wire"])
    out = []
    for (client, row), ws in sorted(groups.items(), key=lambda x: (x[0][1], x[0][0])):
        def med(f):
            v = sorted(f(w) for w in ws)
            return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
        out.append({
            "client": client, "row": row, "reps": len(ws),
            "rate_mbps": round(med(lambda w: w["rate_bps"]) / 1e6, 2),
            "gap_p50_us": med(lambda w: w["gap_us"]["p50"]),
            "gap_p99_us": med(lambda w: w["gap_us"]["p99"]),
            "burst_mean": med(lambda w: w["bursts"]["mean"]),
            "burst_max": max(w["bursts"]["max"] for w in ws),
            "burst_dgw_p99": med(lambda w: w["bursts"]["datagram_weighted_p99"]),
            "win1ms_p99_rel": med(lambda w: w["win_1ms"]["bin_p99_rel"]),
            "win1ms_max_rel": max(w["win_1ms"]["bin_max_rel"] for w in ws),
            "win1ms_sliding_max_rel": max(w["win_1ms"]["sliding_max_rel"] for w in ws),
            "win100us_p99_rel": med(lambda w: w["win_100us"]["bin_p99_rel"]),
            "win100us_max_rel": max(w["win_100us"]["bin_max_rel"] for w in ws),
            "win100us_sliding_max_rel": max(w["win_100us"]["sliding_max_rel"] for w in ws),
            "win100us_empty_fraction": med(lambda w: w["win_100us"]["empty_bin_fraction"]),
            "datagrams_per_stamp": med(lambda w: w["sender_stamps"]["datagrams_per_stamp_mean"]),
        })
    return out


def merge_out(path, part):
    d = {}
    if os.path.exists(path):
        d = json.load(open(path))
    d.update(part)
    d["generated_by"] = "scripts/udpst_burst.py"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(d, f, separators=(",", ":"))


# ---------------------------------------------------------------- lab: share at a fixed row

def lab(args):
    script = os.path.abspath(__file__)
    lockf = open("/tmp/pathsonde-lab.lock", "a")
    print("waiting for /tmp/pathsonde-lab.lock ...", flush=True)
    fcntl.flock(lockf, fcntl.LOCK_EX)
    name = args.name
    up = None
    results = []
    lab_info = {}
    truth_txt = ""
    try:
        up_r = sh([args.pathsonde, "lab", "up", "--name", name, "--capacity", args.capacity,
                   "--cross", args.cross, "--json"], check=False, timeout=120)
        if up_r.returncode != 0:
            raise RuntimeError("lab up failed: " + up_r.stdout + up_r.stderr)
        up = json.loads(up_r.stdout[up_r.stdout.index("{"):])
        t_up = time.time()
        print(json.dumps(up)[:1500], flush=True)
        snd_ns, server = find_lab_endpoints(up, name)
        print("sender ns", snd_ns, "server", server, flush=True)
        snd_ifs = [l.split(":")[1].strip().split("@")[0] for l in
                   sh(["ip", "-n", snd_ns, "-o", "link"]).stdout.splitlines()
                   if ": lo:" not in l]
        lab_info = {"snd_ifs": snd_ifs, "snd_offloads": {
            i: [l.strip() for l in sh(["ip", "netns", "exec", snd_ns, "ethtool", "-k", i],
                                      check=False).stdout.splitlines()
                if "segmentation" in l or "generic-receive" in l] for i in snd_ifs}}
        lab_info["tc_before"] = {ns["namespace"]: sh(["tc", "-n", ns["namespace"], "-s", "qdisc"],
                                                     check=False).stdout
                                 for ns in up["namespaces"]}
        variants = args.variants.split(",")
        for rep in range(args.reps):
            order = variants if rep % 2 == 0 else variants[::-1]
            for variant in order:
                client = variant.split("-")[0]
                if variant == "udpst-nogso":
                    for i in snd_ifs:
                        sh(["ip", "netns", "exec", snd_ns, "ethtool", "-K", i,
                            "tx-udp-segmentation", "off"], check=False)
                t0 = time.time()
                r = sh(client_cmd(client, args, args.row, server, args.duration, snd_ns),
                       check=False, timeout=args.duration + 30)
                if variant == "udpst-nogso":
                    for i in snd_ifs:
                        sh(["ip", "netns", "exec", snd_ns, "ethtool", "-K", i,
                            "tx-udp-segmentation", "on"], check=False)
                rep_client = parse_client(client, r.stdout)
                if client == "pathsonde":
                    rep_client = summarize_pathsonde(rep_client)
                e = {"client": client, "variant": variant, "row": args.row, "rep": rep,
                     "started": t0,
                     "duration_s": args.duration,
                     "client_exit": r.returncode, "client_report": rep_client,
                     "stderr_tail": r.stderr[-300:]}
                results.append(e)
                print(json.dumps(e)[:1200], flush=True)
                time.sleep(1.0)
        lab_info["tc_after"] = {ns["namespace"]: sh(["tc", "-n", ns["namespace"], "-s", "qdisc"],
                                                    check=False).stdout
                                for ns in up["namespaces"]}
        truth = sh([args.pathsonde, "lab", "truth", name, "--json"], check=False, timeout=60)
        try:
            tj = json.loads(truth.stdout[truth.stdout.index("{"):])
            tw = truth_windows(tj, results, t_up)
            for e, w in zip(results, tw):
                e["truth_window"] = w
            truth_txt = json.dumps(tj.get("truth", [])[:3])
        except Exception as ex:
            truth_txt = "truth parse failed: %r %s" % (ex, truth.stdout[-2000:])
    finally:
        sh([args.pathsonde, "lab", "down", name], check=False, timeout=120)
        fcntl.flock(lockf, fcntl.LOCK_UN)
    merge_out(args.out, {args.key: {"setup": {"name": name, "capacity": args.capacity,
                                           "cross": args.cross, "row": args.row,
                                           "duration_s": args.duration, "lab_up": up,
                                           "lab_info": lab_info},
                                 "runs": results, "truth_head": truth_txt[-4000:],
                                 "summary": lab_summary(results)}})


def lab_summary(results):
    out = []
    for e in results:
        c = e["client_report"]
        if e["client"] == "udpst":
            subs = c.get("sub_intervals", [])
            deliv = c.get("summary_delivered_mbps")
            loss = c.get("summary_loss_ratio")
            mx = c.get("max_mbps")
        else:
            subs = c.get("sub_intervals", [])
            deliv = (c.get("mean_ip_layer_capacity_bps") or 0) / 1e6
            lc = sum(s.get("loss_count") or 0 for s in subs)
            rx = sum(s.get("rx_datagrams") or 0 for s in subs)
            loss = lc / (lc + rx) if lc + rx else None
            mx = (c.get("max_ip_layer_capacity_bps") or 0) / 1e6
        out.append({"client": e["client"], "variant": e.get("variant", e["client"]),
                    "rep": e["rep"], "delivered_mbps": deliv,
                    "loss_ratio": loss, "max_mbps": mx,
                    "offered_mbps_est": round(deliv / (1 - loss), 2)
                    if deliv is not None and loss is not None and loss < 1 else None,
                    "truth": e.get("truth_window")})
    return out


def find_lab_endpoints(up, name):
    snd = up["namespaces"][0]["namespace"]
    server = up.get("udpst_server") or "198.18.2.2:24601"
    return snd, server


def truth_windows(truth_json, runs, t_up):
    """Mean available / cross-traffic rate and qdisc drops over each run's window
    (the truth series' t_s counted from `lab up`'s return, within ~1 s)."""
    series = truth_json.get("truth", [])
    out = []

    def num(v):
        if isinstance(v, (int, float)):
            return float(v)
        if isinstance(v, dict):
            for k in ("bps", "bits_per_sec", "value"):
                if k in v:
                    return float(v[k])
        try:
            return float(v)
        except Exception:
            return None
    for e in runs:
        a = e["started"] - t_up + 1.0
        b = a + e["duration_s"] - 1.0
        pts = [p for p in series if a <= num(p.get("t_s")) <= b]
        if not pts:
            out.append(None)
            continue
        av = [num(p.get("available_bps")) for p in pts]
        cr = [num(p.get("cross_l2_bps")) for p in pts]
        out.append({"points": len(pts),
                    "available_mbps": round(sum(av) / len(av) / 1e6, 2) if None not in av else None,
                    "cross_l2_mbps": round(sum(cr) / len(cr) / 1e6, 2) if None not in cr else None,
                    "qdisc_drops": pts[-1].get("qdisc_drops", 0) - pts[0].get("qdisc_drops", 0)})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("--iface", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--max-seconds", type=float, default=60)
    for name in ("wire", "lab"):
        p = sub.add_parser(name)
        p.add_argument("--pathsonde", default="/work/target-burst/release/pathsonde")
        p.add_argument("--udpst", default="/work/shared/peers/obudpst/udpst")
        p.add_argument("--duration", type=int, default=5)
        p.add_argument("--reps", type=int, default=2)
        p.add_argument("--out", default="docs/compare/data/udpst-burst.json")
    sub.choices["wire"].add_argument("--rows", default="100,150,200,300,500")
    sub.choices["wire"].add_argument("--no-udp-gso", action="store_true",
                                     help="tx-udp-segmentation off on the client veth: the "
                                     "kernel splits GSO super-datagrams before the capture")
    sub.choices["wire"].add_argument("--key", default="wire",
                                     help="top-level key of the JSON to write")
    lp = sub.choices["lab"]
    lp.add_argument("--row", type=int, default=150)
    lp.add_argument("--name", default="burstlab")
    lp.add_argument("--capacity", default="300mbit")
    lp.add_argument("--cross", default="poisson:60%")
    lp.add_argument("--key", default="lab", help="top-level key of the JSON to write")
    lp.add_argument("--variants", default="pathsonde,udpst",
                    help="comma list of pathsonde, udpst, udpst-nogso (the reference with "
                    "tx-udp-segmentation off on the sender's interfaces: its UDP GSO "
                    "super-datagrams split into single datagrams before the path)")
    a = ap.parse_args()
    {"capture": capture, "wire": wire, "lab": lab}[a.cmd](a)


if __name__ == "__main__":
    main()
