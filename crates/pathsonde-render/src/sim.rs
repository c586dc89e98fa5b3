//! The simulator's reports (`sim run`, `sim tcp`, `sim bench`): the
//! scenario, each estimate beside the simulated path's exact truth, the
//! estimates-over-time plot (PNG and SVG), and the simulator's speed.  Takes `pathsonde_sim`'s typed
//! runs (`MethodRun`, `TcpRun`) as the driver returns them; the command
//! (`sim_cmd`) loads the scenario, runs it, prints and writes the files.

use pathsonde_core::BitRate;
use pathsonde_sim::driver::{MethodRun, TcpRun};
use pathsonde_sim::summary::{summary, tcp_summary};
use pathsonde_sim::Scenario;
use std::fmt::Write as _;
use std::path::Path;

fn gbps(r: BitRate) -> String {
    if r.bps() >= 1e9 {
        format!("{:.3} Gb/s", r.gbps())
    } else {
        format!("{:.1} Mb/s", r.mbps())
    }
}

/// The scenario: its links, cross traffic and hosts, as `sim run` and `sim
/// tcp` print it above their results.
fn scenario_text(scn: &Scenario) -> String {
    let mut o = String::new();
    let tight = scn.intended_tight_link();
    let _ = writeln!(o, "Scenario: {}", scn.name);
    for (i, l) in scn.links.iter().enumerate() {
        let cross: Vec<String> = l.cross.iter().map(|c| c.model.describe()).collect();
        let _ = writeln!(
            o,
            "  link {i}{} {} one-way {:.3} ms, queue {} B{}{}{}",
            if i == tight { " (tight)" } else { "        " },
            gbps(l.rate),
            l.delay.ps() as f64 / 1e9,
            l.queue.get(),
            l.service_clock
                .map(|c| format!(", router clock {:.3} µs", c.ps() as f64 / 1e6))
                .unwrap_or_default(),
            if cross.is_empty() {
                String::new()
            } else {
                format!(", cross: {}", cross.join(" + "))
            },
            l.trace
                .as_ref()
                .map(|t| format!(", trace {}", t.display()))
                .unwrap_or_default(),
        );
    }
    for (h, name) in [(&scn.sender, "sender"), (&scn.receiver, "receiver")] {
        let nic = if h.nic.coalesces() {
            format!(
                "coalescing (abs {:.1} µs, packet {:.1} µs, throttle {:.1} µs)",
                h.nic.rx_abs_delay.ps() as f64 / 1e6,
                h.nic.rx_pkt_delay.ps() as f64 / 1e6,
                h.nic.throttle.ps() as f64 / 1e6
            )
        } else {
            "no coalescing".into()
        };
        let _ = writeln!(
            o,
            "  {name:<8} NIC {nic}; timer {:.3} µs, send call {:.3} µs, jitter {:.3} µs",
            h.timer_resolution.ps() as f64 / 1e6,
            h.syscall.ps() as f64 / 1e6,
            h.jitter.ps() as f64 / 1e6
        );
    }
    o
}

fn pct(x: Option<f64>) -> String {
    x.map_or("—".into(), |e| format!("{:+.2} %", e * 100.0))
}

/// `sim run`'s text report: the scenario, then per seed each estimate
/// beside the tight link's truth, and the plot's files when one was drawn.
pub fn method_text(scn: &Scenario, runs: &[MethodRun], plot: Option<&Path>) -> String {
    let mut o = scenario_text(scn);
    if let Some(r) = runs.first() {
        let _ = writeln!(o, "Settings: {}", crate::report::settings_line(&r.settings));
    }
    for r in runs {
        let _ = writeln!(o, "\n{} with seed {}", r.method, r.seed);
        let _ = writeln!(
            o,
            "   #  window (s)          estimate        truth (tight link)   error     plans  probe pkts"
        );
        for s in &r.samples {
            let est = s
                .estimate
                .as_ref()
                .map_or("none".into(), |e| gbps(e.available));
            let _ = writeln!(
                o,
                "  {:>2}  {:>7.3} – {:<7.3}  {:>14}  {:>14} (link {})  {:>9}  {:>5}  {:>10}",
                s.index,
                s.start.as_secs_f64(),
                s.end.as_secs_f64(),
                est,
                gbps(s.truth),
                s.tight_link,
                pct(s.relative_error),
                s.plans,
                s.probe_packets
            );
            for n in &s.notes {
                let _ = writeln!(o, "      note: {n}");
            }
        }
        let (irq, pk) = r.receiver_nic;
        let _ = writeln!(
            o,
            "  median |error| {}; band held the truth in {}; {:.3} s simulated, {} events; receiver NIC handed up {} packets in {} interrupts ({:.1} per interrupt)",
            r.accuracy().median_abs_error.map_or("—".into(), |e| format!("{:.2} %", e * 100.0)),
            r.accuracy().band_coverage.map_or("—".into(), |c| format!("{:.0} %", c * 100.0)),
            r.simulated.as_secs_f64(),
            r.events,
            pk,
            irq,
            pk as f64 / irq.max(1) as f64
        );
    }
    if runs.len() > 1 {
        let s = summary(runs);
        let _ = writeln!(
            o,
            "\nOver {} seeds: median of per-seed median |error| {} (best seed {}, worst {})",
            runs.len(),
            s.median_abs_error
                .map_or("—".into(), |e| format!("{:.2} %", e * 100.0)),
            s.best_seed_abs_error
                .map_or("—".into(), |e| format!("{:.2} %", e * 100.0)),
            s.worst_seed_abs_error
                .map_or("—".into(), |e| format!("{:.2} %", e * 100.0)),
        );
    }
    if let Some(p) = plot {
        let _ = writeln!(o, "\nplot: {}.png, {}.svg", p.display(), p.display());
    }
    o
}

/// `sim tcp`'s text report: the scenario, then per seed the TCP flows and
/// ICIM's results beside the truth, and the plot's files when one was drawn.
pub fn tcp_text(scn: &Scenario, runs: &[TcpRun], plot: Option<&Path>) -> String {
    let mut o = scenario_text(scn);
    let _ = writeln!(
        o,
        "  ICIM: k = {}, λ = {}, C_min = {}, Q = {} RTT",
        scn.icim.k, scn.icim.lambda, scn.icim.cmin, scn.icim.q_rtts
    );
    for r in runs {
        let _ = writeln!(
            o,
            "\nseed {}: {:.2} s simulated, {} events; throughput after {:.1} s:",
            r.seed,
            r.simulated.as_secs_f64(),
            r.events,
            r.warmup.as_secs_f64()
        );
        for (i, (c, t)) in r.conns.iter().zip(&r.throughput_bps).enumerate() {
            let _ = writeln!(
                o,
                "  conn {i:>2} {:<5} {:>10.1} Mb/s  cwnd {:>8.1}  srtt {:>7.2} ms  retransmits {:>6}  timeouts {:>3}",
                if c.icim { "ICIM" } else { "Reno" },
                t.mbps(),
                c.cwnd,
                c.srtt_ms,
                c.retransmits,
                c.timeouts
            );
        }
        if !r.icim.is_empty() {
            let _ = writeln!(o, "  ICIM results (first 10 of {}):", r.icim.len());
            for s in r.icim.iter().take(10) {
                let _ = writeln!(
                    o,
                    "    {:>8.4} s  A {:>8.3} Gb/s  truth {:>8.3} Gb/s  range {:.3}–{:.3} Gb/s  {:>4} packets  grew at {}",
                    s.at.as_secs_f64(),
                    s.result.value_bps.gbps(),
                    s.truth.gbps(),
                    s.result.range_bps.0.gbps(),
                    s.result.range_bps.1.gbps(),
                    s.result.packets,
                    s.result.grew_at.map_or("none".into(), |j| j.to_string())
                );
            }
        }
    }
    let s = tcp_summary(runs);
    let _ = writeln!(
        o,
        "\nSummary over {} seed(s): {} ICIM results, {} results/s per ICIM flow, {} packets per measurement, median |error| {}; mean throughput ICIM {} / Reno {}",
        runs.len(),
        s.icim_results,
        s.results_per_s.map_or("—".into(), |x| format!("{x:.1}")),
        s.mean_packets_per_measurement.map_or("—".into(), |x| format!("{x:.0}")),
        s.median_abs_error.map_or("—".into(), |e| format!("{:.1} %", e * 100.0)),
        s.icim_mean_bps.map_or("—".into(), |x| format!("{:.1} Mb/s", x.mbps())),
        s.reno_mean_bps.map_or("—".into(), |x| format!("{:.1} Mb/s", x.mbps())),
    );
    if let (Some(i), Some(r)) = (s.icim_total_bps, s.reno_total_bps) {
        let _ = writeln!(
            o,
            "Throughput of all ICIM flows : all Reno flows (mean over seeds): {:.1} : {:.1} Mb/s (ratio {:.2}:1)",
            i.mbps(),
            r.mbps(),
            i.bps() / r.bps()
        );
    }
    if !s.by_truth.is_empty() {
        let _ = writeln!(o, "ICIM by truth (nearest 0.25 Gb/s):");
        let _ = writeln!(
            o,
            "  truth      results  results/s  packets  estimate median (p10–p90)   median |error|"
        );
        for g in &s.by_truth {
            let _ = writeln!(
                o,
                "  {:>5.2} Gb/s {:>7}  {:>9}  {:>7.0}  {:>6.2} Gb/s ({:.2}–{:.2})   {:>6.1} %",
                g.truth_gbps,
                g.results,
                g.results_per_s.map_or("—".into(), |x| format!("{x:.1}")),
                g.mean_packets,
                g.median_estimate_gbps,
                g.p10_estimate_gbps,
                g.p90_estimate_gbps,
                g.median_abs_error * 100.0
            );
        }
    }
    if let Some(p) = plot {
        let _ = writeln!(o, "\nplot: {}.png, {}.svg", p.display(), p.display());
    }
    o
}

/// A series to draw: truth as horizontal segments, estimates as points.
struct Series {
    title: String,
    truth: Vec<(f64, f64, f64)>,
    points: Vec<(f64, f64)>,
}

/// `sim run --plot PREFIX`: PREFIX.png and PREFIX.svg of the first seed's
/// estimates over time against the truth; the error names the file.
pub fn plot_method(prefix: &Path, scn: &Scenario, run: &MethodRun) -> Result<(), crate::DrawError> {
    let s = Series {
        title: format!("{} on {} (seed {})", run.method, scn.name, run.seed),
        truth: run
            .samples
            .iter()
            .map(|s| (s.start.as_secs_f64(), s.end.as_secs_f64(), s.truth.gbps()))
            .collect(),
        points: run
            .samples
            .iter()
            .filter_map(|s| {
                s.estimate.as_ref().map(|e| {
                    let mid = (s.start.as_secs_f64() + s.end.as_secs_f64()) / 2.0;
                    (mid, e.available.gbps())
                })
            })
            .collect(),
    };
    draw(prefix, &s)
}

/// `sim tcp --plot PREFIX`: PREFIX.png and PREFIX.svg of ICIM's results
/// against the truth; the error names the file.
pub fn plot_icim(prefix: &Path, run: &TcpRun) -> Result<(), crate::DrawError> {
    let s = Series {
        title: format!("ICIM results (seed {})", run.seed),
        truth: run
            .icim
            .iter()
            .map(|s| (s.started.as_secs_f64(), s.at.as_secs_f64(), s.truth.gbps()))
            .collect(),
        points: run
            .icim
            .iter()
            .map(|s| (s.at.as_secs_f64(), s.result.value_bps.gbps()))
            .collect(),
    };
    draw(prefix, &s)
}

fn draw(prefix: &Path, s: &Series) -> Result<(), crate::DrawError> {
    use plotters::prelude::*;
    crate::font::ensure_font()?;
    let png = prefix.with_extension("png");
    let svg = prefix.with_extension("svg");
    let xmax = s
        .truth
        .iter()
        .map(|t| t.1)
        .chain(s.points.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let ymax = s
        .truth
        .iter()
        .map(|t| t.2)
        .chain(s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.15;
    fn chart<DB: DrawingBackend>(
        root: DrawingArea<DB, plotters::coord::Shift>,
        s: &Series,
        xmax: f64,
        ymax: f64,
    ) -> Result<(), crate::DrawError>
    where
        DB::ErrorType: 'static,
    {
        use pathsonde_trace::plot::{legend_row, with_legend_strip, LegendEntry, Mark};
        root.fill(&WHITE).map_err(crate::DrawError::draw)?;
        let (figure, strip) = with_legend_strip(&root);
        let mut c = ChartBuilder::on(&figure)
            .caption(&s.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..xmax * 1.02, 0.0..ymax)
            .map_err(crate::DrawError::draw)?;
        c.configure_mesh()
            .x_desc("simulated time (s)")
            .y_desc("available bandwidth (Gb/s)")
            .draw()
            .map_err(crate::DrawError::draw)?;
        c.draw_series(
            s.truth
                .iter()
                .map(|&(a, b, y)| PathElement::new(vec![(a, y), (b, y)], BLACK.stroke_width(2))),
        )
        .map_err(crate::DrawError::draw)?;
        c.draw_series(
            s.points
                .iter()
                .map(|&(x, y)| Circle::new((x, y), 3, RED.filled())),
        )
        .map_err(crate::DrawError::draw)?;
        let legend = [
            LegendEntry {
                label: "truth (tight link, over each window)".into(),
                color: BLACK,
                mark: Mark::Line,
            },
            LegendEntry {
                label: "estimate".into(),
                color: RED,
                mark: Mark::Dot,
            },
        ];
        legend_row(&strip, &legend).map_err(crate::DrawError::draw)?;
        root.present().map_err(crate::DrawError::draw)
    }
    chart(
        BitMapBackend::new(&png, (1000, 600)).into_drawing_area(),
        s,
        xmax,
        ymax,
    )
    .map_err(|e| crate::DrawError::Draw(format!("{}: {e}", png.display())))?;
    chart(
        SVGBackend::new(&svg, (1000, 600)).into_drawing_area(),
        s,
        xmax,
        ymax,
    )
    .map_err(|e| crate::DrawError::Draw(format!("{}: {e}", svg.display())))?;
    Ok(())
}

/// `sim bench`'s table: events per second of the full model beside the
/// baseline measured in the same run.
pub fn bench_text(r: &pathsonde_sim::bench::BenchReport) -> String {
    let line = |name: &str, x: &pathsonde_sim::bench::Rate| {
        format!(
            "  {name:<22} {:>12} events {:>12} packet events in {:>7.3} s: {:>6.1} M events/s, {:>6.1} M packet events/s\n",
            x.events,
            x.packet_events,
            x.seconds,
            x.events_per_s / 1e6,
            x.packet_events_per_s / 1e6
        )
    };
    let mut o =
        String::from("Simulator speed (one core; the machine may be shared: quote the ratio)\n");
    o += &line("baseline (toy tandem)", &r.baseline);
    o += &line("engine (4-hop model)", &r.engine);
    o += &line("engine + FAC²", &r.with_method);
    let _ = writeln!(
        o,
        "  engine / baseline: {:.2} in packet events/s, {:.2} in heap events/s",
        r.engine_over_baseline, r.engine_events_over_baseline
    );
    o
}
