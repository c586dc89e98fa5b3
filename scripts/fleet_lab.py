#!/usr/bin/env python3
"""The lab fleet acceptance run of issue 30 (docs/fleet.md, "The lab fleet
acceptance run").

N hosts in network namespaces on one bridge (links shaped with tbf), one
throwaway PostgreSQL on a unix socket (scripts/ci-postgres.sh, shared by the
namespaces through the filesystem), a role per agent; in every namespace
`pathsonde serve` and `pathsonde agent --mesh FILE --name hN --rounds R` with
one mesh file where every host measures every other (`between = "all"`) with
the default method.  During the run PostgreSQL is stopped for --db-down
seconds and started again, and one agent is SIGKILLed while it holds a lease
and started again.  When the agents are done the database is checked:

- every slot of every test, from its first to its last, is a run or a skip
  exactly once, and every test has at least R slots;
- no two runs overlap on any server (stored start and duration);
- no run UUID twice; no half-written run (a mesh run without raw data and
  without a note, or without its mesh record); no lease left;
- every row committed before the database restart is still there;
- the spool directories hold no entry (the buffered results arrived).

    sudo python3 scripts/fleet_lab.py --hosts 6 --minutes 5 --out docs/fleet/data

Prints a summary, writes it as JSON (fleet_lab.json) beside the text and
JSON output of `pathsonde mesh` and its HTML heat map, and exits 1 when a
check fails.  Needs root (namespaces), iproute2 and Debian's postgresql
package (ci-postgres.sh installs it).  Namespaces are named
`pathsonde-flN-…` (.ci/run's sweep finds leftovers) and are removed, with
every process and the database, on any exit, Ctrl-C included.  Takes the
lab lock (/tmp/pathsonde-lab.lock) so it never shares the machine with a
lab experiment.
"""
import argparse
import fcntl
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCK = "/tmp/pathsonde-lab.lock"


def log(msg):
    print(f"[fleet_lab {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(*args, check=True, **kw):
    r = subprocess.run(list(args), capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


class Lab:
    """Everything this run made, so that teardown removes all of it."""

    def __init__(self, args):
        self.args = args
        self.tag = f"pathsonde-fl{os.getpid()}"
        self.bridge_ns = f"{self.tag}-br"
        self.names = [f"h{i}" for i in range(1, args.hosts + 1)]
        self.ns = {n: f"{self.tag}-{n}" for n in self.names}
        self.addr = {n: f"10.77.0.{i}" for i, n in enumerate(self.names, 1)}
        self.made_ns = []
        self.procs = {}  # name -> Popen
        self.work = tempfile.mkdtemp(prefix="pathsonde-fleetlab-")
        os.chmod(self.work, 0o755)
        self.pg_dir = os.path.join(self.work, "pg")
        self.sock = os.path.join(self.pg_dir, "sock")
        self.pg_bin = None
        self.pg_started = False

    # -- namespaces ------------------------------------------------------
    def add_ns(self, ns):
        sh("ip", "netns", "add", ns)
        self.made_ns.append(ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")

    def build_net(self):
        rate = self.args.rate
        self.add_ns(self.bridge_ns)
        b = self.bridge_ns
        sh("ip", "-n", b, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", b, "link", "set", "br0", "up")
        for i, n in enumerate(self.names, 1):
            ns = self.ns[n]
            self.add_ns(ns)
            port = f"vh{i}"
            sh("ip", "-n", b, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "-n", b, "link", "set", port, "master", "br0", "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.addr[n]}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            # Both directions of each host's link shaped: RATE, a 64 kB burst.
            for where, dev in ((ns, "eth0"), (b, port)):
                sh("tc", "-n", where, "qdisc", "add", "dev", dev, "root", "tbf",
                   "rate", rate, "burst", "64kb", "latency", "50ms")

    # -- PostgreSQL ------------------------------------------------------
    def pg_env(self):
        return dict(os.environ, PATHSONDE_PG_DIR=self.pg_dir)

    def start_pg(self):
        sh("bash", os.path.join(REPO, "scripts/ci-postgres.sh"), env=self.pg_env())
        self.pg_started = True
        # ci-postgres.sh picks a free port (the socket's name carries it).
        with open(os.path.join(self.pg_dir, "port")) as f:
            self.pg_port = f.read().strip()
        self.pg_bin = sorted(
            (os.path.join("/usr/lib/postgresql", v, "bin") for v in os.listdir("/usr/lib/postgresql")),
            key=lambda p: [int(x) for x in p.split("/")[-2].split(".") if x.isdigit()],
        )[-1]

    def as_pg_owner(self, *args):
        if os.geteuid() == 0:
            return sh("runuser", "-u", "postgres", "--", *args, cwd="/")
        return sh(*args)

    def pg_stop(self):
        self.as_pg_owner(f"{self.pg_bin}/pg_ctl", "-D", f"{self.pg_dir}/data", "-m", "fast", "-w", "stop")

    def pg_start(self):
        self.as_pg_owner(
            f"{self.pg_bin}/pg_ctl", "-D", f"{self.pg_dir}/data", "-l", f"{self.pg_dir}/server.log",
            "-w", "-t", "30", "-o", f"-k {self.sock} -p {self.pg_port} -c listen_addresses='' -c max_connections=200", "start")

    def psql(self, sql, user="postgres", db="fleet"):
        return sh(f"{self.pg_bin}/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", self.sock,
                  "-p", self.pg_port, "-U", user, "-d", db, "-tA", "-F", "\t", "-c", sql)

    def url(self, role):
        return f"postgresql://{role}@/fleet?host={self.sock}&port={self.pg_port}&connect_timeout=5"

    def setup_db(self):
        self.psql("CREATE DATABASE fleet OWNER pathsonde", db="postgres")
        sh(self.args.bin, "archive", "init", self.url("pathsonde"))
        for n in self.names:
            role = f"agent_{n}"
            self.psql(f"CREATE ROLE {role} LOGIN", db="postgres")
            # The statements of docs/fleet.md ("One role per agent").
            self.psql(
                f"GRANT USAGE ON SCHEMA public TO {role};"
                f"GRANT SELECT, INSERT, DELETE ON public.runs, public.raw TO {role};"
                f"GRANT SELECT ON public.schema_version TO {role};"
                f"GRANT USAGE ON SEQUENCE public.runs_id_seq TO {role};"
                f"GRANT SELECT, INSERT, UPDATE, DELETE ON public.leases TO {role};"
                f"GRANT SELECT, INSERT ON public.skips TO {role};"
                f"GRANT USAGE ON SEQUENCE public.skips_id_seq TO {role};",
                user="pathsonde")

    # -- processes -------------------------------------------------------
    def spawn(self, key, ns, argv):
        out = open(os.path.join(self.work, f"{key}.log"), "a")
        out.write(f"# {time.strftime('%H:%M:%S')} {' '.join(argv)}\n")
        out.flush()
        p = subprocess.Popen(["ip", "netns", "exec", ns] + argv, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.procs[key] = p
        return p

    def spool(self, n):
        return os.path.join(self.work, "spool", n)

    def start_agent(self, n, rounds):
        return self.spawn(f"agent-{n}", self.ns[n], [
            self.args.bin, "agent", "--mesh", self.mesh_file, "--name", n,
            "--archive", self.url(f"agent_{n}"), "--spool", self.spool(n),
            "--rounds", str(rounds)])

    def write_mesh(self):
        self.mesh_file = os.path.join(self.work, "mesh.toml")
        lines = ["# written by scripts/fleet_lab.py", "[defaults]",
                 f'interval = "{self.args.interval}s"', ""]
        for n in self.names:
            lines += ["[[host]]", f'name = "{n}"', f'address = "{self.addr[n]}"', ""]
        lines += ["[[test]]", 'name = "abw"', 'between = "all"', ""]
        with open(self.mesh_file, "w") as f:
            f.write("\n".join(lines))
        os.chmod(self.mesh_file, 0o644)

    def teardown(self):
        for key, p in self.procs.items():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        for ns in reversed(self.made_ns):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        if self.pg_started:
            subprocess.run(["bash", os.path.join(REPO, "scripts/ci-postgres.sh"), "--stop"],
                           env=self.pg_env(), capture_output=True)
        if self.args.keep_logs:
            log(f"logs kept in {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)


# -- the checks ----------------------------------------------------------
def rows(lab, sql):
    return [line.split("\t") for line in lab.psql(sql).splitlines() if line]


def committed(lab):
    """Every run and skip in the archive now: (table, id, run_uuid)."""
    r = rows(lab, "SELECT 'run', id, run_uuid FROM runs UNION ALL SELECT 'skip', id, run_uuid FROM skips")
    return {(t, int(i), u) for t, i, u in r}


def reason_kind(reason):
    for key, name in (("held by", "lease busy"), ("no lease:", "database unreachable"),
                      ("agent was busy", "agent busy"), ("no agent ran this slot", "agent down"),
                      ("measurement failed", "measurement failed")):
        if key in reason:
            return name
    return "other"


def check(lab, rounds, interval_ms, before, events, victim):
    failures = []
    mesh_runs = rows(lab, """
        SELECT id, run_uuid, agent, started_unix_ms, duration_s, raw_note IS NOT NULL,
               EXISTS (SELECT 1 FROM raw WHERE raw.run_id = runs.id),
               result_json::jsonb->'mesh'->>'test', result_json::jsonb->'mesh'->>'source',
               result_json::jsonb->'mesh'->>'destination', result_json::jsonb->'mesh'->>'scheduled_unix_ms',
               result_json::jsonb->'mesh'->>'lease_held', target
        FROM runs WHERE kind = 'mesh'""")
    skips = rows(lab, "SELECT run_uuid, test, source, destination, scheduled_unix_ms, reason FROM skips")
    others = int(lab.psql("SELECT count(*) FROM runs WHERE kind <> 'mesh'").strip())
    slots = {}  # test id -> [scheduled ms]
    half = []
    by_server = {}
    lease_not_held = 0
    for (rid, uuid, agent, start, dur, noted, has_raw, test, src, dst, sched, held, target) in mesh_runs:
        if not uuid or not src or not dst or not sched:
            half.append(f"run {rid}: no mesh record")
            continue
        if not has_raw and noted != "t":
            half.append(f"run {rid}: neither raw data nor a note")
        if agent != f"agent_{src}":
            failures.append(f"run {rid} of {src} written by role {agent}")
        tid = test if "/" in test else f"{test}/{src}->{dst}"
        slots.setdefault(tid, []).append(int(sched))
        if held == "false":
            lease_not_held += 1
        s = int(start)
        by_server.setdefault(dst, []).append((s, s + round(float(dur) * 1000), int(rid), src))
    reasons = {}
    for uuid, test, src, dst, sched, reason in skips:
        slots.setdefault(test, []).append(int(sched))
        k = reason_kind(reason)
        reasons[k] = reasons.get(k, 0) + 1
    # Every slot once, from each test's first to its last, at least `rounds`.
    expected_tests = len(lab.names) * (len(lab.names) - 1)
    if len(slots) != expected_tests:
        failures.append(f"{len(slots)} tests in the archive, expected {expected_tests}")
    dup_slots = missing_slots = short = 0
    for tid, ts in sorted(slots.items()):
        ts.sort()
        dup_slots += len(ts) - len(set(ts))
        u = sorted(set(ts))
        for a, b in zip(u, u[1:]):
            if (b - a) % interval_ms:
                failures.append(f"{tid}: slots {a} and {b} not on one grid")
            missing_slots += (b - a) // interval_ms - 1
        if len(u) < rounds:
            short += 1
            failures.append(f"{tid}: {len(u)} slots, expected at least {rounds}")
    if dup_slots:
        failures.append(f"{dup_slots} slot(s) recorded twice")
    if missing_slots:
        failures.append(f"{missing_slots} slot(s) neither a run nor a skip")
    # Overlaps on each server, from stored start and end.
    overlaps = []
    for dst, rs in by_server.items():
        rs.sort()
        for (s1, e1, i1, a1), (s2, e2, i2, a2) in zip(rs, rs[1:]):
            if s2 < e1:
                overlaps.append(f"server {dst}: run {i1} ({a1}) ends {e1}, run {i2} ({a2}) starts {s2}")
    failures += overlaps
    uuids = [r[1] for r in mesh_runs] + [s[0] for s in skips]
    dup_uuids = len(uuids) - len(set(uuids))
    if dup_uuids:
        failures.append(f"{dup_uuids} run UUID(s) twice")
    failures += half
    after = committed(lab)
    lost = sorted(before - after)
    if lost:
        failures.append(f"{len(lost)} row(s) committed before the database restart are gone: {lost[:5]}")
    # A killed agent's leases stay until they expire (docs/fleet.md,
    # "Leases"); any other lease left is a failure.
    leases = rows(lab, "SELECT resource, holder, taken_unix_ms, expires_unix_ms FROM leases")
    killed = events.get("kill_unix_ms", 0)
    stray = [x for x in leases if not (x[1] == victim and int(x[2]) <= killed)]
    if stray:
        failures.append(f"{len(stray)} lease(s) left besides the killed agent's: {stray}")
    # Rows recorded while the database was stopped went through the spool.
    down = (events.get("db_stop_unix_ms", 0), events.get("db_start_unix_ms", 0))
    via_spool = int(lab.psql(
        f"SELECT (SELECT count(*) FROM skips WHERE recorded_unix_ms BETWEEN {down[0]} AND {down[1]})"
        f" + (SELECT count(*) FROM runs WHERE started_unix_ms + duration_s * 1000 BETWEEN {down[0]} AND {down[1]})"
    ).strip())
    spooled = {}
    for n in lab.names:
        d = lab.spool(n)
        left = [f for f in os.listdir(d) if f.endswith((".json", ".tmp", ".rejected"))] if os.path.isdir(d) else []
        spooled[n] = len(left)
        if left:
            failures.append(f"spool of {n} still holds {len(left)} entr(ies): {left[:3]}")
    total = sum(len(set(v)) for v in slots.values())
    return {
        "tests": len(slots),
        "rounds_per_test": rounds,
        "slots": total,
        "slots_expected_at_least": expected_tests * rounds,
        "runs": len(mesh_runs),
        "skips": len(skips),
        "skips_by_reason": reasons,
        "other_runs": others,
        "slots_recorded_twice": dup_slots,
        "slots_missing": missing_slots,
        "overlaps": len(overlaps),
        "runs_per_server": {d: len(v) for d, v in sorted(by_server.items())},
        "runs_lease_not_held": lease_not_held,
        "duplicate_run_uuids": dup_uuids,
        "half_written_runs": len(half),
        "rows_before_db_restart": len(before),
        "rows_lost": len(lost),
        "leases_left_by_killed_agent": len(leases) - len(stray),
        "leases_left_other": len(stray),
        "rows_recorded_while_db_down_arrived": via_spool,
        "spool_entries_left": spooled,
    }, failures


def wait_lease(lab, holder, limit):
    """Waits (up to `limit` s) until `holder` holds a lease: the moment to kill it."""
    end = time.time() + limit
    while time.time() < end:
        n = lab.psql(f"SELECT count(*) FROM leases WHERE holder = '{holder}'").strip()
        if n != "0":
            return True
        time.sleep(0.01)
    return False


def run(lab):
    a = lab.args
    interval_ms = a.interval * 1000
    rounds = int(a.minutes * 60 // a.interval)
    log(f"{a.hosts} hosts in namespaces {lab.tag}-*, links {a.rate}; work dir {lab.work}")
    lab.build_net()
    lab.start_pg()
    lab.setup_db()
    lab.write_mesh()
    for n in lab.names:
        lab.spawn(f"serve-{n}", lab.ns[n], [a.bin, "serve", "--bind", lab.addr[n]])
    time.sleep(1.0)
    for n in lab.names:
        if lab.procs[f"serve-{n}"].poll() is not None:
            raise RuntimeError(f"serve on {n} exited; see {lab.work}/serve-{n}.log")
    t0 = time.time()
    t_end = t0 + rounds * a.interval
    for n in lab.names:
        lab.start_agent(n, rounds)
    log(f"{len(lab.names)} agents started, {rounds} slot(s) of each of "
        f"{len(lab.names) * (len(lab.names) - 1)} tests every {a.interval} s")
    events = {"t0_unix_ms": int(t0 * 1000)}
    before = set()
    victim = lab.names[min(2, len(lab.names) - 1)]
    plan = sorted([("db", a.db_at * a.minutes * 60), ("kill", a.kill_at * a.minutes * 60)], key=lambda x: x[1])
    for what, at in plan:
        time.sleep(max(0.0, t0 + at - time.time()))
        if what == "db":
            before = committed(lab)
            log(f"{len(before)} row(s) committed; stopping PostgreSQL for {a.db_down} s")
            events["db_stop_unix_ms"] = int(time.time() * 1000)
            lab.pg_stop()
            time.sleep(a.db_down)
            lab.pg_start()
            events["db_start_unix_ms"] = int(time.time() * 1000)
            log("PostgreSQL is back")
        else:
            held = wait_lease(lab, victim, 2 * a.interval)
            lab.procs[f"agent-{victim}"].send_signal(signal.SIGKILL)
            lab.procs[f"agent-{victim}"].wait()
            events["kill_unix_ms"] = int(time.time() * 1000)
            events["killed_holding_lease"] = held
            log(f"SIGKILLed agent {victim} ({'holding a lease' if held else 'between tests'})")
            time.sleep(a.kill_down)
            left = max(1, math.ceil((t_end - time.time()) / a.interval))
            lab.start_agent(victim, left)
            events["restart_unix_ms"] = int(time.time() * 1000)
            events["restart_rounds"] = left
            log(f"agent {victim} started again for {left} round(s)")
    if not before:
        before = committed(lab)
    deadline = t_end + 2 * a.interval + 60
    for n in lab.names:
        p = lab.procs[f"agent-{n}"]
        try:
            rc = p.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"agent {n} still running {deadline - t0:.0f} s after the start")
        if rc != 0:
            raise RuntimeError(f"agent {n} exited {rc}; see {lab.work}/agent-{n}.log")
    events["agents_done_unix_ms"] = int(time.time() * 1000)
    log(f"agents done after {time.time() - t0:.0f} s; checking the archive")
    for n in lab.names:
        lab.procs[f"serve-{n}"].terminate()
    summary, failures = check(lab, rounds, interval_ms, before, events, victim)
    os.makedirs(a.out, exist_ok=True)
    reader = lab.url("pathsonde")
    mesh_txt = sh(a.bin, "mesh", "--archive", reader, "--html", os.path.join(a.out, "fleet_lab_mesh.html"))
    with open(os.path.join(a.out, "fleet_lab_mesh.txt"), "w") as f:
        f.write(mesh_txt)
    mesh_json = json.loads(sh(a.bin, "mesh", "--archive", reader, "--json"))
    cells = sum(1 for p in mesh_json.get("pairs", []) if p.get("run_id") is not None)
    summary["matrix_cells_with_a_run"] = cells
    head = sh("git", "-C", REPO, "rev-parse", "--short", "HEAD").strip()
    version = sh(a.bin, "--version").strip()
    result = {
        "command": "sudo python3 scripts/fleet_lab.py " + " ".join(sys.argv[1:]),
        "commit": head, "pathsonde": version,
        "hosts": a.hosts, "minutes": a.minutes, "interval_s": a.interval, "rate": a.rate,
        "method": "the mesh default (fac2)", "db_down_s": a.db_down, "killed_agent": victim,
        "events": events, "summary": summary, "failures": failures, "passed": not failures,
    }
    with open(os.path.join(a.out, "fleet_lab_agents.log"), "w") as out:
        for n in lab.names:
            with open(os.path.join(lab.work, f"agent-{n}.log")) as f:
                out.write(f.read().replace(lab.work, "WORK"))
    with open(os.path.join(a.out, "fleet_lab.json"), "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
        f.write("\n")
    print(mesh_txt)
    print(json.dumps(summary, indent=2, sort_keys=True))
    for line in failures:
        print(f"FAIL: {line}")
    log("PASS" if not failures else f"{len(failures)} check(s) failed")
    return 0 if not failures else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=6)
    p.add_argument("--minutes", type=float, default=5)
    p.add_argument("--interval", type=int, default=30, help="seconds between a test's slots")
    p.add_argument("--rate", default="100mbit", help="tbf rate of every host's link, both ways")
    p.add_argument("--db-down", type=float, default=20, help="seconds PostgreSQL stays stopped")
    p.add_argument("--db-at", type=float, default=0.3, help="when to stop it, fraction of the run")
    p.add_argument("--kill-at", type=float, default=0.6, help="when to SIGKILL an agent, fraction")
    p.add_argument("--kill-down", type=float, default=5, help="seconds before it starts again")
    p.add_argument("--bin", default=os.path.join(REPO, "target/release/pathsonde"))
    p.add_argument("--out", default=os.path.join(REPO, "docs/fleet/data"))
    p.add_argument("--keep-logs", action="store_true", help="keep the work directory (logs, spools)")
    p.add_argument("--lock-wait", type=float, default=600, help="seconds to wait for the lab lock")
    a = p.parse_args()
    a.bin = os.path.abspath(a.bin)
    a.out = os.path.abspath(a.out)
    if os.geteuid() != 0:
        sys.exit("fleet_lab: needs root (network namespaces)")
    if a.hosts < 2:
        sys.exit("fleet_lab: --hosts must be at least 2")
    lock = open(LOCK, "a")
    end = time.time() + a.lock_wait
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.time() > end:
                sys.exit(f"fleet_lab: the lab lock {LOCK} is busy")
            time.sleep(1)
    lab = Lab(a)

    def stop(sig, _frame):
        raise KeyboardInterrupt(f"signal {sig}")

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    try:
        rc = run(lab)
    except KeyboardInterrupt:
        log("interrupted: tearing down")
        rc = 130
    except Exception as e:  # noqa: BLE001 - reported, then torn down
        log(f"error: {e}")
        rc = 1
    finally:
        lab.teardown()
    sys.exit(rc)


if __name__ == "__main__":
    main()
