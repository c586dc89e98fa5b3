//! `pathsonde trace capture`: the flags, the lab or server it runs across,
//! and the report.  The capture itself is `pathsonde_net::capture` (the
//! train, the clocks' offset), `pathsonde_lab::trace_capture` (the lab path
//! built for it) and `pathsonde_trace::capture` (the trace, the rates
//! achieved, whether the host drove the load); this only joins them and
//! prints through `pathsonde_render::trace`.

use super::trace_failure;
use crate::Failure;
use clap::Args;
use pathsonde_core::{BitRate, Bytes, DurationNs, TrainSpec};
use pathsonde_render::trace::{capture_lab_text, capture_text};
use pathsonde_trace::capture::{self, CaptureReport};
use std::path::PathBuf;

/// Most packets one capture may hold: the server's per-train limit.
const MAX_CAPTURE: u32 = pathsonde_wire::control::MAX_TRAIN_PACKETS;

#[derive(Args)]
pub struct CaptureArgs {
    /// Offered load, e.g. 300M.
    #[arg(long, default_value = "300M", value_parser = crate::args::positive_rate)]
    rate: BitRate,
    /// IP packet size, bytes.
    #[arg(long, default_value = "1024", value_parser = crate::args::packet_size)]
    size: Bytes,
    /// Packets to send (at most 100 000, the server's train limit).
    #[arg(long, short, default_value_t = 50_000)]
    count: u32,
    /// Packets per car: 1 is a uniform stream; more send back-to-back
    /// groups at the same average rate when the host cannot space single packets.
    #[arg(long, default_value_t = 1)]
    car: u32,
    /// Output file (binary trace).
    #[arg(long, short)]
    out: PathBuf,
    /// Also write the trace as CSV here.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Measure to this pathsonde server (HOST or HOST:PORT) instead of a lab.
    #[arg(long)]
    server: Option<String>,
    /// Lab: tight-link capacity (tbf rate).
    #[arg(long, default_value = "1gbit", value_parser = crate::args::positive_rate)]
    capacity: BitRate,
    /// Lab: tight-link queue limit.
    #[arg(long, default_value = "256KiB", value_parser = crate::args::positive_size)]
    queue: Bytes,
    /// Lab: threaded NAPI on the receiver's veth (batches receive stamps, as
    /// NIC interrupt coalescing does).
    #[arg(long)]
    threaded_napi: bool,
    /// Lab name (namespaces pathsonde-NAME-ROLE); default t8<pid>.
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    pub(super) json: crate::args::JsonFlags,
}

pub(super) fn capture(a: &CaptureArgs) -> Result<(), Failure> {
    if a.count < 16 || a.count > MAX_CAPTURE {
        return Err(crate::usage(format!(
            "--count {} must be 16..={MAX_CAPTURE}",
            a.count
        )));
    }
    if a.car == 0 || a.car > 64 || a.count % a.car != 0 {
        return Err(crate::usage(format!(
            "--car {} must be 1..=64 and divide --count",
            a.car
        )));
    }
    let spec = TrainSpec {
        packet_size: a.size,
        packets_per_car: a.car,
        cars: a.count / a.car,
        rate: a.rate,
        idle_before: DurationNs::ZERO,
    };
    let show = crate::output::show_progress();
    let secs = spec.duration().map_or(0.0, |d| d.secs_f64());
    // The lab has one clock at both ends; a server has its own.
    let (got, notes, path, same_clock) = match &a.server {
        Some(host) => {
            let addr = crate::resolve(host, crate::DEFAULT_PORT)?;
            if show {
                eprintln!(
                    "capturing {} packets of {} B at {} to {addr} (about {secs:.1} s)",
                    a.count,
                    a.size.get(),
                    a.rate
                );
            }
            let got = pathsonde_net::capture::send_train(addr, &spec)?;
            (got, Vec::new(), format!("server {addr}"), false)
        }
        None => {
            let lab_spec = pathsonde_lab::trace_capture::capture_spec(
                a.name.clone(),
                a.capacity,
                a.queue,
                a.threaded_napi,
            );
            let desc = capture_lab_text(&lab_spec);
            let waiting = || {
                if show {
                    eprintln!(
                        "waiting for the lab lock ({})",
                        pathsonde_lab::exclusive::LOCK_PATH
                    );
                }
            };
            let building = || {
                if show {
                    eprintln!(
                        "building {desc}; capturing {} packets of {} B at {} (about {secs:.1} s)",
                        a.count,
                        a.size.get(),
                        a.rate
                    );
                }
            };
            let (got, notes) =
                pathsonde_lab::trace_capture::send_train_across(lab_spec, &spec, waiting, building)
                    .map_err(Failure::from)?;
            (got, notes, desc, true)
        }
    };
    let c = capture::from_observation(
        &got.observation,
        &spec,
        got.realtime_minus_monotonic_ns,
        same_clock,
    );
    let mut report = CaptureReport::of(c.summary).with_path(path);
    report.notes.extend(notes);
    capture::write_files(&c.trace, &a.out, a.csv.as_deref()).map_err(trace_failure)?;
    report.file = a.out.clone();
    report.csv = a.csv.clone();
    let v = serde_json::to_value(&report).unwrap_or_default();
    crate::output::result(&v, || capture_text(&report));
    Ok(())
}
