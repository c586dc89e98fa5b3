//! `pathsonde trace analyze`'s text report: a latency trace's facts,
//! distribution, bands, periodicity, queue cycles and regime (docs/trace.md).
//! Takes `pathsonde_trace`'s `Trace` and `Analysis` as the library returns
//! them; the command (`trace_cmd`) reads the file, analyses and prints.

use pathsonde_core::ClockSource;
use pathsonde_trace::analysis::Analysis;
use pathsonde_trace::Trace;
use std::path::Path;

/// `trace analyze`'s text report of the trace read from `file`: its
/// facts, distribution, bands, periodicity, queue cycles and regime with
/// the evidence for it.
pub fn analysis_text(file: &Path, t: &Trace, a: &Analysis) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let m = &t.meta;
    let _ = writeln!(s, "trace {}", file.display());
    let _ = writeln!(
        s,
        "  {} packets, {} received, {} lost ({:.2} %); load {}; packets {}; spacing {}; clock {}; latencies {}",
        a.packets,
        a.received,
        a.lost,
        a.loss_fraction * 100.0,
        m.rate.map_or("unknown".into(), |r| format!("{r:.1}")),
        m.packet_size.map_or("unknown".into(), |b| format!("{} B", b.get())),
        a.interval_us.map_or("unknown".into(), |i| format!("{i:.3} µs")),
        m.clock.map_or("unknown", ClockSource::describe),
        if m.absolute { "one-way (one clock)" } else { "with an unknown constant offset" }
    );
    let d = &a.distribution;
    let _ = writeln!(s, "\ndistribution (µs)");
    let _ = writeln!(
        s,
        "  min {:.3}  mean {:.3}  std {:.3}  max {:.3}  timestamp step {:.4}",
        d.min_us, d.mean_us, d.std_us, d.max_us, d.resolution_us
    );
    let pct: Vec<String> = d
        .percentiles
        .iter()
        .map(|(p, v)| format!("p{p:.0} {v:.3}"))
        .collect();
    let _ = writeln!(s, "  {}", pct.join("  "));
    let b = &a.banding;
    let _ = writeln!(s, "\nbanding");
    match b.step_us {
        Some(q) => {
            let _ = writeln!(
                s,
                "  step {q:.4} µs, strength {:.3} (0 none … 1 every latency on the lattice), {} levels, lattice offset {:.3} µs",
                b.strength,
                b.levels,
                b.offset_us.unwrap_or(0.0)
            );
        }
        None => {
            let _ = writeln!(s, "  none (strength {:.3})", b.strength);
        }
    }
    let _ = writeln!(s, "  evidence: {}", b.evidence);
    let _ = writeln!(s, "\nperiodicity (strongest spectral peaks)");
    for p in &a.periodicity {
        let _ = writeln!(
            s,
            "  every {:>9.2} packets{}  {:.4} cycles/packet{}  {:5.1} % of variance",
            p.period_packets,
            p.period_us
                .map_or(String::new(), |u| format!(" = {u:>9.1} µs")),
            p.cycles_per_packet,
            p.hz.map_or(String::new(), |h| format!(" = {:>8.3} kHz", h / 1e3)),
            p.power_share * 100.0
        );
    }
    let c = &a.cycles;
    let _ = writeln!(s, "\nqueue cycles");
    if c.found {
        let _ = writeln!(
            s,
            "  {} cycles, every {:.2} packets{}; latency rises {:.1} µs per cycle; {:.2} packets lost per cycle",
            c.count,
            c.period_packets.unwrap_or(0.0),
            c.period_us.map_or(String::new(), |u| format!(" = {u:.1} µs")),
            c.rise_us.unwrap_or(0.0),
            c.losses_per_cycle.unwrap_or(0.0)
        );
    } else {
        let _ = writeln!(s, "  none");
    }
    let _ = writeln!(s, "  evidence: {}", c.evidence);
    let _ = writeln!(s, "\nregime: {}", a.regime.kind.describe());
    for e in &a.regime.evidence {
        let _ = writeln!(s, "  - {e}");
    }
    s
}
