//! `lab run --method hops`: a chain of routers with a tight link carrying
//! cross traffic and an idle narrow link, the `hops` method run blind from
//! the sender through the same code as `pathsonde hops`, and each run scored
//! against the links' own truth (`pathsonde_lab::hops_lab`; docs/hops.md).

use super::{CapacityFlags, PathArgs};
use crate::settings::AbwOptions;
use crate::{usage, Failure};
use clap::Args;
use pathsonde_core::methods::hops::end_to_end::compare;
use pathsonde_core::methods::hops::{HopsConfig, TightLink};
use pathsonde_core::BitRate;
use pathsonde_lab::hops_lab::end_to_end::EndToEndRun;
use pathsonde_lab::hops_lab::{self, HopsLabPlan, HopsRunRecord, Measured};
use pathsonde_lab::live::SERVER_PORT;
use pathsonde_render::hops::end_to_end::EndToEnd;
use pathsonde_render::hops_lab::{describe, run_line, start_line, summary_line, text};
use std::net::SocketAddr;

/// The chain's shape, as `lab run --method hops`, `lab up --hops` and
/// `compare --hops` take it (one set of flags, one help text).
#[derive(Args, Clone, Default)]
pub struct ChainFlags {
    /// A chain of N routers between sender and receiver, 1..7 (it has one
    /// link more), instead of the two-host path: `lab run --method hops`,
    /// `lab up`, and `compare`, whose rows then say whether `hops` found the
    /// tight link's hop.
    #[arg(long = "hops", value_name = "N")]
    pub routers: Option<usize>,
    /// With --hops: the link carrying the cross traffic (link K enters
    /// router K; the receiver's link is N+1); --capacity is its tbf rate
    /// [default: 100mbit] and --cross its load [default: poisson:60%].
    #[arg(long, value_name = "K")]
    pub tight_at: Option<usize>,
    /// With --hops: an idle, slower link (--narrow is its tbf rate
    /// [default: 60mbit]); leave out for a path whose tight link is also
    /// its narrow link.
    #[arg(long, value_name = "M")]
    pub narrow_at: Option<usize>,
    /// With --hops: routers that never answer the sender, e.g. --silent 1
    /// or --silent 1,3.
    #[arg(long, value_name = "R", value_delimiter = ',')]
    pub silent: Vec<usize>,
    /// With --hops: probe the chain over IPv6 (every link is also given an
    /// IPv6 subnet; the cross traffic stays IPv4 and shares the same tbfs).
    #[arg(long)]
    pub ipv6: bool,
}

impl ChainFlags {
    /// Whether any chain flag was given.
    pub fn any(&self) -> bool {
        self.routers.is_some()
            || self.tight_at.is_some()
            || self.narrow_at.is_some()
            || !self.silent.is_empty()
            || self.ipv6
    }
}

/// The chain `lab run --method hops` and `lab up --hops` build, and what
/// `lab run` measures on it beyond the hop list.
#[derive(Args, Clone, Default)]
pub struct HopsLabFlags {
    #[command(flatten)]
    pub chain: ChainFlags,
    /// With --method hops: each run also sends `hops --queue`'s bursts
    /// (each hop's largest loss-free burst), scored against the chain's
    /// shortest queue; --queue is the tight link's tbf limit (the other
    /// shaped links keep 256 KiB).
    #[arg(long)]
    pub queue_probe: bool,
    /// With --method hops: a pathsonde server on the receiver, and each run
    /// also measures the path end to end with the default method (as
    /// `pathsonde hops` does when the far end runs one), scored against
    /// the tight link's truth.
    #[arg(long)]
    pub end_to_end: bool,
}

impl HopsLabFlags {
    pub fn any(&self) -> bool {
        self.chain.any() || self.queue_probe || self.end_to_end
    }
}

/// The plan from the flags, or the one line that says what is wrong.
fn plan(
    path: &PathArgs,
    runs: u32,
    opts: &AbwOptions,
    flags: &HopsLabFlags,
    capacity: &CapacityFlags,
) -> Result<HopsLabPlan, Failure> {
    let chain = &flags.chain;
    let (Some(routers), Some(tight_at)) = (chain.routers, chain.tight_at) else {
        return Err(usage(
            "--method hops needs --hops N (routers) and --tight-at K (the link with cross traffic)"
                .into(),
        ));
    };
    let refused = [
        (opts.max_rate.is_some(), "--max-rate"),
        (opts.known_capacity.is_some(), "--known-capacity"),
        (opts.precision.is_some(), "--precision"),
        (opts.max_bytes.is_some(), "--max-bytes"),
        (opts.key_file.is_some(), "--key-file"),
        (capacity.duration.is_some(), "--capacity-duration"),
        (capacity.algorithm.is_some(), "--algorithm"),
        (path.delay.is_some(), "--delay"),
        (path.threaded_napi, "--threaded-napi"),
        (path.mtu != 1500, "--mtu"),
    ];
    if let Some((_, flag)) = refused.iter().find(|(set, _)| *set) {
        return Err(usage(format!(
            "{flag} does not go with --method hops (the chain takes --hops, --tight-at, --narrow-at, --silent, --capacity, --narrow, --cross, --queue, --queue-probe, --end-to-end, --ipv6)"
        )));
    }
    if path.narrow.is_some() && chain.narrow_at.is_none() {
        return Err(usage(
            "--narrow (a rate) needs --narrow-at M (where)".into(),
        ));
    }
    if path.cross.len() > 1 {
        return Err(usage(
            "--method hops takes one --cross, the tight link's (e.g. poisson:60%)".into(),
        ));
    }
    let plan = HopsLabPlan {
        name: path.name.clone().unwrap_or_else(hops_lab::default_name),
        routers,
        tight_at,
        narrow_at: chain.narrow_at,
        tight_rate: path
            .capacity
            .unwrap_or(BitRate::from_mbps(hops_lab::DEFAULT_TIGHT_MBPS)),
        narrow_rate: path
            .narrow
            .unwrap_or(BitRate::from_mbps(hops_lab::DEFAULT_NARROW_MBPS)),
        cross: path
            .cross
            .first()
            .cloned()
            .unwrap_or_else(|| hops_lab::DEFAULT_CROSS.into()),
        silent: chain.silent.clone(),
        runs,
        queue: path.queue,
        queue_probe: flags.queue_probe,
        end_to_end: flags.end_to_end,
        ipv6: chain.ipv6,
        settle: path.settle,
        gap: hops_lab::GAP,
        seed: path.seed,
    };
    plan.validate().map_err(usage)?;
    Ok(plan)
}

/// `lab up --hops …`'s chain: the plan `lab run --method hops` would build,
/// without its runs (the holder serves the receiver's pathsonde server
/// always, so --end-to-end and --queue-probe, which are about runs, are
/// refused).
pub(crate) fn up_plan(path: &PathArgs, flags: &HopsLabFlags) -> Result<HopsLabPlan, Failure> {
    if flags.queue_probe || flags.end_to_end {
        return Err(usage(
            "--queue-probe and --end-to-end go with lab run --method hops; a chain lab up builds always serves pathsonde on the receiver".into(),
        ));
    }
    /// No method options: `plan` refuses those that do not go with a chain.
    #[derive(clap::Parser)]
    struct NoMethodOptions {
        #[command(flatten)]
        opts: AbwOptions,
    }
    let none = <NoMethodOptions as clap::Parser>::parse_from(["lab-up"]);
    plan(path, 1, &none.opts, flags, &CapacityFlags::default())
}

/// One blind run in the sender's namespace, exactly as `pathsonde hops
/// RECEIVER --json` would make it there (default settings; with `queue`,
/// `--queue`; with `e2e`, against the server `--end-to-end` starts on the
/// receiver, else as with `--no-server`).
pub(crate) fn measure_in(
    ns: &str,
    target: SocketAddr,
    queue: bool,
    e2e: bool,
) -> Result<Measured, String> {
    let (m, e2e) = pathsonde_lab::netns::run_in(ns, move || {
        let m =
            pathsonde_net::hops::measure(target, HopsConfig::default(), queue, |_| {}, |_, _| {});
        let e2e = match &m {
            Ok(m) if e2e => Some(end_to_end_run(target, m.estimate.tight_link.as_ref())),
            _ => None,
        };
        Ok((m, e2e))
    })
    .map_err(|e| e.to_string())?;
    let m = m.map_err(|e| e.to_string())?;
    let mut json = pathsonde_render::hops::to_json(target, &m.estimate, m.elapsed, m.unmatched);
    if let Some(q) = &m.queue {
        json["queue"] = pathsonde_render::hops::queue_json(q);
    }
    if let Some(e) = &e2e {
        let server = SocketAddr::new(target.ip(), SERVER_PORT);
        let view = match &e.outcome {
            Ok((estimate, comparison)) => EndToEnd::Measured {
                server,
                estimate,
                comparison,
            },
            Err(why) => EndToEnd::NotMeasured {
                server,
                why: why.clone(),
            },
        };
        json["end_to_end"] = pathsonde_render::hops::end_to_end::json(&view);
    }
    Ok(Measured {
        estimate: m.estimate,
        elapsed: m.elapsed,
        json,
        queue: m.queue,
        end_to_end: e2e,
    })
}

/// `hops`'s end-to-end measurement against the receiver's server, its
/// verdict beside the tight link found, and its window for the truth.
fn end_to_end_run(target: SocketAddr, tight: Option<&TightLink>) -> EndToEndRun {
    let from = pathsonde_net::clock::monotonic();
    let got = crate::hops_cmd::end_to_end(target, SERVER_PORT);
    let to = pathsonde_net::clock::monotonic();
    EndToEndRun {
        outcome: got
            .map(|run| {
                let c = compare(tight, &run.estimate);
                (run.estimate, c)
            })
            .map_err(|(_, why)| why),
        from,
        to,
    }
}

pub(crate) fn run(
    path: &PathArgs,
    runs: u32,
    opts: &AbwOptions,
    flags: &HopsLabFlags,
    capacity: &CapacityFlags,
) -> Result<(), Failure> {
    let plan = plan(path, runs, opts, flags, capacity)?;
    crate::output::event(
        "start",
        serde_json::json!({ "command": "lab-run", "method": hops_lab::METHOD, "plan": plan }),
    );
    crate::output::progress(&start_line(&plan));
    let started = std::time::Instant::now();
    let (queue, e2e) = (plan.queue_probe, plan.end_to_end);
    let mut measure = |ns: &str, target: SocketAddr| measure_in(ns, target, queue, e2e);
    let mut progress = |r: &HopsRunRecord| {
        if crate::output::show_progress() {
            eprintln!("{}", run_line(r));
        }
        crate::output::event("run", serde_json::to_value(r).unwrap_or_default());
    };
    let report = hops_lab::run(&plan, &mut measure, &mut progress).map_err(Failure::from)?;
    if report.runs.is_empty() {
        if crate::output::mode() == crate::output::Mode::Text {
            print!("{}", text(&report));
        }
        return Err(Failure {
            exit: crate::exit::Exit::NoEstimate,
            message: format!("no hops run gave a result: {}", report.notes.join("; ")),
        });
    }
    let v = serde_json::to_value(&report)
        .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }));
    let record = pathsonde_archive::Record {
        kind: "lab-hops".into(),
        target: format!("lab {}: {}", plan.name, describe(&plan)),
        method: Some(hops_lab::METHOD.into()),
        started: crate::archive_cmd::started_ago(started.elapsed()),
        duration: started.elapsed(),
        summary: summary_line(&report),
        result: v,
        raw: None,
    };
    crate::archive_cmd::finish(record, || text(&report));
    Ok(())
}
