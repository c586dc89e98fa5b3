//! `compare --hops N --tight-at K`: the sweep on a chain of routers
//! (`crate::chain`, the one `lab run --method hops` builds) instead of the
//! two-host path, so that `hops` runs beside the end-to-end methods and its
//! rows say whether it found the tight link's hop (issue 29's "hop found").
//!
//! The procedure is the two-host sweep's ([`super`]): the chain, the
//! receiver's pathsonde server and the cross traffic on the tight link
//! stay up, the cross traffic is replaced for each kind and load, and each
//! method runs alone after its settling pause — `hops` after at least
//! [`hops_lab::GAP`], so that the routers' ICMP buckets have refilled.
//!
//! Truth, per run and over its own window, from the links' own rates and
//! the cross source's send log:
//! - an end-to-end method: the path's A for its probe size, the least of
//!   the tight link's A and the idle narrow link's capacity (the unshaped
//!   veths carry gigabits); its sampling floor as on the two-host path;
//! - `hops`: its tight link's `available` against the true tight link's A
//!   for its 500-byte load packets, and the hop it named scored as
//!   `lab run --method hops` scores it ([`hops_lab::score`]).  A run that
//!   named no tight link is a failure: it found no hop.
//!
//! Not here: the qdisc's view of each window and the drops each run
//! caused (the chain's tbfs are read before and after a `hops` run only),
//! and RFC 9097's `capacity`, whose UDPST server is the two-host lab's.

use super::record::{measure_once, run_record};
use super::{
    CompareFailure, CompareOptions, CompareReport, CompareRun, NamedFactory, Phase, Progress,
    TruthPoint,
};
use crate::chain::{Chain, ChainSpec};
use crate::error::{LabError, Result};
use crate::hops_lab::{self, HopsLabPlan, HopsRunRecord, Measure, NarrowScore};
use crate::live::{WindowTruth, SERVER_PORT};
use crate::topology::{ip_rate_of_l2, LabSpec};
use crate::truth::{self, LogPoint};
use pathsonde_core::accuracy;
use pathsonde_core::{BitRate, Bytes, DurationNs, TimeNs};
use pathsonde_net::{clock, Server, ServerConfig};
use std::net::SocketAddr;

/// The chain's plan for one phase: the sweep's cross traffic at `load`
/// percent of the tight link, a seed of its own (`phase` counts the
/// phases, so no two loads replay the same draws).
pub fn phase_plan(plan: &HopsLabPlan, kind: &str, load: f64, seed: u64, phase: u64) -> HopsLabPlan {
    HopsLabPlan {
        cross: CompareOptions::cross_spec(kind, load),
        seed: seed.wrapping_add(1000 * phase),
        ..plan.clone()
    }
}

/// Runs the sweep on the chain `opts.chain` names, which it builds and
/// always tears down; `hops` runs the hops method blind from the sender
/// (the CLI's `pathsonde hops`, as `lab run --method hops` runs it).
pub fn compare_chain(
    opts: &CompareOptions,
    make: &NamedFactory,
    hops: &mut Measure<'_>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<CompareReport> {
    opts.validate()?;
    let plan = opts
        .chain
        .clone()
        .ok_or_else(|| LabError::Spec("compare_chain needs a chain (--hops)".into()))?;
    let before = super::load_average();
    let started = clock::monotonic();
    let chain = Chain::build(plan.spec())?;
    let result = sweep(&chain, &plan, opts, make, hops, progress, started);
    drop(chain);
    result.map(|mut r| {
        r.elapsed_s = clock::monotonic().since(started);
        r.load_average_before = before;
        r.load_average_after = super::load_average();
        r
    })
}

/// The path's truth for an end-to-end method's window: the tight link's
/// A, bounded by the narrow link's capacity.
fn path_truth(
    plan: &HopsLabPlan,
    logs: &[Vec<LogPoint>],
    window: (TimeNs, TimeNs),
    probe_size: Bytes,
) -> WindowTruth {
    let cross_l2 = truth::cross_l2_rate(logs, window.0, window.1).unwrap_or(BitRate::ZERO);
    WindowTruth {
        available: narrowed(
            plan,
            truth::available_ip(plan.tight_rate, cross_l2, probe_size),
            probe_size,
        ),
        cross_ip: ip_rate_of_l2(cross_l2, probe_size),
        cross_l2,
    }
}

/// `a`, at most the narrow link's IP-layer capacity when the chain has one.
fn narrowed(plan: &HopsLabPlan, a: BitRate, probe_size: Bytes) -> BitRate {
    match plan.narrow_at {
        Some(_) => a.min(ip_rate_of_l2(plan.narrow_rate, probe_size)),
        None => a,
    }
}

/// One `hops` run as a compare run: its tight link's reading against the
/// true tight link's A, with the hop it named scored; `Err` when it named
/// no tight link (it found no hop).
fn hops_record(
    rec: &HopsRunRecord,
    m: &hops_lab::Measured,
    kind: &str,
    load: f64,
    window: (TimeNs, TimeNs),
    t0: TimeNs,
) -> std::result::Result<CompareRun, String> {
    let (Some(estimate), Some(truth_a)) = (rec.available_bps, rec.truth_available_bps) else {
        // Every note: the one that says why may be any of them.
        let notes = &m.estimate.notes;
        return Err(if notes.is_empty() {
            "hops named no tight link".into()
        } else {
            format!("hops named no tight link: {}", notes.join("; "))
        });
    };
    let tight = &rec.truth[rec.true_tight - 1];
    let cross_ip = match (tight.capacity_ip_bps, tight.available_ip_bps) {
        (Some(c), Some(a)) => c - a,
        _ => BitRate::ZERO,
    };
    let duration = m.elapsed;
    let e = &m.estimate;
    let probe_rate = e.probe_bytes.bits() as f64 / duration.secs_f64().max(1e-9);
    Ok(CompareRun {
        kind: kind.to_string(),
        load,
        method: hops_lab::METHOD.into(),
        run: rec.run - 1,
        start_s: window.0.since(t0),
        end_s: window.1.since(t0),
        estimate_bps: estimate,
        // One number, no band (`TightLink::passed` may lie above A).
        estimate_low_bps: estimate,
        estimate_high_bps: Some(estimate),
        truth_bps: truth_a,
        truth_qdisc_bps: None,
        cross_bps: cross_ip,
        error: accuracy::relative_error(estimate, truth_a),
        sampling_error: None,
        in_band: None,
        drops_caused: None,
        duration_s: duration,
        window_s: window.1.since(window.0),
        window_start_s: window.0.since(t0),
        window_end_s: window.1.since(t0),
        probe_bytes: e.probe_bytes.get(),
        probe_packets: e.probe_packets,
        probe_rate_bps: BitRate::from_bps(probe_rate),
        intrusiveness: probe_rate / truth_a.bps().max(1.0),
        overhead: (cross_ip.bps() > 0.0).then(|| probe_rate / cross_ip.bps()),
        // A tight link named is the method's final answer.
        converged: true,
        host_limited: e.host_pacing().map(str::to_string),
        host_resource: e.host_pacing().map(|_| "pacing".to_string()),
        coalescing: None,
        notes: e.notes.clone(),
        hop_found: Some(rec.tight_named),
        narrow_found: match rec.narrow {
            NarrowScore::SameAsTight => None,
            NarrowScore::Named => Some(true),
            NarrowScore::NotToldApart | NarrowScore::Wrong => Some(false),
        },
    })
}

/// The sweep's phases over the built chain.
fn sweep(
    chain: &Chain,
    plan: &HopsLabPlan,
    opts: &CompareOptions,
    make: &NamedFactory,
    hops: &mut Measure<'_>,
    progress: &mut dyn FnMut(Progress<'_>),
    t0: TimeNs,
) -> Result<CompareReport> {
    let secs = |t: TimeNs| t.since(t0);
    let spec: ChainSpec = chain.spec.clone();
    let probe_size = opts.settings.packet_size;
    let receiver = chain.receiver_in(plan.ipv6);
    let server_addr = SocketAddr::new(receiver, SERVER_PORT);
    let server = crate::netns::run_in(&spec.node(plan.routers + 1), move || {
        Ok(Server::bind(ServerConfig::new(server_addr))?.spawn()?)
    })?;
    let target = SocketAddr::new(receiver, pathsonde_net::hops::DEFAULT_PORT);
    let sender = spec.node(0);
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    let mut phases = Vec::new();
    let mut notes = Vec::new();
    let mut phase_no = 0u64;
    for kind in &opts.kinds {
        for &load in &opts.loads {
            progress(Progress::Phase { kind, load });
            let phase = phase_plan(plan, kind, load, opts.seed, phase_no);
            phase_no += 1;
            let mut cross = hops_lab::start_cross(&phase, &spec)?;
            let phase_from = clock::monotonic();
            std::thread::sleep(opts.settle);
            let settle_to = clock::monotonic();
            for method in &opts.methods {
                for run in 0..opts.runs {
                    let is_hops = method == hops_lab::METHOD;
                    // The paper's settling delay; for `hops` also the
                    // routers' ICMP buckets refilling.
                    std::thread::sleep(if is_hops {
                        opts.tool_settle.max(hops_lab::GAP.to_std())
                    } else {
                        opts.tool_settle
                    });
                    progress(Progress::Start {
                        kind,
                        load,
                        method,
                        run,
                    });
                    let begin = clock::monotonic();
                    let measured = if is_hops {
                        let before = hops_lab::read_all(&spec);
                        let got = hops(&sender, target);
                        let end = clock::monotonic();
                        let after = hops_lab::read_all(&spec);
                        got.and_then(|m| {
                            let logs = vec![cross.log.points()];
                            let truth = hops_lab::link_truth(
                                &spec,
                                plan.tight_at,
                                &logs,
                                (begin, end),
                                &before,
                                &after,
                            );
                            let rec = hops_lab::score(run + 1, truth, &m, &plan.silent)
                                .ok_or("no shaped link to score against")?;
                            hops_record(&rec, &m, kind, load, (begin, end), t0)
                        })
                    } else {
                        measure_once(&sender, make, method, &opts.settings, server_addr).map(|m| {
                            let logs = vec![cross.log.points()];
                            let truth = path_truth(plan, &logs, (m.first, m.last), probe_size);
                            let sampled = truth::cross_l2_rate_within(&logs, &m.windows).map(|x| {
                                narrowed(
                                    plan,
                                    truth::available_ip(plan.tight_rate, x, probe_size),
                                    probe_size,
                                )
                            });
                            run_record(kind, load, run, m, truth, sampled, None, begin, t0)
                        })
                    };
                    match measured {
                        Ok(rec) => {
                            progress(Progress::Done(Ok(&rec)));
                            runs.push(rec);
                        }
                        Err(error) => {
                            let f = CompareFailure {
                                kind: kind.clone(),
                                load,
                                method: method.clone(),
                                run,
                                start_s: secs(begin),
                                end_s: secs(clock::monotonic()),
                                error,
                            };
                            progress(Progress::Done(Err(&f)));
                            failures.push(f);
                        }
                    }
                }
            }
            let phase_to = clock::monotonic();
            let logs = vec![cross.log.points()];
            let truth_series = bins(phase_from, phase_to)
                .map(|(a, b)| {
                    let x = truth::cross_l2_rate(&logs, a, b).unwrap_or(BitRate::ZERO);
                    TruthPoint {
                        t_s: secs(a),
                        available_bps: path_truth(plan, &logs, (a, b), probe_size).available,
                        cross_l2_bps: x,
                    }
                })
                .collect();
            let mut phase_notes = Vec::new();
            if let Err(e) = cross.stop() {
                phase_notes.push(format!("cross traffic: {e}"));
            }
            let model = phase.cross_model().map_err(LabError::Spec)?;
            phases.push(Phase {
                kind: kind.clone(),
                load,
                cross: phase.cross.clone(),
                described: model.describe(),
                start_s: secs(phase_from),
                end_s: secs(phase_to),
                truth_check: None,
                settle_start_s: secs(phase_from + DurationNs::from_ms(200)),
                settle_end_s: secs(settle_to),
                truth_series,
                load_average: super::load_average().map(|l| l[0]),
                notes: phase_notes,
            });
        }
    }
    if let Err(e) = server.stop() {
        notes.push(format!("server: {e}"));
    }
    let lab = LabSpec {
        name: plan.name.clone(),
        capacity: plan.tight_rate,
        queue: plan.queue,
        mtu: 1500,
        cross_sources: 1,
        narrow: plan.narrow_at.map(|_| plan.narrow_rate),
        delay: None,
        threaded_napi: false,
    };
    let first = opts.kinds.first().zip(opts.loads.first());
    Ok(CompareReport {
        capacity_ip_bps: narrowed(plan, ip_rate_of_l2(plan.tight_rate, probe_size), probe_size),
        lab,
        chain: Some(first.map_or_else(
            || plan.clone(),
            |(k, &l)| phase_plan(plan, k, l, opts.seed, 0),
        )),
        settings: opts.settings,
        probe_size_bytes: probe_size.get(),
        kinds: opts.kinds.clone(),
        loads: opts.loads.clone(),
        methods: opts.methods.clone(),
        capacity: None,
        runs_per_cell: opts.runs,
        settle_s: DurationNs::from_std(opts.settle),
        tool_settle_s: DurationNs::from_std(opts.tool_settle),
        elapsed_s: DurationNs::ZERO,
        load_average_before: None,
        load_average_after: None,
        rows: super::rows(&runs, &failures),
        runs,
        failures,
        phases,
        qdisc_series: Vec::new(),
        notes,
    })
}

/// Consecutive 100 ms bins over `[from, to]` (a last part-bin dropped).
fn bins(from: TimeNs, to: TimeNs) -> impl Iterator<Item = (TimeNs, TimeNs)> {
    let step = DurationNs::from_ms(100);
    let n = (to.since(from).ns() / step.ns()).max(0);
    (0..n).map(move |i| {
        let a = from + DurationNs::from_ns(i * step.ns());
        (a, a + step)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> HopsLabPlan {
        HopsLabPlan {
            name: "t".into(),
            routers: 2,
            tight_at: 2,
            narrow_at: Some(3),
            tight_rate: BitRate::from_mbps(100.0),
            narrow_rate: BitRate::from_mbps(60.0),
            cross: "poisson:60%".into(),
            silent: vec![],
            runs: 1,
            queue: Bytes(256 * 1024),
            queue_probe: false,
            end_to_end: false,
            ipv6: false,
            settle: DurationNs::from_secs(2),
            gap: hops_lab::GAP,
            seed: 1,
        }
    }

    #[test]
    fn each_phase_has_its_load_and_a_seed_of_its_own() {
        let p = phase_plan(&plan(), "mix:flows=4", 70.0, 5, 2);
        assert_eq!(p.cross, "mix:70%:flows=4");
        assert_eq!(p.seed, 2005);
        assert_eq!((p.routers, p.tight_at, p.narrow_at), (2, 2, Some(3)));
    }

    #[test]
    fn the_path_truth_is_the_tight_links_a_bounded_by_the_narrow_link() {
        let t0 = TimeNs::from_ns(0);
        let t1 = TimeNs::from_ns(1_000_000_000);
        // 30 Mb/s of L2 cross traffic over one second on the 100 Mb/s link.
        let log = vec![vec![
            LogPoint {
                at_ns: 0,
                ip_bytes: 0,
                l2_bytes: 0,
                late_packets: 0,
                max_late_ns: 0,
            },
            LogPoint {
                at_ns: 999_999_999,
                ip_bytes: 3_700_000,
                l2_bytes: 3_750_000,
                late_packets: 0,
                max_late_ns: 0,
            },
        ]];
        let size = Bytes(1500);
        let t = path_truth(&plan(), &log, (t0, t1), size);
        // 70 Mb/s L2 left on the tight link, but the idle narrow link has 60.
        let narrow_ip = ip_rate_of_l2(BitRate::from_mbps(60.0), size);
        assert_eq!(t.available, narrow_ip);
        let no_narrow = HopsLabPlan {
            narrow_at: None,
            ..plan()
        };
        let t = path_truth(&no_narrow, &log, (t0, t1), size);
        let want = truth::available_ip(BitRate::from_mbps(100.0), t.cross_l2, size);
        assert_eq!(t.available, want);
        assert!((t.cross_l2.bps() - 30e6).abs() < 1e5, "{}", t.cross_l2);
    }

    #[test]
    fn bins_cover_the_phase_in_whole_tenths() {
        let from = TimeNs::from_ns(5);
        let to = from + DurationNs::from_ms(350);
        let b: Vec<_> = bins(from, to).collect();
        assert_eq!(b.len(), 3);
        assert_eq!(b[2].1, from + DurationNs::from_ms(300));
        assert_eq!(bins(to, from).count(), 0);
    }
}
