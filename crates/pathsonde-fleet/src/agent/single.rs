//! The single-host agent (`pathsonde agent --config FILE`): measures each
//! listed peer on its own schedule — interval plus a random jitter so that
//! many agents do not probe in step — one measurement at a time (two at
//! once would each see the other as cross traffic), archives every result
//! and keeps the latest for the metrics page.

use super::{Event, Hooks, Peer, Status};
use pathsonde_archive::Record;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Measures `peers` (waiting at most `timeout` for any answer) until each
/// had `rounds` measurements, or forever; `status` keeps what the metrics
/// show.
pub fn run<H: Hooks>(
    peers: &[Peer],
    timeout: Duration,
    status: &Status,
    rounds: Option<u32>,
    hooks: &mut H,
) {
    let mut rotation = Rotation::new(peers.len(), rounds);
    while let Some((i, started)) = rotation.next() {
        let p = &peers[i];
        match hooks.measure(p, timeout) {
            Ok(run) => {
                let mut result = hooks.result_json(&run, &p.settings);
                if let Some(o) = result.as_object_mut() {
                    o.insert("peer".into(), serde_json::json!(p.name));
                }
                let rec = Record {
                    kind: "agent".into(),
                    target: p.name.clone(),
                    method: Some(run.estimate.method.to_string()),
                    started: pathsonde_archive::started_ago(run.duration.to_std()),
                    duration: run.duration.to_std(),
                    summary: hooks.summary(&run),
                    result,
                    raw: None,
                };
                let saved = hooks.save(&rec);
                let id = saved.as_ref().and_then(|s| s["id"].as_i64());
                status.measured(p, &run, id);
                hooks.event(Event::PeerMeasured {
                    peer: p,
                    archive: saved.as_ref(),
                    summary: &rec.summary,
                });
            }
            Err(failed) => {
                status.failed(p, failed.kind);
                hooks.event(Event::PeerFailed {
                    peer: p,
                    failed: &failed,
                });
            }
        }
        rotation.measured(i, p, started);
    }
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

/// The single-host agent's schedule: each peer is due again its interval
/// (± its jitter) after its last measurement started; the earliest due
/// goes next.
struct Rotation {
    due: Vec<Instant>,
    done: Vec<u32>,
    rounds: Option<u32>,
    rng: Jitter,
}

impl Rotation {
    /// `peers` peers, all due now; each measured `rounds` times, or forever.
    fn new(peers: usize, rounds: Option<u32>) -> Rotation {
        let start = Instant::now();
        Rotation {
            due: vec![start; peers],
            done: vec![0; peers],
            rounds,
            rng: Jitter::new(),
        }
    }

    /// Sleeps until the next peer is due and says which, with when its
    /// measurement starts; none when every peer has had its rounds.
    fn next(&self) -> Option<(usize, Instant)> {
        let pending: Vec<usize> = (0..self.due.len())
            .filter(|&i| self.rounds.map_or(true, |r| self.done[i] < r))
            .collect();
        let &i = pending.iter().min_by_key(|&&i| self.due[i])?;
        let now = Instant::now();
        if self.due[i] > now {
            std::thread::sleep(self.due[i] - now);
        }
        Some((i, Instant::now()))
    }

    /// Peer `i` (of `peer`'s interval and jitter) was measured from `started`.
    fn measured(&mut self, i: usize, peer: &Peer, started: Instant) {
        self.done[i] += 1;
        let j = peer.jitter.as_secs_f64() * self.rng.next();
        let next = (peer.interval.as_secs_f64() + j).max(0.0);
        self.due[i] = started + Duration::from_secs_f64(next);
    }
}
