//! The packet-size tables of the papers, and the samplers built from them.

use super::MIN_PACKET;
use crate::rng::SplitMix64;
use crate::units::Bytes;

/// What an Ethernet frame adds to an IP datagram: 14 bytes of MAC header and
/// 4 of frame check sequence.  The comparison paper gives its sizes as L2
/// frames (SmartBits counts the FCS), so an IP datagram is 18 bytes shorter.
pub(crate) const ETHERNET_FRAMING: u64 = 18;

/// The L2 frame sizes of the comparison paper's SmartBits mix (Shriram et
/// al. 2005, 2.2): "Each flow had a burst size of 1 and consisted of either
/// 64, 576, 1510 or 8192 byte L2 frames. [...] We mixed the frames of four
/// sizes in equal proportions."  The last is the jumbo class.
pub(crate) const MIX_L2_FRAMES: [u64; 4] = [64, 576, 1510, 8192];

/// The flows SmartFlow generated at each load level in the comparison paper.
pub(crate) const MIX_PAPER_FLOWS: u32 = 19;

/// The IP datagram sizes of the mix: [`MIX_L2_FRAMES`] less
/// [`ETHERNET_FRAMING`], i.e. 46, 558, 1492 and 8174 bytes.
pub fn mix_ip_sizes(jumbo: bool) -> Vec<Bytes> {
    let n = if jumbo { 4 } else { 3 };
    MIX_L2_FRAMES[..n]
        .iter()
        .map(|f| Bytes(f - ETHERNET_FRAMING))
        .collect()
}

/// One row of a size table: a single size, or the sizes strictly between two
/// bounds, drawn uniformly (by packet count) within the row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeClass {
    Exact(u64),
    /// Every size in `low + 1 ..= high - 1`.  The bounds are themselves rows
    /// of the ICIM table (576 and 1500 are), so they are left to those rows.
    Between {
        low: u64,
        high: u64,
    },
}

impl SizeClass {
    /// The sizes this row can produce, before clamping.
    fn sizes(self) -> std::ops::RangeInclusive<u64> {
        match self {
            SizeClass::Exact(s) => s..=s,
            SizeClass::Between { low, high } => low + 1..=high.saturating_sub(1).max(low + 1),
        }
    }
}

/// A row of ICIM's Table I: a size class and its share of the *bandwidth*
/// (bytes), in percent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShareRow {
    pub class: SizeClass,
    pub byte_share_percent: f64,
}

/// Table I of Man, Hasegawa & Murata, "ICIM: An Inline Network Measurement
/// Mechanism for Highspeed Networks": "Distribution of packet size of cross
/// traffic", column "Proportion of bandwidth (%)".  IP datagram sizes (the
/// NLANR traces it comes from count IP bytes).  The shares sum to 100.
pub const ICIM_TABLE_I: [ShareRow; 13] = [
    row(SizeClass::Exact(28), 0.08),
    row(SizeClass::Exact(40), 0.51),
    row(SizeClass::Exact(44), 0.22),
    row(SizeClass::Exact(48), 0.24),
    row(SizeClass::Exact(52), 0.45),
    row(SizeClass::Exact(552), 1.10),
    row(SizeClass::Exact(576), 16.40),
    row(SizeClass::Exact(628), 1.50),
    row(SizeClass::Exact(1420), 10.50),
    row(SizeClass::Exact(1500), 37.10),
    row(SizeClass::Between { low: 40, high: 80 }, 4.60),
    row(SizeClass::Between { low: 80, high: 576 }, 9.60),
    row(
        SizeClass::Between {
            low: 576,
            high: 1500,
        },
        17.70,
    ),
];

const fn row(class: SizeClass, byte_share_percent: f64) -> ShareRow {
    ShareRow {
        class,
        byte_share_percent,
    }
}

/// Clamps a datagram size to what can be sent: at least one payload byte
/// after the IP and UDP headers, at most the MTU.
pub(crate) fn clamp_size(size: u64, mtu: u64) -> u64 {
    size.clamp(MIN_PACKET, mtu.max(MIN_PACKET))
}

/// A sampler that draws packet sizes i.i.d. so that each row of a table gets
/// its stated share of the *bytes*.
///
/// A row with byte share `s` and mean (clamped) size `m` is drawn with
/// probability proportional to `s / m`: then its expected bytes per packet
/// are proportional to `s`.  Computing `m` after clamping keeps the shares
/// exact when the MTU cuts the large rows.
#[derive(Debug, Clone)]
pub(crate) struct ByteShareSampler {
    /// Per row: the first size and how many sizes follow it (0 for an
    /// exact size, which then costs no draw), resolved once so that a draw
    /// is a search and at most one `below`, with no per-draw matching.
    rows: Vec<(u64, u64)>,
    /// Cumulative draw probabilities, the last being 1.
    cumulative: Vec<f64>,
    /// Some cumulative probability is NaN (a table of zero shares): search
    /// linearly, as the binary search assumes an ordered array.
    unordered: bool,
    mtu: u64,
    mean_size: f64,
}

impl ByteShareSampler {
    pub(crate) fn new(table: &[ShareRow], mtu: u64) -> Self {
        let mut weights = Vec::with_capacity(table.len());
        for r in table {
            let sizes = r.class.sizes();
            let n = (sizes.end() - sizes.start() + 1) as f64;
            let mean = sizes.map(|s| clamp_size(s, mtu) as f64).sum::<f64>() / n;
            weights.push(r.byte_share_percent.max(0.0) / mean);
        }
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let cumulative: Vec<f64> = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        // Mean packet size: total share over total packets-per-share.
        let share: f64 = table.iter().map(|r| r.byte_share_percent.max(0.0)).sum();
        let unordered = cumulative.iter().any(|c| c.is_nan());
        ByteShareSampler {
            unordered,
            rows: table
                .iter()
                .map(|r| match r.class {
                    SizeClass::Exact(s) => (s, 0),
                    SizeClass::Between { .. } => {
                        let sizes = r.class.sizes();
                        (*sizes.start(), sizes.end() - sizes.start() + 1)
                    }
                })
                .collect(),
            cumulative,
            mtu,
            mean_size: share / total,
        }
    }

    pub(crate) fn mean_size(&self) -> f64 {
        self.mean_size
    }

    #[inline]
    pub(crate) fn draw(&self, rng: &mut SplitMix64) -> u64 {
        let u = rng.next_f64();
        // The first row whose cumulative probability exceeds `u` (the
        // cumulative is non-decreasing, so a binary search finds the same
        // row a linear scan would); rounding can leave the last below 1.
        let last = self.rows.len() - 1;
        let i = if self.unordered {
            self.cumulative.iter().position(|&c| u < c).unwrap_or(last)
        } else {
            self.cumulative.partition_point(|&c| c <= u).min(last)
        };
        let (start, span) = self.rows[i];
        let size = if span == 0 {
            start
        } else {
            start + rng.below(span)
        };
        clamp_size(size, self.mtu)
    }
}

/// A sampler that deals sizes from a shuffled deck holding one card per
/// class: every class gets exactly the same number of packets in every run
/// of `classes` packets, in a seeded random order.
///
/// This is how "equal proportions" of frames is kept exact at every time
/// scale above a few packets, while the order stays pseudo-random as
/// SmartFlow's was.
#[derive(Debug, Clone)]
pub(crate) struct Deck {
    classes: Vec<u64>,
    hand: Vec<u64>,
}

impl Deck {
    pub(crate) fn new(sizes: &[Bytes], mtu: u64) -> Self {
        Deck {
            classes: sizes.iter().map(|s| clamp_size(s.get(), mtu)).collect(),
            hand: Vec::with_capacity(sizes.len()),
        }
    }

    pub(crate) fn mean_size(&self) -> f64 {
        self.classes.iter().sum::<u64>() as f64 / self.classes.len().max(1) as f64
    }

    pub(crate) fn draw(&mut self, rng: &mut SplitMix64) -> u64 {
        if self.hand.is_empty() {
            self.hand.extend_from_slice(&self.classes);
            // Fisher–Yates; cards are dealt from the back.
            for i in (1..self.hand.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                self.hand.swap(i, j);
            }
        }
        self.hand.pop().unwrap_or(MIN_PACKET)
    }
}

/// Web object sizes: Pareto (type I) with shape `α` and scale `x_m`,
/// capped: `X = min(x_m · U^(−1/α), max)`, rounded to whole bytes.
///
/// The ICIM paper gives a shape (1.2) and a mean (12 KB).  The scale is
/// chosen so that the *capped* distribution has that mean: with shape 1.2 a
/// tenth of the uncapped mean comes from objects above 100 MB, so deriving
/// the scale from the uncapped formula `x_m = mean·(α−1)/α` would offer
/// objects ~10 % smaller than asked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParetoObjects {
    shape: f64,
    scale: f64,
    max: f64,
}

impl ParetoObjects {
    /// The capped Pareto of shape `shape` whose mean is `mean`.  `None`
    /// unless `shape` is finite and above 1 and `0 < mean < max`.
    pub fn with_mean(shape: f64, mean: Bytes, max: Bytes) -> Option<Self> {
        let (m, c) = (mean.get() as f64, max.get() as f64);
        if !(shape.is_finite() && shape > 1.0 && m > 0.0 && m < c) {
            return None;
        }
        // E[min(X, c)] rises monotonically from 0 to c as x_m goes from 0
        // to c (its derivative is α/(α−1)·(1 − (x_m/c)^(α−1)) ≥ 0), so
        // bisection finds the scale.
        let (mut lo, mut hi) = (0.0, m);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if capped_mean(shape, mid, c) < m {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(ParetoObjects {
            shape,
            scale: 0.5 * (lo + hi),
            max: c,
        })
    }

    pub fn shape(&self) -> f64 {
        self.shape
    }
    /// `x_m`, the smallest object.
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// The cap.
    pub fn max(&self) -> f64 {
        self.max
    }
    /// The mean of the capped distribution (before rounding to bytes).
    pub fn mean(&self) -> f64 {
        capped_mean(self.shape, self.scale, self.max)
    }
    /// `P(X > x)`.
    pub fn tail(&self, x: f64) -> f64 {
        if x < self.scale {
            1.0
        } else if x >= self.max {
            0.0
        } else {
            (self.scale / x).powf(self.shape)
        }
    }
    /// One object size (at least 1 byte).
    pub fn draw(&self, rng: &mut SplitMix64) -> Bytes {
        let x = rng.pareto(self.shape, self.scale).min(self.max);
        Bytes((x.round() as u64).max(1))
    }

    /// The mean number of datagrams an object makes when cut at `mtu`,
    /// `E[⌈X/mtu⌉] = Σ_{k≥0} P(X > k·mtu)`: summed term by term where the
    /// tail bends, then as an integral where it is a smooth power law
    /// (Euler–Maclaurin; the error is far below 0.1 %).
    pub(crate) fn mean_datagrams(&self, mtu: Bytes) -> f64 {
        const EXACT_TERMS: u64 = 100_000;
        let mtu = mtu.get().max(1) as f64;
        let last = (self.max / mtu).ceil(); // P(X > k·mtu) = 0 from here on
        let mut n = 0.0;
        let mut k = 0u64;
        while (k as f64) < last && k < EXACT_TERMS {
            n += self.tail(k as f64 * mtu);
            k += 1;
        }
        if (k as f64) < last {
            let a = self.shape;
            let c = (self.scale / mtu).powf(a);
            let (from, to) = (k as f64 - 0.5, last - 0.5);
            n += c * (to.powf(1.0 - a) - from.powf(1.0 - a)) / (1.0 - a);
        }
        n
    }
}

/// `E[min(X, c)]` for `X ~ Pareto(α, x_m)`, `x_m ≤ c`:
/// `x_m·α/(α−1) − x_m^α·c^(1−α)/(α−1)`.
fn capped_mean(a: f64, x_m: f64, c: f64) -> f64 {
    x_m * a / (a - 1.0) - x_m.powf(a) * c.powf(1.0 - a) / (a - 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icim_shares_sum_to_one_hundred() {
        let s: f64 = ICIM_TABLE_I.iter().map(|r| r.byte_share_percent).sum();
        assert!((s - 100.0).abs() < 1e-9, "{s}");
    }

    #[test]
    fn mix_sizes_are_frames_less_ethernet_framing() {
        let s: Vec<u64> = mix_ip_sizes(true).iter().map(|b| b.get()).collect();
        assert_eq!(s, [46, 558, 1492, 8174]);
        assert_eq!(mix_ip_sizes(false).len(), 3);
    }

    #[test]
    fn clamped_rows_keep_their_byte_share() {
        // With a 1000 B MTU the 1500 row is cut to 1000 B, so it must be
        // drawn 1.5 times as often to keep 37.1 % of the bytes.
        let full = ByteShareSampler::new(&ICIM_TABLE_I, 1500);
        let cut = ByteShareSampler::new(&ICIM_TABLE_I, 1000);
        assert!(cut.mean_size() < full.mean_size());
        let p = |s: &ByteShareSampler, i: usize| {
            s.cumulative[i] - if i == 0 { 0.0 } else { s.cumulative[i - 1] }
        };
        // p = (share / size) · mean / 100, so p / mean isolates share / size.
        let ratio = (p(&cut, 9) / cut.mean_size()) / (p(&full, 9) / full.mean_size());
        assert!((ratio - 1.5).abs() < 1e-9, "{ratio}");
    }

    #[test]
    fn capped_pareto_has_the_requested_mean() {
        for (shape, cap) in [(1.2, 100e6), (1.5, 1e6), (2.5, 1e12)] {
            let p = ParetoObjects::with_mean(shape, Bytes(12_000), Bytes(cap as u64)).unwrap();
            assert!(
                (p.mean() - 12_000.0).abs() < 1e-6,
                "{shape} {cap}: {}",
                p.mean()
            );
        }
        // Shape 1.2 capped at 100 MB needs a larger scale than the uncapped
        // 12 000 · 0.2 / 1.2 = 2000 B.
        let p = ParetoObjects::with_mean(1.2, Bytes(12_000), Bytes(100_000_000)).unwrap();
        assert!(p.scale() > 2100.0, "{}", p.scale());
        assert!(ParetoObjects::with_mean(1.0, Bytes(12_000), Bytes(1 << 30)).is_none());
        assert!(ParetoObjects::with_mean(1.2, Bytes(12_000), Bytes(12_000)).is_none());
    }

    #[test]
    fn the_deck_deals_each_class_once_per_round() {
        let mut d = Deck::new(&mix_ip_sizes(true), 9000);
        let mut rng = SplitMix64::new(3);
        for _ in 0..50 {
            let mut round: Vec<u64> = (0..4).map(|_| d.draw(&mut rng)).collect();
            round.sort_unstable();
            assert_eq!(round, [46, 558, 1492, 8174]);
        }
    }
}
