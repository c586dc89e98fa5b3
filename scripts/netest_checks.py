#!/usr/bin/env python3
"""The lab checks of issue 5 (docs/measure.md, "Lab figures").

Run as root, holding the lab lock, from the repository root after
`cargo build -p pathsonde`:

    flock /tmp/pathsonde-lab.lock python3 scripts/netest_checks.py all

Checks (each prints its figures and a PASS/FAIL line, and the whole run
ends with one JSON object on the last line):

  mbs      C = 200 Mb/s, tbf limit 64 KiB and 256 KiB: the MBS (median of
           the searches) against the lossless burst implied by the queue
           limit, tbf's bucket and the measured sender line rate.
  iperf    TCP single stream, `pathsonde tcp` against `iperf3`, alternately
           on the same path (200 Mb/s, 256 KiB queue), median of the runs.
  streams  20 ms delay, 200 Mb/s: `pathsonde measure --json` with the
           receiver's net.ipv4.tcp_rmem max at 256 KiB and lifted; the
           capped run must recommend more streams and name the cap; every
           section filled, within the budget.

Every lab gets a unique name (i5 + check + pid) and is taken down in a
`finally`, also on error.
"""

import json
import os
import statistics
import subprocess
import sys
import time

BIN = os.environ.get("PATHSONDE", "target/debug/pathsonde")
SERVER = "198.18.2.2"
L2 = 14  # Ethernet header bytes tbf counts on top of each IP packet
RESULTS = {}


def sh(*args, check=True, capture=True, timeout=300):
    r = subprocess.run(args, capture_output=capture, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def ns(name, role):
    return f"pathsonde-{name}-{role}"


class Lab:
    def __init__(self, tag, *opts):
        self.name = f"i5{tag}{os.getpid() % 100000}"[:16]
        self.opts = opts

    def __enter__(self):
        sh(BIN, "lab", "up", "--name", self.name, *self.opts)
        return self

    def __exit__(self, *exc):
        sh(BIN, "lab", "down", self.name, check=False)

    def run(self, role, *args, **kw):
        return sh("ip", "netns", "exec", ns(self.name, role), *args, **kw)

    def tbf(self):
        out = sh("tc", "-n", ns(self.name, "rtr"), "-j", "qdisc", "show", "dev", "to-rcv").stdout
        for q in json.loads(out):
            if q.get("kind") == "tbf":
                return q["options"]
        raise RuntimeError("no tbf on the tight link")


def load():
    return os.getloadavg()[0]


def check_mbs(searches=5, repeats=3):
    out = {}
    ok = True
    for queue in (64 * 1024, 256 * 1024):
        with Lab(f"m{queue // 1024}", "--capacity", "200mbit", "--queue", f"{queue}B") as lab:
            opts = lab.tbf()
            rate_l2 = float(opts["rate"]) * 8  # tc -j gives bytes/s
            bucket = int(opts["burst"])
            limit = int(opts.get("limit", queue))
            meds, errs, runs = [], [], []
            for _ in range(repeats):
                r = json.loads(lab.run("snd", BIN, "mbs", SERVER, "--searches", str(searches), "--json").stdout)
                m = r["mbs"]
                pkt = m["packet"]
                sender_ip = m["sender_line_rate"]
                sender_l2 = sender_ip * (pkt + L2) / pkt
                # Backlog after a burst of B L2 bytes at R into tbf at C with a
                # full bucket of b: B (1 - C/R) - b; lossless while <= limit.
                implied_l2 = (limit + bucket) / (1 - rate_l2 / sender_l2)
                implied_pkts = int(implied_l2 // (pkt + L2))
                implied_ip = implied_pkts * pkt
                med = m["summary"]["median"]
                err = (med - implied_ip) / implied_ip
                meds.append(med)
                errs.append(err)
                runs.append({"mbs": m["summary"], "sender_line_rate_bps": sender_ip,
                             "path_line_rate_bps": m["path_line_rate"], "implied_ip_bytes": implied_ip,
                             "implied_packets": implied_pkts, "error": err, "load": load()})
                print(f"queue {queue} B (tbf limit {limit}, bucket {bucket}, rate {rate_l2/1e6:.0f} Mb/s L2): "
                      f"MBS median {med} B, range {m['summary']['min']}-{m['summary']['max']} over {searches} searches; "
                      f"sender {sender_ip/1e9:.2f} Gb/s -> implied {implied_ip} B ({implied_pkts} packets); "
                      f"error {err*100:+.1f} %; load {load():.1f}")
            worst = max(abs(e) for e in errs)
            passed = worst <= 0.15
            ok &= passed
            print(f"  -> {'PASS' if passed else 'FAIL'}: worst |error| {worst*100:.1f} % over {repeats} runs (bar 15 %)")
            out[str(queue)] = {"runs": runs, "worst_abs_error": worst, "pass": passed}
    RESULTS["mbs"] = out
    return ok


def check_iperf(repeats=3, secs=10):
    with Lab("ip", "--capacity", "200mbit", "--queue", "256KiB") as lab:
        srv = subprocess.Popen(["ip", "netns", "exec", ns(lab.name, "rcv"), "iperf3", "-s", "-p", "5399"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            ps, ip = [], []
            for i in range(repeats):
                r = json.loads(lab.run("snd", BIN, "tcp", SERVER, "-t", f"{secs}s", "--json").stdout)
                ps.append(r["throughput_bps"])
                j = json.loads(lab.run("snd", "iperf3", "-c", SERVER, "-p", "5399", "-t", str(secs), "-J").stdout)
                ip.append(j["end"]["sum_received"]["bits_per_second"])
                print(f"run {i}: pathsonde tcp {ps[-1]/1e6:.2f} Mb/s, iperf3 {ip[-1]/1e6:.2f} Mb/s; load {load():.1f}")
        finally:
            srv.terminate()
            srv.wait()
    mp, mi = statistics.median(ps), statistics.median(ip)
    diff = (mp - mi) / mi
    passed = abs(diff) <= 0.10
    print(f"  -> {'PASS' if passed else 'FAIL'}: pathsonde median {mp/1e6:.2f} (range {min(ps)/1e6:.2f}-{max(ps)/1e6:.2f}), "
          f"iperf3 median {mi/1e6:.2f} (range {min(ip)/1e6:.2f}-{max(ip)/1e6:.2f}) Mb/s; difference {diff*100:+.1f} % (bar 10 %)")
    RESULTS["iperf"] = {"pathsonde_bps": ps, "iperf3_bps": ip, "difference": diff, "pass": passed}
    return passed


SECTIONS = ["verbose", "general_statistics", "general", "udp", "tcp", "advisory"]


def filled(m):
    """Names of sections (and key figures) that are missing."""
    missing = [s for s in SECTIONS if not m.get(s)]
    g, u, t = m.get("general", {}), m.get("udp", {}), m.get("tcp", {})
    for k, v in [("general.available", g.get("available")), ("general.mbs", g.get("mbs")),
                 ("udp.single_stream_bps", u.get("single_stream_bps")), ("udp.multi_stream", u.get("multi_stream")),
                 ("udp.burst_controlled", u.get("burst_controlled")),
                 ("tcp.optimal_window_bytes", t.get("optimal_window_bytes")),
                 ("tcp.single_stream_optimal_window", t.get("single_stream_optimal_window")),
                 ("tcp.full_duplex_check", t.get("full_duplex_check")), ("tcp.streams", t.get("streams"))]:
        if v is None:
            missing.append(k)
    return missing


def check_streams(budget=30, repeats=3):
    out = {"capped": [], "lifted": []}
    ok = True
    with Lab("st", "--capacity", "200mbit", "--queue", "256KiB", "--delay", "20ms") as lab:
        rcv = ns(lab.name, "rcv")
        original = sh("ip", "netns", "exec", rcv, "sysctl", "-n", "net.ipv4.tcp_rmem").stdout.split()
        for i in range(repeats):
            for mode in ("capped", "lifted"):
                rmem = "4096 131072 262144" if mode == "capped" else f"4096 131072 {33554432}"
                sh("ip", "netns", "exec", rcv, "sysctl", "-q", "-w", f"net.ipv4.tcp_rmem={rmem}")
                t0 = time.time()
                r = lab.run("snd", BIN, "measure", SERVER, "--json", "--budget", f"{budget}s", "--max-rate", "400M",
                            timeout=budget * 4)
                wall = time.time() - t0
                m = json.loads(r.stdout)
                st = m["tcp"]["streams"] or {}
                sweep = [(f["streams"], f["steady_bps"] / 1e6) for f in m["tcp"]["sweep"]]
                names_cap = any("tcp_rmem max = 262144" in a for a in m["advisory"])
                missing = filled(m)
                rec = {"recommended": st.get("recommended"), "intrusive_from": st.get("intrusive_from"),
                       "sweep_mbps": sweep, "advisory_names_cap": names_cap, "duration_s": m["general_statistics"]["duration_s"],
                       "wall_s": wall, "missing": missing, "reference_mbps": (m["tcp"].get("reference_rate_bps") or 0) / 1e6, "rtt_ms": m["general"]["rtt_s"] * 1e3,
                       "mbs": (m["general"]["mbs"] or {}).get("summary", {}).get("median"), "load": load(),
                       "notes": m["notes"]}
                out[mode].append(rec)
                print(f"{mode:6} run {i}: recommended {rec['recommended']}, intrusive from {rec['intrusive_from']}, "
                      f"sweep {', '.join(f'{n}: {v:.0f}' for n, v in sweep)} Mb/s; advisory names the cap: {names_cap}; "
                      f"{rec['duration_s']:.1f} s of {budget} s budget (wall {wall:.1f} s); missing: {missing or 'none'}; "
                      f"reference {rec['reference_mbps']:.0f} Mb/s; RTT {rec['rtt_ms']:.1f} ms; load {rec['load']:.1f}")
                if i == 0 and mode == "lifted":
                    with open("/tmp/i5-measure-lab.json", "w") as f:
                        json.dump(m, f)
        sh("ip", "netns", "exec", rcv, "sysctl", "-q", "-w", f"net.ipv4.tcp_rmem={' '.join(original)}")
        # One text report for the record.
        txt = lab.run("snd", BIN, "measure", SERVER, "--budget", f"{budget}s", "--max-rate", "400M", timeout=budget * 4).stdout
        with open("/tmp/i5-measure-lab.txt", "w") as f:
            f.write(txt)
        print(txt)
    for c, l in zip(out["capped"], out["lifted"]):
        more = (c["recommended"] or 0) > (l["recommended"] or 0)
        ok &= more and c["advisory_names_cap"] and not l["advisory_names_cap"]
    for rec in out["capped"] + out["lifted"]:
        ok &= not rec["missing"] and rec["duration_s"] <= budget
    print(f"  -> {'PASS' if ok else 'FAIL'}: capped recommends more streams than lifted in every pair, the Advisory "
          f"names the cap only when capped, every section filled within the {budget} s budget")
    RESULTS["streams"] = {**out, "pass": ok}
    return ok


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    checks = {"mbs": check_mbs, "iperf": check_iperf, "streams": check_streams}
    names = list(checks) if which == "all" else [which]
    ok = True
    for n in names:
        print(f"== {n} ==")
        ok &= checks[n]()
    print(json.dumps(RESULTS))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
