//! `pathsonde agent --config FILE`: regular testing (perfSONAR's idea, on
//! one host).  Measures each listed peer on its own schedule — interval plus
//! a random jitter so that many agents do not probe in step — one
//! measurement at a time (two at once would each see the other as cross
//! traffic), archives every result, and serves the latest per peer and
//! method as Prometheus metrics (docs/monitoring.md).

mod mesh;

use crate::metrics::{Exposition, MetricsServer};
use crate::{archive_cmd, output, Failure};
use clap::Subcommand;
use pathsonde_archive::Record;
use pathsonde_core::methods::registry::MethodSettings;
use pathsonde_core::{BitRate, DurationNs};
use pathsonde_net::client::{self, ClientConfig};
use pathsonde_net::MeasurementRun;
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Subcommand)]
pub enum AgentCommand {
    /// Measure the peers of a TOML config (or, with --mesh, this host's
    /// tests of a fleet's mesh file) on a schedule, archive every result,
    /// and serve the latest as Prometheus metrics (docs/monitoring.md,
    /// docs/fleet.md).
    Agent {
        /// The TOML config: peers, method, interval, jitter (docs/monitoring.md).
        /// With --mesh: only its listen, timeout and archive are used.
        #[arg(long, required_unless_present = "mesh")]
        config: Option<PathBuf>,
        /// Run the tests this host originates in a mesh file, with leases
        /// and recorded skips in a PostgreSQL archive (docs/fleet.md).
        #[arg(long, value_name = "FILE", requires = "name")]
        mesh: Option<PathBuf>,
        /// This host's name in the mesh file.
        #[arg(long, value_name = "HOST", requires = "mesh")]
        name: Option<String>,
        /// With --mesh: where results wait while the database is
        /// unreachable [default: $XDG_STATE_HOME/pathsonde/spool/HOST].
        #[arg(long, value_name = "DIR", requires = "mesh")]
        spool: Option<PathBuf>,
        /// Serve metrics here (overrides the config's `listen`).
        #[arg(long)]
        metrics: Option<SocketAddr>,
        /// Stop after measuring every peer this many times (default: run until stopped).
        #[arg(long)]
        rounds: Option<u32>,
        #[command(flatten)]
        save: crate::args::SaveFlags,
    },
}

impl AgentCommand {
    /// Where the agent archives its results.
    pub fn save(&self) -> &crate::args::SaveFlags {
        let AgentCommand::Agent { save, .. } = self;
        save
    }
}

/// The config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where to serve `/metrics` (default 127.0.0.1:9310).
    pub listen: Option<SocketAddr>,
    /// Default method for every peer (default fac2).
    pub method: Option<String>,
    /// Default time between two measurements of one peer, e.g. "5m" (default "60s").
    pub interval: Option<String>,
    /// Up to this much is added to or taken from each interval at random (default "0s").
    pub jitter: Option<String>,
    /// Default first-train rate, e.g. "1G".
    pub max_rate: Option<String>,
    /// Default tight-link capacity the user knows, e.g. "300M" (as
    /// `abw --known-capacity`); unset: the methods measure it.
    pub known_capacity: Option<String>,
    /// Seconds to wait for any answer (default 3).
    pub timeout: Option<f64>,
    /// Where to archive results: a SQLite file or a PostgreSQL URL without
    /// a password (docs/fleet.md); `--archive` wins over it, and it over
    /// `$PATHSONDE_ARCHIVE`.
    pub archive: Option<String>,
    #[serde(rename = "peer", default)]
    pub peers: Vec<PeerConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// The `peer` label (default host:port).
    pub name: Option<String>,
    pub host: String,
    /// Default 5310.
    pub port: Option<u16>,
    pub method: Option<String>,
    pub interval: Option<String>,
    pub jitter: Option<String>,
    pub max_rate: Option<String>,
    pub known_capacity: Option<String>,
}

/// One peer, ready to measure.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub(crate) name: String,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) method: String,
    pub(crate) interval: Duration,
    pub(crate) jitter: Duration,
    /// What the peer's method is told (max rate, known capacity).
    pub(crate) settings: MethodSettings,
    /// The key the peer's `serve` asks for, when it asks for one.
    pub(crate) key: Option<pathsonde_net::auth::Key>,
}

pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:9310";

fn bad(msg: String) -> Failure {
    crate::usage(msg)
}

fn duration(field: &str, s: &str) -> Result<Duration, Failure> {
    let d: DurationNs = s.parse().map_err(|e| bad(format!("{field}: {e}")))?;
    Ok(d.to_std())
}

/// Reads and checks the config; every mistake is a usage error naming the field.
fn load(path: &Path) -> Result<(Config, Vec<Peer>), Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad(format!("reading {}: {e}", path.display())))?;
    let cfg: Config = toml::from_str(&text).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    if cfg.peers.is_empty() {
        return Err(bad(format!("{}: no [[peer]] to measure", path.display())));
    }
    if let Some(t) = cfg.timeout {
        if !(t.is_finite() && t > 0.0 && t <= 3600.0) {
            return Err(bad(format!("timeout {t} must be in (0, 3600] seconds")));
        }
    }
    let mut peers = Vec::new();
    for (i, p) in cfg.peers.iter().enumerate() {
        let port = p.port.unwrap_or(crate::DEFAULT_PORT);
        let interval = match p.interval.as_ref().or(cfg.interval.as_ref()) {
            Some(s) => duration(&format!("peer {i} interval"), s)?,
            None => Duration::from_secs(60),
        };
        let jitter = match p.jitter.as_ref().or(cfg.jitter.as_ref()) {
            Some(s) => duration(&format!("peer {i} jitter"), s)?,
            None => Duration::ZERO,
        };
        if interval < Duration::from_millis(100) {
            return Err(bad(format!("peer {i}: interval below 100ms")));
        }
        let rate = |field: &str, v: Option<&String>| -> Result<Option<BitRate>, Failure> {
            v.map(|s| {
                crate::args::positive_rate(s).map_err(|e| bad(format!("peer {i} {field}: {e}")))
            })
            .transpose()
        };
        let max_rate = rate("max_rate", p.max_rate.as_ref().or(cfg.max_rate.as_ref()))?;
        let known_capacity = rate(
            "known_capacity",
            p.known_capacity.as_ref().or(cfg.known_capacity.as_ref()),
        )?;
        let settings = crate::settings::settings_of(
            max_rate.unwrap_or_else(crate::settings::default_max_rate),
            pathsonde_core::Bytes(1500),
            known_capacity,
        );
        let method = p
            .method
            .clone()
            .or_else(|| cfg.method.clone())
            .unwrap_or_else(|| "fac2".into());
        // Refuse an unknown method now, not at the first measurement.
        crate::settings::method_by_name(&method, &settings)?;
        let name = p
            .name
            .clone()
            .unwrap_or_else(|| format!("{}:{port}", p.host));
        if peers
            .iter()
            .any(|q: &Peer| q.name == name && q.method == method)
        {
            return Err(bad(format!(
                "peer {name} with method {method} is listed twice"
            )));
        }
        peers.push(Peer {
            name,
            host: p.host.clone(),
            port,
            method,
            interval,
            jitter,
            settings,
            key: None,
        });
    }
    Ok((cfg, peers))
}

/// What the metrics show about one (peer, method).
#[derive(Debug, Default, Clone)]
pub(crate) struct PeerState {
    pub(crate) last: Option<Latest>,
    pub(crate) measurements: u64,
    pub(crate) failures: BTreeMap<String, u64>,
    pub(crate) last_attempt_unix: Option<f64>,
}

#[derive(Debug, Clone)]
pub(crate) struct Latest {
    available_bps: f64,
    low_bps: f64,
    high_bps: Option<f64>,
    capacity_bps: Option<f64>,
    cross_bps: Option<f64>,
    rtt_s: f64,
    duration_s: f64,
    host_limited: bool,
    converged: bool,
    at_unix: f64,
    archive_id: Option<i64>,
}

/// What the metrics keep of a finished measurement.
pub(crate) fn latest_of(run: &MeasurementRun, archive_id: Option<i64>) -> Latest {
    let e = &run.estimate;
    let verdict = pathsonde_net::verdict::judge(run);
    Latest {
        available_bps: e.available.bps(),
        low_bps: e.low.bps(),
        high_bps: e.high.map(BitRate::bps),
        capacity_bps: e.capacity.map(BitRate::bps),
        cross_bps: e.cross_traffic.map(BitRate::bps),
        rtt_s: run
            .rtt_echo
            .as_ref()
            .unwrap_or(&run.rtt_control)
            .median
            .secs_f64(),
        duration_s: run.duration.secs_f64(),
        host_limited: verdict.is_host_limited() || e.host_limited.is_some(),
        converged: e.converged,
        at_unix: unix_now(),
        archive_id,
    }
}

pub(crate) type State = Arc<Mutex<BTreeMap<(String, String), PeerState>>>;

pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

pub(crate) fn page(state: &State) -> String {
    let st = state.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut e = Exposition::default();
    let labels = |k: &(String, String)| vec![("peer", k.0.clone()), ("method", k.1.clone())];
    let latest = |f: &dyn Fn(&Latest) -> Option<f64>| -> Vec<(Vec<(&str, String)>, f64)> {
        st.iter()
            .filter_map(|(k, s)| s.last.as_ref().and_then(f).map(|v| (labels(k), v)))
            .collect()
    };
    type Reading = fn(&Latest) -> Option<f64>;
    // One gauge per reading of the latest result: name, help, reading.
    let gauges: [(&str, &str, Reading); 11] = [
        (
            "pathsonde_agent_available_bps",
            "Latest available bandwidth estimate, bits/s.",
            |l| Some(l.available_bps),
        ),
        (
            "pathsonde_agent_available_low_bps",
            "Latest estimate's lower bound, bits/s.",
            |l| Some(l.low_bps),
        ),
        (
            "pathsonde_agent_available_high_bps",
            "Latest estimate's upper bound, bits/s (absent when nothing bounds it).",
            |l| l.high_bps,
        ),
        (
            "pathsonde_agent_capacity_bps",
            "Latest tight-link capacity estimate, bits/s (when the method infers it).",
            |l| l.capacity_bps,
        ),
        (
            "pathsonde_agent_cross_traffic_bps",
            "Latest cross-traffic estimate, bits/s (when the method infers it).",
            |l| l.cross_bps,
        ),
        (
            "pathsonde_agent_rtt_seconds",
            "Latest median round-trip time (probe echo, else control), seconds.",
            |l| Some(l.rtt_s),
        ),
        (
            "pathsonde_agent_measurement_duration_seconds",
            "How long the latest measurement took, seconds.",
            |l| Some(l.duration_s),
        ),
        (
            "pathsonde_agent_host_limited",
            "1 when the latest result is bounded by a host, not the path.",
            |l| Some(f64::from(u8::from(l.host_limited))),
        ),
        (
            "pathsonde_agent_converged",
            "1 when the latest measurement met its method's stopping rule.",
            |l| Some(f64::from(u8::from(l.converged))),
        ),
        (
            "pathsonde_agent_last_success_timestamp_seconds",
            "Unix time of the latest successful measurement.",
            |l| Some(l.at_unix),
        ),
        (
            "pathsonde_agent_last_archive_id",
            "Archive id of the latest result (pathsonde show ID).",
            |l| l.archive_id.map(|i| i as f64),
        ),
    ];
    for (name, help, reading) in gauges {
        e.family(name, "gauge", help, &latest(&reading));
    }
    let totals: Vec<_> = st
        .iter()
        .map(|(k, s)| (labels(k), s.measurements as f64))
        .collect();
    e.family(
        "pathsonde_agent_measurements_total",
        "counter",
        "Successful measurements.",
        &totals,
    );
    let mut fails = Vec::new();
    for (k, s) in &st {
        for (kind, n) in &s.failures {
            let mut l = labels(k);
            l.push(("kind", kind.clone()));
            fails.push((l, *n as f64));
        }
    }
    e.family(
        "pathsonde_agent_failures_total",
        "counter",
        "Failed measurements by kind (the exit-code kinds of docs/exit-codes.md).",
        &fails,
    );
    let attempts: Vec<_> = st
        .iter()
        .filter_map(|(k, s)| s.last_attempt_unix.map(|t| (labels(k), t)))
        .collect();
    e.family(
        "pathsonde_agent_last_attempt_timestamp_seconds",
        "gauge",
        "Unix time of the latest attempt, successful or not.",
        &attempts,
    );
    e.finish()
}

/// A small xorshift generator for jitter (no need for cryptographic quality).
struct Jitter(u64);

impl Jitter {
    fn new() -> Self {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ (u64::from(std::process::id()) << 32);
        Jitter(seed | 1)
    }
    /// Uniform in [-1, 1].
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

pub(crate) fn measure(peer: &Peer, timeout: Duration) -> Result<MeasurementRun, Failure> {
    let addr = crate::resolve(&peer.host, peer.port)?;
    let mut method = crate::settings::method_by_name(&peer.method, &peer.settings)?;
    let mut cfg = ClientConfig::new(addr);
    cfg.reply_timeout = timeout;
    cfg.connect_timeout = timeout;
    cfg.key = peer.key.clone();
    Ok(client::measure(cfg, method.as_mut(), &mut |_| {})?)
}

pub fn run(cmd: AgentCommand) -> Result<(), Failure> {
    let AgentCommand::Agent {
        config,
        mesh,
        name,
        spool,
        metrics,
        rounds,
        save,
    } = cmd;
    if let (Some(mesh), Some(name)) = (mesh, name) {
        if save.no_save || save.no_raw {
            return Err(bad(
                "--no-save and --no-raw do not apply with --mesh: every slot of a mesh is kept \
                 (as a run without raw data, or a skip)"
                    .into(),
            ));
        }
        return mesh::run(mesh::MeshArgs {
            mesh,
            name,
            spool,
            config,
            metrics,
            rounds,
        });
    }
    let config =
        config.ok_or_else(|| bad("give --config FILE or --mesh FILE --name HOST".into()))?;
    let (cfg, peers) = load(&config)?;
    if let Some(a) = &cfg.archive {
        archive_cmd::use_config_archive(a)?;
    }
    let timeout = Duration::from_secs_f64(cfg.timeout.unwrap_or(3.0));
    let listen = metrics
        .or(cfg.listen)
        .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("a valid address"));
    let state: State = Arc::new(Mutex::new(BTreeMap::new()));
    for p in &peers {
        state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((p.name.clone(), p.method.clone()), PeerState::default());
    }
    let st2 = state.clone();
    let server =
        MetricsServer::start(listen, Arc::new(move || page(&st2))).map_err(|e| Failure {
            exit: crate::exit::Exit::Internal,
            message: format!("serving metrics on {listen}: {e}"),
        })?;
    let addr = server.local_addr();
    output::event(
        "start",
        json!({ "command": "agent", "metrics": format!("http://{addr}/metrics"), "peers": peers.len() }),
    );
    eprintln!(
        "pathsonde agent: {} peer(s); metrics on http://{addr}/metrics; archive {}",
        peers.len(),
        archive_cmd::archive_location().map_or_else(|f| f.message, |p| p.to_string())
    );
    let mut rng = Jitter::new();
    let start = Instant::now();
    let mut due: Vec<Instant> = vec![start; peers.len()];
    let mut done: Vec<u32> = vec![0; peers.len()];
    loop {
        let pending: Vec<usize> = (0..peers.len())
            .filter(|&i| rounds.map_or(true, |r| done[i] < r))
            .collect();
        let Some(&i) = pending.iter().min_by_key(|&&i| due[i]) else {
            break;
        };
        let now = Instant::now();
        if due[i] > now {
            std::thread::sleep(due[i] - now);
        }
        let p = &peers[i];
        let started = Instant::now();
        let outcome = measure(p, timeout);
        let key = (p.name.clone(), p.method.clone());
        match outcome {
            Ok(run) => {
                let mut result = crate::report::abw_json(&run, &p.settings);
                if let Some(o) = result.as_object_mut() {
                    o.insert("peer".into(), json!(p.name));
                }
                let rec = Record {
                    kind: "agent".into(),
                    target: p.name.clone(),
                    method: Some(run.estimate.method.to_string()),
                    started: archive_cmd::started_ago(run.duration.to_std()),
                    duration: run.duration.to_std(),
                    summary: archive_cmd::abw_summary(&run),
                    result,
                    raw: None,
                };
                let saved = archive_cmd::save(&rec);
                let id = saved.as_ref().and_then(|s| s["id"].as_i64());
                let latest = latest_of(&run, id);
                {
                    let mut g = state.lock().unwrap_or_else(|p| p.into_inner());
                    let s = g.entry(key).or_default();
                    s.measurements += 1;
                    s.last = Some(latest);
                    s.last_attempt_unix = Some(unix_now());
                }
                output::event(
                    "measurement",
                    json!({ "peer": p.name, "method": p.method, "archive": saved, "summary": rec.summary }),
                );
                if output::mode() == output::Mode::Text {
                    println!(
                        "peer {} ({}): {}{}",
                        p.name,
                        p.method,
                        rec.summary,
                        id.map_or(String::new(), |i| format!(" [run {i}]"))
                    );
                }
            }
            Err(f) => {
                {
                    let mut g = state.lock().unwrap_or_else(|p| p.into_inner());
                    let s = g.entry(key).or_default();
                    *s.failures.entry(f.exit.kind().to_string()).or_default() += 1;
                    s.last_attempt_unix = Some(unix_now());
                }
                output::event(
                    "measurement_error",
                    json!({ "peer": p.name, "method": p.method, "kind": f.exit.kind(), "message": f.message }),
                );
                if output::mode() == output::Mode::Text {
                    println!(
                        "peer {} ({}): failed ({}): {}",
                        p.name,
                        p.method,
                        f.exit.kind(),
                        f.message
                    );
                }
            }
        }
        done[i] += 1;
        let j = p.jitter.as_secs_f64() * rng.next();
        let next = (p.interval.as_secs_f64() + j).max(0.0);
        due[i] = started + Duration::from_secs_f64(next);
    }
    server.stop();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The config shown in docs/monitoring.md loads as it says: `5m` and `1m`
    /// are minutes (core's duration grammar, docs/units.md).
    #[test]
    fn the_documented_config_loads_with_minutes() {
        let doc = include_str!("../../../docs/monitoring.md");
        let start = doc.find("```toml\n").expect("a toml block") + "```toml\n".len();
        let body = &doc[start..start + doc[start..].find("```").unwrap()];
        let path =
            std::env::temp_dir().join(format!("pathsonde-agent-doc-{}.toml", std::process::id()));
        std::fs::write(&path, body).unwrap();
        let loaded = load(&path);
        let _ = std::fs::remove_file(&path);
        let (_, peers) = loaded.unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(peers.len(), 2);
        assert_eq!(peers[0].interval, Duration::from_secs(300));
        assert_eq!(peers[0].jitter, Duration::from_secs(30));
        assert_eq!(peers[1].interval, Duration::from_secs(60));
    }
}
