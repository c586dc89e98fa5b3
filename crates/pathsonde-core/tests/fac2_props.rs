//! FAC² against arbitrary observations: whatever a runner or a hostile
//! path reports, FAC² plans sanely, never panics and answers with a finite,
//! serialisable estimate or none.

use pathsonde_core::methods::fac2::{Fac2, Fac2Config};
use pathsonde_core::synthetic::{FluidPath, FluidPathConfig};
use pathsonde_core::{
    BitRate, Bytes, ClockInfo, ClockSource, DurationNs, Estimate, Method, Observation,
    PacketRecord, ProbePlan, TimeNs, TrainSpec,
};
use proptest::prelude::*;

fn mbps(mbps: f64) -> BitRate {
    BitRate::from_mbps(mbps)
}

// ---- robustness: arbitrary observations -----------------------------------

fn any_rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(-1.0),
        Just(0.0),
        1.0f64..1e12,
    ]
}

fn any_time() -> impl Strategy<Value = i64> {
    prop_oneof![
        any::<i64>(),
        0i64..50_000_000,
        Just(i64::MAX),
        Just(i64::MIN)
    ]
}

fn any_record() -> impl Strategy<Value = PacketRecord> {
    (
        prop_oneof![0u32..64, any::<u32>()],
        prop_oneof![0u32..8, any::<u32>()],
        prop_oneof![0u64..10_000, any::<u64>()],
        any_time(),
        proptest::option::of(any_time()),
    )
        .prop_map(|(seq, car, size, sent, received)| PacketRecord {
            seq,
            car,
            size: Bytes(size),
            sent: TimeNs::from_ns(sent),
            received: received.map(TimeNs::from_ns),
        })
}

fn any_clock() -> impl Strategy<Value = ClockInfo> {
    prop_oneof![Just(-5i64), Just(0), 1i64..10_000, Just(i64::MAX)].prop_map(|r| ClockInfo {
        source: ClockSource::KernelSoftware,
        resolution: DurationNs::from_ns(r),
    })
}

fn any_observation() -> impl Strategy<Value = Observation> {
    (
        any::<u32>(),
        (0u64..100_000, 0u32..10, 0u32..100, any_rate()),
        proptest::collection::vec(any_record(), 0..80),
        any_clock(),
        any_clock(),
    )
        .prop_map(
            |(train, (size, ppc, cars, rate), packets, s, r)| Observation {
                train,
                spec: TrainSpec {
                    packet_size: Bytes(size),
                    packets_per_car: ppc,
                    cars,
                    rate: BitRate::from_bps(rate),
                    idle_before: DurationNs::ZERO,
                },
                schedule: None,
                packets,
                send_clock: s,
                recv_clock: r,
                receiver_drops: None,
            },
        )
}

fn sane_plan(plan: &ProbePlan, cfg: &Fac2Config) -> bool {
    match plan {
        ProbePlan::Train(t) => {
            t.rate.bps().is_finite()
                && t.rate <= cfg.max_rate
                && t.rate >= cfg.min_rate
                && t.cars >= 1
                && t.packets_per_car >= 1
                && t.packet_size.get() > 0
        }
        _ => true,
    }
}

fn sane_estimate(e: &Estimate) -> bool {
    let finite = |r: BitRate| r.bps().is_finite();
    finite(e.available)
        && finite(e.low)
        && e.high.map_or(true, finite)
        && e.high.map_or(true, |h| e.low <= h)
        && e.capacity.map_or(true, finite)
        && e.cross_traffic.map_or(true, finite)
        && serde_json::to_string(e).is_ok()
}

proptest! {
    // Few cases each: generation dominates in a debug build, and the whole
    // suite should stay well under five seconds.
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn arbitrary_observations_never_panic(
        observations in proptest::collection::vec(any_observation(), 1..8),
        max_rate in prop_oneof![Just(f64::NAN), Just(0.0), 1e3f64..1e11],
        tolerance in prop_oneof![Just(f64::NAN), Just(-1.0), Just(2.0), 0.0f64..0.2],
    ) {
        let cfg = Fac2Config {
            max_rate: BitRate::from_bps(max_rate),
            tolerance,
            ..Fac2Config::default()
        };
        let mut m = Fac2::new(cfg.clone());
        let checked = Fac2Config {
            max_rate: if max_rate.is_finite() && max_rate > 0.0 { cfg.max_rate } else { BitRate::from_gbps(1.0) },
            min_rate: cfg.min_rate.min(if max_rate.is_finite() && max_rate > 0.0 { cfg.max_rate } else { BitRate::from_gbps(1.0) }),
            ..cfg
        };
        for obs in &observations {
            let plan = m.next_plan();
            prop_assert!(sane_plan(&plan, &checked), "{plan:?}");
            m.observe(obs);
            if let Some(e) = m.estimate() {
                prop_assert!(sane_estimate(&e), "{e:?}");
            }
        }
        let plan = m.next_plan();
        prop_assert!(sane_plan(&plan, &checked), "{plan:?}");
    }

    #[test]
    fn plausible_but_perturbed_trains_never_panic(
        seed in any::<u64>(),
        drop_every in 0usize..7,
        jitter_ns in 0i64..2_000_000,
        swap in any::<bool>(),
    ) {
        // Start from a real synthetic train, then damage it.
        let mut m = Fac2::new(Fac2Config::default());
        let mut p = FluidPath::new(FluidPathConfig {
            seed,
            cross_noise: 0.3,
            ..FluidPathConfig::new(mbps(100.0), mbps(60.0))
        });
        let mut rng = seed;
        for i in 0..6 {
            let ProbePlan::Train(t) = m.next_plan() else { break };
            let mut obs = p.carry_train(&t, i);
            for (k, pk) in obs.packets.iter_mut().enumerate() {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if drop_every > 0 && k % drop_every == 0 {
                    pk.received = None;
                } else if let Some(r) = pk.received {
                    pk.received = Some(r + DurationNs::from_ns((rng >> 33) as i64 % (jitter_ns + 1)));
                }
            }
            if swap && obs.packets.len() > 2 {
                let n = obs.packets.len();
                obs.packets.swap(0, n - 1);
            }
            m.observe(&obs);
            if let Some(e) = m.estimate() {
                prop_assert!(sane_estimate(&e), "{e:?}");
            }
        }
    }
}
