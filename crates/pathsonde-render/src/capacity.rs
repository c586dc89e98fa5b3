//! `pathsonde capacity`'s report of a finished test (RFC 9097's Maximum
//! IP-Layer Capacity over the UDP Speed Test Protocol; docs/capacity.md):
//! the text report, the JSON result, the archive's one-line summary and the
//! notes that explain a figure.  Takes `pathsonde_net::udpst::CapacityRun`
//! as the test returns it; the command (`capacity_cmd`) only runs the test,
//! prints what these return and archives it.

use pathsonde_core::capacity::zero_loss::ZeroLoss;
use pathsonde_core::{BitRate, DurationNs};
use pathsonde_net::udpst::{Algorithm, CapacityRun, Direction};
use serde_json::{json, Value};
use std::fmt::Write as _;

/// The direction as the JSON and the archive spell it.
pub fn direction_word(d: Direction) -> &'static str {
    match d {
        Direction::Upstream => "upstream",
        Direction::Downstream => "downstream",
    }
}

/// The load-adjustment algorithm as the JSON and the archive spell it.
pub fn algorithm_word(a: Algorithm) -> &'static str {
    match a {
        Algorithm::B => "b",
        Algorithm::C => "c",
    }
}

/// The archive's one-line summary: the maximum and where it was reached.
pub fn summary_line(run: &CapacityRun) -> String {
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
