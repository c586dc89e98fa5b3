//! C from the spacing the tight link gives a burst.
//!
//! The opening train leaves faster than any link on the path can carry it,
//! so it arrives at the tight link faster than C and leaves it from a busy
//! queue: consecutive probe packets come out `s/C` apart, or further apart
//! when cross packets were served between them — never closer.  A low
//! quantile of those gaps (a quarter of them, so that receive-stamp jitter
//! on one gap does not decide it) is `s/C`.  The first gaps are skipped: a
//! token-bucket tight link that was idle lets its spare tokens' worth of
//! packets through at the sender's speed.  A receiver that bunches arrivals
//! leaves no such gaps, and the reading is not made.
//!
//! This C is what the fluid line's slope is measured against: the line's
//! far points are short trains whose cross traffic varies by tens of per
//! cent, so its slope is uncertain by 10–20 % under the queue budget, and
//! each near train's reading of A moves by that share of its distance
//! from A.  When the two disagree by more than the line's own uncertainty
//! (a narrow link that is not the tight link, say), the line is kept.

use crate::observation::PacketRecord;
use crate::units::{Bytes, DurationNs};

/// Gaps skipped at the head of a burst (spare tokens of an idle bucket).
const HEAD_GAPS: usize = 3;
/// The quantile of the gaps read as `s/C`.
const GAP_QUANTILE: f64 = 0.25;
/// Fewest gaps to read C from.
pub(super) const MIN_GAPS: usize = 12;

/// Consecutive arrival gaps (seconds, with the later packet's size) of a
/// train that crossed a busy queue, after the head; `packets` de-duplicated
/// and in sequence order (`dispersion::unique_packets`, as the ledger keeps
/// them).
pub(crate) fn queue_gaps(packets: &[PacketRecord]) -> Vec<(f64, Bytes)> {
    busy_gaps(packets).map(|g| (g.recv, g.size)).collect()
}

/// One gap between consecutive probe packets that both arrived.
struct Gap {
    /// Receive gap (s).
    recv: f64,
    /// Send gap (s).
    sent: f64,
    /// The later packet's size.
    size: Bytes,
}

/// The gaps [`queue_gaps`] and [`gap_noise`] read: consecutive packets that
/// both arrived, a positive receive gap, after the head's [`HEAD_GAPS`].
fn busy_gaps(packets: &[PacketRecord]) -> impl Iterator<Item = Gap> + '_ {
    packets
        .windows(2)
        .filter(|w| w[1].seq == w[0].seq.wrapping_add(1))
        .filter_map(|w| {
            let (a, b) = (w[0].received?, w[1].received?);
            let recv = b.since(a).secs_f64();
            let sent = w[1].sent.since(w[0].sent).secs_f64();
            (recv.is_finite() && recv > 0.0).then_some(Gap {
                recv,
                sent,
                size: w[1].size,
            })
        })
        .skip(HEAD_GAPS)
}

/// The cross traffic's noise scale `η = Var(R/r)·T` (seconds) read from a
/// train that crossed a busy queue: FIFO serves between two probe packets
/// the cross bits that arrived while the second was being sent, so over a
/// send gap `d` a receive gap is `(s + B)/C` with `Var(B) = X·s_x·d` for
/// Poisson-like cross traffic of packets of `s_x` bits — and that is
/// `η·C²·d`, so `η = Var(gap)/d`, with neither C nor the cross packets'
/// size needed.  Read over the opening, sent far above C so that its queue
/// never empties, this does not share the near trains' blind spot: a train
/// near A meets an empty queue now and then, which hides part of the cross
/// traffic's variation from its own scatter (at 50–70 % Poisson load on the
/// synthetic path, seeds 1–60, the converged runs' near scatter was
/// 0.02–0.3 of the cross traffic's `X·s_x/C²`, in a diagnostic not kept),
/// and the band on A read from that scatter held the truth in only 52 of
/// 59 converged runs at 50 % load (FIFO, seeds 1–100, `fac2_lean_table`
/// before the floor).  The
/// receive gaps' residuals about their regression on the send gaps, over the
/// summed send gaps; receive-stamp jitter only adds to it.  `None` below
/// [`MIN_GAPS`] gaps.
pub(crate) fn gap_noise(packets: &[PacketRecord]) -> Option<f64> {
    let pairs: Vec<(f64, f64)> = busy_gaps(packets)
        .filter(|g| g.sent.is_finite() && g.sent >= 0.0)
        .map(|g| (g.sent, g.recv))
        .collect();
    if pairs.len() < MIN_GAPS {
        return None;
    }
    let n = pairs.len() as f64;
    let (mx, my) = (
        pairs.iter().map(|p| p.0).sum::<f64>() / n,
        pairs.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = pairs.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pairs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let ss: f64 = pairs
        .iter()
        .map(|p| (p.1 - my - slope * (p.0 - mx)).powi(2))
        .sum();
    let sent: f64 = pairs.iter().map(|p| p.0).sum();
    // Two degrees of freedom for the regression.
    let eta = ss / (n - 2.0) * n / sent;
    (eta.is_finite() && eta > 0.0).then_some(eta)
}

/// What the opening's gaps say of C.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct GapReading {
    /// C (b/s).
    pub capacity: f64,
    /// Some gaps held a cross packet (at least [`LONG_GAP`] times the clean
    /// ones): the short ones are then clean for certain.  Without such gaps
    /// the cross traffic either missed the burst (C is right) or filled
    /// every gap alike, as a fluid would (the reading is the burst's
    /// dispersion rate, not C).
    pub bimodal: bool,
}

/// C from the pooled queue gaps, if there are enough, they are not bunched
/// and the clock resolves them to 5 %.  Gaps shorter than a third of the
/// median are left out first: a sender that paces in bursts lets a token
/// bucket refill between them, and the next two packets then pass at the
/// sender's speed.  Of the rest, the clean gaps (no cross packet served
/// between the two probe packets) are the cluster at the short end, up to
/// 1.5 times the lower quartile — a gap with a cross packet in it is at
/// least twice as long — and C is read from their median, which
/// receive-stamp jitter moves least.
pub(crate) fn from_gaps(gaps: &[(f64, Bytes)], resolution: DurationNs) -> Option<GapReading> {
    let tiny = resolution.max(DurationNs::from_ns(100)).secs_f64();
    if gaps.len() < MIN_GAPS {
        return None;
    }
    let secs: Vec<f64> = gaps.iter().map(|g| g.0).collect();
    let median = crate::stats::median(&secs)?;
    // A receiver that bunches arrivals: most gaps are at its clock's step.
    if secs.iter().filter(|&&g| g <= tiny).count() * 5 > secs.len() {
        return None;
    }
    // A clock too coarse for the gaps.
    if resolution.secs_f64() * 20.0 > median {
        return None;
    }
    let kept: Vec<(f64, Bytes)> = gaps
        .iter()
        .copied()
        .filter(|g| g.0 >= median * SHORT_GAP && g.0 > tiny)
        .collect();
    if kept.len() < MIN_GAPS || kept.len() * 5 < gaps.len() * 4 {
        return None;
    }
    let kept_secs: Vec<f64> = kept.iter().map(|g| g.0).collect();
    let q = crate::stats::quantile(&kept_secs, GAP_QUANTILE)?;
    let clean: Vec<&(f64, Bytes)> = kept.iter().filter(|g| g.0 <= CLEAN_SPAN * q).collect();
    if clean.len() < MIN_GAPS / 2 {
        return None;
    }
    let clean_secs: Vec<f64> = clean.iter().map(|g| g.0).collect();
    let clean_median = crate::stats::median(&clean_secs)?;
    let rates: Vec<f64> = clean.iter().map(|g| g.1.bits() as f64 / g.0).collect();
    let c = crate::stats::median(&rates)?;
    let long = kept
        .iter()
        .filter(|g| g.0 >= LONG_GAP * clean_median)
        .count();
    (c.is_finite() && c > 0.0).then_some(GapReading {
        capacity: c,
        bimodal: long * 10 >= kept.len(),
    })
}

/// Clean gaps reach up to this multiple of the lower quartile.
const CLEAN_SPAN: f64 = 1.5;
/// A gap this many times the clean ones held a cross packet.
const LONG_GAP: f64 = 1.7;
/// Gaps below this share of the median are a bucket's spare tokens.
const SHORT_GAP: f64 = 1.0 / 3.0;

/// The C a near train's reading of A is taken against (b/s), from the
/// line's C and its relative standard error, and the gaps' reading.
///
/// The gaps win when some of them held cross packets: the short ones are
/// then certainly clean, and read C to a per cent or two, where the line's
/// slope is uncertain by 10–20 % under the queue budget.  (The gaps read
/// the narrow link, the smallest capacity on the path, and the line the
/// tight link, which may be faster; but a near train's reading
/// `Aᵢ = Rᵢ − C·(yᵢ − 1)` moves with C only by its distance from A times C's
/// relative error: a narrow link at half the tight link's capacity moves
/// it by half that distance, a few per cent of A.)  Gaps all alike are
/// used only where the line agrees with them within three of its standard
/// errors or 2 %: otherwise they read a fluid's dispersion rate.
pub(crate) fn reconcile(line: Option<(f64, f64)>, gaps: Option<GapReading>) -> Option<f64> {
    match (line, gaps) {
        (_, Some(g)) if g.bimodal => Some(g.capacity),
        (Some((l, se)), Some(g)) => {
            let window = (3.0 * se * l).max(0.02 * g.capacity);
            Some(if (l - g.capacity).abs() <= window {
                g.capacity
            } else {
                l
            })
        }
        (None, Some(g)) => Some(g.capacity),
        (Some((l, _)), None) => Some(l),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::fac2::Fac2Config;
    use crate::synthetic::{FluidPath, FluidPathConfig};
    use crate::units::BitRate;

    /// `gap_noise` reads the cross traffic's own `η = X·s/C²` from a burst
    /// through a busy queue: 2.0e-5 s for 150 Mb/s of 1500-byte Poisson
    /// packets on 300 Mb/s, 0 without cross traffic.
    #[test]
    fn busy_queue_gaps_give_the_cross_traffics_noise_scale() {
        let spec = crate::plan::TrainSpec {
            packet_size: Bytes(1500),
            packets_per_car: 1,
            cars: 400,
            rate: BitRate::from_gbps(1.0),
            idle_before: DurationNs::ZERO,
        };
        let eta = |x: f64, seed: u64| {
            let mut p = FluidPath::new(FluidPathConfig {
                poisson_cross: Some(Bytes(1500)),
                seed,
                ..FluidPathConfig::new(BitRate::from_mbps(300.0), BitRate::from_mbps(x))
            });
            let obs = p.carry_train(&spec, 0);
            gap_noise(&crate::dispersion::unique_packets(&obs))
        };
        let model = 150e6 * 12_000.0 / (300e6 * 300e6);
        let got: Vec<f64> = (1..=9).filter_map(|s| eta(150.0, s)).collect();
        assert_eq!(got.len(), 9);
        let mid = crate::stats::median(&got).unwrap();
        assert!(
            (0.7..1.4).contains(&(mid / model)),
            "{mid:e} against {model:e}: {got:?}"
        );
        assert!(
            eta(0.0, 1).map_or(true, |e| e < 0.01 * model),
            "{:?}",
            eta(0.0, 1)
        );
    }

    #[test]
    fn a_burst_through_a_busy_queue_gives_c_and_a_bunching_receiver_none() {
        let cfg = Fac2Config::default();
        let spec = super::super::opening::first(&cfg, DurationNs::from_us(1));
        for (x, res) in [(0.0, 1), (150.0, 1), (270.0, 1)] {
            let mut p = FluidPath::new(FluidPathConfig {
                poisson_cross: Some(Bytes(1500)),
                seed: 5,
                ..FluidPathConfig::new(BitRate::from_mbps(300.0), BitRate::from_mbps(x))
            });
            let obs = p.carry_train(&spec, 0);
            let packets = crate::dispersion::unique_packets(&obs);
            let g = from_gaps(&queue_gaps(&packets), DurationNs::from_ns(res)).expect("a reading");
            assert!((g.capacity / 300e6 - 1.0).abs() < 0.02, "X={x}: {g:?}");
            assert_eq!(g.bimodal, x > 100.0, "X={x}: {g:?}");
        }
        let mut p = crate::path::Coalescing::new(
            FluidPath::new(FluidPathConfig::new(
                BitRate::from_mbps(300.0),
                BitRate::from_mbps(100.0),
            )),
            DurationNs::from_us(125),
        );
        let obs = crate::ProbePath::carry(&mut p, &crate::ProbePlan::Train(spec), 0).unwrap();
        let packets = crate::dispersion::unique_packets(&obs);
        assert_eq!(
            from_gaps(&queue_gaps(&packets), DurationNs::from_us(1)),
            None
        );
    }

    #[test]
    fn the_gaps_win_when_some_held_cross_packets() {
        let g = |capacity, bimodal| Some(GapReading { capacity, bimodal });
        // Packet cross traffic: gaps with cross packets in them.
        assert_eq!(reconcile(Some((280e6, 0.1)), g(300e6, true)), Some(300e6));
        assert_eq!(reconcile(Some((600e6, 0.01)), g(300e6, true)), Some(300e6));
        // Gaps all alike: kept where the line agrees, else the line.
        assert_eq!(reconcile(Some((280e6, 0.1)), g(300e6, false)), Some(300e6));
        assert_eq!(reconcile(Some((100e6, 0.001)), g(95e6, false)), Some(100e6));
        assert_eq!(reconcile(Some((150e6, 0.05)), None), Some(150e6));
        assert_eq!(reconcile(None, None), None);
    }
}
