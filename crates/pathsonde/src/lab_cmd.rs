//! `pathsonde lab …`: build emulated paths and measure them against truth.

pub(crate) mod hops;

use crate::capacity_cmd::AlgorithmArg;
use crate::report;
use crate::settings::{build_method, lab_default_max_rate, AbwOptions, CAPACITY_METHOD};
use crate::Failure;
use clap::{Args, Subcommand};
use pathsonde_core::{BitRate, Bytes, DurationNs, Method};
use pathsonde_lab::capacity::{CapacityRecord, CapacityRunOptions, CapacitySettings};
use pathsonde_lab::run::{self, LabRunReport, RunOptions, RunRecord};
use pathsonde_lab::standing;
use pathsonde_lab::topology::{self, LabSpec};
use pathsonde_render::lab_capacity as capacity_report;
use pathsonde_render::lab_standing;
use std::time::Duration;

#[derive(Subcommand)]
pub enum LabCommand {
    /// Build a path, run a method on it N times, print each estimate beside the truth.
    Run {
        #[command(flatten)]
        path: PathArgs,
        /// Measurement runs.
        #[arg(long, default_value_t = 5)]
        runs: u32,
        /// Boxed: the method options are most of the variant's size.
        #[command(flatten)]
        opts: Box<AbwOptions>,
        #[command(flatten)]
        capacity: CapacityFlags,
        #[command(flatten)]
        hops: hops::HopsLabFlags,
        #[command(flatten)]
        save: crate::args::SaveFlags,
    },
    /// Build a path and leave it standing (server in the receiver, cross
    /// traffic running, truth recorded) for any program to use with `ip netns exec`.
    Up {
        #[command(flatten)]
        path: PathArgs,
        /// --hops N --tight-at K …: a chain of routers instead (docs/lab.md).
        #[command(flatten)]
        hops: hops::HopsLabFlags,
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
    /// Print a standing lab's truth series so far.
    Truth {
        /// The lab's name.
        name: String,
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
    /// Keeps a standing lab in service (started by `lab up`; not for direct use).
    #[command(hide = true)]
    Hold {
        /// The lab's name.
        name: String,
    },
    /// Remove a lab's namespaces (or every pathsonde namespace with --all).
    Down {
        /// The lab's name.
        name: Option<String>,
        /// Remove every `pathsonde-` namespace, whatever lab it belongs to.
        #[arg(long)]
        all: bool,
    },
    /// List standing labs.
    List {
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
}

/// `--method capacity`'s test: one UDPST test per run, upstream from the
/// sender to the receiver's UDPST server across the tight link.
#[derive(Args, Clone, Default)]
pub struct CapacityFlags {
    /// With --method capacity: each test's duration, whole seconds from 5 s
    /// [default: 10s, the protocol's].
    #[arg(long = "capacity-duration", short = 't', value_name = "SECONDS", value_parser = crate::args::seconds)]
    pub duration: Option<DurationNs>,
    /// With --method capacity: the load-adjustment search, b (RFC 9097's) or
    /// c (multiply and retry) [default: b].
    #[arg(long, value_enum)]
    pub algorithm: Option<AlgorithmArg>,
}

/// The path to emulate.
#[derive(Args, Clone)]
pub struct PathArgs {
    /// Tight-link capacity (tbf rate; counts Ethernet headers), e.g. 300mbit
    /// [default: 300mbit; 100mbit with --method hops].
    #[arg(long, value_parser = crate::args::positive_rate)]
    pub capacity: Option<BitRate>,
    /// Cross traffic, repeatable: cbr:50M, poisson:30%, mix:40%, icim:25%, web:20%,
    /// steps:0s=10%,15s=30%, tcp:2 (see docs/cross-traffic.md).
    #[arg(long = "cross")]
    pub cross: Vec<String>,
    /// One-way delay on the forward path, 1ms..100ms.
    #[arg(long)]
    pub delay: Option<DurationNs>,
    /// Tight-link queue limit, e.g. 256KiB (sizes: docs/units.md).
    #[arg(long, default_value = "256KiB", value_parser = crate::args::positive_size)]
    pub queue: Bytes,
    /// Link MTU: 1500 or 9000.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// Add a second router whose link to the receiver is the narrow link, at
    /// this rate (with --method hops: the rate of the link --narrow-at names
    /// [default: 60mbit]).
    #[arg(long, value_parser = crate::args::positive_rate)]
    pub narrow: Option<BitRate>,
    /// Threaded NAPI on the receivers' veths (robust at ≥ 500 Mb/s; bunches receive stamps).
    #[arg(long)]
    pub threaded_napi: bool,
    /// Lab name (namespaces are pathsonde-NAME-ROLE); default: l<pid>.
    #[arg(long)]
    pub name: Option<String>,
    /// Cross traffic before the first measurement, e.g. 1s (a bare number
    /// is seconds).
    #[arg(long, default_value = "1s", value_parser = crate::args::seconds)]
    pub settle: DurationNs,
    /// Seed for the cross-traffic schedules.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl PathArgs {
    /// Refuses a settle time over 600 s and a run count outside 1..10000.
    fn check(&self, runs: u32) -> Result<(), Failure> {
        if self.settle > DurationNs::from_secs(600) {
            return Err(crate::usage(format!(
                "--settle {} must be at most 600 s",
                self.settle
            )));
        }
        if runs == 0 || runs > 10_000 {
            return Err(crate::usage(format!("--runs {runs} must be 1..10000")));
        }
        Ok(())
    }

    pub fn spec(&self) -> LabSpec {
        LabSpec {
            name: self
                .name
                .clone()
                .unwrap_or_else(|| format!("l{}", std::process::id())),
            capacity: self.capacity.unwrap_or(BitRate::from_mbps(300.0)),
            queue: self.queue,
            mtu: self.mtu,
            cross_sources: self.cross.len() as u32,
            narrow: self.narrow,
            delay: self.delay,
            threaded_napi: self.threaded_napi,
        }
    }
}

impl LabCommand {
    /// The output flags and archive settings (only `lab run` archives).
    pub fn flags(&self) -> (crate::args::JsonFlags, crate::args::SaveFlags) {
        match self {
            LabCommand::Run { opts, save, .. } => (opts.json, save.clone()),
            LabCommand::Up { json, .. }
            | LabCommand::Truth { json, .. }
            | LabCommand::List { json } => (*json, Default::default()),
            LabCommand::Hold { .. } | LabCommand::Down { .. } => Default::default(),
        }
    }
}

pub fn run(cmd: LabCommand) -> Result<(), Failure> {
    match cmd {
        LabCommand::Run {
            path,
            runs,
            opts,
            capacity,
            hops,
            ..
        } if opts.method == crate::settings::HOPS_METHOD => {
            hops::run(&path, runs, &opts, &hops, &capacity)
        }
        LabCommand::Run { hops, .. } if hops.any() => Err(crate::usage(
            "--hops, --tight-at, --narrow-at, --silent, --queue-probe, --end-to-end and --ipv6 go with --method hops".into(),
        )),
        LabCommand::Run {
            path,
            runs,
            opts,
            capacity,
            ..
        } if opts.method == CAPACITY_METHOD => lab_capacity(&path, runs, &opts, &capacity),
        LabCommand::Run { capacity, .. }
            if capacity.duration.is_some() || capacity.algorithm.is_some() =>
        {
            Err(crate::usage(
                "--capacity-duration and --algorithm go with --method capacity".into(),
            ))
        }
        LabCommand::Run {
            path, runs, opts, ..
        } if opts.method == "all" => lab_run_all(&path, runs, &opts),
        LabCommand::Run {
            path, runs, opts, ..
        } => {
            let started = std::time::Instant::now();
            let report = lab_run(&path, runs, &opts)?;
            // Under --json exactly one object: the report, or the error.
            if report.runs.is_empty() && crate::output::mode() == crate::output::Mode::Text {
                print!("{}", report::lab_text(&report));
            }
            if report.runs.is_empty() {
                return Err(Failure {
                    exit: crate::exit::Exit::NoEstimate,
                    message: format!(
                        "no lab run produced an estimate: {}",
                        report.notes.join("; ")
                    ),
                });
            }
            let record = crate::archive_cmd::lab_record(
                "lab-run",
                &report,
                report::lab_json(&report),
                started.elapsed(),
            );
            crate::archive_cmd::finish(record, || report::lab_text(&report));
            Ok(())
        }
        LabCommand::Up { path, hops, .. } => lab_up(&path, &hops),
        LabCommand::Truth { name, .. } => lab_truth(&name),
        LabCommand::Hold { name } => {
            // Runs until SIGTERM/SIGINT, whose handler (in main) removes the
            // namespaces and the state directory.
            let never = std::sync::atomic::AtomicBool::new(false);
            standing::hold(&name, &never).map_err(Failure::from)
        }
        LabCommand::Down { name, all } => {
            let removed = match (name, all) {
                (_, true) => standing::remove_all().map_err(Failure::from)?,
                (Some(n), false) => standing::remove(&n).map_err(Failure::from)?,
                (None, false) => {
                    return Err(Failure {
                        exit: crate::exit::Exit::Usage,
                        message: "name a lab to remove, or pass --all".into(),
                    })
                }
            };
            for ns in &removed {
                println!("removed {ns}");
            }
            if removed.is_empty() {
                println!("nothing to remove");
            }
            Ok(())
        }
        LabCommand::List { .. } => {
            let labs = topology::standing_labs().map_err(Failure::from)?;
            crate::output::result(&lab_standing::list_json(&labs), || {
                lab_standing::list_text(&labs)
            });
            Ok(())
        }
    }
}

/// Builds the lab, runs the method `runs` times, tears down.  The signal
/// handler installed by `main` removes the namespaces on Ctrl-C or SIGTERM.
pub fn lab_run(path: &PathArgs, runs: u32, opts: &AbwOptions) -> Result<LabRunReport, Failure> {
    let spec = path.spec();
    path.check(runs)?;
    // Blind, as `abw` on a real path: the method is told only what the
    // user said (--max-rate, --known-capacity), never the lab's C.
    let settings = crate::settings::method_settings(opts, lab_default_max_rate(spec.delay));
    // Validate the method options once, before anything is built.
    build_method(opts, &settings)?;
    let run_opts = RunOptions {
        spec,
        cross: path.cross.clone(),
        runs,
        settings,
        settle: path.settle.to_std(),
        gap: Duration::from_millis(300),
        seed: path.seed,
    };
    let method_name = opts.method.clone();
    let opts = opts.clone();
    let factory = move || -> Box<dyn Method + Send> {
        build_method(&opts, &settings).expect("validated above")
    };
    let show = crate::output::show_progress();
    crate::output::event(
        "start",
        serde_json::json!({ "command": "lab-run", "lab": run_opts.spec, "cross": run_opts.cross, "runs": runs, "method": method_name, "settings": report::settings_json(&run_opts.settings) }),
    );
    crate::output::progress(&report::lab_start_line(&run_opts, path.settle));
    let mut progress = |r: &RunRecord| {
        if show {
            eprintln!("{}", report::lab_progress_line(r));
        }
        crate::output::event("run", serde_json::to_value(r).unwrap_or_default());
    };
    run::run(&run_opts, &factory, &mut progress).map_err(Failure::from)
}

/// `lab run --method capacity`: RFC 9097's maximum IP-layer capacity, one
/// UDPST test per run from `snd` to the UDPST server in `rcv`, upstream
/// across the tight link, each beside the tight link's IP-layer rate minus
/// the cross traffic over its window (`pathsonde_lab::capacity`).
fn lab_capacity(
    path: &PathArgs,
    runs: u32,
    opts: &AbwOptions,
    flags: &CapacityFlags,
) -> Result<(), Failure> {
    path.check(runs)?;
    if opts.max_rate.is_some() || opts.known_capacity.is_some() || opts.key_file.is_some() {
        return Err(crate::usage(
            "--method capacity takes --capacity-duration and --algorithm; --max-rate, --known-capacity and --key-file are the available-bandwidth methods' (the lab's UDPST server has no key and no ceiling below 10 Gb/s)".into(),
        ));
    }
    let test = CapacitySettings {
        duration_s: flags.duration.unwrap_or(DurationNs::from_secs(10)),
        algorithm: flags.algorithm.unwrap_or(AlgorithmArg::B).into(),
    };
    test.validate()
        .map_err(|e| crate::usage(format!("--capacity-duration: {e}")))?;
    let run_opts = CapacityRunOptions {
        spec: path.spec(),
        cross: path.cross.clone(),
        runs,
        test,
        settle: path.settle.to_std(),
        gap: Duration::from_millis(500),
        seed: path.seed,
    };
    crate::output::event(
        "start",
        serde_json::json!({ "command": "lab-run", "lab": run_opts.spec, "cross": run_opts.cross, "runs": runs, "method": CAPACITY_METHOD, "test": test }),
    );
    crate::output::progress(&capacity_report::start_line(&run_opts, path.settle));
    let show = crate::output::show_progress();
    let mut progress = |r: &CapacityRecord| {
        if show {
            eprintln!("{}", capacity_report::progress_line(r));
        }
        crate::output::event("run", serde_json::to_value(r).unwrap_or_default());
    };
    let started = std::time::Instant::now();
    let report = pathsonde_lab::capacity::run(&run_opts, &mut progress).map_err(Failure::from)?;
    let v = serde_json::to_value(&report)
        .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }));
    if report.runs.is_empty() {
        if crate::output::mode() == crate::output::Mode::Text {
            print!("{}", capacity_report::text(&report));
        }
        return Err(Failure {
            exit: crate::exit::Exit::NoEstimate,
            message: format!(
                "no capacity test produced a result: {}",
                report.notes.join("; ")
            ),
        });
    }
    let record = pathsonde_archive::Record {
        kind: "lab-capacity".into(),
        target: capacity_report::target(&report),
        method: Some(capacity_report::method(test.algorithm)),
        started: crate::archive_cmd::started_ago(started.elapsed()),
        duration: started.elapsed(),
        summary: capacity_report::summary_line(&report),
        result: v,
        raw: None,
    };
    crate::archive_cmd::finish(record, || capacity_report::text(&report));
    Ok(())
}

/// `lab run --method all`: every method in turn, each on a freshly built
/// lab of the same spec (same seed, so the same cross-traffic draws).  Text:
/// each method's report under its name; JSON: `{"methods": [report, …]}`.
fn lab_run_all(path: &PathArgs, runs: u32, opts: &AbwOptions) -> Result<(), Failure> {
    let mut reports = Vec::new();
    for name in pathsonde_core::methods::registry::MethodName::ALL {
        let mut one = opts.clone();
        one.method = name.to_string();
        let report = lab_run(path, runs, &one)?;
        reports.push((name, report));
    }
    crate::output::result(&report::lab_all_json(&reports), || {
        report::lab_all_text(&reports)
    });
    let empty: Vec<&str> = reports
        .iter()
        .filter(|(_, r)| r.runs.is_empty())
        .map(|(n, _)| n.as_str())
        .collect();
    if empty.len() == reports.len() {
        return Err(Failure {
            exit: crate::exit::Exit::NoEstimate,
            message: "no lab run of any method produced an estimate".into(),
        });
    }
    if !empty.is_empty() && crate::output::mode() == crate::output::Mode::Text {
        println!("no estimate from: {}", empty.join(", "));
    }
    Ok(())
}

fn lab_up(path: &PathArgs, flags: &hops::HopsLabFlags) -> Result<(), Failure> {
    let chain = if flags.any() {
        Some(hops::up_plan(path, flags)?)
    } else {
        None
    };
    pathsonde_lab::netns::check_permitted().map_err(Failure::from)?;
    let mut spec = path.spec();
    if let Some(plan) = &chain {
        spec.name = plan.name.clone();
    }
    let name = spec.name.clone();
    let req = standing::Request {
        spec,
        cross: path.cross.clone(),
        seed: path.seed,
        chain,
    };
    standing::prepare(&req).map_err(Failure::from)?;
    let info = standing::start_holder(&name, &["lab", "hold", &name]).map_err(|e| {
        let _ = standing::take_down(&name);
        Failure {
            exit: crate::exit::Exit::Lab,
            message: e.to_string(),
        }
    })?;
    let v = serde_json::to_value(&info).unwrap_or_default();
    crate::output::result(&v, || lab_standing::up_text(&info));
    Ok(())
}

fn lab_truth(name: &str) -> Result<(), Failure> {
    let info = standing::read_info(name).map_err(Failure::from)?;
    if info.chain.is_some() {
        let series = standing::read_chain_truth(name).map_err(Failure::from)?;
        let v = serde_json::json!({ "lab": info, "truth": series });
        crate::output::result(&v, || lab_standing::chain_truth_text(&info, &series));
        return Ok(());
    }
    let series = standing::read_truth(name).map_err(Failure::from)?;
    let v = serde_json::json!({ "lab": info, "truth": series });
    crate::output::result(&v, || lab_standing::truth_text(&info, &series));
    Ok(())
}
