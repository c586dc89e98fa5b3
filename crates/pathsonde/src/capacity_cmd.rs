//! `pathsonde capacity`: RFC 9097's Maximum IP-Layer Capacity over the UDP
//! Speed Test Protocol (docs/capacity.md).  The test is
//! `pathsonde_net::udpst::run`'s; this turns the flags into its config,
//! shows progress, prints the report (pathsonde's text or JSON, or the
//! reference client's JSON with `--format udpst-json`) and archives it.

mod udpst_json;

use crate::args::{self, JsonFlags, SaveFlags};
use crate::{archive_cmd, output, serve_cmd, usage, Failure};
use clap::{Args, ValueEnum};
use pathsonde_core::capacity::summary::SubIntervalRow;
use pathsonde_core::capacity::zero_loss::ZeroLoss;
use pathsonde_core::{BitRate, DurationNs};
use pathsonde_net::udpst::{
    self, Algorithm, CapacityConfig, CapacityError, CapacityRun, Direction,
};
use serde_json::{json, Value};
use std::fmt::Write as _;
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
            algorithm: match self.algorithm {
                AlgorithmArg::B => Algorithm::B,
                AlgorithmArg::C => Algorithm::C,
            },
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
fn direction_word(d: Direction) -> &'static str {
    match d {
        Direction::Upstream => "upstream",
        Direction::Downstream => "downstream",
    }
}

fn algorithm_word(a: Algorithm) -> &'static str {
    match a {
        Algorithm::B => "b",
        Algorithm::C => "c",
    }
}

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
    let bar = output::show_progress().then(|| progress_bar(cfg.duration));
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

/// The terminal's bar: the test's length is known, so the ETA is exact.
fn progress_bar(duration: DurationNs) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new((duration.ns() / 1_000_000).max(1) as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} {elapsed_precise} [{bar:30}] {percent:>3} %, eta {eta}  {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
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

/// The archive's one-line summary: the maximum and where it was reached.
fn summary_line(run: &CapacityRun) -> String {
    match &run.report.summary {
        Some(s) => format!(
            "max {} (IP) at {}, {}",
            s.max_ip_layer_capacity_bps,
            s.max_time_s,
            direction_word(run.config.direction)
        ),
        None => "no sub-interval completed".into(),
    }
}

/// pathsonde's `--json` object (and the archived result).
pub fn result_json(run: &CapacityRun) -> Value {
    let n = &run.negotiated;
    let summary = run.report.summary.as_ref();
    let host_limited = host_limit(run);
    json!({
        "command": "capacity",
        "server": run.config.server.to_string(),
        "direction": direction_word(run.config.direction),
        "algorithm": algorithm_word(run.config.algorithm),
        "connections": run.config.connections,
        "duration_s": run.config.duration.secs_f64(),
        "max_rate_bps": run.config.max_rate.map(|r| r.bps()),
        "max_ip_layer_capacity_bps": summary.map(|s| s.max_ip_layer_capacity_bps.bps()),
        "max_time_s": summary.map(|s| s.max_time_s.secs_f64()),
        "mean_ip_layer_capacity_bps": summary.map(|s| s.ip_layer_capacity_bps.bps()),
        "available_ip_layer_capacity_bps": run.report.zero_loss.fitted().map(|(a, _, _)| a.bps()),
        "zero_loss": run.report.zero_loss,
        "negotiated": {
            "trial_interval_s": f64::from(n.trial_interval_ms) / 1e3,
            "sub_interval_s": f64::from(n.sub_interval_ms) / 1e3,
            "test_duration_s": n.test_duration_s,
            "low_threshold_s": f64::from(n.low_thresh_ms) / 1e3,
            "upper_threshold_s": f64::from(n.upper_thresh_ms) / 1e3,
            "use_one_way_delay": n.use_owd,
            "high_speed_delta_rows": n.high_speed_delta,
            "slow_adjust_threshold": n.slow_adj_thresh,
            "sequence_error_threshold": n.seq_err_thresh,
            "ignore_reorder_duplicates": n.ignore_reorder_dup,
            "sending_rate_index": n.sr_index,
            "jumbo": run.config.jumbo,
            "traditional_mtu": run.config.traditional_mtu,
            "authenticated": run.config.key.is_some(),
        },
        "mc_ident": run.mc_ident,
        "local": run.local.to_string(),
        "server_test_ports": run.server_test_ports,
        "sub_intervals": run.report.sub_intervals,
        "summary": summary,
        "warnings": run.warnings.iter().map(|w| json!({ "code": w.code, "message": w.message })).collect::<Vec<_>>(),
        "error_status": run.error_status,
        "ecn_bleaching": run.ecn_bleaching,
        "cost": {
            "bytes_sent": run.bytes_sent.get(),
            "bytes_received": run.bytes_received.get(),
        },
        "datagrams_clamped": run.datagrams_clamped,
        "notes": notes(run),
        // The sending host, not the path, stopped the search: the maximum
        // is a lower bound (docs/capacity.md).
        "host_limited": host_limited,
        "max_is_lower_bound": host_limited.is_some(),
    })
}

/// pathsonde's reading beside the maximum (docs/capacity.md, "The
/// zero-loss fit").
fn zero_loss_line(z: &ZeroLoss) -> String {
    match *z {
        ZeroLoss::Fitted {
            available_ip_layer_capacity_bps: a,
            low_bps,
            high_bps,
            congested_windows,
            ..
        } => format!(
            "at zero loss: {a} (band {low_bps} – {high_bps}), the rate delivered where this test starts to cause loss: what unresponsive traffic leaves free (fitted over {congested_windows} lossy 100 ms windows)"
        ),
        ZeroLoss::Unclear { reason, .. } => format!("at zero loss: unclear: {}", reason.words()),
    }
}

/// Whether the sending host, not the path, held the result (issue 26), in
/// words ([`CapacityRun::sender_held_maximum`]; `lab run --method capacity`
/// reports the same).
pub fn host_limit(run: &CapacityRun) -> Option<String> {
    run.sender_held_maximum()
}

/// What a reader should know about this result, in plain words.
fn notes(run: &CapacityRun) -> Vec<String> {
    let mut notes = Vec::new();
    let Some(s) = &run.report.summary else {
        return notes;
    };
    let max = s.max_ip_layer_capacity_bps.bps();
    let mean = s.ip_layer_capacity_bps.bps();
    // A maximum well above the other sub-intervals is what a token bucket's
    // burst or a brief lull in cross traffic gives: say so, with the median.
    let mut rates: Vec<f64> = run
        .report
        .sub_intervals
        .iter()
        .map(|r| r.ip_layer_capacity_bps.bps())
        .collect();
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    let last = run.report.sub_intervals.last().map_or(0, |r| r.interval);
    let rows = &run.report.sub_intervals;
    let climbing = rows.len() >= 2
        && rows[rows.len() - 1].ip_layer_capacity_bps.bps()
            > rows[rows.len() - 2].ip_layer_capacity_bps.bps() * 1.05;
    if s.max_interval == last && climbing {
        // Still climbing when the test ended: the maximum is a floor.
        notes.push(format!(
            "the search was still raising the rate when the test ended: the path carries at least {}; a longer test (-t) or --algorithm c goes further",
            BitRate::from_bps(max)
        ));
    } else if rates.len() >= 3
        && max > median * 1.05
        && median > 0.0
        && run.report.zero_loss.fitted().is_none()
    {
        notes.push(format!(
            "the maximum ({}) is {:.0} % above the median sub-interval ({}): a shaper's burst allowance or a lull in other traffic can lift one sub-interval; the median is the rate the path held",
            BitRate::from_bps(max),
            (max / median - 1.0) * 100.0,
            BitRate::from_bps(median)
        ));
    }
    let loss_at_max = s.at_max.loss_ratio;
    match run.report.zero_loss.fitted() {
        Some((a, _, high)) if max > high.bps() => notes.push(format!(
            "the maximum is {:.0} % above the rate at zero loss ({a}): the test reached it while losing {:.1} % of its datagrams, and unresponsive traffic in a shared tail-drop queue loses at about that ratio too, so part of the maximum was taken from other traffic; the rate at zero loss is what the path leaves free",
            (max / a.bps() - 1.0) * 100.0,
            loss_at_max * 100.0
        )),
        None if loss_at_max > 0.01 => notes.push(format!(
            "the maximum was delivered while the test lost {:.1} % of its datagrams: if unresponsive traffic shares a tail-drop queue it loses at about that ratio too, and part of the maximum may have been taken from it; --algorithm c sweeps the rate, which lets pathsonde fit the rate at zero loss",
            loss_at_max * 100.0
        )),
        _ => {}
    }
    if run.datagrams_clamped > 0 {
        notes.push(format!(
            "{} load datagrams went out smaller than their row asked: the server's search reached the table's jumbo rows (above 1 Gb/s, up to 9000-byte datagrams) and the path MTU is smaller, so they were sent at the largest unfragmented size; rates there are below the rows' — --no-jumbo (with a server without jumbo rows) keeps the table's own steps",
            run.datagrams_clamped
        ));
    }
    if let Some(r) = run.config.max_rate {
        if max >= r.bps() * 0.95 {
            notes.push(format!(
                "the test was held at or below --max-rate {r}: the path may carry more"
            ));
        }
    }
    if mean > 0.0 && s.loss_ratio == 0.0 && run.report.sub_intervals.len() >= 2 {
        let top_row = pathsonde_core::capacity::rate_table::RowIndex::MAX;
        let top = pathsonde_core::capacity::rate_table::ip_rate(
            top_row,
            pathsonde_core::capacity::rate_table::TableOptions {
                jumbo: run.config.jumbo,
                traditional_mtu: run.config.traditional_mtu,
            },
        );
        if max >= top.bps() * 0.95 {
            notes.push(format!(
                "no loss and the search reached the table's top ({top}): the path carries at least this; the number is the protocol's ceiling, not the path's"
            ));
        }
    }
    notes
}

/// A delay figure in milliseconds: the protocol measures whole ms, so a
/// column of them reads best in that one unit ("-" with no sample).
fn ms_or_dash(d: Option<DurationNs>) -> String {
    d.map_or("-".into(), |d| {
        let ms = d.ns() as f64 / 1e6;
        if ms.fract() == 0.0 {
            format!("{ms:.0}")
        } else {
            format!("{ms:.2}")
        }
    })
}

/// The text report.
pub fn text(run: &CapacityRun) -> String {
    let c = &run.config;
    let n = &run.negotiated;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "pathsonde capacity to {} (UDP Speed Test Protocol v20): {}, Type {}, {} connection(s), {} s",
        c.server,
        direction_word(c.direction),
        algorithm_word(c.algorithm).to_uppercase(),
        c.connections,
        n.test_duration_s
    );
    let _ = writeln!(
        t,
        "settings: trial interval {} ms, sub-interval {} ms, thresholds {}/{} ms of {} variation, fast step {} rows, sequence-error threshold {}{}{}",
        n.trial_interval_ms,
        n.sub_interval_ms,
        n.low_thresh_ms,
        n.upper_thresh_ms,
        if n.use_owd { "one-way delay" } else { "RTT" },
        n.high_speed_delta,
        n.seq_err_thresh,
        if n.ignore_reorder_dup { " (loss only)" } else { " (loss, reordering, duplicates)" },
        c.max_rate.map_or(String::new(), |r| format!(", at most {r}")),
    );
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "{:>4} {:>8} {:>10} {:>14} {:>22} {:>22} {:>14}",
        "#",
        "time s",
        "delivered",
        "loss/ooo/dup",
        "delay var. ms min/avg/max",
        "RTT var. ms min/avg/max",
        "IP-layer rate"
    );
    for r in &run.report.sub_intervals {
        let _ = writeln!(
            t,
            "{:>4} {:>8.3} {:>8.2} % {:>14} {:>25} {:>23} {:>14}",
            r.interval,
            r.time_s.secs_f64(),
            r.delivered_percent,
            format!(
                "{}/{}/{}",
                r.loss_count, r.reordered_count, r.replicated_count
            ),
            format!(
                "{}/{}/{}",
                ms_or_dash(r.pdv_min_s),
                ms_or_dash(r.pdv_avg_s),
                ms_or_dash(r.pdv_max_s)
            ),
            format!(
                "{}/{}/{}",
                ms_or_dash(r.rtt_var_min_s),
                ms_or_dash(r.rtt_var_avg_s),
                ms_or_dash(r.rtt_var_max_s)
            ),
            r.ip_layer_capacity_bps.to_string()
        );
    }
    if let Some(s) = &run.report.summary {
        let _ = writeln!(t, "\n--- Result ---");
        let _ = writeln!(
            t,
            "maximum IP-layer capacity: {} (sub-interval {}, at {})",
            s.max_ip_layer_capacity_bps, s.max_interval, s.max_time_s
        );
        let _ = writeln!(
            t,
            "  as Ethernet: {} (no FCS), {} (with FCS), {} (with FCS and VLAN)",
            s.max_eth_no_fcs_bps, s.max_eth_with_fcs_bps, s.max_eth_with_fcs_vlan_bps
        );
        if let Some(why) = host_limit(run) {
            let _ = writeln!(t, "host-limited: {why}");
        }
        let _ = writeln!(t, "{}", zero_loss_line(&run.report.zero_loss));
        let _ = writeln!(
            t,
            "mean over the test: {}; delivered {:.2} %, lost {}, reordered {}, duplicated {}",
            s.ip_layer_capacity_bps,
            s.delivered_percent,
            s.loss_count,
            s.reordered_count,
            s.replicated_count
        );
        let _ = writeln!(
            t,
            "delay variation: {} / {} / {} ms (min/avg/max); RTT variation: {} / {} / {} ms",
            ms_or_dash(s.pdv_min_s),
            ms_or_dash(s.pdv_avg_s),
            ms_or_dash(s.pdv_max_s),
            ms_or_dash(s.rtt_var_min_s),
            ms_or_dash(s.rtt_var_avg_s),
            ms_or_dash(s.rtt_var_max_s)
        );
        let _ = writeln!(
            t,
            "minimum RTT {} ms; minimum one-way delay {} ms (includes the offset between the clocks; both in the protocol's whole milliseconds)",
            ms_or_dash(s.min_rtt_s),
            ms_or_dash(s.min_one_way_delay_s)
        );
    }
    let _ = writeln!(
        t,
        "cost: sent {}, received {}",
        run.bytes_sent, run.bytes_received
    );
    for w in &run.warnings {
        let _ = writeln!(t, "warning {}: {}", w.code, w.message);
    }
    for n in notes(run) {
        let _ = writeln!(t, "note: {n}");
    }
    t
}
