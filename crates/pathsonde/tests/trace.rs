//! `pathsonde trace …` end to end: oracle files through analyze, model,
//! generate and plot; bad input refused with the usage exit code; a capture
//! over loopback to a real server process; and, as root, a lab capture
//! (the command takes the lab lock itself, so the test must not hold it).

use assert_cmd::cargo::CommandCargoExt;
use pathsonde_lab::exclusive::is_root;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod ports;
use ports::free_port;

fn pathsonde() -> Command {
    Command::cargo_bin("pathsonde").unwrap()
}

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pathsonde-trace-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn json_of(args: &[&str]) -> Value {
    let out = pathsonde().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn oracle_files_through_analyze_model_generate_and_plot() {
    let d = tmp("files");
    let q = d.join("q.pstrace");
    let truth = json_of(&["trace", "synth", "-o", q.to_str().unwrap(), "--json"]);
    let period = truth["truth"]["cycle_period_packets"].as_f64().unwrap();
    let a = json_of(&["trace", "analyze", q.to_str().unwrap(), "--json"]);
    let an = &a["analysis"];
    assert_eq!(an["regime"]["kind"], "queueing");
    let got = an["cycles"]["period_packets"].as_f64().unwrap();
    assert!((got - period).abs() / period < 0.05, "{got} vs {period}");
    let step = an["banding"]["step_us"].as_f64().unwrap();
    assert!((step - 1.4).abs() / 1.4 < 0.05, "step {step}");

    let m = d.join("q.model.json");
    let r = json_of(&["trace", "model", q.to_str().unwrap(), "-k", "500", "--json"]);
    assert!(r["fidelity"]["ks"].as_f64().unwrap() <= 0.05, "{r}");
    assert!(m.exists());
    let csv = d.join("g.csv");
    json_of(&[
        "trace",
        "generate",
        m.to_str().unwrap(),
        "-n",
        "40000",
        "-o",
        csv.to_str().unwrap(),
        "--json",
    ]);
    // The generated CSV is itself analysable (the CSV reader).
    let g = json_of(&["trace", "analyze", csv.to_str().unwrap(), "--json"]);
    assert_eq!(g["analysis"]["packets"], 40000);

    let plots = d.join("plots");
    let out = pathsonde()
        .args([
            "trace",
            "plot",
            q.to_str().unwrap(),
            "-o",
            plots.to_str().unwrap(),
            "--window",
            "300",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in ["trace", "distribution", "spectrum", "model"] {
        for ext in ["png", "svg"] {
            let p = plots.join(format!("q-{f}.{ext}"));
            assert!(
                std::fs::metadata(&p).unwrap().len() > 1000,
                "{}",
                p.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_input_is_refused_with_a_clear_error() {
    let d = tmp("bad");
    let junk = d.join("junk.pstrace");
    std::fs::write(&junk, b"PSTRACE\0\x01\x00\x28\x00garbage").unwrap();
    let notcsv = d.join("x.csv");
    std::fs::write(&notcsv, "latency\nfast\n").unwrap();
    let badmodel = d.join("m.json");
    std::fs::write(
        &badmodel,
        r#"{"format":"pathsonde-trace-model","version":1,"n":5}"#,
    )
    .unwrap();
    for args in [
        vec!["trace", "analyze", junk.to_str().unwrap(), "--json"],
        vec!["trace", "analyze", notcsv.to_str().unwrap(), "--json"],
        vec!["trace", "analyze", "/nonexistent/file", "--json"],
        vec!["trace", "generate", badmodel.to_str().unwrap(), "--json"],
    ] {
        let out = pathsonde().args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["error"]["message"].as_str().unwrap().len() > 5, "{v}");
    }
    let out = pathsonde()
        .args(["trace", "analyze", junk.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&d);
}

struct Serve(Child);
impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn capture_to_a_server_over_loopback() {
    let port = free_port();
    let _s = Serve(
        pathsonde()
            .args([
                "serve",
                "--no-udpst",
                "--bind",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let d = tmp("loop");
    let f = d.join("c.pstrace");
    let c = d.join("c.csv");
    let v = json_of(&[
        "trace",
        "capture",
        "--server",
        &format!("127.0.0.1:{port}"),
        "--rate",
        "100M",
        "--size",
        "1024",
        "--count",
        "5000",
        "-o",
        f.to_str().unwrap(),
        "--csv",
        c.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v["packets"], 5000);
    assert_eq!(v["absolute"], false);
    // Loose: a loaded shared host still sends at least half of 100 Mb/s.
    assert!(v["achieved_rate_bps"].as_f64().unwrap() > 50e6, "{v}");
    let a = json_of(&["trace", "analyze", f.to_str().unwrap(), "--json"]);
    assert!(a["analysis"]["received"].as_u64().unwrap() > 4000, "{a}");
    assert_eq!(a["trace"]["absolute"], false);
    let b = json_of(&["trace", "analyze", c.to_str().unwrap(), "--json"]);
    assert_eq!(b["analysis"]["packets"], 5000);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn lab_capture_is_analysable_and_leaves_nothing() {
    if !is_root() {
        pathsonde_lab::exclusive::cannot_run("the lab needs root");
        return;
    }
    let name = format!("t8it{}", std::process::id() % 100_000);
    let d = tmp("lab");
    let f = d.join("lab.pstrace");
    // `trace capture` takes the lab lock itself.
    let v = json_of(&[
        "trace",
        "capture",
        "--rate",
        "100M",
        "--size",
        "1024",
        "--count",
        "20000",
        "--capacity",
        "1gbit",
        "--name",
        &name,
        "-o",
        f.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v["absolute"], true);
    assert_eq!(v["packets"], 20000);
    assert!(v["lost"].as_u64().unwrap() < 1000, "{v}");
    let achieved = v["achieved_rate_bps"].as_f64().unwrap();
    assert!((achieved - 100e6).abs() < 20e6, "sent at {achieved}");
    let a = json_of(&["trace", "analyze", f.to_str().unwrap(), "--json"]);
    let dist = &a["analysis"]["distribution"];
    // One clock at both ends: one-way delays, positive and (loosely) small.
    let min = dist["min_us"].as_f64().unwrap();
    let p50 = dist["percentiles"][4][1].as_f64().unwrap();
    assert!(min > 0.0 && p50 < 2_000.0, "min {min} µs, median {p50} µs");
    let left: Vec<String> = std::fs::read_dir("/var/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(&format!("pathsonde-{name}-")))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&d);
}
