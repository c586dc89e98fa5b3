//! `lab run --method hops` as root: a chain of three routers (tight link 2
//! at 60 % Poisson, narrow link 3 idle, r1 silent), one blind run, and its
//! JSON must carry each link's truth from the chain's own counters and the
//! run's score; nothing may be left behind.  Skipped with a message when not
//! root; under CI that is a failure.  Bad chain plans are refused in one
//! line with exit 2 (no root needed), and Ctrl-C removes the chain.

use pathsonde_lab::exclusive::is_root;
use pathsonde_lab::netns::of_lab as namespaces_of;
use serde_json::Value;
use std::process::Command;

/// Ctrl-C in the middle of a run removes the whole chain (the namespaces
/// are in the lab's registry, which the signal thread empties) and exits
/// 128 + SIGINT.
#[test]
fn ctrl_c_removes_the_chain() {
    if !is_root() {
        pathsonde_lab::exclusive::cannot_run("the lab needs root");
        return;
    }
    let _lock = pathsonde_lab::exclusive::lab_lock().expect("taking the lab lock");
    let name = format!("hi{}", std::process::id() % 100_000);
    let mut child = Command::new(env!("CARGO_BIN_EXE_pathsonde"))
        .args(["lab", "run", "--method", "hops", "--hops", "3"])
        .args(["--tight-at", "2", "--narrow-at", "3", "--runs", "5"])
        .args(["--name", &name, "--no-save", "--settle", "0.2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starting pathsonde lab run");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // 5 nodes and the tight link's source and sink.
    while namespaces_of(&name).len() < 7 {
        if let Ok(Some(status)) = child.try_wait() {
            if std::env::var("CI").as_deref() != Ok("true") && status.code() == Some(10) {
                eprintln!("skipped: the lab cannot be built here");
                return;
            }
            panic!("lab run exited early: {status}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the chain did not come up"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().expect("waiting for lab run");
    assert_eq!(status.code(), Some(128 + libc::SIGINT));
    let left = namespaces_of(&name);
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn lab_run_method_hops_reports_per_link_truth_and_a_score() {
    if !is_root() {
        pathsonde_lab::exclusive::cannot_run("the lab needs root");
        return;
    }
    let _lock = pathsonde_lab::exclusive::lab_lock().expect("taking the lab lock");
    let name = format!("hr{}", std::process::id() % 100_000);
    let out = Command::new(env!("CARGO_BIN_EXE_pathsonde"))
        .args(["lab", "run", "--method", "hops", "--hops", "3"])
        .args(["--tight-at", "2", "--narrow-at", "3", "--silent", "1"])
        .args(["--runs", "1", "--name", &name, "--json", "--no-save"])
        .output()
        .expect("running pathsonde lab run");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    eprintln!("{stdout}\n{stderr}");
    let left = namespaces_of(&name);
    assert!(left.is_empty(), "left behind: {left:?}");
    if out.status.code() == Some(10) && std::env::var("CI").as_deref() != Ok("true") {
        eprintln!("skipped: the lab cannot be built here: {stderr}");
        return;
    }
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    let v: Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(v["method"], "hops");
    assert_eq!(v["plan"]["tight_at"], 2);
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{v}");
    let r = &runs[0];
    let truth = r["truth"].as_array().expect("truth");
    assert_eq!(truth.len(), 4, "{r}");
    // Links 1 and 4 unshaped; 2 is 100 Mb/s less about 60 of cross traffic,
    // 3 is 60 Mb/s idle (IP bytes of 500-byte packets: 97.3 and 58.4).
    assert!(truth[0]["capacity_l2_bps"].is_null() && truth[3]["capacity_l2_bps"].is_null());
    let mbps = |x: &Value| x.as_f64().expect("a rate") / 1e6;
    assert!(
        (mbps(&truth[1]["capacity_ip_bps"]) - 97.3).abs() < 0.5,
        "{r}"
    );
    let cross = mbps(&truth[1]["cross_l2_bps"]);
    assert!((50.0..70.0).contains(&cross), "cross {cross}");
    let a = mbps(&truth[1]["available_ip_bps"]);
    assert!((27.0..47.0).contains(&a), "A {a}");
    assert!(
        mbps(&truth[1]["qdisc_l2_bps"]) > 40.0,
        "the tbf's own counters: {r}"
    );
    assert_eq!(mbps(&truth[2]["cross_l2_bps"]), 0.0);
    assert_eq!(
        (r["true_tight"].as_u64(), r["true_narrow"].as_u64()),
        (Some(2), Some(3))
    );
    // The score is there and consistent with what the run named.
    assert!(r["tight_named"].is_boolean(), "{r}");
    assert!(["named", "not_told_apart", "wrong"].contains(&r["narrow"].as_str().unwrap()));
    assert_eq!(r["silent_reported"], serde_json::json!([1]));
    assert_eq!(r["silent_right"], true);
    assert!(r["probe_bytes"].as_u64().unwrap() > 33_600);
    assert!(r["elapsed_s"].as_f64().unwrap() < 30.0);
    assert_eq!(
        r["hops"]["method"], "hops",
        "the pathsonde hops JSON rides along"
    );
    let named = r["tight_named"].as_bool().unwrap();
    if let Some(e) = r["error"].as_f64() {
        let est = mbps(&r["available_bps"]);
        assert!((e - (est - a) / a).abs() < 1e-6, "{e} vs {est} and {a}");
    } else {
        assert!(!named || r["available_bps"].is_null());
    }
    let s = &v["summary"];
    assert_eq!(s["runs"], 1);
    assert_eq!(s["tight_named"], u64::from(named));
    assert_eq!(s["narrow_differs"], 1);
}

/// `--queue-probe --end-to-end` with a 60 kB queue on the tight link (link
/// 2, at 30 % Poisson): the run carries `hops --queue`'s bursts, scored
/// against the chain's short queue, and the end-to-end measurement against
/// the server on the receiver, scored against the tight link's truth.
#[test]
fn lab_run_method_hops_scores_the_bursts_and_the_end_to_end_run() {
    if !is_root() {
        pathsonde_lab::exclusive::cannot_run("the lab needs root");
        return;
    }
    let _lock = pathsonde_lab::exclusive::lab_lock().expect("taking the lab lock");
    let name = format!("hq{}", std::process::id() % 100_000);
    let out = Command::new(env!("CARGO_BIN_EXE_pathsonde"))
        .args(["lab", "run", "--method", "hops", "--hops", "3"])
        .args([
            "--tight-at",
            "2",
            "--cross",
            "poisson:30%",
            "--queue",
            "60kB",
        ])
        .args([
            "--queue-probe",
            "--end-to-end",
            "--runs",
            "1",
            "--name",
            &name,
        ])
        .args(["--json", "--no-save"])
        .output()
        .expect("running pathsonde lab run");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    eprintln!("{stdout}\n{stderr}");
    let left = namespaces_of(&name);
    assert!(left.is_empty(), "left behind: {left:?}");
    if out.status.code() == Some(10) && std::env::var("CI").as_deref() != Ok("true") {
        eprintln!("skipped: the lab cannot be built here: {stderr}");
        return;
    }
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    let v: Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(v["plan"]["queue_probe"], true);
    let r = &v["runs"][0];
    let q = &r["queue"];
    assert_eq!(q["true_short"], 2, "{r}");
    assert_eq!(q["truth_bytes"], 60_000 + 3028, "{r}");
    assert!(q["probe_bytes"].as_u64().unwrap() > 100_000, "{r}");
    assert_eq!(
        r["hops"]["queue"]["probe_bytes"], q["probe_bytes"],
        "the run's own JSON carries the bursts"
    );
    let first = q["first_overflow"].as_u64();
    assert_eq!(q["short_named"], first == Some(2), "{r}");
    if let (Some(p), Some(l)) = (q["mbs_passed"].as_u64(), q["mbs_lost"].as_u64()) {
        assert!(p < l, "{r}");
    }
    let s = &v["summary"]["queue"];
    assert_eq!(s["runs"], 1);
    assert_eq!(s["short_named"], u64::from(first == Some(2)));
    // End to end: the server answered and the default method measured —
    // or, honestly, gave no estimate because its own evidence says the host
    // limited it (a two-core machine's pacing; CI at a08af87 saw that once:
    // "the hosts limited the run … client pacing").
    let e = &r["end_to_end"];
    let mbps = |x: &Value| x.as_f64().expect("a rate") / 1e6;
    let t = mbps(&e["truth_available_bps"]);
    // 100 Mb/s less about 30 of cross traffic, in IP bytes of 1500.
    assert!((60.0..80.0).contains(&t), "{e}");
    if e["available_bps"].is_null() {
        let why = e["failed"].as_str().unwrap_or_default();
        assert!(why.contains("the hosts limited the run"), "{e}");
        assert_eq!(v["summary"]["end_to_end"]["measured"], 0);
        return;
    }
    let a = mbps(&e["available_bps"]);
    let err = e["error"].as_f64().expect("an error");
    assert!((err - (a - t) / t).abs() < 1e-6, "{e}");
    assert_eq!(r["hops"]["end_to_end"]["available_bps"], e["available_bps"]);
    assert_eq!(v["summary"]["end_to_end"]["measured"], 1);
}

/// Bad chain plans are refused before anything is built (no root needed):
/// one error line, exit 2, and under `--json` one error object.
#[test]
fn bad_chain_plans_exit_2_in_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["--hops", "3", "--tight-at", "5"], "--tight-at 5"),
        (&["--hops", "3", "--tight-at", "0"], "--tight-at 0"),
        (
            &["--hops", "3", "--tight-at", "2", "--narrow-at", "2"],
            "is the tight link",
        ),
        (
            &["--hops", "3", "--tight-at", "2", "--silent", "4"],
            "--silent 4",
        ),
        (&["--hops", "9", "--tight-at", "2"], "--hops 9"),
        (&["--tight-at", "2"], "needs --hops"),
        (
            &[
                "--hops",
                "3",
                "--tight-at",
                "2",
                "--narrow-at",
                "3",
                "--cross",
                "poisson:30%",
            ],
            "available",
        ),
        (
            &["--hops", "3", "--tight-at", "2", "--delay", "5ms"],
            "--delay",
        ),
        (
            &["--hops", "3", "--tight-at", "2", "--queue", "1kB"],
            "--queue 1000 B",
        ),
    ];
    for (args, want) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_pathsonde"))
            .args(["lab", "run", "--method", "hops", "--no-save"])
            .args(*args)
            .output()
            .expect("running pathsonde");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_pathsonde"))
        .args(["lab", "run", "--hops", "3", "--tight-at", "2"])
        .output()
        .expect("running pathsonde");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("go with --method hops"));
}
