//! The host-limited verdict of a real measurement: gathers what each end's
//! host report says it can send or receive, and has
//! [`pathsonde_core::verdict::judge`] compare the result with it.
//!
//! It lives here, beside [`MeasurementRun`] and [`HostSide`], because the
//! figures come from net's host reports; core does the judging on plain
//! numbers.  Every caller (`abw`, `measure`, the archive, the agent, the
//! lab's runs) asks this one function, so a run is judged one way everywhere.

use crate::client::{HostSide, MeasurementRun};
use crate::host::interfaces::Interface;
use crate::host::HostReport;
use pathsonde_core::verdict::{self, HostCaps, HostRole, Verdict, VerdictInput};
use pathsonde_core::BitRate;

/// The probes' IP packet size, from the trains (1500 if none).
pub fn probe_bytes(run: &MeasurementRun) -> u64 {
    run.estimate
        .trains
        .iter()
        .find(|t| t.packets > 0)
        .map_or(1500, |t| t.bytes.get() / t.packets)
}

/// The interface carrying the path: the one named, else the only interface
/// that is up, not loopback and has a known speed.
pub fn path_interface<'a>(r: &'a HostReport, name: Option<&str>) -> Option<&'a Interface> {
    if let Some(n) = name {
        return r.interfaces.iter().find(|i| i.name == n);
    }
    let mut up = r.interfaces.iter().filter(|i| {
        i.name != "lo"
            && i.operstate.value().map(String::as_str) == Some("up")
            && i.speed_bps.value().is_some()
    });
    match (up.next(), up.next()) {
        (Some(i), None) => Some(i),
        _ => None,
    }
}

/// Plain capability figures of one end, for [`verdict::judge`]; all unknown
/// when the end sent no report.
///
/// The pacing figure is the paced-train rate (docs/host.md) of the car
/// sender this end's pacer uses (`side.pacer`; GSO where the report has it,
/// else batches), scaled from the nearest measured size by packets per
/// second; a report without paced trains (an older one) gives the
/// back-to-back burst rate instead.
pub fn host_caps(side: &HostSide, packet_bytes: u64) -> HostCaps {
    let Some(r) = &side.report else {
        return HostCaps::default();
    };
    let mode = side.pacer.unwrap_or_default();
    let pacing = r
        .pacing
        .sizes
        .iter()
        .min_by_key(|p| p.packet_bytes.abs_diff(packet_bytes))
        .and_then(|p| {
            p.paced_train_bps(mode)
                .map(|b| b.bps() / (p.packet_bytes as f64 * 8.0))
                .or_else(|| p.max_rate_pps.value().copied())
        })
        .map(|pps| BitRate::from_bps(pps * packet_bytes as f64 * 8.0));
    let nic = path_interface(r, side.interface.as_deref());
    HostCaps {
        pacing_bps: pacing,
        // The sendto cost is measured with 1500-byte packets.
        sendto_ns: r.timing.sendto_1472_median_ns.value().copied(),
        nic_bps: nic.and_then(|i| i.speed_bps.value().copied()),
        nic_name: nic.map(|i| i.name.clone()),
        rmem_max_bytes: r.sysctls.rmem_max_bytes.value().copied(),
        wmem_max_bytes: r.sysctls.wmem_max_bytes.value().copied(),
        tcp_rmem_max_bytes: r.sysctls.tcp_rmem_bytes.value().map(|t| t[2]),
        tcp_wmem_max_bytes: r.sysctls.tcp_wmem_bytes.value().map(|t| t[2]),
    }
}

/// The host-limited verdict for a run: both ends' reports and the trains'
/// measured pacing against the result (the client sends).
pub fn judge(run: &MeasurementRun) -> Verdict {
    let packet_bytes = probe_bytes(run);
    let rtt = run.rtt_echo.as_ref().unwrap_or(&run.rtt_control).median;
    let mut v = verdict::judge(&VerdictInput {
        result_bps: run.estimate.available,
        packet_bytes,
        rtt_s: Some(rtt),
        sender: HostRole::Client,
        client: host_caps(&run.client_host, packet_bytes),
        server: host_caps(&run.server_host, packet_bytes),
        // The run's evidence judges the sender's pacing from the same
        // trains, train by train (`verdict::evidence`); the fastest-train
        // rule stands in only for a run without it, so one mechanism
        // decides.
        measured_pacing: run
            .estimate
            .host_evidence
            .is_none()
            .then(|| verdict::measured_pacing(&run.estimate.trains))
            .flatten(),
        margin: verdict::DEFAULT_MARGIN,
    });
    // The run's own evidence (set by the runner) comes first and replaces
    // a capability figure for the same host and resource: what the trains
    // did outranks what a short test before them promised.
    if let Some(ev) = &run.estimate.host_evidence {
        v.limits.retain(|l| {
            !ev.limits
                .iter()
                .any(|e| e.host == l.host && e.resource == l.resource)
        });
        let mut limits = ev.limits.clone();
        limits.append(&mut v.limits);
        limits.sort_by_key(|l| !l.binds_result);
        v.limits = limits;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::pacing::{Pacing, PacingAtSize};
    use crate::host::Known;
    use crate::pacer::PacerMode;

    fn side(gso: Known<BitRate>, batch: Known<BitRate>, pacer: Option<PacerMode>) -> HostSide {
        let mut r = crate::host::probe_quick(crate::host::Quick::Receiver);
        r.pacing = Pacing {
            sink: "test".into(),
            paced_trains: "test".into(),
            sizes: vec![PacingAtSize {
                packet_bytes: 1500,
                // 10 Gb/s back to back.
                max_rate_pps: Known::Value(10e9 / 12_000.0),
                max_rate_bps: Known::Value(BitRate::from_bps(10e9)),
                paced_train_bps_gso: gso,
                paced_train_bps_batch: batch,
                gaps: vec![],
            }],
        };
        HostSide {
            report: Some(r),
            unavailable: None,
            interface: None,
            pacer,
        }
    }

    fn gbps(side: &HostSide, bytes: u64) -> f64 {
        (host_caps(side, bytes).pacing_bps.unwrap().bps() / 1e9 * 1000.0).round() / 1000.0
    }

    #[test]
    fn the_pacing_limit_is_the_paced_train_rate_of_the_pacers_mode() {
        let g = || Known::Value(BitRate::from_bps(4e9));
        let b = || Known::Value(BitRate::from_bps(2e9));
        assert_eq!(gbps(&side(g(), b(), Some(PacerMode::Gso)), 1500), 4.0);
        assert_eq!(gbps(&side(g(), b(), None), 1500), 4.0);
        assert_eq!(gbps(&side(g(), b(), Some(PacerMode::Batch)), 1500), 2.0);
        // GSO refused: the pacer sends batches, and so does the figure.
        let refused = Known::unavailable("GSO refused");
        assert_eq!(gbps(&side(refused, b(), Some(PacerMode::Gso)), 1500), 2.0);
        // Scaled by packets per second to the probe size: 1000-byte probes
        // at the 1500-byte packet rate.
        assert_eq!(gbps(&side(g(), b(), None), 1000), 2.667);
        // An older report without paced trains: the burst figure.
        let old = || Known::unavailable("not in this report");
        assert_eq!(gbps(&side(old(), old(), None), 1500), 10.0);
    }
}
