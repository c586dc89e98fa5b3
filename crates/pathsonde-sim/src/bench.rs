//! The speed benchmark: packet events per second of the full model beside a
//! baseline measured in the same process.
//!
//! * **Baseline**: the plainest event loop there is — a `std` binary heap
//!   of `(time, seq, event)` tuples driving four FIFO servers in tandem fed
//!   by Poisson arrivals (the toy tandem queue the issue cites at ~40 M
//!   events/s).
//! * **Full model**: a 4-hop path (100, 40, 40, 100 Gb/s, 2 ms each way),
//!   Poisson cross traffic at 50 % on the two 40 Gb/s hops and ICIM Table I
//!   traffic at 20 % on the first, coalescing NICs on both hosts
//!   (RxAbsIntDelay 131.2 µs), a TCP Reno flow end to end whose ACKs return
//!   through the sender's NIC, and FAC² probe trains.
//!
//! The machine may be shared: the ratio to the baseline is the figure to
//! quote, not the absolute rate.

use crate::driver::{run_method, RunOptions};
use crate::engine::Sim;
use crate::scenario::Scenario;
use crate::time::Ps;
use pathsonde_core::rng::SplitMix64;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

/// One benchmark figure.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Rate {
    /// Events taken off the event queue.
    pub events: u64,
    /// Packet events: a packet passing one link (or queue), or handed up
    /// by a NIC.  The baseline has two heap events per packet event
    /// (arrival, departure); the engine about one (see `engine.rs`).
    pub packet_events: u64,
    pub seconds: f64,
    pub events_per_s: f64,
    pub packet_events_per_s: f64,
}

impl Rate {
    fn new(events: u64, packet_events: u64, seconds: f64) -> Rate {
        let s = seconds.max(1e-9);
        Rate {
            events,
            packet_events,
            seconds,
            events_per_s: events as f64 / s,
            packet_events_per_s: packet_events as f64 / s,
        }
    }
}

/// Both figures and their ratio.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct BenchReport {
    pub baseline: Rate,
    pub engine: Rate,
    /// The full model with a method (FAC²) driving probes.
    pub with_method: Rate,
    /// Engine packet events/s over the baseline's.
    pub engine_over_baseline: f64,
    /// Engine heap events/s over the baseline's.
    pub engine_events_over_baseline: f64,
}

/// The full-model scenario the benchmark runs.
pub const BENCH_SCENARIO: &str = r#"
name = "bench: 4 hops, cross traffic, coalescing NICs, TCP"
duration = "200ms"
[sender]
nic = { rx_abs_delay = "131.2us" }
[receiver]
nic = { rx_abs_delay = "131.2us" }
[[link]]
rate = "100G"
delay = "2ms"
cross = ["icim:20%"]
[[link]]
rate = "40G"
delay = "2ms"
queue = "8MB"
cross = ["poisson:50%"]
[[link]]
rate = "40G"
delay = "2ms"
queue = "8MB"
cross = ["poisson:50%"]
[[link]]
rate = "100G"
delay = "2ms"
[[tcp]]
flows = 1
[method]
name = "fac2"
max_rate = "40G"
"#;

/// The baseline: a toy tandem of four FIFO servers.
pub fn baseline(events: u64, seed: u64) -> Rate {
    const HOPS: usize = 4;
    // Service 100 ns, arrivals every 200 ns on average: 50 % load.
    let service: u64 = 100_000;
    let mean_gap = 200_000.0;
    let mut rng = SplitMix64::new(seed);
    let mut heap: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::with_capacity(1024);
    let mut queues: Vec<VecDeque<u32>> = (0..HOPS).map(|_| VecDeque::with_capacity(256)).collect();
    let mut busy = [false; HOPS];
    let mut seq = 0u64;
    // Event code: 0 = external arrival, 1 + q = departure from q.
    heap.push(Reverse((0, 0, 0)));
    let mut done = 0u64;
    let mut sink = 0u64;
    let start = Instant::now();
    while done < events {
        let Some(Reverse((t, _, code))) = heap.pop() else {
            break;
        };
        done += 1;
        let mut next_q = None;
        if code == 0 {
            next_q = Some(0);
            seq += 1;
            let gap = rng.exponential(mean_gap) as u64;
            heap.push(Reverse((t + gap, seq, 0)));
        } else {
            let q = (code - 1) as usize;
            if queues[q].pop_front().is_some() {
                seq += 1;
                heap.push(Reverse((t + service, seq, code)));
            } else {
                busy[q] = false;
            }
            if q + 1 < HOPS {
                next_q = Some(q + 1);
            } else {
                sink += 1;
            }
        }
        if let Some(q) = next_q {
            if busy[q] {
                queues[q].push_back(0);
            } else {
                busy[q] = true;
                seq += 1;
                heap.push(Reverse((t + service, seq, 1 + q as u32)));
            }
        }
    }
    std::hint::black_box(sink);
    Rate::new(done, done / 2, start.elapsed().as_secs_f64())
}

/// The full model without a method: cross traffic, coalescing NICs and TCP
/// for `sim_time`.
pub fn engine(sim_time: Ps, seed: u64) -> Rate {
    let scn = Scenario::parse(BENCH_SCENARIO).expect("bench scenario");
    let mut sim = Sim::new(&scn, seed).expect("bench sim");
    let start = Instant::now();
    sim.run_until(sim_time);
    Rate::new(
        sim.events(),
        sim.packet_events(),
        start.elapsed().as_secs_f64(),
    )
}

/// The full model with FAC² probing it.
pub fn with_method(sim_time: Ps, seed: u64) -> Rate {
    let mut scn = Scenario::parse(BENCH_SCENARIO).expect("bench scenario");
    scn.duration = sim_time;
    let start = Instant::now();
    let run = run_method(&scn, seed, &RunOptions::default(), &mut |_| {}).expect("bench run");
    Rate::new(run.events, run.packet_events, start.elapsed().as_secs_f64())
}

/// Runs all three; `scale` = 1 is the documented size (~2 × 10⁸ events).
pub fn run(scale: f64, seed: u64) -> BenchReport {
    let scale = scale.clamp(0.001, 100.0);
    let sim_time = Ps::from_ms(((200.0 * scale) as u64).max(1));
    let engine = engine(sim_time, seed);
    let baseline = baseline((2 * engine.packet_events).max(1000), seed);
    let with_method = with_method(sim_time, seed);
    BenchReport {
        baseline,
        engine,
        with_method,
        engine_over_baseline: engine.packet_events_per_s / baseline.packet_events_per_s.max(1e-9),
        engine_events_over_baseline: engine.events_per_s / baseline.events_per_s.max(1e-9),
    }
}
