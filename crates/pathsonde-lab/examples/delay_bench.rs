//! Measures the lab's delay line: one-way delay error and loss over a grid of
//! delays and rates, through the three-namespace rig in `delay::bench`.
//!
//! ```text
//! cargo build --release -p pathsonde-lab --example delay_bench
//! sudo target/release/examples/delay_bench \
//!     [--delays 1,10,20,100] [--rates 100,300,500,800] [--secs 2] [--size 1500] \
//!     [--repeat 1] [--fixed-us N] [--no-lead]
//! ```
//!
//! `--fixed-us 0 --no-lead` measures the raw offsets that the line's
//! corrections remove.  Each run waits (up to 20 s) for the machine to be
//! under 15 % busy first, because other work on the 2 cores moves the
//! figures.  Prints a Markdown table (the one in `docs/lab-delay.md`).

use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_lab::delay::bench::{measure, udp_run, wait_for_idle, Rig};
use pathsonde_lab::delay::{DelayConfig, Scheduling, Sustained};
use std::time::Duration;

fn list(v: &str) -> Vec<f64> {
    v.split(',')
        .map(|s| s.trim().parse().expect("a comma-separated list of numbers"))
        .collect()
}

fn us(d: Option<DurationNs>, minus: DurationNs) -> String {
    d.map_or("–".into(), |d| format!("{:.0}", (d - minus).us_f64()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut delays = vec![1.0, 10.0, 20.0, 100.0];
    let mut rates = vec![100.0, 300.0, 500.0, 800.0];
    let mut secs = 2.0;
    let mut size = 1500usize;
    let mut repeat = 1;
    let mut fixed: Option<i64> = None;
    let mut lead = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--delays" => delays = list(&val()?),
            "--rates" => rates = list(&val()?),
            "--secs" => secs = val()?.parse()?,
            "--size" => size = val()?.parse()?,
            "--repeat" => repeat = val()?.parse()?,
            "--fixed-us" => fixed = Some(val()?.parse()?),
            "--no-lead" => lead = false,
            _ => return Err(format!("unknown argument {a} (see the source's doc comment)").into()),
        }
    }
    let rig = Rig::build()?;
    let span = Duration::from_secs_f64(secs);

    // The path without the relay: what the delay figures are relative to.
    wait_for_idle(0.15, Duration::from_secs(20));
    let base = udp_run(
        &rig,
        BitRate::from_mbps(100.0),
        size,
        Duration::from_millis(500),
    )?;
    println!(
        "baseline without delay line, 100 Mb/s: median {:.1} µs, p99 {:.1} µs, lost {}",
        base.delay_quantile(0.5).map_or(0.0, |d| d.us_f64()),
        base.delay_quantile(0.99).map_or(0.0, |d| d.us_f64()),
        base.lost()
    );
    println!(
        "sustained-rate constant in the code: {} Mb/s of 1500-byte packets; {size}-byte packets here",
        Sustained::MBPS_1500
    );
    println!();
    println!(
        "| D (ms) | asked (Mb/s) | sent (Mb/s) | packets | lost | median − D (µs) | p99 − D (µs) | max − D (µs) | relay hold error median / p99 (µs) | lead (µs) | drops queue / TUN / rcv socket | CPU/pkt (µs) | busy before | steal (ms) | sched |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for &d in &delays {
        for &r in &rates {
            for _ in 0..repeat {
                let delay = DurationNs::from_secs_f64(d / 1e3);
                let mut cfg = DelayConfig::new("to-snd", delay, BitRate::from_mbps(r));
                cfg.packet_size = Bytes::new(size as u64);
                cfg.adaptive_lead = lead;
                if let Some(c) = fixed {
                    cfg.fixed_correction = DurationNs::from_us(c);
                }
                let busy = wait_for_idle(0.15, Duration::from_secs(20));
                let m = measure(&rig, cfg, size, span)?;
                let run = &m.run;
                let line = &m.line;
                let sched = match (&line.reader, &line.releaser) {
                    (Scheduling::RealTime { .. }, Scheduling::RealTime { .. }) => "FIFO".into(),
                    (a, b) => format!("{a:?}/{b:?}"),
                };
                println!(
                    "| {d} | {r} | {:.0} | {} | {} ({:.2} %) | {} | {} | {} | {} | {:.0} | {} / {} / {} | {} | {:.0} % | {} | {sched} |",
                    run.rate_sent.mbps(),
                    run.sent,
                    run.lost(),
                    run.loss_fraction() * 100.0,
                    us(run.delay_quantile(0.5), delay),
                    us(run.delay_quantile(0.99), delay),
                    us(run.delay_max(), delay),
                    line.hold_error.map_or("–".into(), |h| format!(
                        "{:.0} / {:.0}",
                        h.median.us_f64(),
                        h.p99.us_f64()
                    )),
                    line.release_lead.us_f64(),
                    line.dropped_queue_full,
                    line.tun_dropped.map_or("?".into(), |n| n.to_string()),
                    run.rcv_buf_errors,
                    line.cpu_per_packet()
                        .map_or("–".into(), |c| format!("{:.1}", c.us_f64())),
                    busy * 100.0,
                    run.steal.as_millis(),
                );
                if line.max_write > DurationNs::from_ms(1)
                    || line
                        .hold_error
                        .is_some_and(|h| h.max > DurationNs::from_ms(5))
                {
                    println!(
                        "  (relay: longest write-back {}, latest release {} after due; sender at worst {} behind schedule)",
                        line.max_write,
                        line.hold_error.map_or(DurationNs::ZERO, |h| h.max),
                        run.sender_max_late
                    );
                }
                if run.reordered > 0 {
                    println!("  ({} packets arrived out of order)", run.reordered);
                }
                if run.clock_step.ns().abs() > 1_000 {
                    println!(
                        "  (warning: CLOCK_REALTIME moved {} against MONOTONIC during the run)",
                        run.clock_step
                    );
                }
            }
        }
    }
    Ok(())
}
