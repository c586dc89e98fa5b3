//! Done-when, simulated half: on traces the real simulator (`pathsonde-sim`)
//! makes, with a band step and a queue-cycle period known from the scenario,
//! the analysis finds both within 5 %.
//!
//! - Bands: a router whose service clock ticks every `tick` at absolute
//!   times forwards a stream spaced `p/q` ticks apart (p, q coprime).  Packet
//!   k leaves on a tick, so its latency is `n·tick − k·spacing` plus a
//!   constant: the latencies sit on a lattice of gcd(tick, spacing) =
//!   tick/q.  The sender's timer jitter (uniform, a few tens of ns) blurs
//!   each level so the values are not themselves a timestamp grid.
//! - Cycles: cross traffic replayed into a drop-tail bottleneck, on (just
//!   above what the probe leaves of the capacity) for `on` then off for
//!   `off`, fills the queue slowly and lets it drain within one probe
//!   spacing: one fill-and-drain cycle every `on + off`, i.e.
//!   `(on + off) / spacing` packets.

use pathsonde_core::{Bytes, DurationNs};
use pathsonde_sim::time::Ps;
use pathsonde_sim::{Scenario, Sim, StreamStamp};
use pathsonde_trace::analysis::{analyze, Analysis, RegimeKind};
use pathsonde_trace::fft::Fft;
use pathsonde_trace::{Trace, TraceMeta, LOST};

const PACKETS: u32 = 30_000;

fn within(got: f64, truth: f64, tol: f64) -> bool {
    ((got - truth) / truth).abs() <= tol
}

/// The stream's one-way latencies as a trace (ps → ns, rounded).
fn to_trace(s: &[StreamStamp], spacing: DurationNs, size: u64) -> Trace {
    let t0 = s[0].sent;
    let mut meta = TraceMeta::unknown();
    meta.interval = Some(spacing);
    meta.packet_size = Some(Bytes(size));
    meta.absolute = true;
    meta.measured_send_times = true;
    let ns = |t: Ps| ((t.ps() + 500) / 1000) as i64;
    Trace {
        meta,
        sent_ns: s.iter().map(|p| ns(p.sent - t0)).collect(),
        latency_ns: s
            .iter()
            .map(|p| p.recv.map_or(LOST, |r| ns(r) - ns(p.sent)))
            .collect(),
    }
}

/// Runs a stream of `PACKETS` through the router-clock path and analyses it.
fn banded(tick_ns: i64, p: i64, q: i64, size: u64, jitter_ns: u64, seed: u64) -> Analysis {
    assert_eq!(tick_ns * p % q, 0, "spacing must be whole ns");
    let spacing = DurationNs::from_ns(tick_ns * p / q);
    let scn = Scenario::parse(&format!(
        r#"
[sender]
timer_resolution = "1ns"
jitter = "{jitter_ns}ns"
[receiver]
nic = {{ coalescing = false }}
[[link]]
rate = "10G"
delay = "7us"
[[link]]
rate = "10G"
delay = "3us"
service_clock = "{tick_ns}ns"
"#
    ))
    .unwrap();
    let mut sim = Sim::new(&scn, seed).unwrap();
    let end = Ps::from_ns(u64::from(PACKETS) * spacing.ns() as u64) + Ps::from_ms(10);
    let s = sim.probe_stream(PACKETS, spacing, Bytes(size), Ps::US, end);
    let t = to_trace(&s, spacing, size);
    assert_eq!(t.lost(), 0);
    analyze(&t, &mut Fft::new()).unwrap()
}

#[test]
fn a_simulated_router_clock_gives_its_band_step_within_5_percent() {
    // (tick, p, q, packet size, sender jitter, seed); truth = tick / q.
    for (tick_ns, p, q, size, jitter_ns, seed) in [
        (1_400i64, 8i64, 7i64, 1000u64, 30u64, 1u64), // 1.6 µs spacing, 0.2 µs bands
        (2_500, 6, 5, 1500, 50, 2),                   // 3 µs spacing, 0.5 µs bands
        (1_400, 17, 4, 1024, 40, 3),                  // 5.95 µs spacing, 0.35 µs bands
    ] {
        let truth_us = tick_ns as f64 / q as f64 / 1e3;
        let a = banded(tick_ns, p, q, size, jitter_ns, seed);
        let step = a.banding.step_us.unwrap_or(f64::NAN);
        eprintln!(
            "tick {tick_ns} ns, spacing {p}/{q} ticks: step {step:.5} µs vs truth {truth_us:.5} µs ({:+.3} %); {}",
            (step / truth_us - 1.0) * 100.0,
            a.banding.evidence
        );
        assert!(
            within(step, truth_us, 0.05),
            "tick {tick_ns} p/q {p}/{q}: step {step} vs {truth_us} ({})",
            a.banding.evidence
        );
        assert_eq!(a.regime.kind, RegimeKind::Banded, "{:?}", a.regime);
        assert!(!a.cycles.found, "{}", a.cycles.evidence);
    }
}

#[test]
fn a_whole_tick_spacing_gives_no_bands_wider_than_the_jitter() {
    // Spacing = 8 ticks: every packet waits the same part of a tick, so the
    // only spread is the sender's jitter (≤ 40 ns), never a 1.4 µs lattice.
    let a = banded(1_400, 8, 1, 1000, 40, 4);
    let d = &a.distribution;
    assert!(d.max_us - d.min_us <= 0.05, "{d:?}");
    assert_ne!(a.regime.kind, RegimeKind::Queueing);
}

/// On/off cross traffic (CBR of `cross_size` bytes at `on_rate_bps`)
/// replayed into the bottleneck: on for `on`, off for `off`, for `total`.
fn on_off_file(
    dir: &std::path::Path,
    on_us: u64,
    off_us: u64,
    total_ms: u64,
    rate_bps: f64,
    size: u32,
) -> std::path::PathBuf {
    use std::fmt::Write;
    let gap_s = f64::from(size) * 8.0 / rate_bps;
    let mut text = String::new();
    let period_us = on_us + off_us;
    let mut cycle = 0u64;
    while cycle * period_us < total_ms * 1000 {
        let t0 = (cycle * period_us) as f64 * 1e-6;
        let n = ((on_us as f64 * 1e-6) / gap_s).floor() as u64;
        for k in 0..n {
            writeln!(text, "{:.12} {size}", t0 + k as f64 * gap_s).unwrap();
        }
        cycle += 1;
    }
    let file = dir.join(format!("onoff-{on_us}-{off_us}.txt"));
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn simulated_on_off_cross_traffic_gives_its_cycle_period_within_5_percent() {
    let dir =
        std::env::temp_dir().join(format!("pathsonde-trace-simoracle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // (probe spacing ns, on µs, off µs, probe size): the probe takes
    // size·8/spacing of the 10 Gb/s bottleneck; the cross traffic, while on,
    // takes 0.3 % more than the rest, so the queue rises ~0.3 ns per ns of
    // the on phase and drains (at ~92 % of capacity) in well under a spacing.
    for (spacing_ns, on_us, off_us, size) in [
        (1_000i64, 220u64, 217u64, 100u64), // 437 packets a cycle
        (2_000, 300, 311, 200),             // 305.5 packets a cycle
    ] {
        let probe_share = size as f64 * 8.0 / (spacing_ns as f64 * 1e-9) / 10e9;
        let cross_bps = (1.0 - probe_share + 0.003) * 10e9;
        let total_ms = u64::from(PACKETS) * spacing_ns as u64 / 1_000_000 + 2;
        let file = on_off_file(&dir, on_us, off_us, total_ms, cross_bps, 100);
        let mut scn = Scenario::parse(
            r#"
[sender]
timer_resolution = "1ns"
[receiver]
nic = { coalescing = false }
[[link]]
rate = "40G"
delay = "5us"
[[link]]
rate = "10G"
delay = "20us"
queue = "100KB"
"#,
        )
        .unwrap();
        scn.links[1].trace = Some(file);
        scn.duration = Ps::from_ms(total_ms + 10);
        let mut sim = Sim::new(&scn, 7).unwrap();
        let spacing = DurationNs::from_ns(spacing_ns);
        let s = sim.probe_stream(PACKETS, spacing, Bytes(size), Ps::ZERO, scn.duration);
        let t = to_trace(&s, spacing, size);
        let a = analyze(&t, &mut Fft::new()).unwrap();
        let c = &a.cycles;
        let truth_packets = (on_us + off_us) as f64 * 1e3 / spacing_ns as f64;
        let truth_us = (on_us + off_us) as f64;
        let got = c.period_packets.unwrap_or(f64::NAN);
        let got_us = c.period_us.unwrap_or(f64::NAN);
        eprintln!(
            "spacing {spacing_ns} ns, on/off {on_us}/{off_us} µs: period {got:.3} packets vs {truth_packets:.3} ({:+.3} %), {got_us:.2} µs vs {truth_us}; rise {:?} µs; {}",
            (got / truth_packets - 1.0) * 100.0,
            c.rise_us,
            c.evidence
        );
        assert!(c.found, "{}", c.evidence);
        assert!(within(got, truth_packets, 0.05), "{got} vs {truth_packets}");
        assert!(within(got_us, truth_us, 0.05), "{got_us} vs {truth_us}");
        assert_eq!(a.regime.kind, RegimeKind::Queueing, "{:?}", a.regime);
        // The drop-tail limit was never reached: fill-and-drain, no losses.
        assert_eq!(t.lost(), 0);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bands_under_simulated_queue_cycles_give_both_within_5_percent() {
    // The paper's queueing regime: a ramp with the clock's bands under it.
    // A drop-tail 10 Gb/s bottleneck with on/off cross traffic, then a
    // router with a 1.4 µs service clock.  Departures sit on that router's
    // ticks whatever the queue did before, so the band step is still
    // gcd(tick, spacing) = gcd(1.4 µs, 12 µs) = 0.2 µs (spacing 60/7 ticks).
    let dir = std::env::temp_dir().join(format!(
        "pathsonde-trace-simoracle-q-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (spacing_ns, size, on_us, off_us, packets) =
        (12_000i64, 1000u64, 1_200u64, 1_236u64, 20_000u32);
    let probe_share = size as f64 * 8.0 / (spacing_ns as f64 * 1e-9) / 10e9;
    let cross_bps = (1.0 - probe_share + 0.006) * 10e9;
    let total_ms = u64::from(packets) * spacing_ns as u64 / 1_000_000 + 2;
    let file = on_off_file(&dir, on_us, off_us, total_ms, cross_bps, 1000);
    let mut scn = Scenario::parse(
        r#"
[sender]
timer_resolution = "1ns"
jitter = "30ns"
[receiver]
nic = { coalescing = false }
[[link]]
rate = "40G"
delay = "5us"
[[link]]
rate = "10G"
delay = "20us"
queue = "1MB"
[[link]]
rate = "40G"
delay = "3us"
service_clock = "1400ns"
"#,
    )
    .unwrap();
    scn.links[1].trace = Some(file);
    scn.duration = Ps::from_ms(total_ms + 10);
    let mut sim = Sim::new(&scn, 9).unwrap();
    let spacing = DurationNs::from_ns(spacing_ns);
    let s = sim.probe_stream(packets, spacing, Bytes(size), Ps::ZERO, scn.duration);
    let t = to_trace(&s, spacing, size);
    let a = analyze(&t, &mut Fft::new()).unwrap();
    let (truth_step, truth_packets) = (0.2, (on_us + off_us) as f64 * 1e3 / spacing_ns as f64);
    let step = a.banding.step_us.unwrap_or(f64::NAN);
    let got = a.cycles.period_packets.unwrap_or(f64::NAN);
    eprintln!(
        "queue + clock: step {step:.5} µs vs {truth_step} ({:+.3} %), period {got:.3} packets vs {truth_packets:.3} ({:+.3} %), rise {:?} µs; {}; {}",
        (step / truth_step - 1.0) * 100.0,
        (got / truth_packets - 1.0) * 100.0,
        a.cycles.rise_us,
        a.banding.evidence,
        a.cycles.evidence
    );
    assert!(within(step, truth_step, 0.05), "{}", a.banding.evidence);
    assert!(a.cycles.found, "{}", a.cycles.evidence);
    assert!(within(got, truth_packets, 0.05), "{got} vs {truth_packets}");
    let got_us = a.cycles.period_us.unwrap_or(f64::NAN);
    assert!(within(got_us, (on_us + off_us) as f64, 0.05));
    assert_eq!(a.regime.kind, RegimeKind::Queueing, "{:?}", a.regime);
    assert_eq!(t.lost(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
