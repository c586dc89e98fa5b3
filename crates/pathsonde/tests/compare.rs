//! `pathsonde compare` end to end, as root: a tiny sweep (two methods, one
//! load, one run each) on a real lab path, checked for its table, its JSON,
//! its figures and for leaving nothing behind.  Loose bounds: the machine is
//! shared.  Skipped (with a message) when not root.

mod judge;

use assert_cmd::cargo::CommandCargoExt;
use pathsonde_lab::exclusive::lab_or_skip;
use pathsonde_lab::netns::of_lab as namespaces_of;
use serde_json::Value;
use std::os::fd::AsRawFd;
use std::process::Command;

#[test]
fn a_tiny_comparison_writes_its_table_json_and_figures() {
    let Some(lock) = lab_or_skip() else { return };
    // `compare` takes the lab lock itself; hand it ours (an inherited
    // descriptor of the locked file) so that it does not wait for us.
    // SAFETY: fcntl on a descriptor the guard keeps open.
    unsafe { libc::fcntl(lock.as_raw_fd(), libc::F_SETFD, 0) };
    let methods: Vec<&str> = pathsonde_core::methods::registry::MethodName::ALL
        .iter()
        .map(|m| m.as_str())
        .take(2)
        .collect();
    let name = format!("c6b{}", std::process::id());
    let out_dir = std::env::temp_dir().join(format!("pathsonde-compare-{name}"));
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args([
            "compare",
            "--capacity",
            "100mbit",
            "--cross",
            "poisson",
            "--loads",
            "30",
            "--runs",
            "1",
            "--settle",
            "1",
            "--tool-settle",
            "0.2",
            "--methods",
            &methods.join(","),
            "--name",
            &name,
            "--json",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(namespaces_of(&name).is_empty(), "left behind");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), methods.len(), "{}", v["rows"]);
    for (row, m) in rows.iter().zip(&methods) {
        assert_eq!(row["method"], *m);
        assert_eq!(row["load"], 30.0);
        assert_eq!(row["kind"], "poisson");
        // Truth: 100 Mb/s less 30 % Poisson, IP layer: about 69 Mb/s.
        if row["runs"] == 1 {
            let truth = row["truth_mean_bps"].as_f64().unwrap();
            assert!((truth - 69.4e6).abs() < 4e6, "truth {truth}");
            for key in [
                "estimate_mean_bps",
                "median_abs_error",
                "time_mean_s",
                "probe_bytes_mean",
                "probe_packets_mean",
                "intrusiveness",
                "overhead",
            ] {
                assert!(row[key].as_f64().unwrap() >= 0.0, "{key}: {row}");
            }
            // One run: no spread to report.
            assert!(row["estimate_std_bps"].is_null());
        } else {
            assert_eq!(row["failed"], 1, "{row}");
        }
    }
    // FAC² is the reference: blind, it must answer near A, not C (+43 %),
    // 2·A or nothing (a constant is caught by tests/lab.rs's two loads).
    // One run on a busy machine can sit in its tail, so the bound is loose.
    assert!(
        v["settings"]["known_capacity_bps"].is_null(),
        "{}",
        v["settings"]
    );
    let fac2 = rows.iter().find(|r| r["method"] == "fac2").unwrap();
    assert_eq!(fac2["runs"], 1, "{fac2}");
    let case = judge::Case {
        estimate: fac2["estimate_mean_bps"].as_f64(),
        truth: fac2["truth_mean_bps"].as_f64().unwrap(),
    };
    judge::judge(&[case], 0.3).unwrap();
    // Every row says whether its band held the truth and what the probes
    // cost the other traffic.
    for row in rows.iter().filter(|r| r["runs"] == 1) {
        let cov = row["band_coverage"].as_f64().unwrap();
        assert!(cov == 0.0 || cov == 1.0, "{row}");
        assert!(row["drops_caused_median"].as_f64().unwrap() >= 0.0, "{row}");
    }
    // Each run sits beside its truth, with the qdisc's view where it has one.
    for r in v["runs"].as_array().unwrap() {
        assert!(r["window_end_s"].as_f64() >= r["window_start_s"].as_f64());
        assert!(r["truth_bps"].as_f64().unwrap() > 0.0);
    }
    let phase = &v["phases"][0];
    assert_eq!(phase["cross"], "poisson:30%");
    assert!(!phase["truth_series"].as_array().unwrap().is_empty());
    // The files: table, markdown, JSON and both figures in both formats.
    for f in [
        "compare.txt",
        "compare.md",
        "compare.json",
        "fig3-estimate-vs-actual-poisson.png",
        "fig3-estimate-vs-actual-poisson.svg",
        "fig4-estimates-over-time-poisson.png",
        "fig4-estimates-over-time-poisson.svg",
    ] {
        let p = out_dir.join(f);
        let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{} missing or empty", p.display());
    }
    let png = std::fs::read(out_dir.join("fig3-estimate-vs-actual-poisson.png")).unwrap();
    assert_eq!(&png[..4], b"\x89PNG");
    let svg =
        std::fs::read_to_string(out_dir.join("fig4-estimates-over-time-poisson.svg")).unwrap();
    assert!(svg.contains("<svg"));
    let table = std::fs::read_to_string(out_dir.join("compare.txt")).unwrap();
    for m in &methods {
        assert!(table.contains(m), "{table}");
    }
    assert!(table.contains("med|e|"), "{table}");
    assert!(
        table.contains("C?") && table.contains("band") && table.contains("drops"),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn bad_compare_options_are_refused_before_anything_is_built() {
    for args in [
        vec!["compare", "--methods", "nope"],
        vec!["compare", "--loads", "120"],
        vec!["compare", "--cross", "warp"],
        vec!["compare", "--runs", "0"],
        // `hops` and the chain's flags need a chain; a chain takes no
        // delay line or capacity test, and its tight A must stay below
        // the narrow link at every load.
        vec!["compare", "--methods", "hops"],
        vec!["compare", "--tight-at", "2"],
        vec!["compare", "--ipv6"],
        vec!["compare", "--hops", "2"],
        vec!["compare", "--hops", "2", "--tight-at", "4"],
        vec![
            "compare",
            "--hops",
            "2",
            "--tight-at",
            "2",
            "--delay",
            "10ms",
        ],
        vec![
            "compare",
            "--hops",
            "2",
            "--tight-at",
            "2",
            "--methods",
            "capacity",
        ],
        vec![
            "compare",
            "--hops",
            "2",
            "--tight-at",
            "2",
            "--narrow",
            "50mbit",
        ],
        vec![
            "compare",
            "--hops",
            "2",
            "--tight-at",
            "2",
            "--narrow-at",
            "1",
            "--loads",
            "10",
        ],
    ] {
        let out = Command::cargo_bin("pathsonde")
            .unwrap()
            .args(&args)
            .args(["--out", "/tmp/pathsonde-compare-never"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("pathsonde:"), "{args:?}: {err}");
    }
    assert!(!std::path::Path::new("/tmp/pathsonde-compare-never").exists());
}

#[test]
fn every_method_name_is_accepted_and_all_only_where_it_makes_sense() {
    // `abw --method all` is refused (one method per measurement), with a
    // usage error that points to `lab run`; an unknown name lists the known.
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["abw", "127.0.0.1", "--port", "9", "--method", "all"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("lab run"));
    // `capacity` is the lab's and compare's name for RFC 9097's test: on a
    // real path it is `pathsonde capacity`, and abw says so.
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["abw", "127.0.0.1", "--port", "9", "--method", "capacity"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pathsonde capacity"));
    // Its flags go with it only.
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["lab", "run", "--method", "fac2", "-t", "5s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--method capacity"));
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["abw", "127.0.0.1", "--method", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for name in pathsonde_core::methods::registry::MethodName::ALL.map(|m| m.as_str()) {
        assert!(err.contains(name), "{err}");
        // Every registry name gets past argument parsing: with nothing
        // listening on port 9 the failure is the connection, not the name.
        let out = Command::cargo_bin("pathsonde")
            .unwrap()
            .args([
                "abw",
                "127.0.0.1",
                "--port",
                "9",
                "--timeout",
                "1",
                "--method",
                name,
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `compare --hops`: the sweep on a chain of routers, `hops` beside an
/// end-to-end method, its row saying whether it found the tight link's
/// hop, and nothing left behind.  The tight link is also the narrow one:
/// an idle narrow link on the sender's own interface or after the tight
/// link makes FAC² read far off (docs/compare.md, "On a chain"), and this
/// test is about the sweep, not that.
#[test]
fn a_comparison_on_a_chain_scores_the_hop_hops_names() {
    let Some(lock) = lab_or_skip() else { return };
    // SAFETY: fcntl on a descriptor the guard keeps open.
    unsafe { libc::fcntl(lock.as_raw_fd(), libc::F_SETFD, 0) };
    let name = format!("cc{}", std::process::id() % 100_000);
    let out_dir = std::env::temp_dir().join(format!("pathsonde-compare-{name}"));
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args([
            "compare",
            "--hops",
            "2",
            "--tight-at",
            "2",
            "--loads",
            "60",
            "--runs",
            "2",
            "--settle",
            "1",
            "--tool-settle",
            "0.2",
            "--methods",
            "hops,fac2",
            "--name",
            &name,
            "--json",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(namespaces_of(&name).is_empty(), "left behind");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["chain"]["routers"], 2, "{}", v["chain"]);
    assert_eq!(v["chain"]["cross"], "poisson:60%");
    let rows = v["rows"].as_array().unwrap();
    let hops = rows.iter().find(|r| r["method"] == "hops").unwrap();
    let fac2 = rows.iter().find(|r| r["method"] == "fac2").unwrap();
    // The hop column counts the runs that named link 2 out of every try;
    // it must agree with the runs themselves and have found it at least once.
    let runs = v["runs"].as_array().unwrap();
    let found = runs
        .iter()
        .filter(|r| r["method"] == "hops" && r["hop_found"] == true)
        .count();
    assert_eq!(hops["hop_found"].as_u64(), Some(found as u64), "{hops}");
    assert!(found >= 1, "hops found the tight link in no run: {hops}");
    let tries = hops["runs"].as_u64().unwrap() + hops["failed"].as_u64().unwrap();
    assert_eq!(tries, 2, "{hops}");
    // The narrow link is the tight one: nothing to tell apart.
    assert!(hops.get("narrow_differs").is_none(), "{hops}");
    assert!(runs.iter().all(|r| r.get("narrow_found").is_none()));
    // hops's tight-link reading beside the tight link's own A (100 Mb/s less
    // 60 % for its 500-byte load packets: about 38 Mb/s), not its C.
    for r in runs.iter().filter(|r| r["method"] == "hops") {
        let t = r["truth_bps"].as_f64().unwrap();
        assert!((t - 38e6).abs() < 6e6, "truth {t}");
        assert!(r["in_band"].is_null(), "{r}");
    }
    // The end-to-end method has no hop column, and reads the path's A.
    assert!(fac2.get("hop_found").is_none(), "{fac2}");
    assert_eq!(fac2["runs"], 2, "{fac2}");
    let cases: Vec<judge::Case> = runs
        .iter()
        .filter(|r| r["method"] == "fac2")
        .map(|r| judge::Case {
            estimate: r["estimate_bps"].as_f64(),
            truth: r["truth_bps"].as_f64().unwrap(),
        })
        .collect();
    judge::judge(&cases, 0.3).unwrap();
    let table = std::fs::read_to_string(out_dir.join("compare.txt")).unwrap();
    assert!(
        table.contains("chain of 2 routers") && table.contains("hop"),
        "{table}"
    );
    let md = std::fs::read_to_string(out_dir.join("compare.md")).unwrap();
    assert!(md.contains("hop found"), "{md}");
    let _ = std::fs::remove_dir_all(&out_dir);
}
