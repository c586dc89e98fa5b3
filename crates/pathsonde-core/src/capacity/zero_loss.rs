//! The zero-loss fit: the rate a path delivers to a UDPST test at the point
//! where the test begins to cause loss, read from the test's own status
//! feedback (docs/capacity.md, "The zero-loss fit").
//!
//! Why it exists: RFC 9097's maximum is the best sub-interval, and a loss-
//! driven search reaches it by pushing into the bottleneck queue.  When
//! unresponsive traffic shares a tail-drop queue, that traffic loses packets
//! at about the same ratio as the test, so a test that accepts loss takes
//! part of the other traffic's share: Type C's maximum read 13–38 % above
//! the capacity the cross traffic left in the lab.  A user asking "how much
//! can I have without pushing others out" wants the rate at zero loss.
//!
//! The model: a bottleneck of capacity C carrying offered unresponsive
//! traffic X and the test's load L.  Past the knee both lose at the ratio
//! p = 1 − C/(L + X), the test receives D = L·(1 − p), and so
//!
//! ```text
//!     D = (C − X) + X·p
//! ```
//!
//! a line in (p, D) whose value at p = 0 is C − X, the capacity left, and
//! whose slope is X.  Each status feedback gives one (p, D) point without
//! any knowledge of C or X; a search that sweeps its rate (Type C) spreads
//! the points along the line and the fit reads the intercept.
//!
//! When the test's rate hardly moves (Type B holding at its loss
//! threshold), the loss varies with the cross traffic instead, which bends
//! the points the other way; the slope then shows no significant rise and
//! the fit says it cannot tell ([`Unclear::RateIndependent`]) rather than
//! report a number it would get wrong.
//!
//! Sans-IO and O(1) memory: trials are pooled into [`WINDOW`]-long windows
//! and each window updates running (Welford) moments.

use super::rate_table::IpFamily;
use super::receiver::TrialStats;
use crate::units::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};

/// Trials are pooled until a window spans at least this long: 50 ms trials
/// count a few hundred datagrams, and two of them halve the counting noise.
pub(crate) const WINDOW: DurationNs = DurationNs::from_ms(100);
/// Trials in the test's first this-long are left out: the delay minimum and
/// the queue are still settling.
pub(crate) const WARM_UP: DurationNs = DurationNs::from_ms(200);
/// A window counts as congested when the test lost more than this fraction.
pub(crate) const CONGESTED_LOSS: f64 = 0.005;
/// Fewest congested windows the fit reads (1 s of them).
pub(crate) const MIN_WINDOWS: u32 = 10;
/// The slope's t statistic needed to say the loss followed the test's rate.
pub(crate) const MIN_SLOPE_T: f64 = 3.0;
/// The band is ± this many standard errors of the intercept.  Not two:
/// neighbouring windows are not independent (a Type C ramp spans several),
/// so the textbook error is too small; with two the band held the truth in
/// 9 of 15 tests on held-out lab paths, with three in 13 (docs/capacity.md,
/// "Held-out paths").
pub(crate) const BAND_SE: f64 = 3.0;
/// The band is at least ± this fraction of the estimate: the model's
/// proportional drop is an approximation (constant-rate or mixed-size cross
/// traffic shares a tail-drop queue a little unevenly).
pub(crate) const BAND_FLOOR: f64 = 0.02;

/// One trial interval's counts, summed over the test's connections (spec
/// §6.2: ti_rx_datagrams, ti_rx_bytes, ti_loss, ti_elapsed).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Trial {
    pub rx_datagrams: u64,
    /// UDP payload bytes received (the sum of payload_len).
    pub rx_bytes: Bytes,
    pub loss: u64,
    pub elapsed: DurationNs,
}

impl Trial {
    /// Adds another connection's trial over the same stretch of time: the
    /// counts add up, the length is the longer of the two.
    pub fn alongside(&mut self, t: &Trial) {
        self.add_counts(t);
        self.elapsed = self.elapsed.max(t.elapsed);
    }

    /// Appends the next trial in time: counts and lengths add up.
    fn then(&mut self, t: &Trial) {
        self.add_counts(t);
        self.elapsed += t.elapsed;
    }

    fn add_counts(&mut self, t: &Trial) {
        self.rx_datagrams = self.rx_datagrams.saturating_add(t.rx_datagrams);
        self.rx_bytes = Bytes::new(self.rx_bytes.get().saturating_add(t.rx_bytes.get()));
        self.loss = self.loss.saturating_add(t.loss);
    }
}

impl From<&TrialStats> for Trial {
    fn from(t: &TrialStats) -> Trial {
        Trial {
            rx_datagrams: t.rx_datagrams,
            rx_bytes: t.rx_bytes,
            loss: t.loss,
            elapsed: t.elapsed,
        }
    }
}

/// Running moments of the congested windows' (loss ratio, delivered bps).
#[derive(Debug, Clone, Copy, Default)]
struct Moments {
    n: u32,
    mean_p: f64,
    mean_d: f64,
    /// Σ(p − p̄)², Σ(d − d̄)², Σ(p − p̄)(d − d̄).
    m2_p: f64,
    m2_d: f64,
    c_pd: f64,
}

impl Moments {
    fn push(&mut self, p: f64, d: f64) {
        self.n += 1;
        let n = f64::from(self.n);
        let dp = p - self.mean_p;
        let dd = d - self.mean_d;
        self.mean_p += dp / n;
        self.mean_d += dd / n;
        self.m2_p += dp * (p - self.mean_p);
        self.m2_d += dd * (d - self.mean_d);
        self.c_pd += dp * (d - self.mean_d);
    }
}

/// Why the fit gives no number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unclear {
    /// The test caused no loss after its warm-up: it never reached the
    /// knee (the table's top, a --max-rate, or too short a test).
    NoLoss,
    /// Fewer than [`MIN_WINDOWS`] congested windows.
    TooFewWindows,
    /// The delivered rate did not rise with the test's loss ratio (slope
    /// t below [`MIN_SLOPE_T`]): the search held near one rate, or nothing
    /// else shared the bottleneck.  Either way the points cannot separate
    /// the test's share from what it displaced.
    RateIndependent,
}

impl Unclear {
    /// The reason in plain words, for reports.
    pub fn words(self) -> &'static str {
        match self {
            Unclear::NoLoss => "the test caused no loss, so it never found the point where it starts to push other traffic out",
            Unclear::TooFewWindows => "the test caused loss in too few 100 ms windows to fit a line",
            Unclear::RateIndependent => "the delivered rate did not rise with the test's own loss (the search held near one rate, or nothing else shared the bottleneck), so the test's share cannot be told apart from what it displaced",
        }
    }
}

/// The fit's reading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ZeroLoss {
    /// The delivered rate at zero loss: the capacity other unresponsive
    /// traffic leaves, at the IP layer, with a band.
    Fitted {
        available_ip_layer_capacity_bps: BitRate,
        low_bps: BitRate,
        high_bps: BitRate,
        /// The slope: the unresponsive traffic the model says shared the
        /// bottleneck (a diagnostic, less certain than the intercept).
        fitted_cross_traffic_bps: BitRate,
        congested_windows: u32,
        windows: u32,
        slope_t: f64,
    },
    Unclear {
        reason: Unclear,
        congested_windows: u32,
        windows: u32,
        /// `null` with fewer than three congested windows or no spread.
        slope_t: Option<f64>,
    },
}

impl ZeroLoss {
    /// (windows closed, congested windows among them): how much the
    /// reading rests on, whatever it is.
    pub fn windows(&self) -> (u32, u32) {
        match *self {
            ZeroLoss::Fitted {
                windows,
                congested_windows,
                ..
            }
            | ZeroLoss::Unclear {
                windows,
                congested_windows,
                ..
            } => (windows, congested_windows),
        }
    }

    /// Whether the band holds `truth`; `None` without a reading (the lab's
    /// and compare's scoring of the fit).
    pub fn holds(&self, truth: BitRate) -> Option<bool> {
        self.fitted().map(|(_, lo, hi)| lo <= truth && truth <= hi)
    }

    /// The estimate and its band (estimate, low, high), or why there is none.
    pub fn reading(&self) -> Result<(BitRate, BitRate, BitRate), Unclear> {
        match *self {
            ZeroLoss::Fitted {
                available_ip_layer_capacity_bps,
                low_bps,
                high_bps,
                ..
            } => Ok((available_ip_layer_capacity_bps, low_bps, high_bps)),
            ZeroLoss::Unclear { reason, .. } => Err(reason),
        }
    }

    /// The estimate and its band, when there is one.
    pub fn fitted(&self) -> Option<(BitRate, BitRate, BitRate)> {
        self.reading().ok()
    }
}

/// Pools trials into windows and fits the line.  Feed it every trial of
/// the test in order with [`ZeroLossFit::push`]; read it at any time.
#[derive(Debug, Clone)]
pub struct ZeroLossFit {
    family: IpFamily,
    /// Time covered by the trials pushed so far.
    seen: DurationNs,
    open: Trial,
    windows: u32,
    congested: Moments,
}

impl ZeroLossFit {
    pub fn new(family: IpFamily) -> ZeroLossFit {
        ZeroLossFit {
            family,
            seen: DurationNs::ZERO,
            open: Trial::default(),
            windows: 0,
            congested: Moments::default(),
        }
    }

    /// One trial interval's counts.  Trials with no length are ignored.
    pub fn push(&mut self, trial: Trial) {
        if trial.elapsed <= DurationNs::ZERO {
            return;
        }
        self.seen += trial.elapsed;
        if self.seen <= WARM_UP {
            return;
        }
        self.open.then(&trial);
        if self.open.elapsed >= WINDOW {
            let w = std::mem::take(&mut self.open);
            self.close(&w);
        }
    }

    fn close(&mut self, w: &Trial) {
        let sent = w.rx_datagrams.saturating_add(w.loss);
        if sent == 0 {
            return;
        }
        self.windows += 1;
        let p = w.loss as f64 / sent as f64;
        if p <= CONGESTED_LOSS {
            return;
        }
        let ip_bytes =
            w.rx_bytes.get() as f64 + w.rx_datagrams as f64 * self.family.overhead().get() as f64;
        let d = ip_bytes * 8.0 / w.elapsed.secs_f64();
        if d.is_finite() {
            self.congested.push(p, d);
        }
    }

    /// The reading from the windows closed so far.
    pub fn reading(&self) -> ZeroLoss {
        let m = &self.congested;
        let unclear = |reason, slope_t| ZeroLoss::Unclear {
            reason,
            congested_windows: m.n,
            windows: self.windows,
            slope_t,
        };
        if m.n == 0 {
            return unclear(Unclear::NoLoss, None);
        }
        if m.n < 3 || m.m2_p <= 0.0 {
            return unclear(Unclear::TooFewWindows, None);
        }
        let n = f64::from(m.n);
        let slope = m.c_pd / m.m2_p;
        let intercept = m.mean_d - slope * m.mean_p;
        let residual = (m.m2_d - slope * m.c_pd).max(0.0);
        let s2 = residual / (n - 2.0);
        let se_slope = (s2 / m.m2_p).sqrt();
        let slope_t = if se_slope > 0.0 {
            slope / se_slope
        } else if slope > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        let t = slope_t.is_finite().then_some(slope_t);
        if m.n < MIN_WINDOWS {
            return unclear(Unclear::TooFewWindows, t);
        }
        if !(slope_t >= MIN_SLOPE_T && intercept > 0.0 && intercept.is_finite()) {
            return unclear(Unclear::RateIndependent, t);
        }
        let se_intercept = (s2 * (1.0 / n + m.mean_p * m.mean_p / m.m2_p)).sqrt();
        let half = (BAND_SE * se_intercept).max(BAND_FLOOR * intercept);
        ZeroLoss::Fitted {
            available_ip_layer_capacity_bps: BitRate::from_bps(intercept),
            low_bps: BitRate::from_bps((intercept - half).max(0.0)),
            high_bps: BitRate::from_bps(intercept + half),
            fitted_cross_traffic_bps: BitRate::from_bps(slope),
            congested_windows: m.n,
            windows: self.windows,
            slope_t: t.unwrap_or(f64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;
    use proptest::prelude::*;

    const PAYLOAD: u64 = 1222;
    const TRIAL: DurationNs = DurationNs::from_ms(50);

    /// A tail-drop bottleneck of IP capacity `c` (Mb/s) shared with
    /// unresponsive traffic whose 50 ms rate is `x` Mb/s ± `jitter`, as one
    /// 50 ms trial of a test offering `l` Mb/s.
    fn trial(rng: &mut SplitMix64, c: f64, x: f64, jitter: f64, l: f64) -> Trial {
        let x_now = x * (1.0 + jitter * (2.0 * rng.next_f64() - 1.0));
        let p = (1.0 - c / (l + x_now)).max(0.0);
        let bits_per = ((PAYLOAD + 28) * 8) as f64;
        let sent = (l * 1e6 * TRIAL.secs_f64() / bits_per).round() as u64;
        let loss = (sent as f64 * p).round() as u64;
        let rx = sent - loss;
        Trial {
            rx_datagrams: rx,
            rx_bytes: Bytes::new(rx * PAYLOAD),
            loss,
            elapsed: TRIAL,
        }
    }

    /// Type C's shape: ramps past the knee, backs off, ramps again — the
    /// offered rate sweeps 0.3–2 × the available capacity.
    fn sweeping(c: f64, x: f64, seed: u64) -> ZeroLoss {
        let mut rng = SplitMix64::new(seed);
        let mut fit = ZeroLossFit::new(IpFamily::V4);
        let a = c - x;
        for i in 0..200 {
            let phase = (i % 40) as f64 / 40.0;
            let l = a * (0.3 + 1.7 * phase);
            fit.push(trial(&mut rng, c, x, 0.05, l));
        }
        fit.reading()
    }

    /// Type B's shape: holds one rate just past the knee.
    fn holding(c: f64, x: f64, seed: u64) -> ZeroLoss {
        let mut rng = SplitMix64::new(seed);
        let mut fit = ZeroLossFit::new(IpFamily::V4);
        for _ in 0..200 {
            fit.push(trial(&mut rng, c, x, 0.15, (c - x) * 1.05));
        }
        fit.reading()
    }

    fn estimate(z: &ZeroLoss) -> f64 {
        z.fitted().expect("a fitted reading").0.mbps()
    }

    #[test]
    fn reads_the_capacity_left_not_the_capacity_nor_a_constant() {
        // Two paths with different answers: a method returning C, 2·A, a
        // constant or nothing fails one of these.
        for (c, x, seed) in [(98.8, 29.6, 1), (296.4, 177.8, 2), (296.4, 88.9, 3)] {
            let z = sweeping(c, x, seed);
            let a = c - x;
            let got = estimate(&z);
            assert!(
                (got / a - 1.0).abs() < 0.02,
                "C {c} X {x}: read {got}, truth {a}"
            );
            let (_, lo, hi) = z.fitted().unwrap();
            assert!(
                lo.mbps() <= a && a <= hi.mbps(),
                "band {lo}–{hi} misses {a}"
            );
            assert!(
                hi.mbps() < c,
                "the band reaches the capacity: it says nothing"
            );
        }
    }

    #[test]
    fn the_slope_is_the_cross_traffic() {
        let z = sweeping(296.4, 177.8, 9);
        let ZeroLoss::Fitted {
            fitted_cross_traffic_bps,
            slope_t,
            ..
        } = z
        else {
            panic!("{z:?}")
        };
        assert!((fitted_cross_traffic_bps.mbps() / 177.8 - 1.0).abs() < 0.05);
        assert!(slope_t >= MIN_SLOPE_T);
    }

    #[test]
    fn a_search_holding_one_rate_is_unclear_not_wrong() {
        let z = holding(98.8, 59.3, 4);
        assert!(
            matches!(
                z,
                ZeroLoss::Unclear {
                    reason: Unclear::RateIndependent,
                    ..
                }
            ),
            "{z:?}"
        );
    }

    #[test]
    fn a_path_never_congested_says_so() {
        let mut fit = ZeroLossFit::new(IpFamily::V4);
        let mut rng = SplitMix64::new(5);
        for _ in 0..100 {
            fit.push(trial(&mut rng, 1000.0, 0.0, 0.0, 200.0));
        }
        assert!(matches!(
            fit.reading(),
            ZeroLoss::Unclear {
                reason: Unclear::NoLoss,
                windows: 48,
                ..
            }
        ));
    }

    #[test]
    fn few_congested_windows_are_too_few() {
        let mut fit = ZeroLossFit::new(IpFamily::V4);
        let mut rng = SplitMix64::new(6);
        for i in 0..40 {
            let l = if i % 10 == 0 { 150.0 } else { 50.0 };
            fit.push(trial(&mut rng, 100.0, 0.0, 0.0, l));
        }
        assert!(matches!(
            fit.reading(),
            ZeroLoss::Unclear {
                reason: Unclear::TooFewWindows,
                ..
            }
        ));
    }

    #[test]
    fn warm_up_trials_are_left_out_and_trials_pool_into_windows() {
        let mut fit = ZeroLossFit::new(IpFamily::V4);
        // Four 50 ms trials of warm-up, then two 5 ms trials short of a window.
        let t = |ms: i64| Trial {
            rx_datagrams: 10,
            rx_bytes: Bytes::new(10 * PAYLOAD),
            loss: 5,
            elapsed: DurationNs::from_ms(ms),
        };
        for _ in 0..4 {
            fit.push(t(50));
        }
        assert_eq!(fit.windows, 0);
        fit.push(t(5));
        fit.push(t(5));
        assert_eq!(fit.windows, 0, "10 ms is not a window");
        for _ in 0..18 {
            fit.push(t(5));
        }
        assert_eq!(fit.windows, 1, "twenty 5 ms trials make one 100 ms window");
        assert_eq!(fit.congested.n, 1);
    }

    #[test]
    fn ipv6_counts_its_longer_headers() {
        let w = Trial {
            rx_datagrams: 100,
            rx_bytes: Bytes::new(100 * PAYLOAD),
            loss: 10,
            elapsed: DurationNs::from_ms(100),
        };
        let d = |family| {
            let mut f = ZeroLossFit::new(family);
            f.seen = WARM_UP;
            f.push(w);
            f.congested.mean_d
        };
        let (v4, v6) = (d(IpFamily::V4), d(IpFamily::V6));
        assert!((v4 - 100.0 * 1250.0 * 80.0).abs() < 1e-3);
        assert!((v6 - v4 - 100.0 * 20.0 * 80.0).abs() < 1e-3);
    }

    proptest! {
        /// Any counts, including zeros and extremes, give a reading without
        /// panicking, and a fitted band is ordered around its estimate.
        #[test]
        fn never_panics(trials in proptest::collection::vec(
            (any::<u32>(), any::<u64>(), any::<u32>(), -10_000_000i64..1_000_000_000), 0..80)) {
            let mut fit = ZeroLossFit::new(IpFamily::V4);
            for (rx, bytes, loss, ns) in trials {
                fit.push(Trial {
                    rx_datagrams: u64::from(rx),
                    rx_bytes: Bytes::new(bytes),
                    loss: u64::from(loss),
                    elapsed: DurationNs::from_ns(ns),
                });
            }
            if let Some((a, lo, hi)) = fit.reading().fitted() {
                prop_assert!(lo <= a && a <= hi);
            }
        }
    }
}
