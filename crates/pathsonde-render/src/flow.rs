//! `pathsonde tcp` and `pathsonde udp`'s text report: the throughput, both
//! ends' reports (as iperf3 gives them), the per-interval lines, and what
//! the flow's own evidence says of the hosts (`at least` when one of them,
//! not the path, set the rate).  Takes
//! `pathsonde_net::throughput::FlowResult` as the test returns it; the
//! command (`flow_cmd`) runs the test, prints and archives.

use pathsonde_core::verdict::HostLimit;
use pathsonde_core::{BitRate, Bytes};
use pathsonde_net::throughput::FlowResult;
use pathsonde_wire::flow::{FlowProto, FlowSide, FlowSpec};
use std::fmt::Write;

/// `TCP` or `UDP`.
pub fn proto_name(spec: &FlowSpec) -> &'static str {
    match spec.proto {
        FlowProto::Tcp => "TCP",
        FlowProto::Udp => "UDP",
    }
}

fn side_lines(o: &mut String, who: &str, side: &FlowSide, spec: &FlowSpec) {
    let role = if side.sender { "sender" } else { "receiver" };
    let total: u64 = side.streams.iter().map(|s| s.bytes).sum();
    let secs = side.elapsed_ns as f64 / 1e9;
    let _ = writeln!(
        o,
        "{who} ({role}): {} in {secs:.2} s = {}",
        Bytes(total),
        BitRate::from_bps(total as f64 * 8.0 / secs.max(1e-9))
    );
    for s in &side.streams {
        let mut l = format!(
            "  [{:>2}] {}, buffers snd {} / rcv {}",
            s.stream,
            Bytes(s.bytes),
            Bytes(s.sndbuf as u64),
            Bytes(s.rcvbuf as u64)
        );
        if spec.proto == FlowProto::Udp {
            let _ = write!(l, ", {} datagrams", s.packets);
        }
        if let Some(t) = &s.tcp {
            if side.sender {
                let _ = write!(
                    l,
                    ", cwnd {} × {} segments, RTT {}, {} retransmits, pacing {}, delivery {}",
                    t.snd_cwnd,
                    Bytes(u64::from(t.snd_mss)),
                    pathsonde_core::DurationNs::from_ns(i64::from(t.rtt_us) * 1000),
                    t.total_retrans,
                    BitRate::from_bps(t.pacing_rate as f64 * 8.0),
                    BitRate::from_bps(t.delivery_rate as f64 * 8.0)
                );
            } else {
                let _ = write!(
                    l,
                    ", rcv_space {}, {} received",
                    Bytes(u64::from(t.rcv_space)),
                    Bytes(t.bytes_received)
                );
            }
        }
        let _ = writeln!(o, "{l}");
    }
    if let Some(e) = &side.error {
        let _ = writeln!(o, "  error: {e}");
    }
}

/// The `--json` object of `tcp` and `udp`.
pub fn to_json(server: std::net::SocketAddr, r: &FlowResult) -> serde_json::Value {
    let verdict = r.host_limits();
    serde_json::json!({
        "server": server.to_string(),
        "spec": r.spec,
        "throughput_bps": r.throughput().bps(),
        "sent_bps": r.sent_rate().bps(),
        "udp_loss": r.udp_loss(),
        "receiver_drops": r.receiver_drops,
        "at_least": verdict.is_host_limited(),
        "host_limits": verdict.limits,
        "retrans_fraction": r.retrans_fraction(),
        "interval_bps": r.interval_rates().iter().map(|b| b.bps()).collect::<Vec<_>>(),
        "client": r.client,
        "server_side": r.server,
    })
}

/// The one line `history` shows for a `tcp` or `udp` run.
pub fn summary_line(spec: &FlowSpec, r: &FlowResult) -> String {
    let at_least = if r.host_limits().is_host_limited() {
        "≥ "
    } else {
        ""
    };
    let mut summary = format!("{} {at_least}{}", proto_name(spec), r.throughput());
    if spec.streams > 1 {
        summary.push_str(&format!(", {} streams", spec.streams));
    }
    summary
}

/// The iperf3-like text: intervals at the receiver, then each end's totals.
pub fn text(r: &FlowResult) -> String {
    let mut o = String::new();
    let spec = &r.spec;
    let _ = writeln!(
        o,
        "{} {}, {} stream(s), {:.1} s{}",
        proto_name(spec),
        if spec.reverse {
            "server → client (-R)"
        } else {
            "client → server"
        },
        spec.streams,
        f64::from(spec.duration_ms) / 1e3,
        if spec.window > 0 {
            format!(", window {} B", spec.window)
        } else {
            String::new()
        }
    );
    let iv = f64::from(spec.interval_ms) / 1e3;
    let _ = writeln!(o, "{:>14}  {:>12}", "interval", "receiver rate");
    for (i, rate) in r.interval_rates().iter().enumerate() {
        let _ = writeln!(
            o,
            "{:>6.1}-{:<6.1}s  {:>12}",
            i as f64 * iv,
            (i + 1) as f64 * iv,
            rate.to_string()
        );
    }
    side_lines(&mut o, "client", &r.client, spec);
    side_lines(&mut o, "server", &r.server, spec);
    let verdict = r.host_limits();
    let at_least = if verdict.is_host_limited() {
        "at least "
    } else {
        ""
    };
    let _ = writeln!(o, "throughput (receiver): {at_least}{}", r.throughput());
    if let Some(l) = r.udp_loss() {
        let _ = write!(o, "loss: {:.3} %", l * 100.0);
        match r.receiver_drops {
            Some(d) if d > 0 => {
                let _ = write!(o, " ({d} datagrams dropped by the receiving socket itself)");
            }
            _ => {}
        }
        let _ = writeln!(o);
    }
    host_limit_lines(&mut o, &verdict.limits, "");
    if let Some(f) = r.retrans_fraction() {
        let _ = writeln!(o, "retransmitted: {:.3} % of segments", f * 100.0);
    }
    o
}

/// One line per host limit ("host-limited:" when it binds the figure,
/// "host:" when it is only reported), each with its fix below it; shared
/// by the flow and MBS reports.
pub(crate) fn host_limit_lines(o: &mut String, limits: &[HostLimit], indent: &str) {
    for l in limits {
        let head = if l.binds_result {
            "host-limited"
        } else {
            "host"
        };
        let _ = writeln!(o, "{indent}{head}: {} {}: {}", l.host, l.resource, l.why);
        if let Some(fix) = &l.fix {
            let _ = writeln!(o, "{indent}  fix: {fix}");
        }
    }
}
