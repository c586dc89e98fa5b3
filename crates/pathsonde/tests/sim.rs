//! `pathsonde sim`: reports, JSON, plots and bad input, end to end.

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn pathsonde() -> Command {
    Command::cargo_bin("pathsonde").unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pathsonde-sim-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

const SCENARIO: &str = r#"
name = "cli test"
seed = 3
duration = "50ms"
[receiver]
nic = { rx_abs_delay = "131.2us" }
[[link]]
rate = "2G"
delay = "1ms"
[[link]]
rate = "1G"
delay = "2ms"
cross = ["poisson:40%"]
[method]
name = "fac2"
max_rate = "2G"
"#;

#[test]
fn sim_run_reports_estimates_beside_the_truth_with_json_and_a_plot() {
    let dir = scratch("run");
    let scn = dir.join("s.toml");
    std::fs::write(&scn, SCENARIO).unwrap();
    let out = pathsonde()
        .args(["sim", "run"])
        .arg(&scn)
        .args(["--estimates", "1", "--json", "--plot"])
        .arg(dir.join("p"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v["runs"][0]["samples"][0];
    let truth = s["truth"].as_f64().unwrap();
    assert!((truth - 0.6e9).abs() < 0.06e9, "{s}");
    assert!(s["relative_error"].as_f64().unwrap().abs() < 0.2, "{s}");
    assert!(v["summary"]["median_abs_error"].is_number());
    assert!(dir.join("p.png").exists() && dir.join("p.svg").exists());

    let text = pathsonde()
        .args(["sim", "run"])
        .arg(&scn)
        .args(["--estimates", "1"])
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&text.stdout);
    for want in [
        "link 1 (tight)",
        "truth (tight link)",
        "median |error|",
        "interrupts",
    ] {
        assert!(t.contains(want), "missing {want}: {t}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sim_bad_input_exits_2_with_a_clear_message() {
    let dir = scratch("bad");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[[link]]\nrate = \"1G\"\nspeed = 3\n").unwrap();
    let out = pathsonde().args(["sim", "run"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("speed"));

    let good = dir.join("good.toml");
    std::fs::write(&good, SCENARIO).unwrap();
    let out = pathsonde()
        .args(["sim", "run"])
        .arg(&good)
        .args(["--method", "nonesuch", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "usage");

    let out = pathsonde()
        .args(["sim", "run", "/nonexistent/scenario.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sim_bench_reports_both_rates() {
    let out = pathsonde()
        .args(["sim", "bench", "--scale", "0.01", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["baseline"]["events_per_s"].as_f64().unwrap() > 0.0);
    assert!(v["engine"]["packet_events"].as_u64().unwrap() > 1000);
    assert!(v["engine_over_baseline"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_run_far_beyond_the_event_budget_is_refused_unless_forced() {
    let dir = scratch("budget");
    let scn = dir.join("huge.toml");
    // The first link's rate typed as 1e15 b/s instead of 1e9.
    let text = SCENARIO.replacen("rate = \"1G\"", "rate = \"1e15\"", 1);
    assert_ne!(text, SCENARIO, "the scenario names a 1G link");
    std::fs::write(&scn, text).unwrap();
    let out = pathsonde()
        .args(["sim", "run"])
        .arg(&scn)
        .args(["--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("--force") && message.contains("events"),
        "{message}"
    );
}
