//! The event queue: a binary heap of small `Copy` events, ordered by time
//! and then by the order they were scheduled, so that ties break the same
//! way on every run and every platform.

use crate::time::Ps;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Everything that can happen.  16 bytes; no heap data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ev {
    /// The first packet in `link`'s delay line reaches the next node.
    PipeOut { link: u16 },
    /// Host `host`'s NIC coalescing timer.
    NicFire { host: u8 },
    /// Cross-traffic source `src` emits its next packet.
    Cross { src: u16 },
    /// The sender host hands probe car `car` to its NIC.
    ProbeCar { car: u32 },
    /// TCP connection `conn` opens.
    TcpStart { conn: u16 },
    /// TCP retransmission timer (re-checks its deadline).
    TcpRto { conn: u16 },
    /// TCP delayed-ACK timer (re-checks its deadline).
    TcpDelAck { conn: u16 },
}

/// Ordered by time, then scheduling order: the two halves of one 128-bit
/// key, kept as two `u64` so that an entry is 24 bytes (a `u128` field
/// would align it to 32 and every heap move would copy a third more).
#[derive(Debug, Clone, Copy)]
struct Entry {
    t: Ps,
    seq: u64,
    ev: Ev,
}

impl Entry {
    #[inline(always)]
    fn key(&self) -> u128 {
        (u128::from(self.t.ps()) << 64) | u128::from(self.seq)
    }
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, o: &Self) -> Ordering {
        o.key().cmp(&self.key())
    }
}

/// Earliest-first queue with FIFO tie-breaking.
///
/// The earliest entry may wait in `hot`, outside the heap: an event
/// scheduled earlier than everything pending (a cross-traffic source's next
/// packet, a delay line's next arrival) is very often the very next one
/// taken, and then costs two comparisons instead of a heap push and pop.
/// The order taken is exactly the heap's: keys are unique and `hot`, when
/// set, is below every key in the heap.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Entry>,
    hot: Option<Entry>,
    seq: u64,
}

impl EventQueue {
    pub(crate) fn with_capacity(n: usize) -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(n),
            hot: None,
            seq: 0,
        }
    }
    #[inline]
    pub(crate) fn push(&mut self, t: Ps, ev: Ev) {
        self.seq += 1;
        let e = Entry {
            t,
            seq: self.seq,
            ev,
        };
        match self.hot {
            Some(h) if e.key() < h.key() => {
                self.heap.push(h);
                self.hot = Some(e);
            }
            Some(_) => self.heap.push(e),
            None => match self.heap.peek() {
                Some(top) if top.key() < e.key() => self.heap.push(e),
                _ => self.hot = Some(e),
            },
        }
    }
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(Ps, Ev)> {
        self.hot
            .take()
            .or_else(|| self.heap.pop())
            .map(|e| (e.t, e.ev))
    }
    #[inline]
    pub(crate) fn peek_time(&self) -> Option<Ps> {
        self.hot.as_ref().or_else(|| self.heap.peek()).map(|e| e.t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_fifo() {
        let mut q = EventQueue::default();
        let (t3, t5) = (Ps::from_ps(3), Ps::from_ps(5));
        q.push(t5, Ev::Cross { src: 1 });
        q.push(t3, Ev::Cross { src: 2 });
        q.push(t5, Ev::Cross { src: 3 });
        q.push(t3, Ev::PipeOut { link: 4 });
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (t3, Ev::Cross { src: 2 }),
                (t3, Ev::PipeOut { link: 4 }),
                (t5, Ev::Cross { src: 1 }),
                (t5, Ev::Cross { src: 3 }),
            ]
        );
        assert!(std::mem::size_of::<Ev>() <= 12);
        assert_eq!(std::mem::size_of::<Entry>(), 24);
    }

    /// The hot slot must not change the order: random pushes and pops
    /// against a plain sort by (time, scheduling order).
    #[test]
    fn the_hot_slot_keeps_heap_order() {
        let mut rng = pathsonde_core::rng::SplitMix64::new(11);
        let mut q = EventQueue::default();
        let mut model: Vec<(Ps, u64, u16)> = Vec::new();
        let mut seq = 0u64;
        let mut now = Ps::ZERO;
        for i in 0..200_000u32 {
            if model.is_empty() || rng.below(2) == 0 {
                let t = now + Ps::from_ps(rng.below(8));
                seq += 1;
                let src = (i % 60_000) as u16;
                q.push(t, Ev::Cross { src });
                model.push((t, seq, src));
            } else {
                model.sort_unstable_by_key(|&(t, seq, _)| std::cmp::Reverse((t, seq)));
                let (t, _, src) = model.pop().expect("non-empty");
                assert_eq!(q.peek_time(), Some(t));
                assert_eq!(q.pop(), Some((t, Ev::Cross { src })));
                now = t;
            }
        }
    }
}
