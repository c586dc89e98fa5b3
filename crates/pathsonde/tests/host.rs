//! `pathsonde host`: every documented JSON key present (value or reason),
//! sane numbers, and the text report's sections.

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

fn run(args: &[&str]) -> String {
    let start = Instant::now();
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    // A loose hang guard only (the command aims at under 10 s).
    assert!(start.elapsed() < Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The number at `path`, or None if the field carries `{"unavailable": why}`.
fn num(v: &Value, path: &str) -> Option<f64> {
    let f = v.pointer(path).unwrap_or_else(|| panic!("missing {path}"));
    if let Some(why) = f.get("unavailable") {
        assert!(
            why.as_str().is_some_and(|s| !s.is_empty()),
            "{path}: empty reason"
        );
        return None;
    }
    Some(
        f.as_f64()
            .unwrap_or_else(|| panic!("{path} not a number: {f}")),
    )
}

fn present(v: &Value, path: &str) {
    let f = v.pointer(path).unwrap_or_else(|| panic!("missing {path}"));
    assert!(!f.is_null(), "{path} is null");
}

#[test]
fn json_has_every_documented_key() {
    let v: Value = serde_json::from_str(&run(&["host", "--json"])).unwrap();
    for p in [
        "/kernel/release",
        "/kernel/version",
        "/kernel/machine",
        "/kernel/sysname",
        "/kernel/hostname",
        "/cpu/model",
        "/cpu/logical_cpus",
        "/cpu/physical_cores",
        "/cpu/cpuinfo_frequency_hz",
        "/cpu/cpufreq",
        "/memory/total_bytes",
        "/memory/available_bytes",
        "/memory/memcpy_min_bps",
        "/memory/memcpy_max_bps",
        "/memory/memcpy_block_bytes",
        "/memory/memcpy_repeats",
        "/timing/clock",
        "/timing/clocksource",
        "/timing/clock_read_ns",
        "/timing/clock_getres_ns",
        "/timing/clock_step_ns",
        "/timing/syscall_read_ns",
        "/timing/syscall_write_ns",
        "/timing/syscall_getppid_ns",
        "/timing/sendto_1472_median_ns",
        "/timing/sendto_1472_p99_ns",
        "/timing/call_ns",
        "/sysctls/rmem_max_bytes",
        "/sysctls/wmem_max_bytes",
        "/sysctls/rmem_default_bytes",
        "/sysctls/wmem_default_bytes",
        "/sysctls/tcp_rmem_bytes",
        "/sysctls/tcp_wmem_bytes",
        "/sysctls/tcp_congestion_control",
        "/sysctls/tcp_available_congestion_control",
        "/sysctls/default_qdisc",
        "/pacing/sink",
        "/probe_duration_ns",
    ] {
        present(&v, p);
    }
    let ifs = v["interfaces"].as_array().unwrap();
    assert!(!ifs.is_empty());
    for i in ifs {
        for k in [
            "name",
            "operstate",
            "speed_bps",
            "mtu_bytes",
            "driver",
            "offloads",
            "coalescing",
            "timestamping",
        ] {
            assert!(i.get(k).is_some_and(|x| !x.is_null()), "interface key {k}");
        }
    }
    let sizes = v["pacing"]["sizes"].as_array().unwrap();
    assert_eq!(sizes.len(), 2);
    for s in sizes {
        for k in [
            "packet_bytes",
            "max_rate_pps",
            "max_rate_bps",
            "paced_train_bps_gso",
            "paced_train_bps_batch",
            "gaps",
        ] {
            assert!(s.get(k).is_some(), "pacing key {k}");
        }
        // Paced trains through the pacer reach a real rate with batches;
        // this kernel takes UDP GSO, so that figure is a number too.
        for k in ["paced_train_bps_gso", "paced_train_bps_batch"] {
            let r = s[k].as_f64().unwrap_or_else(|| panic!("{k}: {}", s[k]));
            assert!(r > 10e6, "{k} {r}");
        }
        for g in s["gaps"].as_array().unwrap() {
            for k in [
                "target_gap_ns",
                "packets",
                "achieved_median_ns",
                "error_median_ns",
                "error_p99_ns",
                "within_10pct",
            ] {
                assert!(g.get(k).is_some(), "gap key {k}");
            }
        }
    }
    let read = num(&v, "/timing/clock_read_ns").expect("clock read cost");
    assert!((1.0..100_000.0).contains(&read), "clock read {read} ns");
    let copy = num(&v, "/memory/memcpy_min_bps").expect("memcpy");
    assert!(copy > 100e6 * 8.0, "memcpy {copy} bit/s");
    assert!(num(&v, "/memory/memcpy_max_bps").unwrap() >= copy);
    assert!(num(&v, "/cpu/logical_cpus").unwrap() >= 1.0);
}

#[test]
fn text_report_names_its_sections() {
    let t = run(&["host"]);
    for s in [
        "Host ",
        "\nCPU\n",
        "\nMemory\n",
        "\nTiming",
        "\nInterfaces\n",
        "\nSocket buffers and TCP\n",
        "\nPacing",
        "clock read",
        "memcpy bandwidth",
        "1500-byte packets",
        "9000-byte packets",
    ] {
        assert!(t.contains(s), "missing {s:?} in\n{t}");
    }
}
