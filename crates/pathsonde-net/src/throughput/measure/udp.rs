//! `measure`'s UDP phase: one stream rising until the path loses, two
//! streams at the rate that overloaded one, and the burst-controlled
//! stream.  The ramp's next rate and its reading are
//! `pathsonde_core::advice`'s; this file runs the flows.

use super::{Fac2Phase, FlowPlan, FlowSummary, MbsPhase, Session};
use crate::error::Result;
use crate::throughput::client::run_flow;
use pathsonde_core::advice::{self, UdpStep};
use pathsonde_core::{BitRate, Bytes};
use pathsonde_wire::flow::{FlowProto, FlowSpec};
use std::time::Instant;

/// What the UDP phase found.
pub(super) struct UdpPhase {
    pub(super) ramp: Vec<UdpStep>,
    pub(super) single: Option<BitRate>,
    pub(super) sender_limited: bool,
    /// The ramp ended where the receiving socket dropped datagrams itself.
    pub(super) receiver_limited: bool,
    pub(super) multi: Option<FlowSummary>,
    pub(super) multi_helps: Option<bool>,
    pub(super) burst: Option<FlowSummary>,
}

fn udp_spec(streams: u16, secs: f64, rate: BitRate, payload: u16, burst: u32) -> FlowSpec {
    FlowSpec {
        proto: FlowProto::Udp,
        streams,
        duration_ms: (secs * 1e3).round().clamp(100.0, 60_000.0) as u32,
        interval_ms: ((secs * 1e3 / 5.0).round() as u32).max(100),
        reverse: false,
        window: 0,
        full_duplex_buffers: false,
        udp_rate_bps: rate.bps().max(1.0) as u64,
        udp_payload: payload,
        udp_burst_packets: burst.clamp(1, pathsonde_wire::flow::MAX_FLOW_BURST_PACKETS),
    }
}

/// Datagrams per burst so that bursts come about every millisecond (as
/// netest's and iperf3's UDP senders do; a period a loaded host still
/// holds), and never more than half the MBS.
fn burst_for(rate: BitRate, payload: u16, mbs: Option<Bytes>) -> u32 {
    let per = f64::from(payload) * 8.0;
    let n = (rate.bps() * 1e-3 / per).ceil().max(1.0) as u32;
    match mbs {
        Some(m) if m.get() > 0 => n.min(((m.get() / 2) / u64::from(payload).max(1)).max(1) as u32),
        _ => n,
    }
}

impl Session<'_> {
    /// Phase 5: one UDP stream rising until loss, two streams at the rate
    /// that overloaded one, and the burst-controlled stream.
    pub(super) fn udp(
        &mut self,
        plan: &FlowPlan,
        fac2: &Fac2Phase,
        mbs: &MbsPhase,
    ) -> Result<UdpPhase> {
        let FlowPlan {
            flow_cost,
            tcp_flows,
            tcp_secs,
            udp_step,
            payload,
        } = *plan;
        let (available, line, mbs_bytes) = (fac2.available, mbs.line, mbs.bytes);
        let t = Instant::now();
        let mut bytes = 0u64;
        let mut ramp: Vec<UdpStep> = Vec::new();
        // From half the larger of the FAC² estimate and the bursts' line speed.
        let start_rate = match (available, line) {
            (Some(a), Some(l)) => a.max(l).scale(0.5),
            (a, l) => a.or(l).map_or(BitRate::from_mbps(50.0), |r| r.scale(0.5)),
        };
        let ceiling = self.opts.max_rate;
        let mut overload: Option<BitRate> = None;
        while let Some(rate) = advice::next_udp_rate(&ramp, start_rate, ceiling, 1.25) {
            if self.left() < udp_step + flow_cost + tcp_flows * (tcp_secs * 0.5) {
                self.notes
                    .push("UDP ramp cut short by the time budget".into());
                break;
            }
            (self.progress)(&format!("UDP, one stream at {rate}"));
            let r = run_flow(
                &mut self.client,
                &udp_spec(
                    1,
                    udp_step,
                    rate,
                    payload,
                    burst_for(rate, payload, mbs_bytes),
                ),
            )?;
            bytes += r.sender().streams.iter().map(|s| s.bytes).sum::<u64>();
            let step = UdpStep {
                asked: rate,
                sent: r.sent_rate(),
                received: r.throughput(),
                loss: r.udp_loss().unwrap_or(1.0),
                receiver_dropped: r.udp_receiver_dropped(),
            };
            ramp.push(step);
            overload = Some(rate);
        }
        let single = advice::udp_achievable(&ramp);
        let sender_limited = advice::udp_sender_limited(&ramp);
        let receiver_limited = advice::udp_receiver_limited(&ramp);
        let mut multi = None;
        if let Some(rate) = overload {
            (self.progress)(&format!("UDP, two streams at {rate} together"));
            let r = run_flow(
                &mut self.client,
                &udp_spec(
                    2,
                    udp_step.max(0.5),
                    rate,
                    payload,
                    burst_for(rate.scale(0.5), payload, mbs_bytes),
                ),
            )?;
            bytes += r.sender().streams.iter().map(|s| s.bytes).sum::<u64>();
            multi = Some(FlowSummary::of(&r));
        }
        let multi_helps = match (single, &multi) {
            (Some(s), Some(m)) => Some(advice::udp_streams_help(s, m.throughput())),
            _ => None,
        };
        let mut burst = None;
        if let (Some(m), Some(l)) = (mbs_bytes, line) {
            if let Some((burst_bytes, period)) = advice::controlled_burst(m, l) {
                let pkts = (burst_bytes.get() / u64::from(payload)).max(1) as u32;
                let rate = advice::burst_rate(Bytes(u64::from(pkts) * u64::from(payload)), period)
                    .unwrap_or(BitRate::ZERO);
                if rate.is_positive() && pkts <= pathsonde_wire::flow::MAX_FLOW_BURST_PACKETS {
                    (self.progress)(&format!(
                        "UDP, burst-controlled: {} bytes every {:.3} ms ({rate})",
                        u64::from(pkts) * u64::from(payload),
                        period.ms_f64()
                    ));
                    let r = run_flow(
                        &mut self.client,
                        &udp_spec(1, udp_step.max(0.5), rate, payload, pkts),
                    )?;
                    bytes += r.sender().streams.iter().map(|s| s.bytes).sum::<u64>();
                    burst = Some(FlowSummary::of(&r));
                }
            }
        }
        self.phase("udp", t, bytes);
        Ok(UdpPhase {
            ramp,
            single,
            sender_limited,
            receiver_limited,
            multi,
            multi_helps,
            burst,
        })
    }
}
