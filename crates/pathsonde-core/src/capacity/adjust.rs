//! Load-rate adjustment (spec §10): the search RFC 9097 runs over the
//! sending-rate table, one decision per trial interval, on the server.
//!
//! Each status feedback is first classified as GOOD, BAD or HOLD from its
//! sequence errors, its delay variation and (optionally) its ECN CE marks
//! ([`classify`]).  The overrides of §10.2 come next (suppressed start,
//! fixed rate); otherwise the selected algorithm — [`type_b::TypeB`] or
//! [`type_c::TypeC`], both [`Search`]es — moves the row.  [`Adjuster`]
//! puts the three together behind [`LoadAdjust`], and keeps every row it
//! returns within the ceiling (`--max-rate`).

pub mod type_b;
pub mod type_c;

use super::rate_table::RowIndex;
use crate::units::DurationNs;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Default lower delay-variation threshold (TA field `low_thresh`, 30 ms):
/// a trial interval is GOOD only with its delay variation below it.
pub(crate) const DEFAULT_LOW_THRESH: DurationNs = DurationNs::from_ms(30);
/// Default upper delay-variation threshold (`upper_thresh`, 90 ms): a delay
/// variation above it makes a trial interval BAD.
pub(crate) const DEFAULT_UPPER_THRESH: DurationNs = DurationNs::from_ms(90);
/// The smallest delay-variation threshold a server accepts (1 ms); outside
/// [1, 10000] ms both thresholds fall back to their defaults (§3.3).
pub(crate) const MIN_THRESH: DurationNs = DurationNs::from_ms(1);
/// The largest delay-variation threshold a server accepts (10 s).
pub(crate) const MAX_THRESH: DurationNs = DurationNs::from_ms(10_000);
/// Default fast-step size Δ in rows (`high_speed_delta`, 10; accepted 1–255).
pub(crate) const DEFAULT_HIGH_SPEED_DELTA: u8 = 10;
/// Default congestion count S that triggers the big back-off and the slow
/// mode (`slow_adj_thresh`, 3; accepted 1–65535).
pub(crate) const DEFAULT_SLOW_ADJ_THRESH: u16 = 3;
/// Default sequence-error threshold per trial interval (`seq_err_thresh`,
/// 10): more errors than this make a trial interval BAD.
pub(crate) const DEFAULT_SEQ_ERR_THRESH: u16 = 10;
/// The big back-off on the S-th congestion event below H, in units of Δ
/// (3Δ = 30 rows by default).
pub(crate) const BACKOFF_DELTAS: u32 = 3;
/// Type C: the slow moves allowed before the fast path is re-enabled, at first (5).
pub(crate) const RETRY_LIMIT_START: u32 = 5;
/// Type C: how much the retry limit grows after each retry taken on a GOOD (5).
pub(crate) const RETRY_LIMIT_STEP: u32 = 5;
/// The ECN CE threshold's scale (extension): threshold `t` reacts to a CE share above `(t − 1)/255`.
pub(crate) const ECN_CE_THRESH_SCALE: u64 = 255;

/// Which search the server runs (TA field `rate_adj_algo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// Type B (0): RFC 9097's search — +Δ rows per GOOD below 1 Gb/s.
    #[default]
    B,
    /// Type C (1): multiply and retry — the row doubles every second GOOD below 1 Gb/s.
    C,
}

/// How the row is chosen (TA fields `sr_index` and modifier 0x01).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateMode {
    /// Search from row 0 (`sr_index` 0xFFFF).
    #[default]
    Search,
    /// Hold this row for the whole test.
    Fixed(RowIndex),
    /// Search, starting at this row.
    StartAt(RowIndex),
}

/// The test parameters the adjustment reads (after the server's policing, §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdjustConfig {
    pub algorithm: Algorithm,
    pub mode: RateMode,
    /// The highest row the server may choose (its `--max-rate`); [`RowIndex::MAX`] for none.
    pub ceiling: RowIndex,
    pub low_thresh: DurationNs,
    pub upper_thresh: DurationNs,
    /// Compare one-way delay variation (true) or RTT variation (false, default).
    pub use_owd: bool,
    pub high_speed_delta: u8,
    pub slow_adj_thresh: u16,
    pub seq_err_thresh: u16,
    /// Only loss counts as a sequence error (true, default); otherwise
    /// reordered and duplicated datagrams count too.
    pub ignore_reorder_dup: bool,
    /// (extension) 0 = off; 1–255 = CE threshold (§10.5).  The server sets it to 0
    /// unless the test traffic is ECT-marked.
    pub ecn_ce_thresh: u8,
    /// (extension) Sub-intervals at the start during which no adjustment is made (0 = off).
    pub suppress_subints: u16,
}

impl Default for AdjustConfig {
    fn default() -> Self {
        AdjustConfig {
            algorithm: Algorithm::B,
            mode: RateMode::Search,
            ceiling: RowIndex::MAX,
            low_thresh: DEFAULT_LOW_THRESH,
            upper_thresh: DEFAULT_UPPER_THRESH,
            use_owd: false,
            high_speed_delta: DEFAULT_HIGH_SPEED_DELTA,
            slow_adj_thresh: DEFAULT_SLOW_ADJ_THRESH,
            seq_err_thresh: DEFAULT_SEQ_ERR_THRESH,
            ignore_reorder_dup: true,
            ecn_ce_thresh: 0,
            suppress_subints: 0,
        }
    }
}

impl AdjustConfig {
    /// The values a server puts in its TA Response for these (§3.3):
    /// thresholds outside 1–10000 ms, or low above upper, become 30/90 ms;
    /// Δ = 0 becomes 10; S = 0 becomes 3.
    pub fn policed(mut self) -> Self {
        let ok = |t: DurationNs| (MIN_THRESH..=MAX_THRESH).contains(&t);
        if !ok(self.low_thresh) {
            self.low_thresh = DEFAULT_LOW_THRESH;
        }
        if !ok(self.upper_thresh) {
            self.upper_thresh = DEFAULT_UPPER_THRESH;
        }
        if self.low_thresh > self.upper_thresh {
            self.low_thresh = DEFAULT_LOW_THRESH;
            self.upper_thresh = DEFAULT_UPPER_THRESH;
        }
        if self.high_speed_delta == 0 {
            self.high_speed_delta = DEFAULT_HIGH_SPEED_DELTA;
        }
        if self.slow_adj_thresh == 0 {
            self.slow_adj_thresh = DEFAULT_SLOW_ADJ_THRESH;
        }
        self
    }

    /// The row a test starts at: what an upstream TA Response carries.
    pub fn initial_row(&self) -> RowIndex {
        let row = match self.mode {
            RateMode::Fixed(_) if self.suppress_subints > 0 => RowIndex::ZERO,
            RateMode::Fixed(r) | RateMode::StartAt(r) => r,
            RateMode::Search => RowIndex::ZERO,
        };
        row.min(self.ceiling)
    }

    fn limits(&self) -> Limits {
        Limits {
            high_speed: RowIndex::HIGH_SPEED.get() as u32,
            max: self.ceiling.min(RowIndex::MAX).get() as u32,
            delta: self.high_speed_delta.max(1) as u32,
            slow_adj_thresh: self.slow_adj_thresh.max(1) as u32,
        }
    }
}

/// What the server has from one trial interval (one Status PDU downstream,
/// its own counters upstream), in the units the algorithm compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Feedback {
    /// Datagrams lost in the trial interval (`ti_loss`).
    pub loss: u64,
    /// Datagrams that arrived out of order (`ti_reorder`).
    pub reorder: u64,
    /// Duplicated datagrams (`ti_dup`).
    pub dup: u64,
    /// Sum of the one-way delay-variation samples (`owdv_sum`).
    pub owdv_sum: DurationNs,
    /// Their count (`owdv_count`); 0 when there was no sample.
    pub owdv_count: u64,
    /// The latest RTT minus the test's minimum RTT (`rtt_var_sample`);
    /// `None` when no new RTT sample came in this trial interval.
    pub rtt_var_sample: Option<DurationNs>,
    /// Load datagrams received (`ti_rx_datagrams`).
    pub rx_datagrams: u64,
    /// (extension) Of those, how many carried ECN CE (`ti_ce_count`).
    pub ce_count: u64,
    /// The last completed sub-interval (`subint_seq`; 0 = none yet).
    pub subint_seq: u32,
}

/// How one trial interval reads (§10.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Sequence errors within the threshold, delay variation below the
    /// lower threshold, no CE hit: go faster.
    Good,
    /// Too many sequence errors, delay variation above the upper threshold,
    /// or a CE hit: go slower.
    Bad,
    /// Neither (delay variation between the thresholds, or no delay
    /// information at all): keep the row.
    Hold,
}

/// What set the row of a [`Decision`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// (extension) The start of the test, before `suppress_subints` sub-intervals completed.
    Suppressed,
    /// A fixed rate.
    Fixed,
    /// The search (Type B or C).
    Search,
}

/// The outcome of one trial interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The row to send at during the next trial interval.
    pub row: RowIndex,
    /// How the feedback read (computed even when an override set the row).
    pub class: Class,
    pub by: DecidedBy,
}

/// The bounds a search moves in (all in rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// H, the high-speed threshold (row 1000): fast steps only below it.
    pub high_speed: u32,
    /// MAX: the top row, or the ceiling if lower.
    pub max: u32,
    /// Δ, the fast-step size.
    pub delta: u32,
    /// S, the congestion count that triggers the big back-off.
    pub slow_adj_thresh: u32,
}

impl Limits {
    /// `idx` back off by 3Δ rows (to 0 if it is not above 3Δ).
    fn backoff(&self, idx: u32) -> u32 {
        idx.saturating_sub(BACKOFF_DELTAS * self.delta)
    }
}

/// One search algorithm: what one classified trial interval does to its
/// row and its own state (§10.3, §10.4).  Rows are plain `u32` inside a
/// search; it never returns one above `limits.max`.
pub trait Search: fmt::Debug + Send {
    /// The algorithm's name for reports ("b", "c").
    fn name(&self) -> &'static str;
    /// The current row (idx).
    fn row(&self) -> u32;
    /// Set the row (the start row; no other state changes).
    fn set_row(&mut self, row: u32);
    /// Apply one GOOD, BAD or HOLD.
    fn step(&mut self, class: Class, limits: &Limits);
}

/// The server's load adjustment, as the net layer drives it: one call per
/// trial interval, returning the row for the next one.
pub trait LoadAdjust: fmt::Debug + Send {
    fn on_feedback(&mut self, feedback: &Feedback) -> Decision;
    /// The row in use now (the initial row before any feedback).
    fn row(&self) -> RowIndex;
}

/// The overrides of §10.2 in front of a [`Search`], within a ceiling.
#[derive(Debug, Clone)]
pub struct Adjuster<S> {
    cfg: AdjustConfig,
    limits: Limits,
    search: S,
}

impl<S: Search> Adjuster<S> {
    /// `cfg` is policed first ([`AdjustConfig::policed`]); its `algorithm`
    /// is not read (the search is `search`).
    pub(crate) fn with_search(cfg: AdjustConfig, mut search: S) -> Self {
        let cfg = cfg.policed();
        search.set_row(cfg.initial_row().get() as u32);
        Adjuster {
            limits: cfg.limits(),
            cfg,
            search,
        }
    }
    pub fn config(&self) -> &AdjustConfig {
        &self.cfg
    }
    pub fn search(&self) -> &S {
        &self.search
    }
}

impl<S: Search> LoadAdjust for Adjuster<S> {
    fn on_feedback(&mut self, feedback: &Feedback) -> Decision {
        let class = classify(&self.cfg, feedback);
        let suppressed =
            self.cfg.suppress_subints > 0 && feedback.subint_seq < self.cfg.suppress_subints as u32;
        let by = if suppressed {
            if let RateMode::Fixed(_) = self.cfg.mode {
                self.search.set_row(0);
            }
            DecidedBy::Suppressed
        } else if let RateMode::Fixed(r) = self.cfg.mode {
            self.search.set_row(r.get() as u32);
            DecidedBy::Fixed
        } else {
            self.search.step(class, &self.limits);
            DecidedBy::Search
        };
        // The search keeps within `limits.max`; the fixed row and the start
        // row are cut to the ceiling here.
        let row = self.search.row().min(self.limits.max);
        self.search.set_row(row);
        Decision {
            row: RowIndex::saturating(row),
            class,
            by,
        }
    }
    fn row(&self) -> RowIndex {
        RowIndex::saturating(self.search.row().min(self.limits.max))
    }
}

/// The adjuster `cfg.algorithm` names.
pub fn adjuster(cfg: AdjustConfig) -> Box<dyn LoadAdjust> {
    match cfg.algorithm {
        Algorithm::B => Box::new(Adjuster::with_search(cfg, type_b::TypeB::default())),
        Algorithm::C => Box::new(Adjuster::with_search(cfg, type_c::TypeC::default())),
    }
}

/// The sequence errors a trial interval counts (§10.1): loss, plus
/// reordered and duplicated datagrams unless `ignore_reorder_dup`.
pub(crate) fn seq_errors(cfg: &AdjustConfig, fb: &Feedback) -> u64 {
    if cfg.ignore_reorder_dup {
        fb.loss
    } else {
        fb.loss.saturating_add(fb.reorder).saturating_add(fb.dup)
    }
}

/// `d` rounded to whole milliseconds, halves up.
fn round_to_ms(d: DurationNs) -> DurationNs {
    DurationNs::from_ms(super::round_ms(d))
}

/// The delay compared with the thresholds (§10.1): the rounded mean one-way
/// delay variation (with `use_owd`), or the RTT variation sample; with no
/// such information, the lower threshold itself ("neither good nor bad").
pub fn delay(cfg: &AdjustConfig, fb: &Feedback) -> DurationNs {
    if cfg.use_owd {
        if fb.owdv_count > 0 {
            let count = i64::try_from(fb.owdv_count).unwrap_or(i64::MAX);
            return round_to_ms(DurationNs::from_ns(fb.owdv_sum.ns() / count));
        }
    } else if let Some(rtt) = fb.rtt_var_sample {
        return round_to_ms(rtt);
    }
    cfg.low_thresh
}

/// (extension) Whether the CE marks of a trial interval count as congestion
/// (§10.1): some CE, and more than `round((t − 1) · received / 255)`.
pub(crate) fn ce_hit(cfg: &AdjustConfig, fb: &Feedback) -> bool {
    if cfg.ecn_ce_thresh == 0 || fb.ce_count == 0 {
        return false;
    }
    let t = (cfg.ecn_ce_thresh - 1) as u128;
    let scale = ECN_CE_THRESH_SCALE as u128;
    let allowed = (2 * t * fb.rx_datagrams as u128 + scale) / (2 * scale);
    fb.ce_count as u128 > allowed
}

/// GOOD, BAD or HOLD for one trial interval (§10.1).
pub fn classify(cfg: &AdjustConfig, fb: &Feedback) -> Class {
    let errors = seq_errors(cfg, fb);
    let delay = delay(cfg, fb);
    let ce = ce_hit(cfg, fb);
    let too_many = errors > cfg.seq_err_thresh as u64;
    if too_many || delay > cfg.upper_thresh || ce {
        Class::Bad
    } else if delay < cfg.low_thresh {
        Class::Good
    } else {
        Class::Hold
    }
}

/// Shared helpers for the algorithms' tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// Clean feedback with an RTT sample of 1 ms.
    pub fn good() -> Feedback {
        Feedback {
            rtt_var_sample: Some(DurationNs::from_ms(1)),
            rx_datagrams: 100,
            ..Feedback::default()
        }
    }
    /// The first feedback of a test: no RTT sample yet.
    pub fn first() -> Feedback {
        Feedback {
            rx_datagrams: 1,
            ..Feedback::default()
        }
    }
    /// `n` datagrams lost, otherwise clean.
    pub fn loss(n: u64) -> Feedback {
        Feedback { loss: n, ..good() }
    }
    /// RTT variation of `ms`, otherwise clean.
    pub(crate) fn rtt_var(ms: i64) -> Feedback {
        Feedback {
            rtt_var_sample: Some(DurationNs::from_ms(ms)),
            ..good()
        }
    }
    /// The rows an adjuster returns for `feedbacks`.
    pub fn rows(a: &mut dyn LoadAdjust, feedbacks: &[Feedback]) -> Vec<u16> {
        feedbacks
            .iter()
            .map(|f| a.on_feedback(f).row.get())
            .collect()
    }
    /// A path that carries `capacity_rows` rows' worth: feedback is clean
    /// at or below it, and above it loses datagrams and queues (RTT
    /// variation well above the upper threshold).
    pub(crate) fn path_feedback(row: RowIndex, capacity_rows: u16) -> Feedback {
        if row.get() <= capacity_rows {
            good()
        } else {
            Feedback {
                loss: 50,
                rtt_var_sample: Some(DurationNs::from_ms(120)),
                ..good()
            }
        }
    }
    /// Drive `a` over such a path for `n` feedbacks (the first without an
    /// RTT sample); the rows it chose, in order.
    pub(crate) fn run_path(a: &mut dyn LoadAdjust, capacity_rows: u16, n: usize) -> Vec<u16> {
        let mut out = vec![a.on_feedback(&first()).row.get()];
        for _ in 1..n {
            let fb = path_feedback(a.row(), capacity_rows);
            out.push(a.on_feedback(&fb).row.get());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use proptest::prelude::*;

    fn row(n: u16) -> RowIndex {
        RowIndex::new(n).unwrap()
    }

    #[test]
    fn classification_follows_the_thresholds() {
        let cfg = AdjustConfig::default();
        assert_eq!(classify(&cfg, &good()), Class::Good);
        // No delay information at all: HOLD, however clean.
        assert_eq!(classify(&cfg, &first()), Class::Hold);
        // Sequence errors: up to the threshold is fine.
        assert_eq!(classify(&cfg, &loss(10)), Class::Good);
        assert_eq!(classify(&cfg, &loss(11)), Class::Bad);
        // ... and they make a trial BAD even without delay information.
        assert_eq!(
            classify(
                &cfg,
                &Feedback {
                    loss: 11,
                    ..first()
                }
            ),
            Class::Bad
        );
        // Delay: below 30 GOOD, 30..=90 HOLD, above 90 BAD.
        assert_eq!(classify(&cfg, &rtt_var(29)), Class::Good);
        assert_eq!(classify(&cfg, &rtt_var(30)), Class::Hold);
        assert_eq!(classify(&cfg, &rtt_var(90)), Class::Hold);
        assert_eq!(classify(&cfg, &rtt_var(91)), Class::Bad);
        // Reordering and duplicates count only when asked.
        let fb = Feedback {
            reorder: 6,
            dup: 6,
            ..good()
        };
        assert_eq!(classify(&cfg, &fb), Class::Good);
        let strict = AdjustConfig {
            ignore_reorder_dup: false,
            ..cfg
        };
        assert_eq!(classify(&strict, &fb), Class::Bad);
    }

    #[test]
    fn one_way_delay_variation_uses_the_rounded_mean() {
        let cfg = AdjustConfig {
            use_owd: true,
            ..AdjustConfig::default()
        };
        let owd = |sum_ms: i64, count: u64| Feedback {
            owdv_sum: DurationNs::from_ms(sum_ms),
            owdv_count: count,
            rtt_var_sample: Some(DurationNs::from_ms(500)), // ignored with use_owd
            ..good()
        };
        // 59/2 = 29.5 rounds to 30: HOLD; 58/2 = 29: GOOD.
        assert_eq!(classify(&cfg, &owd(59, 2)), Class::Hold);
        assert_eq!(classify(&cfg, &owd(58, 2)), Class::Good);
        assert_eq!(classify(&cfg, &owd(182, 2)), Class::Bad);
        // No samples: no information, HOLD (the RTT sample is not used).
        assert_eq!(classify(&cfg, &owd(0, 0)), Class::Hold);
    }

    #[test]
    fn ce_marks_count_above_their_threshold() {
        let cfg = AdjustConfig {
            ecn_ce_thresh: 1,
            ..AdjustConfig::default()
        };
        let ce = |n, rx| Feedback {
            ce_count: n,
            rx_datagrams: rx,
            ..good()
        };
        assert_eq!(classify(&cfg, &ce(1, 1000)), Class::Bad);
        assert_eq!(classify(&cfg, &ce(0, 1000)), Class::Good);
        // t = 27: allowed round(26·1000/255) = 102 marks.
        let cfg = AdjustConfig {
            ecn_ce_thresh: 27,
            ..cfg
        };
        assert_eq!(classify(&cfg, &ce(102, 1000)), Class::Good);
        assert_eq!(classify(&cfg, &ce(103, 1000)), Class::Bad);
        // Off: never.
        let off = AdjustConfig {
            ecn_ce_thresh: 0,
            ..cfg
        };
        assert_eq!(classify(&off, &ce(1000, 1000)), Class::Good);
    }

    #[test]
    fn a_fixed_rate_ignores_feedback() {
        for algorithm in [Algorithm::B, Algorithm::C] {
            let cfg = AdjustConfig {
                algorithm,
                mode: RateMode::Fixed(row(100)),
                ..AdjustConfig::default()
            };
            assert_eq!(cfg.initial_row(), row(100));
            let mut a = adjuster(cfg);
            for fb in [good(), loss(1000), rtt_var(500), first(), good()] {
                let d = a.on_feedback(&fb);
                assert_eq!((d.row, d.by), (row(100), DecidedBy::Fixed));
            }
            // Above the ceiling: the ceiling.
            let mut a = adjuster(AdjustConfig {
                ceiling: row(50),
                ..cfg
            });
            assert_eq!(a.row(), row(50));
            assert_eq!(a.on_feedback(&good()).row, row(50));
        }
    }

    #[test]
    fn a_start_row_starts_the_search_there() {
        let cfg = AdjustConfig {
            mode: RateMode::StartAt(row(500)),
            ..AdjustConfig::default()
        };
        let mut b = adjuster(cfg);
        assert_eq!(
            rows(b.as_mut(), &[first(), good(), good(), loss(20)]),
            [500, 510, 520, 519]
        );
        let mut c = adjuster(AdjustConfig {
            algorithm: Algorithm::C,
            ..cfg
        });
        // 2·500 = 1000 is not above H: wait for the second GOOD, then double.
        assert_eq!(
            rows(c.as_mut(), &[first(), good(), good(), good()]),
            [500, 500, 1000, 1001]
        );
    }

    #[test]
    fn suppression_holds_the_start_until_enough_sub_intervals() {
        let at = |subint_seq: u32, fb: Feedback| Feedback { subint_seq, ..fb };
        let cfg = AdjustConfig {
            suppress_subints: 2,
            ..AdjustConfig::default()
        };
        let mut a = adjuster(cfg);
        let d = a.on_feedback(&at(0, good()));
        assert_eq!((d.row, d.by), (RowIndex::ZERO, DecidedBy::Suppressed));
        assert_eq!(a.on_feedback(&at(1, good())).row, RowIndex::ZERO);
        let d = a.on_feedback(&at(2, good()));
        assert_eq!((d.row, d.by), (row(10), DecidedBy::Search));
        // A fixed rate is held at row 0 while suppressed, then applies.
        let fixed = AdjustConfig {
            mode: RateMode::Fixed(row(300)),
            ..cfg
        };
        assert_eq!(fixed.initial_row(), RowIndex::ZERO);
        let mut a = adjuster(fixed);
        assert_eq!(a.on_feedback(&at(1, good())).row, RowIndex::ZERO);
        assert_eq!(a.on_feedback(&at(2, good())).row, row(300));
        // A start row is where the search waits.
        let start = AdjustConfig {
            mode: RateMode::StartAt(row(300)),
            ..cfg
        };
        let mut a = adjuster(start);
        assert_eq!(a.on_feedback(&at(1, loss(100))).row, row(300));
        assert_eq!(a.on_feedback(&at(2, loss(100))).row, row(299));
    }

    #[test]
    fn policing_restores_defaults() {
        let cfg = AdjustConfig {
            low_thresh: DurationNs::from_ms(100),
            upper_thresh: DurationNs::from_ms(50),
            high_speed_delta: 0,
            slow_adj_thresh: 0,
            ..AdjustConfig::default()
        }
        .policed();
        assert_eq!(cfg.low_thresh, DEFAULT_LOW_THRESH);
        assert_eq!(cfg.upper_thresh, DEFAULT_UPPER_THRESH);
        assert_eq!(cfg.high_speed_delta, DEFAULT_HIGH_SPEED_DELTA);
        assert_eq!(cfg.slow_adj_thresh, DEFAULT_SLOW_ADJ_THRESH);
        let zero = AdjustConfig {
            low_thresh: DurationNs::ZERO,
            ..AdjustConfig::default()
        };
        assert_eq!(zero.policed().low_thresh, DEFAULT_LOW_THRESH);
    }

    fn arb_feedback() -> impl Strategy<Value = Feedback> {
        (
            (0u64..40, 0u64..40, 0u64..40, any::<u64>()),
            (
                0i64..200_000_000_000,
                0u64..100,
                proptest::option::of(0i64..1_000_000_000),
            ),
            (any::<u64>(), any::<u64>(), 0u32..20),
        )
            .prop_map(
                |((loss, reorder, dup, huge), (sum, count, rtt), (rx, ce, subint_seq))| {
                    Feedback {
                        // Now and then a count from a hostile or broken peer.
                        loss: if huge % 17 == 0 { huge } else { loss },
                        reorder,
                        dup,
                        owdv_sum: DurationNs::from_ns(sum),
                        owdv_count: count,
                        rtt_var_sample: rtt.map(DurationNs::from_ns),
                        rx_datagrams: rx,
                        ce_count: ce % 1000,
                        subint_seq,
                    }
                },
            )
    }

    fn arb_config() -> impl Strategy<Value = AdjustConfig> {
        (
            (any::<bool>(), 0u8..3, 0u16..=1152, 0u16..=1200),
            (0i64..20_000, 0i64..20_000, any::<bool>(), any::<u8>()),
            (
                any::<u16>(),
                any::<u16>(),
                any::<bool>(),
                any::<u8>(),
                0u16..6,
            ),
        )
            .prop_map(
                |((c, mode, sri, ceiling), (lo, up, use_owd, delta), (s, seq, ign, ce, sup))| {
                    let sri = RowIndex::new(sri).unwrap();
                    AdjustConfig {
                        algorithm: if c { Algorithm::C } else { Algorithm::B },
                        mode: match mode {
                            0 => RateMode::Search,
                            1 => RateMode::Fixed(sri),
                            _ => RateMode::StartAt(sri),
                        },
                        ceiling: RowIndex::saturating(ceiling as u32),
                        low_thresh: DurationNs::from_ms(lo),
                        upper_thresh: DurationNs::from_ms(up),
                        use_owd,
                        high_speed_delta: delta,
                        slow_adj_thresh: s,
                        seq_err_thresh: seq,
                        ignore_reorder_dup: ign,
                        ecn_ce_thresh: ce,
                        suppress_subints: sup,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn any_feedback_gives_a_row_within_the_ceiling(
            cfg in arb_config(),
            feedbacks in proptest::collection::vec(arb_feedback(), 0..400),
        ) {
            let mut a = adjuster(cfg);
            prop_assert!(a.row() <= cfg.ceiling);
            for fb in &feedbacks {
                let d = a.on_feedback(fb);
                prop_assert!(d.row <= cfg.ceiling && d.row <= RowIndex::MAX);
                prop_assert_eq!(d.row, a.row());
                if d.by == DecidedBy::Fixed {
                    if let RateMode::Fixed(r) = cfg.mode {
                        prop_assert_eq!(d.row, r.min(cfg.ceiling));
                    }
                }
            }
        }

        #[test]
        fn one_feedback_moves_the_search_by_a_bounded_step(
            cfg in arb_config(),
            feedbacks in proptest::collection::vec(arb_feedback(), 0..200),
        ) {
            // Up by at most Δ (B) or a doubling, capped at H (C); down by at most 3Δ.
            let cfg = AdjustConfig { mode: RateMode::Search, suppress_subints: 0, ..cfg };
            let delta = cfg.policed().high_speed_delta as i32;
            let mut a = adjuster(cfg);
            let mut before = a.row().get() as i32;
            for fb in &feedbacks {
                let after = a.on_feedback(fb).row.get() as i32;
                let up = match cfg.algorithm {
                    Algorithm::B => before + delta,
                    Algorithm::C if 2 * before > 1000 => 1000.max(before + 1),
                    // From row 0 a pending half step doubles the 1 it starts from.
                    Algorithm::C => (2 * before).max(2),
                };
                prop_assert!(after <= up, "{} -> {}", before, after);
                prop_assert!(after >= before - 3 * delta, "{} -> {}", before, after);
                before = after;
            }
        }
    }
}
