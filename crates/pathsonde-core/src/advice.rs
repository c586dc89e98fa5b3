//! netest's advice as pure functions (Jin & Tierney 2003, "Netest: a tool
//! to measure the maximum burst size, available bandwidth and achievable
//! throughput", sections III and IV).
//!
//! * [`bdp_window`] — the bandwidth-delay product, the window a tuning guide
//!   would set: `rate × RTT / 8`.
//! * [`optimal_window`] — netest's "optimal TCP window": the BDP, capped at
//!   the maximum burst size (MBS), because a window larger than the MBS is
//!   sent as a burst the narrow link's queue cannot hold (III.A).
//! * [`window_limited_rate`] — the most one window sustains per RTT
//!   (`MBS × 8 / RTT`: the case study's 21.87 Mb/s).
//! * [`safe_burst_interval`] — `MBS / line speed`: the longest a burst may
//!   last at line speed without overflowing the smallest queue (1.05466 ms).
//! * [`burst_rate`] — the rate of bursts of one size every period (the
//!   160 KB / 20 ms → 64 Mb/s and 40 KB / 1 ms → 320 Mb/s examples).
//! * [`stream_advice`] — from a parallel-stream sweep, the fewest streams
//!   that fill the available bandwidth and the count from which further
//!   streams mostly take bandwidth from other traffic (Figure 5).
//! * [`udp_streams_help`] — whether a second UDP stream raised throughput
//!   (a host kernel bottleneck rather than the path).
//! * [`advisory`] — the Advisory section's sentences.
//!
//! The paper's "KB" is 1000 bytes: 82 KB × 8 / 30 ms = 21.8667 Mb/s and
//! 82 KB / 622 Mb/s = 1.05466 ms come out exactly only with KB = 1000.

use crate::units::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};

/// netest's kilobyte: 1000 bytes (see the module note).
pub const NETEST_KB: u64 = 1000;

/// The bandwidth-delay product `rate × rtt`, in bytes (rounded to the nearest byte).
pub fn bdp_window(rate: BitRate, rtt: DurationNs) -> Bytes {
    let b = rate.bps() * rtt.secs_f64() / 8.0;
    Bytes(if b.is_finite() && b > 0.0 {
        b.round() as u64
    } else {
        0
    })
}

/// netest's optimal TCP window: the BDP, but no larger than the MBS (a
/// window beyond the MBS is a burst the path drops).  With no MBS known, the BDP.
pub fn optimal_window(bdp: Bytes, mbs: Option<Bytes>) -> Bytes {
    match mbs {
        Some(m) if m.get() > 0 => Bytes(bdp.get().min(m.get())),
        _ => bdp,
    }
}

/// The highest rate one window of `window` bytes sustains over `rtt`
/// (`window × 8 / rtt`); zero for a non-positive RTT.
pub(crate) fn window_limited_rate(window: Bytes, rtt: DurationNs) -> BitRate {
    let s = rtt.secs_f64();
    if s > 0.0 {
        BitRate::from_bps(window.bits() as f64 / s)
    } else {
        BitRate::ZERO
    }
}

/// The safe burst interval `MBS / line speed`: how long a burst at line speed
/// may last before it overflows the path's smallest queue.  `None` for a
/// line speed that is not positive.
pub fn safe_burst_interval(mbs: Bytes, line_speed: BitRate) -> Option<DurationNs> {
    line_speed.time_to_send(mbs)
}

/// The rate of one burst of `burst` bytes every `period`.  `None` for a
/// non-positive period.
pub fn burst_rate(burst: Bytes, period: DurationNs) -> Option<BitRate> {
    (period.ns() > 0).then(|| BitRate::from_bps(burst.bits() as f64 / period.secs_f64()))
}

/// netest's burst-controlled UDP: bursts of half the MBS (few drops even
/// when cross traffic bursts too) once per safe burst interval (time for
/// the router to drain them).  Returns (burst, period); `None` without a
/// positive line speed.
pub fn controlled_burst(mbs: Bytes, line_speed: BitRate) -> Option<(Bytes, DurationNs)> {
    let period = safe_burst_interval(mbs, line_speed)?;
    Some((Bytes(mbs.get() / 2), period))
}

/// One point of a parallel-stream sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StreamPoint {
    pub streams: u32,
    /// Aggregate goodput of all streams together.
    pub throughput: BitRate,
}

/// Fraction of the target the recommended stream count must reach.
pub(crate) const FILL_FRACTION: f64 = 0.9;
/// An added stream that raises the aggregate by less than this fraction of
/// the single stream's throughput mostly takes bandwidth from others.
pub(crate) const MARGINAL_FRACTION: f64 = 0.1;
/// An aggregate this far above the available bandwidth has taken other
/// traffic's share.
pub(crate) const OVERSHOOT_FRACTION: f64 = 0.05;

/// What the stream sweep says.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StreamAdvice {
    /// The fewest streams whose aggregate reached [`FILL_FRACTION`] of the target.
    pub recommended: u32,
    /// The stream count from which streams mostly take bandwidth from other
    /// traffic (or from each other); `None` if the sweep never got there.
    pub intrusive_from: Option<u32>,
    /// What "full" meant: the available bandwidth when it is known and the
    /// sweep reached it, else the sweep's best aggregate.
    pub target: BitRate,
    /// Whether parallel streams are worth using (recommended > 1).
    pub parallel_recommended: bool,
}

/// Reads a parallel-stream sweep as netest's Figure 5 does.
///
/// The target is the available bandwidth `available` when known, but never
/// more than the best aggregate the sweep reached (a host or window limit
/// can keep every count below A).  `recommended` is the fewest streams at
/// ≥ 90 % of the target.  `intrusive_from` is the first count beyond the
/// recommended one whose aggregate overshoots A by more than 5 % (it took
/// other traffic's share) or whose gain per added stream is below 10 % of
/// one stream's throughput (it only competes); `None` if no count did.
/// `None` for an empty sweep.
pub fn stream_advice(points: &[StreamPoint], available: Option<BitRate>) -> Option<StreamAdvice> {
    let mut pts: Vec<StreamPoint> = points
        .iter()
        .copied()
        .filter(|p| p.streams > 0 && p.throughput.bps().is_finite())
        .collect();
    pts.sort_by_key(|p| p.streams);
    pts.dedup_by_key(|p| p.streams);
    let best = pts
        .iter()
        .map(|p| p.throughput.bps())
        .fold(f64::NAN, f64::max);
    if pts.is_empty() || best.is_nan() {
        return None;
    }
    let target = match available.filter(|a| a.is_positive()) {
        Some(a) => a.bps().min(best),
        None => best,
    };
    let recommended = pts
        .iter()
        .find(|p| p.throughput.bps() >= FILL_FRACTION * target)
        .map_or(pts[pts.len() - 1].streams, |p| p.streams);
    let single = pts[0].throughput.bps() / f64::from(pts[0].streams);
    let mut intrusive_from = None;
    let mut prev = pts
        .iter()
        .find(|p| p.streams == recommended)
        .copied()
        .expect("recommended is one of the points");
    for p in pts.iter().filter(|p| p.streams > recommended) {
        let over =
            available.is_some_and(|a| p.throughput.bps() > a.bps() * (1.0 + OVERSHOOT_FRACTION));
        let gain =
            (p.throughput.bps() - prev.throughput.bps()) / f64::from(p.streams - prev.streams);
        if over || gain < MARGINAL_FRACTION * single {
            intrusive_from = Some(p.streams);
            break;
        }
        prev = *p;
    }
    Some(StreamAdvice {
        recommended,
        intrusive_from,
        target: BitRate::from_bps(target),
        parallel_recommended: recommended > 1,
    })
}

/// More UDP streams help when their aggregate beats the single stream by
/// more than 10 %: then a host (one core, one socket) held the single stream
/// back, not the path.
pub fn udp_streams_help(single: BitRate, multi: BitRate) -> bool {
    multi.bps() > single.bps() * 1.1
}

/// One step of the UDP achievable-throughput ramp.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UdpStep {
    /// The paced rate asked for (UDP payload).
    pub asked: BitRate,
    /// What the sender put out.
    pub sent: BitRate,
    /// What arrived (goodput).
    pub received: BitRate,
    /// Fraction of datagrams lost.
    pub loss: f64,
    /// Of the datagrams sent, the fraction the receiving socket dropped
    /// itself (its buffer was full): the receiving host's loss, inside
    /// `loss`, not the path's.  0 when the receiver could not count them.
    #[serde(default)]
    pub receiver_dropped: f64,
}

impl UdpStep {
    /// The fraction the path lost: `loss` less the receiver's own drops.
    pub fn path_loss(&self) -> f64 {
        (self.loss - self.receiver_dropped).max(0.0)
    }
    /// The receiver, not the path, turned this rate away: its socket
    /// dropped more than the loss threshold while the path lost at most it.
    pub fn receiver_limited(&self) -> bool {
        self.receiver_dropped > UDP_LOSS_THRESHOLD && self.path_loss() <= UDP_LOSS_THRESHOLD
    }
    fn sender_short(&self) -> bool {
        self.sent.bps() < self.asked.bps() * SENDER_SHORTFALL
    }
}

/// Loss beyond which a UDP rate is more than the path (or host) carries.
pub(crate) const UDP_LOSS_THRESHOLD: f64 = 0.01;
/// A sender that puts out less than this fraction of the asked rate is at
/// its own limit: asking for more only measures the host again.
pub(crate) const SENDER_SHORTFALL: f64 = 0.9;

/// The next rate of the UDP ramp: `start`, then `factor` times the last,
/// until a step lost more than [`UDP_LOSS_THRESHOLD`] (on the path or in
/// the receiving socket: past either, a faster rate measures only the same
/// limit again), the sender fell short of its rate, or the next rate would
/// pass `ceiling`.
pub fn next_udp_rate(
    steps: &[UdpStep],
    start: BitRate,
    ceiling: BitRate,
    factor: f64,
) -> Option<BitRate> {
    let Some(last) = steps.last() else {
        return Some(start.min(ceiling));
    };
    if last.loss > UDP_LOSS_THRESHOLD || last.sender_short() {
        return None;
    }
    let next = last.asked.scale(factor.max(1.01));
    (last.asked.bps() < ceiling.bps()).then(|| next.min(ceiling))
}

/// UDP achievable throughput from the ramp: the best goodput of a step
/// within the loss threshold, else the best goodput of any step.
pub fn udp_achievable(steps: &[UdpStep]) -> Option<BitRate> {
    let best = |f: &dyn Fn(&UdpStep) -> bool| {
        steps
            .iter()
            .filter(|s| f(s))
            .map(|s| s.received)
            .fold(None, |a: Option<BitRate>, r| {
                Some(a.map_or(r, |a| a.max(r)))
            })
    };
    best(&|s| s.loss <= UDP_LOSS_THRESHOLD).or_else(|| best(&|_| true))
}

/// The best goodput of a step the path carried within the loss threshold
/// (the receiver's own drops are not the path's): at least that much was
/// available then.
pub fn udp_lossless(steps: &[UdpStep]) -> Option<BitRate> {
    steps
        .iter()
        .filter(|s| s.path_loss() <= UDP_LOSS_THRESHOLD)
        .map(|s| s.received)
        .fold(None, |a: Option<BitRate>, r| {
            Some(a.map_or(r, |a| a.max(r)))
        })
}

/// The rate the TCP advice is judged against: the available-bandwidth
/// estimate, but never less than what one UDP stream moved without loss
/// (a lossless rate is a lower bound on what was available; an estimate
/// below it is wrong, e.g. disturbed by a delay line or a loaded host).
pub fn reference_rate(
    available: Option<BitRate>,
    udp_lossless: Option<BitRate>,
) -> Option<BitRate> {
    match (available, udp_lossless) {
        (Some(a), Some(u)) => Some(a.max(u)),
        (a, u) => a.or(u),
    }
}

/// Whether the ramp never saw the path push back: its last step lost
/// nothing worth counting on the path, because the sender could pace no
/// faster, the receiving socket overflowed, or the ramp reached its
/// ceiling.  Its lossless rate is then only a lower bound on what the path
/// offers.
pub fn udp_unbounded(steps: &[UdpStep]) -> bool {
    steps
        .last()
        .is_some_and(|l| l.path_loss() <= UDP_LOSS_THRESHOLD)
}

/// Whether the ramp ended at the sender's own limit (it could not pace the
/// rate it was asked for) rather than at loss on the path.
pub fn udp_sender_limited(steps: &[UdpStep]) -> bool {
    steps
        .last()
        .is_some_and(|l| l.sender_short() && l.path_loss() <= UDP_LOSS_THRESHOLD)
}

/// Whether the ramp ended at the receiver's own limit: the last step's
/// datagrams were dropped by the receiving socket, not lost on the path.
pub fn udp_receiver_limited(steps: &[UdpStep]) -> bool {
    steps.last().is_some_and(UdpStep::receiver_limited)
}

/// The -FullD run must beat the plain tuned run by this factor before the
/// Advisory blames the sender's kernel (netest's Solaris case gained 22×;
/// run-to-run noise on a shared host reaches tens of per cent).
pub(crate) const FULL_DUPLEX_GAIN: f64 = 1.5;

/// What the Advisory section is judged from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdviceInput {
    pub rtt: Option<DurationNs>,
    pub mbs: Option<Bytes>,
    /// The BDP at the available bandwidth (or the best throughput seen).
    pub bdp: Option<Bytes>,
    /// The available bandwidth estimate (FAC²).
    pub available: Option<BitRate>,
    /// Single-stream TCP with the system's buffers (autotuning).
    pub tcp_single_default: Option<BitRate>,
    /// Single-stream TCP with the optimal window set on both ends.
    pub tcp_single_tuned: Option<BitRate>,
    /// The -FullD check: the same, with the sender's receive buffer as large
    /// as its send buffer.
    pub tcp_full_duplex: Option<BitRate>,
    pub udp_single: Option<BitRate>,
    pub udp_multi: Option<BitRate>,
    /// Receiver's `net.ipv4.tcp_rmem` max and sender's `tcp_wmem` max.
    pub receiver_tcp_rmem_max: Option<u64>,
    pub sender_tcp_wmem_max: Option<u64>,
    /// Receiver's `net.core.rmem_max`, sender's `net.core.wmem_max`.
    pub receiver_rmem_max: Option<u64>,
    pub sender_wmem_max: Option<u64>,
    pub streams: Option<StreamAdvice>,
    /// Retransmitted segments / segments sent by the single tuned stream.
    pub tcp_retrans_fraction: Option<f64>,
    /// Which end received in the TCP tests ("server" or "client").
    pub receiver_name: String,
    pub sender_name: String,
}

/// The kernel's receive window is about this fraction of the buffer
/// (`tcp_adv_win_scale`: overhead takes part of it); autotuning to
/// `tcp_rmem` max therefore opens a window of about half of it.
pub(crate) const WINDOW_OF_BUFFER: f64 = 0.5;

fn mbps(r: BitRate) -> String {
    crate::verdict::rate_words(r)
}

/// The Advisory section's sentences, most important first.  Pure; each
/// sentence says what was seen and, where there is one, the fix.
pub fn advisory(a: &AdviceInput) -> Vec<String> {
    let mut out = Vec::new();
    let (Some(rtt), Some(bdp)) = (a.rtt, a.bdp) else {
        out.push("RTT or bandwidth unknown: no window advice.".into());
        return out;
    };
    if let (Some(m), Some(avail)) = (a.mbs, a.available) {
        if m.get() < bdp.get() {
            out.push(format!(
                "The path absorbs bursts of only {} bytes (MBS) but the bandwidth-delay product is {} bytes: one TCP window of the BDP would overflow the narrow link's queue, so a single stream is limited to about {} ({} per RTT). Use windows of at most the MBS and parallel streams, or ask for a larger queue at the narrow link.",
                m.get(),
                bdp.get(),
                mbps(window_limited_rate(m, rtt)),
                m
            ));
        } else if avail.is_positive() {
            out.push(format!(
                "The MBS ({} bytes) covers the bandwidth-delay product ({} bytes): a single stream with a window of the BDP need not overflow the path's queue.",
                m.get(),
                bdp.get()
            ));
        }
    }
    if let Some(cap) = a.receiver_tcp_rmem_max {
        let window = Bytes((cap as f64 * WINDOW_OF_BUFFER) as u64);
        let limit = window_limited_rate(window, rtt);
        if window.get() < bdp.get() {
            let want = crate::verdict::buffer_for(
                a.available
                    .unwrap_or(BitRate::from_bps(bdp.bits() as f64 / rtt.secs_f64())),
                rtt,
            );
            out.push(format!(
                "The {} (receiver) caps TCP receive buffers at net.ipv4.tcp_rmem max = {cap} bytes: autotuning opens a window of about {} bytes, at {:.1} ms RTT about {} per stream, below the BDP of {} bytes. This is why parallel streams help here. Raise it with: sysctl -w net.ipv4.tcp_rmem=\"4096 131072 {want}\" (and net.core.rmem_max={want} for programs that set SO_RCVBUF).",
                a.receiver_name,
                window.get(),
                rtt.ms_f64(),
                mbps(limit),
                bdp.get()
            ));
        }
    }
    if let Some(cap) = a.sender_tcp_wmem_max {
        if cap < bdp.get() {
            out.push(format!(
                "The {} (sender) caps TCP send buffers at net.ipv4.tcp_wmem max = {cap} bytes, below the BDP of {} bytes; raise it (sysctl -w net.ipv4.tcp_wmem=\"4096 16384 {}\").",
                a.sender_name,
                bdp.get(),
                crate::verdict::buffer_for(
                    BitRate::from_bps(bdp.bits() as f64 / rtt.secs_f64()),
                    rtt
                )
            ));
        }
    }
    for (who, sysctl, cap) in [
        (&a.receiver_name, "net.core.rmem_max", a.receiver_rmem_max),
        (&a.sender_name, "net.core.wmem_max", a.sender_wmem_max),
    ] {
        if let Some(cap) = cap.filter(|c| *c < bdp.get()) {
            out.push(format!(
                "On the {who}, {sysctl} = {cap} bytes is below the BDP of {} bytes: a program that sets its socket buffer cannot get the window it needs.",
                bdp.get()
            ));
        }
    }
    if let (Some(d), Some(t)) = (a.tcp_single_default, a.tcp_single_tuned) {
        if t.bps() > d.bps() * 1.2 {
            out.push(format!(
                "A single stream reached {} with the optimal window set on both ends against {} with the system's default buffers: set the window in the application (SO_SNDBUF/SO_RCVBUF) or raise the autotuning limits.",
                mbps(t),
                mbps(d)
            ));
        }
    }
    if let (Some(t), Some(f)) = (a.tcp_single_tuned, a.tcp_full_duplex) {
        if f.bps() > t.bps() * FULL_DUPLEX_GAIN {
            out.push(format!(
                "-FullD: with the sender's receive buffer as large as its send buffer a stream reached {} against {}: this sender's kernel grows its send buffer only with its receive buffer (netest's Solaris case); set both or patch the kernel.",
                mbps(f),
                mbps(t)
            ));
        } else {
            out.push(format!(
                "-FullD checked: a receive buffer as large as the send buffer on the sender changed nothing that matters ({} vs {}).",
                mbps(f),
                mbps(t)
            ));
        }
    }
    if let (Some(s), Some(m)) = (a.udp_single, a.udp_multi) {
        if udp_streams_help(s, m) {
            out.push(format!(
                "Two UDP streams moved {} against one stream's {}: a host (one core or one socket), not the path, limits a single stream.",
                mbps(m),
                mbps(s)
            ));
        }
    }
    if let Some(f) = a.tcp_retrans_fraction.filter(|f| *f > 0.01) {
        out.push(format!(
            "The single TCP stream retransmitted {:.1} % of its segments: its window overflowed a queue or the path loses packets.",
            f * 100.0
        ));
    }
    if let (Some(s), Some(avail)) = (a.streams, a.available) {
        if let Some(from) = s.intrusive_from {
            out.push(format!(
                "From {from} streams on, added streams mostly take bandwidth from other traffic or from each other (available bandwidth {}): use {} stream(s).",
                mbps(avail),
                s.recommended
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KB: u64 = NETEST_KB;

    /// netest's case study (section III.A): 82 KB MBS on an OC-12 path at
    /// 30 ms RTT, and the two burst-controlled UDP streams.
    #[test]
    fn the_netest_case_study() {
        let line = BitRate::from_mbps(622.0);
        let rtt = DurationNs::from_ms(30);
        let mbs = Bytes(82 * KB);
        // 0.03 s × 622e6 b/s = 18.66 Mbit = 2.3325 MB.
        assert_eq!(bdp_window(line, rtt), Bytes(2_332_500));
        // The optimal window is capped at the MBS.
        assert_eq!(optimal_window(bdp_window(line, rtt), Some(mbs)), mbs);
        assert_eq!(optimal_window(Bytes(50_000), Some(mbs)), Bytes(50_000));
        // 82 KB × 8 / 0.03 s = 21.8667 Mb/s.
        let tcp = window_limited_rate(mbs, rtt);
        assert!((tcp.mbps() - 21.8667).abs() < 5e-5, "{tcp}");
        // 82 KB / 622 Mb/s = 1.05466 ms.
        let safe = safe_burst_interval(mbs, line).unwrap();
        assert!((safe.ms_f64() - 1.05466).abs() < 5e-6, "{safe:?}");
        // 160 KB every 20 ms → 64 Mb/s; 40 KB every 1 ms → 320 Mb/s.
        let r = burst_rate(Bytes(160 * KB), DurationNs::from_ms(20)).unwrap();
        assert!((r.mbps() - 64.0).abs() < 1e-9);
        let r = burst_rate(Bytes(40 * KB), DurationNs::from_ms(1)).unwrap();
        assert!((r.mbps() - 320.0).abs() < 1e-9);
        // netest's controlled stream: half the MBS once per safe interval.
        let (b, p) = controlled_burst(mbs, line).unwrap();
        assert_eq!(b, Bytes(41 * KB));
        assert_eq!(p, safe);
    }

    #[test]
    fn degenerate_inputs() {
        assert_eq!(
            bdp_window(BitRate::from_mbps(100.0), DurationNs::ZERO),
            Bytes(0)
        );
        assert_eq!(
            window_limited_rate(Bytes(1000), DurationNs::ZERO),
            BitRate::ZERO
        );
        assert_eq!(safe_burst_interval(Bytes(1), BitRate::ZERO), None);
        assert_eq!(burst_rate(Bytes(1), DurationNs::ZERO), None);
        assert_eq!(optimal_window(Bytes(10), None), Bytes(10));
        assert_eq!(optimal_window(Bytes(10), Some(Bytes(0))), Bytes(10));
        assert_eq!(stream_advice(&[], None), None);
    }

    fn sweep(v: &[(u32, f64)]) -> Vec<StreamPoint> {
        v.iter()
            .map(|&(s, m)| StreamPoint {
                streams: s,
                throughput: BitRate::from_mbps(m),
            })
            .collect()
    }

    /// Figure 2's fast hosts: two streams fill the path, 3–4 gain little.
    #[test]
    fn two_streams_fill_and_more_intrude() {
        let pts = sweep(&[(1, 110.0), (2, 185.0), (3, 192.0), (4, 196.0), (6, 197.0)]);
        let a = stream_advice(&pts, Some(BitRate::from_mbps(190.0))).unwrap();
        assert_eq!(a.recommended, 2);
        assert_eq!(a.intrusive_from, Some(3));
        assert!(a.parallel_recommended);
        assert_eq!(a.target, BitRate::from_mbps(190.0));
    }

    /// A window-capped single stream: streams add almost linearly until A.
    #[test]
    fn a_window_capped_stream_needs_several() {
        let pts = sweep(&[
            (1, 50.0),
            (2, 100.0),
            (3, 148.0),
            (4, 185.0),
            (6, 190.0),
            (8, 191.0),
        ]);
        let a = stream_advice(&pts, Some(BitRate::from_mbps(195.0))).unwrap();
        assert_eq!(a.recommended, 4);
        assert_eq!(a.intrusive_from, Some(6));
        // Unknown A: the best aggregate is the target.
        let b = stream_advice(&pts, None).unwrap();
        assert_eq!(b.recommended, 4);
        assert_eq!(b.target, BitRate::from_mbps(191.0));
    }

    #[test]
    fn one_stream_suffices_and_overshoot_intrudes() {
        let pts = sweep(&[(1, 180.0), (2, 230.0), (3, 240.0)]);
        // A = 190: one stream is 95 % of it; two take 40 Mb/s from others.
        let a = stream_advice(&pts, Some(BitRate::from_mbps(190.0))).unwrap();
        assert_eq!(a.recommended, 1);
        assert!(!a.parallel_recommended);
        assert_eq!(a.intrusive_from, Some(2));
    }

    #[test]
    fn the_udp_ramp_rises_until_loss() {
        let step = |asked: f64, sent: f64, got: f64, loss: f64| UdpStep {
            asked: BitRate::from_mbps(asked),
            sent: BitRate::from_mbps(sent),
            received: BitRate::from_mbps(got),
            loss,
            receiver_dropped: 0.0,
        };
        let start = BitRate::from_mbps(100.0);
        let ceil = BitRate::from_mbps(1000.0);
        assert_eq!(next_udp_rate(&[], start, ceil, 1.25), Some(start));
        let mut steps = vec![step(100.0, 100.0, 100.0, 0.0)];
        assert_eq!(
            next_udp_rate(&steps, start, ceil, 1.25),
            Some(BitRate::from_mbps(125.0))
        );
        steps.push(step(125.0, 125.0, 124.0, 0.005));
        steps.push(step(156.25, 156.0, 140.0, 0.1));
        assert_eq!(next_udp_rate(&steps, start, ceil, 1.25), None);
        assert_eq!(udp_achievable(&steps), Some(BitRate::from_mbps(124.0)));
        assert_eq!(udp_lossless(&steps), Some(BitRate::from_mbps(124.0)));
        assert_eq!(udp_lossless(&steps[2..]), None);
        assert!(!udp_sender_limited(&steps));
        // A sender that cannot keep up ends the ramp and says so.
        let host = vec![step(100.0, 60.0, 60.0, 0.0)];
        assert_eq!(next_udp_rate(&host, start, ceil, 1.25), None);
        assert!(udp_sender_limited(&host));
        // All steps lossy: the best goodput anyway.
        assert_eq!(
            udp_achievable(&[step(100.0, 100.0, 50.0, 0.5)]),
            Some(BitRate::from_mbps(50.0))
        );
        // The ceiling ends it.
        let top = vec![step(1000.0, 1000.0, 1000.0, 0.0)];
        assert_eq!(next_udp_rate(&top, start, ceil, 1.25), None);
    }

    /// A ramp whose last step was dropped by the receiving socket, not
    /// lost on the path, ends there (a faster rate meets the same limit)
    /// but is the receiver's limit: unbounded for the path, its steps
    /// carried by the path, and never read as the sender's limit.
    #[test]
    fn the_receivers_own_drops_end_the_ramp_but_are_not_the_paths_loss() {
        let step = |asked: f64, got: f64, loss: f64, dropped: f64| UdpStep {
            asked: BitRate::from_mbps(asked),
            sent: BitRate::from_mbps(asked),
            received: BitRate::from_mbps(got),
            loss,
            receiver_dropped: dropped,
        };
        let (start, ceil) = (BitRate::from_mbps(100.0), BitRate::from_gbps(10.0));
        let steps = vec![step(100.0, 100.0, 0.0, 0.0), step(125.0, 112.0, 0.1, 0.098)];
        assert_eq!(next_udp_rate(&steps, start, ceil, 1.25), None);
        assert!(udp_receiver_limited(&steps));
        assert!(udp_unbounded(&steps), "the path never pushed back");
        assert!(!udp_sender_limited(&steps));
        // The path carried the 125 Mb/s step: 112 arrived at the socket's reader.
        assert_eq!(udp_lossless(&steps), Some(BitRate::from_mbps(112.0)));
        // The same loss on the path: bounded, not the receiver's.
        let path = vec![step(100.0, 100.0, 0.0, 0.0), step(125.0, 112.0, 0.1, 0.0)];
        assert!(!udp_receiver_limited(&path));
        assert!(!udp_unbounded(&path));
        assert_eq!(udp_lossless(&path), Some(BitRate::from_mbps(100.0)));
        // Both at once: the path's loss decides.
        let both = vec![step(125.0, 100.0, 0.2, 0.1)];
        assert!(!udp_receiver_limited(&both) && !udp_unbounded(&both));
    }

    #[test]
    fn the_reference_rate_is_at_least_the_lossless_udp_rate() {
        let a = Some(BitRate::from_mbps(73.0));
        let u = Some(BitRate::from_mbps(186.0));
        assert_eq!(reference_rate(a, u), u);
        assert_eq!(reference_rate(u, a), u);
        assert_eq!(reference_rate(None, u), u);
        assert_eq!(reference_rate(a, None), a);
        assert_eq!(reference_rate(None, None), None);
    }

    #[test]
    fn udp_streams() {
        let s = BitRate::from_mbps(100.0);
        assert!(udp_streams_help(s, BitRate::from_mbps(150.0)));
        assert!(!udp_streams_help(s, BitRate::from_mbps(105.0)));
    }

    #[test]
    fn the_advisory_names_a_receive_buffer_cap() {
        let rtt = DurationNs::from_ms(20);
        let avail = BitRate::from_mbps(190.0);
        let input = AdviceInput {
            rtt: Some(rtt),
            mbs: Some(Bytes(300_000)),
            bdp: Some(bdp_window(avail, rtt)),
            available: Some(avail),
            receiver_tcp_rmem_max: Some(262_144),
            receiver_name: "server".into(),
            sender_name: "client".into(),
            ..Default::default()
        };
        let lines = advisory(&input);
        assert!(
            lines
                .iter()
                .any(|l| l.contains("net.ipv4.tcp_rmem max = 262144")),
            "{lines:#?}"
        );
        // MBS below the BDP of 475 000 bytes: the window advice too.
        assert!(lines.iter().any(|l| l.contains("MBS")), "{lines:#?}");
        // Lift the cap: no tcp_rmem line.
        let lifted = AdviceInput {
            receiver_tcp_rmem_max: Some(32 << 20),
            ..input
        };
        assert!(!advisory(&lifted).iter().any(|l| l.contains("tcp_rmem")));
    }
}
