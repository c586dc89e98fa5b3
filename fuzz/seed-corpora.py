#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ (committed).

Seeds are valid inputs of each decoder, hand-encoded here from the layouts
in docs/protocol.md (postcard: varints, zigzag for signed, length-prefixed
strings), so libFuzzer starts from messages that reach deep into each
decoder instead of spending its first minutes finding the magic bytes.
Run from anywhere; it overwrites only files named seed-*.
"""
import hashlib, json, os, struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)

def zz(n):
    return varint((n << 1) ^ (n >> 63))

def s(text):
    b = text.encode()
    return varint(len(b)) + b

def frame(body):
    return struct.pack(">I", len(body)) + body

def clock(src=1, res=1):
    return varint(src) + varint(res)

client = {
    "open": varint(0) + s("pathsonde 0.1.0"),
    "ping": varint(1) + varint(3) + zz(-123456789),
    "announce": varint(2) + varint(7) + varint(100) + varint(1472),
    "sent": varint(3) + varint(7) + varint(100) + varint(50),
    "close": varint(4),
    "hostreq": varint(5),
    "auth": varint(7) + s("alice") + bytes(range(32)) + bytes(range(32, 64)),
}
server = {
    "opened": varint(0) + varint(0x0102030405060708) + varint(5310) + clock() + varint(100000) + s("pathsonde 0.1.0"),
    "pong": varint(1) + varint(3) + zz(-5) + zz(1_700_000_000_000_000_000),
    "ready": varint(2) + varint(7),
    "report": varint(3) + varint(7) + varint(3)
        + b"".join(varint(i) + zz(1_700_000_000_000_000_000 + 12000 * i) for i in range(3))
        + varint(1) + varint(0) + clock(0, 1),
    "error": varint(4) + varint(1) + s("train of 200000 packets"),
    "host": varint(5) + s(json.dumps({"unavailable": "fake"})),
    "challenge": varint(8) + bytes(range(32)),
    "authenticated": varint(9) + bytes(range(64, 96)),
}

def probe(kind, session=0x0102030405060708, train=3, car=1, seq=9, send=-5, pad=0):
    return b"PSPR" + bytes([2, kind, 0, 0]) + struct.pack(">QIIIq", session, train, car, seq, send) + bytes(pad)

host_report = {
    "unavailable": json.dumps({"unavailable": "the server was started without a host report"}),
    "partial": json.dumps({"variant": "quick receiver", "kernel": {"release": "6.1.0"},
                           "cpu": {"logical_cpus": 2}, "sysctls": {"rmem_max_bytes": {"unavailable": "no /proc"}}}),
    "empty": "{}",
}

def cmsg(level, typ, data):
    # struct cmsghdr on x86_64: size_t len; int level; int type; then data, padded to 8.
    ln = 16 + len(data)
    body = struct.pack("<QiI", ln, level, typ) + data
    return body + bytes((-len(body)) % 8)

ts = struct.pack("<qqqqqq", 1_700_000_000, 123, 0, 0, 1_700_000_001, 5)
targets = {
    "handshake": {"client": b"PSONDE\x00C\x00\x02\x00\x00", "server-ok": b"PSONDE\x00S\x00\x02\x00\x00",
                  "server-busy": b"PSONDE\x00S\x00\x02\x02\x00"},
    "control_client": {k: frame(v) for k, v in client.items()},
    "control_server": {k: frame(v) for k, v in server.items()},
    "probe_header": {"probe": probe(0, pad=64), "echo": probe(1, train=0xFFFFFFFF, pad=28), "reply": probe(2)},
    "host_report_json": {k: v.encode() for k, v in host_report.items()},
    "traffic_spec": {k: b"\x01\x2c\x17" + v.encode() for k, v in {
        "cbr": "cbr:50M", "poisson": "poisson:30%:packet=1000", "mix": "mix:40%:flows=4",
        "icim": "icim:25%", "web": "web:20%:sources=100", "steps": "steps:0s=3G,15s=2G,35s=1G:kind=icim",
        "tcp": "tcp:2"}.items()},
    # SOL_SOCKET=1, SO_TIMESTAMPING=37 (SCM_TIMESTAMPING)
    "rx_cmsg": {"stamps": cmsg(1, 37, ts), "two": cmsg(1, 29, struct.pack("<qq", 1, 2)) + cmsg(1, 37, ts)},
    # SOL_SOCKET=1, SO_TIMESTAMPNS=35; SOL_IP=0, IP_RECVERR=11 (sock_extended_err:
    # errno EHOSTUNREACH=113, origin ICMP=2, type 11, then a sockaddr_in);
    # SOL_IPV6=41, IPV6_RECVERR=25 (origin ICMP6=3, type 3, sockaddr_in6)
    "err_cmsg": {
        "v4": cmsg(1, 35, struct.pack("<qq", 1_700_000_000, 5))
        + cmsg(0, 11, struct.pack("<IBBBBII", 113, 2, 11, 0, 0, 0, 0) + struct.pack("<H", 2) + b"\0\0" + bytes([10, 0, 2, 1]) + bytes(8)),
        "v6": cmsg(41, 25, struct.pack("<IBBBBII", 113, 3, 3, 0, 0, 0, 0) + struct.pack("<H", 10) + bytes(6) + bytes(range(16)) + bytes(4)),
        "payload": b"PSHP\0\0\0\x07\0\0\0\x63" + bytes(20),
    },
    "host_proc": {
        "meminfo": b"MemTotal:       16318412 kB\nMemFree:         1234567 kB\nCached:  100 kB\n",
        "cpuinfo": b"processor\t: 0\nmodel name\t: Some CPU @ 2.00GHz\ncpu MHz\t\t: 2000.000\nphysical id\t: 0\ncore id\t\t: 0\n\n",
        "features": b"Features for eth0:\nrx-checksumming: on\ngeneric-receive-offload: on\ntcp-segmentation-offload: off [fixed]\n",
        "coalesce": b"Coalesce parameters for eth0:\nAdaptive RX: off  TX: off\nrx-usecs: 50\nrx-frames: 0\n",
        "timestamping": b"Time stamping parameters for eth0:\nCapabilities:\n\thardware-receive\nPTP Hardware Clock: 0\nHardware Receive Filter Modes:\n\tall\n",
        "triple": b"4096\t131072\t6291456\n",
    },
    "key_file": {"one": b"alice 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n",
                 "two": b"# lab keys\nalice 00112233445566778899aabbccddeeff\nbob.lab ffeeddccbbaa99887766554433221100\n"},
    "allow_list": {"v4": bytes(16) + b"10.0.0.0/8,192.168.1.5", "v6": bytes(range(16)) + b"2001:db8::/32 ::1"},
}

# UDPSTP (RFC 9946, version 20) PDUs, from the layouts in
# shared/specs/udp-speed-test-protocol.md and docs/udpst-wire.md; the first
# of each is the loopback capture of the spec's section 12.
def udpst_trailer(mode=0, time=0, digest=bytes(32), key_id=0):
    return bytes([mode]) + struct.pack(">I", time) + digest + bytes([key_id, 0, 0, 0])

def udpst_setup(cmd=1, code=0, ver=20, idx=0, cnt=1, ident=0x3C94, bw=0, port=0, mods=1, **auth):
    return struct.pack(">HHBBHBBHHB", 0xACE1, ver, idx, cnt, ident, cmd, code, bw, port, mods) + udpst_trailer(**auth)

ROW0 = struct.pack(">7I", 0, 0, 0, 50000, 0, 0, 0x800004C6)
ROW250 = struct.pack(">7I", 100, 1222, 2, 1000, 1222, 5, 0)

def udpst_ta(cmd=1, code=0, rate=bytes(28), dur=5, sr=0xFFFF, algo=0, mods=0, owd=0, **auth):
    head = struct.pack(">HHBBHHHHBBHBBHHBBBB", 0xACE2, 20, cmd, code, 30, 90, 50, dur, 0, 0, sr,
                       owd, 10, 3, 10, 1, mods, algo, 0)
    return head + rate + struct.pack(">HHHB", 1000, 0, 0, 0) + udpst_trailer(**auth)

def udpst_load(action=0, seq=1, length=684, echo=(0, 0), send=(1795634991, 5), total=None):
    h = struct.pack(">HBBIHHIIIIH", 0xBEEF, action, 0, seq, length, 0, echo[0], echo[1], send[0], send[1], 45) + b"\0\0"
    return h + bytes((length if total is None else total) - 32)

def udpst_status(action=0, seq=2, rate=bytes(28), subseq=1, rtt_var=0xFFFFFFFF):
    sub = struct.pack(">IQIIIIIIIIIII", 1000, 1222000, 1000123, 3, 1, 2, 0, 4, 900, 999, 0xFFFFFFFF, 0, 1000)
    b = struct.pack(">HBBI", 0xFEED, action, 0, seq) + rate + struct.pack(">I", subseq) + sub
    b += struct.pack(">IIIiIIIIIIB3xIIIII3xB12xIIxBH16x", 1, 0, 0, -2, 0, 3, 20, 50, 1, rtt_var, 1,
                     50010, 50, 61100, 1795634991, 5, 0, 0, 0, 0, 0)
    assert len(b) == 204, len(b)
    return b

udpst_digest = bytes.fromhex("e941591b727050b01eeffa81d35ba93d78bb31f92343990d610dcb8be1312975")
targets.update({
    "udpst_setup": {
        "request": udpst_setup(),
        "response-ack": udpst_setup(cmd=2, code=1, port=36789),
        "response-bad-version": udpst_setup(cmd=2, code=2, ver=99),
        "request-auth": udpst_setup(ident=0xDD57, mode=1, time=1795634991, digest=udpst_digest, key_id=7),
        "request-multi-bw": udpst_setup(idx=3, cnt=4, bw=0x8000 | 500, mods=3),
    },
    "udpst_null": {
        "plain": struct.pack(">HHBBB", 0xDEAD, 20, 1, 0, 0) + udpst_trailer(),
        "auth": struct.pack(">HHBBB", 0xDEAD, 20, 1, 0, 0) + udpst_trailer(1, 1795634991, bytes(range(32)), 7),
    },
    "udpst_activation": {
        "request": udpst_ta(),
        "response-up": udpst_ta(code=1, rate=ROW0),
        "response-fixed-c": udpst_ta(cmd=2, code=1, rate=ROW250, sr=250, algo=1, mods=1, owd=1, dur=10),
        "request-auth": udpst_ta(mode=1, time=1795634992, digest=bytes(range(32)), key_id=7),
    },
    "udpst_load": {
        "first": udpst_load(),
        "truncated-read": udpst_load(total=32),
        "stop": udpst_load(action=2, seq=12345, length=52, echo=(1795634991, 7)),
        "full": udpst_load(seq=99, length=1222),
    },
    "udpst_status": {
        "upstream": udpst_status(rate=ROW250),
        "downstream": udpst_status(rtt_var=3),
        "stop": udpst_status(action=2, seq=200, subseq=5),
    },
})

for target, seeds in targets.items():
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, f"seed-{name}"), "wb") as f:
            f.write(data)
print(f"wrote seeds for {len(targets)} targets under {ROOT}")
