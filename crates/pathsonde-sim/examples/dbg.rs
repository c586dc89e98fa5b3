use pathsonde_sim::*;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let ms: u64 = std::env::args().nth(2).unwrap().parse().unwrap();
    let scn = Scenario::load(std::path::Path::new(&path)).unwrap();
    let mut sim = Sim::new(&scn, 1).unwrap();
    for step in 1..=10 {
        sim.run_until(step * ms * time::PS_PER_MS / 10);
        let t = &sim.tcp_stats()[0];
        println!(
            "t={} ms acked {} cwnd {:.1} rtx {} to {} srtt {:.2}",
            step * ms / 10,
            t.acked_segments,
            t.cwnd,
            t.retransmits,
            t.timeouts,
            t.srtt_ms
        );
    }
    for i in 0..sim.hops() {
        println!("link {i} {:?}", sim.link_stats(i));
    }
}
