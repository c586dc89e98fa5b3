//! `pathsonde compare`: every chosen method on one lab path over a sweep of
//! cross-traffic kinds and loads, with the comparison paper's table and
//! figures (docs/compare.md).  The sweep itself is `pathsonde_lab::compare`
//! (the methods list `pathsonde_lab::compare_methods`), its files, JSON and
//! progress lines `pathsonde_render::compare`; this module parses options,
//! shows progress and maps errors to exit codes.  With `--hops` the sweep
//! runs on a chain of routers (`pathsonde_lab::compare::chain`) and `hops`
//! is one of its methods, measured as `lab run --method hops` measures it.

use crate::exit::Exit;
use crate::lab_cmd::hops::ChainFlags;
use crate::{usage, Failure};
use clap::Args;
use pathsonde_core::methods::registry::{self, MethodSettings};
use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_lab::compare::{self, CompareOptions, Progress};
use pathsonde_lab::hops_lab::{self, HopsLabPlan};
use pathsonde_lab::topology::LabSpec;
use pathsonde_render::compare as out;
use std::path::PathBuf;

#[derive(Args, Clone)]
pub struct CompareArgs {
    /// Tight-link capacity (tbf rate; counts Ethernet headers), e.g. 300mbit
    /// [default: 300mbit; 100mbit with --hops].
    #[arg(long, value_parser = crate::args::positive_rate)]
    pub capacity: Option<BitRate>,
    /// Cross-traffic kinds, comma-separated or repeated, without a rate:
    /// poisson, cbr, mix, icim, web, with options as in docs/cross-traffic.md
    /// (e.g. mix:flows=4).  Each runs at every load.
    #[arg(long = "cross", default_value = "poisson", value_delimiter = ',')]
    pub cross: Vec<String>,
    /// Loads in percent of the capacity, comma-separated.
    #[arg(long, default_value = "10,30,50,70,90", value_delimiter = ',')]
    pub loads: Vec<f64>,
    /// Runs of each method at each load.
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
    /// Methods, comma-separated, or `all` (every available-bandwidth method);
    /// `capacity` adds RFC 9097's maximum IP-layer capacity (one UDPST test
    /// per run, judged against the tight link's IP-layer rate minus the
    /// cross traffic; docs/capacity.md).
    #[arg(long, default_value = "all", value_delimiter = ',')]
    pub methods: Vec<String>,
    /// Each `capacity` test's duration, whole seconds from 5 s.
    #[arg(long, default_value = "10s", value_parser = crate::args::seconds)]
    pub capacity_duration: DurationNs,
    /// The `capacity` tests' load-adjustment search: b or c.
    #[arg(long, value_enum, default_value = "b")]
    pub algorithm: crate::capacity_cmd::AlgorithmArg,
    /// Cross traffic alone after each load starts, e.g. 2s (a bare number
    /// is seconds).
    #[arg(long, default_value = "2s", value_parser = crate::args::seconds)]
    pub settle: DurationNs,
    /// Quiet before each measurement (the paper's settling delay), e.g. 500ms.
    #[arg(long, default_value = "0.5s", value_parser = crate::args::seconds)]
    pub tool_settle: DurationNs,
    /// Tight-link queue limit, e.g. 256KiB (sizes: docs/units.md).
    #[arg(long, default_value = "256KiB", value_parser = crate::args::positive_size)]
    pub queue: Bytes,
    /// Link MTU: 1500 or 9000.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// One-way delay on the forward path, 1ms..100ms.
    #[arg(long)]
    pub delay: Option<DurationNs>,
    /// Add a second router whose link to the receiver is the narrow link, at
    /// this rate; with --hops, the rate of the link --narrow-at names
    /// [default there: 60mbit].
    #[arg(long, value_parser = crate::args::positive_rate)]
    pub narrow: Option<BitRate>,
    #[command(flatten)]
    pub chain: ChainFlags,
    /// Threaded NAPI on the receivers' veths (bunches receive stamps, as NIC coalescing does).
    #[arg(long)]
    pub threaded_napi: bool,
    /// Lab name (namespaces are pathsonde-NAME-ROLE); default: cmp<pid>.
    #[arg(long)]
    pub name: Option<String>,
    /// Seed for the cross-traffic schedules.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// IP packet size of probes in bytes (headers included).
    #[arg(long, default_value = "1500", value_parser = crate::args::packet_size)]
    pub packet_size: Bytes,
    /// Highest rate any method probes at [default: 1G, as `abw`; 500M
    /// with --delay, the most the delay line carries].
    #[arg(long, value_parser = crate::args::positive_rate)]
    pub max_rate: Option<BitRate>,
    /// Tell every method the tight link's capacity (IP layer), as a user who
    /// knows it would with `abw --known-capacity` [default: not given: the
    /// methods run blind, as on a real path].
    #[arg(long, value_name = "RATE", value_parser = crate::args::positive_rate)]
    pub known_capacity: Option<BitRate>,
    /// The band half-width FAC² and SLoPS probe for, e.g. 2%, as `abw
    /// --precision` [default: each method's own rule].
    #[arg(long, value_name = "PCT", value_parser = crate::args::precision)]
    pub precision: Option<f64>,
    /// The most probe bytes FAC² or SLoPS may spend per run, as `abw
    /// --max-bytes` [default: each method's own].
    #[arg(long, value_name = "SIZE", value_parser = crate::args::positive_size)]
    pub max_bytes: Option<Bytes>,
    /// Directory for compare.json, compare.txt, compare.md and the figures.
    #[arg(long, default_value = "compare-out")]
    pub out: PathBuf,
    #[command(flatten)]
    pub json: crate::args::JsonFlags,
}

fn options(args: &CompareArgs) -> Result<CompareOptions, Failure> {
    for (what, v) in [
        ("--settle", args.settle),
        ("--tool-settle", args.tool_settle),
    ] {
        if v > DurationNs::from_secs(600) {
            return Err(usage(format!("{what} {v} must be at most 600 s")));
        }
    }
    let chain = chain_plan(args)?;
    let spec = LabSpec {
        name: args
            .name
            .clone()
            .unwrap_or_else(|| format!("cmp{}", std::process::id())),
        capacity: args
            .capacity
            .unwrap_or(BitRate::from_mbps(DEFAULT_CAPACITY_MBPS)),
        queue: args.queue,
        mtu: args.mtu,
        cross_sources: 1,
        narrow: args.narrow,
        delay: args.delay,
        threaded_napi: args.threaded_napi,
    };
    // Blind, as `abw` on a real path: only what the user said.
    let settings = pathsonde_core::methods::registry::MethodSettings {
        precision: args.precision,
        max_bytes: args.max_bytes,
        ..crate::settings::settings_of(
            args.max_rate
                .unwrap_or_else(|| crate::settings::lab_default_max_rate(args.delay)),
            args.packet_size,
            args.known_capacity,
        )
    };
    crate::settings::check_settings(&settings)?;
    let opts = CompareOptions {
        spec,
        kinds: args.cross.iter().map(|k| k.trim().to_string()).collect(),
        loads: args.loads.clone(),
        methods: pathsonde_lab::compare_methods::method_names(&args.methods, chain.is_some())
            .map_err(|e| usage(e.to_string()))?,
        capacity: pathsonde_lab::capacity::CapacitySettings {
            duration_s: args.capacity_duration,
            algorithm: args.algorithm.into(),
        },
        runs: args.runs,
        settle: args.settle.to_std(),
        tool_settle: args.tool_settle.to_std(),
        settings,
        seed: args.seed,
        chain,
    };
    opts.validate().map_err(Failure::from)?;
    Ok(opts)
}

/// The two-host path's tight link unless the user names one.
const DEFAULT_CAPACITY_MBPS: f64 = 300.0;

/// The chain `--hops` asks for (`None` without it), or the one line that
/// says which flag does not go with it.
fn chain_plan(args: &CompareArgs) -> Result<Option<HopsLabPlan>, Failure> {
    let chain = &args.chain;
    let Some(routers) = chain.routers else {
        if chain.any() {
            return Err(usage(
                "--tight-at, --narrow-at, --silent and --ipv6 go with --hops N (a chain of routers)"
                    .into(),
            ));
        }
        return Ok(None);
    };
    let Some(tight_at) = chain.tight_at else {
        return Err(usage(
            "--hops needs --tight-at K (the link with the cross traffic)".into(),
        ));
    };
    let refused = [
        (args.delay.is_some(), "--delay"),
        (args.threaded_napi, "--threaded-napi"),
        (args.mtu != 1500, "--mtu"),
    ];
    if let Some((_, flag)) = refused.iter().find(|(set, _)| *set) {
        return Err(usage(format!(
            "{flag} does not go with --hops (the chain takes --tight-at, --narrow-at, --narrow, --silent, --ipv6, --capacity, --queue)"
        )));
    }
    if args.narrow.is_some() && chain.narrow_at.is_none() {
        return Err(usage(
            "with --hops, --narrow (a rate) needs --narrow-at M (where)".into(),
        ));
    }
    Ok(Some(HopsLabPlan {
        name: args.name.clone().unwrap_or_else(hops_lab::default_name),
        routers,
        tight_at,
        narrow_at: chain.narrow_at,
        tight_rate: args
            .capacity
            .unwrap_or(BitRate::from_mbps(hops_lab::DEFAULT_TIGHT_MBPS)),
        narrow_rate: args
            .narrow
            .unwrap_or(BitRate::from_mbps(hops_lab::DEFAULT_NARROW_MBPS)),
        // Each phase replaces it with the sweep's kind and load.
        cross: hops_lab::DEFAULT_CROSS.into(),
        silent: chain.silent.clone(),
        runs: args.runs,
        queue: args.queue,
        queue_probe: false,
        end_to_end: false,
        ipv6: chain.ipv6,
        settle: args.settle,
        gap: hops_lab::GAP,
        seed: args.seed,
    }))
}

pub fn run(args: CompareArgs) -> Result<(), Failure> {
    let opts = options(&args)?;
    std::fs::create_dir_all(&args.out).map_err(|e| Failure {
        exit: Exit::Usage,
        message: format!("--out {}: {e}", args.out.display()),
    })?;
    pathsonde_lab::netns::check_permitted().map_err(Failure::from)?;
    let terminal = crate::output::show_progress();
    // One lab experiment at a time on this machine, for the whole sweep.
    let _lock = pathsonde_lab::exclusive::lab_lock_or_inherit(|| {
        eprintln!(
            "pathsonde: waiting for the lab lock ({}): another lab experiment is running",
            pathsonde_lab::exclusive::LOCK_PATH
        )
    })
    .map_err(Failure::from)?;
    let make = |name: &str, settings: &MethodSettings| {
        name.parse::<registry::MethodName>()
            .map(|m| registry::build(m, settings))
            .map_err(|e| e.to_string())
    };
    let bar = terminal.then(|| crate::output::progress_bar(opts.total_runs(), false));
    let mut on_progress = |p: Progress<'_>| {
        if let Some((kind, data)) = out::progress_event(&p) {
            crate::output::event(kind, data);
        }
        let Some(bar) = &bar else { return };
        match out::bar_update(&p) {
            out::BarUpdate::Message(m) => bar.set_message(m),
            out::BarUpdate::Finished(line) => {
                bar.inc(1);
                bar.println(line);
            }
        }
    };
    let report = if opts.chain.is_some() {
        let mut hops = |ns: &str, target: std::net::SocketAddr| {
            crate::lab_cmd::hops::measure_in(ns, target, false, false)
        };
        compare::chain::compare_chain(&opts, &make, &mut hops, &mut on_progress)
    } else {
        compare::compare(&opts, &make, &mut on_progress)
    }
    .map_err(Failure::from)?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let files = out::write_outputs(&report, &args.out, &command).map_err(|e| Failure {
        exit: Exit::Internal,
        message: e.to_string(),
    })?;
    let v = out::json(&report, &files, &command);
    crate::output::result(&v, || out::result_text(&report, &files));
    if report.runs.is_empty() {
        return Err(Failure {
            exit: Exit::NoEstimate,
            message: "no measurement of the sweep produced an estimate".into(),
        });
    }
    Ok(())
}
