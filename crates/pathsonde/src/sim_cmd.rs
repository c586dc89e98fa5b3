//! `pathsonde sim ...`: the packet-level simulator (crates/pathsonde-sim).
//! No measurement logic here: the scenario's overrides, budget and seed
//! runs are `pathsonde_sim::plan`'s, the reports and plots
//! `pathsonde_render::sim`'s; this parses flags, calls them, prints and
//! picks the exit code.  See docs/sim.md.

use crate::exit::Exit;
use crate::Failure;
use clap::Subcommand;
use pathsonde_render::sim::{bench_text, method_text, plot_icim, plot_method, tcp_text};
use pathsonde_sim::driver::RunOptions;
use pathsonde_sim::plan;
use pathsonde_sim::summary::{summary, tcp_summary};
use std::path::PathBuf;

#[derive(Subcommand)]
pub(crate) enum SimCommand {
    /// Run a measurement method over a simulated path, beside the truth.
    Run {
        /// Scenario file (TOML; see scenarios/ and docs/sim.md).
        scenario: PathBuf,
        /// Method to run (overrides the scenario's [method] name).
        #[arg(long)]
        method: Option<String>,
        /// Seed (default: the scenario's).
        #[arg(long)]
        seed: Option<u64>,
        /// Run this many seeds (seed, seed+1, ...) and report the spread.
        #[arg(long, default_value_t = 1)]
        seeds: u32,
        /// Replace the tight link's cross traffic (a spec such as `poisson:30%`).
        #[arg(long)]
        cross: Option<String>,
        /// Simulated time to keep measuring (e.g. `2s`; default: the scenario's).
        #[arg(long)]
        duration: Option<String>,
        /// Stop each seed's run after this many estimates.
        #[arg(long)]
        estimates: Option<u32>,
        /// Tell the method the tight link's capacity, as a user who knows it
        /// would with `abw --known-capacity` [default: not given: blind].
        #[arg(long, value_name = "RATE", value_parser = crate::args::positive_rate)]
        known_capacity: Option<pathsonde_core::BitRate>,
        /// Turn interrupt coalescing off on both hosts' NICs.
        #[arg(long)]
        no_coalescing: bool,
        /// Run even when the scenario's estimated event count is beyond the
        /// budget (about a minute of simulation; docs/sim.md).
        #[arg(long)]
        force: bool,
        /// Write PREFIX.png and PREFIX.svg: estimates over time against the truth
        /// (first seed).
        #[arg(long)]
        plot: Option<PathBuf>,
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
    /// Run the scenario's TCP Reno flows (some with ICIM): throughput per
    /// connection and every ICIM result beside the truth.
    Tcp {
        /// Scenario file (TOML with [[tcp]] flows; see scenarios/ and docs/sim.md).
        scenario: PathBuf,
        /// Seed (default: the scenario's).
        #[arg(long)]
        seed: Option<u64>,
        /// Run this many seeds (seed, seed+1, ...) and report the spread.
        #[arg(long, default_value_t = 1)]
        seeds: u32,
        /// Throughput is counted after this much simulated time.
        #[arg(long, default_value = "5s")]
        warmup: String,
        /// Simulated time (default: the scenario's).
        #[arg(long)]
        duration: Option<String>,
        /// Set every ICIM flow's wait Q (in RTTs).
        #[arg(long)]
        q_rtts: Option<f64>,
        /// Set the number of flows of every [[tcp]] section.
        #[arg(long)]
        flows: Option<u32>,
        /// Turn interrupt coalescing off on both hosts' NICs.
        #[arg(long)]
        no_coalescing: bool,
        /// Run even when the scenario's estimated event count is beyond the
        /// budget (about a minute of simulation; docs/sim.md).
        #[arg(long)]
        force: bool,
        /// Write PREFIX.png and PREFIX.svg of ICIM's results against the truth.
        #[arg(long)]
        plot: Option<PathBuf>,
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
    /// Events per second of the full model beside a baseline in the same run.
    Bench {
        /// Size of the run (1 = 200 ms of simulated time).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
}

impl SimCommand {
    pub(crate) fn json(&self) -> crate::args::JsonFlags {
        match self {
            SimCommand::Run { json, .. }
            | SimCommand::Tcp { json, .. }
            | SimCommand::Bench { json, .. } => *json,
        }
    }
}

fn usage(m: impl std::fmt::Display) -> Failure {
    Failure {
        exit: Exit::Usage,
        message: m.to_string(),
    }
}

fn internal(m: impl std::fmt::Display) -> Failure {
    Failure {
        exit: Exit::Internal,
        message: m.to_string(),
    }
}

/// Progress of one simulation: a percentage on a terminal, a `progress`
/// event every tenth under `--json-lines`.
fn progress(label: String) -> impl FnMut(f64) {
    let tty = crate::output::show_progress();
    let mut last = -1i64;
    move |f: f64| {
        let pct = (f * 100.0) as i64;
        if pct == last {
            return;
        }
        if pct / 10 != last / 10 {
            crate::output::event(
                "progress",
                serde_json::json!({ "message": label, "fraction": f.clamp(0.0, 1.0) }),
            );
        }
        last = pct;
        if tty {
            eprint!("\r{label}: {pct:3} %");
            if pct >= 100 {
                eprint!("\r{:width$}\r", "", width = label.len() + 8);
            }
        }
    }
}

pub(crate) fn run(cmd: SimCommand) -> Result<(), Failure> {
    match cmd {
        SimCommand::Run {
            scenario,
            method,
            seed,
            seeds,
            cross,
            duration,
            estimates,
            known_capacity,
            no_coalescing,
            force,
            plot,
            ..
        } => {
            let mut scn = plan::load(&scenario, duration.as_deref(), no_coalescing, seeds, force)
                .map_err(usage)?;
            let name =
                plan::method_run(&mut scn, cross.as_deref(), method, seeds).map_err(usage)?;
            let first = seed.unwrap_or(scn.seed);
            crate::settings::check_known_capacity(known_capacity)?;
            let opts = RunOptions {
                method: Some(name.clone()),
                max_estimates: estimates,
                known_capacity,
            };
            let runs = plan::run_method_seeds(&scn, first, seeds, &opts, |s| {
                progress(format!("seed {s}"))
            })
            .map_err(usage)?;
            if let Some(prefix) = &plot {
                plot_method(prefix, &scn, &runs[0]).map_err(internal)?;
            }
            let settings = crate::report::settings_json(&runs[0].settings);
            let v = serde_json::json!({ "scenario": scn, "settings": settings, "runs": runs, "summary": summary(&runs) });
            crate::output::result(&v, || method_text(&scn, &runs, plot.as_deref()));
            if plan::no_estimate(&runs) {
                return Err(Failure {
                    exit: Exit::NoEstimate,
                    message: format!("{name} gave no estimate"),
                });
            }
            Ok(())
        }
        SimCommand::Tcp {
            scenario,
            seed,
            seeds,
            warmup,
            duration,
            q_rtts,
            flows,
            no_coalescing,
            force,
            plot,
            ..
        } => {
            let mut scn = plan::load(&scenario, duration.as_deref(), no_coalescing, seeds, force)
                .map_err(usage)?;
            let warmup =
                plan::tcp_run(&mut scn, &scenario, flows, q_rtts, &warmup, seeds).map_err(usage)?;
            let first = seed.unwrap_or(scn.seed);
            let runs = plan::run_tcp_seeds(&scn, first, seeds, warmup, |s| {
                progress(format!("seed {s}"))
            })
            .map_err(usage)?;
            if let Some(prefix) = &plot {
                plot_icim(prefix, &runs[0]).map_err(internal)?;
            }
            let v =
                serde_json::json!({ "scenario": scn, "runs": runs, "summary": tcp_summary(&runs) });
            crate::output::result(&v, || tcp_text(&scn, &runs, plot.as_deref()));
            Ok(())
        }
        SimCommand::Bench { scale, .. } => {
            if !(scale.is_finite() && (0.001..=100.0).contains(&scale)) {
                return Err(usage("--scale must be in [0.001, 100]"));
            }
            let r = pathsonde_sim::bench::run(scale, 1);
            let v = serde_json::to_value(r).map_err(internal)?;
            crate::output::result(&v, || bench_text(&r));
            Ok(())
        }
    }
}
