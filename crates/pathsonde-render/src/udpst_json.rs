//! `pathsonde capacity --format udpst-json`: the result in the reference
//! client's JSON (OB-UDPST's `-f json`, spec §11.4): its key names, its
//! number formats (Mb/s and percentages to 2 decimals, ratios to 9, delays
//! in seconds) and its ErrorStatus, so a script written for the reference
//! reads pathsonde's output unchanged.  Keys pathsonde has no value for are
//! written as the reference writes an absent value (0).

use pathsonde_core::capacity::summary::{CapacitySummary, SubIntervalRow};
use pathsonde_core::DurationNs;
use pathsonde_net::udpst::CapacityConfig;
use pathsonde_net::udpst::{CapacityError, CapacityRun, Direction};
use serde_json::{json, Map, Value};
use std::time::SystemTime;

fn round(x: f64, places: i32) -> f64 {
    let k = 10f64.powi(places);
    (x * k).round() / k
}

fn mbps(r: pathsonde_core::BitRate) -> f64 {
    round(r.bps() / 1e6, 2)
}

/// Seconds, as the reference writes delays (ms ÷ 1000; 0 when absent).
fn secs(d: Option<DurationNs>) -> f64 {
    d.map_or(0.0, |d| round(d.secs_f64(), 9))
}

fn iso(t: SystemTime) -> String {
    humantime::format_rfc3339_micros(t).to_string()
}

fn role(d: Direction) -> &'static str {
    match d {
        Direction::Upstream => "Sender",
        Direction::Downstream => "Receiver",
    }
}

/// The address the server saw this client at: the socket was bound to the
/// unspecified address, so ask the routing table which source it picks.
fn client_ip(run: &CapacityRun) -> String {
    let ip = run.local.ip();
    if !ip.is_unspecified() {
        return ip.to_string();
    }
    let any = if run.config.server.is_ipv6() {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    };
    std::net::UdpSocket::bind(any)
        .and_then(|s| {
            s.connect(run.config.server)?;
            s.local_addr()
        })
        .map_or_else(|_| ip.to_string(), |a| a.ip().to_string())
}

fn input(cfg: &CapacityConfig, run: Option<&CapacityRun>) -> Value {
    let payload_max = if cfg.jumbo { 8972 } else { 1222 };
    let (sub_ms, trial_ms, dur_s, low, up, delta, slow, seq_err, ignore, owd, sri) = match run {
        Some(r) => {
            let n = &r.negotiated;
            (
                u64::from(n.sub_interval_ms),
                u64::from(n.trial_interval_ms),
                u64::from(n.test_duration_s),
                n.low_thresh_ms,
                n.upper_thresh_ms,
                n.high_speed_delta,
                n.slow_adj_thresh,
                n.seq_err_thresh,
                n.ignore_reorder_dup,
                n.use_owd,
                n.sr_index.map_or(-1, i64::from),
            )
        }
        None => (
            (cfg.sub_interval.ns() / 1_000_000) as u64,
            (cfg.trial_interval.ns() / 1_000_000) as u64,
            (cfg.duration.ns() / 1_000_000_000) as u64,
            30,
            90,
            10,
            3,
            10,
            true,
            cfg.use_owd,
            cfg.fixed_row.map_or(-1, i64::from),
        ),
    };
    let ip = cfg.server.ip().to_string();
    let mut head = json!({
        "Interface": "",
        "Role": role(cfg.direction),
        "ID": run.map_or(0, |r| r.mc_ident),
        "Host": ip,
        "HostIPAddress": ip,
        "Port": run.and_then(|r| r.server_test_ports.first().copied()).unwrap_or(0),
        "NumberOfHosts": 1,
        "HostList": [{ "Host": ip, "HostIPAddress": ip, "ControlPort": cfg.server.port() }],
        "ClientIPAddress": run.map_or(String::new(), client_ip),
        "ClientPort": run.map_or(0, |r| r.local.port()),
    });
    let rest = json!({
        "JumboFramesPermitted": u8::from(cfg.jumbo),
        "NumberOfConnections": cfg.connections,
        "MinNumOfConnections": cfg.connections,
        "DSCP": 0,
        "ECN": 0,
        "CEThreshold": 0,
        "ProtocolVersion": if cfg.server.is_ipv6() { "IPv6" } else { "IPv4" },
        "UDPPayloadMin": 52,
        "UDPPayloadMax": payload_max,
        "UDPPayloadDefault": if cfg.traditional_mtu { 1472 } else { 1222 },
        "UDPPayloadContent": "zeroes",
        "TestType": if cfg.fixed_row.is_some() { "Fixed" } else { "Search" },
        "IPDVEnable": u8::from(owd),
        "IPRREnable": 1,
        "RIPREnable": 1,
        "PreambleDuration": 0,
        "MaxRequiredBandwidth": cfg.max_rate.map_or(0, |r| (r.bps() / 1e6).ceil() as u64),
        "StartSendingRateIndex": cfg.start_row.unwrap_or(0),
        "SendingRateIndex": sri,
    });
    let more = json!({
        "NumberTestSubIntervals": (dur_s * 1000).checked_div(sub_ms).unwrap_or(0),
        "NumberFirstModeTestSubIntervals": 0,
        "NumberFirstModeSuppSubIntervals": 0,
        "TestSubInterval": sub_ms,
        "StatusFeedbackInterval": trial_ms,
        "TimeoutNoTestTraffic": 1000,
        "TimeoutNoStatusMessage": 1000,
        "Tmax": 1000,
        "TmaxRTT": 3000,
        "TimestampResolution": 1,
        "SeqErrThresh": seq_err,
        "ReordDupIgnoreEnable": u8::from(ignore),
        "LowerThresh": low,
        "UpperThresh": up,
        "HighSpeedDelta": delta,
        "SlowAdjThresh": slow,
        "HSpeedThresh": 1_000_000_000u64,
        "RateAdjAlgorithm": match cfg.algorithm { pathsonde_net::udpst::Algorithm::B => "B", pathsonde_net::udpst::Algorithm::C => "C" },
        "InterfaceDeterminesMax": 0,
    });
    if let Some(o) = head.as_object_mut() {
        for part in [rest, more] {
            if let Value::Object(p) = part {
                o.extend(p);
            }
        }
    }
    head
}

/// The figures every per-interval object shares, under the reference's keys.
fn figures(r: &SubIntervalRow, suffix: &str, o: &mut Map<String, Value>) {
    let mut put = |k: &str, v: Value| {
        o.insert(k.to_string(), v);
    };
    put("ActiveConnections", json!(r.active_connections));
    put("DeliveredPercent", json!(round(r.delivered_percent, 2)));
    put(&format!("LossRatio{suffix}"), json!(round(r.loss_ratio, 9)));
    put(
        &format!("ReorderedRatio{suffix}"),
        json!(round(r.reordered_ratio, 9)),
    );
    put(
        &format!("ReplicatedRatio{suffix}"),
        json!(round(r.replicated_ratio, 9)),
    );
    put(
        "CEPercentOfDelivered",
        json!(round(r.ce_percent_of_delivered, 2)),
    );
    put("LossCount", json!(r.loss_count));
    put("ReorderedCount", json!(r.reordered_count));
    put("ReplicatedCount", json!(r.replicated_count));
    put("CECountOfDelivered", json!(r.ce_count));
    put("PDVMin", json!(secs(r.pdv_min_s)));
    put("PDVAvg", json!(secs(r.pdv_avg_s)));
    put("PDVMax", json!(secs(r.pdv_max_s)));
    put(&format!("PDVRange{suffix}"), json!(secs(r.pdv_range_s)));
    put("RTTMin", json!(secs(r.rtt_var_min_s)));
    put("RTTAvg", json!(secs(r.rtt_var_avg_s)));
    put("RTTMax", json!(secs(r.rtt_var_max_s)));
    put(&format!("RTTRange{suffix}"), json!(secs(r.rtt_var_range_s)));
}

fn incremental(r: &SubIntervalRow, started: SystemTime) -> Value {
    let mut o = Map::new();
    o.insert("Interval".into(), json!(r.interval));
    o.insert("Seconds".into(), json!(round(r.time_s.secs_f64(), 3)));
    let end = started + r.time_s.to_std();
    o.insert("TimeOfSubInterval".into(), json!(iso(end)));
    figures(r, "", &mut o);
    o.insert(
        "IPLayerCapacity".into(),
        json!(mbps(r.ip_layer_capacity_bps)),
    );
    o.insert("InterfaceEthMbps".into(), json!(0.0));
    o.insert("MinOnewayDelay".into(), json!(secs(r.min_one_way_delay_s)));
    Value::Object(o)
}

fn summary(s: &CapacitySummary) -> Value {
    let mut o = Map::new();
    o.insert("Mode".into(), json!(1));
    o.insert("Intervals".into(), json!(s.intervals));
    // The summary's own figures are totals over the test, not the maximum's.
    let totals = SubIntervalRow {
        delivered_percent: s.delivered_percent,
        loss_count: s.loss_count,
        reordered_count: s.reordered_count,
        replicated_count: s.replicated_count,
        loss_ratio: s.loss_ratio,
        reordered_ratio: s.reordered_ratio,
        replicated_ratio: s.replicated_ratio,
        ce_count: s.ce_count,
        ce_percent_of_delivered: s.ce_percent_of_delivered,
        pdv_min_s: s.pdv_min_s,
        pdv_avg_s: s.pdv_avg_s,
        pdv_max_s: s.pdv_max_s,
        pdv_range_s: s.pdv_range_s,
        rtt_var_min_s: s.rtt_var_min_s,
        rtt_var_avg_s: s.rtt_var_avg_s,
        rtt_var_max_s: s.rtt_var_max_s,
        rtt_var_range_s: s.rtt_var_range_s,
        active_connections: s.active_connections,
        ..s.at_max.clone()
    };
    figures(&totals, "Summary", &mut o);
    o.insert(
        "IPLayerCapacitySummary".into(),
        json!(mbps(s.ip_layer_capacity_bps)),
    );
    o.insert("InterfaceEthMbps".into(), json!(0.0));
    o.insert(
        "MinOnewayDelaySummary".into(),
        json!(secs(s.min_one_way_delay_s)),
    );
    o.insert("MinRTTSummary".into(), json!(secs(s.min_rtt_s)));
    Value::Object(o)
}

fn at_max(s: &CapacitySummary, started: SystemTime) -> Value {
    let mut o = Map::new();
    o.insert("Mode".into(), json!(1));
    o.insert("Intervals".into(), json!(s.intervals));
    o.insert(
        "TimeOfMax".into(),
        json!(iso(started + s.max_time_s.to_std())),
    );
    figures(&s.at_max, "AtMax", &mut o);
    o.insert(
        "MaxIPLayerCapacity".into(),
        json!(mbps(s.max_ip_layer_capacity_bps)),
    );
    o.insert("InterfaceEthMbps".into(), json!(0.0));
    o.insert(
        "MaxETHCapacityNoFCS".into(),
        json!(mbps(s.max_eth_no_fcs_bps)),
    );
    o.insert(
        "MaxETHCapacityWithFCS".into(),
        json!(mbps(s.max_eth_with_fcs_bps)),
    );
    o.insert(
        "MaxETHCapacityWithFCSVLAN".into(),
        json!(mbps(s.max_eth_with_fcs_vlan_bps)),
    );
    o.insert(
        "MinOnewayDelayAtMax".into(),
        json!(secs(s.at_max.min_one_way_delay_s)),
    );
    Value::Object(o)
}

fn envelope(
    cfg: &CapacityConfig,
    run: Option<&CapacityRun>,
    output: Value,
    status: u16,
    message: &str,
) -> Value {
    json!({
        "IPLayerMaxConnections": 24,
        "IPLayerMaxIncrementalResult": 36000,
        "IPLayerCapSupported": {
            "SoftwareVersion": format!("pathsonde {}", env!("CARGO_PKG_VERSION")),
            "ControlProtocolVersion": 20,
            "Metrics": "IPLR,Sampled_RTT,IPDV,IPRR,RIPR",
        },
        "Input": input(cfg, run),
        "Output": output,
        "ErrorStatus": status,
        "ErrorMessage": message,
        "ErrorMessage2": "",
    })
}

/// A completed test.
pub fn report(run: &CapacityRun) -> Value {
    let started = run.started;
    let last_warning = run.warnings.last().map_or("", |w| w.message.as_str());
    let output = json!({
        "BOMTime": iso(run.started),
        "TmaxUsed": 1000,
        "TestInterval": run.negotiated.test_duration_s,
        "TmaxRTTUsed": 3000,
        "TimestampResolutionUsed": 1,
        "IncrementalResult": run.report.sub_intervals.iter().map(|r| incremental(r, started)).collect::<Vec<_>>(),
        "Summary": run.report.summary.as_ref().map_or(json!({}), summary),
        "ModalSummary": [],
        "AtMax": run.report.summary.as_ref().map_or(json!({}), |s| at_max(s, started)),
        "ModalResult": [],
        "ECNBleachingDetected": u8::from(run.ecn_bleaching),
        "EOMTime": iso(run.ended),
        "Status": if run.error_status == 0 { "Complete" } else { "Error_Other" },
    });
    envelope(
        &run.config,
        Some(run),
        output,
        run.error_status,
        last_warning,
    )
}

/// A test that failed before or during the exchange: the reference's
/// ErrorStatus and message, and no results.
pub fn failure(cfg: &CapacityConfig, e: &CapacityError) -> Value {
    let now = SystemTime::now();
    let output = json!({
        "BOMTime": iso(now),
        "IncrementalResult": [],
        "Summary": {},
        "ModalSummary": [],
        "AtMax": {},
        "ModalResult": [],
        "EOMTime": iso(now),
        "Status": "Error_Other",
    });
    envelope(cfg, None, output, e.error_status(), &e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_rounded_as_the_reference_prints_them() {
        assert_eq!(round(99.123_456, 2), 99.12);
        assert_eq!(round(0.000_000_123_4, 9), 0.000_000_123);
        assert_eq!(
            mbps(pathsonde_core::BitRate::from_bps(945_123_456.0)),
            945.12
        );
        assert_eq!(secs(None), 0.0);
        assert_eq!(secs(Some(DurationNs::from_ms(12))), 0.012);
    }

    #[test]
    fn times_are_utc_iso_8601_with_microseconds() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(1_778_251_634_950_027);
        assert_eq!(iso(t), "2026-05-08T14:47:14.950027Z");
    }
}
