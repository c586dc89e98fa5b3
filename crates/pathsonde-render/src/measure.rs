//! `pathsonde measure`'s report (netest's sections: Verbose, General
//! statistics, General, UDP, TCP, Advisory) as text and JSON, and `pathsonde
//! mbs`'s text report.  Both take the typed results of
//! `pathsonde_net::throughput` as the measurement returns them; the commands
//! (`measure_cmd`) only run the measurement, print what these return and
//! archive it.

use crate::report;
use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_net::throughput::measure::{FlowSummary, MeasureRun};
use pathsonde_net::throughput::MbsMeasurement;
use serde_json::{json, Value};
use std::fmt::Write;

/// A rate, or `-` when there is none.
pub fn rate(r: Option<BitRate>) -> String {
    r.map_or_else(|| "not measured".into(), |r| r.to_string())
}

fn flow_line(f: &FlowSummary) -> String {
    let mut s = format!(
        "{} ({} stream{}, {:.1} s",
        f.steady_bps,
        f.streams,
        if f.streams == 1 { "" } else { "s" },
        f.duration_s.secs_f64()
    );
    if let Some(l) = f.udp_loss {
        let _ = write!(s, ", loss {:.2} %", l * 100.0);
    }
    if let Some(r) = f.retrans_fraction {
        let _ = write!(s, ", retransmitted {:.2} %", r * 100.0);
    }
    s.push(')');
    s
}

fn tcp_info_line(f: &FlowSummary) -> Option<String> {
    let t = f.sender_tcp_info.first()?;
    let rcv = f.receiver_tcp_info.first();
    Some(format!(
        "sender TCP_INFO: cwnd {} × {} B, RTT {:.2} ms (min {:.2}), {} retransmits, pacing {}, delivery {}; receiver: rcv_space {} B, rwnd-limited {:.0} ms, sndbuf-limited {:.0} ms; buffers snd {} / rcv {} B",
        t.snd_cwnd,
        t.snd_mss,
        f64::from(t.rtt_us) / 1e3,
        f64::from(t.min_rtt_us) / 1e3,
        t.total_retrans,
        BitRate::from_bps(t.pacing_rate as f64 * 8.0),
        BitRate::from_bps(t.delivery_rate as f64 * 8.0),
        rcv.map_or(0, |r| r.rcv_space),
        t.rwnd_limited_us as f64 / 1e3,
        t.sndbuf_limited_us as f64 / 1e3,
        f.sender_buffers.0,
        f.receiver_buffers.1,
    ))
}

fn mbs_line(m: &MbsMeasurement) -> String {
    format!(
        "{} ({} B; median of {}; range {}–{}{}), {}-byte packets",
        m.summary.median,
        m.summary.median.get(),
        m.summary.samples.len(),
        m.summary.min,
        m.summary.max,
        if m.summary.at_least {
            "; at least: no loss up to the largest burst tried"
        } else {
            ""
        },
        m.packet.get()
    )
}

/// The one line `history` shows for a `measure` run: A ("≥" for a host-
/// limited or open-topped answer), the single-flow UDP rate and the TCP
/// window found.
pub fn summary_line(r: &MeasureRun) -> String {
    format!(
        "A {}, UDP {}, TCP window {}",
        r.abw.as_ref().map_or_else(
            || "-".into(),
            |m| {
                let e = &m.estimate;
                if e.high.is_none() || e.host_limited.is_some() {
                    format!("≥ {}", e.available)
                } else {
                    e.available.to_string()
                }
            }
        ),
        rate(r.udp_single),
        r.optimal_window
            .map_or_else(|| "-".into(), |w| w.to_string())
    )
}

/// The one line `history` shows for an `mbs` run.
pub fn mbs_summary_line(m: &MbsMeasurement) -> String {
    format!(
        "MBS {}{}",
        if m.summary.at_least { "≥ " } else { "" },
        m.summary.median
    )
}

/// netest's sections, in its order.
pub fn text(r: &MeasureRun) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "pathsonde measure {} ({} → {})\n",
        r.server, r.client_software, r.server_software
    );
    let _ = writeln!(s, "--- Verbose section ---");
    report::host_lines(&mut s, "local (client, sender)", &r.client_host);
    report::host_lines(&mut s, "remote (server, receiver)", &r.server_host);

    let _ = writeln!(s, "\n--- General statistics ---");
    let used = r.bytes_used();
    let _ = writeln!(
        s,
        "Average bandwidth used in testing: {} in {:.2} sec (budget {:.0} s; {} bytes)",
        BitRate::from_bps(used as f64 * 8.0 / r.duration_s.to_std().as_secs_f64().max(1e-9)),
        r.duration_s.to_std().as_secs_f64(),
        r.budget_s.to_std().as_secs_f64(),
        used
    );
    for p in &r.phases {
        let _ = writeln!(
            s,
            "  {:<9} {:>6.2} s  {:>12} bytes",
            p.name,
            p.seconds.to_std().as_secs_f64(),
            p.bytes
        );
    }
    match r.tcp_range() {
        Some((lo, avg, hi)) => {
            let _ = writeln!(s, "TCP transfer rate: min {lo} / avg {avg} / max {hi}");
        }
        None => {
            let _ = writeln!(s, "TCP transfer rate: no TCP test ran");
        }
    }

    let _ = writeln!(s, "\n--- General section ---");
    let _ = writeln!(
        s,
        "Round Trip Time (RTT): {:.3} ms ({}; control channel median {:.3} ms)",
        r.rtt().ms_f64(),
        if r.rtt_echo.is_some() {
            "UDP echo median"
        } else {
            "control channel"
        },
        r.rtt_control.median.ms_f64()
    );
    match &r.abw {
        Some(a) => {
            let e = &a.estimate;
            let _ = writeln!(
                s,
                "Available bandwidth (FAC²): {} [{} – {}]{}",
                e.available,
                e.low,
                rate(e.high),
                e.capacity
                    .map_or(String::new(), |c| format!(", capacity ≈ {c}"))
            );
        }
        None => {
            let _ = writeln!(s, "Available bandwidth (FAC²): no estimate");
        }
    }
    match &r.mbs {
        Some(m) => {
            let _ = writeln!(s, "Maximum burst size: {}", mbs_line(m));
            let _ = writeln!(
                s,
                "  bursts left the sender at {} and crossed the path at {}{} (line speed)",
                rate(m.sender_line_rate),
                line_at_least(m),
                rate(m.path_line_rate)
            );
            crate::flow::host_limit_lines(&mut s, &m.host_limits, "  ");
        }
        None => {
            let _ = writeln!(s, "Maximum burst size: not measured");
        }
    }
    if let Some(d) = r.safe_burst_interval {
        let _ = writeln!(s, "Safe burst interval (MBS / line speed): {d}");
    }

    let _ = writeln!(s, "\n--- UDP section ---");
    let _ = writeln!(s, "Single stream UDP throughput: {}", rate(r.udp_single));
    for st in &r.udp_ramp {
        let _ = writeln!(
            s,
            "  asked {:>12}  sent {:>12}  got {:>12}  loss {:6.2} %{}",
            st.asked.to_string(),
            st.sent.to_string(),
            st.received.to_string(),
            st.loss * 100.0,
            if st.receiver_dropped > 0.0 {
                format!(
                    " ({:.2} % dropped by the receiving socket, not the path)",
                    st.receiver_dropped * 100.0
                )
            } else {
                String::new()
            }
        );
    }
    match &r.udp_multi {
        Some(m) => {
            let _ = writeln!(s, "Multi-stream UDP throughput: {}", flow_line(m));
        }
        None => {
            let _ = writeln!(s, "Multi-stream UDP throughput: not measured");
        }
    }
    let _ = writeln!(
        s,
        "Use of multiple streams is {}",
        match r.udp_multi_helps {
            Some(true) => "recommended (a host limits one stream)",
            Some(false) => "not recommended",
            None => "undecided (not measured)",
        }
    );
    match &r.udp_burst {
        Some(b) => {
            let _ = writeln!(
                s,
                "Burst-controlled UDP (half the MBS per safe burst interval, asked {}): {}",
                rate(b.udp_asked_bps),
                flow_line(b)
            );
        }
        None => {
            let _ = writeln!(
                s,
                "Burst-controlled UDP: not measured (needs the MBS and a line speed)"
            );
        }
    }

    let _ = writeln!(s, "\n--- TCP section ---");
    let lim = |v: Option<u64>| v.map_or("?".to_string(), |b| Bytes(b).to_string());
    let _ = writeln!(
        s,
        "Buffer limits during the TCP tests: receiver tcp_rmem max {}, rmem_max {}; sender tcp_wmem max {}, wmem_max {}",
        lim(r.receiver_limits.tcp_rmem_max),
        lim(r.receiver_limits.rmem_max),
        lim(r.sender_limits.tcp_wmem_max),
        lim(r.sender_limits.wmem_max)
    );
    let _ = writeln!(
        s,
        "Reference rate (A, at least the lossless UDP rate): {}",
        rate(r.reference_rate)
    );
    let _ = writeln!(
        s,
        "Bandwidth-delay product: {}",
        r.bdp_window
            .map_or("unknown".into(), |b| format!("{} bytes", b.get()))
    );
    let _ = writeln!(
        s,
        "Optimal TCP Window size: {}",
        r.optimal_window.map_or("unknown".into(), |w| format!(
            "{} bytes{}",
            w.get(),
            if r.bdp_window.is_some_and(|b| b.get() > w.get()) {
                " (the BDP capped at the MBS)"
            } else {
                " (the BDP; the MBS holds it)"
            }
        ))
    );
    match &r.tcp_tuned {
        Some(t) => {
            let _ = writeln!(
                s,
                "Single stream TCP throughput: {} with the optimal window",
                flow_line(t)
            );
            if let Some(l) = tcp_info_line(t) {
                let _ = writeln!(s, "  {l}");
            }
        }
        None => {
            let _ = writeln!(
                s,
                "Single stream TCP throughput: not measured with the optimal window"
            );
        }
    }
    if let Some(d) = r.tcp_sweep.first().filter(|f| f.streams == 1) {
        let _ = writeln!(
            s,
            "Single stream TCP throughput: {} with the system's buffers",
            flow_line(d)
        );
        if let Some(l) = tcp_info_line(d) {
            let _ = writeln!(s, "  {l}");
        }
    }
    if let Some(f) = &r.tcp_full_duplex {
        let _ = writeln!(
            s,
            "-FullD (sender's receive buffer = send buffer): {}",
            flow_line(f)
        );
    }
    if !r.tcp_sweep.is_empty() {
        let pts: Vec<String> = r
            .tcp_sweep
            .iter()
            .map(|f| format!("{}: {}", f.streams, f.steady_bps))
            .collect();
        let _ = writeln!(s, "Parallel streams (system buffers): {}", pts.join(", "));
    }
    match &r.streams {
        Some(a) => {
            let _ = writeln!(
                s,
                "Use of parallel TCP streams: is {}recommended",
                if a.parallel_recommended { "" } else { "not " }
            );
            let _ = writeln!(
                s,
                "{} TCP stream{} can fully utilize the available bandwidth ({})",
                a.recommended,
                if a.recommended == 1 { "" } else { "s" },
                a.target
            );
            let _ = writeln!(
                s,
                "{}",
                match a.intrusive_from {
                    Some(n) => format!("{n} or more TCP streams intrude: they mostly take bandwidth from other traffic"),
                    None => "No stream count in the sweep intruded on other traffic".into(),
                }
            );
        }
        None if r.tcp_sweep.is_empty() => {
            let _ = writeln!(s, "Use of parallel TCP streams: undecided (no sweep)");
        }
        None => {
            let _ = writeln!(
                s,
                "Use of parallel TCP streams: undecided (only a lower bound on the available bandwidth is known; see the notes)"
            );
        }
    }

    let _ = writeln!(s, "\n--- Advisory section ---");
    let mut lines = r.advisory.clone();
    if let Some(a) = &r.abw {
        lines.extend(pathsonde_net::verdict::judge(a).advisory());
    }
    if lines.is_empty() {
        lines.push("Nothing in either host or in the path's queue holds TCP back here.".into());
    }
    for l in &lines {
        let _ = writeln!(s, "{l}");
    }
    if !r.notes.is_empty() {
        let _ = writeln!(s, "\nNotes:");
        for n in &r.notes {
            let _ = writeln!(s, "  {n}");
        }
    }
    s
}

/// The same sections as JSON objects.
pub fn to_json(r: &MeasureRun) -> Value {
    let mut advisory = r.advisory.clone();
    if let Some(a) = &r.abw {
        advisory.extend(pathsonde_net::verdict::judge(a).advisory());
    }
    let tcp_range = r.tcp_range().map(
        |(lo, avg, hi)| json!({"min_bps": lo.bps(), "avg_bps": avg.bps(), "max_bps": hi.bps()}),
    );
    json!({
        "server": r.server.to_string(),
        "client_software": r.client_software,
        "server_software": r.server_software,
        "verbose": { "client": r.client_host, "server": r.server_host },
        "general_statistics": {
            "bytes_used": r.bytes_used(),
            "average_bandwidth_used_bps": r.bytes_used() as f64 * 8.0 / r.duration_s.to_std().as_secs_f64().max(1e-9),
            "duration_s": r.duration_s.to_std().as_secs_f64(),
            "budget_s": r.budget_s.to_std().as_secs_f64(),
            "phases": r.phases,
            "tcp_rate": tcp_range,
        },
        "general": {
            "rtt_s": r.rtt().secs_f64(),
            "rtt_control": r.rtt_control,
            "rtt_echo": r.rtt_echo,
            "available": r.abw.as_ref().map(|run| report::abw_json(run, &r.abw_settings)),
            "mbs": r.mbs,
            "safe_burst_interval_s": r.safe_burst_interval.map(DurationNs::secs_f64),
        },
        "udp": {
            "single_stream_bps": r.udp_single.map(BitRate::bps),
            "ramp": r.udp_ramp,
            "sender_limited": r.udp_sender_limited,
            "receiver_limited": r.udp_receiver_limited,
            "multi_stream": r.udp_multi,
            "multiple_streams_recommended": r.udp_multi_helps,
            "burst_controlled": r.udp_burst,
        },
        "tcp": {
            "reference_rate_bps": r.reference_rate.map(BitRate::bps),
            "bdp_window_bytes": r.bdp_window.map(Bytes::get),
            "optimal_window_bytes": r.optimal_window.map(Bytes::get),
            "single_stream_optimal_window": r.tcp_tuned,
            "single_stream_system_buffers": r.tcp_sweep.first().filter(|f| f.streams == 1),
            "full_duplex_check": r.tcp_full_duplex,
            "sweep": r.tcp_sweep,
            "streams": r.streams,
            "receiver_limits": r.receiver_limits,
            "sender_limits": r.sender_limits,
        },
        "advisory": advisory,
        "notes": r.notes,
    })
}

/// "at least " when a host limit binds the bursts' line speed.
fn line_at_least(m: &MbsMeasurement) -> &'static str {
    if m.host_limits.iter().any(|l| l.binds_result) {
        "at least "
    } else {
        ""
    }
}

/// `mbs`'s text report.
pub fn mbs_text(m: &MbsMeasurement) -> String {
    let mut o = format!("Maximum burst size: {}\n", mbs_line(m));
    let _ = writeln!(
        o,
        "Bursts left the sender at {} and crossed the path at {}{}",
        rate(m.sender_line_rate),
        line_at_least(m),
        rate(m.path_line_rate)
    );
    crate::flow::host_limit_lines(&mut o, &m.host_limits, "");
    if let Some(d) = m
        .path_line_rate
        .and_then(|l| pathsonde_core::advice::safe_burst_interval(m.summary.median, l))
    {
        let _ = writeln!(o, "Safe burst interval (MBS / line speed): {d}");
    }
    let _ = writeln!(o, "{} bursts, {} in {}", m.bursts, m.bytes_sent, m.duration);
    o
}
