//! Unit tests of FAC²'s control logic; the accuracy tests against the
//! synthetic path live in `tests/fac2_fluid.rs`.

use super::*;
use crate::methods::testpaths::{
    assert_blind_coverage, assert_flagged_or_explained, poisson, rel_err, run, settings,
};
use crate::synthetic::{drive, FluidPath, FluidPathConfig};
use crate::units::Bytes;

fn path(c_mbps: f64, x_mbps: f64) -> FluidPath {
    FluidPath::new(FluidPathConfig::new(
        BitRate::from_mbps(c_mbps),
        BitRate::from_mbps(x_mbps),
    ))
}

#[test]
fn the_opening_is_the_queue_budget_at_max_rate_and_plans_are_idempotent() {
    let mut m = Fac2::new(Fac2Config::default());
    let a = m.next_plan();
    assert_eq!(a, m.next_plan());
    let ProbePlan::Train(t) = a else {
        panic!("not a train: {a:?}");
    };
    assert_eq!(t.rate, BitRate::from_gbps(1.0));
    assert!(t.total_bytes().get() <= 32 * 1024, "{t:?}");
    assert!(m.estimate().is_none());
}

#[test]
fn an_exact_path_goes_opening_feedback_lower_then_four_near_trains() {
    let mut m = Fac2::new(Fac2Config::default());
    let mut p = path(100.0, 60.0);
    let e = drive(&mut m, &mut p, 100).unwrap();
    assert_eq!(m.stop_reason(), Some(Fac2Stop::Converged));
    let roles: Vec<Role> = m.trains.iter().map(|t| t.role).collect();
    assert_eq!(
        roles,
        [
            Role::Opening,
            Role::Feedback,
            Role::Lower,
            Role::Near,
            Role::Near,
            Role::Near,
            Role::Near
        ]
    );
    assert!((e.available.mbps() - 40.0).abs() < 0.05, "{}", e.available);
    assert!(e.converged);
    // Each train's reading is in the trace.
    assert_eq!(e.trains[2].reading.as_deref(), Some("lower"));
}

#[test]
fn the_feedback_step_contracts_by_the_utilisation() {
    // Classic FAC²: the second train goes at the first one's receiving
    // rate, and (r − A) / (R − A) = X / (R + X).
    let mut m = Fac2::new(Fac2Config::default());
    let mut p = path(100.0, 80.0);
    for i in 0..2 {
        if let ProbePlan::Train(t) = m.next_plan() {
            let obs = p.carry_train(&t, i);
            m.observe(&obs);
        }
    }
    let (t0, t1) = (&m.trains[0], &m.trains[1]);
    assert_eq!(t1.role, Role::Feedback);
    let r0 = t0.recv_bps.unwrap() / 1e6;
    assert!((t1.sent_bps / 1e6 - r0).abs() / r0 < 1e-3);
    let contraction = (r0 - 20.0) / (t0.sent_bps / 1e6 - 20.0);
    let want = 80.0 / (t0.sent_bps / 1e6 + 80.0);
    assert!((contraction - want).abs() < 1e-3, "{contraction} vs {want}");
}

#[test]
fn no_train_adds_more_than_its_budget_to_the_queue() {
    // On fluid paths the queue a train leaves is exactly `(R − A)·T`.
    for (c, load) in [
        (100.0, 0.1),
        (100.0, 0.5),
        (300.0, 0.3),
        (300.0, 0.9),
        (1000.0, 0.7),
    ] {
        let mut m = Fac2::new(Fac2Config::default());
        let mut p = path(c, c * load);
        drive(&mut m, &mut p, 100).unwrap();
        let a = c * (1.0 - load) * 1e6;
        for t in &m.trains {
            let excess = (t.sent_bps - a).max(0.0) * t.secs / 8.0;
            let budget = match t.role {
                Role::Near => 64.0 * 1024.0,
                _ => 32.0 * 1024.0,
            };
            // One packet of slack for whole cars.
            assert!(
                excess <= budget + 1500.0,
                "C={c} U={load}: {} train at {:.1} Mb/s for {:.1} ms adds {excess:.0} B",
                t.role.describe(),
                t.sent_bps / 1e6,
                t.secs * 1e3
            );
        }
        assert!(
            p.peak_backlog().get() <= 64 * 1024 + 1500,
            "{}",
            p.peak_backlog()
        );
    }
}

#[test]
fn observations_after_done_are_ignored() {
    let mut m = Fac2::new(Fac2Config::default());
    let mut p = path(100.0, 50.0);
    // The runner's host verdict rides on the run's answer, not the method's.
    let mut e = drive(&mut m, &mut p, 100).unwrap();
    e.host_evidence = None;
    let spec = m
        .cfg
        .train_for(BitRate::from_mbps(10.0), m.resolution, 0.01);
    let obs = p.carry_train(&spec, 99);
    m.observe(&obs);
    assert_eq!(m.estimate().unwrap(), e);
    assert_eq!(m.next_plan(), ProbePlan::Done);
}

#[test]
fn a_coarse_observed_clock_enlarges_the_near_trains_cars() {
    // A 10 µs receive clock: cars of near trains start 500 µs apart, or as
    // near that as six cars in a quarter of the byte budget allow (the
    // short opening trains keep six cars at the least).
    let mut m = Fac2::new(Fac2Config::default());
    let cfg = FluidPathConfig {
        recv_clock: crate::observation::ClockInfo {
            source: crate::observation::ClockSource::UserSpace,
            resolution: DurationNs::from_us(10),
        },
        ..FluidPathConfig::new(BitRate::from_gbps(1.0), BitRate::from_mbps(200.0))
    };
    let mut p = FluidPath::new(cfg);
    let mut near = 0;
    for i in 0..40 {
        let ProbePlan::Train(t) = m.next_plan() else {
            break;
        };
        if i > 2 {
            near += 1;
            let interval = t.car_interval().unwrap();
            assert!(interval >= DurationNs::from_us(300), "{interval} {t:?}");
        }
        m.observe(&p.carry_train(&t, i));
    }
    assert!(near >= 2);
    let e = m.estimate().unwrap();
    assert!(
        (e.available.mbps() / 800.0 - 1.0).abs() < 0.02,
        "{}",
        e.available
    );
}

#[test]
fn blind_on_poisson_paths_the_band_holds_the_truth() {
    // 20 seeds at 30 % and 70 %, behind a FIFO and the lab's token bucket:
    // median |error| under 5 % and the band holding the truth in 90 %.
    assert_blind_coverage("fac2", 0.05);
}

#[test]
fn a_known_capacity_fixes_the_slope() {
    let mut errs = Vec::new();
    for seed in 1..=5 {
        let mut m = crate::methods::registry::build(
            crate::method_name::MethodName::Fac2,
            &settings(Some(300.0)),
        );
        let (e, truth) = run(m.as_mut(), poisson(300.0, 0.5, seed));
        let e = e.expect("an estimate");
        assert_eq!(e.capacity, Some(BitRate::from_mbps(300.0)));
        errs.push(rel_err(&e, truth));
    }
    errs.sort_by(f64::total_cmp);
    assert!(
        errs[2] < 0.05,
        "median |error| at 50 % with C known: {errs:?}"
    );
}

#[test]
fn a_path_that_drops_everything_gives_a_reason_not_a_number() {
    let mut m = Fac2::new(Fac2Config::default());
    let e = drive(
        &mut m,
        &mut FluidPath::new(FluidPathConfig {
            queue_limit: Some(Bytes::ZERO),
            ..FluidPathConfig::new(BitRate::from_mbps(100.0), BitRate::from_mbps(10.0))
        }),
        100,
    );
    assert_flagged_or_explained(e, &m, "delivered too little");
}

/// The progress a bar's ETA reads: below 1 while FAC² still sends, 1 once it
/// has stopped, and climbing with the trains on a noisy path.
#[test]
fn progress_climbs_and_reaches_one_only_when_done() {
    let mut m = Fac2::new(Fac2Config::default());
    assert!(m.progress().is_some_and(|p| p < 0.2), "{:?}", m.progress());
    let mut p = FluidPath::new(poisson(300.0, 0.4, 7));
    let mut seen = Vec::new();
    for index in 0..200 {
        let plan = m.next_plan();
        if plan.schedule().is_none() {
            break;
        }
        let obs = crate::path::ProbePath::carry(&mut p, &plan, index).unwrap();
        m.observe(&obs);
        seen.push(m.progress().unwrap());
    }
    assert!(m.stop_reason().is_some());
    assert_eq!(seen.last(), Some(&1.0));
    let before_last = &seen[..seen.len() - 1];
    assert!(
        before_last.iter().all(|&f| (0.0..1.0).contains(&f)),
        "{seen:?}"
    );
    assert!(before_last.len() >= 3, "{seen:?}");
    assert!(
        before_last[before_last.len() - 1] > before_last[0],
        "{seen:?}"
    );
}

/// `--precision` and `--max-bytes` (issue 28): on busy Poisson paths, a
/// tighter precision with a larger budget gives narrower bands and smaller
/// errors than the default, says it reached the target when it did, and a
/// tighter precision on the default budget stops at the bytes, says so,
/// and never claims convergence.  A method that ignored the settings (the
/// same band, or a band narrower than its data supports) fails this.
#[test]
fn precision_and_budget_are_honoured_and_reported() {
    use crate::estimate::Stopped;
    use crate::methods::registry::{build, MethodSettings};
    let tight = MethodSettings {
        precision: Some(0.02),
        max_bytes: Some(Bytes(32_000_000)),
        ..settings(None)
    };
    let short = MethodSettings {
        precision: Some(0.02),
        ..settings(None)
    };
    let (mut hw_default, mut hw_tight) = (Vec::new(), Vec::new());
    let (mut err_default, mut err_tight) = (Vec::new(), Vec::new());
    let (mut reached, mut covered) = (0, 0);
    for seed in 1..=8 {
        let cfg = poisson(300.0, 0.7, seed);
        let half = |e: &crate::estimate::Estimate| {
            (e.high.expect("a closed band").bps() - e.low.bps()) / 2.0 / e.available.bps()
        };
        let mut m = build(crate::method_name::MethodName::Fac2, &settings(None));
        let (e, truth) = run(m.as_mut(), cfg.clone());
        let e = e.expect("an estimate");
        hw_default.push(half(&e));
        err_default.push(rel_err(&e, truth).abs());

        let mut m = build(crate::method_name::MethodName::Fac2, &tight);
        let (e, truth) = run(m.as_mut(), cfg.clone());
        let e = e.expect("an estimate");
        hw_tight.push(half(&e));
        err_tight.push(rel_err(&e, truth).abs());
        println!(
            "seed {seed}: {:?} after {} B, {} trains, ±{:.3}, err {:+.3}",
            e.stopped,
            e.cost.bytes,
            e.cost.trains,
            half(&e),
            rel_err(&e, truth)
        );
        if e.stopped == Some(Stopped::TargetReached) {
            assert!(e.converged && half(&e) <= 0.02 + 1e-9, "{e:?}");
            reached += 1;
        }
        covered += usize::from(e.band_covers(BitRate::from_bps(truth)));
        assert!(e.cost.bytes.get() <= 32_000_000 + 200_000);

        let mut m = build(crate::method_name::MethodName::Fac2, &short);
        let (e, _) = run(m.as_mut(), cfg);
        let e = e.expect("an estimate");
        if e.stopped != Some(Stopped::TargetReached) {
            assert!(!e.converged, "converged without reaching ±2 %: {e:?}");
            assert!(
                matches!(e.stopped, Some(Stopped::ByteBudget | Stopped::ProbeCap)),
                "{:?}",
                e.stopped
            );
        }
        assert!(e.cost.bytes.get() <= 2_200_000, "{}", e.cost.bytes);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (hd, ht) = (med(&mut hw_default), med(&mut hw_tight));
    let (ed, et) = (med(&mut err_default), med(&mut err_tight));
    println!("70 % Poisson: half-width {hd:.3} → {ht:.3}, |error| {ed:.3} → {et:.3}, {reached}/8 reached ±2 %, {covered}/8 covered");
    // 16× the bytes: the band narrows (about as 1/√bytes at best), the
    // error does not grow, and the wider bands still cover the truth.  At
    // 70 % load ±2 % is more than 32 MB supports on this path: the runs say
    // so (stopped by the byte budget, unconverged) rather than claim it.
    assert!(ht < 0.6 * hd, "the band did not narrow: {hd} → {ht}");
    assert!(et <= ed.max(0.03), "the error grew: {ed} → {et}");
    assert!(covered >= 6, "{covered} of 8 bands covered the truth");
    let _ = reached;
}

/// SLoPS spends no more than `--max-bytes` (a fleet at most past it) and
/// says the budget stopped it; `--precision` sets its bracket's resolution.
#[test]
fn slops_honours_the_byte_budget_and_the_precision() {
    use crate::estimate::Stopped;
    use crate::methods::registry::{build, MethodSettings};
    let budget = MethodSettings {
        max_bytes: Some(Bytes(4_000_000)),
        ..settings(None)
    };
    let mut m = build(crate::method_name::MethodName::Slops, &budget);
    let (e, _) = run(m.as_mut(), poisson(300.0, 0.7, 3));
    let e = e.expect("an estimate");
    assert!(e.cost.bytes.get() <= 4_000_000, "{}", e.cost.bytes);
    assert!(matches!(
        e.stopped,
        Some(Stopped::ByteBudget | Stopped::TargetReached)
    ));
    let mut unlimited = build(crate::method_name::MethodName::Slops, &settings(None));
    let (u, _) = run(unlimited.as_mut(), poisson(300.0, 0.7, 3));
    let u = u.expect("an estimate");
    println!(
        "SLoPS at 70 %: {:?} after {} with a 4 MB budget, {:?} after {} without",
        e.stopped, e.cost.bytes, u.stopped, u.cost.bytes
    );
    assert!(u.stopped.is_some());
    if e.stopped == Some(Stopped::ByteBudget) {
        assert!(!e.converged);
        assert!(u.cost.bytes > e.cost.bytes, "the budget changed nothing");
    }
}

/// Mean signed error of default FAC², blind, over `seeds` runs of `cfg`.
fn mean_signed(cfg: impl Fn(u64) -> FluidPathConfig, seeds: u64) -> (f64, f64) {
    let mut signed = Vec::new();
    for seed in 1..=seeds {
        let mut m = Fac2::new(Fac2Config::default());
        if let (Some(e), truth) = run(&mut m, cfg(seed)) {
            signed.push(e.available.bps() / truth - 1.0);
        }
    }
    assert_eq!(signed.len() as u64, seeds, "an estimate every run");
    let abs: Vec<f64> = signed.iter().map(|x| x.abs()).collect();
    (
        crate::stats::mean(&signed).unwrap(),
        crate::stats::median(&abs).unwrap(),
    )
}

/// Issue 28's lean: busy Poisson paths read high.  The queue's reflection
/// correction assumed every train met an empty queue; at 90 % load the
/// cross traffic alone keeps one standing, which absorbs the train's early
/// dips, and the correction overshot: over 40 seeds the mean signed error
/// was +4.6 % (FIFO) and +5.4 % (token bucket).  With the standing queue in
/// the model (`fit::reflection_bias`) it is −0.5 % and +2.2 % over 80
/// seeds; the bar is ±3 % over 40.
#[test]
fn busy_poisson_paths_read_without_a_lean() {
    use crate::methods::testpaths::poisson_bucket;
    for (kind, f) in [
        ("fifo", poisson as fn(f64, f64, u64) -> FluidPathConfig),
        ("bucket", poisson_bucket),
    ] {
        let (lean, median) = mean_signed(|seed| f(300.0, 0.9, seed), 40);
        assert!(lean.abs() <= 0.03, "{kind} 90 %: mean signed {lean:+.3}");
        assert!(median <= 0.09, "{kind} 90 %: median |err| {median:.3}");
    }
}

/// A band FAC² calls converged must hold the truth on busy paths too.  Near
/// A a train meets an empty queue now and then, which hides part of the
/// cross traffic's variation from the near trains' scatter; a band drawn
/// from that scatter alone stopped early on runs whose near trains all sat
/// just below A and read it low.  Over seeds 1–60 at 50 % Poisson load, 4
/// (FIFO) and 7 (bucket) of the runs that said converged missed the truth
/// before the band's noise scale had the opening's busy-queue gaps as its
/// floor (`readout::gap_noise`); at 70 %, 2 and 2.
#[test]
fn converged_bands_on_busy_paths_hold_the_truth() {
    use crate::methods::testpaths::poisson_bucket;
    for (kind, f) in [
        ("fifo", poisson as fn(f64, f64, u64) -> FluidPathConfig),
        ("bucket", poisson_bucket),
    ] {
        for load in [0.5, 0.7] {
            let (mut estimates, mut held, mut converged, mut missed) = (0, 0, 0, Vec::new());
            for seed in 1..=60 {
                let mut m = Fac2::new(Fac2Config::default());
                let (e, truth) = run(&mut m, f(300.0, load, seed));
                let Some(e) = e else { continue };
                estimates += 1;
                let holds = e.band_holds(BitRate::from_bps(truth));
                held += usize::from(holds);
                converged += usize::from(e.converged);
                if e.converged && !holds {
                    missed.push((seed, e.available.bps() / truth - 1.0));
                }
            }
            assert!(estimates >= 58, "{kind} {load}: {estimates} estimates");
            assert!(
                missed.len() <= 1,
                "{kind} {load}: {} of {converged} converged bands missed: {missed:?}",
                missed.len()
            );
            assert!(
                held * 100 >= estimates * 95,
                "{kind} {load}: {held} of {estimates} held"
            );
        }
    }
}

/// Exploration of FAC²'s lean at high load (issue 28 item 3):
/// `cargo test -p pathsonde-core --release --lib -- --ignored --nocapture fac2_lean_table`.
#[test]
#[ignore]
fn fac2_lean_table() {
    use crate::methods::testpaths::poisson_bucket;
    let seeds: u64 = std::env::var("SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let jitter: i64 = std::env::var("JITTER_NS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    for (kind, f) in [
        ("fifo", poisson as fn(f64, f64, u64) -> FluidPathConfig),
        ("bucket", poisson_bucket),
    ] {
        for load in [0.3, 0.5, 0.7, 0.9] {
            let mut signed = Vec::new();
            let mut wnom = Vec::new();
            let (mut held, mut converged, mut converged_missed) = (0, 0, 0);
            for seed in 1..=seeds {
                let mut cfg = f(300.0, load, seed);
                cfg.send_jitter = DurationNs::from_ns(jitter);
                let nominal = cfg.available().bps();
                let mut m = Fac2::new(Fac2Config::default());
                let (e, truth) = run(&mut m, cfg);
                if let Some(e) = e {
                    signed.push(e.available.bps() / truth - 1.0);
                    wnom.push(truth / nominal - 1.0);
                    let holds = e.band_holds(BitRate::from_bps(truth));
                    held += usize::from(holds);
                    converged += usize::from(e.converged);
                    converged_missed += usize::from(e.converged && !holds);
                }
            }
            let abs: Vec<f64> = signed.iter().map(|x: &f64| x.abs()).collect();
            let up = signed.iter().filter(|&&x| x > 0.0).count();
            println!(
                "{kind} {:.0} %: n {} median |err| {:.1} %, mean signed {:+.2} %, high {up}, window/nominal {:+.2} %, band held {held}, converged {converged} (missed {converged_missed})",
                load * 100.0,
                signed.len(),
                crate::stats::quantile(&abs, 0.5).unwrap_or(f64::NAN) * 100.0,
                crate::stats::mean(&signed).unwrap_or(f64::NAN) * 100.0,
                crate::stats::mean(&wnom).unwrap_or(f64::NAN) * 100.0,
            );
        }
    }
}

/// FAC² as `abw --packet-size 9000 --max-rate 5G` builds it.
fn jumbo_fac2() -> Box<dyn Method + Send> {
    use crate::methods::registry::{self, MethodName, MethodSettings};
    registry::build(
        MethodName::Fac2,
        &MethodSettings {
            max_rate: BitRate::from_gbps(5.0),
            packet_size: Bytes(9000),
            ..MethodSettings::default()
        },
    )
}

/// Jumbo probes on a 1 Gb/s path whose cross traffic is Poisson of
/// 9000-byte packets, behind the lab's two-frame token bucket: the queue
/// budget's 32 KiB is four probe packets, too few for the fluid line's far
/// trains to average the cross packets between them, so the line's C is
/// not reported (before, it read 0.66–1.52 times the truth here, +27 to
/// +32 % in the lab's jumbo cell) and A's band carries C's uncertainty.
#[test]
fn short_far_trains_leave_c_unreported_not_wrong() {
    let (mut runs, mut held) = (0, 0);
    for load in [0.3, 0.7] {
        for seed in 0..20u64 {
            let mut cfg = poisson(1000.0, load, 500 + seed);
            cfg.poisson_cross = Some(Bytes(9000));
            cfg.bucket = Some(Bytes(18000));
            cfg.queue_limit = Some(Bytes(1024 * 1024));
            let (e, truth) = run(jumbo_fac2().as_mut(), cfg);
            let e = e.expect("an estimate");
            assert!(
                e.capacity.is_none(),
                "load {load}, seed {seed}: C {:?} from 4-packet trains",
                e.capacity
            );
            assert!(
                e.notes
                    .iter()
                    .any(|n| n.starts_with("capacity not reported")),
                "load {load}, seed {seed}: {:?}",
                e.notes
            );
            runs += 1;
            held += usize::from(e.band_covers(BitRate::from_bps(truth)));
        }
    }
    // 39 of 40 here; 37 without C's error in the band.
    assert!(
        held * 10 >= runs * 9,
        "band held the truth in {held} of {runs}"
    );
}

/// The same jumbo probes where the cross traffic is of 1500-byte packets
/// (a path whose MTU is 9000 but whose traffic is not): A reads as well as
/// with 1500-byte probes, and C, from the same short trains, is still not
/// reported.
#[test]
fn jumbo_probes_over_small_cross_packets_read_a_closely() {
    let mut errs = Vec::new();
    let mut held = 0;
    for seed in 0..20u64 {
        let mut cfg = poisson(1000.0, 0.3, 500 + seed);
        cfg.queue_limit = Some(Bytes(1024 * 1024));
        let (e, truth) = run(jumbo_fac2().as_mut(), cfg);
        let e = e.expect("an estimate");
        held += usize::from(e.band_covers(BitRate::from_bps(truth)));
        errs.push(rel_err(&e, truth));
    }
    let median = crate::stats::median(&errs).unwrap();
    assert!(median < 0.03, "median |error| {median}");
    assert!(held >= 19, "band held the truth in {held} of 20");
}

/// The same jumbo path at 30 %: the lab's two-frame bucket lets a 6-packet
/// feedback train through untouched above A (even above C), and that short
/// train must not become A's floor once longer trains arrived well below
/// its rate (`CONTRADICTED`).  Before, every near train then went above the
/// link: p90 |error| 44 %, median half-width ±37 % over these 20 seeds;
/// with the rule about 11 % and ±23 % (63c8f29 and the rule).
#[test]
fn a_short_train_a_longer_one_contradicts_is_no_floor() {
    let (mut errs, mut halves) = (Vec::new(), Vec::new());
    for seed in 0..20u64 {
        let mut cfg = poisson(1000.0, 0.3, 500 + seed);
        cfg.poisson_cross = Some(Bytes(9000));
        cfg.bucket = Some(Bytes(18000));
        cfg.queue_limit = Some(Bytes(1024 * 1024));
        let (e, truth) = run(jumbo_fac2().as_mut(), cfg);
        let e = e.expect("an estimate");
        errs.push(rel_err(&e, truth));
        halves.push(e.high.map_or(f64::INFINITY, |h| {
            (h.bps() - e.low.bps()) / 2.0 / e.available.bps()
        }));
    }
    let p90 = crate::stats::quantile(&errs, 0.9).unwrap();
    let half = crate::stats::median(&halves).unwrap();
    assert!(p90 < 0.2, "p90 |error| {p90}: {errs:?}");
    assert!(half < 0.3, "median half-width {half}");
}

/// A slow sender whose trains a busy receiving host delivered in a bunch:
/// every train left at 70 % of its target and arrived three times faster
/// than it left, with nothing lost.
fn bunched_by_a_slow_host(obs: &mut Observation) {
    let (Some(t0), Some(r0)) = (
        obs.packets.first().map(|p| p.sent),
        obs.packets.first().and_then(|p| p.received),
    ) else {
        return;
    };
    for p in &mut obs.packets {
        let left = p.sent.since(t0).ns() as f64 / 0.7;
        p.sent = t0 + DurationNs::from_ns(left as i64);
        p.received = Some(r0 + DurationNs::from_ns((left / 3.0) as i64));
    }
}

#[test]
fn a_lower_bound_is_never_above_what_the_sender_sent() {
    // The clean-relay CI run at ff8ef46 (debug build, busy machine,
    // `--max-rate 100M`): the sender reached 70 Mb/s, the relay's thread
    // forwarded the trains in bunches, and FAC² read "A ≥ 211 Mb/s" from
    // the bunched arrival.  The path carried what was sent, no more.
    let cfg = Fac2Config::default().with_max_rate(BitRate::from_mbps(100.0));
    let mut m = Fac2::new(cfg);
    let mut p = path(1000.0, 0.0);
    let mut fastest_sent: f64 = 0.0;
    for i in 0..50 {
        let ProbePlan::Train(spec) = m.next_plan() else {
            break;
        };
        let mut obs = p.carry_train(&spec, i);
        bunched_by_a_slow_host(&mut obs);
        fastest_sent = fastest_sent.max(spec.rate.bps() * 0.7);
        m.observe(&obs);
    }
    assert_eq!(m.stop_reason(), Some(Fac2Stop::LowerBound));
    let e = m.estimate().expect("a lower bound");
    assert!(
        e.available.bps() <= fastest_sent * 1.01,
        "A ≥ {} from trains sent at {}",
        e.available,
        BitRate::from_bps(fastest_sent)
    );
    assert!(e.available.bps() >= fastest_sent * 0.9, "{}", e.available);
}
