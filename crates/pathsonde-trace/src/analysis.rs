//! Analysis of one latency trace: distribution, banding, periodicity, queue
//! cycles and the regime — each number with the evidence it rests on.
//!
//! Methods (why each was chosen is in `docs/trace.md`):
//!
//! - **Banding**: latencies that sit on a lattice `x0 + k·q` make the
//!   latency histogram periodic, so the histogram's Fourier transform (the
//!   empirical characteristic function |φ(f)| = |mean e^{2πi f x}|) peaks
//!   at f = 1/q with a height between 0 (no lattice) and 1 (every value on
//!   it).  We take the strongest peak of |φ| beyond the distribution's
//!   envelope, step down to its fundamental, and refine f on the raw values.
//!   The step is q, its **strength** |φ(1/q)|.
//! - **Periodicity**: the power spectrum of the latency series (losses
//!   held at the last latency), its strongest peaks in cycles/packet and Hz.
//! - **Queue cycles**: the series' autocorrelation gives the cycle length;
//!   the cycles themselves are cut where latency falls by more than half
//!   its spread (the flush), so each cycle's rise and losses can be counted
//!   (the paper's Figure 6).
//! - **Regime**: queueing when regular cycles are found, banded when the
//!   band strength is at least [`BANDED_STRENGTH`], irregular when the spread
//!   is far wider than the bulk ([`IRREGULAR_SPREAD`]), uniform otherwise.

use crate::fft::{parabolic_offset, Fft};
use crate::trace::{Trace, LOST};
use serde::Serialize;

/// Band strength from which a trace is called banded ("quantum").
pub const BANDED_STRENGTH: f64 = 0.5;
/// Band strength below which no banding is reported at all.
pub const MIN_BAND_STRENGTH: f64 = 0.15;
/// A trace with neither bands nor cycles whose p5–p95 spread exceeds this
/// many times its p1–p50 spread is called irregular rather than uniform.
pub const IRREGULAR_SPREAD: f64 = 10.0;
/// Percentiles reported.
pub const PERCENTILES: [f64; 9] = [0.0, 1.0, 5.0, 25.0, 50.0, 75.0, 95.0, 99.0, 100.0];

#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    pub packets: usize,
    pub received: usize,
    pub lost: usize,
    pub loss_fraction: f64,
    /// Stream spacing (nominal or measured), µs; `None` for a bare CSV.
    pub interval_us: Option<f64>,
    pub distribution: Distribution,
    pub banding: Banding,
    pub periodicity: Vec<SpectralPeak>,
    pub cycles: Cycles,
    pub regime: Regime,
}

#[derive(Debug, Clone, Serialize)]
pub struct Distribution {
    pub min_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
    pub std_us: f64,
    /// (percentile, latency µs) for each of [`PERCENTILES`].
    pub percentiles: Vec<(f64, f64)>,
    pub histogram: Histogram,
    /// The smallest step between distinct latencies, µs: the timestamp grid
    /// (a band step must be at least three of these).
    pub resolution_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Histogram {
    /// Left edge of bin 0, µs.
    pub lo_us: f64,
    pub width_us: f64,
    pub counts: Vec<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Banding {
    /// The quantum step q, µs; `None` when no lattice stands out.
    pub step_us: Option<f64>,
    /// |φ(1/q)|: 0 = no lattice, 1 = every latency exactly on it.
    pub strength: f64,
    /// Where the lattice sits: latencies are near `offset + k·step`, µs.
    pub offset_us: Option<f64>,
    /// Lattice levels holding at least 0.5 % of the packets (banding needs
    /// at least three of them next to each other).
    pub levels: usize,
    pub evidence: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SpectralPeak {
    pub cycles_per_packet: f64,
    pub hz: Option<f64>,
    pub period_packets: f64,
    pub period_us: Option<f64>,
    /// This peak's share of the series' variance.
    pub power_share: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Cycles {
    /// Whether regular fill-and-flush cycles were found.
    pub found: bool,
    /// Cycle length from the cut points (mean), packets.
    pub period_packets: Option<f64>,
    pub period_us: Option<f64>,
    /// Cycle length from the autocorrelation peak, packets.
    pub acf_period_packets: Option<f64>,
    /// Height of that autocorrelation peak (1 = perfectly periodic).
    pub acf_peak: Option<f64>,
    pub count: usize,
    /// Median latency rise within a cycle (max − min), µs.
    pub rise_us: Option<f64>,
    /// Mean packets lost per cycle.
    pub losses_per_cycle: Option<f64>,
    /// Coefficient of variation of the cycle lengths.
    pub length_cv: Option<f64>,
    /// Median over cycles of the largest single latency step up, as a share
    /// of the cycle's rise: a queue fills in many small steps (≪ 0.5); a
    /// lone periodic spike is one step (~1) and is not a queue cycle.
    pub largest_step_share: Option<f64>,
    /// Index of each cycle's first packet.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub starts: Vec<usize>,
    pub evidence: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RegimeKind {
    Uniform,
    Banded,
    Queueing,
    /// None of the paper's three: no lattice, no regular cycles, and a spread
    /// far wider than the bulk (separate modes, a standing queue, stalls).
    Irregular,
}

impl RegimeKind {
    pub fn describe(self) -> &'static str {
        match self {
            RegimeKind::Uniform => "uniform",
            RegimeKind::Banded => "banded (quantum)",
            RegimeKind::Queueing => "queueing (fill-and-flush cycles)",
            RegimeKind::Irregular => "irregular (none of the paper's three)",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Regime {
    pub kind: RegimeKind,
    pub evidence: Vec<String>,
}

/// Analyses a trace.  Fails only when fewer than 16 packets arrived.
pub fn analyze(trace: &Trace, fft: &mut Fft) -> Result<Analysis, crate::TraceError> {
    let received = trace.received_us();
    if received.len() < 16 {
        return Err(crate::TraceError::Unusable(format!(
            "{} of {} packets arrived; analysis needs at least 16",
            received.len(),
            trace.len()
        )));
    }
    let interval_us = trace.interval().map(|i| i.ns() as f64 / 1e3);
    let header_res = trace.meta.resolution.map(|r| r.ns() as f64 / 1e3);
    let distribution = distribution(&received, header_res);
    let banding = banding(&received, &distribution, fft);
    let filled = trace.filled_us();
    let periodicity = periodicity(&filled, interval_us, fft);
    let cycles = cycles(trace, &filled, &distribution, interval_us, fft);
    let regime = regime(&banding, &cycles, &distribution, &periodicity);
    let lost = trace.lost();
    Ok(Analysis {
        packets: trace.len(),
        received: received.len(),
        lost,
        loss_fraction: lost as f64 / trace.len() as f64,
        interval_us,
        distribution,
        banding,
        periodicity,
        cycles,
        regime,
    })
}

fn distribution(x: &[f64], header_res: Option<f64>) -> Distribution {
    let mut s = x.to_vec();
    s.sort_unstable_by(f64::total_cmp);
    let n = s.len();
    let at = |p: f64| s[((p / 100.0) * (n - 1) as f64).round() as usize];
    let mean = s.iter().sum::<f64>() / n as f64;
    let var = s.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1).max(1) as f64;
    // The timestamp grid: the smallest positive step between sorted values
    // (ignoring float dust below a picosecond).
    let mut res = f64::INFINITY;
    for w in s.windows(2) {
        let d = w[1] - w[0];
        if d > 1e-6 && d < res {
            res = d;
        }
    }
    let res = match (header_res, res.is_finite()) {
        (Some(h), true) => h.max(res),
        (Some(h), false) => h,
        (None, true) => res,
        (None, false) => 0.0,
    };
    let (lo, hi) = (at(0.1), at(99.9));
    let span = (hi - lo).max(1e-3);
    let mut width = span / 4096.0;
    if res > 0.0 && res > span / 40_000.0 {
        // A coarse timestamp grid: bins hold whole grid steps, so the grid
        // itself does not beat against the bins.
        width = res * (width / res).ceil().max(1.0);
    }
    let bins = ((span / width).ceil() as usize + 1).clamp(1, 1 << 16);
    let mut counts = vec![0u32; bins];
    for &v in &s {
        let b = ((v - lo) / width).floor();
        if b >= 0.0 && (b as usize) < bins {
            counts[b as usize] += 1;
        }
    }
    Distribution {
        min_us: s[0],
        max_us: s[n - 1],
        mean_us: mean,
        std_us: var.sqrt(),
        percentiles: PERCENTILES.iter().map(|&p| (p, at(p))).collect(),
        histogram: Histogram {
            lo_us: lo,
            width_us: width,
            counts,
        },
        resolution_us: res,
    }
}

/// |mean e^{2πi f x}| and the mean phase, over `x`.
fn coherence(x: &[f64], f: f64) -> (f64, f64) {
    let (mut c, mut s) = (0.0, 0.0);
    let w = std::f64::consts::TAU * f;
    for &v in x {
        let (si, co) = (w * v).sin_cos();
        c += co;
        s += si;
    }
    let n = x.len() as f64;
    (((c / n).powi(2) + (s / n).powi(2)).sqrt(), s.atan2(c))
}

fn banding(x: &[f64], d: &Distribution, fft: &mut Fft) -> Banding {
    let none = |strength: f64, why: String| Banding {
        step_us: None,
        strength,
        offset_us: None,
        levels: 0,
        evidence: why,
    };
    let h = &d.histogram;
    let m = h.counts.len();
    if m < 16 {
        return none(0.0, "latencies too concentrated for a histogram".into());
    }
    // |φ| on a grid four times finer than the histogram's own (zero padding).
    let padded = (4 * m).next_power_of_two();
    let mut buf = vec![0.0; padded];
    for (b, &c) in buf.iter_mut().zip(&h.counts) {
        *b = f64::from(c);
    }
    let total: f64 = h.counts.iter().map(|&c| f64::from(c)).sum();
    let spec = fft.forward(&mut buf);
    let phi: Vec<f64> = spec.iter().map(|c| c.norm() / total).collect();
    // Frequencies of the envelope (periods above a third of the spread) and
    // of less than two bins are out of bounds.
    let span_bins = m as f64;
    let k_min = ((3.0 * padded as f64 / span_bins).ceil() as usize).max(2);
    let k_max = phi.len().saturating_sub(1).min(padded / 4);
    if k_min + 2 >= k_max {
        return none(0.0, "too few histogram bins".into());
    }
    let is_peak = |k: usize| phi[k] >= phi[k - 1] && phi[k] >= phi[k + 1];
    let Some(kp) = (k_min..k_max)
        .filter(|&k| is_peak(k))
        .max_by(|&a, &b| phi[a].total_cmp(&phi[b]))
    else {
        return none(0.0, "no peak in the histogram's spectrum".into());
    };
    // Step down to the fundamental: the lowest sub-harmonic that is itself
    // a peak at least half as strong.
    let mut k = kp;
    for j in (2..=8).rev() {
        let c = kp as f64 / j as f64;
        if c < k_min as f64 {
            continue;
        }
        let lo = (c.floor() as usize).saturating_sub(1).max(k_min);
        let hi = (c.ceil() as usize + 1).min(k_max);
        if let Some(best) = (lo..=hi).max_by(|&a, &b| phi[a].total_cmp(&phi[b])) {
            if phi[best] >= 0.5 * phi[kp] && best > 0 && best + 1 < phi.len() && is_peak(best) {
                k = best;
                break;
            }
        }
    }
    let kf = k as f64 + parabolic_offset(&phi, k);
    let f0 = kf / (padded as f64 * h.width_us); // cycles per µs
                                                // Refine on the values themselves (a subsample keeps this cheap).
    let stride = (x.len() / 8192).max(1);
    let sub: Vec<f64> = x.iter().step_by(stride).copied().collect();
    let df = 1.0 / (padded as f64 * h.width_us);
    let grid: Vec<f64> = (0..=40)
        .map(|i| f0 - df + 2.0 * df * i as f64 / 40.0)
        .collect();
    let vals: Vec<f64> = grid.iter().map(|&f| coherence(&sub, f).0).collect();
    let bi = (0..vals.len())
        .max_by(|&a, &b| vals[a].total_cmp(&vals[b]))
        .unwrap_or(20);
    let f = grid[bi] + parabolic_offset(&vals, bi) * (grid[1] - grid[0]);
    if f <= 0.0 {
        return none(0.0, "no positive band frequency".into());
    }
    let (strength, phase) = coherence(x, f);
    let step = 1.0 / f;
    let res = d.resolution_us;
    if res > 0.0 && step < 3.0 * res {
        return none(
            strength,
            format!("the only lattice is the timestamp grid ({res:.4} µs)"),
        );
    }
    // A lattice needs several levels inside the bulk of the distribution:
    // a step wider than half the 1–99 % spread only re-describes a narrow
    // distribution with outliers.
    let bulk = pct(d, 99.0) - pct(d, 1.0);
    if step > 0.5 * bulk {
        return none(
            strength,
            format!(
                "the strongest lattice ({step:.4} µs) is wider than half the 1–99 % spread ({bulk:.4} µs): a narrow distribution, not bands"
            ),
        );
    }
    // A weak lattice with few levels across the bulk is the envelope's own
    // shape leaking into |φ|, not an overlay of bands.
    if strength < BANDED_STRENGTH && step > bulk / 8.0 {
        return none(
            strength,
            format!(
                "a weak lattice ({step:.4} µs, |φ| = {strength:.3}) spans more than an eighth of the 1–99 % spread ({bulk:.4} µs): the distribution's envelope, not bands"
            ),
        );
    }
    if strength < MIN_BAND_STRENGTH {
        return none(
            strength,
            format!(
                "strongest lattice {step:.4} µs holds only |φ| = {strength:.3} (< {MIN_BAND_STRENGTH}): no banding"
            ),
        );
    }
    let offset = (phase / std::f64::consts::TAU * step).rem_euclid(step);
    // Levels: lattice points holding ≥ 0.5 % of the values.
    let mut level_counts = std::collections::HashMap::<i64, usize>::new();
    for &v in x {
        *level_counts
            .entry(((v - offset) / step).round() as i64)
            .or_default() += 1;
    }
    let mut populated: Vec<i64> = level_counts
        .iter()
        .filter(|(_, &c)| c as f64 >= 0.005 * x.len() as f64)
        .map(|(&l, _)| l)
        .collect();
    populated.sort_unstable();
    let levels = populated.len();
    // Bands are a run of neighbouring levels; two or three separate modes
    // also fit a lattice (of half their gap) but leave levels between empty.
    let mut run = 0usize;
    let mut longest = 0usize;
    for (i, &l) in populated.iter().enumerate() {
        run = if i > 0 && l == populated[i - 1] + 1 {
            run + 1
        } else {
            1
        };
        longest = longest.max(run);
    }
    if longest < 3 {
        return none(
            strength,
            format!(
                "the {step:.4} µs lattice fits (|φ| = {strength:.3}) but at most {longest} neighbouring level(s) hold ≥ 0.5 % of packets ({levels} in all): separate modes, not bands"
            ),
        );
    }
    Banding {
        step_us: Some(step),
        strength,
        offset_us: Some(offset),
        levels,
        evidence: format!(
            "histogram spectrum peaks at a period of {step:.4} µs; |φ| = {strength:.3} there; {levels} levels hold ≥ 0.5 % each"
        ),
    }
}

fn periodicity(x: &[f64], interval_us: Option<f64>, fft: &mut Fft) -> Vec<SpectralPeak> {
    let n = x.len();
    let p = fft.power_spectrum(x);
    let total: f64 = p.iter().skip(1).sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let mut peaks: Vec<usize> = (2..p.len().saturating_sub(1))
        .filter(|&k| p[k] > p[k - 1] && p[k] >= p[k + 1])
        .collect();
    peaks.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
    peaks
        .into_iter()
        .take(5)
        .map(|k| {
            let kf = k as f64 + parabolic_offset(&p, k);
            let cpp = kf / n as f64;
            SpectralPeak {
                cycles_per_packet: cpp,
                hz: interval_us.map(|i| cpp / (i * 1e-6)),
                period_packets: 1.0 / cpp,
                period_us: interval_us.map(|i| i / cpp),
                power_share: p[k] / total,
            }
        })
        .collect()
}

fn cycles(
    trace: &Trace,
    filled: &[f64],
    d: &Distribution,
    interval_us: Option<f64>,
    fft: &mut Fft,
) -> Cycles {
    let mut out = Cycles {
        found: false,
        period_packets: None,
        period_us: None,
        acf_period_packets: None,
        acf_peak: None,
        count: 0,
        rise_us: None,
        losses_per_cycle: None,
        length_cv: None,
        largest_step_share: None,
        starts: Vec::new(),
        evidence: String::new(),
    };
    let n = filled.len();
    let max_lag = (n / 4).min(20_000);
    let r = fft.autocorrelation(filled, max_lag);
    if let Some(z) = (1..r.len()).find(|&i| r[i] < 0.0) {
        let hi = (6 * z + 2).min(r.len() - 1);
        if let Some(pk) = (z..hi).max_by(|&a, &b| r[a].total_cmp(&r[b])) {
            if pk > z && pk + 1 < r.len() {
                out.acf_period_packets = Some(pk as f64 + parabolic_offset(&r, pk));
                out.acf_peak = Some(r[pk]);
            }
        }
    }
    // Cut where latency falls by more than half its 5–95 % spread.
    let theta = 0.5 * (pct(d, 95.0) - pct(d, 5.0));
    let mut starts = Vec::new();
    let mut prev: Option<i64> = None;
    if theta > 0.0 {
        for (i, &l) in trace.latency_ns.iter().enumerate() {
            if l == LOST {
                continue;
            }
            if let Some(pl) = prev {
                if (l - pl) as f64 / 1e3 < -theta {
                    starts.push(i);
                }
            }
            prev = Some(l);
        }
    }
    // A cut sits at the first packet received after the drop; the losses
    // of the flush before it count toward the cycle they end.
    if starts.len() < 4 {
        out.evidence = format!(
            "{} latency drops larger than {theta:.2} µs: no fill-and-flush cycles",
            starts.len()
        );
        return out;
    }
    let lens: Vec<f64> = starts.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    let mean = lens.iter().sum::<f64>() / lens.len() as f64;
    let sd = (lens.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / lens.len() as f64).sqrt();
    let cv = sd / mean;
    let mut rises = Vec::new();
    let mut jumps = Vec::new();
    let mut losses = 0usize;
    for w in starts.windows(2) {
        let seg = &trace.latency_ns[w[0]..w[1]];
        let got: Vec<i64> = seg.iter().copied().filter(|&l| l != LOST).collect();
        losses += seg.len() - got.len();
        if let (Some(mx), Some(mn)) = (got.iter().max(), got.iter().min()) {
            let rise = (mx - mn) as f64 / 1e3;
            rises.push(rise);
            // The largest single step up inside the cycle, as a share of
            // its rise: small for a queue filling packet by packet, ~1 for a
            // lone spike.
            let step = got.windows(2).map(|p| p[1] - p[0]).max().unwrap_or(0) as f64 / 1e3;
            if rise > 0.0 {
                jumps.push(step / rise);
            }
        }
    }
    rises.sort_unstable_by(f64::total_cmp);
    jumps.sort_unstable_by(f64::total_cmp);
    let jump = jumps.get(jumps.len() / 2).copied().unwrap_or(1.0);
    let period = (starts[starts.len() - 1] - starts[0]) as f64 / (starts.len() - 1) as f64;
    out.count = starts.len() - 1;
    out.period_packets = Some(period);
    out.period_us = interval_us.map(|i| period * i);
    out.rise_us = rises.get(rises.len() / 2).copied();
    out.losses_per_cycle = Some(losses as f64 / out.count as f64);
    out.length_cv = Some(cv);
    let agree = out
        .acf_period_packets
        .is_some_and(|a| (a - period).abs() / period < 0.2);
    let strong = out.acf_peak.is_some_and(|a| a > 0.2);
    out.largest_step_share = Some(jump);
    let ramp = jump < 0.5;
    out.found = cv < 0.35 && agree && strong && period >= 3.0 && ramp;
    out.evidence = format!(
        "{} cuts where latency fell by more than {theta:.2} µs; cycle length {period:.2} packets (CV {cv:.2}); largest single step {:.0} % of the rise{}; autocorrelation peak {} at {} packets",
        starts.len(),
        jump * 100.0,
        if ramp { "" } else { " (periodic spikes, not a queue filling)" },
        out.acf_peak.map_or("none".into(), |a| format!("{a:.2}")),
        out.acf_period_packets.map_or("–".into(), |a| format!("{a:.2}")),
    );
    if out.found {
        out.starts = starts;
    }
    out
}

/// The latency at percentile `p` (one of [`PERCENTILES`]).
fn pct(d: &Distribution, p: f64) -> f64 {
    d.percentiles
        .iter()
        .find(|(pp, _)| *pp == p)
        .map_or(0.0, |x| x.1)
}

fn regime(b: &Banding, c: &Cycles, d: &Distribution, peaks: &[SpectralPeak]) -> Regime {
    let mut ev = Vec::new();
    ev.push(format!(
        "latency spread p5–p95 {:.2} µs, std {:.2} µs",
        d.percentiles[6].1 - d.percentiles[2].1,
        d.std_us
    ));
    let kind = if c.found {
        ev.push(format!(
            "regular cycles every {:.1} packets rising {:.1} µs with {:.1} losses each",
            c.period_packets.unwrap_or(0.0),
            c.rise_us.unwrap_or(0.0),
            c.losses_per_cycle.unwrap_or(0.0)
        ));
        RegimeKind::Queueing
    } else if b.step_us.is_some() && b.strength >= BANDED_STRENGTH {
        ev.push(format!(
            "latencies sit on a {:.3} µs lattice (|φ| = {:.2} ≥ {BANDED_STRENGTH})",
            b.step_us.unwrap_or(0.0),
            b.strength
        ));
        RegimeKind::Banded
    } else if pct(d, 95.0) - pct(d, 5.0)
        > IRREGULAR_SPREAD * (pct(d, 50.0) - pct(d, 1.0)).max(d.resolution_us).max(1e-3)
    {
        ev.push(format!(
            "the p5–p95 spread ({:.2} µs) is more than {IRREGULAR_SPREAD}× the p1–p50 spread ({:.3} µs): separate modes or a standing queue, not a narrow uniform range",
            pct(d, 95.0) - pct(d, 5.0),
            pct(d, 50.0) - pct(d, 1.0)
        ));
        ev.push(format!("no bands ({})", b.evidence));
        RegimeKind::Irregular
    } else {
        ev.push(match b.step_us {
            Some(q) => format!(
                "a weak {q:.3} µs banding overlay (|φ| = {:.2} < {BANDED_STRENGTH})",
                b.strength
            ),
            None => format!("no bands ({}) and no regular cycles", b.evidence),
        });
        RegimeKind::Uniform
    };
    if !c.found && c.acf_peak.is_some() {
        ev.push(format!("cycles: {}", c.evidence));
    }
    if let Some(p) = peaks.first().filter(|p| p.power_share >= 0.02) {
        ev.push(format!(
            "strongest periodicity every {:.2} packets{} carries {:.1} % of the variance",
            p.period_packets,
            p.hz.map_or(String::new(), |h| format!(" ({:.3} kHz)", h / 1e3)),
            p.power_share * 100.0
        ));
    }
    Regime { kind, evidence: ev }
}
