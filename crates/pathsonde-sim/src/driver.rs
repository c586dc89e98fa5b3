//! Runs measurements over a simulated path and puts the truth beside them.
//!
//! [`run_method`] runs any pathsonde-core method (built by name through
//! the registry, so methods added later need no change here) through core's
//! one runner over the simulator seen as a [`ProbePath`] (`SimPath`): each
//! plan's cars go out through the sender host's timing model, the sim runs
//! until every probe packet has been received or dropped, and the method
//! observes the stamps.  When the method finishes, the truth is the
//! path's available bandwidth over the estimate's window (first probe sent
//! to last probe received): the least, over the links, of capacity minus the
//! cross traffic offered to the link in that window.  Then a fresh method
//! starts, until the scenario's duration is used up.
//!
//! [`run_tcp`] runs the scenario's TCP flows (with or without ICIM) and
//! reports their throughput and every ICIM result beside its truth.

use crate::engine::TcpStats;
use crate::engine::{Sim, SimError, NEVER};
use crate::icim::IcimResult;
use crate::scenario::Scenario;
use crate::time::{secs_f64, Ps};
use pathsonde_core::accuracy::{Accuracy, Score, Scored};
use pathsonde_core::methods::registry::{self, MethodSettings};
use pathsonde_core::path::HostModel;
use pathsonde_core::runner::{self, Limits, RunError};
use pathsonde_core::{
    BitRate, ClockInfo, ClockSource, DurationNs, Estimate, Observation, PacketRecord, ProbePath,
    ProbePlan,
};

/// One finished measurement beside its truth.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MethodSample {
    pub index: u32,
    /// First probe sent (simulated time; JSON `start_s`, seconds).
    #[serde(rename = "start_s", serialize_with = "secs_f64")]
    pub start: Ps,
    /// Last probe received, or sent if none arrived (JSON `end_s`, seconds).
    #[serde(rename = "end_s", serialize_with = "secs_f64")]
    pub end: Ps,
    pub estimate: Option<Estimate>,
    /// Available bandwidth over `[start, end]` at the tight link.
    pub truth: BitRate,
    pub tight_link: usize,
    /// `(estimate − truth) / truth`; `None` without an estimate.
    pub relative_error: Option<f64>,
    /// Whether the estimate's band held the truth; `None` without an estimate.
    pub in_band: Option<bool>,
    pub plans: u32,
    pub probe_packets: u64,
    /// Why there is no estimate, when there is none.
    pub notes: Vec<String>,
}

/// Everything [`run_method`] measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MethodRun {
    pub method: String,
    pub seed: u64,
    /// What every measurement's method was told.
    pub settings: MethodSettings,
    pub samples: Vec<MethodSample>,
    /// Simulated time run (JSON `simulated_s`, seconds).
    #[serde(rename = "simulated_s", serialize_with = "secs_f64")]
    pub simulated: Ps,
    pub events: u64,
    pub packet_events: u64,
    /// (interrupts, packets) of the receiver's NIC.
    pub receiver_nic: (u64, u64),
}

impl MethodRun {
    /// The samples' accuracy, by core's one definition.
    pub fn accuracy(&self) -> Accuracy {
        accuracy_of(&self.samples)
    }
}

/// Accuracy over `samples` (core's [`Accuracy`]).
pub fn accuracy_of<'a>(samples: impl IntoIterator<Item = &'a MethodSample>) -> Accuracy {
    Accuracy::of(samples.into_iter().map(|s| {
        Scored {
            score: s
                .relative_error
                .zip(s.in_band)
                .map(|(error, in_band)| Score {
                    error,
                    in_band: Some(in_band),
                }),
            drops_caused: None,
        }
    }))
}

/// What a run may be told besides its scenario.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Method name (overrides the scenario's).
    pub method: Option<String>,
    /// Stop after this many estimates (default: as many as the duration holds).
    pub max_estimates: Option<u32>,
    /// The tight link's capacity, only when the user says it
    /// (`sim run --known-capacity`).  Methods run blind otherwise: the
    /// scenario's links are the simulator's truth, never told to a method.
    pub known_capacity: Option<BitRate>,
}

/// What every method in a run is told: the scenario's `max_rate`, else the
/// sender's own access link (its NIC's line rate, which the sending host
/// knows; never a link further along), the probe size, and the user's
/// known capacity, if any.
fn settings_for(
    scn: &Scenario,
    spec: &crate::scenario::MethodSpec,
    opts: &RunOptions,
) -> MethodSettings {
    MethodSettings {
        max_bytes: None,
        precision: None,
        max_rate: spec.max_rate.unwrap_or(scn.links[0].rate),
        packet_size: spec.packet_size,
        clock_resolution: DurationNs::from_ns(1),
        known_capacity: opts.known_capacity,
    }
}

/// Runs the scenario's method (or `opts.method`) repeatedly for the
/// scenario's duration.  `progress` is told the fraction done.
pub fn run_method(
    scn: &Scenario,
    seed: u64,
    opts: &RunOptions,
    progress: &mut dyn FnMut(f64),
) -> Result<MethodRun, SimError> {
    let spec = scn.method.clone().unwrap_or(crate::scenario::MethodSpec {
        name: "fac2".into(),
        max_rate: None,
        packet_size: scn.mtu,
        gap: Ps::MS,
        max_plans: 200,
    });
    let name = opts.method.clone().unwrap_or(spec.name.clone());
    let mut sim = Sim::new(scn, seed)?;
    let settings = settings_for(scn, &spec, opts);
    let clock = ClockInfo {
        source: ClockSource::Simulated,
        resolution: DurationNs::from_ns(1),
    };
    let mut samples = Vec::new();
    let mut index = 0;
    while sim.now() < scn.duration {
        if opts.max_estimates.is_some_and(|m| index >= m) {
            break;
        }
        let method_name: registry::MethodName = name
            .parse()
            .map_err(|e: registry::UnknownMethod| SimError::Plan(e.to_string()))?;
        let mut method = registry::build(method_name, &settings);
        let before = sim.now();
        let mut path = SimPath {
            sim: &mut sim,
            gap: spec.gap,
            end: scn.duration + Ps::from_secs(10),
            clock,
            first_send: NEVER,
            last_seen: Ps::ZERO,
        };
        let limits = Limits::plans(spec.max_plans);
        // Hosts that cannot keep up wrap the path (core's host model), so
        // the scenario's hosts shape what the links carry, as on a real host.
        let run = match scn.host_limits(seed ^ (index as u64).wrapping_mul(0x9E37_79B9)) {
            Some(hosts) => runner::run(
                method.as_mut(),
                &mut HostModel::new(&mut path, hosts),
                limits,
                &mut |_| {},
            ),
            None => runner::run(method.as_mut(), &mut path, limits, &mut |_| {}),
        }
        .map_err(|e| match e {
            RunError::Path(e) => e,
            RunError::Unusable(why) => SimError::Plan(why.to_string()),
            lost @ RunError::ProbesLost { .. } => SimError::Plan(lost.to_string()),
        })?;
        let (first_send, last_seen) = (path.first_send, path.last_seen);
        let plans = run.cost.trains;
        let packets = run.cost.packets;
        let estimate = run.estimate;
        let (t0, t1) = if first_send == NEVER {
            (before, sim.now())
        } else {
            (first_send, last_seen.max(first_send + Ps::from_ps(1)))
        };
        let (truth, tight_link) = sim.path_available(t0, t1);
        let score = estimate.as_ref().and_then(|e| Score::of(e, truth));
        let notes = match run.refused {
            Some(why) => vec![why],
            None => run.notes,
        };
        let in_band = estimate.as_ref().map(|e| e.band_covers(truth));
        let relative_error = score.map(|s| s.error);
        samples.push(MethodSample {
            in_band,
            index,
            start: t0,
            end: t1,
            estimate,
            truth,
            tight_link,
            relative_error,
            plans,
            probe_packets: packets,
            notes,
        });
        index += 1;
        progress((sim.now().as_secs_f64() / scn.duration.as_secs_f64()).min(1.0));
        if plans == 0 {
            // A method that asks for nothing would loop forever.
            break;
        }
    }
    Ok(MethodRun {
        method: name,
        seed,
        settings,
        samples,
        simulated: sim.now(),
        events: sim.events(),
        packet_events: sim.packet_events(),
        receiver_nic: sim.nic_counts(1),
    })
}

/// The simulator seen as a [`ProbePath`]: each plan's cars go out through the
/// sender host's timing model `gap` after the path went quiet, and the sim
/// runs until every probe packet has been received or dropped.  It keeps the
/// window the probes occupied (first send to last event, picoseconds) for the
/// truth.
struct SimPath<'a> {
    sim: &'a mut Sim,
    gap: Ps,
    /// Simulated time after which the path carries nothing more.
    end: Ps,
    clock: ClockInfo,
    first_send: Ps,
    last_seen: Ps,
}

impl ProbePath for SimPath<'_> {
    type Error = SimError;

    fn carry(&mut self, plan: &ProbePlan, index: u32) -> Result<Observation, SimError> {
        let sched = plan
            .schedule()
            .ok_or_else(|| SimError::Plan("no probe to send: the plan is Done".into()))?;
        let start = self.sim.now() + self.gap;
        let last_car = self.sim.schedule_probe(&sched, start);
        self.sim.run_probe(last_car + Ps::from_secs(10));
        let pr = &self.sim.probe;
        let mut records = Vec::with_capacity(pr.sent.len());
        for (i, (&s, &r)) in pr.sent.iter().zip(&pr.recv).enumerate() {
            self.first_send = self.first_send.min(s);
            self.last_seen = self.last_seen.max(if r == NEVER { s } else { r });
            records.push(PacketRecord {
                seq: i as u32,
                car: pr.car_of[i],
                size: sched.packet_size,
                sent: s.to_time_ns(),
                received: (r != NEVER).then(|| r.to_time_ns()),
            });
        }
        Ok(Observation {
            train: index,
            spec: sched.summary(),
            schedule: matches!(plan, ProbePlan::Schedule(_)).then(|| sched.clone()),
            packets: records,
            send_clock: self.clock,
            recv_clock: self.clock,
            receiver_drops: None,
        })
    }

    fn exhausted(&self) -> bool {
        self.sim.now() >= self.end
    }
}

/// One ICIM result beside the truth over its window.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IcimSample {
    pub conn: usize,
    pub result: IcimResult,
    /// The result's window (JSON `started_s`, `at_s`: seconds).
    #[serde(rename = "started_s", serialize_with = "secs_f64")]
    pub started: Ps,
    #[serde(rename = "at_s", serialize_with = "secs_f64")]
    pub at: Ps,
    pub truth: BitRate,
}

/// What the TCP flows did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TcpRun {
    pub seed: u64,
    /// Throughput of each connection over `[warmup, duration]`.
    pub throughput_bps: Vec<BitRate>,
    pub conns: Vec<TcpStats>,
    pub icim: Vec<IcimSample>,
    /// JSON `warmup_s`, `simulated_s`: seconds.
    #[serde(rename = "warmup_s", serialize_with = "secs_f64")]
    pub warmup: Ps,
    #[serde(rename = "simulated_s", serialize_with = "secs_f64")]
    pub simulated: Ps,
    pub events: u64,
    /// (interrupts, packets) of the sender's NIC (ACKs).
    pub sender_nic: (u64, u64),
}

/// Runs the scenario's TCP flows for its duration; throughput is counted
/// after `warmup`.
pub fn run_tcp(
    scn: &Scenario,
    seed: u64,
    warmup: Ps,
    progress: &mut dyn FnMut(f64),
) -> Result<TcpRun, SimError> {
    let mut sim = Sim::new(scn, seed)?;
    let warmup = warmup.min(scn.duration);
    let step = (scn.duration / 100).max(Ps::MS);
    let mut t = Ps::ZERO;
    let mut base: Option<Vec<u64>> = None;
    while t < scn.duration {
        t = (t + step).min(scn.duration);
        if base.is_none() && t > warmup {
            sim.run_until(warmup);
            base = Some(sim.tcp.iter().map(|c| c.snd_una).collect());
        }
        sim.run_until(t);
        progress(t.as_secs_f64() / scn.duration.as_secs_f64());
    }
    let base = base.unwrap_or_else(|| vec![0; sim.tcp.len()]);
    let span = (scn.duration - warmup).as_secs_f64().max(1e-12);
    let mss_bits = f64::from(sim.mss) * 8.0;
    let throughput_bps = sim
        .tcp
        .iter()
        .zip(&base)
        .map(|(c, b)| BitRate::from_bps((c.snd_una - b) as f64 * mss_bits / span))
        .collect();
    let mut icim = Vec::new();
    for (i, c) in sim.tcp.iter().enumerate() {
        if let Some(m) = &c.icim {
            for r in &m.results {
                let (truth, _) =
                    sim.path_available(r.started, r.at.max(r.started + Ps::from_ps(1)));
                icim.push(IcimSample {
                    conn: i,
                    result: *r,
                    started: r.started,
                    at: r.at,
                    truth,
                });
            }
        }
    }
    Ok(TcpRun {
        seed,
        throughput_bps,
        conns: sim.tcp_stats(),
        icim,
        warmup,
        simulated: sim.now(),
        events: sim.events(),
        sender_nic: sim.nic_counts(0),
    })
}
