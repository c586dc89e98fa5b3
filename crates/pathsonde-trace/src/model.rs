//! Truncated-Fourier latency models with the inverse-CDF "nudge".
//!
//! Building ([`Model::build`]): take the N-point real FFT of the latency
//! series (losses held at the last latency), keep the DC term and the K
//! bins of largest magnitude, and store 100-point quantile tables of the
//! original series (G) and of the truncated series (F).
//!
//! Generating ([`Generator`]): the inverse FFT of the kept bins gives the
//! smooth, nearly normal truncated series x(t); each value is nudged to
//! y = G⁻¹(F(x)), which restores the original's distribution — its bands
//! included.  With both tables piecewise linear the composite map is
//! piecewise linear from F's knots to G's knots; it is tabulated once on a
//! dense grid ([`NUDGE_CELLS`] cells) so that nudging costs one multiply-add.
//!
//! The series is periodic in N (it is a Fourier series): values past N
//! repeat the first period.  The file format is JSON (see `docs/trace.md`).

use crate::error::{Result, TraceError};
use crate::fft::Fft;
use crate::quantile::{grid, quantiles};
use realfft::num_complex::Complex;
use serde::{Deserialize, Serialize};

/// Points in each CDF table (the paper's 100-point tables).
pub const CDF_POINTS: usize = 100;
/// Cells of the dense nudge table.
pub const NUDGE_CELLS: usize = 4096;
/// The format name in every model file.
pub const FORMAT: &str = "pathsonde-trace-model";
pub const MODEL_VERSION: u32 = 1;
/// Largest N a model file may claim (bounds what an untrusted file can make
/// the generator allocate).
pub const MAX_N: usize = 20_000_000;

/// One kept Fourier coefficient: bin `k` of the N-point real FFT (the pair
/// ±k of the complex transform), unscaled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Coefficient {
    pub bin: u32,
    pub re: f64,
    pub im: f64,
}

/// A truncated-Fourier model of a latency series (µs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub format: String,
    pub version: u32,
    /// Length of the modelled series (the FFT size).
    pub n: usize,
    /// Kept bins besides DC.
    pub k: usize,
    /// The stream's spacing, ns, when known (to put generated values on a time axis).
    pub interval_ns: Option<i64>,
    /// Fraction of the original packets lost (not modelled: losses were
    /// held at the previous latency).
    pub loss_fraction: f64,
    /// The series' mean (the DC term / N), µs.
    pub mean_us: f64,
    pub coefficients: Vec<Coefficient>,
    /// G: the original series' quantiles at p = i/99, µs.
    pub cdf_original_us: Vec<f64>,
    /// F: the truncated series' quantiles at the same p, µs.
    pub cdf_truncated_us: Vec<f64>,
    /// Share of the series' variance the kept bins carry.
    pub variance_kept: f64,
}

impl Model {
    /// Builds a model of `series` (µs) keeping the `k` largest bins.
    pub fn build(series: &[f64], k: usize, fft: &mut Fft) -> Result<Model> {
        let (model, _) = Model::build_with_truncated(series, k, fft)?;
        Ok(model)
    }

    /// As [`Model::build`], also returning the truncated series it computed.
    pub fn build_with_truncated(
        series: &[f64],
        k: usize,
        fft: &mut Fft,
    ) -> Result<(Model, Vec<f64>)> {
        let n = series.len();
        if n < 8 {
            return Err(TraceError::Unusable(format!(
                "a model needs at least 8 values, got {n}"
            )));
        }
        if n > MAX_N {
            return Err(TraceError::Unusable(format!("{n} values exceeds {MAX_N}")));
        }
        if series.iter().any(|v| !v.is_finite()) {
            return Err(TraceError::Unusable(
                "the series holds a non-finite value".into(),
            ));
        }
        let mut buf = series.to_vec();
        let spec = fft.forward(&mut buf);
        let bins = spec.len() - 1; // without DC
        let k = k.min(bins);
        // The K largest magnitudes among bins 1..: find the K-th largest
        // power by selection on a plain f64 copy, then take the bins above
        // it (and enough at it) in bin order — no sort.
        let power: Vec<f64> = spec[1..].iter().map(|c| c.norm_sqr()).collect();
        let threshold = if k == 0 {
            f64::INFINITY
        } else if k >= power.len() {
            f64::NEG_INFINITY
        } else {
            let mut p = power.clone();
            *p.select_nth_unstable_by(power.len() - k, f64::total_cmp).1
        };
        let above = power.iter().filter(|&&p| p > threshold).count();
        let mut at_threshold = k.saturating_sub(above);
        let mut coefficients = Vec::with_capacity(k);
        for (i, &p) in power.iter().enumerate() {
            let keep = p > threshold || (p == threshold && at_threshold > 0);
            if p == threshold && keep {
                at_threshold -= 1;
            }
            if keep && coefficients.len() < k {
                let b = i + 1;
                coefficients.push(Coefficient {
                    bin: b as u32,
                    re: spec[b].re,
                    im: spec[b].im,
                });
            }
        }
        // Variance kept: Parseval over the one-sided spectrum.
        let weight = |b: usize| {
            if b == 0 || (n % 2 == 0 && b == n / 2) {
                1.0
            } else {
                2.0
            }
        };
        let total: f64 = (1..spec.len())
            .map(|b| weight(b) * spec[b].norm_sqr())
            .sum();
        let kept: f64 = coefficients
            .iter()
            .map(|c| weight(c.bin as usize) * (c.re * c.re + c.im * c.im))
            .sum();
        let mean_us = spec[0].re / n as f64;
        let mut model = Model {
            format: FORMAT.into(),
            version: MODEL_VERSION,
            n,
            k,
            interval_ns: None,
            loss_fraction: 0.0,
            mean_us,
            coefficients,
            cdf_original_us: Vec::new(),
            cdf_truncated_us: Vec::new(),
            variance_kept: if total > 0.0 { kept / total } else { 1.0 },
        };
        let truncated = model.truncated_series(fft);
        let probs = grid(CDF_POINTS);
        model.cdf_original_us = quantiles(series, &probs);
        model.cdf_truncated_us = quantiles(&truncated, &probs);
        Ok((model, truncated))
    }

    /// The truncated Fourier series x(t), t = 0..N (before the nudge).
    pub fn truncated_series(&self, fft: &mut Fft) -> Vec<f64> {
        let mut spec = vec![Complex::new(0.0, 0.0); self.n / 2 + 1];
        spec[0] = Complex::new(self.mean_us * self.n as f64, 0.0);
        for c in &self.coefficients {
            if let Some(s) = spec.get_mut(c.bin as usize) {
                *s = Complex::new(c.re, c.im);
            }
        }
        fft.inverse(&mut spec, self.n)
    }

    /// Checks a model read from a file: every field in range, so that
    /// generating from it cannot panic or allocate without bound.
    pub fn validate(&self) -> Result<()> {
        let bad = |why: String| Err(TraceError::format("model file", why));
        if self.format != FORMAT {
            return bad(format!("format '{}' is not {FORMAT}", self.format));
        }
        if self.version != MODEL_VERSION {
            return bad(format!(
                "version {}; this build reads version {MODEL_VERSION}",
                self.version
            ));
        }
        if !(8..=MAX_N).contains(&self.n) {
            return bad(format!("n = {} outside 8..={MAX_N}", self.n));
        }
        if self.coefficients.len() != self.k || self.k > self.n / 2 {
            return bad(format!(
                "k = {} but {} coefficients for n = {}",
                self.k,
                self.coefficients.len(),
                self.n
            ));
        }
        for c in &self.coefficients {
            if c.bin == 0 || c.bin as usize > self.n / 2 || !c.re.is_finite() || !c.im.is_finite() {
                return bad(format!("coefficient at bin {} is out of range", c.bin));
            }
        }
        for (name, t) in [
            ("cdf_original_us", &self.cdf_original_us),
            ("cdf_truncated_us", &self.cdf_truncated_us),
        ] {
            if t.len() != CDF_POINTS {
                return bad(format!("{name} has {} points, not {CDF_POINTS}", t.len()));
            }
            if t.iter().any(|v| !v.is_finite()) || t.windows(2).any(|w| w[1] < w[0]) {
                return bad(format!(
                    "{name} is not a non-decreasing table of finite values"
                ));
            }
        }
        if !self.mean_us.is_finite() || !(0.0..=1.0).contains(&self.loss_fraction) {
            return bad("mean or loss fraction out of range".into());
        }
        Ok(())
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data")
    }

    /// Parses and validates a model file (at most 64 MiB).
    pub fn from_json(text: &str) -> Result<Model> {
        if text.len() > 64 << 20 {
            return Err(TraceError::format("model file", "larger than 64 MiB"));
        }
        let m: Model = serde_json::from_str(text)
            .map_err(|e| TraceError::format("model file", e.to_string()))?;
        m.validate()?;
        Ok(m)
    }
}

/// The nudge y = G⁻¹(F(x)) as a dense piecewise-linear table.
#[derive(Debug, Clone)]
pub struct Nudge {
    lo: f64,
    inv_width: f64,
    /// y at each of NUDGE_CELLS + 1 grid points.
    y: Vec<f64>,
}

impl Nudge {
    /// From F's knots (truncated series) to G's knots (original).
    pub fn new(f_knots: &[f64], g_knots: &[f64]) -> Nudge {
        let lo = f_knots[0];
        let hi = f_knots[f_knots.len() - 1];
        let span = (hi - lo).max(1e-12);
        let width = span / NUDGE_CELLS as f64;
        let mut y = Vec::with_capacity(NUDGE_CELLS + 1);
        let mut seg = 0usize;
        for i in 0..=NUDGE_CELLS {
            let x = lo + width * i as f64;
            while seg + 2 < f_knots.len() && x > f_knots[seg + 1] {
                seg += 1;
            }
            y.push(exact(f_knots, g_knots, seg, x));
        }
        Nudge {
            lo,
            inv_width: 1.0 / width,
            y,
        }
    }

    /// y for one x (clamped to the table's range).
    #[inline]
    pub fn apply(&self, x: f64) -> f64 {
        let t = ((x - self.lo) * self.inv_width).clamp(0.0, NUDGE_CELLS as f64 - 1e-9);
        let i = t as usize;
        let frac = t - i as f64;
        self.y[i] + (self.y[i + 1] - self.y[i]) * frac
    }
}

/// The exact composite map on segment `seg` of F's knots.
fn exact(f: &[f64], g: &[f64], seg: usize, x: f64) -> f64 {
    let (a, b) = (f[seg], f[seg + 1]);
    if b <= a {
        return g[seg + 1];
    }
    let u = ((x - a) / (b - a)).clamp(0.0, 1.0);
    g[seg] + u * (g[seg + 1] - g[seg])
}

/// Produces latency values from a model.
pub struct Generator {
    nudge: Nudge,
    period: Vec<f64>,
}

impl Generator {
    /// Prepares one period: the inverse FFT of the kept bins, then the nudge.
    pub fn new(model: &Model, fft: &mut Fft) -> Generator {
        let nudge = Nudge::new(&model.cdf_truncated_us, &model.cdf_original_us);
        let mut period = model.truncated_series(fft);
        for v in &mut period {
            *v = nudge.apply(*v);
        }
        Generator { nudge, period }
    }

    /// The first `count` values of the model's series (µs).
    pub fn generate(&self, count: usize) -> Vec<f64> {
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let take = (count - out.len()).min(self.period.len());
            out.extend_from_slice(&self.period[..take]);
        }
        out
    }

    /// One nudged period.
    pub fn period(&self) -> &[f64] {
        &self.period
    }

    pub fn nudge(&self) -> &Nudge {
        &self.nudge
    }
}

/// Regenerates `model.n` values from scratch (inverse FFT, nudge table,
/// nudge) into `out`: the unit the speed figures time.
pub fn regenerate_into(model: &Model, fft: &mut Fft, out: &mut Vec<f64>) {
    let nudge = Nudge::new(&model.cdf_truncated_us, &model.cdf_original_us);
    *out = model.truncated_series(fft);
    for v in out.iter_mut() {
        *v = nudge.apply(*v);
    }
}

/// Regenerates from a model just built, reusing its truncated series (no
/// second inverse FFT): the nudge table, then the nudge.
pub fn nudge_into(model: &Model, truncated: &[f64], out: &mut Vec<f64>) {
    let nudge = Nudge::new(&model.cdf_truncated_us, &model.cdf_original_us);
    out.clear();
    out.extend(truncated.iter().map(|&v| nudge.apply(v)));
}

/// Two-sample Kolmogorov–Smirnov distance sup |F_a − F_b|.
pub fn ks_distance(a: &[f64], b: &[f64]) -> f64 {
    let mut x = a.to_vec();
    let mut y = b.to_vec();
    x.sort_unstable_by(f64::total_cmp);
    y.sort_unstable_by(f64::total_cmp);
    let (n, m) = (x.len() as f64, y.len() as f64);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0.0f64);
    while i < x.len() && j < y.len() {
        let v = x[i].min(y[j]);
        while i < x.len() && x[i] <= v {
            i += 1;
        }
        while j < y.len() && y[j] <= v {
            j += 1;
        }
        d = d.max((i as f64 / n - j as f64 / m).abs());
    }
    d
}

/// How well a regenerated series matches its original.
#[derive(Debug, Clone, Serialize)]
pub struct Fidelity {
    pub mean_original_us: f64,
    pub mean_model_us: f64,
    /// (model − original) / original.
    pub mean_error: f64,
    pub std_original_us: f64,
    pub std_model_us: f64,
    pub std_error: f64,
    /// Kolmogorov–Smirnov distance between the two distributions.
    pub ks: f64,
    /// RMS of the point-by-point difference, µs.
    pub rms_error_us: f64,
}

pub fn fidelity(original: &[f64], model: &[f64]) -> Fidelity {
    let ms = |x: &[f64]| {
        let m = x.iter().sum::<f64>() / x.len().max(1) as f64;
        let v = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len().max(2) - 1) as f64;
        (m, v.sqrt())
    };
    let (m0, s0) = ms(original);
    let (m1, s1) = ms(model);
    let n = original.len().min(model.len()).max(1);
    let rms = (original
        .iter()
        .zip(model)
        .map(|(a, b)| (a - b).powi(2))
        .sum::<f64>()
        / n as f64)
        .sqrt();
    Fidelity {
        mean_original_us: m0,
        mean_model_us: m1,
        mean_error: (m1 - m0) / m0.abs().max(1e-12),
        std_original_us: s0,
        std_model_us: s1,
        std_error: (s1 - s0) / s0.abs().max(1e-12),
        ks: ks_distance(original, model),
        rms_error_us: rms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeping_every_bin_reproduces_the_series() {
        let x: Vec<f64> = (0..64).map(|i| 30.0 + ((i * 7) % 11) as f64).collect();
        let mut fft = Fft::new();
        let (m, t) = Model::build_with_truncated(&x, 1000, &mut fft).unwrap();
        assert_eq!(m.k, 32);
        for (a, b) in x.iter().zip(&t) {
            assert!((a - b).abs() < 1e-9);
        }
        assert!((m.variance_kept - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_nudge_maps_knots_to_knots() {
        let f: Vec<f64> = (0..100).map(|i| i as f64).collect();
        let g: Vec<f64> = (0..100).map(|i| (i / 10) as f64 * 1.4).collect();
        let n = Nudge::new(&f, &g);
        for (i, gi) in g.iter().enumerate() {
            assert!((n.apply(i as f64) - gi).abs() < 0.05, "{i}");
        }
        assert_eq!(n.apply(-5.0), g[0]);
        assert_eq!(n.apply(500.0), g[99]);
    }

    #[test]
    fn ks_of_equal_and_disjoint_samples() {
        let a = [1.0, 2.0, 3.0];
        assert_eq!(ks_distance(&a, &a), 0.0);
        assert_eq!(ks_distance(&a, &[10.0, 11.0]), 1.0);
    }

    #[test]
    fn damaged_models_are_refused() {
        let x: Vec<f64> = (0..200).map(|i| (i as f64 * 0.3).sin()).collect();
        let m = Model::build(&x, 10, &mut Fft::new()).unwrap();
        let ok = m.to_json();
        assert!(Model::from_json(&ok).is_ok());
        for (from, to) in [
            ("\"n\": 200", "\"n\": 99999999999"),
            ("\"k\": 10", "\"k\": 11"),
            ("pathsonde-trace-model", "other"),
        ] {
            assert!(Model::from_json(&ok.replacen(from, to, 1)).is_err(), "{to}");
        }
        assert!(Model::from_json("{").is_err());
        let mut bad = m.clone();
        bad.coefficients[0].bin = 5000;
        assert!(bad.validate().is_err());
        bad = m.clone();
        bad.cdf_original_us.swap(0, 99);
        assert!(bad.validate().is_err());
    }
}
