//! `pathsonde hops` on a lab chain of three routers, as root: the tight link
//! (tbf 100 Mb/s carrying 60 Mb/s of Poisson cross traffic, 40 Mb/s
//! available, between r1 and r2) must be named, although the narrow link
//! (tbf 60 Mb/s, no cross traffic, between r2 and r3) comes after it — and
//! the narrow link named too, since it comes after the tight one.  The
//! routers keep their default ICMP rate limits; r1 never answers (a
//! blackhole for what it sends the sender), so it must be reported silent and
//! the tight link then spans it.  Nothing may be left behind.  The same
//! chain is probed over IPv4 and, dual-stack, over IPv6 (ICMPv6 time
//! exceeded and port unreachable through `IPV6_RECVERR`, routers answering
//! from their IPv6 addresses, the silenced router silent in both families).
//! Skipped with a message when not root; under CI that is a failure.

use pathsonde_core::traffic::CrossModel;
use pathsonde_core::{BitRate, Bytes};
use pathsonde_lab::chain::{cross_sink_addr, Chain, ChainLink, ChainSpec};
use pathsonde_lab::cross::CrossSource;
use pathsonde_lab::exclusive::is_root;
use pathsonde_lab::LabError;
use serde_json::Value;
use std::process::Command;

#[test]
fn hops_names_the_tight_link_across_three_routers() {
    three_routers(false);
}

#[test]
fn hops_names_the_tight_link_across_three_routers_over_ipv6() {
    three_routers(true);
}

/// Every hop, address, silent router and the tight link must be right on
/// the first chain.  The narrow link's back-to-back reading is the one
/// figure a stalling host moves by more than the tbf's bucket explains
/// (on 2026-12-03, with the VM's steal time at 6-13 %, two CI runs read r3's
/// 60 Mb/s at 45 and 111 Mb/s, and the next runs at 62): when only that
/// check fails, a second chain is measured, and it must pass.
fn three_routers(v6: bool) {
    if !is_root() {
        pathsonde_lab::exclusive::cannot_run("the lab needs root");
        return;
    }
    let _lock = pathsonde_lab::exclusive::lab_lock().expect("taking the lab lock");
    if let Err(why) = three_routers_once(v6, "a") {
        eprintln!("first chain: {why}; measuring a second one");
        if let Err(why) = three_routers_once(v6, "b") {
            panic!("second chain too: {why}");
        }
    }
}

/// One chain, measured and checked; `Err` when only the narrow link's
/// reading is off.
fn three_routers_once(v6: bool, tag: &str) -> Result<(), String> {
    let link = |mbps: Option<f64>, cross| ChainLink {
        rate: mbps.map(BitRate::from_mbps),
        cross,
        queue: None,
    };
    let spec = ChainSpec {
        name: format!(
            "hw{}{tag}{}",
            if v6 { "v" } else { "" },
            std::process::id() % 100_000
        ),
        links: vec![
            link(None, false),
            link(Some(100.0), true),
            link(Some(60.0), false),
            link(None, false),
        ],
        queue: Bytes(150_000),
        // r1 never answers: reported silent, and the tight link then spans
        // it (from this host to r2).
        silent: vec![1],
        ipv6: v6,
    };
    let chain = match Chain::build(spec) {
        Ok(c) => c,
        Err(e @ (LabError::NotPermitted(_) | LabError::Missing { .. })) => {
            pathsonde_lab::exclusive::cannot_run(&format!("the chain cannot be built: {e}"));
            return Ok(());
        }
        Err(e) => panic!("building the chain: {e}"),
    };
    let names: Vec<String> = chain.namespaces().to_vec();
    let model = CrossModel::parse("poisson:60%", BitRate::from_mbps(100.0), Bytes(1500))
        .expect("a cross model");
    let schedule = model.schedule(29).expect("a schedule");
    let mut cross = CrossSource::udp(
        &chain.spec.cross_source(2),
        cross_sink_addr(2),
        Box::new(schedule.map(|p| (p.at, p.size))),
    )
    .expect("cross traffic");
    let out = Command::new("ip")
        .args(["netns", "exec", &chain.spec.node(0)])
        .arg(env!("CARGO_BIN_EXE_pathsonde"))
        .args(["hops", &chain.receiver_in(v6).to_string(), "--json"])
        .output()
        .expect("running pathsonde hops");
    let _ = cross.stop();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(&stdout).expect("one JSON object");
    let routers: Vec<String> = (1..=3)
        .map(|k| chain.router_in(k, v6).to_string())
        .collect();
    let expect_r = |k: usize| routers[k - 1].clone();
    drop(chain);
    for ns in &names {
        assert!(
            !std::path::Path::new("/var/run/netns").join(ns).exists(),
            "left behind: {ns}"
        );
    }
    assert!(out.status.success(), "exit {:?}", out.status);
    let hops = v["hops"].as_array().expect("hops");
    assert_eq!(hops.len(), 4, "{v}");
    assert!(hops[0]["address"].is_null(), "{}", hops[0]);
    for k in [2, 3] {
        let h = &hops[k - 1];
        assert_eq!(h["address"], expect_r(k), "{h}");
        assert!(h["rtt_s"].as_f64().is_some(), "{h}");
    }
    assert_eq!(v["destination_ttl"], 4);
    assert_eq!(v["silent"], serde_json::json!([1]));
    let t = &v["tight_link"];
    assert_eq!(
        (t["from_ttl"].as_u64(), t["to_ttl"].as_u64()),
        (Some(0), Some(2)),
        "{t}"
    );
    assert_eq!(t["to_address"], expect_r(2));
    // The narrow link comes after the tight one, so back-to-back trains
    // show it when the tight link lets them out faster than 60 Mb/s: they
    // leave r3 at their slowest, about its 60 Mb/s, read high by the tbf's
    // two-frame bucket, which passes the head of a fast 22-packet train
    // early (on 2026-12-01, with the trains leaving r2 at 80-107 Mb/s, 4 of
    // 8 runs read 75-81 Mb/s; the runs of docs/hops.md, leaving r2 at
    // 85-103, read 61-64).  When the 60 % cross traffic spreads the trains
    // to 60 Mb/s at the tight link already, the narrow link does not slow
    // them and cannot be told apart; the method must then say so, not name
    // a link (1 of those 8 runs).  It says so in one of two ways: the
    // trains were slowest at r2 already, or r3 slowed them by less than the
    // 7 % a step needs (CI on 2026-12-01: r2 62, r3 59.7 Mb/s), in the
    // medians or in every train on its own, or r3 slowed too few of the
    // trains that came into it fast.
    let n = &v["narrow_link"];
    if n.is_null() {
        let notes = v["notes"].to_string();
        assert!(
            notes.contains("slowest at the first measured hop")
                || notes.contains("did not step down at TTL 3")
                || notes.contains("stepped down at TTL 3 on its own")
                || notes.contains("TTL 3 slowed"),
            "no narrow link and no reason: {v}"
        );
        // Below 70 Mb/s out of r2, r3's bucket-inflated reading (up to
        // about 64 there) may sit within the 7 % a step needs; above it a
        // step to 60 is plain and must be named.
        let hop2 = hops[1]["rate_bps"].as_f64().unwrap() / 1e6;
        if hop2 >= 70.0 {
            return Err(format!(
                "r2 let trains out at {hop2} Mb/s, yet r3's 60 Mb/s went unnamed: {v}"
            ));
        }
    } else {
        assert_eq!(
            (n["from_ttl"].as_u64(), n["to_ttl"].as_u64()),
            (Some(2), Some(3)),
            "{n}"
        );
        let r = n["rate_bps"].as_f64().unwrap() / 1e6;
        // At most about +45 %: the most a two-frame bucket adds to a
        // 22-packet train (its head start is largest where the train comes
        // in just fast enough to be slowed at all).
        if !(50.0..=88.0).contains(&r) {
            return Err(format!("the narrow link read {r} Mb/s: {n}"));
        }
    }
    assert!(v["elapsed_s"].as_f64().unwrap() < 30.0);
    Ok(())
}
