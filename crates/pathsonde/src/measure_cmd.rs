//! `pathsonde measure HOST`: netest's full report (Verbose, General
//! statistics, General, UDP, TCP, Advisory) and `pathsonde mbs HOST`.
//! The measurement is `pathsonde_net::throughput::measure`; the reports
//! (text and JSON) are `pathsonde_render::measure`'s; this file turns the
//! flags into options, runs it, prints and archives.

use crate::{resolve, Failure};
use clap::Args;
use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_net::client::{Client, ClientConfig};
use pathsonde_net::throughput::measure::{measure, MeasureOptions};
use pathsonde_net::throughput::measure_mbs;
use pathsonde_render::measure::{mbs_summary_line, mbs_text, summary_line, text, to_json};
use serde_json::json;
use std::time::Duration;

#[derive(Args, Clone)]
pub struct MeasureArgs {
    /// The server: HOST, HOST:PORT, [V6] or [V6]:PORT.
    pub host: String,
    /// The server's port, unless HOST names one.
    #[arg(long, short, default_value_t = crate::DEFAULT_PORT)]
    pub port: u16,
    /// Time budget for the whole measurement, e.g. 30s.
    #[arg(long, default_value = "30s")]
    pub budget: DurationNs,
    /// Fastest rate FAC² and the UDP ramp probe at (bits/s; k, M, G).
    #[arg(long, default_value = "1G", value_parser = crate::args::positive_rate)]
    pub max_rate: BitRate,
    /// IP packet size of UDP probes and bursts, bytes.
    #[arg(long, default_value = "1500", value_parser = crate::args::packet_size)]
    pub packet_size: Bytes,
    /// The tight link's capacity at the IP layer, if you know it: FAC² uses
    /// it instead of measuring it; printed and recorded [default: not known].
    #[arg(long, value_name = "RATE", value_parser = crate::args::positive_rate)]
    pub known_capacity: Option<BitRate>,
    /// Largest burst the MBS search tries, e.g. 8MiB (sizes: docs/units.md).
    #[arg(long, default_value = "8MiB", value_parser = crate::args::positive_size)]
    pub max_burst: Bytes,
    /// Stream counts of the parallel TCP sweep, comma-separated.
    #[arg(long, default_value = "1,2,3,4,6,8", value_delimiter = ',')]
    pub streams: Vec<u16>,
    /// How long to wait for any one answer from the server, e.g. 3s (a bare
    /// number is seconds).
    #[arg(long, default_value = "3s", value_parser = crate::args::seconds)]
    pub timeout: DurationNs,
    #[command(flatten)]
    pub json: crate::args::JsonFlags,
    #[command(flatten)]
    pub save: crate::args::SaveFlags,
}

fn check(a: &MeasureArgs) -> Result<(), Failure> {
    let b = a.budget.secs_f64();
    if !(5.0..=600.0).contains(&b) {
        return Err(crate::usage(format!(
            "--budget {b} s must be 5..600 seconds"
        )));
    }
    if a.streams.is_empty() || a.streams.iter().any(|&n| n == 0 || n > 16) {
        return Err(crate::usage("--streams: counts of 1..16".into()));
    }
    if !(a.timeout.ns() > 0 && a.timeout <= DurationNs::from_secs(3600)) {
        return Err(crate::usage(format!(
            "--timeout {} must be in (0, 3600] seconds",
            a.timeout
        )));
    }
    if a.max_burst.get() < 2 * a.packet_size.get() || a.max_burst.get() > 64 << 20 {
        return Err(crate::usage(
            "--max-burst must be two packets .. 64MiB".into(),
        ));
    }
    Ok(())
}

pub(crate) fn run(a: &MeasureArgs) -> Result<(), Failure> {
    check(a)?;
    let addr = resolve(&a.host, a.port)?;
    let mut opts = MeasureOptions::new(addr);
    opts.budget = a.budget.to_std();
    opts.max_rate = a.max_rate;
    opts.known_capacity = a.known_capacity;
    crate::settings::check_settings(&crate::settings::settings_of(
        a.max_rate,
        a.packet_size,
        a.known_capacity,
    ))?;
    opts.packet = a.packet_size;
    opts.max_burst = a.max_burst;
    opts.sweep = a.streams.clone();
    opts.reply_timeout = a.timeout.to_std();
    let show = crate::output::show_progress();
    let started = std::time::Instant::now();
    let mut progress = |l: &str| {
        if show {
            eprintln!("[{:5.1} s] {l}", started.elapsed().as_secs_f64());
        }
        crate::output::event(
            "progress",
            json!({ "message": l, "t_s": started.elapsed().as_secs_f64() }),
        );
    };
    let r = measure(&opts, &mut progress)?;
    let duration = started.elapsed();
    let summary = summary_line(&r);
    // One call archives the report and prints it in the mode chosen (docs/archive.md).
    crate::archive_cmd::finish(
        pathsonde_archive::Record {
            kind: "measure".into(),
            target: addr.to_string(),
            method: None,
            started: crate::archive_cmd::started_ago(duration),
            duration,
            summary,
            result: to_json(&r),
            raw: None,
        },
        || text(&r),
    );
    Ok(())
}

#[derive(Args, Clone)]
pub struct MbsArgs {
    /// The server: HOST, HOST:PORT, [V6] or [V6]:PORT.
    pub host: String,
    /// The server's port, unless HOST names one.
    #[arg(long, short, default_value_t = crate::DEFAULT_PORT)]
    pub port: u16,
    /// Searches to run (the MBS is their median; the range is their spread).
    #[arg(long, default_value_t = 5)]
    pub searches: u32,
    /// IP packet size of the bursts, bytes.
    #[arg(long, default_value = "1500", value_parser = crate::args::packet_size)]
    pub packet_size: Bytes,
    /// Largest burst tried, e.g. 8MiB (sizes: docs/units.md).
    #[arg(long, default_value = "8MiB", value_parser = crate::args::positive_size)]
    pub max_burst: Bytes,
    #[command(flatten)]
    pub json: crate::args::JsonFlags,
    #[command(flatten)]
    pub save: crate::args::SaveFlags,
}

/// `pathsonde mbs HOST`: the maximum burst size alone.
pub(crate) fn run_mbs(a: &MbsArgs) -> Result<(), Failure> {
    if !(1..=50).contains(&a.searches) {
        return Err(crate::usage("--searches must be 1..50".into()));
    }
    if a.max_burst.get() < 2 * a.packet_size.get() || a.max_burst.get() > 64 << 20 {
        return Err(crate::usage(
            "--max-burst must be two packets .. 64MiB".into(),
        ));
    }
    let addr = resolve(&a.host, a.port)?;
    let started = std::time::Instant::now();
    let mut client = Client::connect(ClientConfig::new(addr))?;
    let rtt = client.control_rtt(5)?;
    let linger = (rtt.max.to_std() * 4).max(Duration::from_millis(20));
    let m = measure_mbs(
        &mut client,
        a.packet_size,
        a.max_burst,
        a.searches,
        linger,
        &mut |s| {
            crate::output::progress(&format!(
                "search: {} bytes ({} bursts)",
                s.bytes.get(),
                s.bursts.len()
            ));
        },
    )?;
    client.close();
    let duration = started.elapsed();
    let summary = mbs_summary_line(&m);
    // One call archives the run and prints it in the mode chosen (docs/archive.md).
    crate::archive_cmd::finish(
        pathsonde_archive::Record {
            kind: "mbs".into(),
            target: addr.to_string(),
            method: None,
            started: crate::archive_cmd::started_ago(duration),
            duration,
            summary,
            result: json!({ "server": addr.to_string(), "rtt_control": rtt, "mbs": m }),
            raw: None,
        },
        || mbs_text(&m),
    );
    Ok(())
}
