//! What `pathsonde sim run` and `sim tcp` do before and around the
//! simulator: the scenario with the user's overrides, the event budget, the
//! method to run, and one run per seed.
//!
//! Kept here rather than in the binary (issue 31: the binary is glue) so
//! the rules a run obeys — what a scenario may be changed to, when a run is
//! too big to start — live with the scenario they judge.  Each refusal is a
//! [`PlanError`] whose text is what the user reads; the binary gives them
//! all the usage exit code.

use crate::driver::{run_method, run_tcp, MethodRun, RunOptions, TcpRun};
use crate::scenario::{NicConfig, Scenario, ScenarioError, EVENT_BUDGET, MAX_TCP};
use crate::time::{ps_of, Ps};
use crate::SimError;
use pathsonde_core::method_name::UnknownMethod;
use pathsonde_core::methods::registry::MethodName;
use pathsonde_core::units::UnitError;
use std::path::{Path, PathBuf};

/// Most seeds one command runs.
const MAX_SEEDS: u32 = 10_000;

/// Why a run cannot start as asked (the messages name the flag at fault).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("--duration: {0}")]
    Duration(#[source] UnitError),
    #[error("--duration must be in (0, 1 h]")]
    DurationRange,
    #[error("--warmup: {0}")]
    Warmup(#[source] UnitError),
    #[error(transparent)]
    Method(#[from] UnknownMethod),
    #[error("--seeds must be 1..=10000")]
    Seeds,
    #[error("--flows must be at least 1 and at most 1024 in all")]
    Flows,
    #[error("{}: no [[tcp]] flows to run", .0.display())]
    NoTcp(PathBuf),
    #[error("--q-rtts must be in [0, 1000]")]
    QRtts,
    /// The estimated event count is beyond [`EVENT_BUDGET`] and `--force`
    /// was not given: a rate typed as `1e15` should cost a line, not
    /// minutes of silence.
    #[error("{name}: about {events:.1e} events ({links} link(s) busy for {secs:.3} s, {seeds} seed(s)), beyond the budget of {EVENT_BUDGET:.0e} (about a minute); check the links' rates and --duration, or pass --force")]
    OverBudget {
        name: String,
        events: f64,
        links: usize,
        secs: f64,
        seeds: u32,
    },
}

/// The scenario at `path`, with the user's `--duration` and
/// `--no-coalescing` applied, refused when its event estimate over `seeds`
/// is beyond the budget unless `force`.
pub fn load(
    path: &Path,
    duration: Option<&str>,
    no_coalescing: bool,
    seeds: u32,
    force: bool,
) -> Result<Scenario, PlanError> {
    let mut scn = Scenario::load(path)?;
    if no_coalescing {
        scn.sender.nic = NicConfig::OFF;
        scn.receiver.nic = NicConfig::OFF;
    }
    if let Some(d) = duration {
        let d = ps_of(d).map_err(PlanError::Duration)?;
        if d.is_zero() || d > Ps::from_secs(3600) {
            return Err(PlanError::DurationRange);
        }
        scn.duration = d;
    }
    let events = scn.event_estimate() * f64::from(seeds.max(1));
    if force || events <= EVENT_BUDGET {
        return Ok(scn);
    }
    Err(PlanError::OverBudget {
        name: scn.name.clone(),
        events,
        links: scn.links.len(),
        secs: scn.duration.as_secs_f64(),
        seeds: seeds.max(1),
    })
}

/// Readies `scn` for `sim run`: `cross` replaces the tight link's cross
/// traffic; returns the method to run (`method`, else the scenario's, else
/// fac2) after checking it and `seeds`.
pub fn method_run(
    scn: &mut Scenario,
    cross: Option<&str>,
    method: Option<String>,
    seeds: u32,
) -> Result<String, PlanError> {
    if let Some(c) = cross {
        let tight = scn.intended_tight_link();
        scn.set_cross(tight, c)?;
    }
    let name = method
        .or_else(|| scn.method.as_ref().map(|m| m.name.clone()))
        .unwrap_or_else(|| "fac2".into());
    name.parse::<MethodName>()?;
    check_seeds(seeds)?;
    Ok(name)
}

/// Readies `scn` (read from `path`) for `sim tcp`: `flows` per [[tcp]]
/// section, ICIM's wait `q_rtts`; returns the warm-up parsed.
pub fn tcp_run(
    scn: &mut Scenario,
    path: &Path,
    flows: Option<u32>,
    q_rtts: Option<f64>,
    warmup: &str,
    seeds: u32,
) -> Result<Ps, PlanError> {
    if let Some(f) = flows {
        if f == 0 || f.saturating_mul(scn.tcp.len() as u32) > MAX_TCP {
            return Err(PlanError::Flows);
        }
        for t in &mut scn.tcp {
            t.flows = f;
        }
    }
    if scn.tcp.is_empty() {
        return Err(PlanError::NoTcp(path.to_path_buf()));
    }
    if let Some(q) = q_rtts {
        if !(q.is_finite() && (0.0..=1000.0).contains(&q)) {
            return Err(PlanError::QRtts);
        }
        scn.icim.q_rtts = q;
    }
    let warmup = ps_of(warmup).map_err(PlanError::Warmup)?;
    check_seeds(seeds)?;
    Ok(warmup)
}

fn check_seeds(seeds: u32) -> Result<(), PlanError> {
    if seeds == 0 || seeds > MAX_SEEDS {
        return Err(PlanError::Seeds);
    }
    Ok(())
}

/// The seeds `first`, `first + 1`, … (`seeds` of them, wrapping).
fn seed_list(first: u64, seeds: u32) -> impl Iterator<Item = u64> {
    (0..seeds).map(move |k| first.wrapping_add(u64::from(k)))
}

/// Runs the method of `opts` once per seed; `progress(seed)` gives each
/// run's progress callback.
pub fn run_method_seeds<P: FnMut(f64)>(
    scn: &Scenario,
    first: u64,
    seeds: u32,
    opts: &RunOptions,
    mut progress: impl FnMut(u64) -> P,
) -> Result<Vec<MethodRun>, SimError> {
    seed_list(first, seeds)
        .map(|s| run_method(scn, s, opts, &mut progress(s)))
        .collect()
}

/// Runs the scenario's TCP flows once per seed, counting throughput after
/// `warmup`; `progress(seed)` gives each run's progress callback.
pub fn run_tcp_seeds<P: FnMut(f64)>(
    scn: &Scenario,
    first: u64,
    seeds: u32,
    warmup: Ps,
    mut progress: impl FnMut(u64) -> P,
) -> Result<Vec<TcpRun>, SimError> {
    seed_list(first, seeds)
        .map(|s| run_tcp(scn, s, warmup, &mut progress(s)))
        .collect()
}

/// True when no run of any seed produced an estimate (the command's
/// "no estimate" exit).
pub fn no_estimate(runs: &[MethodRun]) -> bool {
    runs.iter()
        .all(|r| r.samples.iter().all(|s| s.estimate.is_none()))
}
