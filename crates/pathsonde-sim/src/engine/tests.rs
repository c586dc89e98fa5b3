//! The engine's event loop, links, queues and hosts against hand-worked cases.

use super::*;
use crate::time::Ps;
use pathsonde_core::{Bytes, CarSlot, DurationNs, ScheduleSpec};

fn sched(offsets_us: &[i64], packets: u32, size: u64) -> ScheduleSpec {
    ScheduleSpec {
        packet_size: Bytes(size),
        cars: offsets_us
            .iter()
            .map(|&o| CarSlot {
                offset: DurationNs::from_us(o),
                packets,
            })
            .collect(),
        idle_before: DurationNs::ZERO,
    }
}

fn path(extra: &str) -> Scenario {
    Scenario::parse(&format!(
        r#"
[sender]
timer_resolution = "1ns"
nic = {{ coalescing = false }}
[receiver]
nic = {{ coalescing = false }}
{extra}
"#
    ))
    .unwrap()
}

#[test]
fn an_idle_path_delays_by_serialisation_and_propagation() {
    let scn = path(
        "[[link]]\nrate = \"1G\"\ndelay = \"1ms\"\n[[link]]\nrate = \"1G\"\ndelay = \"2ms\"\n",
    );
    let mut sim = Sim::new(&scn, 1).unwrap();
    let last = sim.schedule_probe(&sched(&[0, 100], 1, 1500), Ps::ZERO);
    sim.run_probe(last + Ps::MS * 100);
    // Two store-and-forward hops of 12 µs each plus 3 ms.
    let one_way = 2 * 12 * Ps::US + 3 * Ps::MS;
    assert_eq!(sim.probe.sent[0], Ps::ZERO);
    assert_eq!(sim.probe.recv[0], one_way);
    assert_eq!(sim.probe.recv[1], 100 * Ps::US + one_way);
    assert_eq!(sim.probe.outstanding, 0);
}

#[test]
fn a_car_queues_behind_itself_and_a_full_queue_drops() {
    let scn = path("[[link]]\nrate = \"10G\"\n[[link]]\nrate = \"1G\"\nqueue = \"6000\"\n");
    let mut sim = Sim::new(&scn, 1).unwrap();
    let last = sim.schedule_probe(&sched(&[0], 10, 1500), Ps::ZERO);
    sim.run_probe(last + Ps::MS * 100);
    let got: Vec<Ps> = sim
        .probe
        .recv
        .iter()
        .copied()
        .filter(|&r| r != NEVER)
        .collect();
    // The 1 Gb/s queue holds 6000 B of unfinished work: the packet on
    // the wire plus three behind it; the rest of the car is dropped.
    assert_eq!(sim.link_stats(1).drops as usize, 10 - got.len());
    assert!(got.len() >= 4 && got.len() <= 6, "{got:?}");
    for w in got.windows(2) {
        assert_eq!(w[1] - w[0], 12 * Ps::US);
    }
}

#[test]
fn a_router_clock_forwards_only_on_its_ticks() {
    let scn = path(
            "[[link]]\nrate = \"10G\"\ndelay = \"7us\"\n[[link]]\nrate = \"10G\"\nservice_clock = \"1.4us\"\n",
        );
    let mut sim = Sim::new(&scn, 1).unwrap();
    let offsets: Vec<i64> = (0..50).map(|k| k * 37 + (k * k) % 11).collect();
    let last = sim.schedule_probe(&sched(&offsets, 1, 1000), Ps::ZERO);
    sim.run_probe(last + Ps::MS);
    let tx = Ps::from_ns(800); // 1000 B at 10 Gb/s
    for &r in &sim.probe.recv {
        assert_eq!((r - tx).ps() % 1_400_000, 0, "{r:?}");
    }
}

#[test]
fn a_coalescing_nic_hands_packets_up_in_bunches() {
    let scn = Scenario::parse(
            "[sender]\ntimer_resolution = \"1ns\"\n[receiver]\nnic = { rx_abs_delay = \"100us\" }\n[[link]]\nrate = \"1G\"\n",
        )
        .unwrap();
    let mut sim = Sim::new(&scn, 1).unwrap();
    // One packet every 20 µs for 1 ms.
    let offsets: Vec<i64> = (0..50).map(|k| k * 20).collect();
    let last = sim.schedule_probe(&sched(&offsets, 1, 1000), Ps::ZERO);
    sim.run_probe(last + Ps::MS);
    let mut stamps: Vec<Ps> = sim.probe.recv.clone();
    stamps.dedup();
    // Each interrupt 100 µs after the first packet it holds: 5 a bunch.
    assert_eq!(stamps.len(), 10, "{stamps:?}");
    for w in stamps.windows(2) {
        assert!(w[1] - w[0] >= 100 * Ps::US);
    }
    assert_eq!(sim.nic_counts(1), (10, 50));
}

#[test]
fn the_packet_timer_waits_for_idleness_and_the_throttle_spaces_interrupts() {
    let run = |nic: &str| {
        let scn = Scenario::parse(&format!(
                "[sender]\ntimer_resolution = \"1ns\"\n[receiver]\nnic = {nic}\n[[link]]\nrate = \"1G\"\n"
            ))
            .unwrap();
        let mut sim = Sim::new(&scn, 1).unwrap();
        let offsets: Vec<i64> = (0..50).map(|k| k * 20).collect();
        let last = sim.schedule_probe(&sched(&offsets, 1, 1000), Ps::ZERO);
        sim.run_probe(last + Ps::MS);
        let mut stamps = sim.probe.recv.clone();
        stamps.dedup();
        stamps
    };
    // Packets every 20 µs never leave the link idle for 30 µs: one
    // interrupt, 30 µs after the last packet (8 µs on the wire).
    let idle = run("{ rx_abs_delay = \"0us\", rx_pkt_delay = \"30us\" }");
    assert_eq!(idle, vec![(49 * 20 + 8 + 30) * Ps::US]);
    // Throttle alone: the first packet at once, then at most one
    // interrupt per 100 µs.
    let thr = run("{ rx_abs_delay = \"0us\", throttle = \"100us\" }");
    assert_eq!(thr[0], 8 * Ps::US);
    for w in thr.windows(2) {
        assert!(w[1] - w[0] >= 100 * Ps::US, "{thr:?}");
    }
    assert!(thr.len() >= 9 && thr.len() <= 11, "{thr:?}");
}

#[test]
fn truth_counts_the_cross_traffic_offered() {
    let mut scn =
        path("[[link]]\nrate = \"10G\"\ncross = [\"cbr:4G\"]\n[[link]]\nrate = \"10G\"\n");
    scn.duration = 200 * Ps::MS;
    let mut sim = Sim::new(&scn, 1).unwrap();
    sim.run_until(200 * Ps::MS);
    let a = sim.link_available(0, 10 * Ps::MS, 110 * Ps::MS);
    assert!((a.gbps() - 6.0).abs() < 0.01, "{a}");
    let (pa, tight) = sim.path_available(10 * Ps::MS, 110 * Ps::MS);
    assert_eq!(tight, 0);
    assert!((pa.gbps() - 6.0).abs() < 0.01);
    // The cross traffic left after link 0: link 1 carried none of it.
    assert_eq!(sim.link_stats(1).tx_packets, 0);
}

#[test]
fn a_trace_is_replayed_packet_for_packet() {
    let dir = std::env::temp_dir().join(format!("pathsonde-sim-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("t.txt");
    std::fs::write(&file, "# time size\n0.001 1500\n0.002 40\n0.0025,576\n").unwrap();
    let mut scn = path("[[link]]\nrate = \"1G\"\n");
    scn.links[0].trace = Some(file.clone());
    let mut sim = Sim::new(&scn, 1).unwrap();
    sim.run_until(10 * Ps::MS);
    assert_eq!(sim.link_stats(0).tx_packets, 3);
    assert_eq!(sim.link_stats(0).tx_bytes, 1500 + 40 + 576);
    std::fs::write(&file, "0.001 1500\nlater 40\n").unwrap();
    let err = Sim::new(&scn, 1).err().unwrap().to_string();
    assert!(err.contains("line 2"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
