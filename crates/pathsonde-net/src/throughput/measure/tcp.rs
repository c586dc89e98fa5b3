//! `measure`'s TCP phase: one stream with the optimal window, the -FullD
//! check, and the parallel-stream sweep, judged against the reference rate
//! (`pathsonde_core::advice::reference_rate`).

use super::udp::UdpPhase;
use super::{Fac2Phase, FlowPlan, FlowSummary, MbsPhase, Session, MIN_TUNED_WINDOW};
use crate::error::Result;
use crate::throughput::client::run_flow;
use pathsonde_core::advice;
use pathsonde_core::{BitRate, Bytes};
use pathsonde_wire::flow::{BufferLimits, FlowProto, FlowSpec};
use std::time::Instant;

/// What the TCP phase found, and what it judged them against.
pub(super) struct TcpPhase {
    /// FAC²'s A is only a lower bound (no upper bound, or host-limited).
    pub(super) a_is_bound: bool,
    /// The UDP ramp never lost anything: its figure is a lower bound.
    pub(super) udp_is_bound: bool,
    pub(super) reference: Option<BitRate>,
    pub(super) bdp_window: Option<Bytes>,
    pub(super) optimal_window: Option<Bytes>,
    pub(super) tuned: Option<FlowSummary>,
    pub(super) full_duplex: Option<FlowSummary>,
    pub(super) sweep: Vec<FlowSummary>,
    pub(super) receiver_limits: BufferLimits,
    pub(super) sender_limits: BufferLimits,
}

fn tcp_spec(streams: u16, secs: f64, window: u32, full_duplex: bool) -> FlowSpec {
    // Five whole intervals: the steady-state figure drops the first.
    let interval = ((secs * 1e3 / 5.0).round() as u32).clamp(100, 12_000);
    FlowSpec {
        proto: FlowProto::Tcp,
        streams,
        duration_ms: interval * 5,
        interval_ms: interval,
        reverse: false,
        window,
        full_duplex_buffers: full_duplex,
        udp_rate_bps: 0,
        udp_payload: 0,
        udp_burst_packets: 0,
    }
}

impl Session<'_> {
    /// Phase 6: TCP with the optimal window, the -FullD check and the
    /// parallel-stream sweep.
    pub(super) fn tcp(
        &mut self,
        plan: &FlowPlan,
        fac2: &Fac2Phase,
        mbs: &MbsPhase,
        udp: &UdpPhase,
    ) -> Result<TcpPhase> {
        let (flow_cost, tcp_flows) = (plan.flow_cost, plan.tcp_flows);
        let (available, udp_single) = (fac2.available, udp.single);
        let t = Instant::now();
        let mut bytes = 0u64;
        // What the TCP advice is judged against: A, but never below what one
        // UDP stream moved without loss.  An estimate with no upper bound (the
        // host or --max-rate, not the path, stopped it), or a UDP ramp that
        // never lost anything, is only a lower bound on what the path offers:
        // no window or stream count is sized from a bound.
        let a_is_bound = fac2
            .abw
            .as_ref()
            .is_some_and(|a| a.estimate.host_limited.is_some() || a.estimate.high.is_none());
        let udp_is_bound = advice::udp_unbounded(&udp.ramp);
        let sizing_a = available.filter(|_| !a_is_bound);
        let sizing_udp = advice::udp_lossless(&udp.ramp).filter(|_| !udp_is_bound);
        let reference = advice::reference_rate(sizing_a, sizing_udp);
        if reference.is_none() && (a_is_bound || udp_is_bound) {
            let seen = [available, udp_single]
                .into_iter()
                .flatten()
                .max_by(|a, b| a.bps().total_cmp(&b.bps()))
                .map_or("?".into(), |r| r.to_string());
            self.notes.push(format!(
                "the path carries at least {seen}, but a host (the sender's pacing, the receiving socket) or the rate ceiling, not the path, set that figure: no window or stream count is advised from a lower bound"
            ));
        }
        if let (Some(a), Some(r)) = (sizing_a, reference) {
            if r.bps() > a.bps() * 1.25 {
                self.notes.push(format!(
                    "FAC² estimated {a} but one UDP stream moved {r} without loss: the TCP advice uses {r}"
                ));
            }
        }
        let target = reference.or(udp_single.filter(|_| !udp_is_bound));
        let bdp_window = target.map(|a| advice::bdp_window(a, fac2.rtt));
        let optimal_window = bdp_window.map(|b| advice::optimal_window(b, mbs.bytes));
        let tcp_secs = ((self.left() - 0.3) / tcp_flows - flow_cost).clamp(0.4, 10.0);
        let mut tuned = None;
        let mut full_duplex = None;
        let mut receiver_limits = BufferLimits::default();
        let mut sender_limits = BufferLimits::default();
        if let Some(w) = optimal_window.filter(|w| w.get() > 0) {
            // Never below 64 KiB: a window of a few packets (a LAN's BDP) only
            // measures how badly a tiny buffer does.
            let w = w.get().clamp(
                MIN_TUNED_WINDOW,
                u64::from(pathsonde_wire::flow::MAX_FLOW_BUFFER),
            ) as u32;
            (self.progress)(&format!("TCP, one stream, optimal window {w} bytes"));
            let r = run_flow(&mut self.client, &tcp_spec(1, tcp_secs, w, false))?;
            bytes += r.received().get();
            receiver_limits = r.receiver().limits;
            sender_limits = r.sender().limits;
            tuned = Some(FlowSummary::of(&r));
            (self.progress)("TCP, -FullD check (sender's receive buffer = send buffer)");
            let r = run_flow(&mut self.client, &tcp_spec(1, tcp_secs, w, true))?;
            bytes += r.received().get();
            full_duplex = Some(FlowSummary::of(&r));
        }
        let mut sweep = Vec::new();
        for &n in &self.opts.sweep {
            if self.left() < tcp_secs * 0.5 + flow_cost {
                self.notes.push(format!(
                    "stream sweep cut short by the time budget before {n} streams"
                ));
                break;
            }
            let secs = tcp_secs.min(self.left() - flow_cost - 0.2).max(0.3);
            (self.progress)(&format!("TCP, {n} stream(s), system buffers"));
            let r = run_flow(&mut self.client, &tcp_spec(n, secs, 0, false))?;
            bytes += r.received().get();
            receiver_limits = r.receiver().limits;
            sender_limits = r.sender().limits;
            sweep.push(FlowSummary::of(&r));
        }
        self.phase("tcp", t, bytes);
        Ok(TcpPhase {
            a_is_bound,
            udp_is_bound,
            reference,
            bdp_window,
            optimal_window,
            tuned,
            full_duplex,
            sweep,
            receiver_limits,
            sender_limits,
        })
    }
}
