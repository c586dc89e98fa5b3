//! The shipped scenario files read to the values they were written for.
//!
//! Durations, rates and sizes in scenarios go through core's unit grammar
//! (`docs/units.md`); these values were taken from the files before that
//! grammar replaced the simulator's own parsers, so a change of meaning in any
//! spelling the files use (`6250KB`, `131.2us`, `10G`, `steps:0s=3G,…`) fails
//! here rather than silently changing a simulation.

use pathsonde_core::traffic::CrossModel;
use pathsonde_sim::scenario::Scenario;
use std::path::Path;

/// (rate b/s, delay ps, queue bytes) of each link.
type Links = &'static [(u64, u64, u64)];

struct Expected {
    file: &'static str,
    duration: u64,
    truth_bin: u64,
    sender_syscall: u64,
    rx_abs_delay: u64,
    links: Links,
    /// (start, start_jitter) of each `[[tcp]]`, ps.
    tcp: &'static [(u64, u64)],
    /// (max_rate b/s, gap ps) of the method, if any.
    method: Option<(Option<u64>, u64)>,
}

const S: u64 = 1_000_000_000_000;
const MS: u64 = 1_000_000_000;

const EXPECTED: &[Expected] = &[
    Expected {
        file: "fac2-100g-slow-sender.toml",
        duration: S,
        truth_bin: 10_000_000,
        sender_syscall: 1_000_000,
        rx_abs_delay: 131_200_000,
        links: &[
            (200_000_000_000, MS, 250_000_000),
            (400_000_000_000, 5 * MS, 500_000_000),
            (100_000_000_000, 3 * MS, 100_000_000),
            (200_000_000_000, MS, 250_000_000),
        ],
        tcp: &[],
        method: Some((Some(200_000_000_000), MS)),
    },
    Expected {
        file: "fac2-100g.toml",
        duration: S,
        truth_bin: 10_000_000,
        sender_syscall: 1_000_000,
        rx_abs_delay: 131_200_000,
        links: &[
            (200_000_000_000, MS, 250_000_000),
            (400_000_000_000, 5 * MS, 500_000_000),
            (100_000_000_000, 3 * MS, 100_000_000),
            (200_000_000_000, MS, 250_000_000),
        ],
        tcp: &[],
        method: Some((Some(200_000_000_000), MS)),
    },
    Expected {
        file: "fac2-10g-slow-receiver.toml",
        duration: S,
        truth_bin: 10_000_000,
        sender_syscall: 1_000_000,
        rx_abs_delay: 131_200_000,
        links: &[
            (20_000_000_000, MS, 25_000_000),
            (40_000_000_000, 5 * MS, 50_000_000),
            (10_000_000_000, 3 * MS, 10_000_000),
            (20_000_000_000, MS, 25_000_000),
        ],
        tcp: &[],
        method: Some((Some(20_000_000_000), MS)),
    },
    Expected {
        file: "fac2-10g-slow-sender.toml",
        duration: S,
        truth_bin: 10_000_000,
        sender_syscall: 1_000_000,
        rx_abs_delay: 131_200_000,
        links: &[
            (20_000_000_000, MS, 25_000_000),
            (40_000_000_000, 5 * MS, 50_000_000),
            (10_000_000_000, 3 * MS, 10_000_000),
            (20_000_000_000, MS, 25_000_000),
        ],
        tcp: &[],
        method: Some((Some(20_000_000_000), MS)),
    },
    Expected {
        file: "fac2-10g.toml",
        duration: S,
        truth_bin: 10_000_000,
        sender_syscall: 1_000_000,
        rx_abs_delay: 131_200_000,
        links: &[
            (20_000_000_000, MS, 25_000_000),
            (40_000_000_000, 5 * MS, 50_000_000),
            (10_000_000_000, 3 * MS, 10_000_000),
            (20_000_000_000, MS, 25_000_000),
        ],
        tcp: &[],
        method: Some((Some(20_000_000_000), MS)),
    },
    Expected {
        file: "fac2-40g-slow-sender.toml",
        duration: S,
        truth_bin: 10_000_000,
        sender_syscall: 1_000_000,
        rx_abs_delay: 131_200_000,
        links: &[
            (80_000_000_000, MS, 100_000_000),
            (160_000_000_000, 5 * MS, 200_000_000),
            (40_000_000_000, 3 * MS, 40_000_000),
            (80_000_000_000, MS, 100_000_000),
        ],
        tcp: &[],
        method: Some((Some(80_000_000_000), MS)),
    },
    Expected {
        file: "fac2-40g.toml",
        duration: S,
        truth_bin: 10_000_000,
        sender_syscall: 1_000_000,
        rx_abs_delay: 131_200_000,
        links: &[
            (80_000_000_000, MS, 100_000_000),
            (160_000_000_000, 5 * MS, 200_000_000),
            (40_000_000_000, 3 * MS, 40_000_000),
            (80_000_000_000, MS, 100_000_000),
        ],
        tcp: &[],
        method: Some((Some(80_000_000_000), MS)),
    },
    Expected {
        file: "icim-fig5-probe.toml",
        duration: 50 * S,
        truth_bin: 100_000_000,
        sender_syscall: 1_000_000,
        rx_abs_delay: 131_200_000,
        links: &[
            (10_000_000_000, MS, 12_500_000),
            (5_000_000_000, 13 * MS, 6_250_000),
            (10_000_000_000, MS, 12_500_000),
        ],
        tcp: &[],
        method: Some((Some(10_000_000_000), MS)),
    },
    Expected {
        file: "icim-fig5.toml",
        duration: 50 * S,
        truth_bin: 100_000_000,
        sender_syscall: 0,
        rx_abs_delay: 131_200_000,
        links: &[
            (10_000_000_000, MS, 12_500_000),
            (5_000_000_000, 13 * MS, 6_250_000),
            (10_000_000_000, MS, 12_500_000),
        ],
        tcp: &[(0, 0)],
        method: None,
    },
    Expected {
        file: "icim-table3.toml",
        duration: 40 * S,
        truth_bin: MS,
        sender_syscall: 0,
        rx_abs_delay: 131_200_000,
        links: &[
            (10_000_000_000, MS, 12_500_000),
            (1_000_000_000, 7 * MS, 2_250_000),
            (10_000_000_000, MS, 12_500_000),
        ],
        tcp: &[(0, S), (0, S)],
        method: None,
    },
];

fn load(file: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(file);
    Scenario::load(&path).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn every_shipped_scenario_is_pinned() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    files.sort();
    let pinned: Vec<&str> = EXPECTED.iter().map(|e| e.file).collect();
    assert_eq!(
        files, pinned,
        "a new scenario file wants its values pinned here"
    );
}

#[test]
fn shipped_scenarios_read_the_values_they_were_written_for() {
    for e in EXPECTED {
        let s = load(e.file);
        let f = e.file;
        assert_eq!(s.duration.ps(), e.duration, "{f} duration");
        assert_eq!(s.truth_bin.ps(), e.truth_bin, "{f} truth_bin");
        assert_eq!(
            s.sender.timer_resolution.ps(),
            1_000_000,
            "{f} timer_resolution"
        );
        assert_eq!(s.sender.syscall.ps(), e.sender_syscall, "{f} syscall");
        assert_eq!(
            s.receiver.nic.rx_abs_delay.ps(),
            e.rx_abs_delay,
            "{f} rx_abs_delay"
        );
        let links: Vec<(u64, u64, u64)> = s
            .links
            .iter()
            .map(|l| (l.rate.bps() as u64, l.delay.ps(), l.queue.get()))
            .collect();
        assert_eq!(links, e.links, "{f} links");
        let tcp: Vec<(u64, u64)> = s
            .tcp
            .iter()
            .map(|t| (t.start.ps(), t.start_jitter.ps()))
            .collect();
        assert_eq!(tcp, e.tcp, "{f} tcp");
        let method = s
            .method
            .as_ref()
            .map(|m| (m.max_rate.map(|r| r.bps() as u64), m.gap.ps()));
        assert_eq!(method, e.method, "{f} method");
    }
}

#[test]
fn the_step_schedule_keeps_its_times_and_rates() {
    let s = load("icim-fig5.toml");
    let model = &s.links[1].cross[0].model;
    let CrossModel::Steps { steps, .. } = model else {
        panic!("{model:?}");
    };
    let got: Vec<(i64, f64)> = steps.iter().map(|st| (st.at.ns(), st.rate.bps())).collect();
    assert_eq!(
        got,
        [(0, 3e9), (15_000_000_000, 2e9), (35_000_000_000, 1e9)]
    );
}

#[test]
fn every_shipped_scenario_is_within_the_event_budget_and_a_typo_is_not() {
    use pathsonde_sim::scenario::EVENT_BUDGET;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().to_string();
        if !file.ends_with(".toml") {
            continue;
        }
        let scn = load(&file);
        let e = scn.event_estimate();
        assert!(e > 0.0 && e <= EVENT_BUDGET, "{file}: {e:.2e} events");
    }
    // A rate typed with five zeros too many is caught.
    let mut scn = load("fac2-100g.toml");
    let r = scn.links[0].rate;
    scn.links[0].rate = r.scale(1e5);
    assert!(scn.event_estimate() > EVENT_BUDGET);
}

#[test]
fn the_slow_host_scenarios_limit_the_hosts_they_name() {
    for (file, sender, receiver) in [
        ("fac2-10g-slow-sender.toml", Some(450_000), None),
        ("fac2-40g-slow-sender.toml", Some(300_000), None),
        ("fac2-100g-slow-sender.toml", Some(750_000), None),
        ("fac2-10g-slow-receiver.toml", None, Some(380_000)),
        ("fac2-10g.toml", None, None),
    ] {
        let s = load(file);
        assert_eq!(s.sender.max_pps, sender, "{file}");
        assert_eq!(s.receiver.max_pps, receiver, "{file}");
        let limits = s.host_limits(1);
        assert_eq!(
            limits.is_some(),
            sender.is_some() || receiver.is_some(),
            "{file}"
        );
        if receiver.is_some() {
            assert_eq!(s.receiver.rx_queue, 64, "{file}");
        }
    }
}

/// FAC²'s band floor at 40 Gb/s: its default budget there is its probe
/// time, 30–50 MB, not 2 MB, and a floor that shrank with those bytes as if
/// the user had asked for more gave "converged" ±1–2 % bands that missed
/// the truth by 3–6 % (6 of 56 estimates over these seeds at 757ba56; 2
/// with the floor judged against the default budget at the path's rate).
#[test]
fn fac2_at_40g_gives_no_narrow_band_from_its_default_bytes() {
    let (narrow, converged_missed) = fac2_bands("fac2-40g.toml");
    assert_eq!(narrow, 0, "bands narrower than the ±5 % floor");
    // 2 at 7a34ff6, before the band took in the receiver's bunching.
    assert_eq!(
        converged_missed, 0,
        "{converged_missed} converged bands missed the truth"
    );
}

/// FAC²'s band behind coalescing NICs at 10 and 100 Gb/s: a train's rate
/// is read at bunch ends, so to about one bunch over its span, and the band
/// takes that in.  At 7a34ff6 (before it did), 3 converged ±5 % bands over
/// these two scenarios' seeds missed the truth by 6–17 %; one remains (a
/// 10 Gb/s reading 17 % low under a ±7.5 % band).
#[test]
fn fac2_bands_behind_coalescing_nics_take_the_bunching_in() {
    let (_, at_10g) = fac2_bands("fac2-10g.toml");
    let (_, at_100g) = fac2_bands("fac2-100g.toml");
    assert!(
        at_10g + at_100g <= 1,
        "converged bands that missed the truth: {at_10g} at 10 Gb/s, {at_100g} at 100 Gb/s"
    );
}

/// FAC² over seeds 1–10 of a scenario: the bands narrower than ±4.9 % of
/// A, and the converged bands that missed the truth.
fn fac2_bands(file: &str) -> (u32, u32) {
    use pathsonde_sim::driver::RunOptions;
    let s = load(file);
    let opts = RunOptions {
        method: None,
        max_estimates: None,
        known_capacity: None,
    };
    let runs = pathsonde_sim::plan::run_method_seeds(&s, 1, 10, &opts, |_| |_| {}).unwrap();
    let (mut estimates, mut narrow, mut converged_missed) = (0, 0, 0);
    for smp in runs.iter().flat_map(|r| r.samples.iter()) {
        let Some(e) = smp.estimate.as_ref() else {
            continue;
        };
        estimates += 1;
        let a = e.available.bps();
        if let Some(hi) = e.high {
            if (hi.bps() - e.low.bps()) / 2.0 < 0.049 * a {
                narrow += 1;
            }
        }
        if e.converged && !e.band_covers(smp.truth) {
            converged_missed += 1;
        }
    }
    assert!(estimates >= 40, "{file}: {estimates} estimates");
    (narrow, converged_missed)
}
