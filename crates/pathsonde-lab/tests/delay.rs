//! The delay line, end to end: UDP from snd through a line in rtr to rcv.
//!
//! Needs root and /dev/net/tun (the CI has both); otherwise each test says
//! why it skipped.  Lab tests in different test binaries must not overlap
//! (they share 2 cores and time-sensitive figures), so every test that builds
//! namespaces holds an exclusive flock on /tmp/pathsonde-lab.lock.

use pathsonde_core::{BitRate, DurationNs};
use pathsonde_lab::delay::bench::{udp_run, Rig};
use pathsonde_lab::delay::{DelayConfig, DelayLine, Scheduling, Sustained};
use pathsonde_lab::{netns, LabError};
use std::time::Duration;

fn lab_lock() -> pathsonde_lab::exclusive::LabLock {
    pathsonde_lab::exclusive::lab_lock().expect("taking the lab lock")
}

/// Why this machine cannot run the lab tests, if it cannot.
fn skip_reason() -> Option<String> {
    if let Err(e) = netns::check_permitted() {
        return Some(e.to_string());
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun".into());
    }
    None
}

macro_rules! require_lab {
    () => {
        if let Some(why) = skip_reason() {
            pathsonde_lab::exclusive::cannot_run(&why);
            return;
        }
    };
}

fn our_namespaces() -> Vec<String> {
    let tag = format!("{}dly{}", netns::PREFIX, std::process::id());
    netns::list()
        .expect("listing namespaces")
        .into_iter()
        .filter(|n| n.starts_with(&tag))
        .collect()
}

#[test]
fn out_of_range_delay_is_refused() {
    for ms in [0, 101, 1000] {
        let cfg = DelayConfig::new("to-snd", DurationNs::from_ms(ms), BitRate::from_mbps(10.0));
        // Refused before any namespace is touched, so no root needed.
        let e = DelayLine::start("pathsonde-no-such-ns", cfg).unwrap_err();
        assert!(matches!(e, LabError::Spec(_)), "{ms} ms: {e}");
        assert!(e.to_string().contains("outside 1–100 ms"), "{e}");
    }
}

#[test]
fn over_capacity_is_refused_with_a_clear_error() {
    let asked = Sustained::MBPS_1500 * 1.6;
    let cfg = DelayConfig::new("to-snd", DurationNs::from_ms(20), BitRate::from_mbps(asked));
    let e = DelayLine::start("pathsonde-no-such-ns", cfg).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, LabError::Capability(_)), "{msg}");
    assert!(
        msg.contains(&format!(
            "delay line sustains about {:.0} Mb/s of 1500-byte packets loss-free here",
            Sustained::MBPS_1500
        )),
        "{msg}"
    );
    assert!(msg.contains(&format!("asked for {asked:.0} Mb/s")), "{msg}");
}

#[test]
fn delays_udp_by_the_set_amount_without_loss() {
    require_lab!();
    let _lock = lab_lock();
    {
        let rig = Rig::build().expect("building the rig");
        let d = DurationNs::from_ms(10);
        let rate = BitRate::from_mbps(50.0);
        let mut line = rig.delay_line(d, rate).expect("starting the delay line");
        let early = line.stats();
        assert!(
            !matches!(early.reader, Scheduling::Pending)
                && !matches!(early.releaser, Scheduling::Pending),
            "scheduling class must be settled once start returns: {early:?}"
        );
        let rules = netns::ip(&["-n", &rig.rtr, "rule", "show"]).unwrap();
        assert!(rules.contains("iif to-snd lookup 100"), "{rules}");

        // This class of VM stalls whole for 100+ ms about once in eight
        // runs (docs/lab-delay.md); a stall is the machine's, not the
        // line's, so a run whose p99 it spoiled is repeated (at most twice).
        let mut attempt = 0;
        let (run, median, p99) = loop {
            let run = udp_run(&rig, rate, 1500, Duration::from_millis(800)).expect("UDP run");
            let median = run.delay_quantile(0.5).unwrap();
            let p99 = run.delay_quantile(0.99).unwrap();
            attempt += 1;
            if p99 - d <= DurationNs::from_ms(5) || attempt == 3 {
                break (run, median, p99);
            }
            eprintln!("attempt {attempt}: p99 {p99} (a host stall?); repeating");
        };
        let stats = line.stats_with_kernel().expect("line stats");
        eprintln!(
            "D = 10 ms at 50 Mb/s: sent {} lost {} median {median} p99 {p99}; line {stats:?}",
            run.sent,
            run.lost()
        );
        assert_eq!(run.lost(), 0, "no loss at 50 Mb/s");
        assert!(
            (median - d).abs() <= DurationNs::from_ms(1),
            "median {median} not within 10 ± 1 ms"
        );
        assert!(p99 - d <= DurationNs::from_ms(5), "p99 {p99}");
        assert!(stats.packets >= run.sent * attempt as u64, "{stats:?}");
        assert_eq!(stats.dropped_queue_full, 0);
        assert_eq!(stats.write_errors, 0);
        assert_eq!(stats.tun_dropped, Some(0));
        assert!(stats.failure.is_none(), "{stats:?}");
        assert!(stats.hold_error.is_some());

        let last = line.stop().expect("stopping");
        assert_eq!(last.packets, stats.packets);
        line.stop().expect("stop is idempotent");
        let rules = netns::ip(&["-n", &rig.rtr, "rule", "show"]).unwrap();
        assert!(!rules.contains("lookup 100"), "rule left behind: {rules}");
        let links = netns::ip(&["-n", &rig.rtr, "link", "show"]).unwrap();
        assert!(!links.contains("dly0"), "TUN left behind: {links}");

        // With the line gone the path is direct again.
        let direct = udp_run(&rig, rate, 1500, Duration::from_millis(100)).unwrap();
        assert!(direct.delay_quantile(0.5).unwrap() < DurationNs::from_ms(1));
    }
    assert!(
        our_namespaces().is_empty(),
        "left behind: {:?}",
        our_namespaces()
    );
}

#[test]
fn stop_is_quiet_when_the_namespace_is_already_gone() {
    require_lab!();
    let _lock = lab_lock();
    {
        let rig = Rig::build().expect("building the rig");
        let mut line = rig
            .delay_line(DurationNs::from_ms(5), BitRate::from_mbps(10.0))
            .expect("starting the delay line");
        netns::delete(&rig.rtr).expect("deleting the router namespace");
        line.stop().expect("stop after the namespace went");
        drop(line);
        // Rig's drop deletes the rest and does not mind the missing one.
    }
    assert!(
        our_namespaces().is_empty(),
        "left behind: {:?}",
        our_namespaces()
    );
}

#[test]
fn start_in_a_missing_namespace_is_an_error() {
    let cfg = DelayConfig::new("to-snd", DurationNs::from_ms(10), BitRate::from_mbps(10.0));
    let e = DelayLine::start("pathsonde-dly-no-such-namespace", cfg).unwrap_err();
    assert!(matches!(e, LabError::NoSuchLab(_)), "{e}");
}
