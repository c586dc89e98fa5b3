//! What the agent's metrics show (docs/monitoring.md): the latest result
//! per peer and method, the successes, the failures by kind and the last
//! attempt, kept as the measurements end and rendered on each scrape as a
//! Prometheus page.  Shared by the single-host and the mesh agent, so both
//! serve the same metrics.

use super::Peer;
use pathsonde_core::BitRate;
use pathsonde_net::metrics::{Exposition, MetricsServer};
use pathsonde_net::MeasurementRun;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

type Peers = BTreeMap<(String, String), PeerState>;

/// The agent's state as its metrics show it; clones share it (the
/// measuring loop writes, the metrics server's threads read).
#[derive(Clone, Default)]
pub struct Status(Arc<Mutex<Peers>>);

impl Status {
    /// Every peer listed, with nothing measured yet.
    pub fn new(peers: &[Peer]) -> Status {
        let status = Status::default();
        for p in peers {
            status
                .lock()
                .insert((p.name.clone(), p.method.clone()), PeerState::default());
        }
        status
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Peers> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A finished measurement of `peer`, archived as `archive_id` if it was.
    pub fn measured(&self, peer: &Peer, run: &MeasurementRun, archive_id: Option<i64>) {
        let latest = latest_of(run, archive_id);
        let mut g = self.lock();
        let s = g
            .entry((peer.name.clone(), peer.method.clone()))
            .or_default();
        s.measurements += 1;
        s.last = Some(latest);
        s.last_attempt_unix = Some(unix_now());
    }

    /// A failed measurement of `peer`, counted under `kind` (an exit-code
    /// kind of docs/exit-codes.md).
    pub fn failed(&self, peer: &Peer, kind: &str) {
        let mut g = self.lock();
        let s = g
            .entry((peer.name.clone(), peer.method.clone()))
            .or_default();
        *s.failures.entry(kind.to_string()).or_default() += 1;
        s.last_attempt_unix = Some(unix_now());
    }

    /// The metrics page now.
    pub fn page(&self) -> String {
        page(&self.0)
    }

    /// Serves the metrics page at `listen` until the server is stopped.
    pub fn serve(&self, listen: SocketAddr) -> std::io::Result<MetricsServer> {
        let status = self.clone();
        MetricsServer::start(listen, Arc::new(move || status.page()))
    }
}

/// What the metrics show about one (peer, method).
#[derive(Debug, Default, Clone)]
struct PeerState {
    last: Option<Latest>,
    measurements: u64,
    failures: BTreeMap<String, u64>,
    last_attempt_unix: Option<f64>,
}

#[derive(Debug, Clone)]
struct Latest {
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
fn latest_of(run: &MeasurementRun, archive_id: Option<i64>) -> Latest {
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

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The status page: the latest result and the counts per (peer, method),
/// in the Prometheus text format.
fn page(state: &Mutex<Peers>) -> String {
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
