//! What keeps one throughput flow's data movers in line while they run: a
//! shared stop flag (set when the session's deadline passes, when the
//! flow's byte allowance is used, when a receiver sees the peer exceed the
//! rate limit, or when one of the stream threads panics), and on the server
//! a token bucket that holds every sender — and every TCP reader, whose
//! pace TCP's flow control passes back to the remote sender — to the
//! session's `max_rate`.
//!
//! The client uses an unlimited gate (its own stop flag only): the limits
//! are the server's defence against its clients, not the client's against
//! itself.

use crate::limits::LimitExceeded;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest a sender or reader waits for tokens (or sleeps between bursts)
/// before looking at the stop flag again: a stopped flow ends within this.
pub const STOP_POLL: Duration = Duration::from_millis(10);

/// The token bucket's depth, as time at the limit: the most a flow can move
/// at once beyond its average.  Short, so "never faster than max_rate" holds
/// over any span much longer than this.
const BUCKET_TIME: Duration = Duration::from_millis(5);

/// A receiver's average rate is judged only over spans at least this long
/// (shorter ones are burst noise), and ends the flow only above
/// [`RECEIVE_RATE_SLACK`] × the limit: the client paces to the rate it was
/// allowed, and scheduling jitter must not end an honest flow.
const RECEIVE_RATE_SPAN: Duration = Duration::from_secs(1);
const RECEIVE_RATE_SLACK: f64 = 1.25;

/// The server's limits on one flow.
#[derive(Debug, Clone, Copy)]
pub struct GateLimits {
    /// The fastest the flow may move, IP bits/s.
    pub rate_bps: f64,
    /// IP bytes charged to the session for this flow; the flow stops when
    /// they are used.
    pub allowance: u64,
    /// Whether the allowance is less than the flow could otherwise move (a
    /// TCP flow cut to the session's remaining bytes): using it up then
    /// ends the flow early and the report says so.
    pub capped: bool,
    /// The session's end: nothing moves after it.
    pub deadline: Instant,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    depth: f64,
    /// Bytes/s.
    rate: f64,
    last: Instant,
}

#[derive(Debug)]
struct Tally {
    bucket: Option<Bucket>,
    /// IP bytes charged so far (sent, granted to a reader, or received).
    used: u64,
    first_received: Option<Instant>,
}

/// One flow's shared stop flag and, on the server, its limits.
#[derive(Debug)]
pub struct FlowGate {
    stop: AtomicBool,
    limits: Option<GateLimits>,
    tally: Mutex<Tally>,
    reason: Mutex<Option<String>>,
}

impl FlowGate {
    /// A gate with only the stop flag (the client's side).
    pub fn unlimited() -> FlowGate {
        FlowGate {
            stop: AtomicBool::new(false),
            limits: None,
            tally: Mutex::new(Tally {
                bucket: None,
                used: 0,
                first_received: None,
            }),
            reason: Mutex::new(None),
        }
    }

    /// A gate holding a flow to `limits`; `largest_unit` is the most IP
    /// bytes one send may need at once (one datagram), which the bucket
    /// must be able to hold.
    pub fn limited(limits: GateLimits, largest_unit: u64) -> FlowGate {
        let rate = limits.rate_bps / 8.0;
        let depth = (rate * BUCKET_TIME.as_secs_f64()).max(largest_unit as f64);
        FlowGate {
            stop: AtomicBool::new(false),
            limits: Some(limits),
            tally: Mutex::new(Tally {
                bucket: Some(Bucket {
                    tokens: depth,
                    depth,
                    rate,
                    last: Instant::now(),
                }),
                used: 0,
                first_received: None,
            }),
            reason: Mutex::new(None),
        }
    }

    /// Stops every mover of the flow, keeping the first reason given.
    pub fn stop_because(&self, why: impl Into<String>) {
        let mut r = self.reason.lock().unwrap_or_else(|p| p.into_inner());
        r.get_or_insert_with(|| why.into());
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Whether the movers must stop: told to, or the session's time is up.
    pub fn stopped(&self) -> bool {
        if self.stop.load(Ordering::SeqCst) {
            return true;
        }
        match self.limits {
            Some(l) if Instant::now() >= l.deadline => {
                self.stop_because("session limit: the session's time ran out during the flow");
                true
            }
            _ => false,
        }
    }

    /// Why the flow was stopped early, if it was.
    pub fn reason(&self) -> Option<String> {
        self.reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// IP bytes charged through this gate.
    pub fn used(&self) -> u64 {
        self.tally().used
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks to move up to `units` units of `unit_cost` IP bytes each; waits
    /// (in slices of [`STOP_POLL`]) until the rate allows at least one, and
    /// returns how many may go now — 0 when the mover must stop instead
    /// (the flow stopped, the session's deadline or the mover's own `until`
    /// passed, or the flow's allowance is used).
    pub fn take(&self, units: u64, unit_cost: u64, until: Instant) -> u64 {
        let unit_cost = unit_cost.max(1);
        loop {
            if units == 0 || self.stopped() || Instant::now() >= until {
                return 0;
            }
            let Some(limits) = self.limits else {
                return units;
            };
            let mut t = self.tally();
            let left = limits.allowance.saturating_sub(t.used) / unit_cost;
            if left == 0 {
                drop(t);
                self.allowance_used(limits);
                return 0;
            }
            let b = t.bucket.as_mut().expect("a limited gate has a bucket");
            let now = Instant::now();
            b.tokens = (b.tokens + now.duration_since(b.last).as_secs_f64() * b.rate).min(b.depth);
            b.last = now;
            let affordable = (b.tokens / unit_cost as f64) as u64;
            if affordable > 0 {
                let n = units.min(left).min(affordable);
                b.tokens -= (n * unit_cost) as f64;
                t.used += n * unit_cost;
                return n;
            }
            let wait = (unit_cost as f64 - b.tokens) / b.rate.max(1.0);
            drop(t);
            std::thread::sleep(Duration::from_secs_f64(wait).min(STOP_POLL));
        }
    }

    /// Returns units taken but not moved (a read that got less than it
    /// asked for), to the bucket and to the allowance.
    pub fn give_back(&self, units: u64, unit_cost: u64) {
        if self.limits.is_none() || units == 0 {
            return;
        }
        let mut t = self.tally();
        let bytes = units * unit_cost;
        t.used = t.used.saturating_sub(bytes);
        if let Some(b) = t.bucket.as_mut() {
            b.tokens = (b.tokens + bytes as f64).min(b.depth);
        }
    }

    /// Counts `bytes` (IP bytes) a receiver got that it could not hold back
    /// (UDP): false, and the flow stopped with the limit named, once they
    /// pass the allowance or arrive faster than the limit allows.
    pub fn note_received(&self, bytes: u64, now: Instant) -> bool {
        if self.stopped() {
            return false;
        }
        let Some(limits) = self.limits else {
            return true;
        };
        let mut t = self.tally();
        t.used = t.used.saturating_add(bytes);
        let first = *t.first_received.get_or_insert(now);
        let used = t.used;
        drop(t);
        if used > limits.allowance {
            self.stop_because(
                LimitExceeded::Bytes {
                    used: limits.allowance,
                    wanted: used - limits.allowance,
                    max: limits.allowance,
                }
                .to_string()
                    + " (the bytes charged to this flow)",
            );
            return false;
        }
        let span = now.saturating_duration_since(first);
        if span >= RECEIVE_RATE_SPAN {
            let rate = used as f64 * 8.0 / span.as_secs_f64();
            if rate > limits.rate_bps * RECEIVE_RATE_SLACK {
                self.stop_because(
                    LimitExceeded::Rate {
                        what: "the flow",
                        rate_mbps: rate / 1e6,
                        max_mbps: limits.rate_bps / 1e6,
                    }
                    .to_string(),
                );
                return false;
            }
        }
        true
    }

    fn allowance_used(&self, limits: GateLimits) {
        if limits.capped {
            self.stop_because(format!(
                "session limit: the flow ended early, having used the {} bytes left to the session",
                limits.allowance
            ));
        } else {
            // The flow moved all it asked for: a normal end.
            self.stop.store(true, Ordering::SeqCst);
        }
    }
}

/// Stops the flow if the thread holding it unwinds: a stream that panics
/// must not leave the others sending until their deadline (or a scope
/// waiting on them).
pub struct StopOnPanic<'a>(pub &'a FlowGate);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0
                .stop_because("a stream's thread failed (panicked); the flow was stopped");
        }
    }
}

/// Runs `mover` on every item in its own scoped thread, each guarded by
/// [`StopOnPanic`], and collects the results of those that did not panic.
pub fn run_streams<T, R, F>(gate: &FlowGate, items: Vec<T>, mover: F) -> Vec<R>
where
    T: Send,
    R: Send,
    F: Fn(T) -> R + Sync,
{
    std::thread::scope(|s| {
        let mover = &mover;
        let handles: Vec<_> = items
            .into_iter()
            .map(|item| {
                s.spawn(move || {
                    let _guard = StopOnPanic(gate);
                    mover(item)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

/// Sleeps until `when` (but never past `until`), waking every
/// [`STOP_POLL`] to see whether the flow was stopped.  False if it was, or
/// `until` came first.
pub fn sleep_until(gate: &FlowGate, when: Instant, until: Instant) -> bool {
    loop {
        if gate.stopped() {
            return false;
        }
        let now = Instant::now();
        if now >= until {
            return false;
        }
        if now >= when {
            return true;
        }
        std::thread::sleep((when.min(until) - now).min(STOP_POLL));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(rate_bps: f64, allowance: u64, capped: bool) -> GateLimits {
        GateLimits {
            rate_bps,
            allowance,
            capped,
            deadline: Instant::now() + Duration::from_secs(30),
        }
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[test]
    fn a_mover_past_its_own_end_gets_nothing() {
        let g = FlowGate::limited(limits(1e3, u64::MAX, false), 1000);
        assert_eq!(g.take(1, 1000, Instant::now()), 0);
        // At 1 kb/s a second unit would take 8 s: the mover's end comes first.
        assert_eq!(g.take(1, 1000, far()), 1);
        let t0 = Instant::now();
        assert_eq!(g.take(1, 1000, t0 + Duration::from_millis(50)), 0);
        assert!(t0.elapsed() < Duration::from_secs(1));
        assert!(!g.stopped(), "one mover's end is not the flow's");
    }

    #[test]
    fn the_bucket_holds_a_sender_to_the_rate() {
        // 8 Mb/s = 1 MB/s; 1000-byte units: ~200 units in 0.2 s.
        let g = FlowGate::limited(limits(8e6, u64::MAX, false), 1000);
        let t0 = Instant::now();
        let mut sent = 0;
        while t0.elapsed() < Duration::from_millis(200) {
            sent += g.take(64, 1000, far());
        }
        let secs = t0.elapsed().as_secs_f64();
        // The bucket starts full (5 ms); nothing beyond that and the rate.
        assert!(
            (sent * 1000) as f64 <= 5_000.0 + 1e6 * secs + 1000.0,
            "{sent} units in {secs} s"
        );
        assert_eq!(g.used(), sent * 1000);
    }

    #[test]
    fn the_allowance_ends_the_flow_and_a_cut_one_says_so() {
        let g = FlowGate::limited(limits(1e12, 10_000, false), 1000);
        assert_eq!(g.take(64, 1000, far()), 10);
        assert_eq!(g.take(1, 1000, far()), 0);
        assert!(
            g.stopped() && g.reason().is_none(),
            "an uncut flow ends quietly"
        );
        let g = FlowGate::limited(limits(1e12, 10_000, true), 1000);
        assert_eq!(g.take(64, 1000, far()), 10);
        assert_eq!(g.take(1, 1000, far()), 0);
        assert!(g.reason().unwrap().contains("session limit"));
        let g = FlowGate::limited(limits(1e12, 10_000, true), 1000);
        assert_eq!(g.take(10, 1000, far()), 10);
        g.give_back(4, 1000);
        assert_eq!(g.used(), 6000);
        assert_eq!(g.take(10, 1000, far()), 4);
    }

    #[test]
    fn a_receiver_is_stopped_past_its_bytes_or_its_rate() {
        let t0 = Instant::now();
        let g = FlowGate::limited(limits(8e6, 5000, false), 1000);
        assert!(g.note_received(5000, t0));
        assert!(!g.note_received(1, t0));
        assert!(
            g.reason().unwrap().contains("session limit"),
            "{:?}",
            g.reason()
        );
        // 8 Mb/s allowed; 2 MB in 1 s is 16 Mb/s.
        let g = FlowGate::limited(limits(8e6, u64::MAX, false), 1000);
        assert!(g.note_received(1_000_000, t0));
        assert!(!g.note_received(1_000_000, t0 + Duration::from_secs(1)));
        assert!(g.reason().unwrap().contains("16 Mb/s"), "{:?}", g.reason());
    }

    #[test]
    fn the_deadline_stops_the_flow() {
        let mut l = limits(1e9, u64::MAX, false);
        l.deadline = Instant::now();
        let g = FlowGate::limited(l, 1000);
        assert_eq!(g.take(1, 1000, far()), 0);
        assert!(g.reason().unwrap().contains("time ran out"));
    }

    #[test]
    fn a_panicking_stream_stops_the_others_and_the_scope_returns() {
        let gate = FlowGate::unlimited();
        let t0 = Instant::now();
        let done = run_streams(&gate, vec![0, 1, 2], |i| {
            if i == 1 {
                std::thread::sleep(Duration::from_millis(20));
                panic!("injected: stream 1 fails");
            }
            // The others would run for 30 s unless stopped.
            sleep_until(
                &gate,
                t0 + Duration::from_secs(30),
                t0 + Duration::from_secs(30),
            );
            i
        });
        assert_eq!(done, vec![0, 2]);
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert!(gate.reason().unwrap().contains("panicked"));
        // A normal end stops nothing.
        let gate = FlowGate::unlimited();
        assert_eq!(run_streams(&gate, vec![1, 2], |i| i), vec![1, 2]);
        assert!(!gate.stopped());
    }
}
