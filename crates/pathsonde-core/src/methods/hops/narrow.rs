//! The narrow link (least capacity), told apart from the tight link on either
//! side of it, from the fluid model read hop by hop at two input rates.
//!
//! A FIFO link of capacity `C` carrying cross traffic `X` lets a train that
//! arrives at `in > C − X` leave at `C·in/(in + X)`: an **idle** link clamps
//! every train to exactly `C` whatever it came in at, while a **busy** link's
//! exit moves with the input.  So:
//!
//! * **After the tight link**: back-to-back trains leave the path's links at
//!   their slowest at the narrow link, a step down from the hop before; the
//!   rate there is at least the link's capacity's worth (see [`after`]).
//! * **Ahead of the tight link** (`k` before the tight `j`): the back-to-back
//!   trains step down at `k` to `r_k` (and maybe again at `j`, to `out_j`).
//!   Two checks, each with paced trains sent after the scan, make `k`
//!   the narrow link:
//!   1. `k` clamps: two *check trains*, exactly as long as the
//!      back-to-back trains (a shaper's bucket gives every train the same
//!      head start, which makes a short train read fast by a factor set by
//!      its length; one length cancels it), one paced well below what came
//!      into `k` back to back, one just above what left it
//!      ([`LOW_CHECK`]), leave `k` at one rate (within [`CLAMP`]).  A busy
//!      link's exit would have moved with its input and its cross traffic.
//!      Its capacity is that rate, or better, from a third, longer check
//!      train at the faster rate, the extra bits over the extra time
//!      ([`two_lengths`]), free of any head start.
//!   2. `j` is wider than `k`: were `C_j <= r_k`, the fluid model's step
//!      `out_j = C_j·r_k/(r_k + C_j − A_j)` would leave `A_j` at least
//!      [`if_no_wider`]`(r_k, out_j) = r_k·(2 − r_k/out_j)`, and `j` would
//!      pass trains paced below that.  *Probe trains* paced at [`PROBE`] of
//!      that bound, or just above the scan's reading of `A_j` when that is
//!      well below the bound ([`probe_at`]), long and of full-size packets
//!      (so that a spread of a few per cent stands above the markers'
//!      queueing noise), must leave `j` on average [`SPREAD`] slower than
//!      they were sent.  A wide busy link
//!      does spread them: a 300 Mb/s link carrying 240 Mb/s takes a
//!      73 Mb/s train to 300·73/313 = 70 Mb/s.  (Reading `C_j` itself off
//!      the fluid line through the back-to-back and scan trains was tried
//!      first: the extrapolation to `1/in = 0` is steep, Poisson cross
//!      traffic spreads trains near `A` more than the fluid does, and it
//!      named an idle 105 Mb/s link ahead of a 100 Mb/s tight one in 12 of
//!      20 runs.)  Or, when the probes sit too close to `A_j` to be spread
//!      visibly, the fluid model read with the scan's estimate of `A_j`
//!      ([`fluid_capacity`]: `C_j = (r_k − A_j)·out_j/(r_k − out_j)`) puts
//!      `C_j` at least [`WIDER`] above `r_k`.  That reading is steep in
//!      `A_j`, so the margin is wide: with the uncorrected bracket (20–40 %
//!      high) it named the narrow link in 8 of 20 runs; with the scan's
//!      fluid reading and a 20 % margin it named the idle 105 Mb/s link
//!      ahead of a 100 Mb/s tight one in 1–2 of 20 runs, and with 35 % in
//!      none of 80 (the `figures` seed sets 1000, 7000, 13000 and 31000).
//!
//! When either check cannot be made or fails, nothing is named and a note
//! says why: a narrow link is never named on a guess.  Links after the tight
//! link are crossed no faster than it lets trains through, so one of them
//! narrower than `k` but wider than that exit would go unseen, like the
//! unmeasured link into the far end.

use super::analysis::{TrainHops, EXPANSION};
use super::{HopReport, NarrowLink, TightLink};
use crate::units::BitRate;

/// An idle link leaves a train at the same rate for two input rates: the
/// check train's and the back-to-back trains' exits must all be within
/// this fraction of one another.
pub const CLAMP: f64 = 0.05;

/// The back-to-back trains at one hop: medians over the discovery trains.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HopRates {
    pub ttl: u8,
    /// The nearest hop measured before this one (0: the sender).
    pub prev_ttl: u8,
    /// The slowest the trains were seen before this hop, when known.
    pub rate_in: Option<f64>,
    /// The rate they left it at.
    pub rate: f64,
    /// The slowest and fastest any of them left it at.
    pub rate_min: f64,
    pub rate_max: f64,
}

/// Per-hop medians over `trains` (the back-to-back discovery trains).
pub fn profile(trains: &[TrainHops]) -> Vec<HopRates> {
    let mut ttls: Vec<u8> = trains
        .iter()
        .flat_map(|t| t.gaps.iter().map(|g| g.ttl))
        .collect();
    ttls.sort_unstable();
    ttls.dedup();
    let mut out = Vec::new();
    for ttl in ttls {
        let gaps: Vec<_> = trains
            .iter()
            .flat_map(|t| t.gaps.iter().filter(|g| g.ttl == ttl))
            .collect();
        let rates: Vec<f64> = gaps.iter().map(|g| g.exit_bps()).collect();
        let ins: Vec<f64> = gaps
            .iter()
            .filter_map(|g| g.rate_in.map(|r| r.bps()))
            .collect();
        let Some(rate) = crate::stats::median(&rates) else {
            continue;
        };
        out.push(HopRates {
            ttl,
            // The nearest hop any train measured before this one: a train
            // that lost an earlier hop's answers says only "somewhere since
            // the sender", and the hops it lost are in the profile with
            // their own rates.
            prev_ttl: gaps.iter().map(|g| g.prev_ttl).max().unwrap_or(0),
            rate_in: crate::stats::median(&ins),
            rate,
            rate_min: rates.iter().copied().fold(f64::INFINITY, f64::min),
            rate_max: rates.iter().copied().fold(0.0, f64::max),
        });
    }
    out
}

/// Index of the first hop within 3 % of the slowest exit: later hops only
/// kept that rate.
fn slowest(p: &[HopRates]) -> Option<usize> {
    let min = p.iter().map(|h| h.rate).fold(f64::INFINITY, f64::min);
    p.iter().position(|h| h.rate <= min * 1.03)
}

fn stepped(h: &HopRates) -> bool {
    h.rate_in.map_or(true, |r| h.rate < r * (1.0 - EXPANSION))
}

/// A hop ahead of the slowest one where the back-to-back trains stepped
/// down to their slowest before it: the candidate for a narrow link ahead of
/// the tight one, and the rate of the check train that tests it.
pub fn candidate(p: &[HopRates]) -> Option<(HopRates, BitRate, BitRate)> {
    let s = slowest(p)?;
    let pre = &p[..s];
    let m = pre.iter().map(|h| h.rate).fold(f64::INFINITY, f64::min);
    // A step before the slowest hop; else the slowest hop itself (a tight
    // link after it may not have slowed back-to-back trains visibly).
    let k = match pre.iter().find(|h| h.rate <= m * 1.03) {
        Some(k) if stepped(k) => *k,
        _ if stepped(&p[s]) => p[s],
        _ => return None,
    };
    // Halfway (geometrically) between what came in and what left: well
    // below the one, well above the other; but far enough above the slower
    // check train for [`clamp`]'s span: never below [`FAST_CHECK`] times
    // the exit, even where that is above 0.8 of what came in, which is
    // often the sender's packet rate, not a link's (the check trains'
    // packets are larger, fewer a second).  Unknown input (a batched send
    // from the sender): three times the exit.
    let check = match k.rate_in {
        Some(i) => (i * k.rate).sqrt().min(i * 0.8).max(FAST_CHECK * k.rate),
        None => 3.0 * k.rate,
    };
    let probe = PROBE * if_no_wider(k.rate, tight_out(k.rate, &p[s], &[]));
    // Zero where the bound is not positive (see [`positive`]): no probes.
    Some((
        k,
        BitRate::from_bps(check),
        BitRate::from_bps(probe.max(0.0)),
    ))
}

/// The rate the (likely) tight link `j` gave trains that came in at what
/// the candidate let through (`cap`): the median of the back-to-back
/// trains' exits there and those of the check trains (`checks`) that came
/// in at that rate (an idle candidate clamps each of them to it).
///
/// The median, not the least: the bound [`if_no_wider`] is steep in it
/// (1.4 Mb/s per Mb/s on the lab's 60 Mb/s link ahead of a 100 Mb/s one at
/// 60 %), and a 60-packet train's exit from a busy link wanders with the
/// Poisson cross traffic it meets (the few packets that arrive over its
/// few milliseconds), so the least of three
/// put the bound, and the probes, below the tight link's A in lab runs
/// that did not name the narrow link (topology 10 at dafa958: probes
/// below 32-39 Mb/s where A was about 39).  A link no
/// wider than the candidate keeps its A above the bound read from the
/// median as much as from any one train, and the probes go at [`PROBE`]
/// of it or lower.
pub fn tight_out(cap: f64, j: &HopRates, checks: &[&TrainHops]) -> f64 {
    let mut exits: Vec<f64> = checks
        .iter()
        .filter_map(|t| t.gaps.iter().find(|g| g.ttl == j.ttl))
        .filter(|g| g.rate_in.is_some_and(|i| i.bps() >= cap * 0.95))
        .map(|g| g.rate.bps())
        .collect();
    exits.extend([j.rate_min, j.rate_max]);
    crate::stats::median(&exits).unwrap_or(j.rate).min(cap)
}

/// The least rate the tight link `j` gave trains that came in at `cap`:
/// the back-to-back trains' and the long check train's (when it came in
/// at that rate).  [`fluid_capacity`] reads the tight link's capacity from
/// it: that reading grows steeply with the exit (with the median exit, an
/// idle 105 Mb/s link ahead of a 100 Mb/s one at 14 % was named in 2 of 60
/// synthetic runs, 1 with this), so it takes the least, which errs towards
/// a narrower tight link.
pub fn least_tight_out(cap: f64, j: &HopRates, long: Option<&TrainHops>) -> f64 {
    let from_check = long
        .and_then(|t| t.gaps.iter().find(|g| g.ttl == j.ttl))
        .filter(|g| g.rate_in.is_some_and(|i| i.bps() >= cap * 0.95))
        .map(|g| g.rate.bps());
    from_check
        .map_or(j.rate_min, |c| c.min(j.rate_min))
        .min(cap)
}

/// The candidate's capacity from two trains sent at one rate but of two
/// lengths (the clamp check train, as long as the back-to-back trains, and
/// the long check train): the extra bits over the extra time.  A link that
/// gives every train the same head start (a shaper's bucket passes the
/// first few packets at once) makes each train's own rate read high — by
/// about 11 % for a 60-packet train through a tbf with a two-frame burst —
/// and the difference cancels it.  `None` when either train has no answer
/// pair there or the lengths are too close to tell.
pub fn two_lengths(ttl: u8, short: &TrainHops, long: &TrainHops) -> Option<f64> {
    let at = |t: &TrainHops| {
        let g = t.gaps.iter().find(|g| g.ttl == ttl)?;
        let secs = g.gap.secs_f64();
        Some((g.rate.bps() * secs, secs))
    };
    let (b1, g1) = at(short)?;
    let (b2, g2) = at(long)?;
    (b2 > 1.5 * b1 && g2 > g1).then(|| (b2 - b1) / (g2 - g1))
}

/// The candidate's capacity: the single trains' exit, or, when the two
/// check trains tell it, their [`two_lengths`] rate — trusted only a
/// little below the single trains' (a head start makes them read high,
/// never low) and not far below: a wild difference is noise.
pub fn capacity(k: &HopRates, clamped: f64, short: &TrainHops, long: Option<&TrainHops>) -> f64 {
    let single = k.rate.max(clamped);
    long.and_then(|l| two_lengths(k.ttl, short, l))
        .filter(|c| (single * 0.8..=single * 1.02).contains(c))
        .unwrap_or(single)
}

/// The probe trains' rate for the tight link `ttl`, once the two check
/// trains came back (see [`capacity`] and [`tight_out`]), and the scan's
/// reading of its available bandwidth, `a_scan` (see [`probe_at`]).
pub fn probe_rate(
    p: &[HopRates],
    ttl: u8,
    short: &TrainHops,
    slow: &TrainHops,
    long: &TrainHops,
    a_scan: f64,
) -> Option<BitRate> {
    let (k, _, _) = candidate(p)?;
    let j = p.iter().find(|h| h.ttl == ttl)?;
    let clamped = short.gaps.iter().find(|g| g.ttl == k.ttl)?.rate.bps();
    let cap = capacity(&k, clamped, short, Some(long));
    let bound = if_no_wider(cap, tight_out(cap, j, &[short, slow, long]));
    positive(probe_at(bound, a_scan))
}

/// A probe rate only where the bound gives one: [`if_no_wider`] is
/// negative when the tight link let trains through at less than half the
/// candidate's rate (on a synthetic path whose first, busy 1 Gb/s link was
/// taken for the candidate, the probes were planned at −1.01 Gb/s).
fn positive(rate: f64) -> Option<BitRate> {
    (rate.is_finite() && rate > 0.0).then(|| BitRate::from_bps(rate))
}

/// Where the probe trains go, given the bound a no-wider tight link's
/// available bandwidth could not be below ([`if_no_wider`]) and the scan's
/// reading of it (`a_scan`, an upper bound in the fluid model).
///
/// [`PROBE`] of the bound, unless the scan reads the link well below the
/// bound ([`LIFT_BELOW`]): then just above that reading ([`LIFT`]), but
/// still [`NEAR`] the bound at most.  The bound is steep in the tight
/// link's exit, which is read low on purpose (the least seen), so on the
/// lab's 60 and 70 Mb/s links ahead of a 100 Mb/s one the plain rate fell
/// below `A` and a wider link passed the probes (most of the narrow-link
/// misses of the lab sweep at e972519).  A no-wider link keeps its `A`
/// (and the scan's reading, above it) at or above the bound, so the probes
/// are never lifted there.
pub fn probe_at(bound: f64, a_scan: f64) -> f64 {
    let plain = PROBE * bound;
    if a_scan < LIFT_BELOW * bound {
        plain.max((a_scan * LIFT).min(NEAR * bound))
    } else {
        plain
    }
}

/// The scan must read the tight link this far below the bound before the
/// probes are lifted towards it.
pub const LIFT_BELOW: f64 = 0.9;

/// Lifted probes go this far above the scan's reading ...
pub const LIFT: f64 = 1.08;

/// ... but no nearer the bound than this: the bound, read from the median
/// exit ([`tight_out`]), can sit a little above a no-wider link's `A`
/// (at 0.95 the lifted probes of one synthetic run went above the `A` of a
/// 100 Mb/s link at 14 % behind an idle 105 Mb/s one, and named that).
pub const NEAR: f64 = 0.9;

/// The probe trains' rate before the check train came back: from the
/// back-to-back trains alone (replaced by [`probe_rate`] once it has).
pub fn probe_rate_before_check(p: &[HopRates], k: &HopRates, ttl: u8) -> Option<BitRate> {
    let j = p.iter().find(|h| h.ttl == ttl)?;
    positive(PROBE * if_no_wider(k.rate, tight_out(k.rate, j, &[])))
}

/// The two checks' findings on a candidate ahead of the tight link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clamp {
    /// The faster check train's rate into the candidate and out of it
    /// (the slower one agreed with it).
    pub rate_in: f64,
    pub rate: f64,
}

/// The slower clamp check train's rate, as a multiple of what the
/// candidate let the back-to-back trains through at: above it, so an idle
/// link still clamps it, and far enough below the faster check train that a
/// busy link's exit moves between the two.
pub const LOW_CHECK: f64 = 1.2;

/// The faster clamp check train must come into the candidate at least this
/// many times faster than the slower one.  Across that span a link carrying
/// 40 % of its capacity lets the two through 7-8 % apart, beyond [`CLAMP`].
pub const CHECK_SPAN: f64 = 1.35;

/// The faster clamp check train is paced at least this many times above
/// what the candidate let the back-to-back trains through at:
/// [`LOW_CHECK`]·[`CHECK_SPAN`] and a margin of 10 % for the pacing the
/// hops before the candidate take off it.  The geometric mean alone falls
/// short of the span whenever the back-to-back trains come in at less than
/// about (1.3·1.5)² ≈ 3.8 times what leaves, as it was before: in the
/// lab's five-router chain with the 60 Mb/s narrow link at hop 3 they came
/// in at 175-330 Mb/s, and 8 of 20 runs (dafa958) failed the span with
/// check trains 1.3-1.4 times apart.  Not more: paced at 2.3 times an
/// 80-85 Mb/s link's rate (184-196 Mb/s of 500-byte packets), the fast
/// check trains of the lab's two-core host reached that link at 65-210
/// Mb/s, in 9 of the 26 runs that failed the span (of 40: topologies 4
/// and 8 at 42b70e7) slower than the slow ones.  At 1.8 the same two
/// topologies still failed it in 24 of 40 runs (47b8ed3; docs/hops.md,
/// "What is left").
pub const FAST_CHECK: f64 = 1.8;

/// Reads the two clamp check trains at the candidate hop (`fast` paced well
/// below what came into it back to back, `slow` a little above what left
/// it; both of as many packets as the back-to-back trains, of full size):
/// `Ok` when the candidate
/// clamped both to one rate, `Err(reason)` otherwise.  What each came in
/// at is [`check_input`].
///
/// The back-to-back trains are not the reference: on the lab's shared
/// host they read an idle tbf 2–7 % faster than paced trains of the same
/// length (the sender stamps the first answers while it is still pushing
/// the burst out), and comparing with them failed 43 of 60 idle links.
/// They only must not be slower than the paced trains: a busy link lets a
/// faster input through faster, never slower.  Nor must the faster check
/// train come in well below them (it had to, at 85 % of their input, from
/// the first version's one check train, compared with them): two check
/// trains compared with each other test the clamp at any two inputs above
/// the candidate's rate, and 3 of the 40 runs of the lab's chains 4 and 8
/// at 1169bbf failed only that.
pub fn clamp(k: &HopRates, fast: CheckTrain<'_>, slow: CheckTrain<'_>) -> Result<Clamp, String> {
    let read = |(planned, t): CheckTrain<'_>| {
        let g = t
            .gaps
            .iter()
            .find(|g| g.ttl == k.ttl)
            .ok_or_else(|| format!("a check train got no answer pair from TTL {}", k.ttl))?;
        let sent = g.sent_rate.unwrap_or(planned).bps();
        Ok::<_, String>((check_input(g, planned), g.rate.bps(), sent))
    };
    let (fast_in, fast_out, fast_sent) = read(fast)?;
    let (slow_in, slow_out, slow_sent) = read(slow)?;
    // The test needs two inputs apart, not the plan's order: a sender
    // preempted in one train and catching up in the other can send the
    // slower-planned one faster (lab, 1169bbf: 173 and 99 Mb/s where 97
    // and 150 were asked), and the two still span the test.
    let ((rate_in, rate), (low_rate_in, low_rate)) = if fast_in >= slow_in {
        ((fast_in, fast_out), (slow_in, slow_out))
    } else {
        ((slow_in, slow_out), (fast_in, fast_out))
    };
    if !(low_rate_in >= k.rate * 1.1 && rate_in >= low_rate_in * CHECK_SPAN) {
        // Say so when the sender, not the path, put them there.
        let (fast_planned, slow_planned) = (fast.0.bps(), slow.0.bps());
        let off = super::pacing::off_plan;
        let sender = if off(fast_sent, fast_planned) || off(slow_sent, slow_planned) {
            format!(
                " (the sender, asked for {} and {}, could not pace them: host-limited)",
                BitRate::from_bps(slow_planned),
                BitRate::from_bps(fast_planned)
            )
        } else {
            String::new()
        };
        return Err(format!(
            "the check trains came into TTL {} at {} and {}, not both above {} and {CHECK_SPAN} times apart{sender}",
            k.ttl,
            BitRate::from_bps(low_rate_in),
            BitRate::from_bps(rate_in),
            BitRate::from_bps(k.rate * 1.1),
        ));
    }
    // An idle link leaves every train at its capacity: the two check trains
    // agree.  A busy one's exit moves with its input and the cross traffic.
    let lo = rate.min(low_rate);
    let hi = rate.max(low_rate);
    if hi > lo * (1.0 + CLAMP) || k.rate_max < lo * (1.0 - CLAMP) {
        return Err(format!(
            "TTL {} let trains through at {} (in at {}), {} (in at {}) and {} (back to back): its exit moves with its input, so it carries cross traffic and its capacity is not known",
            k.ttl,
            BitRate::from_bps(low_rate),
            BitRate::from_bps(low_rate_in),
            BitRate::from_bps(rate),
            BitRate::from_bps(rate_in),
            BitRate::from_bps(k.rate),
        ));
    }
    Ok(Clamp { rate_in, rate })
}

/// What a check train came into the candidate at: the slowest of the rate
/// its sender stamped between the two markers and its own exits from the
/// hops before the candidate (`HopGap::rate_in`; its planned rate without
/// either).  A hop ahead that spreads it shows there.
///
/// From its own answers, not the back-to-back trains' exits (as at 1169bbf,
/// which capped the input by them): those trains are of 500-byte packets,
/// and where their exit from the hops before is the sender's packet rate
/// (the lab's two-core host: 99-260 Mb/s out of its own unshaped link, in
/// this change's trials) it says nothing of the full-size check trains,
/// which need 2.8 times fewer packets a second.  Nor from 500-byte check
/// trains' own answers (47b8ed3): a 30 KB train's exit from a router is
/// read from two ICMP answers whose timing on the lab's shared cores
/// wandered by tens of per cent over its 2-3 ms (check trains paced 1.8
/// times apart read as coming in at 70 and 86 Mb/s; 24 of 40 runs of two
/// chains failed the span).  A check train of full-size packets is 84 KB,
/// 2.8 times longer at the same rate, so the same jitter is 2.8 times
/// smaller beside it; and a reading low by noise narrows the span, which
/// fails the check, never passes it.
pub fn check_input(g: &super::analysis::HopGap, planned: BitRate) -> f64 {
    g.rate_in.or(g.sent_rate).unwrap_or(planned).bps()
}

/// A check train as sent: its planned rate and what it said.
pub type CheckTrain<'a> = (BitRate, &'a TrainHops);

/// The long check train has this many times the clamp check trains'
/// packets (at the faster one's rate): [`two_lengths`] reads the
/// candidate's capacity from the difference, 90 full-size packets (126 KB,
/// 12 ms at 85 Mb/s) over the 60 of the short one.
pub const LONG_CHECK: f64 = 2.5;

/// The two clamp check trains among the checks (fast, slow).
fn clamp_pair(checks: &[(BitRate, TrainHops)]) -> Option<(CheckTrain<'_>, CheckTrain<'_>)> {
    match checks {
        [(a, fast), (b, slow), ..] => Some(((*a, fast), (*b, slow))),
        _ => None,
    }
}

fn addr(hops: &[HopReport], ttl: u8) -> Option<std::net::IpAddr> {
    hops.iter().find(|h| h.ttl == ttl).and_then(|h| h.address)
}

/// The narrow link after the tight one: where back-to-back trains reach
/// their slowest, a step down from the hop before.  `Err` says why not.
pub fn after(
    p: &[HopRates],
    trains: &[TrainHops],
    hops: &[HopReport],
    tight: Option<&TightLink>,
    checks: &[(BitRate, TrainHops)],
) -> Result<NarrowLink, String> {
    let i = slowest(p).ok_or("no hop was measured back to back")?;
    let h = p[i];
    if i == 0 {
        return Err("the back-to-back trains were slowest at the first measured hop".into());
    }
    let before = p[i - 1];
    if before.rate < h.rate * (1.0 + EXPANSION) {
        return Err(format!(
            "the back-to-back trains did not step down at TTL {}",
            h.ttl
        ));
    }
    let t = tight.ok_or("no tight link to set it apart from")?;
    if t.to_ttl >= h.ttl {
        return Err(format!(
            "the back-to-back trains were slowest at TTL {}, not after the tight link",
            h.ttl
        ));
    }
    // A tight link that clamped the check train is idle: a link after it
    // that slowed trains further would have less available bandwidth, so
    // the tight link named is in doubt, and so is this.
    if let (Some((k, _, _)), Some((fast, slow))) = (candidate(p), clamp_pair(checks)) {
        if k.ttl == t.to_ttl && clamp(&k, fast, slow).is_ok() {
            return Err(format!(
                "the tight link named (TTL {}) passed trains like an idle link, and TTL {} slowed them further",
                t.to_ttl, h.ttl
            ));
        }
    }
    let (rate_in, rate) = stepped_trains(trains, h.ttl)?;
    Ok(NarrowLink {
        from_ttl: before.ttl,
        to_ttl: h.ttl,
        from_address: addr(hops, before.ttl),
        to_address: addr(hops, h.ttl),
        rate_in: BitRate::from_bps(rate_in),
        rate: BitRate::from_bps(rate),
        capacity_from: super::CapacityFrom::Slowest,
        check_rate_in: None,
        check_rate: None,
        tight_ratio: None,
        tight_available_if_no_wider: None,
        tight_capacity: None,
    })
}

/// The rate into and out of the narrow link after the tight one, from the
/// back-to-back trains that the link at `ttl` slowed (medians over them).
///
/// A train that the tight link's cross traffic had already spread below
/// the narrow link's capacity crosses the narrow link unchanged and says
/// nothing of it; a median over every train mixes the two kinds.  On the
/// lab's three-router chain (a 60 Mb/s link after a 100 Mb/s one carrying
/// 60 Mb/s) one of two trains left the tight link at 40 Mb/s, and the
/// per-hop medians read the 60 Mb/s link at 38-48 Mb/s (CI and local runs
/// of 2026-12-02).  The trains that came into the link faster than it let
/// the slowed ones out are the ones that can contradict it: at least half
/// of them must have been slowed there.
pub fn stepped_trains(trains: &[TrainHops], ttl: u8) -> Result<(f64, f64), String> {
    let at: Vec<_> = trains
        .iter()
        .filter_map(|t| t.gaps.iter().find(|g| g.ttl == ttl))
        .collect();
    let slowed: Vec<_> = at.iter().filter(|g| g.expanded()).collect();
    let rates: Vec<f64> = slowed.iter().map(|g| g.exit_bps()).collect();
    let ins: Vec<f64> = slowed
        .iter()
        .filter_map(|g| g.rate_in.map(|r| r.bps()))
        .collect();
    let (Some(rate), Some(rate_in)) = (crate::stats::median(&rates), crate::stats::median(&ins))
    else {
        return Err(format!(
            "no back-to-back train stepped down at TTL {ttl} on its own"
        ));
    };
    let faster = at
        .iter()
        .filter(|g| {
            g.rate_in
                .is_some_and(|r| r.bps() > rate * (1.0 + EXPANSION))
        })
        .count();
    if 2 * slowed.len() < faster {
        return Err(format!(
            "TTL {ttl} slowed {} of the {faster} back-to-back trains that came into it faster than it let them out",
            slowed.len()
        ));
    }
    Ok((rate_in, rate))
}

/// The narrow link ahead of the tight one (the module comment's two
/// checks).  `Err` says why not.
pub fn ahead(
    p: &[HopRates],
    hops: &[HopReport],
    tight: Option<&TightLink>,
    checks: &[(BitRate, TrainHops)],
    scan: &[(BitRate, TrainHops)],
) -> Result<NarrowLink, String> {
    let (k, _, _) = candidate(p).ok_or("no step down ahead of the slowest hop")?;
    let t = tight.ok_or("no tight link to set it apart from")?;
    if t.to_ttl <= k.ttl {
        return Err(format!(
            "the step at TTL {} is not ahead of the tight link",
            k.ttl
        ));
    }
    let (fast, slow) = clamp_pair(checks).ok_or("no check trains were sent")?;
    let c = clamp(&k, fast, slow)?;
    let long = checks.get(2).map(|(_, t)| t);
    let cap_k = capacity(&k, c.rate, fast.1, long);
    // The tight link, and no other hop slowing the trains: between k and
    // it they keep k's rate, after it the tight link's.
    let j = p.iter().find(|h| h.ttl == t.to_ttl).ok_or_else(|| {
        format!(
            "the tight link (TTL {}) was not measured back to back",
            t.to_ttl
        )
    })?;
    if let Some(l) = p.iter().find(|h| {
        (h.ttl > k.ttl && h.ttl < j.ttl && h.rate < k.rate * (1.0 - EXPANSION))
            || (h.ttl > j.ttl && h.rate < j.rate * (1.0 - EXPANSION))
    }) {
        return Err(format!("TTL {} also slowed the back-to-back trains", l.ttl));
    }
    let clamped: Vec<&TrainHops> = [fast.1, slow.1].into_iter().chain(long).collect();
    let out_j = tight_out(cap_k, j, &clamped);
    let a0 = if_no_wider(cap_k, out_j);
    let top = (probe_at(a0, t.available.bps()) * 1.02).max(a0 * BELOW);
    let (n, ratio) = spread_below(a0, top, j.ttl, checks.iter().skip(3).chain(scan));
    let c_j = fluid_capacity(cap_k, least_tight_out(cap_k, j, long), t.available.bps());
    let by_probes = n >= MIN_BELOW && ratio <= 1.0 - SPREAD;
    let by_fluid = c_j.is_some_and(|c| c >= cap_k * (1.0 + WIDER));
    if !by_probes && !by_fluid {
        let probes = if n < MIN_BELOW {
            format!(
                "{n} train(s) came into the tight link (TTL {}) below {} (where it must pass them if it is no wider than TTL {}): too few to tell",
                j.ttl,
                BitRate::from_bps(top),
                k.ttl
            )
        } else {
            format!(
                "trains that came into the tight link (TTL {}) below {} left it at {:.1} % of their rate: not clearly spread, so it may be no wider than TTL {}",
                j.ttl,
                BitRate::from_bps(top),
                100.0 * ratio,
                k.ttl
            )
        };
        let fluid = c_j.map_or(
            "its capacity could not be read off the fluid model".into(),
            |c| {
                format!(
                    "its capacity by the fluid model, {}, is not {:.0} % above TTL {}'s",
                    BitRate::from_bps(c),
                    100.0 * WIDER,
                    k.ttl
                )
            },
        );
        return Err(format!("{probes}; {fluid}"));
    }
    Ok(NarrowLink {
        from_ttl: k.prev_ttl,
        to_ttl: k.ttl,
        from_address: addr(hops, k.prev_ttl),
        to_address: addr(hops, k.ttl),
        rate_in: BitRate::from_bps(k.rate_in.unwrap_or(c.rate_in)),
        rate: BitRate::from_bps(cap_k),
        capacity_from: super::CapacityFrom::Clamp,
        check_rate_in: Some(BitRate::from_bps(c.rate_in)),
        check_rate: Some(BitRate::from_bps(c.rate)),
        tight_ratio: (n > 0).then_some(ratio),
        tight_available_if_no_wider: Some(BitRate::from_bps(a0)),
        tight_capacity: c_j.map(BitRate::from_bps),
    })
}

/// The tight link's capacity by the fluid model, from its step and its
/// available bandwidth: trains that came in at `cap` (what the idle
/// candidate ahead let through) left it at `out`, and `out = C·cap/(cap +
/// C − a)` gives `C = (cap − a)·out/(cap − out)`.  `a` is the scan's
/// reading of the tight link (an upper bound of its available bandwidth
/// in the fluid model, see `corrected_available`), and `out` the least
/// exit seen ([`least_tight_out`]); both err towards a narrower `C`, so a link
/// read as wider than the candidate by [`WIDER`] is wider.  `None` when the
/// step or the headroom is not there to read.
pub fn fluid_capacity(cap: f64, out: f64, a: f64) -> Option<f64> {
    (cap > out && cap > a && out > 0.0).then(|| (cap - a) * out / (cap - out))
}

/// How much wider than the candidate the fluid model must read the tight
/// link before that alone names the candidate (the probe trains need not
/// then spread): the reading moves by several per cent for each per cent
/// of error in the available bandwidth.
pub const WIDER: f64 = 0.35;

/// The least available bandwidth a link could have if its capacity were at
/// most `cap` while it took trains that came in at `cap` down to `out`: by
/// the fluid model `out = C·cap/(cap + C − A)`, so `A = cap + C − C·cap/out`,
/// smallest at `C = cap`.  A link that spreads trains well below this is
/// wider than `cap`.
pub fn if_no_wider(cap: f64, out: f64) -> f64 {
    cap * (2.0 - cap / out)
}

/// Trains that came into hop `ttl` between `ABOVE · a0` and `top` (at
/// least `BELOW · a0`, and just above where the probes went): how many, and
/// the mean of their exit over their input rate.
pub fn spread_below<'a>(
    a0: f64,
    top: f64,
    ttl: u8,
    trains: impl Iterator<Item = &'a (BitRate, TrainHops)>,
) -> (usize, f64) {
    let ratios: Vec<f64> = trains
        .filter_map(|(_, t)| {
            let g = t.gaps.iter().find(|g| g.ttl == ttl)?;
            // Against what was sent, not the slowest seen before (a minimum
            // of noisy rates, low, which would hide the spread).
            let i = g.sent_rate.or(g.rate_in)?.bps();
            (i <= top && i >= a0 * ABOVE).then(|| g.rate.bps() / i)
        })
        .collect();
    let n = ratios.len();
    (n, ratios.iter().sum::<f64>() / n.max(1) as f64)
}

/// The rate of the trains that test the tight link, as a fraction of
/// [`if_no_wider`]'s bound: far enough below it that a link no wider than
/// the candidate passes them (its queue at most about 90 % busy), near
/// enough to the tight link's available bandwidth that a wider, busy link
/// spreads them.
pub const PROBE: f64 = 0.85;

/// Trains below this fraction of the bound count.
pub const BELOW: f64 = 0.9;

/// ... and above this fraction: slower trains are spread less by a wider
/// busy link too (their overload is smaller), and would dilute the mean.
pub const ABOVE: f64 = 0.75;

/// At least this many such trains.
pub const MIN_BELOW: usize = 2;

/// Their mean exit must be at least this far below their input.
pub const SPREAD: f64 = 0.015;
