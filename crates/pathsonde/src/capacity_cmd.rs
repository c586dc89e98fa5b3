//! `pathsonde capacity`: RFC 9097's Maximum IP-Layer Capacity over the UDP
//! Speed Test Protocol (docs/capacity.md).  The test is
//! `pathsonde_net::udpst::run`'s; this turns the flags into its config,
//! shows progress, prints the report (pathsonde's text or JSON, drawn by
//! `pathsonde_render::capacity`, or the reference client's JSON with
//! `--format udpst-json`) and archives it.

use crate::args::{self, JsonFlags, SaveFlags};
use crate::{archive_cmd, output, serve_cmd, usage, Failure};
use clap::{Args, ValueEnum};
use pathsonde_core::capacity::summary::SubIntervalRow;
use pathsonde_core::{BitRate, DurationNs};
use pathsonde_net::udpst::{self, Algorithm, CapacityConfig, CapacityError, Direction};
use pathsonde_render::capacity::{algorithm_word, direction_word, result_json, summary_line, text};
use pathsonde_render::udpst_json;
use serde_json::{json, Value};
use std::path::PathBuf;

/// The protocol's standard control port (IANA-registered for UDPSTP).
pub(crate) const DEFAULT_UDPST_PORT: u16 = pathsonde_wire::udpst::DEFAULT_CONTROL_PORT;

#[derive(Args)]
pub struct CapacityArgs {
    /// The server: HOST, HOST:PORT, [V6] or [V6]:PORT, running `pathsonde
    /// serve` or any UDP Speed Test Protocol server (OB-UDPST's udpst).
    pub host: String,
    /// The server's control port, unless HOST names one.
    #[arg(long, short, default_value_t = DEFAULT_UDPST_PORT)]
    pub port: u16,
    /// Upstream: this host sends, the server measures what arrives [default].
    #[arg(long, short = 'u', conflicts_with = "downstream")]
    pub upstream: bool,
    /// Downstream: the server sends, this host measures what arrives.
    #[arg(long, short = 'd')]
    pub downstream: bool,
    /// Test duration, 5 s to 1 h in whole seconds, e.g. 10s (a bare number
    /// is seconds, as in iperf3).
    #[arg(long = "time", short = 't', default_value = "10s", value_parser = args::seconds)]
    pub duration: DurationNs,
    /// The load-adjustment search: b (RFC 9097's, the protocol's default) or
    /// c (multiply and retry: reaches 1 Gb/s in about a second).
    #[arg(long, value_enum, default_value = "b")]
    pub algorithm: AlgorithmArg,
    /// Connections (UDP flows) in parallel, 1–24; their rates add up.
    #[arg(long, short = 'C', default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=24))]
    pub connections: u8,
    /// Jumbo datagrams above 1 Gb/s (the protocol's default; the server's
    /// setting must match).
    #[arg(long, conflicts_with = "no_jumbo")]
    pub jumbo: bool,
    /// No jumbo datagrams (for a server started without them).
    #[arg(long)]
    pub no_jumbo: bool,
    /// Traditional 1500-byte-MTU datagram sizes (the server's setting must match).
    #[arg(long)]
    pub traditional_mtu: bool,
    /// The most this test may ask of the path, e.g. 500M: stated to the
    /// server, which keeps its search at or below it [default: no limit of
    /// ours; the server's own applies].
    #[arg(long, value_name = "RATE", value_parser = args::positive_rate)]
    pub max_rate: Option<BitRate>,
    /// Send at one row of the sending-rate table (0–1152; row N ≈ N Mb/s up
    /// to 1000) instead of searching.
    #[arg(long, value_name = "ROW", conflicts_with = "start_row", value_parser = clap::value_parser!(u16).range(0..=1152))]
    pub fixed_row: Option<u16>,
    /// Start the search at this row instead of row 0.
    #[arg(long, value_name = "ROW", value_parser = clap::value_parser!(u16).range(0..=1152))]
    pub start_row: Option<u16>,
    /// Judge congestion by one-way delay variation instead of RTT variation.
    #[arg(long)]
    pub owd: bool,
    /// Length of each reported sub-interval, 100 ms to 10 s.
    #[arg(long, default_value = "1s", value_parser = args::seconds)]
    pub sub_interval: DurationNs,
    /// Status feedback (trial) interval, 5 ms to 250 ms.
    #[arg(long, default_value = "50ms", value_parser = args::seconds)]
    pub trial_interval: DurationNs,
    /// Authenticate with a key from this file (lines of `<key-id> <hex
    /// secret>`; the protocol needs a numeric key id 0–255; docs/capacity.md).
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// Which key of --key-file to use [default: the first].
    #[arg(long, value_name = "ID", requires = "key_file")]
    pub key_id: Option<String>,
    /// What to print: pathsonde's report, or `udpst-json`: the reference
    /// client's JSON (its key names and ErrorStatus) for scripts written for it.
    #[arg(long, value_enum, default_value = "text", conflicts_with_all = ["json", "json_lines"])]
    pub format: Format,
    #[command(flatten)]
    pub json: JsonFlags,
    #[command(flatten)]
    pub save: SaveFlags,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AlgorithmArg {
    B,
    C,
}

impl From<AlgorithmArg> for Algorithm {
    fn from(a: AlgorithmArg) -> Algorithm {
        match a {
            AlgorithmArg::B => Algorithm::B,
            AlgorithmArg::C => Algorithm::C,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    UdpstJson,
}

impl CapacityArgs {
    /// The test these flags describe, checked before anything is sent.
    fn config(&self) -> Result<CapacityConfig, Failure> {
        let secs = self.duration.secs_f64();
        if !(5.0..=3600.0).contains(&secs) || self.duration.ns() % 1_000_000_000 != 0 {
            return Err(usage(format!(
                "-t {} must be whole seconds from 5 s to 3600 s (the protocol counts seconds)",
                self.duration
            )));
        }
        let ms = |d: DurationNs| d.ns() as f64 / 1e6;
        if !(100.0..=10_000.0).contains(&ms(self.sub_interval)) {
            return Err(usage(format!(
                "--sub-interval {} must be from 100 ms to 10 s",
                self.sub_interval
            )));
        }
        if self.sub_interval > self.duration {
            return Err(usage(format!(
                "--sub-interval {} is longer than the test ({})",
                self.sub_interval, self.duration
            )));
        }
        if !(5.0..=250.0).contains(&ms(self.trial_interval)) {
            return Err(usage(format!(
                "--trial-interval {} must be from 5 ms to 250 ms",
                self.trial_interval
            )));
        }
        let server = crate::resolve(&self.host, self.port)?;
        let key = match &self.key_file {
            None => None,
            Some(path) => {
                let key = serve_cmd::client_key(path, self.key_id.as_deref())?;
                let key_id = key.id.parse::<u8>().map_err(|_| {
                    usage(format!(
                        "{}: key id '{}' is not a number 0–255, which the UDP Speed Test Protocol needs",
                        path.display(),
                        key.id
                    ))
                })?;
                Some(udpst::UdpstKey {
                    key_id,
                    secret: key.secret().to_vec(),
                })
            }
        };
        Ok(CapacityConfig {
            server,
            direction: if self.downstream {
                Direction::Downstream
            } else {
                Direction::Upstream
            },
            duration: self.duration,
            algorithm: self.algorithm.into(),
            connections: self.connections,
            jumbo: !self.no_jumbo,
            traditional_mtu: self.traditional_mtu,
            key,
            max_rate: self.max_rate,
            sub_interval: self.sub_interval,
            trial_interval: self.trial_interval,
            use_owd: self.owd,
            fixed_row: self.fixed_row,
            start_row: self.start_row,
            ..CapacityConfig::default()
        })
    }
}

/// The word for a direction, as pathsonde's JSON and text say it.
/// `pathsonde capacity HOST`.
pub fn run(a: &CapacityArgs) -> Result<(), Failure> {
    let cfg = a.config()?;
    output::event(
        "start",
        json!({
            "command": "capacity",
            "server": cfg.server.to_string(),
            "direction": direction_word(cfg.direction),
            "algorithm": algorithm_word(cfg.algorithm),
            "connections": cfg.connections,
            "duration_s": cfg.duration.secs_f64(),
        }),
    );
    // In milliseconds of the test: its length is known, so the ETA is exact.
    let bar = output::show_progress()
        .then(|| output::progress_bar((cfg.duration.ns() / 1_000_000).max(1) as u64, true));
    let planned = (cfg.duration.ns() / cfg.sub_interval.ns().max(1)).max(1) as f64;
    let mut on_row = |r: &SubIntervalRow| {
        let line = format!(
            "sub-interval {}: {} delivered {:.2} %",
            r.interval, r.ip_layer_capacity_bps, r.delivered_percent
        );
        if let Some(b) = &bar {
            b.set_position(r.time_s.ns().max(0) as u64 / 1_000_000);
            b.set_message(line.clone());
        }
        output::event(
            "progress",
            json!({ "message": line, "fraction": (f64::from(r.interval) / planned).min(1.0) }),
        );
        output::event("sub_interval", serde_json::to_value(r).unwrap_or_default());
    };
    let started = std::time::Instant::now();
    let outcome = udpst::run(&cfg, &mut on_row);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let run = match outcome {
        Ok(run) => run,
        Err(e) => {
            if a.format == Format::UdpstJson {
                println!("{}", udpst_json::failure(&cfg, &e));
            }
            return Err(failure(&e));
        }
    };
    if run.report.summary.is_none() {
        let why = "no sub-interval completed: the server reported no load arriving";
        if a.format == Format::UdpstJson {
            println!("{}", udpst_json::report(&run));
        }
        return Err(Failure {
            exit: crate::exit::Exit::NoEstimate,
            message: format!("capacity to {}: {why}", cfg.server),
        });
    }
    let result = result_json(&run);
    let record = pathsonde_archive::Record {
        kind: "capacity".into(),
        target: cfg.server.to_string(),
        method: Some(format!("udpst-{}", algorithm_word(cfg.algorithm))),
        started: archive_cmd::started_ago(started.elapsed()),
        duration: started.elapsed(),
        summary: summary_line(&run),
        result,
        raw: None,
    };
    if a.format == Format::UdpstJson {
        // The reference's JSON is the whole of stdout; the archive keeps
        // pathsonde's own result, and the hint goes to stderr.
        let saved = archive_cmd::save(&record);
        println!("{}", udpst_json::report(&run));
        if let Some(id) = saved
            .as_ref()
            .and_then(|v| v.get("id"))
            .and_then(Value::as_i64)
        {
            eprintln!("pathsonde: saved as run {id}");
        }
        return Ok(());
    }
    archive_cmd::finish(record, || text(&run));
    Ok(())
}

/// A failed test, with its exit code: the protocol's ErrorStatus is in the
/// message (and in `--format udpst-json`'s object).
fn failure(e: &CapacityError) -> Failure {
    use crate::exit::Exit;
    let status = e.error_status();
    let exit = match status {
        105 | 107 | 108 | 104 | 106 | 157 | 158 => Exit::Auth,
        102 => Exit::Version,
        110 | 113 => Exit::Busy,
        100..=199 => Exit::Protocol,
        200..=254 => Exit::Timeout,
        _ => Exit::Internal,
    };
    Failure {
        exit,
        message: format!("{e} (ErrorStatus {status})"),
    }
}
