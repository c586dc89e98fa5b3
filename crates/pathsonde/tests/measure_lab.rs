//! `pathsonde mbs`, `tcp` and `measure` on a lab path, as root (issue 5):
//! the MBS near the burst the tbf queue implies, TCP near the capacity,
//! and every section of `measure --json` filled.  Loose bounds: the machine
//! is shared; docs/measure.md has the tight figures and the script that
//! measures them (scripts/netest_checks.py).  Skipped when not root.

use assert_cmd::cargo::{cargo_bin, CommandCargoExt};
use pathsonde_lab::exclusive::lab_or_skip;
use serde_json::Value;
use std::process::Command;

/// A standing lab, taken down on drop (also when an assertion fails).
struct Standing(String);

impl Standing {
    fn up(tag: &str, args: &[&str]) -> Standing {
        let name = format!("i5{tag}{}", std::process::id() % 100_000);
        let out = Command::cargo_bin("pathsonde")
            .unwrap()
            .args(["lab", "up", "--name", &name])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "lab up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Standing(name)
    }
    /// Runs pathsonde in the sender namespace and parses its JSON.
    fn json(&self, args: &[&str]) -> Value {
        let out = Command::new("ip")
            .args(["netns", "exec", &format!("pathsonde-{}-snd", self.0)])
            .arg(cargo_bin("pathsonde"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Standing {
    fn drop(&mut self) {
        let _ = Command::cargo_bin("pathsonde")
            .unwrap()
            .args(["lab", "down", &self.0])
            .output();
        let left: Vec<String> = std::fs::read_dir("/var/run/netns")
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n.starts_with(&format!("pathsonde-{}-", self.0)))
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            left.is_empty() || std::thread::panicking(),
            "left behind: {left:?}"
        );
    }
}

const SERVER: &str = "198.18.2.2";

#[test]
fn mbs_follows_the_queue_limit_and_tcp_fills_the_path() {
    let Some(_lock) = lab_or_skip() else { return };
    let lab = Standing::up("t", &["--capacity", "200mbit", "--queue", "64KiB"]);
    let m = lab.json(&["mbs", SERVER, "--searches", "3", "--json"]);
    let mbs = m["mbs"]["summary"]["median"].as_f64().unwrap();
    let sender = m["mbs"]["sender_line_rate"].as_f64().unwrap() * 1514.0 / 1500.0;
    // docs/measure.md: B_max = (L + b) / (1 − C/R), whole 1514-byte frames.
    let implied = ((65_536.0 + 3_025.0) / (1.0 - 200e6 / sender) / 1514.0).floor() * 1500.0;
    let err = (mbs - implied).abs() / implied;
    assert!(
        err < 0.3,
        "MBS {mbs} vs implied {implied} ({:.0} %)",
        err * 100.0
    );
    // The line rate is the median receive rate of back-to-back bursts,
    // which a stalling host spreads: a clean-clone CI at e590ba8 read
    // 118 Mb/s here (the five before it today passed).  When only it is off, one
    // more `mbs` on the same lab must read it right.
    let line_of = |m: &Value| m["mbs"]["path_line_rate"].as_f64().unwrap();
    let mut line = line_of(&m);
    if !(150e6..230e6).contains(&line) {
        eprintln!("line rate {line}: measuring mbs once more");
        line = line_of(&lab.json(&["mbs", SERVER, "--searches", "3", "--json"]));
    }
    assert!((150e6..230e6).contains(&line), "line rate {line}");
    // The 200 Mb/s link drains slower than the sender bursts: the line
    // speed is the path's, and no host limit binds it.
    let binding = m["mbs"]["host_limits"]
        .as_array()
        .expect("host_limits in the JSON")
        .iter()
        .filter(|l| l["binds_result"] == true)
        .count();
    assert_eq!(binding, 0, "{}", m["mbs"]["host_limits"]);

    let t = lab.json(&["tcp", SERVER, "-t", "3s", "--json"]);
    let bps = t["throughput_bps"].as_f64().unwrap();
    // 200 Mb/s of L2 is 190 Mb/s of TCP payload; the host is shared.
    assert!((120e6..200e6).contains(&bps), "TCP {bps}");
    assert!(
        t["client"]["streams"][0]["tcp"]["snd_cwnd"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(
        t["server_side"]["streams"][0]["tcp"]["bytes_received"]
            .as_u64()
            .unwrap()
            > 0
    );
    let r = lab.json(&["tcp", SERVER, "-t", "2s", "-R", "-P", "2", "--json"]);
    assert!(r["throughput_bps"].as_f64().unwrap() > 100e6, "{r}");
    assert_eq!(r["server_side"]["streams"].as_array().unwrap().len(), 2);
}

#[test]
fn measure_fills_every_section_on_a_lab_path() {
    let Some(_lock) = lab_or_skip() else { return };
    let lab = Standing::up("s", &["--capacity", "200mbit", "--queue", "256KiB"]);
    let m = lab.json(&[
        "measure",
        SERVER,
        "--budget",
        "20s",
        "--max-rate",
        "400M",
        "--json",
    ]);
    for s in [
        "verbose",
        "general_statistics",
        "general",
        "udp",
        "tcp",
        "advisory",
    ] {
        assert!(!m[s].is_null(), "section {s} missing: {m}");
    }
    for (sec, key) in [
        ("general", "mbs"),
        ("general", "available"),
        ("udp", "single_stream_bps"),
        ("udp", "multi_stream"),
        ("udp", "burst_controlled"),
        ("tcp", "optimal_window_bytes"),
        ("tcp", "single_stream_optimal_window"),
        ("tcp", "full_duplex_check"),
        ("tcp", "streams"),
    ] {
        // A method that declined says why in the notes: show them.
        assert!(
            !m[sec][key].is_null(),
            "{sec}.{key} missing: {} (notes: {})",
            m[sec],
            m["notes"]
        );
    }
    // The budget is planned; a loaded machine may overrun it a little.
    let took = m["general_statistics"]["duration_s"].as_f64().unwrap();
    assert!(took < 26.0, "took {took} s of a 20 s budget");
}
