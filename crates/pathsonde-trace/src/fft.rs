//! FFT helpers shared by the analysis and the model: a planner that keeps
//! its plans (planning costs more than a 30 000-point transform), power
//! spectra and autocorrelations.

use realfft::num_complex::Complex;
use realfft::RealFftPlanner;

/// A real FFT planner with reusable scratch space.
pub struct Fft {
    planner: RealFftPlanner<f64>,
}

impl Default for Fft {
    fn default() -> Self {
        Fft::new()
    }
}

impl Fft {
    pub fn new() -> Self {
        Fft {
            planner: RealFftPlanner::new(),
        }
    }

    /// Forward transform of `x` (length N): N/2+1 complex bins.  `x` is
    /// used as scratch and left unspecified.
    pub fn forward(&mut self, x: &mut [f64]) -> Vec<Complex<f64>> {
        let r2c = self.planner.plan_fft_forward(x.len());
        let mut out = r2c.make_output_vec();
        r2c.process(x, &mut out).expect("lengths from the plan");
        out
    }

    /// Inverse transform of N/2+1 bins to N real values, scaled by 1/N so
    /// that `inverse(forward(x)) == x`.  `spec` is used as scratch.
    pub fn inverse(&mut self, spec: &mut [Complex<f64>], n: usize) -> Vec<f64> {
        let c2r = self.planner.plan_fft_inverse(n);
        let mut out = c2r.make_output_vec();
        // realfft insists the DC (and for even N the Nyquist) bin be real.
        spec[0].im = 0.0;
        if n % 2 == 0 {
            if let Some(last) = spec.last_mut() {
                last.im = 0.0;
            }
        }
        c2r.process(spec, &mut out).expect("lengths from the plan");
        let scale = 1.0 / n as f64;
        for v in &mut out {
            *v *= scale;
        }
        out
    }

    /// Power |X_k|² of the mean-removed series, bins 0..=N/2.
    pub fn power_spectrum(&mut self, x: &[f64]) -> Vec<f64> {
        let mean = x.iter().sum::<f64>() / x.len().max(1) as f64;
        let mut buf: Vec<f64> = x.iter().map(|v| v - mean).collect();
        self.forward(&mut buf)
            .iter()
            .map(|c| c.norm_sqr())
            .collect()
    }

    /// Normalised autocorrelation r(0..max_lag) of the mean-removed series
    /// (r(0) = 1), by FFT with zero padding (no wrap-around).
    pub fn autocorrelation(&mut self, x: &[f64], max_lag: usize) -> Vec<f64> {
        let n = x.len();
        if n == 0 {
            return Vec::new();
        }
        let mean = x.iter().sum::<f64>() / n as f64;
        let m = (2 * n).next_power_of_two();
        let mut buf = vec![0.0; m];
        for (b, v) in buf.iter_mut().zip(x) {
            *b = v - mean;
        }
        let mut spec = self.forward(&mut buf);
        for c in &mut spec {
            *c = Complex::new(c.norm_sqr(), 0.0);
        }
        let ac = self.inverse(&mut spec, m);
        let r0 = ac[0];
        if r0 <= 0.0 {
            return vec![0.0; max_lag.min(n)];
        }
        ac[..max_lag.min(n)].iter().map(|v| v / r0).collect()
    }
}

/// Parabolic interpolation of a peak at `i` from its neighbours: the
/// fractional offset in (-0.5, 0.5) to add to `i`.
pub fn parabolic_offset(y: &[f64], i: usize) -> f64 {
    if i == 0 || i + 1 >= y.len() {
        return 0.0;
    }
    let (a, b, c) = (y[i - 1], y[i], y[i + 1]);
    let d = a - 2.0 * b + c;
    if d.abs() < 1e-300 {
        0.0
    } else {
        (0.5 * (a - c) / d).clamp(-0.5, 0.5)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_undoes_forward() {
        let mut f = Fft::new();
        let x: Vec<f64> = (0..30).map(|i| (i as f64 * 0.7).sin() + 2.0).collect();
        let mut s = f.forward(&mut x.clone());
        let y = f.inverse(&mut s, x.len());
        for (a, b) in x.iter().zip(&y) {
            assert!((a - b).abs() < 1e-9);
        }
    }

    #[test]
    fn autocorrelation_finds_a_period() {
        let mut f = Fft::new();
        let x: Vec<f64> = (0..1000).map(|i| (i % 25) as f64).collect();
        let r = f.autocorrelation(&x, 60);
        assert!((r[0] - 1.0).abs() < 1e-12);
        let best = (10..60).max_by(|&a, &b| r[a].total_cmp(&r[b])).unwrap();
        assert_eq!(best, 25);
    }
}
