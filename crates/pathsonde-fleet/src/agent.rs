//! The agent (`pathsonde agent`, docs/monitoring.md and docs/fleet.md):
//! regular testing of peers, perfSONAR's idea.  Here are its parts that need
//! no command line: the config ([`config`]), the state its metrics show
//! ([`status`]), the mesh agent's loop ([`mesh_agent`]) and the single-host
//! agent's rotation through its peers, an interval plus a random jitter
//! each so that many agents do not probe in step, one measurement at a time
//! (two at once would each see the other as cross traffic).  The CLI
//! measures, archives and prints.

pub mod config;
pub mod mesh_agent;
pub mod status;

pub use config::{load, load_for_mesh, Config, ConfigError, LoadError, Peer};
pub use status::Status;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where the agent serves `/metrics` when neither the command line nor the
/// config says.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9310";

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
pub struct Rotation {
    due: Vec<Instant>,
    done: Vec<u32>,
    rounds: Option<u32>,
    rng: Jitter,
}

impl Rotation {
    /// `peers` peers, all due now; each measured `rounds` times, or forever.
    pub fn new(peers: usize, rounds: Option<u32>) -> Rotation {
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
    pub fn next(&self) -> Option<(usize, Instant)> {
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
    pub fn measured(&mut self, i: usize, peer: &Peer, started: Instant) {
        self.done[i] += 1;
        let j = peer.jitter.as_secs_f64() * self.rng.next();
        let next = (peer.interval.as_secs_f64() + j).max(0.0);
        self.due[i] = started + Duration::from_secs_f64(next);
    }
}
