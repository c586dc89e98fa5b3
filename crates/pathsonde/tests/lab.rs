//! The lab end to end, as root: a real path in namespaces, a measurement
//! against its truth with a loose bound, and nothing left behind — after
//! success, after SIGTERM, and after SIGKILL followed by `lab down --all`.
//! Skipped (with a message) when not root; CI runs as root.

mod judge;

use assert_cmd::cargo::CommandCargoExt;
use pathsonde_lab::exclusive::{is_root, lab_or_skip};
use pathsonde_lab::netns::of_lab as namespaces_of;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn pathsonde() -> Command {
    Command::cargo_bin("pathsonde").unwrap()
}

/// Lab tests share two cores and the namespace list: one at a time, across
/// every test binary of the workspace.
fn exclusive() -> pathsonde_lab::exclusive::LabLock {
    pathsonde_lab::exclusive::lab_lock().expect("taking the lab lock")
}

fn assert_nothing_left(lab: &str) {
    let left = namespaces_of(lab);
    assert!(left.is_empty(), "left behind: {left:?}");
}

fn lab_name(tag: &str) -> String {
    format!("{tag}{}", std::process::id())
}

/// A over the lab test's path (100 Mb/s less the Poisson load, IP layer).
fn lab_truth(load_pct: u32) -> f64 {
    (100e6 * (1.0 - f64::from(load_pct) / 100.0)) * 1500.0 / 1514.0
}

/// One blind `lab run` at 100 Mb/s with `load_pct` % Poisson cross traffic:
/// checks the report's shape, truth and settings, and judges the runs
/// ([`judge::judge`]: every run an estimate, median |error| ≤ 20 %).
fn lab_measurement(name: &str, load_pct: u32) -> Result<f64, String> {
    let cross = format!("poisson:{load_pct}%");
    let out = pathsonde()
        .args([
            "lab",
            "run",
            "--capacity",
            "100mbit",
            "--cross",
            &cross,
            "--runs",
            "2",
            "--settle",
            "1",
            "--json",
            "--name",
            name,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    // A run the hosts limited gives no estimate and is counted, not listed
    // (`summary.no_estimate`): an honest refusal on two shared cores (one
    // CI run at f61d8f8), measured again like a miss.
    let refused = v["summary"]["no_estimate"].as_u64().unwrap_or(0);
    if refused > 0 && runs.len() as u64 + refused == 2 {
        return Err(format!(
            "{refused} of 2 runs gave no estimate (host-limited)"
        ));
    }
    assert_eq!(runs.len(), 2);
    for r in runs {
        for key in ["estimate_bps", "truth_bps", "duration_s", "intrusiveness"] {
            assert!(r[key].as_f64().unwrap() > 0.0, "{key}: {r}");
        }
        assert!(r["probe_bytes"].as_u64().unwrap() > 0);
        assert!(r["overhead"].as_f64().unwrap() > 0.0);
        assert_eq!(r["method"], "fac2");
        // The server, on a thread in the receiver's namespace, counted its
        // probe socket's own drops around every train (docs/verdict.md).
        let ev = &r["host_evidence"]["figures"];
        assert!(ev["receiver_drops"].is_u64(), "{ev}");
        assert!(r["in_band"].is_boolean(), "{r}");
        // The truth is the cross traffic over the run's own window, and a
        // FAC² run lasts a fraction of a second: Poisson cross traffic of X
        // varies by √(X·s/T) over a window T (s the bits of one packet), so
        // the bound is four of those, and never under 3 Mb/s.
        let truth = r["truth_bps"].as_f64().unwrap();
        let window = r["window_s"].as_f64().unwrap().max(1e-3);
        let x = 100e6 * f64::from(load_pct) / 100.0;
        let tolerance = (4.0 * (x * 1514.0 * 8.0 / window).sqrt()).max(3e6);
        assert!(
            (truth - lab_truth(load_pct)).abs() < tolerance,
            "truth {truth} over {window} s, nominal {}, tolerance {tolerance}",
            lab_truth(load_pct)
        );
    }
    assert!(v["summary"]["p90_abs_error"].as_f64().is_some());
    assert!(v["summary"]["band_coverage"].as_f64().is_some());
    // Blind: the method was told no capacity, and the default probe ceiling
    // is abw's, not one derived from the lab's C.
    assert!(
        v["settings"]["known_capacity_bps"].is_null(),
        "{}",
        v["settings"]
    );
    assert_eq!(v["settings"]["max_rate_bps"], 1e9);
    let check = &v["truth_check"];
    assert!(
        check["relative_difference"].as_f64().unwrap().abs() < 0.05,
        "{check}"
    );
    assert_nothing_left(name);
    let cases: Vec<judge::Case> = runs
        .iter()
        .map(|r| judge::Case {
            estimate: r["estimate_bps"].as_f64(),
            truth: r["truth_bps"].as_f64().unwrap(),
        })
        .collect();
    judge::judge(&cases, 0.2)
}

/// Blind, at two loads (30 % and 70 %): the bar ([`judge::judge`], 20 %
/// median |error|) fails a method that answers C, 2·A, any constant or
/// nothing (`judge`'s own test proves it).  The bound is loose (a quiet
/// machine gives a few percent; docs/compare.md has the figures) and a miss
/// is measured once more on a fresh lab: the lab's sender, router, cross
/// traffic and receiver share two cores with whatever else the machine
/// runs, and one CI run on a busy machine read 18 %.
#[test]
fn a_blind_lab_measurement_is_near_the_truth_at_two_loads_and_leaves_nothing() {
    let Some(_x) = lab_or_skip() else { return };
    for load in [30, 70] {
        let first = lab_measurement(&lab_name(&format!("it{load}")), load);
        let Err(why) = first else { continue };
        eprintln!("{load} %: {why} on the first try; measuring again");
        let second = lab_measurement(&lab_name(&format!("iu{load}")), load);
        assert!(
            second.is_ok(),
            "{load} %: {why}, then {second:?} on a fresh lab"
        );
    }
}

/// One `demo --json`: checks its shape, truth and settings and cleanup;
/// as root, judges its one estimate (C, at +43 %, 2·A or nothing fail).
fn demo_once() -> Result<(), String> {
    let out = pathsonde().args(["demo", "--json"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Exit 9 is the honest refusal when the run's own evidence says the
    // hosts limited it (docs/verdict.md): on two shared cores one CI run's
    // debug-built sender paced 246 of 500 Mb/s.  It is a miss to measure
    // again, like a tail estimate; any other failure is a bug.
    if is_root() && out.status.code() == Some(9) {
        return Err(format!("no estimate (exit 9): {stderr}"));
    }
    assert!(out.status.success(), "stderr: {stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    if !is_root() {
        assert!(v["available_bps"].as_f64().unwrap() > 0.0);
        return Ok(());
    }
    let run = &v["runs"][0];
    // 300 Mb/s less 30 % Poisson, at the IP layer: about 208 Mb/s.
    let truth = run["truth_bps"].as_f64().unwrap();
    assert!((truth - 208e6).abs() < 10e6, "truth {truth}");
    assert!(v["settings"]["known_capacity_bps"].is_null());
    assert_eq!(v["lab"]["delay"], 10_000_000);
    let name = v["lab"]["name"].as_str().unwrap();
    assert_nothing_left(name);
    let case = judge::Case {
        estimate: run["estimate_bps"].as_f64(),
        truth,
    };
    judge::judge(&[case], 0.25).map(|_| ())
}

/// Blind, one FAC² run: a single run can sit in FAC²'s tail (one CI run
/// read 25.2 % off), so a miss is measured once more, as the lab test does;
/// a method that answers C, 2·A or nothing fails both.
#[test]
fn demo_runs_on_a_built_in_default() {
    // As root the demo builds a lab path; otherwise it measures loopback.
    let _x = exclusive();
    if let Err(why) = demo_once() {
        eprintln!("demo: {why} on the first try; measuring again");
        let second = demo_once();
        assert!(second.is_ok(), "{why}, then {second:?}");
    }
}

/// Starts a long lab run in the background and waits until its namespaces exist.
fn start_long_run(name: &str) -> std::process::Child {
    let child = pathsonde()
        .args([
            "lab",
            "run",
            "--capacity",
            "50mbit",
            "--cross",
            "cbr:10%",
            "--runs",
            "1000",
            "--settle",
            "0.2",
            "--name",
            name,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while namespaces_of(name).len() < 4 {
        assert!(Instant::now() < deadline, "lab did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let it get into the measurement.
    std::thread::sleep(Duration::from_millis(1500));
    child
}

#[test]
fn sigterm_tears_the_lab_down() {
    let Some(_x) = lab_or_skip() else { return };
    let name = lab_name("term");
    let mut child = start_long_run(&name);
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    assert_nothing_left(&name);
}

#[test]
fn after_sigkill_lab_down_all_removes_the_leftovers() {
    let Some(_x) = lab_or_skip() else { return };
    let name = lab_name("kill");
    let mut child = start_long_run(&name);
    child.kill().unwrap();
    child.wait().unwrap();
    // SIGKILL gives no chance to clean up: the namespaces are still there...
    assert!(!namespaces_of(&name).is_empty());
    let listed = pathsonde()
        .args(["lab", "list", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert!(v["labs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["name"] == name.as_str()));
    // ...until `lab down --all` removes them.
    let out = pathsonde().args(["lab", "down", "--all"]).output().unwrap();
    assert!(out.status.success());
    assert_nothing_left(&name);
    // No stray process either: the killed run was the only one holding them.
    let out = pathsonde().args(["lab", "down", &name]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "an absent lab is a usage error");
}

#[test]
fn a_bad_lab_spec_is_refused_before_anything_is_built() {
    let out = pathsonde()
        .args([
            "lab",
            "run",
            "--capacity",
            "100mbit",
            "--cross",
            "poisson:130%",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cross poisson:130%"));
    let out = pathsonde()
        .args(["lab", "run", "--mtu", "4000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// One `lab run --json` with `--max-rate 20G`; returns its first run.
fn lab_run_fast_sender(name: &str, capacity: &str) -> Value {
    let out = pathsonde()
        .args([
            "lab",
            "run",
            "--capacity",
            capacity,
            "--max-rate",
            "20G",
            "--runs",
            "1",
            "--settle",
            "0.2",
            "--json",
            "--name",
            name,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_nothing_left(name);
    v["runs"][0].clone()
}

#[test]
fn an_unshaped_path_is_host_limited_by_the_sender_and_a_200_mbit_path_is_not() {
    let Some(_x) = lab_or_skip() else { return };
    // 10 Gb/s tbf (the lab's maximum): the sender cannot pace that fast here.
    let r = lab_run_fast_sender(&lab_name("hlfast"), "10gbit");
    let estimate = r["estimate_bps"].as_f64().unwrap();
    assert!(r["available_is_host_limit"].as_bool().unwrap(), "{r}");
    let limits = r["host_limits"].as_array().unwrap();
    let pacing = limits
        .iter()
        .find(|l| l["host"] == "client" && l["resource"] == "pacing")
        .unwrap_or_else(|| panic!("no client pacing limit: {limits:?}"));
    assert_eq!(pacing["binds_result"], true);
    let limit = pacing["limit_bps"].as_f64().unwrap();
    // The answer is a lower bound the trains support: the median rate of
    // those the path carried untouched, less 6 % (docs/verdict.md), so at
    // most what the sender reached and well above nothing.  Which trains
    // were carried depends on how busy the cores are: beside a busy loop,
    // one run in eight bounded A at 653 Mb/s with the sender at 1.59 Gb/s.
    assert!(
        estimate <= limit && estimate >= 0.3 * limit && limit < 20e9 * 0.95,
        "estimate {estimate}, limit {limit}"
    );
    assert!(
        r["estimate_high_bps"].is_null(),
        "a lower bound has no top: {r}"
    );
    assert!(pacing["why"].as_str().unwrap().contains("client (sender)"));

    // Shaped to 200 Mb/s: the path, not the host, sets the result, although
    // the first train (20 G asked) showed the sender's pacing limit.
    let r = lab_run_fast_sender(&lab_name("hlslow"), "200mbit");
    let estimate = r["estimate_bps"].as_f64().unwrap();
    // A converged answer is near the path's 198 Mb/s; one that says it is
    // not sure (FAC²'s near trains on an idle link sometimes disagree: 3 of
    // 6 runs by hand at 61b94c8, one at 235 Mb/s with a band of 101-369)
    // must hold it in its band and stay within a factor of two.
    let (low, high) = (
        r["estimate_low_bps"].as_f64().unwrap(),
        r["estimate_high_bps"].as_f64().unwrap_or(f64::INFINITY),
    );
    if r["converged"] == true {
        assert!((estimate - 198e6).abs() < 30e6, "estimate {estimate}: {r}");
    } else {
        assert!(
            low <= 198e6 && 198e6 <= high && (99e6..396e6).contains(&estimate),
            "an unconverged estimate {estimate} whose band {low}..{high} misses 198 Mb/s: {r}"
        );
    }
    assert_eq!(r["available_is_host_limit"], false, "{r}");
    assert!(r["host_limits"].as_array().unwrap().is_empty(), "{r}");
    assert!(r["host_limited"].is_null(), "{r}");
}

/// Runs `lab run` at 300 Mb/s with 30 % Poisson cross traffic and returns the
/// runs' coalescing verdicts (detected, share of tiny gaps).
fn coalescing_on_lab(name: &str, threaded_napi: bool) -> Vec<(bool, f64)> {
    let mut args = vec![
        "lab",
        "run",
        "--capacity",
        "300mbit",
        "--cross",
        "poisson:30%",
        "--runs",
        "2",
        "--settle",
        "0.5",
        "--json",
        "--name",
        name,
    ];
    if threaded_napi {
        args.push("--threaded-napi");
    }
    let out = pathsonde().args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_nothing_left(name);
    v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let c = &r["coalescing"];
            (
                c["detected"].as_bool().unwrap(),
                c["share_tiny_gaps"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// Threaded NAPI makes the lab's receiver hand packets up in batches — a
/// stand-in for NIC interrupt coalescing (lab notes) — and the detector must
/// see it from the arrival stamps alone; the default veth mode stamps every
/// packet as it comes and must not be flagged.  How strongly the NAPI thread
/// batches depends on scheduling (pooled shares of 0.16–0.6 were seen), and a
/// busy machine bunches a few per-packet arrivals too (0.06–0.07 in one CI
/// run, 0.002–0.004 on a quiet machine), so the test asks for a clear
/// difference, not for the 50 % threshold, and measures a second pair of
/// labs when the first pair does not show it.
#[test]
fn coalescing_is_detected_on_lab_arrivals_only_when_the_receiver_batches() {
    let Some(_x) = lab_or_skip() else { return };
    let verdict = |tag: &str| -> Result<(), String> {
        let plain = coalescing_on_lab(&lab_name(&format!("n{tag}")), false);
        if plain
            .iter()
            .any(|(detected, share)| *detected || *share >= 0.2)
        {
            return Err(format!("per-packet receiver flagged: {plain:?}"));
        }
        let batched = coalescing_on_lab(&lab_name(&format!("c{tag}")), true);
        let most = batched.iter().map(|(_, s)| *s).fold(0.0, f64::max);
        let plain_most = plain.iter().map(|(_, s)| *s).fold(0.0, f64::max);
        if most >= 0.1 && most > 2.0 * plain_most {
            Ok(())
        } else {
            Err(format!(
                "batching not seen: threaded {batched:?}, per-packet {plain:?}"
            ))
        }
    };
    if let Err(first) = verdict("a") {
        eprintln!("first try: {first}; measuring again");
        if let Err(second) = verdict("b") {
            panic!("{first}; then, on fresh labs: {second}");
        }
    }
}
