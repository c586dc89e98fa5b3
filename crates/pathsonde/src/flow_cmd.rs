//! `pathsonde tcp HOST` and `pathsonde udp HOST`: plain throughput tests
//! with both ends' reports (as iperf3 gives them), reverse direction (-R),
//! per-interval lines (-i), duration (-t) and parallel streams (-P).

use crate::{resolve, Failure};
use clap::Args;
use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_net::client::{Client, ClientConfig};
use pathsonde_net::throughput::run_flow;
use pathsonde_render::flow::{proto_name, summary_line, text, to_json};
use pathsonde_wire::flow::{FlowProto, FlowSpec};

#[derive(Args, Clone)]
pub struct FlowArgs {
    /// The server: HOST, HOST:PORT, [V6] or [V6]:PORT.
    pub host: String,
    /// The server's port, unless HOST names one.
    #[arg(long, short, default_value_t = crate::DEFAULT_PORT)]
    pub port: u16,
    /// Duration, e.g. 10s (a bare number is seconds, as in iperf3).
    #[arg(short = 't', long = "time", default_value = "10s", value_parser = crate::args::seconds)]
    pub time: DurationNs,
    /// Parallel streams (1..16).
    #[arg(short = 'P', long = "parallel", default_value_t = 1)]
    pub parallel: u16,
    /// Reverse: the server sends, this host receives.
    #[arg(short = 'R', long)]
    pub reverse: bool,
    /// Report interval, e.g. 1s (at least 100ms; a bare number is seconds).
    #[arg(short = 'i', long, default_value = "1s", value_parser = crate::args::seconds)]
    pub interval: DurationNs,
    #[command(flatten)]
    pub json: crate::args::JsonFlags,
    #[command(flatten)]
    pub save: crate::args::SaveFlags,
}

#[derive(Args, Clone)]
pub struct TcpArgs {
    #[command(flatten)]
    pub flow: FlowArgs,
    /// Socket buffers (SO_SNDBUF on the sender, SO_RCVBUF on the receiver),
    /// e.g. 512KiB; default: the system's (TCP autotuning).
    #[arg(long, value_parser = crate::args::positive_size)]
    pub window: Option<Bytes>,
    /// netest's -FullD: the sender's receive buffer as large as its send buffer.
    #[arg(long, requires = "window")]
    pub full_duplex: bool,
}

#[derive(Args, Clone)]
pub struct UdpArgs {
    #[command(flatten)]
    pub flow: FlowArgs,
    /// Total rate of UDP payload over all -P streams together (bits/s; k, M,
    /// G; docs/units.md).  Unlike iperf3, whose -b is per stream: `-b 100M -P 4`
    /// sends 25 Mb/s on each stream here, 100 Mb/s on each in iperf3.
    #[arg(short = 'b', long, default_value = "100M", value_parser = crate::args::positive_rate)]
    pub bitrate: BitRate,
    /// Burst size: send this many bytes back to back per --period (netest's
    /// burst control, e.g. --burst 40KiB --period 1ms); overrides --bitrate.
    #[arg(long, value_parser = crate::args::positive_size, requires = "period")]
    pub burst: Option<Bytes>,
    /// How often each stream sends one --burst, e.g. 1ms (a bare number is
    /// seconds).
    #[arg(long, requires = "burst")]
    pub period: Option<DurationNs>,
    /// IP packet size, bytes.
    #[arg(long, default_value = "1500", value_parser = crate::args::packet_size)]
    pub packet_size: Bytes,
}

fn base(a: &FlowArgs, proto: FlowProto) -> Result<FlowSpec, Failure> {
    let ms = a.time.ns() / 1_000_000;
    if !(100..=60_000).contains(&ms) {
        return Err(crate::usage(format!(
            "-t {} must be 0.1..60 s",
            a.time.secs_f64()
        )));
    }
    let iv = a.interval.ns() / 1_000_000;
    if iv < 100 {
        return Err(crate::usage("-i must be at least 100ms".into()));
    }
    if !(1..=16).contains(&a.parallel) {
        return Err(crate::usage("-P must be 1..16".into()));
    }
    Ok(FlowSpec {
        proto,
        streams: a.parallel,
        duration_ms: ms as u32,
        interval_ms: iv.min(60_000) as u32,
        reverse: a.reverse,
        window: 0,
        full_duplex_buffers: false,
        udp_rate_bps: 0,
        udp_payload: 0,
        udp_burst_packets: 0,
    })
}

pub(crate) fn run_tcp(a: &TcpArgs) -> Result<(), Failure> {
    let mut spec = base(&a.flow, FlowProto::Tcp)?;
    if let Some(w) = a.window {
        if w.get() > u64::from(pathsonde_wire::flow::MAX_FLOW_BUFFER) {
            return Err(crate::usage("--window at most 64MiB".into()));
        }
        spec.window = w.get() as u32;
    }
    spec.full_duplex_buffers = a.full_duplex;
    run(&a.flow, &spec)
}

pub(crate) fn run_udp(a: &UdpArgs) -> Result<(), Failure> {
    let mut spec = base(&a.flow, FlowProto::Udp)?;
    let addr = resolve(&a.flow.host, a.flow.port)?;
    let payload = a.packet_size.get() - pathsonde_net::udp::ip_udp_overhead(&addr);
    spec.udp_payload = payload as u16;
    match (a.burst, a.period) {
        (Some(b), Some(p)) => {
            let pkts = b.get().div_ceil(payload).max(1);
            if pkts > u64::from(pathsonde_wire::flow::MAX_FLOW_BURST_PACKETS) {
                return Err(crate::usage(
                    "--burst too large (at most 8192 packets)".into(),
                ));
            }
            let rate = pathsonde_core::advice::burst_rate(Bytes(pkts * payload), p)
                .ok_or_else(|| crate::usage("--period must be positive".into()))?;
            // Every stream sends its own bursts at the period.
            spec.udp_rate_bps = (rate.bps() * f64::from(spec.streams)) as u64;
            spec.udp_burst_packets = pkts as u32;
        }
        _ => {
            spec.udp_rate_bps = a.bitrate.bps() as u64;
            let per = a.bitrate.bps() / f64::from(spec.streams);
            // A burst about every millisecond, as iperf3 sends; at rates
            // where that is more than the protocol's largest burst, bursts
            // of that size more often (`-b 20G` of 200-byte packets asked
            // 14 535 and was refused as "burst packets out of range").
            spec.udp_burst_packets = ((per * 1e-3 / (payload as f64 * 8.0)).ceil() as u32)
                .clamp(1, pathsonde_wire::flow::MAX_FLOW_BURST_PACKETS);
        }
    }
    spec.check().map_err(|e| crate::usage(e.to_string()))?;
    run(&a.flow, &spec)
}

fn run(a: &FlowArgs, spec: &FlowSpec) -> Result<(), Failure> {
    let addr = resolve(&a.host, a.port)?;
    let started = std::time::Instant::now();
    let mut client = Client::connect(ClientConfig::new(addr))?;
    crate::output::progress(&format!(
        "{} to {addr}: {} stream(s) for {}",
        proto_name(spec),
        spec.streams,
        DurationNs::from_ms(i64::from(spec.duration_ms))
    ));
    let r = run_flow(&mut client, spec)?;
    client.close();
    let duration = started.elapsed();
    // One call archives the run and prints it in the mode chosen
    // (docs/archive.md): tcp and udp are kept like every measurement.
    crate::archive_cmd::finish(
        pathsonde_archive::Record {
            kind: proto_name(spec).to_lowercase(),
            target: addr.to_string(),
            method: None,
            started: crate::archive_cmd::started_ago(duration),
            duration,
            summary: summary_line(spec, &r),
            result: to_json(addr, &r),
            raw: None,
        },
        || text(&r),
    );
    Ok(())
}
