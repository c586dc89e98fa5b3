//! FAC²'s answer from its trains: A and a band that says how sure it is.
//!
//! The band is the line's 95 % interval on A (never narrower than
//! `common::floor_band`'s ±5 %).  Where the line and the trains disagree —
//! a train carried above the line's A, or one slowed below it beyond what
//! noise explains — the band is widened to take in what the trains showed,
//! the estimate is not converged, and a note says so: a run that could not
//! settle says it, rather than giving a confident wrong number.

use super::notes::Topic;
use super::{Fac2, Fac2Stop, Reason};
use crate::estimate::{Estimate, Stopped};
use crate::methods::common::{floor_band_at, BAND_FLOOR};
use crate::units::BitRate;

/// Where the line gives no interval (two points), the band is the trains'
/// bracket, or this share of A either side.
const NO_INTERVAL_SHARE: f64 = 0.5;
/// C is reported only when the trains resolve it this well (relative
/// standard error): a capacity 1 σ this far off is still within the 20 %
/// a user may take it to mean at 2 σ.
const MAX_CAPACITY_REL_SE: f64 = 0.1;
/// Without a usable line, the band reaches down to this share of A.
const NO_LINE_LOW: f64 = 0.25;

pub(super) fn assemble(m: &Fac2) -> Option<Estimate> {
    use super::train::Class;
    if !m
        .trains
        .iter()
        .any(|t| t.class != Class::Unusable && t.recv_bps.is_some())
    {
        return None;
    }
    let mut notes = m.notes.clone();
    let readout = super::readout::read(&m.trains, &m.cfg);
    let carried = m.carried_floor();
    let ceiling = m.slowed_ceiling();
    let tol = m.cfg.tolerance();

    for &(i, why) in readout.iter().flat_map(|r| r.set_aside.iter()) {
        let Some(t) = m.trains.iter().find(|t| t.index == i) else {
            continue;
        };
        let what = match why {
            Reason::SlowerThanCarried { carried_mbps } => format!(
                "slower than a carried train ({}), which one FIFO cannot do",
                BitRate::from_mbps(carried_mbps)
            ),
            Reason::Residual { z } => {
                format!("{z:.0} standard errors off the line through the others")
            }
        };
        notes.once(
            Topic::Outlier(i),
            format!(
                "train {i} (sent at {}) arrived at {}, {what}: set aside as a host or cross-traffic hiccup",
                BitRate::from_bps(t.sent_bps),
                BitRate::from_bps(t.recv_bps.unwrap_or(0.0))
            ),
        );
    }

    let mut converged = m.stop == Some(Fac2Stop::Converged);
    let (available, low, high, capacity, cross) = if m.stop == Some(Fac2Stop::LowerBound) {
        let best = m
            .trains
            .iter()
            .filter(|t| t.class == Class::Carried)
            .max_by(|a, b| a.sent_bps.total_cmp(&b.sent_bps))?;
        // The path carried what was sent; a train that arrived faster was
        // bunched on the way (a busy host's thread, a coalescing NIC) and
        // shows no more than that (the clean-relay CI run at ff8ef46 read
        // "A ≥ 211 Mb/s" from trains sent at 70).
        let r = best.recv_bps?.min(best.sent_bps);
        notes.once(
            Topic::LowerBound,
            format!(
                "lower bound: A ≥ {}; the path carried a {:.1} ms train at the fastest rate, so nothing bounds A from above",
                BitRate::from_bps(r),
                best.secs * 1e3
            ),
        );
        (r, r * (1.0 - tol), None, None, None)
    } else if let Some(r) = readout.as_ref().filter(|r| r.available > 0.0) {
        let a = r.available;
        let (mut low, mut high) = match r.half_width {
            Some(hw) => (a - hw, a + hw),
            None => (
                carried.unwrap_or(a * (1.0 - NO_INTERVAL_SHARE)),
                ceiling.unwrap_or(a * (1.0 + NO_INTERVAL_SHARE)).max(a),
            ),
        };
        if r.half_width.is_none() {
            converged = false;
        }
        // What the trains showed against the line, beyond two standard
        // errors and the carried-train tolerance.
        let slack = 2.0 * r.se + tol * r.capacity;
        if let Some(lo) = carried.filter(|&lo| lo > a + slack) {
            notes.once(
                Topic::Contradiction,
                format!(
                    "a train at {} was carried, above the line's A of {}: the cross traffic varied from train to train more than the line shows; the band takes both in",
                    BitRate::from_bps(lo),
                    BitRate::from_bps(a)
                ),
            );
            high = high.max(lo);
            converged = false;
        }
        if let Some(hi) = ceiling.filter(|&hi| hi < a - slack) {
            notes.once(
                Topic::Contradiction,
                format!(
                    "a train arrived at {}, below the line's A of {}: the cross traffic varied from train to train more than the line shows; the band takes both in",
                    BitRate::from_bps(hi),
                    BitRate::from_bps(a)
                ),
            );
            low = low.min(hi);
            converged = false;
        }
        let resolved = !r.short_line && r.capacity_rel_se <= MAX_CAPACITY_REL_SE;
        if !resolved && r.capacity >= a {
            let near_c = BitRate::from_bps(r.capacity);
            let sd = 100.0 * r.capacity_rel_se;
            notes.once(
                Topic::CapacityUnresolved,
                if r.short_line {
                    format!(
                        "capacity not reported: the short trains that fix the fluid line's slope held too few packets to average the cross traffic between them, so its C (near {near_c}) may be off by ±{sd:.0} % or more; A's band carries that uncertainty"
                    )
                } else {
                    format!(
                        "capacity not reported: the trains put it near {near_c} but resolve it only to ±{sd:.0} % (1 σ); A's band carries that uncertainty"
                    )
                },
            );
        }
        if r.capacity < a {
            notes.once(
                Topic::CapacityUnresolved,
                format!(
                    "capacity not reported: the fluid line's slope put C at {}, below its A of {}: the trains far from A do not pin the slope",
                    BitRate::from_bps(r.capacity.max(0.0)),
                    BitRate::from_bps(a)
                ),
            );
        }
        let c = (resolved && r.capacity >= a).then_some(r.capacity);
        (a, low.max(0.0), Some(high), c, c.map(|c| (c - a).max(0.0)))
    } else {
        // No usable line: the trains' own bracket.
        let a = ceiling.or(carried)?;
        notes.once(
            Topic::Bracket,
            format!(
                "too few trains fit the fluid line to read A from it; A is the slowest arrival of a train sent above it, {}, with the trains' bracket as the band",
                BitRate::from_bps(a)
            ),
        );
        converged = false;
        // Without a line, one slow arrival or one lucky carried train is
        // all there is: the band says so.
        (
            a,
            carried.unwrap_or(0.0).min(a * NO_LINE_LOW),
            Some(a * (1.0 + NO_INTERVAL_SHARE)),
            None,
            None,
        )
    };
    if m.stop.is_none() {
        converged = false;
        notes.once(
            Topic::Budget,
            format!(
                "read after {} trains, before FAC² finished: the band is what those trains support",
                m.trains.len()
            ),
        );
    }
    let (low, high) = floor_band_at(
        sampled_floor(m.ledger.cost.bytes.get(), m.default_byte_budget()).max(bunching_floor(m)),
        available,
        low,
        high,
    );
    let near = m
        .trains
        .iter()
        .filter(|t| t.role == super::Role::Near)
        .count();
    let mut all_notes: Vec<String> = m.ledger.notes.clone();
    all_notes.extend(notes.texts().map(str::to_string));
    if let Some(hw) = readout.as_ref().and_then(|r| r.half_width) {
        all_notes.push(format!(
            "{} trains ({near} near A), {}: the line's 95 % band on A is ±{:.1} %",
            m.trains.len(),
            m.ledger.cost.bytes,
            100.0 * hw / available.max(f64::MIN_POSITIVE)
        ));
    }
    Some(Estimate {
        stopped: m.stop.map(|s| match s {
            Fac2Stop::Converged => Stopped::TargetReached,
            Fac2Stop::LowerBound => Stopped::LowerBound,
            Fac2Stop::Budget if m.train_cap_hit => Stopped::ProbeCap,
            Fac2Stop::Budget => Stopped::ByteBudget,
            Fac2Stop::NoMeasurement => Stopped::NoMeasurement,
        }),
        method: crate::method_name::MethodName::Fac2,
        available: BitRate::from_bps(available),
        low: BitRate::from_bps(low),
        high: high.map(BitRate::from_bps),
        capacity: capacity.map(BitRate::from_bps),
        cross_traffic: cross.map(BitRate::from_bps),
        cost: m.ledger.cost,
        probe_span: m.ledger.probe_span(),
        converged,
        host_limited: m.host_limited.clone(),
        trains: m.ledger.trains.clone(),
        notes: all_notes,
        coalescing: m.ledger.coalescing(),
        host_evidence: None,
    })
}

/// The floor never goes below this, however many bytes were spent: the
/// synthetic and lab paths have not shown a band narrower than ±1 % holding.
const MIN_FLOOR: f64 = 0.01;

/// A receiver that bunches arrivals (interrupt coalescing) lets a train's
/// receiving rate be read only at bunch ends: its span is known to about
/// one bunch period, so each near train's rate to about one bunch over its
/// receive span, and the bunches' phase against the trains is the same
/// for every train of a run.  The band is at least that share of A (the
/// median over near trains); 0 when no bunching was seen.  In the
/// simulator's 10–100 Gb/s scenarios with coalescing NICs (7a34ff6 and
/// abe62f0, 10 seeds) five converged bands of ±5 % missed the truth by
/// 5.4–6.7 % with near trains spanning about 16 bunches.
fn bunching_floor(m: &Fac2) -> f64 {
    let bunch = m.bunching.secs_f64();
    if bunch <= 0.0 {
        return 0.0;
    }
    let shares: Vec<f64> = m
        .trains
        .iter()
        .filter(|t| t.role == super::Role::Near && t.recv_span > 0.0)
        .map(|t| bunch / t.recv_span)
        .collect();
    crate::stats::median(&shares).unwrap_or(0.0).min(1.0)
}

/// The band floor for a run that spent `bytes` where FAC²'s default budget
/// at the rate the path delivered is `default_budget` (2 MB, or its probe
/// time at that rate if more).  [`BAND_FLOOR`] is the wander between the
/// instants a default run samples and the whole window's mean; a run that
/// spends more than its default samples more of its window, and the wander
/// of a mean shrinks as the square root of its samples, so the floor does
/// too (`--max-bytes`, issue 28), down to [`MIN_FLOOR`].  Bytes alone do not
/// say that: at 40 Gb/s the default budget is its probe time, 30–50 MB,
/// and a floor read from 2 MB shrank to ±1–2 % there, under bands that then
/// missed the truth by 3–6 % in 6 of the simulator's 56 estimates at 40 Gb/s,
/// "converged" (`sim run scenarios/fac2-40g.toml --seeds 10`, 757ba56).
pub(crate) fn sampled_floor(bytes: u64, default_budget: f64) -> f64 {
    let reference = default_budget.max(1.0);
    let scale = (reference / (bytes as f64).max(reference)).sqrt();
    (BAND_FLOOR * scale).max(MIN_FLOOR)
}
