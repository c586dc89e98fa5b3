//! `pathsonde trace capture`: the flags, the lab or server it runs across,
//! and the report.  The capture itself is `pathsonde_net::capture` (the
//! train, the clocks' offset) and `pathsonde_trace::capture` (the trace, the
//! rates achieved, whether the host drove the load); this only joins them
//! and prints.

use super::trace_failure;
use crate::Failure;
use clap::Args;
use pathsonde_core::{BitRate, Bytes, DurationNs, TrainSpec};
use pathsonde_lab::live::LivePath;
use pathsonde_lab::topology::{Lab, LabSpec, Role};
use pathsonde_trace::capture::{self, CaptureSummary};
use pathsonde_trace::{Trace, TraceError};
use serde::Serialize;
use std::fmt::Write as _;
use std::net::SocketAddr;
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

#[derive(Debug, Serialize)]
struct CaptureReport {
    file: PathBuf,
    csv: Option<PathBuf>,
    path: String,
    packets: usize,
    lost: usize,
    asked_rate_bps: f64,
    /// From the send stamps: (packets − 1) × size / (last send − first send).
    achieved_rate_bps: f64,
    /// From the receive stamps, the same way.
    received_rate_bps: Option<f64>,
    /// Achieved / asked.
    drive: f64,
    /// False when the host sent below 95 % of the asked load.
    host_drove_load: bool,
    send_clock: String,
    recv_clock: String,
    /// Latencies are true one-way delays (lab: one clock at both ends).
    absolute: bool,
    notes: Vec<String>,
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
    let (trace, mut report) = match &a.server {
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
            let (t, r) = capture_on(addr, &spec, false)?;
            (t, r.with_path(format!("server {addr}")))
        }
        None => capture_lab(a, &spec, show, secs)?,
    };
    trace.write_path(&a.out).map_err(trace_failure)?;
    if let Some(c) = &a.csv {
        let f = std::fs::File::create(c)
            .map_err(|e| trace_failure(TraceError::io(format!("creating {}", c.display()), e)))?;
        trace
            .write_csv(&mut std::io::BufWriter::new(f))
            .map_err(trace_failure)?;
    }
    report.file = a.out.clone();
    report.csv = a.csv.clone();
    let v = serde_json::to_value(&report).unwrap_or_default();
    crate::output::result(&v, || {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "captured {} packets ({} lost) across {} into {}{}",
            report.packets,
            report.lost,
            report.path,
            report.file.display(),
            report
                .csv
                .as_ref()
                .map_or(String::new(), |c| format!(" and {}", c.display()))
        );
        let _ = writeln!(
            t,
            "load asked {:.1}, sent {:.1} ({:.1} %){}, received {}",
            BitRate::from_bps(report.asked_rate_bps),
            BitRate::from_bps(report.achieved_rate_bps),
            report.drive * 100.0,
            if report.host_drove_load {
                ""
            } else {
                " — this host cannot drive the asked load"
            },
            report
                .received_rate_bps
                .map_or("–".into(), |r| format!("{:.1}", BitRate::from_bps(r)))
        );
        let _ = writeln!(
            t,
            "clocks: send {}, receive {}; latencies {}",
            report.send_clock,
            report.recv_clock,
            if report.absolute {
                "are one-way delays (one clock)"
            } else {
                "are relative to the fastest packet (two clocks)"
            }
        );
        for n in &report.notes {
            let _ = writeln!(t, "note: {n}");
        }
        let _ = writeln!(
            t,
            "analyse it: pathsonde trace analyze {}",
            report.file.display()
        );
        t
    });
    Ok(())
}

impl CaptureReport {
    /// The report of a capture, before the files and the path are known.
    fn of(c: CaptureSummary) -> Self {
        CaptureReport {
            file: PathBuf::new(),
            csv: None,
            path: String::new(),
            packets: c.packets,
            lost: c.lost,
            asked_rate_bps: c.asked_rate.bps(),
            achieved_rate_bps: c.achieved_rate.bps(),
            received_rate_bps: c.received_rate.map(|r| r.bps()),
            drive: c.drive,
            host_drove_load: c.host_drove_load,
            send_clock: c.send_clock.describe().into(),
            recv_clock: c.recv_clock.describe().into(),
            absolute: c.absolute,
            notes: c.notes,
        }
    }

    fn with_path(mut self, p: String) -> Self {
        self.path = p;
        self
    }
}

fn capture_lab(
    a: &CaptureArgs,
    spec: &TrainSpec,
    show: bool,
    secs: f64,
) -> Result<(Trace, CaptureReport), Failure> {
    pathsonde_lab::netns::check_permitted().map_err(Failure::from)?;
    let lab_spec = LabSpec {
        name: a
            .name
            .clone()
            .unwrap_or_else(|| format!("t8{}", std::process::id())),
        capacity: a.capacity,
        queue: a.queue,
        mtu: 1500,
        cross_sources: 0,
        narrow: None,
        delay: None,
        threaded_napi: a.threaded_napi,
    };
    lab_spec.validate().map_err(Failure::from)?;
    if show {
        eprintln!(
            "waiting for the lab lock ({})",
            pathsonde_lab::exclusive::LOCK_PATH
        );
    }
    let _lock = pathsonde_lab::exclusive::lab_lock().map_err(Failure::from)?;
    if show {
        eprintln!(
            "building lab {} ({} tbf, queue {} B{}); capturing {} packets of {} B at {} (about {secs:.1} s)",
            lab_spec.name,
            lab_spec.capacity,
            lab_spec.queue.get(),
            if a.threaded_napi { ", threaded NAPI" } else { "" },
            a.count,
            a.size.get(),
            a.rate
        );
    }
    let desc = format!(
        "lab {} ({} tbf, queue {} B{})",
        lab_spec.name,
        lab_spec.capacity,
        lab_spec.queue.get(),
        if a.threaded_napi {
            ", threaded NAPI"
        } else {
            ""
        }
    );
    let lab = Lab::build(lab_spec).map_err(Failure::from)?;
    let live = match LivePath::start(&lab, &[], 1, a.rate) {
        Ok(l) => l,
        Err(e) => {
            drop(lab);
            return Err(Failure::from(e));
        }
    };
    let spec = *spec;
    let snd = lab.ns(Role::Sender);
    let got = pathsonde_lab::netns::run_in(&snd, move || {
        capture_on(LivePath::server_addr(), &spec, true)
            .map_err(|f| pathsonde_lab::LabError::Capability(f.message))
    });
    let (_, notes) = live.stop();
    drop(lab);
    let (t, mut r) = got.map_err(Failure::from)?;
    r.notes.extend(notes);
    Ok((t, r.with_path(desc)))
}

/// Sends one train to the server at `addr` and reads it as a trace:
/// the socket side is `pathsonde_net::capture`, the reading
/// `pathsonde_trace::capture`; this only joins them for the report.
fn capture_on(
    addr: SocketAddr,
    spec: &TrainSpec,
    same_clock: bool,
) -> Result<(Trace, CaptureReport), Failure> {
    let got = pathsonde_net::capture::send_train(addr, spec)?;
    let c = capture::from_observation(
        &got.observation,
        spec,
        got.realtime_minus_monotonic_ns,
        same_clock,
    );
    Ok((c.trace, CaptureReport::of(c.summary)))
}
