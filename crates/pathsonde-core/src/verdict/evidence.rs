//! The run's own evidence that a host, not the path, shaped a measurement.
//!
//! Jin & Tierney (system capability effects, conclusion) ask tools to
//! "determine whether or not the measurement host is the bottleneck, and
//! report this fact when it is".  The capability figures of
//! [`super::judge`] come from short tests before the run and say little about
//! what paced trains reached; this module reads the trains themselves:
//!
//! - **sender pacing** — the rate each train left at (its send stamps)
//!   against its target, and how regularly its cars left;
//! - **receiver** — packets the receiving host dropped itself (socket
//!   overflow), which a method would otherwise read as the path's loss;
//! - **timing** — how far the arrival spacing of trains that crossed the path
//!   untouched strays from their send spacing: noise the hosts (or a delay
//!   line) add, which no method can tell from queueing.
//!
//! From these, [`assess`] says one of three things about an estimate: it is
//! the path's ([`Outcome::Path`], perhaps with a doubt that keeps it
//! unconverged), it is a host-limited lower bound ([`Outcome::LowerBound`],
//! never above what the trains showed the path carried), or there is no
//! estimate ([`Outcome::NoEstimate`]).  The runner ([`crate::runner::run`])
//! applies it to every method's answer on every path, so no method can
//! ignore it.  Pure functions over observations: no clock, no I/O.

pub use crate::estimate::host::{Figures, HostEvidence, Outcome};

use super::{rate_words, HostLimit, HostRole, Resource};
use crate::dispersion;
use crate::estimate::Estimate;
use crate::observation::Observation;
use crate::stats;
use crate::units::{BitRate, DurationNs};
use serde::{Deserialize, Serialize};

/// A train that left more than this fraction below its target shows the
/// sender's ceiling.
pub(crate) const SHORTFALL: f64 = 0.05;
/// The sender must have paced at least this fraction above the answer for a
/// train-based method to see the path above it; a ceiling closer to the
/// answer makes the answer the sender's.
pub(crate) const HEADROOM: f64 = 0.25;
/// Trains sent at the sender's ceiling that arrive at this share of their
/// rate or more barely loaded the path above A: the ceiling is near A, or
/// below it.
pub(crate) const CEILING_STRETCH: f64 = 0.9;
/// A train whose receiving rate is at least `1 − CARRIED` of its sending
/// rate, with no loss, crossed the path untouched.
pub(crate) const CARRIED: f64 = 0.02;
/// A train shorter than this says little about whether the path carried
/// it: over a few hundred microseconds the cross traffic a train meets
/// varies by tens of per cent (Poisson packets), so a short train above A
/// can pass untouched.
pub(crate) const MIN_CARRIED_SPAN: DurationNs = DurationNs::from_ms(1);
/// A train of this many packets or more averages enough cross traffic to
/// bound A however short it is in time: at 10 Gb/s a 167-packet train lasts
/// 0.3 ms and meets hundreds of cross packets, while a 6-packet jumbo train
/// at 1 Gb/s lasts 0.4 ms and meets a dozen.
pub(crate) const MIN_CARRIED_PACKETS: u64 = 100;
/// A train carried within [`CARRIED`] can still be up to a few per cent
/// above A (more on a heavily loaded link: `R − A ≤ C·CARRIED/(1 − CARRIED)`),
/// so a lower bound is taken this fraction below it.
pub(crate) const BOUND_MARGIN: f64 = 0.06;
/// A long train that arrived at least this much slower than it left, or
/// lost packets on the path, showed the path could not carry its rate.
pub(crate) const OVERLOADED: f64 = 0.1;
/// A run is irregularly paced when, on trains near the answer, the 90th
/// percentile of that stray (the median over those trains) exceeds this
/// share of the planned spacing: one car in ten left more than a whole
/// spacing off its plan.
pub(crate) const IRREGULAR_P90: f64 = 1.0;
/// Timing noise (p90 of the arrival-spacing error of car heads on untouched
/// trains) above this share of those trains' span makes the answer
/// doubtful: a train's rate is read over its span, so noise of 5 % of it
/// moves a reading by several per cent.
pub(crate) const NOISY: f64 = 0.05;

/// What one train showed of the hosts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TrainEvidence {
    pub train: u32,
    /// The rate the plan asked for (a schedule's nominal rate).
    pub target: BitRate,
    /// The rate the sender reached, from its own send stamps.
    pub sent: Option<BitRate>,
    /// The rate the train arrived at.
    pub received: Option<BitRate>,
    pub packets_sent: u64,
    pub packets_lost: u64,
    /// First send to last send.
    pub span: DurationNs,
    /// Packets the receiving host said it dropped itself.
    pub receiver_drops: Option<u64>,
    /// Whether the plan was a constant-rate train (a chirp's or a pair's
    /// rate is no single target).
    pub constant_rate: bool,
    /// 90th percentile of |achieved − planned| car spacing over the planned
    /// spacing; `None` under three cars.
    pub send_stray_p90: Option<f64>,
    /// 90th percentile of |arrival spacing − send spacing| between the
    /// first packets of consecutive cars.
    pub arrival_noise_p90: Option<DurationNs>,
}

impl TrainEvidence {
    /// Reads one observation.  Never panics; what cannot be read is `None`.
    pub fn of(obs: &Observation) -> TrainEvidence {
        let cars = dispersion::cars(obs);
        let planned: Vec<i64> = match &obs.schedule {
            Some(s) => s.cars.iter().map(|c| c.offset.ns()).collect(),
            None => (0..obs.spec.cars)
                .map(|k| obs.spec.car_offset(k).map_or(0, |d| d.ns()))
                .collect(),
        };
        // A receiver that bunches arrivals (interrupt coalescing) moves car
        // heads by up to its bunch period by design; the methods read such
        // trains at bunch ends (ICIM) and report the bunching themselves, so
        // it is not counted as timing noise here.
        let bunched = dispersion::coalescing(obs).is_some_and(|c| c.detected);
        let mut stray = Vec::new();
        let mut noise = Vec::new();
        for w in cars.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            let (Some(pa), Some(pb)) = (planned.get(a.car as usize), planned.get(b.car as usize))
            else {
                continue;
            };
            let plan_gap = (pb - pa) as f64;
            let sent_gap = b.first_sent.ns().saturating_sub(a.first_sent.ns()) as f64;
            if plan_gap > 0.0 {
                stray.push((sent_gap - plan_gap).abs() / plan_gap);
            }
            // Car heads: on a path with room for the train, a car's first
            // packet meets the queue its predecessor left drained, so the
            // heads arrive as they left, whatever a car's own packets do.
            if bunched {
                continue;
            }
            if let (Some(ra), Some(rb)) = (a.first_received, b.first_received) {
                let recv_gap = rb.ns().saturating_sub(ra.ns()) as f64;
                noise.push((recv_gap - sent_gap).abs());
            }
        }
        let p90 = |xs: &[f64]| {
            if xs.len() >= 2 {
                stats::quantile(xs, 0.9)
            } else {
                None
            }
        };
        TrainEvidence {
            train: obs.train,
            target: obs.spec.rate,
            sent: dispersion::sending_rate(obs).map(|f| f.rate),
            received: dispersion::receiving_rate(obs).map(|f| f.rate),
            packets_sent: obs.sent_packets(),
            packets_lost: obs.lost_packets(),
            span: obs.send_span(),
            receiver_drops: obs.receiver_drops,
            constant_rate: obs.schedule.is_none(),
            send_stray_p90: p90(&stray),
            arrival_noise_p90: p90(&noise).map(|ns| DurationNs::from_ns(ns as i64)),
        }
    }

    /// The train left more than [`SHORTFALL`] below its target.
    pub(crate) fn fell_short(&self) -> bool {
        self.constant_rate
            && self
                .sent
                .is_some_and(|s| s.bps() < self.target.bps() * (1.0 - SHORTFALL))
    }

    /// A train long enough to judge ([`MIN_CARRIED_SPAN`]) that the path
    /// clearly could not carry: it lost packets on the path (not at the
    /// receiving host) or arrived [`OVERLOADED`] slower than it left.  Its
    /// sending rate is then above A, by the fluid model and by any model
    /// of a FIFO queue.
    pub(crate) fn overloaded(&self) -> bool {
        let path_lost = self.path_lost();
        match (self.sent, self.received) {
            (Some(s), Some(r)) => {
                self.span >= MIN_CARRIED_SPAN
                    && (path_lost > 0 || r.bps() < s.bps() * (1.0 - OVERLOADED))
            }
            _ => false,
        }
    }

    /// Packets lost on the path: those lost less those the receiving host
    /// said it dropped itself.
    pub(crate) fn path_lost(&self) -> u64 {
        self.packets_lost
            .saturating_sub(self.receiver_drops.unwrap_or(0))
    }

    /// A train long enough to judge that arrived at under 1/(1 + HEADROOM)
    /// of its sending rate: the path held it back hard.  On a FIFO link of
    /// capacity C carrying X, a train sent at s > A leaves at sC/(s + X),
    /// which is below s/(1 + HEADROOM) only when s > A + HEADROOM·C, so
    /// the sender reached more than HEADROOM above A.
    pub(crate) fn held_back(&self) -> bool {
        match (self.sent, self.received) {
            (Some(s), Some(r)) => {
                self.span >= MIN_CARRIED_SPAN && r.bps() * (1.0 + HEADROOM) < s.bps()
            }
            _ => false,
        }
    }

    /// The train crossed the path untouched: nothing lost and it arrived
    /// within [`CARRIED`] of the rate it left at, or faster by less than
    /// [`OVERLOADED`] (timing).  A train that arrived much faster than it
    /// left was held by a queue and released in a bunch, which is not
    /// untouched: a jumbo lab run at 3abc0b1 bounded A at 297.8 Mb/s (truth
    /// 262) from a 6-packet train sent at 317 that arrived at 794.
    pub fn carried(&self) -> bool {
        match (self.sent, self.received) {
            (Some(s), Some(r)) => {
                self.packets_lost == 0
                    && r.bps() >= s.bps() * (1.0 - CARRIED)
                    && r.bps() <= s.bps() * (1.0 + OVERLOADED)
            }
            _ => false,
        }
    }

    /// Long enough to judge, and not carried untouched: it arrived more
    /// than [`CARRIED`] slower than it left or lost packets on the path.
    pub(crate) fn stretched(&self) -> bool {
        match (self.sent, self.received) {
            (Some(s), Some(r)) => {
                self.long_enough_to_bound()
                    && (self.path_lost() > 0 || r.bps() < s.bps() * (1.0 - CARRIED))
            }
            _ => false,
        }
    }

    /// Long enough, in time or in packets, for its passing untouched to
    /// say the path carries its rate rather than that the cross traffic
    /// paused.
    fn long_enough_to_bound(&self) -> bool {
        self.span >= MIN_CARRIED_SPAN || self.packets_sent >= MIN_CARRIED_PACKETS
    }
}

/// Every train of a run, as the runner saw them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunEvidence {
    pub trains: Vec<TrainEvidence>,
}

impl RunEvidence {
    pub fn observe(&mut self, obs: &Observation) {
        self.trains.push(TrainEvidence::of(obs));
    }
}

/// Trains near the answer: those sent within `[lo, hi]` times `a`.
fn near(
    trains: &[TrainEvidence],
    a: f64,
    lo: f64,
    hi: f64,
) -> impl Iterator<Item = &TrainEvidence> {
    trains.iter().filter(move |t| {
        t.sent
            .is_some_and(|s| s.bps() >= a * lo && s.bps() <= a * hi)
    })
}

/// Judges `estimate` by `evidence` (see the module docs).  `sender` is the
/// end that sent the probes (the client, for `abw`); the other received.
pub(crate) fn assess(
    estimate: &Estimate,
    evidence: &RunEvidence,
    sender: HostRole,
) -> HostEvidence {
    let receiver = sender.peer();
    let a = estimate.available.bps();
    let trains = &evidence.trains;
    let mut f = Figures {
        trains: trains.len(),
        ..Figures::default()
    };
    let fastest = trains
        .iter()
        .filter(|t| t.packets_sent > 1)
        .filter_map(|t| t.sent.map(|s| (t, s)))
        .max_by(|x, y| x.1.bps().total_cmp(&y.1.bps()));
    if let Some((t, s)) = fastest {
        f.fastest_target_bps = Some(t.target);
        f.fastest_sent_bps = Some(s);
        // Judged against the band's top, not the answer alone: an answer a
        // slow sender pulled low would otherwise leave it ample headroom.
        let top = estimate.high.map_or(a, |h| h.bps().max(a));
        if top > 0.0 {
            f.headroom = Some(s.bps() / top);
        }
    }
    f.sender_fell_short = trains.iter().any(TrainEvidence::fell_short);
    if let (true, Some((_, s))) = (f.sender_fell_short, fastest) {
        let ratios: Vec<f64> = trains
            .iter()
            .filter(|t| t.packets_sent >= 20)
            .filter_map(|t| match (t.sent, t.received) {
                (Some(x), Some(r)) if x.bps() >= 0.9 * s.bps() => Some(r.bps() / x.bps()),
                _ => None,
            })
            .collect();
        f.ceiling_stretch = stats::median(&ratios);
    }
    f.held_back_trains = trains
        .iter()
        .filter(|t| t.held_back() && t.sent.is_some_and(|s| s.bps() > a))
        .count();
    f.packets_lost = trains.iter().map(|t| t.packets_lost).sum();
    f.receiver_drops = trains
        .iter()
        .filter_map(|t| t.receiver_drops)
        .reduce(u64::saturating_add);
    // The median rate of the trains long enough to have been judged
    // untouched (none, no bound): the fastest one is the luckiest, met
    // while the cross traffic paused, and a short train says even less (a
    // jumbo lab run at 3abc0b1, 1 Gb/s at 70 %, passed 8-packet trains at
    // 671 Mb/s untouched for an A of 262).  A train the path
    // carried untouched at a rate where a long train was clearly
    // overloaded met a lull, not the path's A: a lab whose cross-traffic
    // source the CPU starved passed 33 KB trains at 297 Mb/s on a 300 Mb/s
    // link carrying 270, while 250 KB trains at 184-321 Mb/s lost 25-52 %,
    // and the bound said "at least 279 Mb/s" for an A of 21.
    let overloaded_at = trains
        .iter()
        .filter(|t| t.overloaded())
        .filter_map(|t| t.sent.map(BitRate::bps))
        .fold(f64::INFINITY, f64::min);
    let carried: Vec<f64> = trains
        .iter()
        .filter(|t| t.carried() && t.long_enough_to_bound())
        .filter_map(|t| t.sent.map(BitRate::bps))
        .filter(|s| *s < overloaded_at)
        .collect();
    f.carried_median_bps = stats::median(&carried).map(BitRate::from_bps);
    // A long train the path did not carry untouched (stretched beyond
    // CARRIED, or lost packets there) was sent at about A or above, in its
    // window; an untouched train faster than it may have met a quiet
    // stretch of cross traffic, so the bound stays below it too.  Two lab
    // runs at a445fd6 (1 Gb/s, 30 %, default ceiling) read A ≥ 690.8 and
    // ≥ 704.7 for truths of 688.0 and 697.6 from 166-packet trains at 769
    // and 750 Mb/s that crossed untouched, beside trains at 712 and 701
    // that arrived 3-4 % slow.
    f.stretched_at_bps = trains
        .iter()
        .filter(|t| t.stretched())
        .filter_map(|t| t.sent.map(BitRate::bps))
        .min_by(f64::total_cmp)
        .map(BitRate::from_bps);
    // Stray is read on constant-rate trains: a chirp's last gaps are meant
    // to be shorter than a sender can hold, and its method reads the
    // achieved stamps.
    let strays: Vec<f64> = near(trains, a, 0.7, 1.3)
        .filter(|t| t.constant_rate)
        .filter_map(|t| t.send_stray_p90)
        .collect();
    f.send_stray_p90 = stats::median(&strays);
    // Timing is read on constant-rate trains only: a chirp or a pair
    // stream is meant to be stretched within itself.
    let untouched: Vec<&TrainEvidence> = near(trains, a, 0.0, 1.0)
        .filter(|t| t.constant_rate && t.carried())
        .collect();
    let noise: Vec<f64> = untouched
        .iter()
        .filter_map(|t| t.arrival_noise_p90.map(|d| d.ns() as f64))
        .collect();
    let spans: Vec<f64> = untouched.iter().map(|t| t.span.ns() as f64).collect();
    f.train_span = stats::median(&spans).map(|ns| DurationNs::from_ns(ns as i64));
    f.timing_noise_p90 = stats::median(&noise).map(|ns| DurationNs::from_ns(ns as i64));

    let mut limits = Vec::new();
    let fix_pacing = "Use larger probes (--packet-size 9000 where the MTU allows), pin the sender to an idle core, or measure between hosts whose pacing exceeds the path.";
    // The sender's ceiling sits within HEADROOM of the answer's band, or
    // the trains it sent at its ceiling arrived barely stretched.
    // The sender's ceiling is what the fastest train that fell short of its
    // target reached: a train that reached its target shows no ceiling,
    // and a shortfall whose rate could not be read (an opening train lost
    // on a busy host) says nothing of where the sender tops out.
    let top = estimate.high.map_or(a, |h| h.bps().max(a));
    // A shortfall is a hiccup, not the ceiling, when at least half the
    // trains of as many packets or more that were asked as much or more
    // reached their target: a demo on a quiet lab (300 Mb/s, A 207) sent
    // one 44-packet near train at 208 of 240 Mb/s while four 167-packet
    // ones asked 233-276 reached them, and the rule called the host's
    // reach 208 and the answer a lower bound of 207.8, above the truth.
    // Short bursts are not compared with long trains (a host that bursts
    // 22 packets at 1 Gb/s may not hold 321 Mb/s over 165), and a sender
    // that missed a rate over most tries still has its ceiling there (the
    // 90 %-load lab run: two of three 166-packet trains at 321 Mb/s fell
    // short).
    let hiccup = |t: &TrainEvidence| {
        let peers: Vec<&TrainEvidence> = trains
            .iter()
            .filter(|u| u.sent.is_some() && u.packets_sent >= t.packets_sent)
            .filter(|u| u.target.bps() >= t.target.bps() * (1.0 - SHORTFALL))
            .collect();
        let met = peers.iter().filter(|u| !u.fell_short()).count();
        2 * met >= peers.len()
    };
    let ceiling = trains
        .iter()
        .filter(|t| t.packets_sent > 1 && t.fell_short())
        .filter_map(|t| t.sent.map(|s| (t, s)))
        .filter(|(t, _)| !hiccup(t))
        .max_by(|x, y| x.1.bps().total_cmp(&y.1.bps()));
    let ceiling_headroom = ceiling.filter(|_| top > 0.0).map(|(_, s)| s.bps() / top);
    // A shortfall where the answer needed the rate: a train asked for less
    // than HEADROOM above the band's top, sent short of it (and not as a
    // hiccup), and carried as sent, never loaded the path.  Such trains
    // decide whether the answer is the host's, whatever a short burst at a
    // far higher target reached: on the lab's shared cores a 22-packet
    // opening went out at 579 of 1000 Mb/s while 167-packet trains asked
    // 432-463 left at 333-353, crossed untouched, and the answer read 360
    // for an A of 633 with no limit named.  A train that lost packets on
    // the path did load it above A, whatever it fell short of: a jumbo lab
    // run at 3abc0b1 (1 Gb/s, 70 %) read "A ≥ 297.8 Mb/s" for an A of 262
    // from a 28-packet train sent at 708 of 747 Mb/s that lost 3.6 % there.
    let needed = trains
        .iter()
        .filter(|t| t.packets_sent > 1 && t.fell_short() && !hiccup(t))
        .filter(|t| t.path_lost() == 0)
        .filter(|t| t.target.bps() <= (1.0 + HEADROOM) * top)
        .filter_map(|t| match (t.sent, t.received) {
            (Some(x), Some(r)) if r.bps() >= CEILING_STRETCH * x.bps() => Some((t, x)),
            _ => None,
        })
        .max_by(|x, y| x.1.bps().total_cmp(&y.1.bps()));
    if let Some((t, s)) = needed.filter(|_| top > 0.0) {
        limits.push(HostLimit {
            host: sender,
            resource: Resource::Pacing,
            limit_bps: s,
            binds_result: true,
            why: format!(
                "The {sender} (sender) was asked for {} to probe above the answer ({}, band to {}) and sent only {} ({:.0} %), which the path carried untouched: its trains could not load the path above A, so the sender, not the path, may have set the answer.",
                rate_words(t.target), rate_words(estimate.available), rate_words(BitRate::from_bps(top)),
                rate_words(s), s.bps() / t.target.bps() * 100.0
            ),
            fix: Some(fix_pacing.into()),
        });
    } else if let (true, Some((t, s)), Some(h)) = (f.sender_fell_short, ceiling, ceiling_headroom) {
        let barely = f.ceiling_stretch.is_some_and(|r| r >= CEILING_STRETCH);
        // A ceiling near a wide band's top says nothing of the host when
        // the path held trains sent above the answer back hard (`held_back`)
        // at least twice: the sender then probed more than HEADROOM above
        // A, and the band's
        // width is the method's doubt, not the sender's reach.  (A CI run
        // at a31156a, idle 200 Mb/s, `--max-rate 20G`: a 21-packet opening
        // at 1.08 Gb/s, a FAC² band of ±360 % to 1.09 Gb/s, four long trains
        // at 217-447 Mb/s arriving at 41-73 % of their rate; the rule made
        // it "A ≥ 63.9 Mb/s" from the sender's pacing.)
        let probed_above = f.held_back_trains >= 2;
        if (h < 1.0 + HEADROOM && !probed_above) || barely {
            limits.push(HostLimit {
                host: sender,
                resource: Resource::Pacing,
                limit_bps: s,
                binds_result: true,
                why: {
                    let reach = if h >= 1.0 {
                        format!("only {:.0} % above the top of the answer's band", (h - 1.0) * 100.0)
                    } else {
                        format!("{:.0} % below the top of the answer's band", (1.0 - h) * 100.0)
                    };
                    let stretch = f.ceiling_stretch.map_or("an unknown share".into(), |r| format!("{:.0} %", r * 100.0));
                    let so = if barely {
                        "barely stretched, so they could not load the path clearly above A"
                    } else {
                        "and fewer than two long trains were held back hard by the path, so the band's upper part was never probed"
                    };
                    format!(
                        "The {sender} (sender) paced at most {} when asked for {} ({:.0} %); that is {reach} (answer {}), and the trains it sent at that ceiling arrived at {stretch} of their rate, {so}: the sender, not the path, may have set the answer.",
                        rate_words(s), rate_words(t.target), s.bps() / t.target.bps() * 100.0,
                        rate_words(estimate.available),
                    )
                },
                fix: Some(fix_pacing.into()),
            });
        }
    }
    // Cars near the answer left irregularly: a bursty sender queues its own
    // trains, which reads as a lower A.
    if let Some(p) = f.send_stray_p90.filter(|p| *p > IRREGULAR_P90) {
        if !limits
            .iter()
            .any(|l: &HostLimit| l.resource == Resource::Pacing)
        {
            limits.push(HostLimit {
                host: sender,
                resource: Resource::Pacing,
                limit_bps: estimate.available,
                binds_result: true,
                why: format!(
                    "The {sender} (sender) could not hold its car spacing near the answer: 10 % of its cars left more than {:.0} % off their planned spacing, so its trains met the path in bursts and queued themselves.",
                    p * 100.0
                ),
                fix: Some(fix_pacing.into()),
            });
        }
    }
    // The receiving host dropped packets: every train's loss is read as the
    // path's by some method (FAC²'s opening included), and a receiver that
    // drops may have pulled the answer itself down, so any train counts.
    let dropped_near: u64 = trains.iter().filter_map(|t| t.receiver_drops).sum();
    if dropped_near > 0 {
        limits.push(HostLimit {
            host: receiver,
            resource: Resource::Receiver,
            limit_bps: estimate.available,
            binds_result: true,
            why: format!(
                "The {receiver} (receiver) dropped {dropped_near} probe packet(s) itself (its socket overflowed): losses the host made, which read as the path's."
            ),
            fix: Some("Give the receiver an idle core and a larger socket buffer (net.core.rmem_max), or use larger probes.".into()),
        });
    }
    let noisy = f.timing_noise_ratio().is_some_and(|r| r > NOISY);
    if noisy {
        let (n, c) = (
            f.timing_noise_p90.unwrap_or_default(),
            f.train_span.unwrap_or_default(),
        );
        limits.push(HostLimit {
            host: receiver,
            resource: Resource::Timing,
            limit_bps: estimate.available,
            binds_result: false,
            why: format!(
                "Timing noise: trains that crossed the path untouched arrived with their car spacing off by {:.0} µs (p90), {:.1} % of their {:.0} µs span: the hosts' timing (scheduling, a delay line, the receive path) moves arrivals that much, so the band is doubtful.",
                n.ns() as f64 / 1e3, n.ns() as f64 / c.ns().max(1) as f64 * 100.0, c.ns() as f64 / 1e3
            ),
            fix: Some("Measure on quieter hosts, or with longer cars (--packet-size 9000 where the MTU allows).".into()),
        });
    }
    let binding = limits.iter().any(|l| l.binds_result);
    let outcome = if !binding {
        Outcome::Path
    } else {
        let bound = match (f.carried_median_bps, f.stretched_at_bps) {
            (Some(c), Some(s)) => Some(c.min(s)),
            (c, _) => c,
        };
        match bound {
            Some(c) if c.is_positive() => {
                let c = c.scale(1.0 - BOUND_MARGIN);
                Outcome::LowerBound {
                    bound_bps: if a > 0.0 {
                        c.min(estimate.available)
                    } else {
                        c
                    },
                }
            }
            _ => Outcome::NoEstimate,
        }
    };
    HostEvidence {
        outcome,
        limits,
        figures: f,
    }
}

/// Applies `evidence` to `estimate`: a lower bound replaces the band and
/// drops what the host's trains cannot support (capacity, cross traffic);
/// any binding limit or doubt clears `converged`.  `Err` carries the reason
/// when there is no estimate.
pub fn apply(mut e: Estimate, evidence: HostEvidence) -> Result<Estimate, String> {
    let binding: Vec<&HostLimit> = evidence.limits.iter().filter(|l| l.binds_result).collect();
    let said = |ls: &[&HostLimit]| {
        ls.iter()
            .map(|l| format!("{} {}: {}", l.host, l.resource, l.why))
            .collect::<Vec<_>>()
            .join(" ")
    };
    match evidence.outcome {
        Outcome::NoEstimate => {
            return Err(format!(
                "{}: the hosts limited the run and no train crossed the path untouched below the rates at which others were clearly overloaded, so nothing shows what the path carries. {}",
                e.method,
                said(&binding)
            ))
        }
        Outcome::LowerBound { bound_bps } => {
            e.notes.push(format!(
                "Host-limited: the path carries at least {} (the median rate of the trains that crossed it untouched, less 6 %, and no more than the method's {}); the method's band, capacity and cross traffic came from trains the host shaped and are withheld.",
                rate_words(bound_bps),
                rate_words(e.available)
            ));
            e.available = bound_bps;
            e.low = bound_bps;
            e.high = None;
            e.capacity = None;
            e.cross_traffic = None;
            e.converged = false;
            let first = binding[0];
            // The method's own finding stays with the notes.
            if let Some(own) = e.host_limited.take() {
                e.notes.push(format!("{}: {own}", e.method));
            }
            e.host_limited = Some(format!("{} {}: {}", first.host, first.resource, first.why));
        }
        Outcome::Path => {
            // A capacity the sender never came near is an extrapolation
            // from trains it could not pace.
            if let (true, Some(c), Some(s)) = (
                evidence.figures.sender_fell_short,
                e.capacity,
                evidence.figures.fastest_sent_bps,
            ) {
                if c.bps() > s.bps() * (1.0 + HEADROOM) {
                    e.notes.push(format!(
                        "Capacity withheld: the fit put it at {}, but the sender paced at most {}, so it is an extrapolation from trains the host could not pace (and so is the cross traffic).",
                        rate_words(c),
                        rate_words(s)
                    ));
                    e.capacity = None;
                    e.cross_traffic = None;
                }
            }
        }
    }
    for l in evidence.limits.iter().filter(|l| !l.binds_result) {
        e.converged = false;
        e.notes.push(l.why.clone());
    }
    e.host_evidence = Some(evidence);
    Ok(e)
}

/// The widest band (half-width over the estimate) a judged run may give and
/// still count as a measurement of the path.
pub(crate) const MAX_HONEST_HALF_WIDTH: f64 = 0.25;
/// How far a reported capacity may stray from the truth's.
pub(crate) const MAX_CAPACITY_ERROR: f64 = 0.20;

/// How a run's answer stands against the truth (lab, simulator, compare):
/// a measurement whose band holds the truth, an honest lower bound, or a
/// dishonest answer, with why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Honesty {
    /// A band that holds the truth, no wider than ±25 %, with a capacity (if
    /// any) within 20 % of the link's.
    Measured,
    /// A lower bound at or below the truth.
    LowerBound,
    /// A band that missed the truth or was too wide to claim it, a capacity
    /// far off, or a lower bound above the truth.
    Dishonest,
}

/// Judges `e` against the truth (`truth_c`: the tight link's IP-layer
/// capacity, when known), as the host issue's acceptance counts runs.  A run
/// with no estimate is honest by construction and never reaches here.
pub fn honesty(
    e: &Estimate,
    truth_a: BitRate,
    truth_c: Option<BitRate>,
) -> (Honesty, Option<String>) {
    let Some(high) = e.high else {
        return if e.low <= truth_a {
            (Honesty::LowerBound, None)
        } else {
            (
                Honesty::Dishonest,
                Some(format!(
                    "lower bound {} above the truth {}",
                    rate_words(e.low),
                    rate_words(truth_a)
                )),
            )
        };
    };
    if !e.band_holds(truth_a) {
        return (Honesty::Dishonest, Some("band missed the truth".into()));
    }
    let a = e.available.bps().max(1.0);
    let half = (high.bps() - e.low.bps()) / 2.0 / a;
    if half > MAX_HONEST_HALF_WIDTH {
        return (
            Honesty::Dishonest,
            Some(format!("band ±{:.0} % is wider than ±25 %", half * 100.0)),
        );
    }
    if let (Some(c), Some(t)) = (e.capacity, truth_c.filter(|t| t.is_positive())) {
        let err = (c.bps() - t.bps()) / t.bps();
        if err.abs() > MAX_CAPACITY_ERROR {
            return (
                Honesty::Dishonest,
                Some(format!(
                    "capacity {} is {:+.0} % off",
                    rate_words(c),
                    err * 100.0
                )),
            );
        }
    }
    (Honesty::Measured, None)
}

#[cfg(test)]
mod tests;
