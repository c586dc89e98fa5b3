//! Archived lab runs, as root: `lab run` keeps its result, every probe's
//! stamps and the bottleneck's truth series; `history`, `show`, `export`,
//! `plot` and `report --html` then work from the archive alone (the lab is
//! gone by then), and the report renders in headless Chromium.

mod common;

use assert_cmd::cargo::CommandCargoExt;
use pathsonde_lab::exclusive::lab_or_skip;
use serde_json::Value;
use std::process::{Command, Output};

fn ok(out: &Output) -> &Output {
    assert!(
        out.status.success(),
        "exit {:?}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&ok(out).stdout).unwrap()
}

#[test]
fn archived_lab_runs_are_listed_shown_exported_plotted_and_reported() {
    let Some(_lock) = lab_or_skip() else { return };
    let dir = std::env::temp_dir().join(format!("pathsonde-lab-archive-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let archive = dir.join("a.sqlite");
    let ps = || {
        let mut c = Command::cargo_bin("pathsonde").unwrap();
        c.env("PATHSONDE_ARCHIVE", &archive);
        c
    };
    let name = format!("i9ar{}", std::process::id());
    let printed = json(
        &ps()
            .args([
                "lab",
                "run",
                "--capacity",
                "100mbit",
                "--cross",
                "poisson:30%",
                "--runs",
                "2",
                "--settle",
                "0.5",
                "--json",
                "--name",
                &name,
            ])
            .output()
            .unwrap(),
    );
    let id = printed["archive"]["id"].as_i64().unwrap();
    let ids = id.to_string();
    let runs = printed["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);

    let h = json(
        &ps()
            .args(["history", "--json", "--kind", "lab-run"])
            .output()
            .unwrap(),
    );
    let listed = &h["runs"][0];
    assert_eq!(listed["id"], id);
    assert!(
        listed["target"].as_str().unwrap().contains(&name),
        "{listed}"
    );
    assert!(listed["raw"]["present"].as_bool().unwrap(), "{listed}");

    let shown = json(&ps().args(["show", &ids, "--json"]).output().unwrap());
    assert_eq!(shown["result"]["runs"], printed["runs"]);
    let text = String::from_utf8_lossy(&ok(&ps().args(["show", &ids]).output().unwrap()).stdout)
        .to_string();
    assert!(
        text.contains("--- runs ---") && text.contains("truth_bps"),
        "{text}"
    );

    // JSON export: both runs' observations, every packet with its stamps.
    let ex = json(
        &ps()
            .args(["export", &ids, "--format", "json"])
            .output()
            .unwrap(),
    );
    let raw_runs = ex["raw_data"]["runs"].as_array().unwrap();
    assert_eq!(raw_runs.len(), 2);
    for (r, rec) in raw_runs.iter().zip(runs) {
        let obs = r["observations"].as_array().unwrap();
        assert_eq!(obs.len() as u64, rec["trains"].as_u64().unwrap());
        let sent: u64 = obs
            .iter()
            .map(|o| o["packets"].as_array().unwrap().len() as u64)
            .sum();
        assert_eq!(sent, rec["probe_packets"].as_u64().unwrap());
    }
    assert!(ex["result"]["qdisc_series"].as_array().unwrap().len() > 5);
    // CSV export: one row per run with estimate and truth.
    let csv = String::from_utf8_lossy(
        &ok(&ps()
            .args(["export", &ids, "--format", "csv"])
            .output()
            .unwrap())
        .stdout,
    )
    .to_string();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for col in ["run", "estimate_bps", "truth_bps", "error"] {
        assert!(header.contains(&col), "{header:?}");
    }
    assert_eq!(lines.count(), 2);

    // Plots from the archive alone.
    let out_dir = dir.join("plots");
    let p = json(
        &ps()
            .args(["plot", &ids, "--out", out_dir.to_str().unwrap(), "--json"])
            .output()
            .unwrap(),
    );
    let files: Vec<&str> = p["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    for plot in ["estimate-vs-truth", "trace", "truth-series", "owd"] {
        for ext in ["png", "svg"] {
            let want = format!("run{id}-{plot}.{ext}");
            assert!(
                files.iter().any(|f| f.ends_with(&want)),
                "no {want} in {files:?}"
            );
        }
    }

    let page = dir.join("lab.html");
    let r = json(
        &ps()
            .args(["report", &ids, "--html", page.to_str().unwrap(), "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(r["plots"], 4);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("id=\"plot-estimate-vs-truth\"") && html.contains("id=\"plot-truth-series\"")
    );
    if let Some(browser) = common::chromium() {
        common::assert_report_renders(&browser, &page, 4);
    }

    // The same command streams one `run` event per run, then the result.
    let out = ps()
        .args([
            "lab",
            "run",
            "--capacity",
            "100mbit",
            "--runs",
            "1",
            "--settle",
            "0.2",
            "--json-lines",
            "--no-save",
            "--name",
            &name,
        ])
        .output()
        .unwrap();
    let ev: Vec<Value> = String::from_utf8_lossy(&ok(&out).stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<&str> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"start"), "{types:?}");
    assert_eq!(
        types.iter().filter(|t| **t == "run").count(),
        1,
        "{types:?}"
    );
    assert_eq!(types.last(), Some(&"result"), "{types:?}");
    assert!(!types.contains(&"saved"), "--no-save: {types:?}");
    let run = &ev.iter().find(|e| e["type"] == "run").unwrap()["data"];
    assert_eq!(run["run"], 0);
    assert!(run["truth_bps"].as_f64().unwrap() > 0.0);
    assert_eq!(
        ev.last().unwrap()["data"]["runs"][0]["estimate_bps"],
        run["estimate_bps"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
