//! Turns a measurement into what a person reads and what a program parses.
//!
//! JSON keys carry their unit (`_bps`, `_s`, `_bytes`); the text report says
//! the unit beside every number.

use pathsonde_core::methods::registry::MethodSettings;
use pathsonde_core::{BitRate, ClockInfo, DurationNs, Estimate, TrainRecord};
use pathsonde_net::client::HostSide;
use pathsonde_net::verdict::judge;
use pathsonde_net::{MeasurementRun, RttSummary};
use serde_json::{json, Value};
use std::fmt::Write;

fn secs(d: DurationNs) -> f64 {
    d.secs_f64()
}

fn rtt_json(r: &RttSummary) -> Value {
    json!({
        "min": secs(r.min),
        "median": secs(r.median),
        "max": secs(r.max),
        "samples": r.samples,
    })
}

fn clock_json(c: &ClockInfo) -> Value {
    json!({ "source": c.source, "resolution_s": secs(c.resolution) })
}

fn train_json(t: &TrainRecord) -> Value {
    json!({
        "train": t.train,
        "target_bps": t.target_rate.bps(),
        "sending_bps": t.sending_rate.bps(),
        "receiving_bps": t.receiving_rate.map(BitRate::bps),
        "car_rate_bps": t.car_rate_spread.map(|s| json!({
            "min": s.min.bps(), "median": s.median.bps(), "max": s.max.bps()
        })),
        "packets": t.packets,
        "bytes": t.bytes.get(),
        "loss_fraction": t.loss_fraction,
    })
}

/// The host-limited verdict for a run: judged by `pathsonde_net::verdict`
/// (the figures are net's host reports, the rules core's); this only renders.
fn host_json(side: &HostSide) -> Value {
    match &side.report {
        Some(r) => {
            let mut v =
                serde_json::to_value(r).unwrap_or_else(|e| json!({ "error": e.to_string() }));
            if let Some(obj) = v.as_object_mut() {
                obj.insert("path_interface".into(), json!(side.interface));
            }
            v
        }
        None => json!({ "unavailable": side.unavailable }),
    }
}

/// The one JSON object `abw --json` prints.
/// What the method was told, as JSON: `known_capacity_bps` is the user's
/// `--known-capacity` or null (the method measured what it needed).
pub fn settings_json(s: &MethodSettings) -> Value {
    json!({
        "max_rate_bps": s.max_rate.bps(),
        "packet_size_bytes": s.packet_size.get(),
        "known_capacity_bps": s.known_capacity.map(BitRate::bps),
        "precision": s.precision,
        "max_bytes": s.max_bytes.map(pathsonde_core::Bytes::get),
    })
}

/// The same in one line of text.
pub fn settings_line(s: &MethodSettings) -> String {
    format!(
        "probes up to {}, {} B packets; capacity {}",
        s.max_rate,
        s.packet_size.get(),
        match s.known_capacity {
            Some(c) => format!("{c} given by the user (--known-capacity)"),
            None => "not given: the method measured what it needed".into(),
        }
    )
}

/// `abw --json`'s result (and the archived result of `abw`, `agent` and
/// mesh runs): the estimate with its band, verdicts, RTTs, both hosts,
/// clocks and every train, keys carrying their unit.
pub fn abw_json(run: &MeasurementRun, settings: &MethodSettings) -> Value {
    let e = &run.estimate;
    let v = judge(run);
    json!({
        "method": e.method,
        "server": run.server.to_string(),
        "settings": settings_json(settings),
        "available_bps": e.available.bps(),
        "available_low_bps": e.low.bps(),
        "available_high_bps": e.high.map(BitRate::bps),
        "capacity_bps": e.capacity.map(BitRate::bps),
        "cross_traffic_bps": e.cross_traffic.map(BitRate::bps),
        "rtt_s": rtt_json(&run.rtt_control),
        "rtt_echo_s": run.rtt_echo.as_ref().map(rtt_json),
        "duration_s": secs(run.duration),
        "probe_span_s": secs(e.probe_span),
        "probe_bytes": e.cost.bytes.get(),
        "probe_packets": e.cost.packets,
        "trains_used": e.cost.trains,
        "converged": e.converged,
        "precision": crate::precision::json(e, settings),
        "host_limited": e.host_limited,
        "host_limits": v.binding().collect::<Vec<_>>(),
        // The method's own verdict (e.g. the sender fell short of the rate
        // it was asked for) counts as much as the capability comparison.
        "available_is_host_limit": v.is_host_limited() || e.host_limited.is_some(),
        "advisory": v.limits.iter().map(|l| json!({
            "host": l.host, "resource": l.resource, "limit_bps": l.limit_bps,
            "binds_result": l.binds_result, "why": l.why, "fix": l.fix,
        })).collect::<Vec<_>>(),
        "hosts": { "client": host_json(&run.client_host), "server": host_json(&run.server_host) },
        "trains": e.trains.iter().map(train_json).collect::<Vec<_>>(),
        "clocks": {
            "send": clock_json(&run.send_clock),
            "receive": clock_json(&run.recv_clock),
        },
        "notes": e.notes,
        "coalescing": e.coalescing,
        "coalescing_verdict": crate::trust::coalescing_json(e.method.as_str(), e.coalescing),
        "host_evidence": e.host_evidence,
        "software": { "client": run.client_software, "server": run.server_software },
    })
}

fn rtt_line(r: &RttSummary) -> String {
    format!(
        "min {} / median {} / max {}  ({} samples)",
        r.min, r.median, r.max, r.samples
    )
}

fn opt_rate(r: Option<BitRate>) -> String {
    r.map_or_else(|| "not inferred".to_string(), |r| r.to_string())
}

/// The readable report of `abw` and `demo`.
pub fn abw_text(run: &MeasurementRun, settings: &MethodSettings) -> String {
    let e: &Estimate = &run.estimate;
    let v = judge(run);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "pathsonde {} to {} ({})",
        e.method, run.server, run.server_software
    );
    let _ = writeln!(s, "settings: {}", settings_line(settings));
    let _ = writeln!(s);
    let _ = writeln!(s, "--- Round-trip time ---");
    let _ = writeln!(s, "control (TCP):  {}", rtt_line(&run.rtt_control));
    match &run.rtt_echo {
        Some(r) => {
            let _ = writeln!(s, "probe echo:     {}", rtt_line(r));
        }
        None => {
            let _ = writeln!(
                s,
                "probe echo:     no echo came back (UDP filtered on the return path?)"
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "--- Bandwidth ---");
    let _ = match e.high {
        Some(high) => writeln!(
            s,
            "available bandwidth:  {}   (bounds {} .. {})",
            e.available, e.low, high
        ),
        None => writeln!(
            s,
            "available bandwidth:  at least {}   (nothing bounds it from above)",
            e.available
        ),
    };
    let _ = writeln!(s, "capacity:             {}", opt_rate(e.capacity));
    let _ = writeln!(s, "cross traffic:        {}", opt_rate(e.cross_traffic));
    let converged = match (e.converged, e.high) {
        (true, _) => "yes",
        (false, None) => "no: a lower bound is all this path and host can show",
        (false, Some(_)) => "no: the stopping rule was not met (see notes)",
    };
    let _ = writeln!(s, "converged:            {converged}");
    if settings.precision.is_some() || settings.max_bytes.is_some() {
        let _ = writeln!(
            s,
            "precision:            {}",
            crate::precision::line(e, settings)
        );
    }
    if let Some(why) = &e.host_limited {
        let _ = writeln!(s, "host-limited:         {why}");
    }
    for l in v.binding() {
        let _ = writeln!(
            s,
            "host-limited:         {} {} (limit {}): the number above is bounded by the host, not the path",
            l.host,
            l.resource,
            l.limit_bps
        );
    }
    if let Some(ev) = &e.host_evidence {
        let _ = writeln!(s, "host evidence:        {}", evidence_line(&ev.figures));
    }
    if let Some(line) = crate::trust::coalescing_line(e.method.as_str(), e.coalescing) {
        let _ = writeln!(s, "coalescing:           {line}");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "--- Hosts ---");
    host_lines(&mut s, "client", &run.client_host);
    host_lines(&mut s, "server", &run.server_host);
    let _ = writeln!(s);
    let _ = writeln!(s, "--- Advisory ---");
    let mut advice = Vec::new();
    if let Some(why) = &e.host_limited {
        advice.push(format!(
            "The measurement itself hit a host limit, so the available bandwidth is at least the figure above, not equal to it: {why}"
        ));
    }
    advice.extend(v.advisory());
    if advice.is_empty() {
        let _ = writeln!(
            s,
            "Neither host's measured limits (pacing, send cost, NIC speed, socket buffers) came near this result, and the run's own trains showed no host limit."
        );
    }
    for a in advice {
        let _ = writeln!(s, "- {a}");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "--- Cost ---");
    let _ = writeln!(
        s,
        "trains {}, probe packets {}, probe bytes {}; probing took {}, whole measurement {}",
        e.cost.trains, e.cost.packets, e.cost.bytes, e.probe_span, run.duration
    );
    let _ = writeln!(
        s,
        "clocks: send = {} (resolution {}), receive = {} (resolution {})",
        run.send_clock.source.describe(),
        run.send_clock.resolution,
        run.recv_clock.source.describe(),
        run.recv_clock.resolution
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "--- Convergence trace ---");
    let _ = writeln!(
        s,
        "{:>5} {:>14} {:>14} {:>14} {:>7}  car rates (min/median/max)",
        "train", "target", "sent at", "received at", "loss"
    );
    for t in &e.trains {
        let spread = t.car_rate_spread.map_or_else(
            || "-".to_string(),
            |c| {
                format!(
                    "{:.1} / {:.1} / {:.1} Mb/s",
                    c.min.mbps(),
                    c.median.mbps(),
                    c.max.mbps()
                )
            },
        );
        let _ = writeln!(
            s,
            "{:>5} {:>14} {:>14} {:>14} {:>6.2}%  {}",
            t.train,
            t.target_rate.to_string(),
            t.sending_rate.to_string(),
            t.receiving_rate
                .map_or_else(|| "-".into(), |r| r.to_string()),
            t.loss_fraction * 100.0,
            spread
        );
    }
    if !e.notes.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(s, "--- Notes ---");
        for n in &e.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

fn known<T: std::fmt::Display>(k: &pathsonde_net::host::Known<T>) -> String {
    match k {
        pathsonde_net::host::Known::Value(v) => v.to_string(),
        pathsonde_net::host::Known::Unavailable { unavailable } => {
            format!("unknown ({unavailable})")
        }
    }
}

/// netest's verbose section: one end's capabilities in a few lines.
pub fn host_lines(s: &mut String, role: &str, side: &HostSide) {
    let Some(r) = &side.report else {
        let _ = writeln!(
            s,
            "{role}: no host report ({})",
            side.unavailable.as_deref().unwrap_or("not sent")
        );
        return;
    };
    let _ = writeln!(
        s,
        "{role}: {} — {} {}, {} CPUs ({}), memory {}",
        known(&r.kernel.hostname),
        known(&r.kernel.sysname),
        known(&r.kernel.release),
        known(&r.cpu.logical_cpus),
        known(&r.cpu.model),
        r.memory
            .total_bytes
            .value()
            .map_or("?".into(), crate::host::bytes)
    );
    let _ = writeln!(
        s,
        "  clock read {} ns, sendto (1500 B) {} ns, memcpy up to {}",
        r.timing
            .clock_read_ns
            .value()
            .map_or("?".into(), |v| format!("{v:.0}")),
        r.timing
            .sendto_1472_median_ns
            .value()
            .map_or("?".into(), |v| format!("{v:.0}")),
        r.memory
            .memcpy_max_bps
            .value()
            .map_or("?".into(), |b| b.to_string())
    );
    if r.pacing.sizes.is_empty() {
        let _ = writeln!(s, "  pacing: {}", r.pacing.sink);
    } else {
        let rates: Vec<String> = r
            .pacing
            .sizes
            .iter()
            .map(|p| {
                let paced = |k: &pathsonde_net::host::Known<pathsonde_core::BitRate>| {
                    k.value().map_or("?".into(), |b| b.to_string())
                };
                format!(
                    "{} B: {} (paced trains: GSO {}, batch {})",
                    p.packet_bytes,
                    p.max_rate_bps.value().map_or("?".into(), |b| b.to_string()),
                    paced(&p.paced_train_bps_gso),
                    paced(&p.paced_train_bps_batch)
                )
            })
            .collect();
        let _ = writeln!(s, "  pacing (back to back): {}", rates.join(", "));
    }
    let nic = pathsonde_net::verdict::path_interface(r, side.interface.as_deref());
    let _ = writeln!(
        s,
        "  path interface: {}",
        match nic {
            Some(i) => format!(
                "{} (speed {}, MTU {})",
                i.name,
                i.speed_bps
                    .value()
                    .map_or_else(|| known(&i.speed_bps), |b| b.to_string()),
                known(&i.mtu_bytes)
            ),
            None => side
                .interface
                .clone()
                .unwrap_or_else(|| "not identified".into()),
        }
    );
    let _ = writeln!(
        s,
        "  socket limits: rmem_max {}, wmem_max {}, tcp_rmem max {}, cc {}",
        crate::host::show(&r.sysctls.rmem_max_bytes, |b| pathsonde_core::Bytes(*b)
            .to_string()),
        crate::host::show(&r.sysctls.wmem_max_bytes, |b| pathsonde_core::Bytes(*b)
            .to_string()),
        r.sysctls
            .tcp_rmem_bytes
            .value()
            .map_or("?".into(), |t| pathsonde_core::Bytes(t[2]).to_string()),
        known(&r.sysctls.tcp_congestion_control)
    );
    let _ = writeln!(s, "  report: {}", r.variant);
}

/// One progress line per train, for a terminal.
pub fn progress_line(t: &pathsonde_core::Observation) -> String {
    format!(
        "train {:>3}: {} planned, {} of {} packets arrived",
        t.train,
        t.spec.rate,
        t.received_packets(),
        t.sent_packets()
    )
}

/// The one JSON object `lab run --json` prints.  Each run's host-limited
/// verdict is the lab's own (`pathsonde_net::verdict`, both hosts' reports
/// and the trains); only the method's settings and coalescing verdict are
/// added here.
pub fn lab_json(r: &pathsonde_lab::run::LabRunReport) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or_else(|e| json!({ "error": e.to_string() }));
    if let Some(o) = v.as_object_mut() {
        o.insert("settings".into(), settings_json(&r.settings));
    }
    if let Some(runs) = v.get_mut("runs").and_then(Value::as_array_mut) {
        for (run, rec) in runs.iter_mut().zip(&r.runs) {
            if let Some(obj) = run.as_object_mut() {
                obj.insert(
                    "coalescing_verdict".into(),
                    crate::trust::coalescing_json(&rec.method, rec.coalescing),
                );
            }
        }
    }
    v
}

fn pct(x: f64) -> String {
    crate::view::signed_percent(x)
}

/// The progress line before a lab is built: the path, how long the cross
/// traffic settles, and how many runs follow.
pub fn lab_start_line(o: &pathsonde_lab::run::RunOptions, settle: DurationNs) -> String {
    format!(
        "building lab {} ({} tight link, {} cross source(s)); cross traffic settles for {:.1} s, then {} run(s)",
        o.spec.name,
        o.spec.capacity,
        o.cross.len(),
        settle.secs_f64(),
        o.runs
    )
}

/// One line per finished lab run, for a terminal.
pub fn lab_progress_line(r: &pathsonde_lab::run::RunRecord) -> String {
    format!(
        "run {:>3}: estimate {}{}  truth {}  error {}  ({:.2} s, {} trains){}{}",
        r.run,
        if r.estimate_high_bps.is_none() {
            ">= "
        } else {
            ""
        },
        r.estimate_bps,
        r.truth_bps,
        pct(r.error),
        r.duration_s.secs_f64(),
        r.trains,
        r.host_limits.first().map_or_else(
            || if r.available_is_host_limit {
                "  host-limited".to_string()
            } else {
                String::new()
            },
            |l| format!(
                "  host-limited: {} {} (limit {})",
                l.host, l.resource, l.limit_bps
            )
        ),
        match (r.honesty, &r.honesty_why) {
            (pathsonde_core::verdict::evidence::Honesty::Dishonest, Some(why)) =>
                format!("  DISHONEST: {why}"),
            _ => String::new(),
        }
    )
}

/// The head of a lab report: the path, what the measurement was told, the
/// cross traffic and the truth check (shared by `lab run`'s reports for
/// available bandwidth and for capacity).
pub fn lab_header(
    s: &mut String,
    l: &pathsonde_lab::topology::LabSpec,
    ip_rate: &str,
    settings: Option<&str>,
    cross: &[String],
    check: Option<&pathsonde_lab::live::TruthCheck>,
    without: &str,
) {
    let _ = writeln!(s, "--- Lab path ---");
    let _ = writeln!(
        s,
        "tight link {} (tbf, L2; {ip_rate}), queue {}, MTU {}{}{}",
        l.capacity,
        l.queue,
        l.mtu,
        l.narrow
            .map_or(String::new(), |n| format!(", narrow link {n}")),
        l.delay
            .map_or(String::new(), |d| format!(", one-way delay {d}")),
    );
    if let Some(line) = settings {
        let _ = writeln!(s, "settings: {line}");
    }
    let cross = if cross.is_empty() {
        "none".to_string()
    } else {
        cross.join("; ")
    };
    let _ = writeln!(s, "cross traffic: {cross}");
    if let Some(c) = check {
        let _ = writeln!(
            s,
            "truth check ({without}): generators sent {}, the bottleneck carried {} ({})",
            c.generators_l2_bps,
            c.qdisc_l2_bps,
            pct(c.relative_difference)
        );
    }
}

/// `lab run --method all --json`: `{"methods": [report, …]}`, in the order run.
pub fn lab_all_json<N>(reports: &[(N, pathsonde_lab::run::LabRunReport)]) -> Value {
    let v: Vec<_> = reports.iter().map(|(_, r)| lab_json(r)).collect();
    json!({ "methods": v })
}

/// `lab run --method all`'s text: each method's report under its name.
pub fn lab_all_text<N: std::fmt::Display>(
    reports: &[(N, pathsonde_lab::run::LabRunReport)],
) -> String {
    reports
        .iter()
        .map(|(name, r)| format!("=== {name} ===\n{}\n", lab_text(r)))
        .collect()
}

/// The readable report of `lab run`.
pub fn lab_text(r: &pathsonde_lab::run::LabRunReport) -> String {
    let mut s = String::new();
    lab_header(
        &mut s,
        &r.lab,
        &format!("{} at the IP layer for the probes' size", r.capacity_ip_bps),
        Some(&settings_line(&r.settings)),
        &r.cross,
        r.truth_check.as_ref(),
        "no probes",
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "--- Runs (truth = A over each estimate's own window) ---"
    );
    let _ = writeln!(
        s,
        "{:>4} {:>14} {:>14} {:>9} {:>7} {:>8} {:>7} {:>11} {:>9} {:>9} {:>6}",
        "run",
        "estimate",
        "truth",
        "error",
        "in band",
        "time s",
        "trains",
        "probe bytes",
        "intrus.",
        "overhead",
        "drops"
    );
    for x in &r.runs {
        let _ = writeln!(
            s,
            "{:>4} {:>14} {:>14} {:>9} {:>7} {:>8.2} {:>7} {:>11} {:>9.3} {:>9} {:>6}",
            x.run,
            x.estimate_bps.to_string(),
            x.truth_bps.to_string(),
            pct(x.error),
            if x.in_band { "yes" } else { "no" },
            x.duration_s.secs_f64(),
            x.trains,
            x.probe_bytes,
            x.intrusiveness,
            x.overhead.map_or("-".into(), |o| format!("{o:.3}")),
            x.drops_caused.map_or("?".into(), |d| format!("{d:.0}"))
        );
    }
    if let Some(sum) = &r.summary {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "summary: {} runs, |error| median {:.2} %, p90 {:.2} %, max {:.2} %; band held the truth in {:.0} %; median time {:.2} s; median drops caused {}",
            sum.runs,
            sum.median_abs_error * 100.0,
            sum.p90_abs_error * 100.0,
            sum.max_abs_error * 100.0,
            sum.band_coverage * 100.0,
            sum.median_duration_s,
            sum.median_drops_caused.map_or("unknown".into(), |d| format!("{d:.0}"))
        );
        let _ = writeln!(
            s,
            "lean: signed mean {}; sampling floor {} (a perfect reader of the same probes), error/floor {}",
            sum.mean_signed_error
                .map_or("-".into(), |e| format!("{:+.2} %", e * 100.0)),
            sum.sampling_floor
                .map_or("- (no cross traffic)".into(), |f| format!("{:.2} %", f * 100.0)),
            sum.error_to_floor.map_or("-".into(), |r| format!("{r:.2}"))
        );
        let _ = writeln!(
            s,
            "host verdict: {} measured (|error| median {}), {} host-limited bounds, {} without an estimate; {} dishonest (a band that missed or was wider than ±25 %, a capacity more than 20 % off, or a bound above the truth)",
            sum.measured,
            sum.measured_median_abs_error
                .map_or("-".into(), |e| format!("{:.2} %", e * 100.0)),
            sum.host_limited,
            sum.no_estimate,
            sum.dishonest
        );
    }
    let coalesced: Vec<String> = r
        .runs
        .iter()
        .filter_map(|x| {
            crate::trust::coalescing_line(&x.method, x.coalescing)
                .map(|l| format!("run {}: {l}", x.run))
        })
        .collect();
    if !coalesced.is_empty() {
        let _ = writeln!(s);
        for l in coalesced {
            let _ = writeln!(s, "{l}");
        }
    }
    if !r.notes.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(s, "--- Notes ---");
        for n in &r.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

/// One line of what the run's own trains showed of the hosts
/// (`pathsonde_core::verdict::evidence`): the sender's reach against its
/// targets, the receiver's own drops, and the timing noise of untouched trains.
pub fn evidence_line(f: &pathsonde_core::verdict::evidence::Figures) -> String {
    let mut parts = Vec::new();
    match (f.fastest_sent_bps, f.fastest_target_bps) {
        (Some(s), Some(t)) => parts.push(format!(
            "sender reached {s} of {t} asked{}",
            f.headroom
                .map(|h| format!(" ({:+.0} % over the answer)", (h - 1.0) * 100.0))
                .unwrap_or_default()
        )),
        _ => parts.push("sender rate unknown".into()),
    }
    if let Some(p) = f.send_stray_p90 {
        parts.push(format!("car spacing stray p90 {:.0} %", p * 100.0));
    }
    parts.push(match f.receiver_drops {
        Some(d) => format!("receiver drops {d}"),
        None => "receiver drops not reported".into(),
    });
    if let (Some(n), Some(t)) = (f.timing_noise_p90, f.train_span) {
        parts.push(format!(
            "timing noise p90 {:.0} µs on trains of {:.1} ms",
            n.ns() as f64 / 1e3,
            t.ns() as f64 / 1e6
        ));
    }
    parts.join("; ")
}
