//! Tests of the `hops` method on synthetic multi-hop paths: the tight link
//! in every position, the narrow link elsewhere, silent hops, Linux ICMP
//! rate limits, and answers that did not come.

use super::analysis::analyse;
use super::*;
use crate::observation::{ClockInfo, ClockSource};
use crate::synthetic::multihop::{HopLink, MultiHopConfig, MultiHopPath};
use crate::units::{Bytes, TimeNs};

/// Four- and five-link topologies: the tight link (least available
/// bandwidth) at hop 1, 2, 3, 4 in turn, the narrow link (least capacity,
/// lightly loaded) somewhere else each time.  The link into the far end is
/// never the tight one: ICMP alone cannot measure it (see the module
/// comment), which [`the_link_into_the_far_end_is_said_to_be_unmeasured`]
/// checks.
fn topologies() -> Vec<Vec<HopLink>> {
    let tight = HopLink::new(300.0, 0.8); // A = 60 Mb/s
    let narrow = HopLink::new(100.0, 0.0); // A = 100 Mb/s
    let fast = |load| HopLink::new(1000.0, load);
    vec![
        vec![tight, narrow, fast(0.3), fast(0.2)],
        vec![fast(0.3), tight, narrow, fast(0.2)],
        vec![narrow, fast(0.3), tight, fast(0.1)],
        vec![fast(0.2), narrow, fast(0.5), tight, fast(0.1)],
    ]
}

/// The lab test's path in the model: a 100 Mb/s link at 60 % load of
/// 1500-byte Poisson packets (A = 40 Mb/s, a busy queue that makes the
/// markers' delays noisy), then a 60 Mb/s idle narrow link.
fn lab_like() -> Vec<HopLink> {
    let mut tight = HopLink::new(100.0, 0.6);
    tight.cross_packet = Bytes(1500);
    vec![
        HopLink::new(1000.0, 0.0),
        tight,
        HopLink::new(60.0, 0.0),
        HopLink::new(1000.0, 0.0),
    ]
}

fn run(links: Vec<HopLink>, seed: u64) -> (MultiHopConfig, HopsEstimate, DurationNs) {
    let cfg = MultiHopConfig::new(links, seed);
    let mut path = MultiHopPath::new(cfg.clone());
    let mut m = Hops::new(HopsConfig::default());
    let est = path.run(&mut m).expect("an estimate");
    (cfg, est, path.elapsed())
}

#[test]
fn the_topologies_defeat_constant_answers() {
    // A method that always names the first hop, the last hop or the narrow
    // link gets at least one of these wrong.
    let cfgs: Vec<MultiHopConfig> = topologies()
        .into_iter()
        .map(|l| MultiHopConfig::new(l, 1))
        .collect();
    let tights: Vec<u8> = cfgs.iter().map(MultiHopConfig::tight_hop).collect();
    assert_eq!(tights, vec![1, 2, 3, 4]);
    for c in &cfgs {
        assert_ne!(c.tight_hop(), c.narrow_hop());
    }
}

#[test]
fn the_tight_link_is_named_in_every_position() {
    for (i, links) in topologies().into_iter().enumerate() {
        let mut right = 0;
        let mut avail = Vec::new();
        let seeds = 10u64;
        for seed in 0..seeds {
            let (cfg, est, elapsed) = run(links.clone(), 100 * i as u64 + seed);
            let tight = est.tight_link.as_ref().expect("a tight link");
            if tight.to_ttl == cfg.tight_hop() {
                right += 1;
                // Its bracket sits near the 60 Mb/s available.
                avail.push(tight.available.mbps());
            }
            assert_eq!(est.destination_ttl, Some(cfg.links.len() as u8));
            assert!(est.silent.is_empty(), "{:?}", est.silent);
            assert!(elapsed.secs_f64() < 30.0, "{elapsed}");
        }
        assert!(
            right >= 9,
            "topology {i}: tight link named in {right} of {seeds} runs"
        );
        // The median available bandwidth given for it sits near its 60 Mb/s,
        // or above it (never far below) where the narrow link ahead of the
        // tight one hides how wide the tight one is (topologies 2 and 3: the
        // fluid reading's capacity is then a lower bound).
        let med = crate::stats::median(&avail).unwrap();
        let allowed = if i < 2 { 54.0..=66.0 } else { 54.0..=84.0 };
        assert!(allowed.contains(&med), "topology {i}: median {med}");
    }
}

#[test]
fn the_available_bandwidth_is_read_without_the_thresholds_bias() {
    // A train is seen to spread only 7 % past the tight link's available
    // bandwidth; the bracket of the rates that passed and spread sat 10–35 %
    // above it on these paths (60, 60 and 40 Mb/s).  Read back through the
    // fluid model, the median is within 10 %: an estimator that gives the
    // bracket, the capacity, twice the answer or a constant fails.
    for (links, truth) in [
        (topologies()[0].clone(), 60.0),
        (topologies()[1].clone(), 60.0),
        (lab_like(), 40.0),
    ] {
        let mut avail = Vec::new();
        for seed in 0..10u64 {
            let (cfg, est, _) = run(links.clone(), 500 + seed);
            if let Some(t) = est.tight_link.filter(|t| t.to_ttl == cfg.tight_hop()) {
                avail.push(t.available.mbps());
            }
        }
        assert!(avail.len() >= 9, "{avail:?}");
        let med = crate::stats::median(&avail).unwrap();
        assert!(
            (med - truth).abs() <= 0.10 * truth,
            "median {med:.1} Mb/s for a truth of {truth}: {avail:?}"
        );
    }
}

#[test]
fn a_narrow_link_named_ahead_lifts_the_capacity_bound_of_the_available_reading() {
    // Behind a narrower idle link the back-to-back trains leave the tight
    // link at a fraction of its capacity, and the fluid reading of `A` with
    // that as `C` sits high (+20–25 % behind a 100 Mb/s link ahead of a
    // 300 Mb/s tight one).  Once the narrow link is named, the tight link
    // is known to be at least as wide as the fluid model reads it
    // (`tight_capacity`): where that reading is above the narrow link's
    // rate, so that the bound is lifted, `available` read again with it is
    // within 14 % (median; 20 % and 17 % high on the first two paths when
    // read with the back-to-back bound alone).  The runs whose fluid
    // reading is not above it keep the back-to-back bound: counting them
    // would measure how often the narrow link is named, not the lift.
    for (links, truth) in [
        (narrow_ahead()[0].clone(), 60.0),
        (narrow_ahead()[2].clone(), 60.0),
        (shaped_ahead()[0].clone(), 50.0),
    ] {
        let mut avail = Vec::new();
        for seed in 0..12u64 {
            let (cfg, est, _) = run(links.clone(), 2600 + seed);
            let lifted = est.narrow_link.as_ref().is_some_and(|n| {
                n.to_ttl == cfg.narrow_hop() && n.tight_capacity.is_some_and(|c| c > n.rate)
            });
            if let Some(t) = est
                .tight_link
                .filter(|t| lifted && t.to_ttl == cfg.tight_hop())
            {
                avail.push(t.available.mbps());
            }
        }
        assert!(avail.len() >= 5, "{avail:?}");
        let med = crate::stats::median(&avail).unwrap();
        assert!(
            (med - truth).abs() <= 0.14 * truth,
            "median {med:.1} Mb/s for a truth of {truth}: {avail:?}"
        );
    }
}

#[test]
fn the_probes_are_lifted_only_where_the_scan_reads_the_link_well_below_the_bound() {
    use super::narrow::{probe_at, PROBE};
    // A no-wider tight link keeps its available bandwidth (and the scan's
    // reading, an upper bound of it) at or above the bound: the probes
    // stay at the plain rate, where such a link passes them.
    for a_scan in [60.0, 64.0, 80.0] {
        assert_eq!(probe_at(64.0, a_scan), PROBE * 64.0);
    }
    // Read well below the bound (the lab's 60 Mb/s link ahead of a
    // 100 Mb/s one at 60 %: bound about 44 from a low exit, A = 38): just
    // above the reading, where a wider link spreads them, and still short
    // of the bound.
    let lifted = probe_at(48.0, 38.0);
    assert!(lifted > PROBE * 48.0 && lifted < 48.0, "{lifted}");
    // Never lowered below the plain rate.
    assert_eq!(probe_at(64.0, 20.0), PROBE * 64.0);
}

#[test]
fn the_narrow_topologies_defeat_constant_answers() {
    // A method that always names the first hop, the last measured hop, or
    // the tight link as the narrow one gets at least one of these wrong.
    let ahead: Vec<MultiHopConfig> = narrow_ahead()
        .into_iter()
        .map(|l| MultiHopConfig::new(l, 1))
        .collect();
    let narrows: Vec<u8> = ahead.iter().map(MultiHopConfig::narrow_hop).collect();
    let tights: Vec<u8> = ahead.iter().map(MultiHopConfig::tight_hop).collect();
    assert_eq!(narrows, vec![1, 1, 2, 2, 3]);
    assert_eq!(tights, vec![2, 3, 3, 4, 5]);
    for c in &ahead {
        // Neither the tight link nor the last measured hop.
        assert!(c.narrow_hop() < c.tight_hop());
    }
    for l in narrow_is_tight() {
        let c = MultiHopConfig::new(l, 1);
        assert_eq!(c.narrow_hop(), c.tight_hop());
    }
}

/// Runs `links` over `seeds` and counts the runs that named the narrow
/// link; panics when one named a wrong link.
fn narrow_named(links: &[HopLink], seeds: std::ops::Range<u64>, what: &str) -> u32 {
    let mut named = 0;
    for seed in seeds {
        let (cfg, est, elapsed) = run(links.to_vec(), seed);
        assert!(elapsed.secs_f64() < 30.0, "{elapsed}");
        if let Some(n) = est.narrow_link.as_ref() {
            assert_eq!(
                n.to_ttl,
                cfg.narrow_hop(),
                "{what}, seed {seed}: named TTL {} ({n:?})",
                n.to_ttl
            );
            assert_ne!(n.to_ttl, cfg.tight_hop(), "{what}, seed {seed}");
            named += 1;
        }
    }
    named
}

#[test]
fn the_narrow_link_is_named_ahead_of_the_tight_link() {
    // 20 runs each: the figures test names it in 15-20 of 20 (85-88 of
    // 100 in all) over three seed sets; the 80 % over all of them,
    // and no topology far below it.
    let mut all = 0;
    for (i, links) in narrow_ahead().into_iter().enumerate() {
        let named = narrow_named(&links, 600 + 20 * i as u64..620 + 20 * i as u64, "ahead");
        assert!(named >= 14, "topology {i}: named in {named} of 20 runs");
        all += named;
    }
    assert!(all >= 80, "named in {all} of 100 runs");
}

#[test]
fn a_shapers_burst_does_not_hide_the_narrow_link_ahead() {
    // The clamp check compares trains of the same length, so the head
    // start a shaper's bucket gives a short train is the same for both;
    // the candidate's capacity comes from two lengths at one rate.
    for (i, links) in shaped_ahead().into_iter().enumerate() {
        // 9-15 of 20 over three seed sets (0 of 20 before the clamp check
        // compared trains of one length): the probes of the second check
        // sit close to the 100 Mb/s link's available bandwidth here, where
        // a busy link spreads them too little to see in some runs, and
        // then nothing is named.
        let named = narrow_named(&links, 900 + 20 * i as u64..920 + 20 * i as u64, "shaped");
        assert!(named >= 8, "topology {i}: named in {named} of 20 runs");
    }
}

#[test]
fn a_narrow_link_behind_slow_hops_is_still_checked() {
    // The lab's five-router chain with the narrow link at hop 3: the hops
    // before it pass back-to-back trains at only 190 Mb/s, 3.2 times what
    // leaves the 60 Mb/s link.  dafa958's clamp check (the slow train at
    // 1.3 times that exit, the fast one at the geometric mean, a span of
    // 1.5) put the two trains 1.37 times apart, short of its span, and
    // named it in 0 of these 20 runs; 18 now.
    let mut tight = HopLink::new(100.0, 0.6);
    tight.cross_packet = Bytes(1500);
    let idle = HopLink::new;
    let links = vec![
        idle(190.0, 0.0),
        idle(190.0, 0.0),
        idle(60.0, 0.0),
        idle(1000.0, 0.0),
        tight,
        idle(1000.0, 0.0),
    ];
    let named = narrow_named(&links, 1200..1220, "behind slow hops");
    assert!(named >= 14, "named in {named} of 20 runs");
}

#[test]
fn the_narrow_link_ahead_is_an_idle_link_at_its_capacity() {
    let (cfg, est, _) = run(narrow_ahead()[2].clone(), 4);
    let n = est.narrow_link.expect("a narrow link");
    assert_eq!(n.to_ttl, cfg.narrow_hop());
    assert_eq!(n.capacity_from, CapacityFrom::Clamp);
    // Back to back and the two check trains alike left it at 100 Mb/s.
    assert!((97.0..=103.0).contains(&n.rate.mbps()), "{}", n.rate);
    let check = n.check_rate.expect("a check train").mbps();
    assert!((97.0..=103.0).contains(&check), "{check}");
    assert!(n.check_rate_in.unwrap().bps() < n.rate_in.bps() * 0.85);
    assert!(n.tight_ratio.unwrap() < 1.0 - super::narrow::SPREAD);
}

#[test]
fn the_narrow_link_is_named_after_the_tight_link() {
    for (i, links) in topologies().into_iter().take(2).enumerate() {
        for seed in 500 + 10 * i as u64..505 + 10 * i as u64 {
            let (cfg, est, _) = run(links.clone(), seed);
            let n = est.narrow_link.as_ref().expect("a narrow link");
            assert_eq!(n.to_ttl, cfg.narrow_hop(), "topology {i}");
            assert_eq!(n.capacity_from, CapacityFrom::Slowest);
            // Left at about the 100 Mb/s it can carry.
            assert!((90.0..=105.0).contains(&n.rate.mbps()), "{}", n.rate);
        }
    }
}

#[test]
fn a_narrow_link_that_is_the_tight_link_is_not_named_elsewhere() {
    // The steps ahead of it (a busy fast link; idle links of 120 and
    // 105 Mb/s) must not be taken for a narrower link, and a note says why
    // nothing was named.
    for (i, links) in narrow_is_tight().into_iter().enumerate() {
        let named = narrow_named(&links, 700 + 20 * i as u64..710 + 20 * i as u64, "equal");
        assert_eq!(named, 0, "topology {i}");
        let (_, est, _) = run(links, 3);
        assert!(
            est.notes
                .iter()
                .any(|n| n.contains("narrow link not told apart")),
            "{:?}",
            est.notes
        );
    }
}

#[test]
fn hops_list_addresses_round_trips_and_rates() {
    let (_, est, _) = run(topologies()[2].clone(), 7);
    assert_eq!(est.hops.len(), 4);
    for h in &est.hops {
        assert_eq!(h.address, Some(MultiHopPath::address(h.ttl)));
        let rtt = h.rtt.expect("a round trip").ms_f64();
        // 0.5 ms each way per link.
        assert!(rtt >= f64::from(h.ttl) - 0.01, "{rtt}");
    }
    assert!(est.hops[3].destination);
    // The back-to-back train leaves the 100 Mb/s narrow first link at about
    // 100 Mb/s.
    let r1 = est.hops[0].rate.unwrap().mbps();
    assert!((90.0..=110.0).contains(&r1), "{r1}");
    assert!(est.probe_bytes.get() > 0);
}

#[test]
fn a_silent_hop_is_reported_and_the_tight_link_still_found() {
    let mut links = topologies()[2].clone(); // tight at 3
    links[1].answers = false;
    let mut right = 0;
    for seed in 0..5 {
        let (_, est, _) = run(links.clone(), seed);
        assert_eq!(est.silent, vec![2]);
        assert_eq!(est.hops[1].address, None);
        if est.tight_link.as_ref().is_some_and(|t| t.to_ttl == 3) {
            right += 1;
        }
    }
    assert!(right >= 4, "{right} of 5");
}

#[test]
fn a_silent_tight_hop_is_bracketed_by_its_neighbours() {
    let mut links = topologies()[1].clone(); // tight at 2
    links[1].answers = false;
    let (_, est, _) = run(links, 3);
    let t = est.tight_link.expect("a tight link");
    assert_eq!((t.from_ttl, t.to_ttl), (1, 3));
}

#[test]
fn trains_faster_than_the_icmp_limit_lose_answers_not_gaps() {
    // No pause between trains: after the burst of 6 the routers answer one
    // marker a second, so hops go partial; no gap may come from one answer.
    let cfg = MultiHopConfig::new(topologies()[0].clone(), 5);
    let mut path = MultiHopPath::new(cfg);
    let mut spec = HopTrainSpec::pathneck_default();
    spec.markers = 4;
    let mut partial = 0;
    for _ in 0..6 {
        let obs = path.carry(&spec);
        let t = analyse(&obs);
        partial += t.partial.len();
        for g in &t.gaps {
            assert!(g.gap.ns() > 0);
        }
    }
    assert!(partial > 0);
}

#[test]
fn one_contrary_train_does_not_move_the_split() {
    let pts = [
        (30.0, false),
        (40.0, false),
        (20.0, true), // a Poisson burst spread a slow train
        (50.0, false),
        (60.0, true),
        (70.0, true),
    ];
    assert_eq!(super::split(&pts), (Some(50.0), Some(60.0)));
    assert_eq!(super::split(&[(10.0, true)]), (None, Some(10.0)));
    assert_eq!(super::split(&[(10.0, false)]), (Some(10.0), None));
    assert_eq!(super::split(&[]), (None, None));
}

#[test]
fn a_missing_answer_is_never_a_gap() {
    let spec = HopTrainSpec {
        markers: 2,
        ..HopTrainSpec::pathneck_default()
    };
    let n = spec.total_packets() as usize;
    let addr = MultiHopPath::address(1);
    let answer = |seq, us: i64| HopAnswer {
        seq,
        from: addr,
        kind: AnswerKind::TimeExceeded,
        received: TimeNs::from_ns(us * 1000),
    };
    let obs = HopsObservation {
        train: 0,
        spec,
        sent: (0..n).map(|i| Some(TimeNs::from_ns(i as i64))).collect(),
        // Hop 1: head and tail; hop 2: head only.
        answers: vec![
            answer(0, 100),
            answer(spec.marker_seq(Role::Tail, 1).unwrap(), 400),
            answer(1, 120),
        ],
        clock: ClockInfo {
            source: ClockSource::Simulated,
            resolution: DurationNs::from_ns(1),
        },
    };
    let t = analyse(&obs);
    assert_eq!(t.gaps.len(), 1);
    assert_eq!(t.gaps[0].ttl, 1);
    assert_eq!(t.gaps[0].gap, DurationNs::from_us(300));
    assert_eq!(t.partial, vec![2]);
}

#[test]
fn the_link_into_the_far_end_is_said_to_be_unmeasured() {
    let t = HopLink::new(300.0, 0.8);
    let (_, est, _) = run(vec![HopLink::new(1000.0, 0.2), t], 2);
    assert_eq!(est.destination_ttl, Some(2));
    assert!(est
        .notes
        .iter()
        .any(|n| n.contains("far end is not measured")));
    // Whatever it names, it is not the unmeasured last link.
    assert!(!est.tight_link.as_ref().is_some_and(|t| t.to_ttl >= 2));
}

#[test]
fn nothing_answering_gives_hops_but_no_tight_link() {
    let mut links = topologies()[0].clone();
    for l in &mut links {
        l.answers = false;
    }
    let (_, est, _) = run(links, 1);
    assert!(est.tight_link.is_none());
    assert!(!est.notes.is_empty());
}

/// The narrow link ahead of the tight one (100 Mb/s idle, then the 300 Mb/s
/// link at 80 %, A = 60 Mb/s), in several positions on paths of 3 to 5
/// routers (4 to 6 links; the link into the far end is never measured).
fn narrow_ahead() -> Vec<Vec<HopLink>> {
    let tight = HopLink::new(300.0, 0.8);
    let narrow = HopLink::new(100.0, 0.0);
    let fast = |load| HopLink::new(1000.0, load);
    vec![
        vec![narrow, tight, fast(0.3), fast(0.2)],
        topologies()[2].clone(),
        vec![fast(0.2), narrow, tight, fast(0.1)],
        topologies()[3].clone(),
        vec![fast(0.1), fast(0.3), narrow, fast(0.2), tight, fast(0.1)],
    ]
}

/// The lab's chains ahead of the tight link (`scripts/hops_lab.py`'s
/// topologies 2 and 7): links shaped by tbf with a burst of two 1514-byte
/// frames, 1500-byte Poisson cross traffic on the tight link, idle
/// unshaped links elsewhere.  The burst lets the first few packets of a
/// short train through an idle link early: a 60-packet back-to-back train
/// leaves a 70 Mb/s link at about 76 Mb/s, a 200-packet one at about 72.
fn shaped_ahead() -> Vec<Vec<HopLink>> {
    let shaped = |mbps: f64, load: f64| {
        let mut l = HopLink::new(mbps, load);
        l.cross_packet = Bytes(1500);
        l.burst = Bytes(2 * 1514);
        l
    };
    let fast = HopLink::new(1000.0, 0.0);
    vec![
        vec![shaped(70.0, 0.0), shaped(100.0, 0.5), fast, fast],
        vec![shaped(60.0, 0.0), fast, shaped(100.0, 0.6), fast, fast],
    ]
}

/// The narrow link *is* the tight link (100 Mb/s at 40 %, A = 60 Mb/s or
/// 86 Mb/s), with a step down ahead of it that must not be taken for a
/// narrower link: a busy fast link, an idle 120 Mb/s link, and an idle
/// 105 Mb/s link just wider than a lightly loaded 100 Mb/s tight one.
fn narrow_is_tight() -> Vec<Vec<HopLink>> {
    let fast = |load| HopLink::new(1000.0, load);
    vec![
        vec![fast(0.2), HopLink::new(100.0, 0.4), fast(0.3), fast(0.1)],
        vec![
            HopLink::new(120.0, 0.0),
            fast(0.3),
            HopLink::new(100.0, 0.4),
            fast(0.1),
        ],
        vec![
            HopLink::new(105.0, 0.0),
            fast(0.3),
            HopLink::new(100.0, 0.14),
            fast(0.1),
        ],
    ]
}

/// The synthetic figures in docs/hops.md: per topology and seed, whether
/// the tight link was named, the available bandwidth given for it, what
/// came of the narrow link, the probe bytes and the time, one JSON line per
/// topology (prefixed `HOPS_FIGURE `).  `scripts/hops_synthetic.py run`
/// runs this for its seed sets and writes the table and its prose; by hand:
/// `HOPS_SEED=N cargo test -p pathsonde-core --release --lib
/// hops::tests::figures -- --ignored --nocapture` (`HOPS_WHY=1` also prints
/// why a narrow link was not named, or what was named wrongly).
#[test]
#[ignore]
fn figures() {
    let all = topologies()
        .into_iter()
        .chain([lab_like()])
        .chain(narrow_ahead())
        .chain(narrow_is_tight())
        .chain(shaped_ahead());
    let base: u64 = std::env::var("HOPS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let why = std::env::var("HOPS_WHY").is_ok();
    for (i, links) in all.enumerate() {
        let cfg = MultiHopConfig::new(links.clone(), 0);
        let (tight, narrow) = (cfg.tight_hop(), cfg.narrow_hop());
        let mut runs = Vec::new();
        for seed in 0..20 {
            let (_, est, el) = run(links.clone(), base + 100 * i as u64 + seed);
            let available = est
                .tight_link
                .as_ref()
                .filter(|t| t.to_ttl == tight)
                .map(|t| t.available.mbps());
            let narrow_named = est.narrow_link.as_ref().map(|n| n.to_ttl);
            if why && narrow_named != Some(narrow) {
                println!(
                    "  row {i} seed {seed}: named {narrow_named:?}, tight {:?}: {:?}",
                    est.tight_link.as_ref().map(|t| t.to_ttl),
                    est.notes.iter().find(|n| n.contains("narrow"))
                );
            }
            runs.push(serde_json::json!({
                "tight_named": available.is_some(),
                "available_mbps": available,
                "narrow_named": narrow_named,
                "probe_bytes": est.probe_bytes.get(),
                "elapsed_s": el.secs_f64(),
            }));
        }
        let row = serde_json::json!({
            "row": i,
            "seed_base": base,
            "links": links.len(),
            "tight_hop": tight,
            "narrow_hop": narrow,
            "truth_available_mbps": links[usize::from(tight) - 1].available().mbps(),
            "runs": runs,
        });
        println!("HOPS_FIGURE {row}");
    }
}

#[test]
fn a_sender_that_cannot_reach_a_trains_rate_is_read_at_what_it_sent() {
    // The tight link has A = 60 Mb/s; the sender cannot pace above
    // 75 Mb/s, where the tight link spreads a train by about 5 %, too
    // little to see.  Trains asked for more leave at 75: read at the rate
    // asked, they would "pass" at 100 Mb/s and more and put the bracket
    // (a number the host made) far above the path's.
    let mut noted = 0;
    for seed in 0..5 {
        let mut cfg = MultiHopConfig::new(topologies()[1].clone(), 40 + seed);
        cfg.line_rate = crate::units::BitRate::from_mbps(75.0);
        let mut path = MultiHopPath::new(cfg);
        let mut m = Hops::new(HopsConfig::default());
        let est = path.run(&mut m).expect("an estimate");
        // The note, found the way `compare` finds it to count the run as
        // host-limited.
        if let Some(note) = est.host_pacing() {
            assert!(note.contains("host pacing"), "{note}");
            noted += 1;
        }
        if let Some(t) = &est.tight_link {
            assert!(t.available.mbps() <= 75.0 * 1.02, "seed {seed}: {t:?}");
            if let Some(p) = t.passed {
                assert!(p.mbps() <= 75.0 * 1.02, "seed {seed}: {t:?}");
            }
        }
    }
    // Runs whose scan never asked for more than the sender could do say
    // nothing of it; the others name the sender.
    assert!(noted >= 2, "the sender named in {noted} of 5 runs");
}

#[test]
fn the_fluid_reading_recovers_the_tight_links_capacity() {
    use super::narrow::fluid_capacity;
    // Trains at 100 Mb/s (an idle narrow link's rate) into a link of
    // capacity C carrying C − 60: out = C·100/(100 + C − 60).
    for c in [100.0, 150.0, 300.0] {
        let out = c * 100.0 / (100.0 + c - 60.0);
        let read = fluid_capacity(100.0, out, 60.0).unwrap();
        assert!((read - c).abs() < 1e-9 * c, "{c}: {read}");
    }
    // An available bandwidth read high reads the capacity narrower (the
    // safe side), and there is nothing to read without a step or headroom.
    let out = 300.0 * 100.0 / 340.0;
    assert!(fluid_capacity(100.0, out, 66.0).unwrap() < 300.0);
    assert!(fluid_capacity(100.0, 100.0, 60.0).is_none());
    assert!(fluid_capacity(100.0, 90.0, 100.0).is_none());
}

#[test]
fn the_clamp_check_needs_two_paced_trains_to_agree() {
    use super::analysis::HopGap;
    use super::narrow::{clamp, HopRates};
    let ip: std::net::IpAddr = [10, 0, 1, 1].into();
    let train = |rate_in: f64, out: f64| TrainHops {
        gaps: vec![HopGap {
            ttl: 1,
            from: ip,
            gap: DurationNs::from_ms(3),
            rate: crate::units::BitRate::from_mbps(out),
            rate_in: Some(crate::units::BitRate::from_mbps(rate_in)),
            prev_ttl: 0,
            sent_rate: None,
        }],
        ..TrainHops::default()
    };
    // Back to back in at 1 Gb/s, out at 77 Mb/s (the lab's fast reading of
    // an idle 70 Mb/s tbf).
    let k = HopRates {
        ttl: 1,
        prev_ttl: 0,
        rate_in: Some(1e9),
        rate: 77e6,
        rate_min: 76e6,
        rate_max: 78e6,
    };
    let r = |m: f64| crate::units::BitRate::from_mbps(m);
    let (fast, slow) = (train(277.0, 74.0), train(100.0, 73.6));
    assert!(clamp(&k, (r(277.0), &fast), (r(100.0), &slow)).is_ok());
    // A busy link lets the slower train through slower.
    let busy = train(100.0, 66.0);
    let why = clamp(&k, (r(277.0), &fast), (r(100.0), &busy)).unwrap_err();
    assert!(why.contains("moves with its input"), "{why}");
    // Two inputs too close together test nothing.
    let near = train(240.0, 74.0);
    assert!(clamp(&k, (r(277.0), &fast), (r(240.0), &near)).is_err());
    // What a check train came in at is its own reading (`rate_in`: its
    // send stamps and its exits from the hops before): a hop ahead that let
    // the slower one out at 82 leaves the two too close together.
    let (fast, slow) = (train(250.0, 74.0), train(82.0, 73.6));
    let why = clamp(&k, (r(277.0), &fast), (r(100.0), &slow)).unwrap_err();
    assert!(why.contains("times apart"), "{why}");
    assert!(!why.contains("host-limited"), "{why}");
    // With no reading ahead (the first hop, its markers stamped in one
    // instant) the send stamps stand for it.
    let stamped = |sent: f64, out: f64| {
        let mut t = train(sent, out);
        t.gaps[0].rate_in = None;
        t.gaps[0].sent_rate = Some(r(sent));
        t
    };
    // Two trains the sender swapped still span the test: what came in
    // decides, not the plan's order ...
    let (fast, slow) = (stamped(99.0, 74.0), stamped(173.0, 73.6));
    let c = clamp(&k, (r(277.0), &fast), (r(100.0), &slow)).unwrap();
    assert_eq!((c.rate_in, c.rate), (173e6, 73.6e6));
    // ... and a busy link is still told by its exits, in either order.
    let busy = stamped(173.0, 80.0);
    let why = clamp(&k, (r(277.0), &fast), (r(100.0), &busy)).unwrap_err();
    assert!(why.contains("moves with its input"), "{why}");
    // A sender that sent both at one rate is named.
    let (fast, slow) = (stamped(101.0, 74.0), stamped(99.0, 73.6));
    let why = clamp(&k, (r(277.0), &fast), (r(100.0), &slow)).unwrap_err();
    assert!(why.contains("could not pace them: host-limited"), "{why}");
}

#[test]
fn a_step_is_placed_after_the_nearest_hop_any_train_measured() {
    use super::analysis::HopGap;
    use super::narrow::profile;
    let gap = |ttl: u8, prev_ttl: u8, rate: f64, rate_in: f64| HopGap {
        ttl,
        from: [10, 0, ttl, 1].into(),
        gap: DurationNs::from_ms(3),
        rate: crate::units::BitRate::from_mbps(rate),
        rate_in: Some(crate::units::BitRate::from_mbps(rate_in)),
        prev_ttl,
        sent_rate: None,
    };
    // The first train lost TTLs 1 and 2's answers, so it saw the step to
    // 60 Mb/s only as "since the sender"; the others measured TTL 2 at
    // 200 Mb/s.  The step is on the link from TTL 2 (the lab's run 15 of
    // topology 10 at dafa958 named `0 → 3`, from the first train alone).
    let trains = [
        TrainHops {
            gaps: vec![gap(3, 0, 60.0, 900.0)],
            ..TrainHops::default()
        },
        TrainHops {
            gaps: vec![gap(2, 1, 200.0, 210.0), gap(3, 2, 61.0, 200.0)],
            ..TrainHops::default()
        },
        TrainHops {
            gaps: vec![gap(2, 0, 205.0, 900.0), gap(3, 2, 59.0, 205.0)],
            ..TrainHops::default()
        },
    ];
    let p = profile(&trains);
    let k = p.iter().find(|h| h.ttl == 3).unwrap();
    assert_eq!(k.prev_ttl, 2);
    assert_eq!(p.iter().find(|h| h.ttl == 2).unwrap().prev_ttl, 1);
}

#[test]
fn an_exit_read_faster_than_the_train_came_in_is_its_input() {
    use super::analysis::HopGap;
    use super::narrow::profile;
    let mbps = crate::units::BitRate::from_mbps;
    let gap = |ttl: u8, rate: f64, rate_in: Option<f64>| HopGap {
        ttl,
        from: [10, 0, ttl, 1].into(),
        gap: DurationNs::from_ms(3),
        rate: mbps(rate),
        rate_in: rate_in.map(mbps),
        prev_ttl: ttl - 1,
        sent_rate: None,
    };
    let train = |third: f64| TrainHops {
        gaps: vec![
            gap(1, 500.0, None),
            gap(2, 85.0, Some(500.0)),
            gap(3, third, Some(85.0)),
        ],
        ..TrainHops::default()
    };
    // The lab's case: one back-to-back train's answers at the tight hop
    // (behind an 85 Mb/s link) arrived together and read 7 Gb/s.
    let p = profile(&[train(7000.0), train(74.0)]);
    let j = p.iter().find(|h| h.ttl == 3).unwrap();
    assert!(j.rate <= 85e6 && j.rate_max <= 85e6, "{j:?}");
    // That exit bounds the tight link's capacity in the fluid reading of
    // `available`: scan trains spread from 75 to 70 Mb/s by a 100 Mb/s
    // link carrying 30 read about 68 with it; with 3.5 Gb/s, nothing.
    let scan_train = |into: f64, out: f64| {
        let t = TrainHops {
            gaps: vec![gap(3, out, Some(into))],
            ..TrainHops::default()
        };
        (mbps(into), t)
    };
    let scan = [
        scan_train(75.0, 70.0),
        scan_train(80.0, 72.7),
        scan_train(90.0, 75.0),
    ];
    let a = fluid_available(&scan, 3, 75e6, j.rate);
    assert!((55e6..=75e6).contains(&a), "{a}");
    assert_eq!(fluid_available(&scan, 3, 75e6, 3.5e9), 0.0);
}

/// Every paced train is planned at a positive rate.  On this path (the
/// render crate's: a busy 1 Gb/s first link taken for the candidate, the
/// 100 Mb/s narrow link silent) the no-wider bound was negative and the
/// probes were planned at −1.01 Gb/s; they now take the rate read after
/// the long check train, or are not sent.
#[test]
fn no_train_is_planned_at_a_rate_that_is_not_positive() {
    struct Recording(Hops, Vec<BitRate>);
    impl HopMethod for Recording {
        fn name(&self) -> &'static str {
            "recording"
        }
        fn next_plan(&mut self) -> HopsPlan {
            let plan = self.0.next_plan();
            if let HopsPlan::Train(s) = &plan {
                self.1.extend(s.load_rate);
            }
            plan
        }
        fn observe(&mut self, obs: &HopsObservation) {
            self.0.observe(obs)
        }
        fn estimate(&self) -> Option<HopsEstimate> {
            self.0.estimate()
        }
    }
    let mut path = MultiHopPath::new(MultiHopConfig::silent_narrow_behind_a_busy_first_hop(4));
    let mut m = Recording(Hops::new(HopsConfig::default()), Vec::new());
    let e = path.run(&mut m).unwrap();
    assert!(m.1.len() >= 8, "{:?}", m.1);
    assert!(m.1.iter().all(|r| r.bps() > 0.0), "{:?}", m.1);
    assert_eq!(e.tight_link.unwrap().to_ttl, 2);
}

#[test]
fn the_narrow_link_after_is_read_from_the_trains_it_slowed() {
    use super::analysis::HopGap;
    use super::narrow::{profile, stepped_trains};
    let mbps = crate::units::BitRate::from_mbps;
    let gap = |ttl: u8, rate: f64, rate_in: f64| HopGap {
        ttl,
        from: [10, 0, ttl, 1].into(),
        gap: DurationNs::from_ms(4),
        rate: mbps(rate),
        rate_in: Some(mbps(rate_in)),
        prev_ttl: ttl - 1,
        sent_rate: None,
    };
    let train = |tight: f64, narrow: f64| TrainHops {
        gaps: vec![gap(2, tight, 370.0), gap(3, narrow, tight)],
        ..TrainHops::default()
    };
    // The lab's run: one train left the tight link at 77 Mb/s and the
    // 60 Mb/s link after it slowed it to 59; the other had been spread to
    // 41 by the tight link's cross traffic and crossed the narrow one
    // unchanged.  The per-hop medians read the narrow link at 49.5.
    let trains = [train(77.0, 59.0), train(41.0, 40.0)];
    let p = profile(&trains);
    assert!(p[1].rate < 52e6, "the medians mix the two kinds: {p:?}");
    let (rate_in, rate) = stepped_trains(&trains, 3).unwrap();
    assert!((58e6..=60e6).contains(&rate), "{rate}");
    assert!((76e6..=78e6).contains(&rate_in), "{rate_in}");
    // A train that came in faster and was not slowed contradicts it.
    let why = stepped_trains(
        &[train(80.0, 60.0), train(90.0, 88.0), train(95.0, 93.0)],
        3,
    )
    .unwrap_err();
    assert!(why.contains("slowed 1 of the 3"), "{why}");
    // No train slowed there: nothing to read.
    assert!(stepped_trains(&[train(41.0, 40.0)], 3).is_err());
}
