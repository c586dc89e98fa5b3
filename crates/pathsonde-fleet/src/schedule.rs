//! The schedule, sans IO: given the tests an agent originates and the time
//! now, which slots are due and which were missed.  No clock, no sleep, no
//! database: the agent asks [`Scheduler::poll`] with `now` and sleeps until
//! [`Scheduler::next_due`]; the tests step time by hand.
//!
//! Slots sit on a grid fixed by the test alone: slot `k` of a test is at
//! `k × interval + phase` since the Unix epoch, the phase a hash of the
//! test's id.  So every agent (and every restart of one) computes the same
//! times without talking to the others, and the tests aimed at one server
//! are spread over the interval instead of all starting on the minute.
//!
//! A slot that passed while the agent was busy (a measurement ran past it)
//! is not dropped: it comes back as [`Action::Missed`], for the agent to
//! record as a skip with that reason.

use crate::mesh::MeshTest;
use crate::UnixMs;

/// One scheduled run of one test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// Index into the tests the scheduler was made with.
    pub test: usize,
    /// When the slot starts.
    pub scheduled: UnixMs,
    /// Names the run (or its skip) wherever it is kept.
    pub run_uuid: String,
}

/// What the agent should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Take the leases and run the test.
    Run(Slot),
    /// The slot passed while the agent was busy: record a skip.
    Missed { slot: Slot, reason: String },
}

impl Action {
    pub fn slot(&self) -> &Slot {
        match self {
            Action::Run(s) | Action::Missed { slot: s, .. } => s,
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    interval_ms: i64,
    phase_ms: i64,
    /// The index of the next slot not yet handed out.
    next: i64,
}

impl Entry {
    fn at(&self, k: i64) -> UnixMs {
        UnixMs(
            k.saturating_mul(self.interval_ms)
                .saturating_add(self.phase_ms),
        )
    }
}

/// The slots of one agent's tests.
#[derive(Debug, Clone)]
pub struct Scheduler {
    entries: Vec<Entry>,
}

/// FNV-1a: a stable hash (the same on every host and every release),
/// unlike std's randomly keyed one.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl Scheduler {
    /// A schedule for `tests` whose first slots are the first grid points
    /// at or after `start` (slots before an agent started are not its).
    pub fn new(tests: &[MeshTest], start: UnixMs) -> Scheduler {
        let entries = tests
            .iter()
            .map(|t| {
                let interval_ms = (t.interval.ns() / 1_000_000).max(1);
                let phase_ms = (fnv1a(&t.id()) % interval_ms as u64) as i64;
                // The smallest k with k × interval + phase >= start.
                let next = (start.0 - phase_ms).div_euclid(interval_ms)
                    + i64::from((start.0 - phase_ms).rem_euclid(interval_ms) != 0);
                Entry {
                    interval_ms,
                    phase_ms,
                    next,
                }
            })
            .collect();
        Scheduler { entries }
    }

    /// The slots of test `test` after `last` (the latest slot the archive
    /// has a run or skip for) and before this schedule's first: the ones no
    /// agent was there to run, when an agent starts again after being
    /// stopped or killed.  At most `limit`, the newest.
    pub fn gap(&self, test: usize, last: UnixMs, limit: usize) -> Vec<Slot> {
        let Some(e) = self.entries.get(test) else {
            return Vec::new();
        };
        // The first k with at(k) > last.
        let first = (last.0 - e.phase_ms).div_euclid(e.interval_ms) + 1;
        let from = first.max(e.next - limit as i64);
        (from..e.next)
            .map(|k| Slot {
                test,
                scheduled: e.at(k),
                run_uuid: crate::new_run_uuid(),
            })
            .collect()
    }

    /// The first slot of test `test` this schedule hands out.
    pub fn first(&self, test: usize) -> Option<UnixMs> {
        self.entries.get(test).map(|e| e.at(e.next))
    }

    /// When the next slot of any test starts (`None` without tests).
    pub fn next_due(&self) -> Option<UnixMs> {
        self.entries.iter().map(|e| e.at(e.next)).min()
    }

    /// Every slot that has started by `now` and was not handed out yet,
    /// oldest first: of each test the latest as [`Action::Run`], any
    /// earlier ones (the agent was busy through them) as
    /// [`Action::Missed`].
    pub fn poll(&mut self, now: UnixMs) -> Vec<Action> {
        let mut out = Vec::new();
        for (i, e) in self.entries.iter_mut().enumerate() {
            while e.at(e.next) <= now {
                let slot = Slot {
                    test: i,
                    scheduled: e.at(e.next),
                    run_uuid: crate::new_run_uuid(),
                };
                let later = e.at(e.next + 1);
                e.next += 1;
                out.push(if later <= now {
                    Action::Missed {
                        slot,
                        reason: format!(
                            "the agent was busy through this slot (its next slot, at {} ms, \
                             had started by {} ms)",
                            later.0, now.0
                        ),
                    }
                } else {
                    Action::Run(slot)
                });
            }
        }
        out.sort_by_key(|a| (a.slot().scheduled, a.slot().test));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::Mesh;
    use pathsonde_core::DurationNs;

    fn tests() -> Vec<MeshTest> {
        let text = r#"
[[host]]
name = "a"
address = "h1"
[[host]]
name = "b"
address = "h2"
[[host]]
name = "c"
address = "h3"
[[test]]
name = "abw"
interval = "30s"
between = "all"
"#;
        Mesh::parse(text, "m").unwrap().originated_by("a")
    }

    #[test]
    fn slots_sit_on_a_grid_every_agent_computes_alike() {
        let t = tests();
        let start = UnixMs(1_700_000_000_000);
        let mut s = Scheduler::new(&t, start);
        let first = s.next_due().unwrap();
        assert!(first >= start && first.since(start) < DurationNs::from_secs(30));
        // Nothing before the first slot.
        assert!(s.poll(UnixMs(first.0 - 1)).is_empty());
        // A second scheduler started later agrees on the grid.
        let mut later = Scheduler::new(&t, UnixMs(start.0 + 7_000));
        let a: Vec<i64> = s
            .poll(UnixMs(start.0 + 120_000))
            .iter()
            .filter(|x| matches!(x, Action::Run(_)))
            .map(|x| x.slot().scheduled.0 % 30_000)
            .collect();
        let b: Vec<i64> = later
            .poll(UnixMs(start.0 + 120_000))
            .iter()
            .map(|x| x.slot().scheduled.0 % 30_000)
            .collect();
        assert!(a.iter().all(|x| b.contains(x)));
        // The two tests (a->b, a->c) have different phases: spread out.
        let phases: std::collections::BTreeSet<i64> = b.into_iter().collect();
        assert_eq!(phases.len(), 2);
    }

    #[test]
    fn a_restarted_agent_finds_the_slots_nobody_ran() {
        let t = tests();
        let first = Scheduler::new(&t, UnixMs(0));
        let s0 = first.next_due().unwrap();
        let mut before = first.clone();
        let done: Vec<_> = before.poll(UnixMs(65_000));
        let last = done.iter().rfind(|a| a.slot().test == 0).unwrap();
        // Killed at 65 s, started again at 200 s.
        let again = Scheduler::new(&t, UnixMs(200_000));
        let gap = again.gap(0, last.slot().scheduled, 1000);
        let next = again.entries[0].at(again.entries[0].next);
        assert!(!gap.is_empty());
        assert!(gap
            .iter()
            .all(|s| s.scheduled > last.slot().scheduled && s.scheduled < next));
        assert_eq!(gap[0].scheduled.0, last.slot().scheduled.0 + 30_000);
        assert_eq!(gap.last().unwrap().scheduled.0 + 30_000, next.0);
        assert_eq!(again.gap(0, last.slot().scheduled, 2).len(), 2);
        // Nothing missing when the last slot is the one just before.
        assert!(again.gap(0, UnixMs(next.0 - 30_000), 1000).is_empty());
        assert!(s0 <= UnixMs(30_000));
    }

    #[test]
    fn each_slot_is_handed_out_once_and_missed_ones_are_not_lost() {
        let t = tests();
        let start = UnixMs(0);
        let mut s = Scheduler::new(&t, start);
        let mut now = start;
        let mut seen = Vec::new();
        // Poll every second for 5 minutes: 2 tests × 10 slots, all run.
        for _ in 0..300 {
            now = UnixMs(now.0 + 1_000);
            seen.extend(s.poll(now));
        }
        assert_eq!(seen.len(), 20);
        assert!(seen.iter().all(|a| matches!(a, Action::Run(_))));
        // Busy for 95 s: the slots passed are handed out once each, the
        // latest of each test to run, the rest as missed with a reason.
        let after = s.poll(UnixMs(now.0 + 95_000));
        let runs = after.iter().filter(|a| matches!(a, Action::Run(_))).count();
        let missed: Vec<_> = after
            .iter()
            .filter_map(|a| match a {
                Action::Missed { reason, .. } => Some(reason),
                _ => None,
            })
            .collect();
        assert_eq!(runs, 2);
        assert!(missed.len() >= 4 && missed.len() <= 6, "{missed:?}");
        assert!(missed[0].contains("busy"));
        let uuids: std::collections::BTreeSet<_> = seen
            .iter()
            .chain(&after)
            .map(|a| a.slot().run_uuid.clone())
            .collect();
        assert_eq!(uuids.len(), seen.len() + after.len());
        // Sorted oldest first.
        assert!(after
            .windows(2)
            .all(|w| w[0].slot().scheduled <= w[1].slot().scheduled));
    }
}
