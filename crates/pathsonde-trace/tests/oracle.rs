//! Done-when: on oracle traces with a known band step and cycle period the
//! analysis finds both within 5 %; the model round trip keeps the mean
//! within 1 %, the standard deviation within 5 % and the Kolmogorov–Smirnov
//! distance at most 0.05.

use pathsonde_core::DurationNs;
use pathsonde_trace::analysis::{analyze, RegimeKind};
use pathsonde_trace::fft::Fft;
use pathsonde_trace::model::{fidelity, Generator, Model};
use pathsonde_trace::oracle::ClockedRouter;

fn within(got: f64, truth: f64, tol: f64) -> bool {
    ((got - truth) / truth).abs() <= tol
}

#[test]
fn banded_oracles_give_their_step_within_5_percent() {
    let mut fft = Fft::new();
    // Several steps, spans and noise levels, not just the paper's.
    for (seed, tick_ns, max_ticks, noise_ns) in [
        (1u64, 1_400i64, 7u32, 100i64),
        (2, 1_400, 3, 200),
        (3, 2_500, 10, 300),
        (4, 800, 5, 50),
        (5, 122_000, 4, 2_000),
    ] {
        let mut r = ClockedRouter::paper_banded(seed);
        r.tick = DurationNs::from_ns(tick_ns);
        r.max_ticks = max_ticks;
        r.noise = DurationNs::from_ns(noise_ns);
        r.service = DurationNs::from_ns(1_000);
        let (t, truth) = r.run(30_000);
        let a = analyze(&t, &mut fft).unwrap();
        let step = a.banding.step_us.unwrap_or(f64::NAN);
        assert!(
            within(step, truth.band_step_us, 0.05),
            "seed {seed}: step {step} vs {} ({})",
            truth.band_step_us,
            a.banding.evidence
        );
        assert_eq!(a.regime.kind, RegimeKind::Banded, "{:?}", a.regime);
        assert!(!a.cycles.found, "{}", a.cycles.evidence);
    }
}

#[test]
fn queueing_oracles_give_step_and_cycle_within_5_percent() {
    let mut fft = Fft::new();
    for (seed, excess_ticks, limit_us, flush_us) in [
        (1u64, 2i64, 70i64, 50i64),
        (2, 1, 70, 50),
        (3, 3, 100, 30),
        (4, 2, 40, 20),
    ] {
        let mut r = ClockedRouter::paper_queueing(seed);
        r.service = DurationNs::from_ns(r.interval.ns() + excess_ticks * r.tick.ns());
        r.queue_limit = DurationNs::from_us(limit_us);
        r.flush = DurationNs::from_us(flush_us);
        let (t, truth) = r.run(30_000);
        let a = analyze(&t, &mut fft).unwrap();
        let c = &a.cycles;
        let want = truth.cycle_period_packets.unwrap();
        let got = c.period_packets.unwrap_or(f64::NAN);
        assert!(c.found, "seed {seed}: {}", c.evidence);
        assert!(
            within(got, want, 0.05),
            "seed {seed}: period {got} vs {want}"
        );
        let got_us = c.period_us.unwrap();
        assert!(within(got_us, truth.cycle_period_us.unwrap(), 0.05));
        let step = a.banding.step_us.unwrap_or(f64::NAN);
        assert!(
            within(step, truth.band_step_us, 0.05),
            "seed {seed}: step {step} vs {} ({})",
            truth.band_step_us,
            a.banding.evidence
        );
        assert_eq!(a.regime.kind, RegimeKind::Queueing);
        // Rise and losses per cycle as the router made them.
        let lost_per_cycle = truth.lost as f64 / truth.cycle_starts.len() as f64;
        assert!(within(c.losses_per_cycle.unwrap(), lost_per_cycle, 0.10));
        assert!(c.rise_us.unwrap() > 0.8 * limit_us as f64);
    }
}

#[test]
fn uniform_traces_are_called_uniform() {
    let mut r = ClockedRouter::paper_banded(9);
    // Jitter as wide as the tick smears the lattice out.
    r.noise = DurationNs::from_ns(2_000);
    r.max_ticks = 10;
    let (t, _) = r.run(30_000);
    let a = analyze(&t, &mut Fft::new()).unwrap();
    assert_eq!(a.regime.kind, RegimeKind::Uniform, "{:?}", a.regime);
}

#[test]
fn model_round_trip_keeps_mean_std_and_distribution() {
    let mut fft = Fft::new();
    for (name, r) in [
        ("banded", ClockedRouter::paper_banded(11)),
        ("queueing", ClockedRouter::paper_queueing(12)),
    ] {
        let (t, _) = r.run(30_000);
        let x = t.filled_us();
        let m = Model::build(&x, 500, &mut fft).unwrap();
        let back = Model::from_json(&m.to_json()).unwrap();
        let g = Generator::new(&back, &mut fft);
        let y = g.generate(x.len());
        let f = fidelity(&x, &y);
        assert!(f.mean_error.abs() <= 0.01, "{name}: {f:?}");
        assert!(f.std_error.abs() <= 0.05, "{name}: {f:?}");
        assert!(f.ks <= 0.05, "{name}: {f:?}");
        // The regenerated series keeps the bands.
        let mut tr = t.clone();
        tr.latency_ns = y.iter().map(|v| (v * 1e3).round() as i64).collect();
        let a = analyze(&tr, &mut fft).unwrap();
        let step = a.banding.step_us.unwrap_or(f64::NAN);
        assert!(within(step, 1.4, 0.05), "{name}: regenerated step {step}");
    }
}
