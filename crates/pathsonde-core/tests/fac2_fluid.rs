//! FAC² against the synthetic fluid path: accuracy against known truth,
//! convergence cost, and robustness.
//!
//! Truth is `C − X`, with X the cross traffic the path actually offered while
//! the trains occupied the bottleneck (`FluidPath::window_available`); without
//! noise that is exactly the configured `C − X`.
//!
//! Run with `--nocapture` to see the table of results.

use pathsonde_core::methods::fac2::{Fac2, Fac2Config, Fac2Stop};
use pathsonde_core::path::{Coalescing, FaultInjector, Faults};
use pathsonde_core::synthetic::{drive, FluidPath, FluidPathConfig};
use pathsonde_core::{
    BitRate, Bytes, ClockInfo, ClockSource, DurationNs, Estimate, Method, Observation, ProbePath,
    ProbePlan,
};
use std::convert::Infallible;

const LOADS: [f64; 5] = [0.1, 0.3, 0.5, 0.7, 0.9];
/// The acceptance bar on A.
const A_TOLERANCE: f64 = 0.02;
/// The acceptance bar on C, and on X as a share of C (X itself is small at
/// low load, where a small error in C is a large share of it).
const CX_TOLERANCE: f64 = 0.05;

/// The paths of the accuracy tests: (capacity in Mb/s, FAC²'s max_rate in Mb/s).
/// A 1 Gb/s path is probed by a host that can send 2.5 Gb/s (a 10 GbE sender,
/// the synthetic default of 10 × C); `a_sender_no_faster_than_the_path` covers
/// max_rate = C.
const PATHS: [(f64, f64); 2] = [(100.0, 1000.0), (1000.0, 2500.0)];

struct Outcome {
    est: Estimate,
    stop: Option<Fac2Stop>,
    truth_a: f64,
    truth_x: f64,
    capacity: f64,
}

fn run(path: FluidPathConfig, cfg: Fac2Config) -> Outcome {
    run_behind(path, cfg, |p| Box::new(p))
}

/// [`run`] with the fluid path behind a wrapper (a coalescing receiver, a
/// careless runner).
fn run_behind(
    path: FluidPathConfig,
    cfg: Fac2Config,
    wrap: impl FnOnce(&mut FluidPath) -> Box<dyn ProbePath<Error = Infallible> + '_>,
) -> Outcome {
    let capacity = path.capacity.bps();
    let mut m = Fac2::new(cfg);
    let mut p = FluidPath::new(path);
    let est = drive(&mut m, wrap(&mut p).as_mut(), 200).expect("an estimate");
    let truth_x = p.offered_cross_rate().unwrap().bps();
    Outcome {
        est,
        stop: m.stop_reason(),
        truth_a: capacity - truth_x,
        truth_x,
        capacity,
    }
}

fn rel(got: f64, want: f64) -> f64 {
    (got / want - 1.0).abs()
}

fn mbps(mbps: f64) -> BitRate {
    BitRate::from_mbps(mbps)
}

impl Outcome {
    fn a_err(&self) -> f64 {
        rel(self.est.available.bps(), self.truth_a)
    }
    fn c_err(&self) -> f64 {
        rel(self.est.capacity.expect("capacity").bps(), self.capacity)
    }
    fn x_err(&self) -> f64 {
        (self.est.cross_traffic.expect("cross traffic").bps() - self.truth_x).abs() / self.capacity
    }
    fn row(&self, label: &str) -> String {
        format!(
            "{label:<34} A {:>9.3} Mb/s truth {:>9.3}  err {:>5.2} %  C err {:>5.2} %  X err {:>5.2} % of C  trains {:>2}  {:?}",
            self.est.available.mbps(),
            self.truth_a / 1e6,
            self.a_err() * 100.0,
            self.est.capacity.map_or(f64::NAN, |c| rel(c.bps(), self.capacity) * 100.0),
            self.est
                .cross_traffic
                .map_or(f64::NAN, |x| (x.bps() - self.truth_x).abs() / self.capacity * 100.0),
            self.est.trains.len(),
            self.stop,
        )
    }
    /// The checks every accuracy test makes.
    fn assert_accurate(&self, label: &str, max_trains: usize) {
        let row = self.row(label);
        println!("{row}");
        assert!(self.a_err() <= A_TOLERANCE, "A off: {row}");
        assert!(self.c_err() <= CX_TOLERANCE, "C off: {row}");
        assert!(self.x_err() <= CX_TOLERANCE, "X off: {row}");
        assert!(
            self.est.trains.len() <= max_trains,
            "too many trains: {row}"
        );
        let high = self.est.high.expect("a measured A has an upper bound");
        assert!(
            self.est.low < high && self.est.low <= self.est.available && self.est.available <= high,
            "bad band {} .. {}: {row}",
            self.est.low,
            high
        );
    }
}

#[test]
fn clean_fluid_paths_converge_exactly_in_seven_trains() {
    // Opening, feedback, lower, then the four near trains the stopping rule
    // asks for.
    for (c, max) in PATHS {
        for u in LOADS {
            let o = run(
                FluidPathConfig::new(mbps(c), mbps(c * u)),
                Fac2Config::default().with_max_rate(mbps(max)),
            );
            o.assert_accurate(&format!("clean C={c} U={u}"), 7);
            // The model is exactly the fluid relation, so the method is exact
            // up to rounding, and says so by converging with a band that holds
            // the truth.
            assert!(o.a_err() < 1e-3, "{}", o.row("clean"));
            assert_eq!(o.stop, Some(Fac2Stop::Converged));
            assert!(o.est.converged);
            assert!(o.est.low.bps() <= o.truth_a && o.truth_a <= o.est.high.unwrap().bps());
            assert!(o.est.cost.bytes.get() <= 2_000_000, "{}", o.est.cost.bytes);
        }
    }
}

/// Median |error| and band coverage over runs of `path(seed)` for `seeds`.
fn spread_over_seeds(
    label: &str,
    seeds: u64,
    cfg: &Fac2Config,
    path: impl Fn(u64) -> FluidPathConfig,
) -> (f64, f64, f64) {
    let mut errs = Vec::new();
    let mut held = 0;
    for seed in 1..=seeds {
        let o = run(path(seed), cfg.clone());
        println!("{}", o.row(&format!("{label} seed={seed}")));
        errs.push(o.a_err());
        let high = o.est.high.expect("a measured A has an upper bound");
        if o.est.low.bps() <= o.truth_a && o.truth_a <= high.bps() {
            held += 1;
        }
        assert!(o.est.cost.bytes.get() <= 2_100_000, "{}", o.est.cost.bytes);
    }
    let (median, p90, _) = quantiles(&errs);
    (median, p90, f64::from(held) / seeds as f64)
}

#[test]
fn noisy_cross_traffic_and_send_jitter() {
    // Cross traffic varies by up to ±8.7 % (σ = 5 %) every 100 µs and every
    // car starts up to 5 µs late.
    for (c, max) in PATHS {
        for u in LOADS {
            let (m, p90, held) = spread_over_seeds(
                &format!("noise 5 % C={c} U={u}"),
                5,
                &Fac2Config::default().with_max_rate(mbps(max)),
                |seed| FluidPathConfig {
                    cross_noise: 0.05,
                    noise_interval: DurationNs::from_us(100),
                    send_jitter: DurationNs::from_us(5),
                    seed,
                    ..FluidPathConfig::new(mbps(c), mbps(c * u))
                },
            );
            assert!(
                m <= 0.02 && p90 <= 0.05,
                "C={c} U={u}: median {m} p90 {p90}"
            );
            assert!(held >= 0.8, "C={c} U={u}: band held the truth in {held}");
        }
    }
}

#[test]
fn receiver_coalescing_bunches_arrivals_but_not_the_answer() {
    // Every arrival is held until the next 125 µs interrupt and stamped then.
    for (c, max) in PATHS {
        for u in LOADS {
            let path = FluidPathConfig::new(mbps(c), mbps(c * u));
            let o = run_behind(path, Fac2Config::default().with_max_rate(mbps(max)), |p| {
                Box::new(Coalescing::new(p, DurationNs::from_us(125)))
            });
            let row = o.row(&format!("coalescing C={c} U={u}"));
            println!("{row}");
            assert!(o.a_err() <= 0.03, "{row}");
            let high = o.est.high.expect("an upper bound");
            assert!(
                o.est.low.bps() <= o.truth_a && o.truth_a <= high.bps(),
                "{row}"
            );
            // At 1 Gb/s packets leave the bottleneck 12 µs apart, ten to an
            // interrupt: the bunching shows and trains lengthen to 40 bunches.
            // At 100 Mb/s they leave 120 µs apart, mostly one per interrupt,
            // and the stamps do not look bunched (they are only late).
            let noted = o.est.notes.iter().any(|n| n.contains("bunches arrivals"));
            assert_eq!(noted, c >= 1000.0, "{:?}", o.est.notes);
            let co = o.est.coalescing.expect("coalescing reading");
            assert_eq!(co.detected, c >= 1000.0, "{co:?}");
            if co.detected {
                let p = co.bunch_period.unwrap().ns() as f64 / 1e3;
                assert!((p - 125.0).abs() < 12.5, "{co:?}");
            }
        }
    }
}

#[test]
fn a_sender_no_faster_than_the_path() {
    // Host NIC = bottleneck = 1 Gb/s, max_rate 1 Gb/s: the opening cannot go
    // above C, so the far points sit near the near ones and C is poorly
    // conditioned, but A holds.
    for u in LOADS {
        let path = FluidPathConfig {
            sender_line_rate: mbps(1000.0),
            ..FluidPathConfig::new(mbps(1000.0), mbps(1000.0 * u))
        };
        let o = run(path, Fac2Config::default());
        let row = o.row(&format!("L=C=1000 U={u}"));
        println!("{row}");
        assert!(o.a_err() <= 0.05, "{row}");
        assert!(o.est.trains.len() <= 12, "{row}");
        let high = o.est.high.expect("an upper bound");
        assert!(
            o.est.low.bps() <= o.truth_a && o.truth_a <= high.bps(),
            "{row}"
        );
    }
}

/// The queue budget: on a path whose tight link has a 64 KB queue, FAC²'s
/// opening adds at most 32 KiB, so neither a probe nor a cross-traffic
/// packet is dropped by it, at any load; after it at most one train loses
/// packets before FAC² shrinks its budget.
#[test]
fn a_64_kb_queue_drops_nothing_from_the_opening_and_at_most_one_train_after() {
    for u in [0.1, 0.3, 0.5, 0.7, 0.9] {
        for poisson in [false, true] {
            let path = FluidPathConfig {
                queue_limit: Some(Bytes(64_000)),
                poisson_cross: poisson.then_some(Bytes(1500)),
                seed: 3,
                ..FluidPathConfig::new(mbps(100.0), mbps(100.0 * u))
            };
            let mut m = Fac2::new(Fac2Config::default());
            let mut p = FluidPath::new(path);
            let ProbePlan::Train(first) = m.next_plan() else {
                panic!("no opening train");
            };
            assert!(first.total_bytes().get() <= 32 * 1024, "{first:?}");
            let before = p.cross_dropped();
            let obs = p.carry_train(&first, 0);
            let lost = obs.packets.iter().filter(|p| p.received.is_none()).count();
            let label = format!("64 KB queue U={u} poisson={poisson}");
            assert_eq!(lost, 0, "{label}: the opening lost probes");
            assert_eq!(
                p.cross_dropped(),
                before,
                "{label}: the opening dropped cross traffic"
            );
            m.observe(&obs);
            let e = drive(&mut m, &mut p, 100).expect("an estimate");
            let probe_lost: f64 = e
                .trains
                .iter()
                .map(|t| t.loss_fraction * t.packets as f64)
                .sum();
            println!(
                "{label}: A {} truth {:.1}, peak queue {}, cross dropped {}, probes lost {probe_lost}",
                e.available,
                p.window_available().unwrap().mbps(),
                p.peak_backlog(),
                p.cross_dropped()
            );
            // Near trains start with a 64 KiB budget, sized for the 256 KB
            // queues FAC² is measured on; on this smaller queue one of them
            // may overflow it, and the budget then halves for the rest.
            // (With Poisson cross traffic at 90 % load a 64 KB queue also
            // fills by itself now and then, and one more train may meet it.)
            let lossy = e.trains.iter().filter(|t| t.loss_fraction > 0.0).count();
            let allowed = if poisson && u >= 0.9 { 2 } else { 1 };
            assert!(lossy <= allowed, "{label}: {lossy} lossy trains");
            if lossy >= 1 {
                assert!(
                    e.notes
                        .iter()
                        .any(|n| n.contains("queue is smaller than assumed")),
                    "{label}: {:?}",
                    e.notes
                );
            }
        }
    }
}

#[test]
fn a_slower_sender_still_above_a_is_only_noted() {
    let path = FluidPathConfig {
        sender_line_rate: mbps(400.0),
        ..FluidPathConfig::new(mbps(100.0), mbps(50.0))
    };
    let o = run(path, Fac2Config::default());
    o.assert_accurate("sender 400 Mb/s, C=100 U=0.5", 7);
    assert!(o.est.host_limited.is_none());
    assert!(o.est.notes.iter().any(|n| n.contains("achieved only")));
}

/// Stretches a train's receive stamps so that it arrives at `factor` of the
/// rate it would have: a receiver (or sender) hiccup the path had no part in.
fn slow_arrivals(obs: &mut Observation, factor: f64) {
    let Some(first) = obs.packets.iter().filter_map(|p| p.received).min() else {
        return;
    };
    for p in &mut obs.packets {
        if let Some(r) = p.received {
            let d = r.since(first).ns() as f64 / factor;
            p.received = Some(first + DurationNs::from_ns(d.round() as i64));
        }
    }
}

/// Drives FAC² over `path`, slowing train `bad` to `factor` of its arrival
/// rate, and returns the estimate.
fn with_one_slow_train(path: FluidPathConfig, cfg: Fac2Config, bad: u32, factor: f64) -> Estimate {
    let mut m = Fac2::new(cfg);
    let mut p = FluidPath::new(path);
    for i in 0..100 {
        let ProbePlan::Train(t) = m.next_plan() else {
            break;
        };
        let mut obs = p.carry_train(&t, i);
        if i == bad {
            slow_arrivals(&mut obs, factor);
        }
        m.observe(&obs);
    }
    m.estimate().expect("an estimate")
}

/// Zero load, C = 100 Mb/s, probed from 300 Mb/s; one train arrives at 94 %
/// of the rate the path gave it.  The answer holds, and the band holds the
/// truth.
#[test]
fn one_slow_train_at_zero_load_does_not_move_the_answer() {
    for queue in [None, Some(Bytes(150_000))] {
        for bad in 0..7u32 {
            let e = with_one_slow_train(
                FluidPathConfig {
                    queue_limit: queue,
                    ..FluidPathConfig::new(mbps(100.0), BitRate::ZERO)
                },
                Fac2Config::default().with_max_rate(mbps(300.0)),
                bad,
                0.94,
            );
            let label = format!(
                "zero load, queue {queue:?}, train {bad} at 0.94: A {} [{} .. {:?}] trains {} converged {}",
                e.available,
                e.low,
                e.high,
                e.trains.len(),
                e.converged
            );
            println!("{label}");
            assert!(rel(e.available.bps(), 100e6) <= 0.03, "{label}");
            assert!(e.trains.len() <= 14, "{label}");
            assert!(
                e.low.bps() <= 100e6 && 100e6 <= e.high.unwrap().bps(),
                "{label} {:?}",
                e.notes
            );
        }
    }
}

/// The collapse case: an 80 Mb/s path (C = 100, 20 % load) on which one
/// train arrives at a third of its rate — a host stall, or a burst of cross
/// traffic no later train repeats.  A search that trusts it sinks to a
/// fraction of A and stays there (the old FAC² answered 11.7 Mb/s on such a
/// path after 48 trains at 27.6).  Whichever train it is, FAC² either
/// answers within 5 % with a band that holds the truth, or says it is not
/// sure: never a confident wrong number.
#[test]
fn one_collapsed_train_is_recovered_from_or_flagged() {
    for bad in 0..8u32 {
        for noise in [0.0, 0.05] {
            let path = FluidPathConfig {
                cross_noise: noise,
                noise_interval: DurationNs::from_us(100),
                seed: u64::from(bad) + 1,
                ..FluidPathConfig::new(mbps(100.0), mbps(20.0))
            };
            let e = with_one_slow_train(path, Fac2Config::default(), bad, 1.0 / 3.0);
            let high = e.high.expect("an upper bound").bps();
            let held = e.low.bps() <= 80e6 && 80e6 <= high;
            let label = format!(
                "collapse at train {bad}, noise {noise}: A {} [{} .. {}] converged {} trains {}",
                e.available,
                e.low,
                BitRate::from_bps(high),
                e.converged,
                e.trains.len()
            );
            println!("{label}");
            assert!(
                held || !e.converged,
                "{label}: confident and wrong {:?}",
                e.notes
            );
            assert!(
                rel(e.available.bps(), 80e6) <= 0.05 || !e.converged,
                "{label}"
            );
            assert!(
                e.available.mbps() > 40.0,
                "{label}: collapsed {:?}",
                e.notes
            );
        }
    }
}

#[test]
fn the_naive_stop_rule_would_be_nine_percent_wrong_at_ninety_percent_load() {
    // A train 10 % above A on a 90 %-loaded path arrives at 99 % of its rate:
    // "ratio within 1 %" would accept it.  FAC²'s fit does not.
    let cfg = FluidPathConfig::new(mbps(100.0), mbps(90.0));
    let mut p = FluidPath::new(cfg.clone());
    let spec = Fac2Config::default().train_for(mbps(11.0), DurationNs::from_us(1), 0.010);
    let obs = p.carry_train(&spec, 0);
    let r = pathsonde_core::dispersion::receiving_rate(&obs)
        .unwrap()
        .rate
        .mbps();
    let s = pathsonde_core::dispersion::sending_rate(&obs)
        .unwrap()
        .rate
        .mbps();
    assert!(r / s > 0.99, "ratio {}", r / s);
    let o = run(cfg, Fac2Config::default());
    assert!(o.a_err() < 0.01, "{}", o.row("U=0.9"));
}

#[test]
fn a_path_faster_than_max_rate_yields_a_flagged_lower_bound() {
    let o = run(
        FluidPathConfig::new(BitRate::from_gbps(10.0), BitRate::from_gbps(2.0)),
        Fac2Config::default(),
    );
    assert_eq!(o.stop, Some(Fac2Stop::LowerBound));
    // 32 KiB, then 4× longer until a 4 ms train was carried.
    assert_eq!(o.est.trains.len(), 3);
    assert!(o.est.cost.bytes.get() < 700_000, "{}", o.est.cost.bytes);
    assert!(!o.est.converged);
    let why = o.est.host_limited.as_deref().expect("host_limited set");
    assert!(why.contains("A ≥") && why.contains("max-rate"), "{why}");
    assert!(o.est.notes.iter().any(|n| n.starts_with("lower bound")));
    assert!(o.est.capacity.is_none() && o.est.cross_traffic.is_none());
    assert!(
        rel(o.est.available.bps(), 1e9) < 0.01,
        "{}",
        o.est.available
    );
    assert!(o.est.low <= o.est.available);
    assert_eq!(o.est.high, None, "nothing bounds A from above");
}

#[test]
fn a_sender_that_cannot_reach_max_rate_is_host_limited() {
    let path = FluidPathConfig {
        sender_line_rate: mbps(600.0),
        ..FluidPathConfig::new(BitRate::from_gbps(10.0), BitRate::from_gbps(1.0))
    };
    let o = run(path, Fac2Config::default());
    assert_eq!(o.stop, Some(Fac2Stop::LowerBound));
    // FAC²'s own finding stays in the notes; the runner's host verdict names
    // the sender's pacing and bounds A below what the sender reached (less
    // its 6 % margin: docs/verdict.md).
    assert!(o
        .est
        .notes
        .iter()
        .any(|n| n.contains("sender reached only")));
    let why = o.est.host_limited.as_deref().expect("host_limited set");
    assert!(why.contains("client pacing"), "{why}");
    let a = o.est.available.bps();
    assert!((0.9 * 600e6..=600e6).contains(&a), "{}", o.est.available);
    assert_eq!(o.est.high, None);
}

#[test]
fn whole_train_loss_lowers_the_rate_then_gives_up_without_an_estimate() {
    let path = FluidPathConfig {
        queue_limit: Some(Bytes::ZERO),
        ..FluidPathConfig::new(mbps(100.0), mbps(50.0))
    };
    let mut m = Fac2::new(Fac2Config::default());
    let mut p = FluidPath::new(path);
    let mut rates = Vec::new();
    for i in 0..10 {
        match m.next_plan() {
            ProbePlan::Train(t) => {
                rates.push(t.rate.mbps());
                let obs = p.carry_train(&t, i);
                m.observe(&obs);
                // Reading the estimate mid-way must be safe too.
                assert!(m.estimate().is_none());
            }
            ProbePlan::Done => break,
            _ => panic!("unexpected plan"),
        }
    }
    assert_eq!(rates, vec![1000.0, 500.0, 250.0]);
    assert_eq!(m.stop_reason(), Some(Fac2Stop::NoMeasurement));
    assert_eq!(m.next_plan(), ProbePlan::Done);
    assert!(m.estimate().is_none());
    assert!(m.notes().iter().any(|n| n.contains("rate lowered")));
    assert!(m.notes().iter().any(|n| n.contains("stopped after 3")));
}

#[test]
fn scrambled_duplicated_records_and_clock_offsets_change_nothing() {
    let clean = FluidPathConfig::new(mbps(100.0), mbps(70.0));
    let a = run(clean.clone(), Fac2Config::default());
    let offset = FluidPathConfig {
        send_clock_offset: DurationNs::from_ns(-987_654_321_012),
        recv_clock_offset: DurationNs::from_secs(86_400 * 365 * 40),
        ..clean
    };
    let b = run_behind(offset, Fac2Config::default(), |p| {
        Box::new(FaultInjector::new(p, Faults::scrambled(1)))
    });
    assert!(rel(a.est.available.bps(), b.est.available.bps()) < 1e-6);
    assert_eq!(a.est.trains.len(), b.est.trains.len());
    assert_eq!(a.est.cost, b.est.cost);
}

#[test]
fn coarse_user_space_clocks() {
    let us = ClockInfo {
        source: ClockSource::UserSpace,
        resolution: DurationNs::from_us(1),
    };
    for (c, max) in PATHS {
        let path = FluidPathConfig {
            send_clock: us,
            recv_clock: us,
            ..FluidPathConfig::new(mbps(c), mbps(c * 0.6))
        };
        let o = run(
            path,
            Fac2Config::default()
                .with_clock_resolution(DurationNs::from_us(1))
                .with_max_rate(mbps(max)),
        );
        o.assert_accurate(&format!("1 µs clocks C={c} U=0.6"), 8);
    }
}

#[test]
fn the_estimate_is_complete_consistent_and_serialisable() {
    let o = run(
        FluidPathConfig::new(mbps(100.0), mbps(30.0)),
        Fac2Config::default(),
    );
    let e = &o.est;
    assert_eq!(e.method, "fac2");
    assert_eq!(e.cost.trains as usize, e.trains.len());
    assert_eq!(
        e.cost.packets,
        e.trains.iter().map(|t| t.packets).sum::<u64>()
    );
    assert_eq!(
        e.cost.bytes,
        e.trains.iter().map(|t| t.bytes).sum::<Bytes>()
    );
    // The probe span runs from the first send to the last send, over idle
    // gaps between trains, so it exceeds the trains' own send time.
    assert!(e.probe_span > DurationNs::from_ms(10 * e.trains.len() as i64));
    for t in &e.trains {
        assert!(t.sending_rate.bps() > 0.0);
        assert!(t.receiving_rate.is_some());
        assert_eq!(t.loss_fraction, 0.0);
    }
    assert_eq!(e.trains[0].target_rate, BitRate::from_gbps(1.0));
    // Every number is finite, so JSON carries it (serde_json writes NaN and
    // infinities as null, which would not read back).
    let json = serde_json::to_string(e).unwrap();
    let back: Estimate = serde_json::from_str(&json).unwrap();
    assert_eq!(back.trains.len(), e.trains.len());
    assert!(rel(back.available.bps(), e.available.bps()) < 1e-12);
    assert_eq!(back.high.is_some(), e.high.is_some());
    if let (Some(b), Some(h)) = (back.high, e.high) {
        assert!(rel(b.bps(), h.bps()) < 1e-12);
    }
    assert_eq!(back.notes, e.notes);
}

#[test]
fn an_estimate_read_mid_run_is_marked() {
    let mut m = Fac2::new(Fac2Config::default());
    let mut p = FluidPath::new(FluidPathConfig::new(mbps(100.0), mbps(40.0)));
    for i in 0..2 {
        if let ProbePlan::Train(t) = m.next_plan() {
            m.observe(&p.carry_train(&t, i));
        }
    }
    let e = m.estimate().unwrap();
    assert!(!e.converged);
    assert!(e.notes.iter().any(|n| n.contains("before FAC² finished")));
    // Two exact points already give the fluid line.
    assert!(rel(e.available.bps(), 60e6) < 1e-4);
}

// ---- packet-level Poisson cross traffic ------------------------------------

/// Median, 90th percentile and maximum of `xs`.
fn quantiles(xs: &[f64]) -> (f64, f64, f64) {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let pos = q * (v.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
    };
    (at(0.5), at(0.9), v[v.len() - 1])
}

/// FAC² on C = 300 Mb/s with Poisson cross traffic of 1500 B packets at load
/// `u`, a 256 KB queue and `max_rate` 600 Mb/s, as in the lab: |error of A|,
/// trains, probe seconds and probe bytes per seed, and how many bands held
/// the truth and how many runs converged.
struct PoissonRuns {
    errs: Vec<f64>,
    trains: Vec<f64>,
    secs: Vec<f64>,
    bytes: Vec<f64>,
    held: usize,
    converged: usize,
}

fn poisson_runs(u: f64, seeds: u64) -> PoissonRuns {
    let mut r = PoissonRuns {
        errs: Vec::new(),
        trains: Vec::new(),
        secs: Vec::new(),
        bytes: Vec::new(),
        held: 0,
        converged: 0,
    };
    for seed in 1..=seeds {
        let path = FluidPathConfig {
            poisson_cross: Some(Bytes(1500)),
            queue_limit: Some(Bytes(256 * 1024)),
            send_jitter: DurationNs::from_us(5),
            train_gap: DurationNs::from_ms(20),
            seed,
            ..FluidPathConfig::new(mbps(300.0), mbps(300.0 * u))
        };
        let o = run(path, Fac2Config::default().with_max_rate(mbps(600.0)));
        println!("{}", o.row(&format!("poisson C=300 U={u} seed={seed}")));
        r.errs.push(o.a_err());
        r.trains.push(o.est.trains.len() as f64);
        r.secs.push(o.est.probe_span.secs_f64());
        r.bytes.push(o.est.cost.bytes.get() as f64);
        r.converged += usize::from(o.est.converged);
        let high = o.est.high.expect("an upper bound");
        assert!(o.est.low <= o.est.available && o.est.available <= high);
        if o.est.low.bps() <= o.truth_a && o.truth_a <= high.bps() {
            r.held += 1;
        }
    }
    r
}

/// Real Poisson cross traffic is noisy at a train's time scale: over 10 ms,
/// 90 Mb/s of 1500 B packets varies by ≈ 10 Mb/s (5 % of A at 30 % load),
/// 270 Mb/s by ≈ 18 Mb/s (60 % of A at 90 % load).  Within its 2 MB budget
/// FAC² averages what it can and says how sure it is: the bars are the
/// medians it reaches on these seeds with some room, and the band must hold
/// the truth in at least 8 runs of 10 at every load.
#[test]
fn poisson_cross_traffic_300m() {
    let seeds = 10;
    let mut failed = Vec::new();
    for (u, bar) in [
        (0.1, 0.02),
        (0.3, 0.02),
        (0.5, 0.04),
        (0.7, 0.06),
        (0.9, 0.10),
    ] {
        let r = poisson_runs(u, seeds);
        let (m, p90, max) = quantiles(&r.errs);
        let (tm, _, tmax) = quantiles(&r.trains);
        let (sm, _, smax) = quantiles(&r.secs);
        let (bm, _, bmax) = quantiles(&r.bytes);
        println!(
            "POISSON U={u}: |err| median {:.2} % p90 {:.2} % max {:.2} %; band held {}/{seeds}; trains median {tm} max {tmax}; probe s median {sm:.2} max {smax:.2}; kB median {:.0} max {:.0}; converged {}/{seeds}",
            m * 100.0,
            p90 * 100.0,
            max * 100.0,
            r.held,
            bm / 1e3,
            bmax / 1e3,
            r.converged
        );
        if m > bar {
            failed.push(format!("U={u}: median |err| {m}"));
        }
        if r.held * 10 < 8 * seeds as usize {
            failed.push(format!("U={u}: band held {}/{seeds}", r.held));
        }
        assert!(tmax <= 30.0);
        assert!(bmax <= 2.1e6, "U={u}: {bmax} bytes");
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// One Poisson run's trains and notes, for looking into a case:
/// `U=0.9 SEED=3 cargo test --release -p pathsonde-core --test fac2_fluid
/// poisson_trace -- --ignored --nocapture`.
#[test]
#[ignore]
fn poisson_trace() {
    let u: f64 = std::env::var("U").map_or(0.3, |v| v.parse().unwrap());
    let seed: u64 = std::env::var("SEED").map_or(1, |v| v.parse().unwrap());
    let path = FluidPathConfig {
        poisson_cross: Some(Bytes(1500)),
        queue_limit: Some(Bytes(256 * 1024)),
        send_jitter: DurationNs::from_us(5),
        train_gap: DurationNs::from_ms(20),
        seed,
        ..FluidPathConfig::new(mbps(300.0), mbps(300.0 * u))
    };
    let o = run(path, Fac2Config::default().with_max_rate(mbps(600.0)));
    for t in &o.est.trains {
        println!(
            "{:>3} tgt {:>8.2} sent {:>8.2} recv {:>8.2} ratio {:.4} pk {:>5} loss {:.3}",
            t.train,
            t.target_rate.mbps(),
            t.sending_rate.mbps(),
            t.receiving_rate.map_or(0.0, |r| r.mbps()),
            t.receiving_rate
                .map_or(0.0, |r| r.bps() / t.sending_rate.bps()),
            t.packets,
            t.loss_fraction
        );
    }
    println!("{}", o.row("debug"));
    println!("band {} .. {:?}", o.est.low, o.est.high);
    for n in &o.est.notes {
        println!("  {n}");
    }
}
