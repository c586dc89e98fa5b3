//! Seeded random numbers: SplitMix64, so a synthetic path, its faults, a
//! cross-traffic schedule and a method's randomised choices are the same on
//! every machine, bit for bit.  Its own module, below everything that draws
//! from it, so paths, methods and traffic need not reach into `synthetic`.

/// A tiny, seeded pseudo-random generator (Steele, Lea & Flood's SplitMix64).
///
/// Good enough for test noise, fully determined by its seed, and free of any
/// dependency or OS entropy.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state)
    }
    /// Uniform in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        unit_f64(self.next_u64())
    }

    /// A generator for stream `stream` of `seed`: one seed can feed many
    /// independent generators (one per flow, say) without any two starting
    /// from nearby states, which for SplitMix64 would make them overlap.
    pub fn for_stream(seed: u64, stream: u64) -> Self {
        SplitMix64::new(mix64(
            seed ^ mix64(stream.wrapping_add(0x243F_6A88_85A3_08D3)),
        ))
    }

    /// Uniform in `[0, n)`; 0 when `n` is 0.  Multiply-shift rather than `%`,
    /// so that there is no modulo bias worth speaking of.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Exponentially distributed with the given mean (inverse transform).
    /// Always finite: the uniform draw is taken from `(0, 1]`.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.next_f64()).ln()
    }

    /// Pareto (type I) with the given shape `α` and scale `x_m`: `P(X > x) =
    /// (x_m / x)^α` for `x ≥ x_m`.  The uniform draw is taken from `(0, 1]`,
    /// so the largest value is `x_m · 2^(53/α)`: finite for shapes above
    /// 0.06.
    pub fn pareto(&mut self, shape: f64, scale: f64) -> f64 {
        scale * (1.0 - self.next_f64()).powf(-1.0 / shape)
    }
}

/// The SplitMix64 output function: a good 64-bit mixer.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub(crate) fn unit_f64(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}
