//! One measurement of a `compare` sweep and its record: the pathsonde
//! client run once in the sender's namespace ([`measure_once`]), an
//! end-to-end estimate beside its window's truth ([`run_record`]), an
//! RFC 9097 capacity test and its zero-loss fit as rows of their own, and
//! the qdisc's view of a window.  The sweeps ([`super`], [`super::chain`])
//! decide what runs when; this module only turns one run into a
//! [`CompareRun`].

use super::{narrow_ip, CompareOptions, CompareRun, NamedFactory};
use crate::capacity;
use crate::live::{LivePath, WindowTruth};
use crate::netns;
use crate::topology::Lab;
use crate::truth::{self, QdiscSample};
use pathsonde_core::accuracy;
use pathsonde_core::methods::registry::MethodSettings;
use pathsonde_core::{BitRate, TimeNs};
use pathsonde_net::client::{measure, ClientConfig};
use pathsonde_net::udpst::Algorithm;

/// One measurement by the pathsonde client in the sender namespace, with
/// the send times of its first and last probe.
pub(crate) struct Measured {
    pub(super) run: pathsonde_net::MeasurementRun,
    pub(super) first: TimeNs,
    pub(super) last: TimeNs,
    pub(super) windows: truth::ProbeWindows,
}

pub(crate) fn measure_once(
    snd: &str,
    make: &NamedFactory,
    method: &str,
    settings: &MethodSettings,
    server: std::net::SocketAddr,
) -> std::result::Result<Measured, String> {
    let mut m = make(method, settings)?;
    let measured = netns::run_in(snd, move || {
        let mut first: Option<TimeNs> = None;
        let mut last: Option<TimeNs> = None;
        let mut windows = truth::ProbeWindows::default();
        let mut track = |o: &pathsonde_core::Observation| {
            for p in &o.packets {
                first = Some(first.map_or(p.sent, |f| f.min(p.sent)));
                last = Some(last.map_or(p.sent, |l| l.max(p.sent)));
            }
            windows.observe(o);
        };
        let r = measure(ClientConfig::new(server), m.as_mut(), &mut track)?;
        Ok((r, first, last, windows))
    });
    match measured {
        Ok((run, Some(first), Some(last), windows)) => Ok(Measured {
            run,
            first,
            last,
            windows,
        }),
        Ok(_) => Err("no probe was sent".into()),
        Err(e) => Err(e.to_string()),
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn record(
    live: &LivePath,
    lab: &Lab,
    opts: &CompareOptions,
    kind: &str,
    load: f64,
    run: u32,
    m: Measured,
    begin: TimeNs,
    t0: TimeNs,
) -> CompareRun {
    let truth = live.truth(lab, m.first, m.last, opts.settings.packet_size);
    let sampled = live.sampled_available(lab, &m.windows, opts.settings.packet_size);
    let lag = live.generator_lag(m.first, m.last).and_then(|l| l.note());
    run_record(kind, load, run, m, truth, sampled, lag, begin, t0)
}

/// An end-to-end measurement beside the truth of its window (`truth`) and
/// of its probes' own stretches (`sampled`), with a note of the lab's own,
/// if any, after the method's.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_record(
    kind: &str,
    load: f64,
    run: u32,
    m: Measured,
    truth: WindowTruth,
    sampled: Option<BitRate>,
    lab_note: Option<String>,
    begin: TimeNs,
    t0: TimeNs,
) -> CompareRun {
    let e = &m.run.estimate;
    let mut notes = e.notes.clone();
    notes.extend(lab_note);
    let a = truth.available.bps();
    let duration = m.run.duration.secs_f64().max(1e-9);
    let probe_rate = e.cost.bytes.bits() as f64 / duration;
    CompareRun {
        kind: kind.to_string(),
        load,
        method: e.method.to_string(),
        run,
        start_s: begin.since(t0),
        end_s: (begin + m.run.duration).since(t0),
        estimate_bps: e.available,
        estimate_low_bps: e.low,
        estimate_high_bps: e.high,
        truth_bps: truth.available,
        truth_qdisc_bps: None,
        cross_bps: truth.cross_ip,
        error: accuracy::relative_error(e.available, truth.available),
        sampling_error: sampled.map(|s| accuracy::relative_error(s, truth.available)),
        in_band: Some(e.band_covers(truth.available)),
        drops_caused: None,
        duration_s: m.run.duration,
        window_s: m.last.since(m.first),
        window_start_s: m.first.since(t0),
        window_end_s: m.last.since(t0),
        probe_bytes: e.cost.bytes.get(),
        probe_packets: e.cost.packets,
        probe_rate_bps: BitRate::from_bps(probe_rate),
        intrusiveness: probe_rate / a.max(1.0),
        overhead: (truth.cross_ip.bps() > 0.0).then(|| probe_rate / truth.cross_ip.bps()),
        converged: e.converged,
        host_limited: e.host_limited.clone(),
        host_resource: e.host_evidence.as_ref().and_then(|h| {
            h.limits
                .iter()
                .find(|l| l.binds_result)
                .map(|l| format!("{} {}", l.host, l.resource))
        }),
        coalescing: e.coalescing,
        notes,
        hop_found: None,
        narrow_found: None,
    }
}

/// A capacity test as a compare run: the maximum is the estimate (low =
/// high = it: no band), the truth is [`crate::capacity`]'s, the cost is
/// every UDP payload byte the client sent and received over the test.
pub(super) fn capacity_record(
    live: &LivePath,
    lab: &Lab,
    kind: &str,
    load: f64,
    run: u32,
    m: &capacity::Measured,
    t0: TimeNs,
) -> Option<CompareRun> {
    let j = capacity::judge(live, lab, m)?;
    let duration = m.end.since(m.begin);
    let bytes = m.run.bytes_sent.get() + m.run.bytes_received.get();
    let probe_rate = bytes as f64 * 8.0 / duration.secs_f64().max(1e-9);
    let cross_ip = j.cross_l2.scale(j.share);
    let mut notes = vec![format!(
        "{} search; mean of the sub-intervals {}, median {}; truth over the maximum's sub-interval {}",
        match m.run.config.algorithm {
            Algorithm::B => "Type B",
            Algorithm::C => "Type C",
        },
        j.mean,
        j.median,
        j.truth_at_max
    )];
    notes.extend(capacity::notes_of(&m.run));
    Some(CompareRun {
        kind: kind.to_string(),
        load,
        method: capacity::METHOD.into(),
        run,
        start_s: m.begin.since(t0),
        end_s: m.end.since(t0),
        estimate_bps: j.max,
        estimate_low_bps: j.max,
        estimate_high_bps: Some(j.max),
        truth_bps: j.truth,
        sampling_error: None,
        truth_qdisc_bps: None,
        cross_bps: cross_ip,
        error: accuracy::relative_error(j.max, j.truth),
        in_band: None,
        drops_caused: None,
        duration_s: duration,
        window_s: j.to.since(j.from),
        window_start_s: j.from.since(t0),
        window_end_s: j.to.since(t0),
        probe_bytes: bytes,
        probe_packets: capacity::load_datagrams(m.rows()),
        probe_rate_bps: BitRate::from_bps(probe_rate),
        intrusiveness: probe_rate / j.truth.bps().max(1.0),
        overhead: (cross_ip.bps() > 0.0).then(|| probe_rate / cross_ip.bps()),
        converged: m.run.error_status == 0,
        host_limited: None,
        coalescing: None,
        notes,
        host_resource: None,
        hop_found: None,
        narrow_found: None,
    })
}

/// The zero-loss fit's reading of the capacity test `rec` was made from,
/// as a banded estimate of the same truth; why there is none otherwise.
pub(super) fn zero_loss_record(
    rec: &CompareRun,
    m: &capacity::Measured,
) -> Result<CompareRun, String> {
    let z = &m.run.report.zero_loss;
    let (a, lo, hi) = z
        .reading()
        .map_err(|why| format!("zero-loss fit: {}", why.words()))?;
    let mut r = rec.clone();
    r.method = capacity::ZERO_LOSS_METHOD.into();
    r.estimate_bps = a;
    r.estimate_low_bps = lo;
    r.estimate_high_bps = Some(hi);
    r.error = accuracy::relative_error(a, rec.truth_bps);
    r.in_band = z.holds(rec.truth_bps);
    r.notes = vec![format!(
        "zero-loss fit of the capacity test's trial intervals; the test's maximum read {}",
        rec.estimate_bps
    )];
    Ok(r)
}

/// A over a run's window from the qdisc: what it carried between the first
/// and last sample inside the window, less the probes (their L2 bytes,
/// spread evenly over the window), subtracted from C.
pub(super) fn qdisc_truth(
    samples: &[QdiscSample],
    lab: &Lab,
    opts: &CompareOptions,
    r: &CompareRun,
    t0: TimeNs,
) -> Option<BitRate> {
    let from = t0 + r.window_start_s;
    let to = t0 + r.window_end_s;
    let inside: Vec<&QdiscSample> = samples
        .iter()
        .filter(|s| s.at_ns >= from.ns() && s.at_ns <= to.ns())
        .collect();
    let (a, b) = (inside.first()?, inside.last()?);
    let span = (b.at_ns - a.at_ns) as f64 * 1e-9;
    if span <= 0.0 {
        return None;
    }
    let carried_l2 = b.bytes.saturating_sub(a.bytes) as f64 * 8.0 / span;
    let s = opts.settings.packet_size.get() as f64;
    let probe_l2 = r.probe_bytes as f64 * (s + crate::topology::L2_HEADER as f64) / s * 8.0
        / r.window_s.secs_f64().max(1e-9);
    let cross_l2 = (carried_l2 - probe_l2).max(0.0);
    Some(
        truth::available_ip(
            lab.spec.capacity,
            BitRate::from_bps(cross_l2),
            opts.settings.packet_size,
        )
        .min(narrow_ip(&lab.spec, opts.settings.packet_size)),
    )
}
