//! Unit tests of FAC²'s control logic; the accuracy tests against the
//! synthetic path live in `tests/fac2_fluid.rs`.

use super::*;
use crate::synthetic::{drive, FluidPath, FluidPathConfig};

fn path(c_mbps: f64, x_mbps: f64) -> FluidPath {
    FluidPath::new(FluidPathConfig::new(
        BitRate::from_mbps(c_mbps),
        BitRate::from_mbps(x_mbps),
    ))
}

#[test]
fn first_train_is_at_max_rate_and_plans_are_idempotent() {
    let mut m = Fac2::new(Fac2Config::default());
    let a = m.next_plan();
    let b = m.next_plan();
    assert_eq!(a, b);
    match a {
        ProbePlan::Train(t) => assert_eq!(t.rate, BitRate::from_gbps(1.0)),
        other => panic!("not a train: {other:?}"),
    }
    assert!(m.estimate().is_none());
}

#[test]
fn exact_fluid_path_converges_in_five_trains() {
    // Start at 1 Gb/s, feedback, two spread trains (four fit points), one
    // verification.
    let mut m = Fac2::new(Fac2Config::default());
    let mut p = path(100.0, 60.0);
    let e = drive(&mut m, &mut p, 100).unwrap();
    assert_eq!(m.stop_reason(), Some(Fac2Stop::Converged));
    assert_eq!(e.trains.len(), 5);
    let roles: Vec<Role> = m.trains.iter().map(|t| t.role).collect();
    assert_eq!(
        roles,
        [
            Role::Start,
            Role::Feedback,
            Role::Spread,
            Role::Spread,
            Role::Verify
        ]
    );
    assert!((e.available.mbps() - 40.0).abs() < 0.01, "{}", e.available);
    let high = e.high.expect("a converged estimate has an upper bound");
    assert!(e.low <= e.available && e.available <= high && e.low < high);
}

#[test]
fn the_feedback_step_contracts_by_the_utilisation() {
    // Pure FAC² feedback: (r − A) / (R − A) = X / (R + X).
    let mut m = Fac2::new(Fac2Config::default());
    let mut p = path(100.0, 80.0);
    for i in 0..2 {
        if let ProbePlan::Train(t) = m.next_plan() {
            let obs = p.carry(&t, i);
            m.observe(&obs);
        }
    }
    let t0 = &m.trains[0];
    let t1 = &m.trains[1];
    assert_eq!(t1.role, Role::Feedback);
    let r0 = t0.recv_bps.unwrap() / 1e6;
    assert!((t1.sent_bps / 1e6 - r0).abs() / r0 < 1e-3);
    let contraction = (r0 - 20.0) / (t0.sent_bps / 1e6 - 20.0);
    let want = 80.0 / (t0.sent_bps / 1e6 + 80.0);
    assert!((contraction - want).abs() < 1e-4, "{contraction} vs {want}");
}

#[test]
fn observations_after_done_are_ignored() {
    let mut m = Fac2::new(Fac2Config::default());
    let mut p = path(100.0, 50.0);
    let e = drive(&mut m, &mut p, 100).unwrap();
    let spec = m.cfg.train_for(BitRate::from_mbps(10.0), m.resolution, 1.0);
    let obs = p.carry(&spec, 99);
    m.observe(&obs);
    assert_eq!(m.estimate().unwrap(), e);
    assert_eq!(m.next_plan(), ProbePlan::Done);
}

#[test]
fn an_unsolicited_observation_is_used() {
    let mut m = Fac2::new(Fac2Config::default());
    let mut p = path(100.0, 50.0);
    let spec = m
        .cfg
        .train_for(BitRate::from_mbps(400.0), m.resolution, 1.0);
    m.observe(&p.carry(&spec, 0));
    assert_eq!(m.trains.len(), 1);
    assert_eq!(m.trains[0].class, Class::Above);
    // The next plan follows from it (feedback at its receiving rate).
    match m.next_plan() {
        ProbePlan::Train(t) => assert!(t.rate < BitRate::from_mbps(100.0)),
        other => panic!("not a train: {other:?}"),
    }
}

#[test]
fn a_coarse_observed_clock_enlarges_cars() {
    let mut m = Fac2::new(Fac2Config::default());
    let cfg = FluidPathConfig {
        recv_clock: crate::observation::ClockInfo {
            source: crate::observation::ClockSource::UserSpace,
            resolution: DurationNs::from_us(10),
        },
        ..FluidPathConfig::new(BitRate::from_gbps(1.0), BitRate::from_mbps(200.0))
    };
    let mut p = FluidPath::new(cfg);
    let first = match m.next_plan() {
        ProbePlan::Train(t) => t,
        other => panic!("not a train: {other:?}"),
    };
    m.observe(&p.carry(&first, 0));
    match m.next_plan() {
        ProbePlan::Train(t) => {
            let interval = t.car_interval().unwrap();
            assert!(interval >= DurationNs::from_us(500), "{interval}");
        }
        other => panic!("not a train: {other:?}"),
    }
}

#[test]
fn a_known_capacity_sets_a_at_high_load_only() {
    use crate::methods::registry;
    use crate::methods::testpaths::{poisson, rel_err, run, settings};
    let mut errs = Vec::new();
    for seed in 1..=5 {
        let mut m = registry::build("fac2", &settings(Some(300.0))).unwrap();
        let (e, truth) = run(m.as_mut(), poisson(300.0, 0.9, seed));
        let e = e.expect("an estimate");
        assert!(
            e.notes.iter().any(|n| n.contains("as the runner knows it")),
            "{:?}",
            e.notes
        );
        assert_eq!(e.capacity, Some(BitRate::from_mbps(300.0)));
        errs.push(rel_err(&e, truth));
    }
    errs.sort_by(f64::total_cmp);
    assert!(
        errs[2] < 0.1,
        "median |error| at 90 % with C known: {errs:?}"
    );
    // At 50 % load the fit's own C stands.
    let mut m = registry::build("fac2", &settings(Some(300.0))).unwrap();
    let (e, _) = run(m.as_mut(), poisson(300.0, 0.5, 1));
    let e = e.unwrap();
    assert!(!e.notes.iter().any(|n| n.contains("as the runner knows it")));
}
