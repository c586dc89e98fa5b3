//! Unit tests of the hops lab's plan checks and scoring (no namespaces).

use super::*;
use pathsonde_core::methods::hops::{NarrowLink, TightLink};

fn plan() -> HopsLabPlan {
    HopsLabPlan {
        name: "t".into(),
        routers: 3,
        tight_at: 2,
        narrow_at: Some(3),
        tight_rate: BitRate::from_mbps(100.0),
        narrow_rate: BitRate::from_mbps(60.0),
        cross: "poisson:60%".into(),
        silent: vec![],
        runs: 1,
        queue: Bytes(150_000),
        queue_probe: false,
        end_to_end: false,
        ipv6: false,
        settle: DurationNs::from_secs(1),
        gap: DurationNs::from_secs(2),
        seed: 1,
    }
}

fn link(j: usize, c: Option<f64>, x: f64) -> LinkTruth {
    let c = c.map(BitRate::from_mbps);
    let x = BitRate::from_mbps(x);
    LinkTruth {
        link: j,
        capacity_l2_bps: c,
        capacity_ip_bps: c,
        cross_l2_bps: x,
        available_ip_bps: c.map(|c| c - x),
        qdisc_l2_bps: None,
        qdisc_drops: None,
    }
}

/// The lab test's path: L2 100 Mb/s at 60 %, L3 60 Mb/s idle.
fn truth() -> Vec<LinkTruth> {
    vec![
        link(1, None, 0.0),
        link(2, Some(100.0), 60.0),
        link(3, Some(60.0), 0.0),
        link(4, None, 0.0),
    ]
}

fn measured(tight: Option<(u8, u8)>, narrow: Option<(u8, u8)>, silent: Vec<u8>) -> Measured {
    let r = BitRate::from_mbps;
    Measured {
        estimate: HopsEstimate {
            hops: vec![],
            tight_link: tight.map(|(f, t)| TightLink {
                from_ttl: f,
                to_ttl: t,
                from_address: None,
                to_address: None,
                rate_in: r(44.0),
                rate_out: r(40.0),
                passed: Some(r(40.0)),
                available: r(44.0),
                agreeing: 4,
                considered: 4,
                confidence: 1.0,
            }),
            narrow_link: narrow.map(|(f, t)| NarrowLink {
                from_ttl: f,
                to_ttl: t,
                from_address: None,
                to_address: None,
                rate_in: r(90.0),
                rate: r(62.0),
                capacity_from: pathsonde_core::methods::hops::CapacityFrom::Slowest,
                check_rate_in: None,
                check_rate: None,
                tight_available_if_no_wider: None,
                tight_ratio: None,
                tight_capacity: None,
            }),
            silent,
            destination_ttl: Some(4),
            trains: 12,
            probe_bytes: Bytes(1_000_000),
            probe_packets: 2000,
            pacing: Default::default(),
            notes: vec![],
        },
        elapsed: DurationNs::from_secs(22),
        json: serde_json::Value::Null,
        queue: None,
        end_to_end: None,
    }
}

#[test]
fn bad_plans_are_refused_in_one_line() {
    assert!(plan().validate().is_ok());
    let bad = |f: &dyn Fn(&mut HopsLabPlan)| {
        let mut p = plan();
        f(&mut p);
        let e = p.validate().unwrap_err();
        assert!(!e.contains('\n'), "{e}");
        e
    };
    assert!(bad(&|p| p.tight_at = 5).contains("--tight-at 5"));
    assert!(bad(&|p| p.tight_at = 0).contains("--tight-at 0"));
    assert!(bad(&|p| p.narrow_at = Some(2)).contains("is the tight link"));
    assert!(bad(&|p| p.narrow_at = Some(9)).contains("--narrow-at 9"));
    assert!(bad(&|p| p.silent = vec![4]).contains("--silent 4"));
    assert!(bad(&|p| p.routers = 0).contains("--hops 0"));
    assert!(bad(&|p| p.narrow_rate = BitRate::from_mbps(100.0)).contains("slower"));
    // 100 Mb/s at 30 % leaves 70 available, more than the narrow 60.
    assert!(bad(&|p| p.cross = "poisson:30%".into()).contains("available"));
    assert!(bad(&|p| p.cross = "tcp:2".into()).contains("not TCP"));
    assert!(bad(&|p| p.runs = 0).contains("--runs"));
    assert!(bad(&|p| p.queue = Bytes(1500)).contains("--queue"));
    let mut ok = plan();
    ok.narrow_at = None;
    ok.tight_at = 1;
    assert!(ok.validate().is_ok());
}

#[test]
fn the_plan_shapes_the_tight_and_narrow_links_only() {
    let s = plan().spec();
    assert_eq!(s.links.len(), 4);
    assert_eq!(s.links[1].rate, Some(BitRate::from_mbps(100.0)));
    assert!(s.links[1].cross);
    assert_eq!(s.links[2].rate, Some(BitRate::from_mbps(60.0)));
    assert!(!s.links[2].cross);
    assert!(s.links[0].rate.is_none() && s.links[3].rate.is_none());
    // --queue is the tight link's limit; the narrow link keeps the default.
    assert_eq!(s.links[1].queue, Some(Bytes(150_000)));
    assert_eq!(s.links[2].queue, None);
    assert_eq!(s.queue, LINK_QUEUE);
}

fn bursts(first_overflow: Option<u8>) -> QueueEstimate {
    QueueEstimate {
        hops: vec![],
        first_overflow,
        mbs_passed: Some(Bytes(28_000)),
        mbs_lost: Some(Bytes(33_600)),
        bursts: 8,
        probe_bytes: Bytes(400_000),
        notes: vec![],
    }
}

#[test]
fn the_short_queue_is_the_least_limit_and_the_hop_that_lost_bursts_is_scored() {
    let mut p = plan();
    p.queue = Bytes(30_000);
    let spec = p.spec();
    assert_eq!(
        queue::short_queue(&spec),
        Some((2, Bytes(30_000) + crate::chain::TBF_BURST))
    );
    let right = queue::score(&spec, &bursts(Some(2)), &[]).unwrap();
    assert!(right.short_named);
    // A method that always blames the first hop, the last, or nothing fails.
    for wrong in [Some(1), Some(3), Some(4), None] {
        assert!(
            !queue::score(&spec, &bursts(wrong), &[])
                .unwrap()
                .short_named
        );
    }
    // r1 silent: the first answering hop past the short link's start names it.
    assert!(
        queue::score(&spec, &bursts(Some(2)), &[1])
            .unwrap()
            .short_named
    );
    // With the tight link's queue longer than the narrow link's default,
    // the narrow link's is the short one.
    p.queue = LINK_QUEUE + Bytes(1);
    assert_eq!(queue::short_queue(&p.spec()).map(|x| x.0), Some(3));
    // Ties go to the link a burst meets first.
    p.queue = LINK_QUEUE;
    assert_eq!(queue::short_queue(&p.spec()).map(|x| x.0), Some(2));
}

#[test]
fn the_queue_summary_counts_only_runs_with_bursts() {
    let mut p = plan();
    p.queue = Bytes(30_000);
    let spec = p.spec();
    let mut runs: Vec<HopsRunRecord> = [Some(2), Some(2), Some(1)]
        .iter()
        .map(|&h| {
            let mut r = score(1, truth(), &measured(Some((1, 2)), None, vec![]), &[]).unwrap();
            r.queue = queue::score(&spec, &bursts(h), &[]);
            r
        })
        .collect();
    runs.push(score(1, truth(), &measured(Some((1, 2)), None, vec![]), &[]).unwrap());
    let s = summarise(&runs).unwrap().queue.unwrap();
    assert_eq!((s.runs, s.short_named), (3, 2));
    assert_eq!(s.median_lost, Some(33_600.0));
    assert!(summarise(&runs[3..]).unwrap().queue.is_none());
}

#[test]
fn a_link_is_named_by_its_hops_or_across_silent_ones_only() {
    assert!(names_link(1, 2, 2, &[]));
    assert!(!names_link(1, 2, 3, &[]));
    assert!(!names_link(2, 3, 2, &[]));
    // Hop 1 silent: 0 → 2 spans links 1 and 2, and names either.
    assert!(names_link(0, 2, 2, &[1]));
    assert!(names_link(0, 2, 1, &[1]));
    // The same span without the silence is too wide to name anything.
    assert!(!names_link(0, 2, 2, &[]));
    assert!(!names_link(0, 3, 2, &[1]));
}

#[test]
fn truth_picks_least_available_and_least_capacity() {
    assert_eq!(true_links(&truth()), Some((2, 3)));
    assert_eq!(true_links(&[link(1, None, 0.0)]), None);
}

#[test]
fn runs_are_scored_and_constant_answers_fail() {
    let ok = score(
        1,
        truth(),
        &measured(Some((1, 2)), Some((2, 3)), vec![]),
        &[],
    )
    .unwrap();
    assert!(ok.tight_named);
    assert_eq!(ok.narrow, NarrowScore::Named);
    assert!((ok.error.unwrap() - 0.1).abs() < 1e-9, "{:?}", ok.error);
    assert!(ok.silent_right);
    // First hop, last hop, the narrow link: each named as tight is wrong.
    for (f, t) in [(0, 1), (3, 4), (2, 3)] {
        let r = score(1, truth(), &measured(Some((f, t)), None, vec![]), &[]).unwrap();
        assert!(!r.tight_named, "{f}->{t}");
        assert_eq!(r.narrow, NarrowScore::NotToldApart);
    }
    let wrong = score(
        1,
        truth(),
        &measured(Some((1, 2)), Some((1, 2)), vec![]),
        &[],
    )
    .unwrap();
    assert_eq!(wrong.narrow, NarrowScore::Wrong);
    // r1 silent and reported so: the tight link spans it.
    let silent = score(1, truth(), &measured(Some((0, 2)), None, vec![1]), &[1]).unwrap();
    assert!(silent.tight_named && silent.silent_right);
    let missed = score(1, truth(), &measured(None, None, vec![]), &[1]).unwrap();
    assert!(!missed.tight_named && !missed.silent_right && missed.error.is_none());
}

#[test]
fn the_summary_counts_and_takes_quantiles() {
    let runs: Vec<HopsRunRecord> = [(1, 2), (1, 2), (2, 3)]
        .iter()
        .map(|&t| score(1, truth(), &measured(Some(t), Some((2, 3)), vec![]), &[]).unwrap())
        .collect();
    let s = summarise(&runs).unwrap();
    assert_eq!((s.runs, s.tight_named, s.narrow_named), (3, 2, 3));
    assert_eq!(s.narrow_differs, 3);
    assert!((s.median_abs_error.unwrap() - 0.1).abs() < 1e-9);
    assert_eq!(s.median_probe_bytes, Some(1e6));
    assert!(summarise(&[]).is_none());
}

#[test]
fn an_end_to_end_run_without_an_estimate_is_scored_as_one_with_the_truth_of_its_window() {
    use crate::truth::LogPoint;
    use pathsonde_core::TimeNs;
    // 60 Mb/s of L2 cross traffic over [1 s, 2 s]: 1000-byte frames
    // every 133.3 µs.
    let log: Vec<LogPoint> = (0..=7500i64)
        .map(|i| LogPoint {
            at_ns: 1_000_000_000 + i * 1_000_000_000 / 7500,
            ip_bytes: i as u64 * 986,
            l2_bytes: i as u64 * 1000,
            late_packets: 0,
            max_late_ns: 0,
        })
        .collect();
    let run = end_to_end::EndToEndRun {
        outcome: Err("connecting to 198.19.4.2:5310: refused".into()),
        from: TimeNs::from_ns(1_200_000_000),
        to: TimeNs::from_ns(1_500_000_000),
    };
    let s = end_to_end::score(&run, BitRate::from_mbps(100.0), &[log]);
    assert!(s.available_bps.is_none() && s.error.is_none() && !s.band_holds_truth);
    assert!(s.failed.as_deref().unwrap().contains("refused"));
    // 100 − 60 at L2, in IP bytes of 1500-byte probes: 40 · 1500/1514.
    let t = s.truth_available_bps.bps() / 1e6;
    assert!((t - 40.0 * 1500.0 / 1514.0).abs() < 0.3, "{t}");
    let mut r = score(1, truth(), &measured(Some((1, 2)), None, vec![]), &[]).unwrap();
    r.end_to_end = Some(s);
    let sum = summarise(&[r]).unwrap().end_to_end.unwrap();
    assert_eq!((sum.runs, sum.measured, sum.consistent), (1, 0, 0));
}
