//! `pathsonde hops` without a lab: over loopback (one hop, the far end
//! answering port unreachable, unprivileged) the JSON and `--json-lines`
//! contracts hold, and bad input is one clear line with exit code 2.

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;
use std::process::Command;

fn pathsonde() -> Command {
    Command::cargo_bin("pathsonde").unwrap()
}

#[test]
fn loopback_gives_one_hop_that_is_the_far_end() {
    let out = pathsonde()
        .args([
            "hops",
            "127.0.0.1",
            "--trains",
            "3",
            "--train-gap",
            "0.1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["method"], "hops");
    assert_eq!(v["destination_ttl"], 1);
    let h = &v["hops"][0];
    assert_eq!(h["ttl"], 1);
    assert_eq!(h["address"], "127.0.0.1");
    assert!(h["rtt_s"].as_f64().unwrap() > 0.0);
    assert!(v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().contains("far end is not measured")));
    assert!(v["probe_bytes"].as_u64().unwrap() >= 33_600);
}

#[test]
fn json_lines_streams_a_train_event_per_train() {
    let out = pathsonde()
        .args([
            "hops",
            "127.0.0.1",
            "--trains",
            "3",
            "--train-gap",
            "0.1",
            "--json-lines",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    let trains = events.iter().filter(|e| e["type"] == "train").count();
    assert_eq!(trains, 3);
    assert_eq!(events.last().unwrap()["type"], "result");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for args in [
        vec!["hops", "127.0.0.1", "--trains", "1"],
        vec!["hops", "127.0.0.1:notaport"],
        vec!["hops", "127.0.0.1", "--train-gap", "-1"],
    ] {
        let out = pathsonde().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.trim().is_empty(), "{args:?}");
    }
    let out = pathsonde()
        .args(["hops", "127.0.0.1", "--trains", "99", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).expect("the error object");
    assert_eq!(v["error"]["kind"], "usage");
}
