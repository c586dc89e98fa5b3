//! `pathsonde sim ...`: the packet-level simulator (crates/pathsonde-sim).
//! No measurement logic here: it loads scenarios, runs the simulator's
//! drivers, prints reports and draws plots.  See docs/sim.md.

use crate::exit::Exit;
use crate::Failure;
use clap::Subcommand;
use pathsonde_core::methods::registry;
use pathsonde_render::sim::{method_text, plot_icim, plot_method, tcp_text};
use pathsonde_sim::driver::{run_method, run_tcp, RunOptions};
use pathsonde_sim::summary::{summary, tcp_summary};
use pathsonde_sim::time::{ps_of, Ps};
use pathsonde_sim::{bench, Scenario};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

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

fn usage(m: impl Into<String>) -> Failure {
    Failure {
        exit: Exit::Usage,
        message: m.into(),
    }
}

fn internal(m: impl std::fmt::Display) -> Failure {
    Failure {
        exit: Exit::Internal,
        message: m.to_string(),
    }
}

/// The scenario at `path`, with the user's `--duration` and
/// `--no-coalescing` applied.
fn load(path: &Path, duration: &Option<String>, no_coalescing: bool) -> Result<Scenario, Failure> {
    let mut scn = Scenario::load(path).map_err(|e| usage(e.to_string()))?;
    if no_coalescing {
        scn.sender.nic = pathsonde_sim::scenario::NicConfig::OFF;
        scn.receiver.nic = pathsonde_sim::scenario::NicConfig::OFF;
    }
    if let Some(d) = duration {
        let d = ps_of(d).map_err(|e| usage(format!("--duration: {e}")))?;
        if d.is_zero() || d > Ps::from_secs(3600) {
            return Err(usage("--duration must be in (0, 1 h]"));
        }
        scn.duration = d;
    }
    Ok(scn)
}

/// Refuses a run whose estimated event count (over every seed) is beyond
/// the budget unless `--force`: a rate typed as `1e15` should cost a line,
/// not minutes of silence.
fn within_budget(scn: &Scenario, seeds: u32, force: bool) -> Result<(), Failure> {
    let events = scn.event_estimate() * f64::from(seeds.max(1));
    let budget = pathsonde_sim::scenario::EVENT_BUDGET;
    if force || events <= budget {
        return Ok(());
    }
    Err(usage(format!(
        "{}: about {:.1e} events ({} link(s) busy for {:.3} s, {} seed(s)), beyond the budget of {budget:.0e} (about a minute); check the links' rates and --duration, or pass --force",
        scn.name,
        events,
        scn.links.len(),
        scn.duration.as_secs_f64(),
        seeds.max(1)
    )))
}

/// Progress on stderr when it is a terminal.
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
            let mut scn = load(&scenario, &duration, no_coalescing)?;
            within_budget(&scn, seeds, force)?;
            if let Some(c) = &cross {
                let tight = scn.intended_tight_link();
                scn.set_cross(tight, c).map_err(|e| usage(e.to_string()))?;
            }
            let name = method
                .clone()
                .or_else(|| scn.method.as_ref().map(|m| m.name.clone()))
                .unwrap_or_else(|| "fac2".into());
            name.parse::<registry::MethodName>()
                .map_err(|e| usage(e.to_string()))?;
            if seeds == 0 || seeds > 10_000 {
                return Err(usage("--seeds must be 1..=10000"));
            }
            let first = seed.unwrap_or(scn.seed);
            crate::settings::check_known_capacity(known_capacity)?;
            let opts = RunOptions {
                method: Some(name.clone()),
                max_estimates: estimates,
                known_capacity,
            };
            let mut runs = Vec::new();
            for k in 0..seeds {
                let s = first.wrapping_add(u64::from(k));
                let run = run_method(&scn, s, &opts, &mut progress(format!("seed {s}")))
                    .map_err(|e| usage(e.to_string()))?;
                runs.push(run);
            }
            if let Some(prefix) = &plot {
                plot_method(prefix, &scn, &runs[0]).map_err(internal)?;
            }
            let settings = crate::report::settings_json(&runs[0].settings);
            let v = serde_json::json!({ "scenario": scn, "settings": settings, "runs": runs, "summary": summary(&runs) });
            crate::output::result(&v, || method_text(&scn, &runs, plot.as_deref()));
            if runs
                .iter()
                .all(|r| r.samples.iter().all(|s| s.estimate.is_none()))
            {
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
            let mut scn = load(&scenario, &duration, no_coalescing)?;
            within_budget(&scn, seeds, force)?;
            if let Some(f) = flows {
                if f == 0
                    || f.saturating_mul(scn.tcp.len() as u32) > pathsonde_sim::scenario::MAX_TCP
                {
                    return Err(usage("--flows must be at least 1 and at most 1024 in all"));
                }
                for t in &mut scn.tcp {
                    t.flows = f;
                }
            }
            if scn.tcp.is_empty() {
                return Err(usage(format!(
                    "{}: no [[tcp]] flows to run",
                    scenario.display()
                )));
            }
            if let Some(q) = q_rtts {
                if !(q.is_finite() && (0.0..=1000.0).contains(&q)) {
                    return Err(usage("--q-rtts must be in [0, 1000]"));
                }
                scn.icim.q_rtts = q;
            }
            let warmup = ps_of(&warmup).map_err(|e| usage(format!("--warmup: {e}")))?;
            if seeds == 0 || seeds > 10_000 {
                return Err(usage("--seeds must be 1..=10000"));
            }
            let first = seed.unwrap_or(scn.seed);
            let mut runs = Vec::new();
            for k in 0..seeds {
                let s = first.wrapping_add(u64::from(k));
                runs.push(
                    run_tcp(&scn, s, warmup, &mut progress(format!("seed {s}")))
                        .map_err(|e| usage(e.to_string()))?,
                );
            }
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
            let r = bench::run(scale, 1);
            let v = serde_json::to_value(r).map_err(internal)?;
            crate::output::result(&v, || {
                let line = |name: &str, x: &bench::Rate| {
                    format!(
                        "  {name:<22} {:>12} events {:>12} packet events in {:>7.3} s: {:>6.1} M events/s, {:>6.1} M packet events/s\n",
                        x.events,
                        x.packet_events,
                        x.seconds,
                        x.events_per_s / 1e6,
                        x.packet_events_per_s / 1e6
                    )
                };
                let mut o = String::from(
                    "Simulator speed (one core; the machine may be shared: quote the ratio)\n",
                );
                o += &line("baseline (toy tandem)", &r.baseline);
                o += &line("engine (4-hop model)", &r.engine);
                o += &line("engine + FAC²", &r.with_method);
                let _ = writeln!(
                    o,
                    "  engine / baseline: {:.2} in packet events/s, {:.2} in heap events/s",
                    r.engine_over_baseline, r.engine_events_over_baseline
                );
                o
            });
            Ok(())
        }
    }
}
