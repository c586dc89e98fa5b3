//! `lab run --method hops`: a chain of routers (`crate::chain`) with a tight
//! link carrying cross traffic and an idle narrow link elsewhere, the `hops`
//! method run blind from the sender R times, and each run scored against
//! per-hop truth taken from the links' own counters over the run's window.
//!
//! Truth per link, per run: the capacity is the link's tbf rate (L2 bytes,
//! converted to IP bytes of the method's 500-byte load packets as
//! `truth::available_ip` converts the two-host lab's); the cross traffic is
//! what the link's cross source handed to the kernel over the run's window
//! (its send log, as the two-host lab's truth); the available bandwidth is
//! the first less the second.  The tbf's own byte and drop counters over the
//! same window are kept beside them as a check.  Unshaped links are veths,
//! gigabits per second on this box: they have no capacity the probes could
//! meet and take part in neither the tight nor the narrow link.
//!
//! The scoring follows docs/hops.md: a reported link `from_ttl → to_ttl`
//! names link `j` when `from_ttl < j ≤ to_ttl` and every hop strictly
//! between the two was reported silent (a silent hop makes the link span it,
//! and nothing else may).

use crate::chain::{cross_sink_addr, Chain, ChainLink, ChainSpec};
use crate::cross::CrossSource;
use crate::error::{LabError, Result};
use crate::topology::QdiscPlace;
use crate::truth::{self, QdiscSample};
use end_to_end::{EndToEndRun, EndToEndScore, EndToEndSummary};
use pathsonde_core::methods::hops::queue::QueueEstimate;
use pathsonde_core::methods::hops::{HopTrainSpec, HopsEstimate};
use pathsonde_core::traffic::CrossModel;
use pathsonde_core::units::serde_secs;
use pathsonde_core::{stats, BitRate, Bytes, DurationNs};
use pathsonde_net::{clock, Server, ServerConfig};
use queue::{QueueScore, QueueSummary};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// The method's name in `lab run --method`.
pub const METHOD: &str = "hops";

/// The tight link's tbf rate (Mb/s) unless the user names one.
pub const DEFAULT_TIGHT_MBPS: f64 = 100.0;
/// The narrow link's unless the user names one.
pub const DEFAULT_NARROW_MBPS: f64 = 60.0;
/// Cross traffic on the tight link unless the user names it: 60 % of
/// 100 Mb/s leaves about 40 Mb/s, below the narrow link's 60.
pub const DEFAULT_CROSS: &str = "poisson:60%";
/// The tbf queue limit of every shaped link but the tight one (whose limit
/// is the plan's `queue`): the two-host lab's default.
pub const LINK_QUEUE: Bytes = Bytes(256 * 1024);
/// The plan's `queue` must hold at least this: below two full frames a tbf
/// drops the probes' own trains.
pub const MIN_QUEUE: Bytes = Bytes(3028);
/// ... and at most this.
pub const MAX_QUEUE: Bytes = Bytes(64 * 1024 * 1024);
/// The pause between runs, so the routers' ICMP buckets refill (Linux: a
/// burst of 6, then 1 answer a second).
pub const GAP: DurationNs = DurationNs::from_secs(2);

/// The chain's name when the user gives none: short, since it is part of
/// every namespace's name, and different for each process.
pub fn default_name() -> String {
    format!("h{}", std::process::id() % 1_000_000)
}

/// A validated `lab run --method hops` (and `lab up --hops`, which keeps
/// it in the standing lab's request file).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HopsLabPlan {
    /// Namespaces are `pathsonde-<name>-<node>`.
    pub name: String,
    /// Routers between the sender and the receiver (links = routers + 1).
    pub routers: usize,
    /// The link (1-based, link `j` enters router `j`) carrying the cross traffic.
    pub tight_at: usize,
    /// The idle, slower link, if any.
    pub narrow_at: Option<usize>,
    /// tbf rates (L2, as the two-host lab's `--capacity`).
    pub tight_rate: BitRate,
    pub narrow_rate: BitRate,
    /// Cross traffic on the tight link, e.g. `poisson:60%` (of `tight_rate`).
    pub cross: String,
    /// Routers that never answer the sender.
    pub silent: Vec<usize>,
    pub runs: u32,
    /// The tight link's tbf queue limit (the other shaped links keep
    /// [`LINK_QUEUE`]): a short one is the queue `--queue-probe` looks for.
    pub queue: Bytes,
    /// Each run also sends `hops --queue`'s bursts, scored against the
    /// chain's queues (`queue::QueueScore`).
    pub queue_probe: bool,
    /// A pathsonde server on the receiver, and each run also measures the
    /// path end to end with the default method (`end_to_end`).
    pub end_to_end: bool,
    /// Probe the chain over IPv6 (its links dual-stack, the cross traffic
    /// still IPv4 on the same tbfs; `crate::chain`).
    pub ipv6: bool,
    /// Cross traffic before the first run.
    #[serde(with = "serde_secs")]
    pub settle: DurationNs,
    /// Pause between runs, so the routers' ICMP buckets refill.
    #[serde(with = "serde_secs")]
    pub gap: DurationNs,
    pub seed: u64,
}

impl HopsLabPlan {
    /// Checks the plan; the error is one line a user can act on.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let links = self.routers + 1;
        if !(1..=7).contains(&self.routers) {
            return Err(format!("--hops {}: give 1 to 7 routers", self.routers));
        }
        if !(1..=links).contains(&self.tight_at) {
            return Err(format!(
                "--tight-at {}: the chain's links are 1 to {links} (link j enters router j)",
                self.tight_at
            ));
        }
        if let Some(m) = self.narrow_at {
            if !(1..=links).contains(&m) {
                return Err(format!(
                    "--narrow-at {m}: the chain's links are 1 to {links} (link j enters router j)"
                ));
            }
            if m == self.tight_at {
                return Err(format!(
                    "--narrow-at {m} is the tight link: leave --narrow-at out for a path whose tight link is also its narrow link"
                ));
            }
            if self.narrow_rate >= self.tight_rate {
                return Err(format!(
                    "the narrow link ({}) must be slower than the tight link ({})",
                    self.narrow_rate, self.tight_rate
                ));
            }
        }
        if let Some(&k) = self.silent.iter().find(|&&k| k == 0 || k > self.routers) {
            return Err(format!(
                "--silent {k}: the chain's routers are 1 to {}",
                self.routers
            ));
        }
        if !(MIN_QUEUE..=MAX_QUEUE).contains(&self.queue) {
            return Err(format!(
                "--queue {} B: give {} B (two full frames) to 64 MiB; below that the tight link drops the probe trains themselves",
                self.queue.get(),
                MIN_QUEUE.get()
            ));
        }
        if !(1..=1000).contains(&self.runs) {
            return Err(format!("--runs {}: give 1 to 1000", self.runs));
        }
        if self.settle > DurationNs::from_secs(600) {
            return Err(format!("--settle {}: at most 600 s", self.settle));
        }
        let model = self.cross_model()?;
        if let (Some(x), Some(_)) = (model.mean_rate(), self.narrow_at) {
            let a = self.tight_rate - x;
            if a >= self.narrow_rate {
                return Err(format!(
                    "the tight link would have {a} available, not less than the narrow link's {}: give more cross traffic or a slower tight link",
                    self.narrow_rate
                ));
            }
        }
        if model.schedule(self.seed).is_none() {
            return Err(format!(
                "--cross {}: the hops lab takes scheduled UDP cross traffic (poisson, cbr, mix…), not TCP",
                self.cross
            ));
        }
        Ok(())
    }

    pub fn cross_model(&self) -> std::result::Result<CrossModel, String> {
        CrossModel::parse(&self.cross, self.tight_rate, Bytes(1500))
            .map_err(|e| format!("--cross {}: {e}", self.cross))
    }

    /// The chain this plan builds.
    pub fn spec(&self) -> ChainSpec {
        let links = (1..=self.routers + 1)
            .map(|j| ChainLink {
                rate: if j == self.tight_at {
                    Some(self.tight_rate)
                } else if Some(j) == self.narrow_at {
                    Some(self.narrow_rate)
                } else {
                    None
                },
                cross: j == self.tight_at,
                queue: (j == self.tight_at).then_some(self.queue),
            })
            .collect();
        ChainSpec {
            name: self.name.clone(),
            links,
            queue: LINK_QUEUE,
            silent: self.silent.clone(),
            ipv6: self.ipv6,
        }
    }
}

/// One link's truth over one run's window (or, in a standing chain's
/// truth file, over one 100 ms interval).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkTruth {
    /// Link `j` joins hop `j − 1` (0: the sender) and hop `j`.
    pub link: usize,
    /// tbf rate (L2); `None` for an unshaped veth.
    pub capacity_l2_bps: Option<BitRate>,
    /// The same in IP bytes of the method's load packets.
    pub capacity_ip_bps: Option<BitRate>,
    /// Cross traffic offered over the window (L2), from its source's log.
    pub cross_l2_bps: BitRate,
    /// Capacity less cross traffic, IP bytes of the load packets.
    pub available_ip_bps: Option<BitRate>,
    /// The tbf's own throughput over the window (L2; probes included) and
    /// its drops: a check on the two lines above.
    pub qdisc_l2_bps: Option<BitRate>,
    pub qdisc_drops: Option<u64>,
}

/// How the narrow link came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NarrowScore {
    /// The narrow link is the tight link: nothing to tell apart.
    SameAsTight,
    Named,
    /// `narrow_link` was `null`.
    NotToldApart,
    Wrong,
}

/// One run beside its truth.
#[derive(Debug, Clone, Serialize)]
pub struct HopsRunRecord {
    pub run: u32,
    pub truth: Vec<LinkTruth>,
    /// The link with the least available bandwidth (and least capacity).
    pub true_tight: usize,
    pub true_narrow: usize,
    /// What the method named (`from_ttl`, `to_ttl`).
    pub tight_named_as: Option<(u8, u8)>,
    pub tight_named: bool,
    pub narrow_named_as: Option<(u8, u8)>,
    pub narrow: NarrowScore,
    /// The tight link's `available`, its true A, (estimate − truth) / truth.
    pub available_bps: Option<BitRate>,
    pub truth_available_bps: Option<BitRate>,
    pub error: Option<f64>,
    pub probe_bytes: u64,
    #[serde(with = "serde_secs")]
    pub elapsed_s: DurationNs,
    pub silent_reported: Vec<u8>,
    /// Whether the silent hops reported are exactly the routers silenced.
    pub silent_right: bool,
    /// `--queue-probe`'s bursts beside the chain's queues.
    pub queue: Option<QueueScore>,
    /// `--end-to-end`'s measurement beside the truth.
    pub end_to_end: Option<EndToEndScore>,
    /// The run's result, exactly as `pathsonde hops --json` prints it.
    pub hops: serde_json::Value,
}

/// Over the runs.
#[derive(Debug, Clone, Serialize)]
pub struct HopsSummary {
    pub runs: usize,
    pub tight_named: usize,
    /// Runs whose narrow link differs from the tight link, and of those how
    /// many named it, could not tell it apart, or named a wrong link.
    pub narrow_differs: usize,
    pub narrow_named: usize,
    pub narrow_not_told_apart: usize,
    pub narrow_wrong: usize,
    pub silent_right: usize,
    pub median_abs_error: Option<f64>,
    pub p90_abs_error: Option<f64>,
    pub median_probe_bytes: Option<f64>,
    pub median_elapsed_s: Option<f64>,
    /// Over the runs `--queue-probe` scored.
    pub queue: Option<QueueSummary>,
    /// Over the runs `--end-to-end` scored.
    pub end_to_end: Option<EndToEndSummary>,
}

/// `lab run --method hops`'s report.
#[derive(Debug, Clone, Serialize)]
pub struct HopsLabReport {
    pub method: &'static str,
    pub plan: HopsLabPlan,
    /// Where each router answers from, and the far end.
    pub routers: Vec<String>,
    pub target: String,
    pub runs: Vec<HopsRunRecord>,
    pub summary: Option<HopsSummary>,
    /// Runs that failed, and other notes.
    pub notes: Vec<String>,
}

/// One blind run of the method, as the CLI gives it back.
pub struct Measured {
    pub estimate: HopsEstimate,
    pub elapsed: DurationNs,
    /// The `pathsonde hops --json` object.
    pub json: serde_json::Value,
    /// `hops --queue`'s finding, when asked for.
    pub queue: Option<QueueEstimate>,
    /// The end-to-end measurement, when asked for.
    pub end_to_end: Option<EndToEndRun>,
}

/// Runs the method: given the sender's namespace and the far end.
pub type Measure<'a> = dyn FnMut(&str, SocketAddr) -> std::result::Result<Measured, String> + 'a;

/// Whether a reported link `from → to` names link `j`: the link spans `j`
/// and only silent hops lie strictly between its ends.
pub fn names_link(from: u8, to: u8, j: usize, silent: &[u8]) -> bool {
    let (from, to) = (usize::from(from), usize::from(to));
    from < j && j <= to && (from + 1..to).all(|h| silent.iter().any(|&s| usize::from(s) == h))
}

/// The links with the least available bandwidth and the least capacity
/// among the shaped ones (ties to the earlier link).
pub fn true_links(truth: &[LinkTruth]) -> Option<(usize, usize)> {
    let least = |f: &dyn Fn(&LinkTruth) -> Option<f64>| {
        truth
            .iter()
            .filter_map(|l| f(l).map(|v| (l.link, v)))
            .fold(None, |best: Option<(usize, f64)>, (j, v)| match best {
                Some((_, b)) if b <= v => best,
                _ => Some((j, v)),
            })
            .map(|(j, _)| j)
    };
    Some((
        least(&|l| l.available_ip_bps.map(|a| a.bps()))?,
        least(&|l| l.capacity_l2_bps.map(|c| c.bps()))?,
    ))
}

/// Scores one estimate against its truth.
pub fn score(
    run: u32,
    truth: Vec<LinkTruth>,
    m: &Measured,
    silenced: &[usize],
) -> Option<HopsRunRecord> {
    let (tt, tn) = true_links(&truth)?;
    let e = &m.estimate;
    let tight = e.tight_link.as_ref();
    let tight_named_as = tight.map(|t| (t.from_ttl, t.to_ttl));
    let tight_named = tight_named_as.is_some_and(|(f, t)| names_link(f, t, tt, &e.silent));
    let narrow_named_as = e.narrow_link.as_ref().map(|n| (n.from_ttl, n.to_ttl));
    let narrow = match narrow_named_as {
        _ if tn == tt => NarrowScore::SameAsTight,
        None => NarrowScore::NotToldApart,
        Some((f, t)) if names_link(f, t, tn, &e.silent) => NarrowScore::Named,
        Some(_) => NarrowScore::Wrong,
    };
    let truth_a = truth[tt - 1].available_ip_bps;
    let available = tight.map(|t| t.available);
    let error = match (available, truth_a) {
        (Some(a), Some(t)) if t.bps() > 0.0 => Some((a.bps() - t.bps()) / t.bps()),
        _ => None,
    };
    let mut want: Vec<u8> = silenced.iter().map(|&k| k as u8).collect();
    want.sort_unstable();
    let mut got = e.silent.clone();
    got.sort_unstable();
    Some(HopsRunRecord {
        run,
        truth,
        true_tight: tt,
        true_narrow: tn,
        tight_named_as,
        tight_named,
        narrow_named_as,
        narrow,
        available_bps: available,
        truth_available_bps: truth_a,
        error,
        probe_bytes: e.probe_bytes.get(),
        elapsed_s: m.elapsed,
        silent_reported: e.silent.clone(),
        silent_right: got == want,
        queue: None,
        end_to_end: None,
        hops: m.json.clone(),
    })
}

/// The summary over scored runs (`None` with none).
pub fn summarise(runs: &[HopsRunRecord]) -> Option<HopsSummary> {
    if runs.is_empty() {
        return None;
    }
    let count = |f: &dyn Fn(&HopsRunRecord) -> bool| runs.iter().filter(|r| f(r)).count();
    let errs: Vec<f64> = runs.iter().filter_map(|r| r.error.map(f64::abs)).collect();
    let bytes: Vec<f64> = runs.iter().map(|r| r.probe_bytes as f64).collect();
    let secs: Vec<f64> = runs.iter().map(|r| r.elapsed_s.secs_f64()).collect();
    Some(HopsSummary {
        runs: runs.len(),
        tight_named: count(&|r| r.tight_named),
        narrow_differs: count(&|r| r.narrow != NarrowScore::SameAsTight),
        narrow_named: count(&|r| r.narrow == NarrowScore::Named),
        narrow_not_told_apart: count(&|r| r.narrow == NarrowScore::NotToldApart),
        narrow_wrong: count(&|r| r.narrow == NarrowScore::Wrong),
        silent_right: count(&|r| r.silent_right),
        median_abs_error: stats::median(&errs),
        p90_abs_error: stats::quantile(&errs, 0.9),
        median_probe_bytes: stats::median(&bytes),
        median_elapsed_s: stats::median(&secs),
        queue: queue::summarise(runs),
        end_to_end: end_to_end::summarise(runs),
    })
}

/// The IP bytes of the method's load packets: what its rates count, and so
/// the size the truth is converted to.
fn load_size() -> Bytes {
    HopTrainSpec::pathneck_default().load_size
}

fn place(spec: &ChainSpec, j: usize) -> QdiscPlace {
    QdiscPlace {
        ns: spec.node(j - 1),
        dev: "fwd".into(),
    }
}

/// Each link's truth over `[from, to]`.
pub(crate) fn link_truth(
    spec: &ChainSpec,
    cross_at: usize,
    logs: &[Vec<truth::LogPoint>],
    window: (pathsonde_core::TimeNs, pathsonde_core::TimeNs),
    before: &[(usize, QdiscSample)],
    after: &[(usize, QdiscSample)],
) -> Vec<LinkTruth> {
    let s = load_size().get() as f64;
    let to_ip = |r: BitRate| r.scale(s / (s + crate::topology::L2_HEADER as f64));
    spec.links
        .iter()
        .enumerate()
        .map(|(idx, l)| {
            let j = idx + 1;
            let cross_l2 = if j == cross_at {
                truth::cross_l2_rate(logs, window.0, window.1).unwrap_or(BitRate::ZERO)
            } else {
                BitRate::ZERO
            };
            let pair = (
                before.iter().find(|(k, _)| *k == j).map(|x| x.1),
                after.iter().find(|(k, _)| *k == j).map(|x| x.1),
            );
            let (qdisc_l2, drops) = match pair {
                (Some(a), Some(b)) => (
                    BitRate::from_bytes_per(
                        Bytes(b.bytes.saturating_sub(a.bytes)),
                        DurationNs::from_ns(b.at_ns - a.at_ns),
                    ),
                    Some(b.drops.saturating_sub(a.drops)),
                ),
                _ => (None, None),
            };
            LinkTruth {
                link: j,
                capacity_l2_bps: l.rate,
                capacity_ip_bps: l.rate.map(to_ip),
                cross_l2_bps: cross_l2,
                available_ip_bps: l
                    .rate
                    .map(|c| truth::available_ip(c, cross_l2, load_size())),
                qdisc_l2_bps: qdisc_l2,
                qdisc_drops: drops,
            }
        })
        .collect()
}

/// Every shaped link's tbf counters now.
pub(crate) fn read_all(spec: &ChainSpec) -> Vec<(usize, QdiscSample)> {
    spec.links
        .iter()
        .enumerate()
        .filter(|(_, l)| l.rate.is_some())
        .filter_map(|(idx, _)| {
            truth::read_qdisc(&place(spec, idx + 1))
                .ok()
                .map(|s| (idx + 1, s))
        })
        .collect()
}

/// Starts the plan's cross traffic on its tight link of the built chain.
pub(crate) fn start_cross(plan: &HopsLabPlan, spec: &ChainSpec) -> Result<CrossSource> {
    let model = plan.cross_model().map_err(LabError::Spec)?;
    let schedule = model
        .schedule(plan.seed)
        .ok_or_else(|| LabError::Spec(format!("--cross {}: no schedule", plan.cross)))?;
    CrossSource::udp(
        &spec.cross_source(plan.tight_at),
        cross_sink_addr(plan.tight_at),
        Box::new(schedule.map(|p| (p.at, p.size))),
    )
}

/// Builds the chain once, starts the cross traffic, runs `measure` the
/// plan's number of times (each scored as it ends and passed to
/// `progress`), and removes everything, whatever happens.  The chain's
/// namespaces are in `crate::registry`, so the CLI's signal handler removes
/// them on Ctrl-C too.
pub fn run(
    plan: &HopsLabPlan,
    measure: &mut Measure<'_>,
    progress: &mut dyn FnMut(&HopsRunRecord),
) -> Result<HopsLabReport> {
    plan.validate().map_err(LabError::Spec)?;
    let chain = Chain::build(plan.spec())?;
    let spec = chain.spec.clone();
    let mut cross = start_cross(plan, &spec)?;
    // The far end's pathsonde server, on the two-host lab's port, for the
    // end-to-end measurement `pathsonde hops` makes when one answers.
    let server = if plan.end_to_end {
        let addr = SocketAddr::new(chain.receiver_in(plan.ipv6), crate::live::SERVER_PORT);
        Some(crate::netns::run_in(
            &spec.node(plan.routers + 1),
            move || Ok(Server::bind(ServerConfig::new(addr))?.spawn()?),
        )?)
    } else {
        None
    };
    std::thread::sleep(plan.settle.to_std());
    let target = SocketAddr::new(
        chain.receiver_in(plan.ipv6),
        pathsonde_net::hops::DEFAULT_PORT,
    );
    let mut report = HopsLabReport {
        method: METHOD,
        plan: plan.clone(),
        routers: (1..=plan.routers)
            .map(|k| chain.router_in(k, plan.ipv6).to_string())
            .collect(),
        target: target.to_string(),
        runs: Vec::new(),
        summary: None,
        notes: Vec::new(),
    };
    for run in 1..=plan.runs {
        if run > 1 {
            std::thread::sleep(plan.gap.to_std());
        }
        let before = read_all(&spec);
        let from = clock::monotonic();
        let got = measure(&spec.node(0), target);
        let to = clock::monotonic();
        let after = read_all(&spec);
        let m = match got {
            Ok(m) => m,
            Err(e) => {
                report.notes.push(format!("run {run}: {e}"));
                continue;
            }
        };
        let logs = vec![cross.log.points()];
        let truth = link_truth(&spec, plan.tight_at, &logs, (from, to), &before, &after);
        match score(run, truth, &m, &plan.silent) {
            Some(mut rec) => {
                rec.queue = m
                    .queue
                    .as_ref()
                    .and_then(|q| queue::score(&spec, q, &m.estimate.silent));
                rec.end_to_end = m
                    .end_to_end
                    .as_ref()
                    .map(|e| end_to_end::score(e, plan.tight_rate, &logs));
                progress(&rec);
                report.runs.push(rec);
            }
            None => report
                .notes
                .push(format!("run {run}: no shaped link to score against")),
        }
    }
    if let Err(e) = cross.stop() {
        report.notes.push(format!("cross traffic: {e}"));
    }
    if let Some(Err(e)) = server.map(|s| s.stop()) {
        report.notes.push(format!("server: {e}"));
    }
    drop(chain);
    report.summary = summarise(&report.runs);
    Ok(report)
}

pub mod end_to_end;
pub mod queue;
#[cfg(test)]
mod tests;
