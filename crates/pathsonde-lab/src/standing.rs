//! Standing labs: `lab up` leaves a path in service for any program to use,
//! `lab truth` reads its truth series so far, `lab down` takes it away.
//!
//! A holder process (`pathsonde lab hold NAME`, started detached by `lab up`)
//! builds the path, runs the server, the cross traffic and the sampler, and
//! writes into `/run/pathsonde/labs/NAME/`:
//! - `request.json` (written by `lab up`): what to build;
//! - `info.json`: namespaces and addresses, once the path is ready;
//! - `truth.jsonl`: one line of truth every 100 ms;
//! - `holder.log`: the holder's stderr, which `lab up` shows if it fails.
//!
//! The holder removes the path and the directory on SIGTERM or SIGINT.
//!
//! A request with a chain plan (`lab up --hops N --tight-at K …`) builds the
//! multi-hop path of `lab run --method hops` instead; its truth lines give
//! every link (`chain`).

pub mod chain;

use crate::error::{LabError, Result};
use crate::live::LivePath;
use crate::run::parse_cross;
use crate::topology::{addr, Lab, LabSpec, Role};
use pathsonde_core::units::serde_secs;
use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_net::clock;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

const STATE_ROOT: &str = "/run/pathsonde/labs";

pub fn state_dir(name: &str) -> PathBuf {
    PathBuf::from(STATE_ROOT).join(name)
}

/// What `lab up` asks the holder to build.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub spec: LabSpec,
    pub cross: Vec<String>,
    pub seed: u64,
    /// A chain of routers instead of the two-host path (`spec` then only
    /// names the lab).
    #[serde(default)]
    pub chain: Option<crate::hops_lab::HopsLabPlan>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NamespaceInfo {
    pub role: String,
    pub namespace: String,
    pub address: Option<String>,
}

/// What a standing lab offers, printed by `lab up --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Info {
    pub name: String,
    pub holder_pid: u32,
    pub namespaces: Vec<NamespaceInfo>,
    /// The pathsonde server in the receiver namespace.
    pub server: String,
    /// The UDPST server (`pathsonde capacity`, OB-UDPST's `udpst`) in the
    /// receiver namespace; absent in the state of a lab started by an
    /// older pathsonde.
    #[serde(default)]
    pub udpst_server: Option<String>,
    pub capacity_bps: BitRate,
    pub cross: Vec<String>,
    pub truth_file: String,
    /// A standing chain's routers and plan; absent for the two-host path.
    #[serde(default)]
    pub chain: Option<chain::ChainInfo>,
}

/// One line of `truth.jsonl`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct TruthLine {
    /// Since the holder started the traffic (seconds in JSON).
    #[serde(with = "serde_secs")]
    pub t_s: DurationNs,
    /// CLOCK_MONOTONIC at this line, ns (to align with other programs' stamps).
    pub monotonic_ns: i64,
    /// Cross traffic offered over the last interval, L2 (as tbf counts it).
    pub cross_l2_bps: BitRate,
    /// A at the IP layer for 1500-byte packets over the last interval.
    pub available_bps: BitRate,
    /// The tight link's qdisc counters (cumulative) and backlog.
    pub qdisc_bytes: u64,
    pub qdisc_packets: u64,
    pub qdisc_drops: u64,
    pub qdisc_backlog_bytes: u64,
}

fn io(ctx: String) -> impl FnOnce(std::io::Error) -> LabError {
    move |e| LabError::io(ctx, e)
}

/// Writes the request for a new standing lab; refuses if one exists.
pub fn prepare(req: &Request) -> Result<PathBuf> {
    match &req.chain {
        Some(plan) => plan.validate().map_err(LabError::Spec)?,
        None => {
            req.spec.validate()?;
            parse_cross(&req.spec, &req.cross)?;
        }
    }
    let dir = state_dir(&req.spec.name);
    if dir.exists() {
        return Err(LabError::Exists(req.spec.name.clone()));
    }
    std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
    let text = serde_json::to_string_pretty(req).expect("plain data serialises");
    std::fs::write(dir.join("request.json"), text).map_err(io("writing the lab request".into()))?;
    Ok(dir)
}

fn namespace_table(lab: &Lab) -> Vec<NamespaceInfo> {
    lab.spec
        .roles()
        .into_iter()
        .map(|role| NamespaceInfo {
            role: role.suffix(),
            namespace: lab.ns(role),
            address: match role {
                Role::Sender => Some(addr::SENDER.to_string()),
                Role::Receiver => Some(addr::RECEIVER.to_string()),
                Role::CrossSink => Some(addr::CROSS_SINK.to_string()),
                Role::Cross(i) => Some(addr::cross(i).to_string()),
                Role::Router | Role::Router2 => None,
            },
        })
        .collect()
}

/// The holder: builds and serves the lab until `stop` is set.
pub fn hold(name: &str, stop: &AtomicBool) -> Result<()> {
    let dir = state_dir(name);
    crate::registry::remember_dir(&dir);
    let text = std::fs::read_to_string(dir.join("request.json"))
        .map_err(io(format!("reading the request of lab {name}")))?;
    let req: Request = serde_json::from_str(&text)
        .map_err(|e| LabError::Spec(format!("lab {name}: bad request file: {e}")))?;
    if let Some(plan) = &req.chain {
        chain::hold(name, &dir, plan, stop)?;
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(());
    }
    let models = parse_cross(&req.spec, &req.cross)?;
    let mut spec = req.spec.clone();
    spec.cross_sources = models.len() as u32;
    let lab = Lab::build(spec)?;
    // Anything run across a standing lab is assumed to send at most twice
    // the tight link's rate through the delay line.
    let live = LivePath::start(&lab, &models, req.seed, lab.spec.capacity.scale(2.0))?;
    let info = Info {
        name: name.to_string(),
        holder_pid: std::process::id(),
        namespaces: namespace_table(&lab),
        server: LivePath::server_addr().to_string(),
        udpst_server: Some(LivePath::udpst_addr().to_string()),
        capacity_bps: lab.spec.capacity,
        cross: models.iter().map(|m| m.describe()).collect(),
        truth_file: dir.join("truth.jsonl").display().to_string(),
        chain: None,
    };
    let mut truth = std::fs::File::create(dir.join("truth.jsonl"))
        .map_err(io("creating the truth file".into()))?;
    publish(&dir, &info)?;

    let start = clock::monotonic();
    let step = DurationNs::from_ms(100);
    let mut prev = start;
    while !stop.load(Ordering::SeqCst) {
        let next = prev + step;
        clock::wait_until(next);
        let w = live.truth(&lab, prev, next, Bytes(1500));
        if let Some(q) = live.qdisc_samples().last().copied() {
            let line = TruthLine {
                t_s: next.since(start),
                monotonic_ns: next.ns(),
                cross_l2_bps: w.cross_l2,
                available_bps: w.available,
                qdisc_bytes: q.bytes,
                qdisc_packets: q.packets,
                qdisc_drops: q.drops,
                qdisc_backlog_bytes: q.backlog_bytes,
            };
            let _ = writeln!(
                truth,
                "{}",
                serde_json::to_string(&line).expect("plain data")
            );
        }
        prev = next;
    }
    let _ = live.stop();
    drop(lab);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Writes `info.json`, last: its existence means "ready".
fn publish(dir: &std::path::Path, info: &Info) -> Result<()> {
    let tmp = dir.join("info.json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_string_pretty(info).expect("plain data"),
    )
    .map_err(io("writing the lab info".into()))?;
    std::fs::rename(&tmp, dir.join("info.json")).map_err(io("publishing the lab info".into()))
}

/// Why a prepared lab did not come up; `lab up` takes down what was
/// prepared and reports this in these words.
#[derive(Debug, thiserror::Error)]
pub enum HolderError {
    /// The holder's log file could not be made.
    #[error("creating {}: {source}", path.display())]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The running program, which is the holder, could not be found.
    #[error("finding this program: {0}")]
    Program(#[source] std::io::Error),
    #[error("starting the lab holder: {0}")]
    Start(#[source] std::io::Error),
    /// The holder ended before the lab was ready; `log` is its stderr.
    #[error("the lab holder exited ({status}): {log}")]
    Exited {
        status: std::process::ExitStatus,
        log: String,
    },
    #[error("the lab did not come up within 30 s")]
    Timeout,
}

/// Starts this program with `args` (the holder: `lab hold NAME`) detached
/// in its own process group, its stderr in the lab's `holder.log`, and
/// waits up to 30 s for it to say the lab `name` is ready (`info.json`).
/// The lab must have been [`prepare`]d.
pub fn start_holder(name: &str, args: &[&str]) -> std::result::Result<Info, HolderError> {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};
    let log_path = state_dir(name).join("holder.log");
    let log = std::fs::File::create(&log_path).map_err(|source| HolderError::Log {
        path: log_path.clone(),
        source,
    })?;
    let exe = std::env::current_exe().map_err(HolderError::Program)?;
    let mut child = std::process::Command::new(exe)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(HolderError::Start)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(info) = read_info(name) {
            return Ok(info);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let why = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Err(HolderError::Exited {
                status,
                log: why.trim().to_string(),
            });
        }
        if Instant::now() > deadline {
            return Err(HolderError::Timeout);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn read_info(name: &str) -> Result<Info> {
    let p = state_dir(name).join("info.json");
    let text = std::fs::read_to_string(&p).map_err(|_| LabError::NoSuchLab(name.to_string()))?;
    serde_json::from_str(&text).map_err(|e| LabError::Spec(format!("{}: {e}", p.display())))
}

/// The truth series so far (lines that do not parse, e.g. a half-written
/// last line, are skipped).
pub fn read_truth(name: &str) -> Result<Vec<TruthLine>> {
    read_lines(name)
}

/// The truth file's lines that parse as `T`.
fn read_lines<T: serde::de::DeserializeOwned>(name: &str) -> Result<Vec<T>> {
    let p = state_dir(name).join("truth.jsonl");
    let text = std::fs::read_to_string(&p).map_err(|_| LabError::NoSuchLab(name.to_string()))?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

fn alive(pid: u32) -> bool {
    PathBuf::from(format!("/proc/{pid}")).exists()
}

/// Stops a standing lab's holder (SIGTERM, then SIGKILL after 10 s) and
/// removes whatever it leaves: namespaces and the state directory.
pub fn take_down(name: &str) -> Result<()> {
    if let Ok(info) = read_info(name) {
        let pid = info.holder_pid;
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while alive(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        if alive(pid) {
            // SAFETY: as above.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
    let _ = std::fs::remove_dir_all(state_dir(name));
    match crate::topology::down(name) {
        Ok(_) | Err(LabError::NoSuchLab(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Takes down lab `name` (`lab down NAME`), whether `lab up` left it
/// standing or a run that did not finish left its namespaces behind, and
/// returns the namespaces it had.
pub fn remove(name: &str) -> Result<Vec<String>> {
    let known = standing_names().iter().any(|n| n == name)
        || crate::topology::standing_labs()?
            .iter()
            .any(|(l, _)| l == name);
    if !known {
        return Err(LabError::NoSuchLab(name.to_string()));
    }
    let before = crate::topology::standing_labs()?;
    take_down(name)?;
    Ok(before
        .into_iter()
        .filter(|(l, _)| l == name)
        .flat_map(|(_, ns)| ns)
        .collect())
}

/// Takes down every standing lab and removes every `pathsonde-` namespace,
/// whatever lab it belonged to (`lab down --all`); returns the namespaces.
pub fn remove_all() -> Result<Vec<String>> {
    for n in standing_names() {
        take_down(&n)?;
    }
    crate::topology::down_all()
}

/// Names of labs that have a state directory.
pub fn standing_names() -> Vec<String> {
    std::fs::read_dir(STATE_ROOT)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A standing chain's truth so far (lines that do not parse are skipped,
/// as in [`read_truth`]).
pub fn read_chain_truth(name: &str) -> Result<Vec<chain::ChainTruthLine>> {
    read_lines(name)
}

/// A path's capacity for a report line.
pub fn describe(info: &Info) -> String {
    if let Some(c) = &info.chain {
        return format!(
            "{}: {} routers, tight link {} ({} Mb/s, cross traffic: {}){}{}; hops target {}, server {}",
            info.name,
            c.plan.routers,
            c.plan.tight_at,
            c.plan.tight_rate.mbps(),
            c.plan.cross,
            c.plan.narrow_at.map_or(String::new(), |m| format!(
                ", narrow link {m} ({} Mb/s, idle)",
                c.plan.narrow_rate.mbps()
            )),
            if c.plan.silent.is_empty() {
                String::new()
            } else {
                format!(
                    ", silent routers {}",
                    c.plan
                        .silent
                        .iter()
                        .map(|k| k.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                )
            },
            c.target,
            info.server
        );
    }
    format!(
        "{}: tight link {}, cross traffic: {}; server {}{}",
        info.name,
        info.capacity_bps,
        if info.cross.is_empty() {
            "none".into()
        } else {
            info.cross.join("; ")
        },
        info.server,
        info.udpst_server
            .as_ref()
            .map_or(String::new(), |u| format!(", UDPST server {u}"))
    )
}
