//! The synthetic path against the relations it models.

use super::*;
use crate::dispersion;
use crate::path::{Coalescing, FaultInjector, Faults};
use crate::plan::CarSlot;

fn spec(rate_mbps: f64, ppc: u32, cars: u32) -> TrainSpec {
    TrainSpec {
        packet_size: Bytes(1500),
        packets_per_car: ppc,
        cars,
        rate: BitRate::from_mbps(rate_mbps),
        idle_before: DurationNs::ZERO,
    }
}

#[test]
fn splitmix_is_deterministic_and_uniform() {
    let mut a = SplitMix64::new(7);
    let mut b = SplitMix64::new(7);
    let xs: Vec<f64> = (0..10_000).map(|_| a.next_f64()).collect();
    assert!(xs.iter().all(|&x| (0.0..1.0).contains(&x)));
    assert_eq!(xs[123], {
        for _ in 0..123 {
            b.next_f64();
        }
        b.next_f64()
    });
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    assert!((m - 0.5).abs() < 0.01);
}

#[test]
fn splitmix_draws_have_their_distributions() {
    let mut r = SplitMix64::new(11);
    let n = 100_000;
    let e: Vec<f64> = (0..n).map(|_| r.exponential(3.0)).collect();
    assert!(e.iter().all(|x| x.is_finite() && *x >= 0.0));
    assert!((e.iter().sum::<f64>() / n as f64 - 3.0).abs() < 0.05);
    let p: Vec<f64> = (0..n).map(|_| r.pareto(2.0, 5.0)).collect();
    assert!(p.iter().all(|x| *x >= 5.0));
    let above = p.iter().filter(|x| **x > 10.0).count() as f64 / n as f64;
    assert!((above - 0.25).abs() < 0.01, "{above}");
    assert!((0..1000).all(|_| r.below(7) < 7));
    assert_eq!(r.below(0), 0);
    let (mut a, mut b) = (SplitMix64::for_stream(1, 0), SplitMix64::for_stream(1, 1));
    assert_ne!(a.next_u64(), b.next_u64());
    assert_eq!(
        SplitMix64::for_stream(1, 1).next_u64(),
        SplitMix64::for_stream(1, 1).next_u64()
    );
}

#[test]
fn train_above_available_leaves_at_the_fluid_rate() {
    // C = 100, X = 40 ⇒ A = 60; R = 90 ⇒ r = 90·100/130.
    let mut p = FluidPath::new(FluidPathConfig::new(
        BitRate::from_mbps(100.0),
        BitRate::from_mbps(40.0),
    ));
    let obs = p.carry_train(&spec(90.0, 2, 100), 0);
    let r = dispersion::receiving_rate(&obs).unwrap().rate.mbps();
    let s = dispersion::sending_rate(&obs).unwrap().rate.mbps();
    assert!((s - 90.0).abs() < 1e-3, "{s}");
    assert!((r - 90.0 * 100.0 / 130.0).abs() < 1e-3, "{r}");
    assert_eq!(obs.received_packets(), 200);
}

#[test]
fn train_below_available_keeps_its_rate() {
    let mut p = FluidPath::new(FluidPathConfig::new(
        BitRate::from_mbps(100.0),
        BitRate::from_mbps(40.0),
    ));
    let obs = p.carry_train(&spec(50.0, 1, 100), 0);
    let r = dispersion::receiving_rate(&obs).unwrap().rate.mbps();
    assert!((r - 50.0).abs() < 1e-3, "{r}");
    // Intra-car the packets cross the bottleneck back to back: C·L/(L+X).
    let obs = p.carry_train(&spec(50.0, 4, 50), 1);
    let cr = dispersion::car_rates(&obs);
    let want = 100.0 * 1000.0 / 1040.0;
    assert!(
        cr.iter().all(|c| (c.mbps() - want).abs() < 1e-3),
        "{:?}",
        cr[0]
    );
}

#[test]
fn a_slow_sender_sends_back_to_back_at_its_line_rate() {
    let cfg = FluidPathConfig {
        sender_line_rate: BitRate::from_mbps(300.0),
        ..FluidPathConfig::new(BitRate::from_gbps(1.0), BitRate::from_mbps(100.0))
    };
    let mut p = FluidPath::new(cfg);
    let obs = p.carry_train(&spec(1000.0, 4, 50), 0);
    let s = dispersion::sending_rate(&obs).unwrap().rate.mbps();
    assert!((s - 300.0).abs() < 1e-3, "{s}");
}

#[test]
fn a_short_queue_drops_and_clamps_the_probe_to_the_available_rate() {
    let cfg = FluidPathConfig {
        queue_limit: Some(Bytes(30_000)),
        ..FluidPathConfig::new(BitRate::from_mbps(100.0), BitRate::from_mbps(50.0))
    };
    let mut p = FluidPath::new(cfg);
    let obs = p.carry_train(&spec(500.0, 1, 4000), 0);
    assert!(obs.lost_packets() > 0);
    let r = dispersion::receiving_rate(&obs).unwrap().rate.mbps();
    // Fluid never overflows on its own (X < C), so once full the queue
    // admits the probe only as fast as C − X drains it.
    assert!((r - 50.0).abs() < 1.5, "{r}");
    let none = FluidPath::new(FluidPathConfig {
        queue_limit: Some(Bytes::ZERO),
        ..FluidPathConfig::new(BitRate::from_mbps(100.0), BitRate::from_mbps(50.0))
    })
    .carry_train(&spec(50.0, 1, 10), 0);
    assert_eq!(none.received_packets(), 0);
}

#[test]
fn coalescing_stamps_share_interrupt_instants() {
    let cfg = FluidPathConfig::new(BitRate::from_gbps(1.0), BitRate::from_mbps(100.0));
    let mut p = Coalescing::new(FluidPath::new(cfg), DurationNs::from_us(125));
    let obs = ProbePath::carry(&mut p, &ProbePlan::Train(spec(500.0, 4, 100)), 0).unwrap();
    for pk in &obs.packets {
        let r = pk.received.unwrap().ns();
        assert_eq!(r.rem_euclid(125_000), 0);
    }
    assert!(dispersion::bunching(&obs, DurationNs::from_ns(1)).is_bunched());
    let r = dispersion::receiving_rate(&obs).unwrap().rate.mbps();
    assert!((r - 500.0).abs() / 500.0 < 0.01, "{r}");
}

#[test]
fn same_seed_same_observation() {
    let cfg = FluidPathConfig {
        cross_noise: 0.3,
        send_jitter: DurationNs::from_us(5),
        seed: 99,
        ..FluidPathConfig::new(BitRate::from_mbps(100.0), BitRate::from_mbps(50.0))
    };
    let plan = ProbePlan::Train(spec(80.0, 2, 50));
    let carry = |cfg: &FluidPathConfig| {
        let mut p = FaultInjector::new(FluidPath::new(cfg.clone()), Faults::scrambled(cfg.seed));
        ProbePath::carry(&mut p, &plan, 3).unwrap()
    };
    let a = carry(&cfg);
    assert_eq!(a, carry(&cfg));
    assert_ne!(a, carry(&FluidPathConfig { seed: 100, ..cfg }));
}

#[test]
fn noise_averages_to_the_nominal_cross_rate() {
    let cfg = FluidPathConfig {
        cross_noise: 0.5,
        ..FluidPathConfig::new(BitRate::from_mbps(100.0), BitRate::from_mbps(50.0))
    };
    let mut p = FluidPath::new(cfg);
    for i in 0..20 {
        p.carry_train(&spec(80.0, 1, 500), i);
    }
    let x = p.offered_cross_rate().unwrap().mbps();
    assert!((x - 50.0).abs() < 1.0, "{x}");
}

#[test]
fn poisson_cross_traffic_is_noisy_at_a_trains_time_scale() {
    // C = 300, X = 90 Mb/s of 1500 B Poisson packets: over 10 ms the
    // cross rate a train meets varies by √(X·s/T) ≈ 10 Mb/s, so the
    // receiving rate of a train at 240 Mb/s varies by several Mb/s, while
    // the long-run mean stays the fluid one.
    let cfg = FluidPathConfig {
        poisson_cross: Some(Bytes(1500)),
        seed: 5,
        ..FluidPathConfig::new(BitRate::from_mbps(300.0), BitRate::from_mbps(90.0))
    };
    let mut p = FluidPath::new(cfg.clone());
    let rates: Vec<f64> = (0..60)
        .map(|i| {
            let obs = p.carry_train(&spec(240.0, 1, 200), i);
            dispersion::receiving_rate(&obs).unwrap().rate.mbps()
        })
        .collect();
    let mean = rates.iter().sum::<f64>() / rates.len() as f64;
    let sd = (rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / 59.0).sqrt();
    let fluid = 240.0 * 300.0 / 330.0;
    assert!((mean - fluid).abs() < 3.0, "mean {mean} vs {fluid}");
    assert!(sd > 2.0 && sd < 15.0, "sd {sd}");
    let x = p.offered_cross_rate().unwrap().mbps();
    assert!((x - 90.0).abs() < 6.0, "{x}");
    // Seeded: the same configuration gives the same train.
    let a = FluidPath::new(cfg.clone()).carry_train(&spec(240.0, 1, 50), 0);
    let b = FluidPath::new(cfg).carry_train(&spec(240.0, 1, 50), 0);
    assert_eq!(a, b);
}

#[test]
fn a_token_bucket_lets_the_first_frames_through_at_line_rate() {
    // 300 Mb/s tbf with a two-frame bucket, sender at 10 Gb/s, idle:
    // the first two packets of a back-to-back train pass at the
    // sender's 1.2 µs, the rest at C's 40 µs; the train as a whole
    // arrives at C.
    let bucketed = FluidPathConfig {
        bucket: Some(Bytes(3000)),
        sender_line_rate: BitRate::from_gbps(10.0),
        ..FluidPathConfig::new(BitRate::from_mbps(300.0), BitRate::ZERO)
    };
    let gaps = |cfg: &FluidPathConfig| -> Vec<f64> {
        let mut p = FluidPath::new(cfg.clone());
        let mut out = Vec::new();
        // Twice: idle time between trains refills the bucket.
        for train in 0..2 {
            let obs = p.carry_train(&spec(100_000.0, 50, 1), train);
            let g = dispersion::intra_car_gaps(&obs);
            out.extend(g.iter().take(4).map(|g| g.0 * 1e6));
        }
        out
    };
    let b = gaps(&bucketed);
    for train in b.chunks(4) {
        assert!((train[0] - 1.2).abs() < 0.01, "{b:?}");
        for g in &train[2..] {
            assert!((g - 40.0).abs() < 0.01, "{b:?}");
        }
        // The third packet waits for the tokens the second one lacked.
        assert!(train[1] > 30.0 && train[1] < 40.0, "{b:?}");
    }
    let mut p = FluidPath::new(bucketed.clone());
    let obs = p.carry_train(&spec(100_000.0, 200, 1), 0);
    let r = dispersion::receiving_rate(&obs).unwrap().rate.mbps();
    assert!((r - 300.0).abs() < 4.0, "{r}");
    // Without a bucket the same train is spread from the first pair on.
    let fifo = FluidPathConfig {
        bucket: None,
        ..bucketed.clone()
    };
    assert!(gaps(&fifo).iter().all(|g| (g - 40.0).abs() < 0.01));
    // A long train above A still leaves at the fluid rate: the bucket
    // only shifts its first bytes.
    let loaded = FluidPathConfig {
        cross_traffic: BitRate::from_mbps(100.0),
        ..bucketed
    };
    let obs = FluidPath::new(loaded).carry_train(&spec(290.0, 1, 2000), 0);
    let r = dispersion::receiving_rate(&obs).unwrap().rate.mbps();
    let fluid = 290.0 * 300.0 / 390.0;
    assert!((r - fluid).abs() < 1.0, "{r} vs {fluid}");
}

#[test]
fn degenerate_specs_do_not_panic() {
    let mut p = FluidPath::new(FluidPathConfig::new(
        BitRate::from_mbps(100.0),
        BitRate::from_mbps(50.0),
    ));
    for s in [
        spec(0.0, 1, 10),
        spec(-5.0, 2, 3),
        spec(f64::NAN, 1, 4),
        spec(10.0, 0, 10),
        spec(10.0, 3, 0),
        TrainSpec {
            packet_size: Bytes::ZERO,
            ..spec(10.0, 2, 2)
        },
    ] {
        let _ = p.carry_train(&s, 0);
    }
}

#[test]
fn a_schedule_and_the_same_train_cross_the_path_alike() {
    // A constant-rate train carried as itself and as an explicit schedule
    // gives the same packets; the schedule's observation keeps it.
    let cfg = FluidPathConfig::new(BitRate::from_mbps(100.0), BitRate::from_mbps(40.0));
    let t = spec(90.0, 2, 50);
    let sched = ScheduleSpec::from_train(&t);
    let a = FluidPath::new(cfg.clone()).carry_train(&t, 0);
    let b = FluidPath::new(cfg).carry_schedule(&sched, 0);
    assert_eq!(a.packets, b.packets);
    assert_eq!(b.schedule.as_ref(), Some(&sched));
    // Offsets are whole nanoseconds, so the nominal rate is 90 Mb/s to 1e-5.
    assert!((b.spec.rate.mbps() - 90.0).abs() < 1e-3, "{}", b.spec.rate);
}

#[test]
fn a_pair_closer_than_the_bottleneck_gap_leaves_at_its_gap() {
    // Two 1500 B packets 10 us apart into an idle 100 Mb/s link (120 us
    // per packet) leave 120 us apart: the capacity gap.
    let mut p = FluidPath::new(FluidPathConfig::new(
        BitRate::from_mbps(100.0),
        BitRate::ZERO,
    ));
    let sched = ScheduleSpec {
        packet_size: Bytes(1500),
        cars: vec![
            CarSlot {
                offset: DurationNs::ZERO,
                packets: 1,
            },
            CarSlot {
                offset: DurationNs::from_us(10),
                packets: 1,
            },
        ],
        idle_before: DurationNs::ZERO,
    };
    let obs = p.carry_schedule(&sched, 0);
    let r: Vec<i64> = obs
        .packets
        .iter()
        .map(|p| p.received.unwrap().ns())
        .collect();
    assert!((r[1] - r[0] - 120_000).abs() <= 1, "{r:?}");
    assert_eq!(obs.packets[1].car, 1);
}
