//! Which kernel stamps are a train's send times: when the packets left the
//! driver, or when they entered this host's own egress queue.
//!
//! The kernel stamps each datagram as it enters the interface's queueing
//! discipline (`SCHED`) and as the driver takes it (`SND`).  On an interface
//! faster than the train, with no shaper, the two are microseconds apart
//! (the same call chain, bottom halves off), and the `SND` stamp is the
//! truest "it left".  When the host's own interface is shaped, or slower
//! than the train, the egress queue holds the packets and their `SND`
//! stamps are already spread by it: a train paced at 109 Mb/s into a
//! 100 Mb/s shaper carrying 60 Mb/s of forwarded traffic left the driver at
//! 64 Mb/s, and the method saw a sender that "could not pace" and a path
//! that "carried its trains untouched" — a host-limited A ≥ 53–63 Mb/s for
//! a true A of 38 (`lab up --hops 2 --tight-at 1`, docs/lab.md).  That queue
//! is the path's first: the packets' entry to it is when they were sent, and
//! the spread after it is the path's to read.

use pathsonde_core::{DurationNs, TimeNs};

/// A queue that held some packet of the train this much longer than it
/// held the train's first packet was queueing it: without a queue the two
/// stamps are a few microseconds apart, and one 1500-byte frame at
/// 100 Mb/s takes 120 µs.
pub const HELD: DurationNs = DurationNs::from_us(50);

/// The stamps chosen for a train, and how long the egress queue held it
/// when those are the queue-entry stamps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chosen {
    pub stamps: Option<Vec<TimeNs>>,
    pub hold: Option<DurationNs>,
}

/// `left`: the driver (`SND`) stamps per packet; `queued`: the queue-entry
/// (`SCHED`) stamps.  The entry stamps stand when both are whole and the
/// queue's hold grew by more than [`HELD`] over the train; else the driver
/// stamps (a kernel without `SCHED` stamps changes nothing).
pub fn choose(left: Option<Vec<TimeNs>>, queued: Option<Vec<TimeNs>>) -> Chosen {
    let kept = |stamps| Chosen { stamps, hold: None };
    let (left, queued) = match (left, queued) {
        (Some(l), Some(q)) => (l, q),
        (left, _) => return kept(left),
    };
    if left.len() != queued.len() {
        return kept(Some(left));
    }
    let mut holds = left.iter().zip(&queued).map(|(l, q)| l.ns() - q.ns());
    let first = holds.next().unwrap_or(0);
    let most = holds.fold(first, i64::max);
    if most - first > HELD.ns() {
        Chosen {
            stamps: Some(queued),
            hold: Some(DurationNs::from_ns(most.max(0))),
        }
    } else {
        kept(Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: &[i64]) -> Option<Vec<TimeNs>> {
        Some(us.iter().map(|&u| TimeNs::from_ns(u * 1000)).collect())
    }

    #[test]
    fn an_unqueued_train_keeps_its_driver_stamps() {
        // Entry 2-4 µs before the driver took each packet.
        let c = choose(at(&[12, 24, 36, 48]), at(&[10, 21, 33, 44]));
        assert_eq!(c.stamps, at(&[12, 24, 36, 48]));
        assert_eq!(c.hold, None);
    }

    #[test]
    fn a_train_the_egress_queue_held_is_stamped_at_its_entry() {
        // Paced every 110 µs, drained every 188 µs: the hold grows.
        let queued: Vec<i64> = (0..10).map(|i| 1000 + 110 * i).collect();
        let left: Vec<i64> = (0..10).map(|i| 1002 + 188 * i).collect();
        let c = choose(at(&left), at(&queued));
        assert_eq!(c.stamps, at(&queued));
        assert_eq!(
            c.hold,
            Some(DurationNs::from_ns((1002 + 188 * 9 - 1000 - 990) * 1000))
        );
    }

    #[test]
    fn a_queue_that_was_already_full_but_drained_at_the_trains_pace_is_not_read_as_held() {
        // A constant 300 µs wait (a standing queue the train did not grow)
        // is not this train's doing; the driver stamps keep the pacing.
        let queued: Vec<i64> = (0..10).map(|i| 100 * i).collect();
        let left: Vec<i64> = (0..10).map(|i| 300 + 100 * i + (i % 2)).collect();
        assert_eq!(choose(at(&left), at(&queued)).hold, None);
    }

    #[test]
    fn missing_or_mismatched_entry_stamps_change_nothing() {
        assert_eq!(choose(at(&[1, 2]), None).stamps, at(&[1, 2]));
        assert_eq!(choose(at(&[1, 500]), at(&[1])).stamps, at(&[1, 500]));
        assert_eq!(choose(None, at(&[1])), Chosen::default());
    }
}
