//! The one loop that carries a method's plans over a path.
//!
//! Every runner of pathsonde — the real client, the simulator, the synthetic
//! path of the method tests — calls [`run`]: ask the method for a plan,
//! check it, let the [`ProbePath`] carry it, hand the observation back, and
//! stop at `Done`, at a limit, or when the path is exhausted.  The limits,
//! the run's own count of what it sent ([`ProbeCost`]) and the event hook live here once, so
//! a method behaves the same on every path.

use crate::estimate::{Estimate, ProbeCost};
use crate::method::Method;
use crate::observation::Observation;
use crate::path::ProbePath;
use crate::units::Bytes;
use crate::verdict::evidence::{self, RunEvidence};
use crate::verdict::HostRole;

/// When a run stops before the method says `Done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most plans carried.
    pub max_plans: u32,
    /// Give up after this many plans in a row of which no packet arrived;
    /// `None` never gives up on loss.
    pub max_lost_in_a_row: Option<u32>,
}

impl Limits {
    /// At most `max_plans` plans, and no limit on loss.
    pub fn plans(max_plans: u32) -> Self {
        Limits {
            max_plans,
            max_lost_in_a_row: None,
        }
    }
}

/// Adds one carried observation to what the run cost the path.  The runner
/// counts it itself (in the estimate's own [`ProbeCost`]), so a method cannot
/// under-report what was sent; records a path duplicated count too.
fn spend(cost: &mut ProbeCost, obs: &Observation) {
    cost.trains += 1;
    cost.packets = cost.packets.saturating_add(obs.sent_packets());
    cost.bytes = Bytes(cost.bytes.get().saturating_add(obs.sent_bytes().get()));
}

/// Why a run ended without the method's answer.
#[derive(Debug, thiserror::Error)]
pub enum RunError<E> {
    /// The path failed to carry a plan.
    #[error(transparent)]
    Path(E),
    /// The method asked for a plan no path can carry.
    #[error("probe plan unusable: {0}")]
    Unusable(#[source] crate::plan::ScheduleError),
    /// Too many plans in a row lost every packet.
    #[error("{trains} probe trains in a row lost every packet")]
    ProbesLost { trains: u32 },
}

/// A finished run: the method's answer, or why there is none, and its cost.
#[derive(Debug, Clone)]
pub struct Run {
    /// The method's name.
    pub method: &'static str,
    /// The estimate, if the method gave one that is an answer (A > 0).
    pub estimate: Option<Estimate>,
    /// Why the method's estimate is no measurement (A ≤ 0), when it gave one.
    pub refused: Option<String>,
    /// The method's notes, when it gave no estimate at all: its reasons.
    pub notes: Vec<String>,
    /// Trains, packets and bytes carried, counted by the runner.
    pub cost: ProbeCost,
}

impl Run {
    /// The estimate, or one line saying why there is none
    /// (`"fac2: no usable train"`).
    pub fn answer(self) -> Result<Estimate, String> {
        match (self.estimate, self.refused) {
            (Some(e), _) => Ok(e),
            (None, Some(why)) => Err(why),
            (None, None) if self.notes.is_empty() => {
                Err(format!("{}: no usable train", self.method))
            }
            (None, None) => Err(format!("{}: {}", self.method, self.notes.join("; "))),
        }
    }
}

/// Runs `method` over `path` until it says `Done`, a limit is reached or the
/// path is exhausted; `on_observation` hears every observation after the
/// method has (progress lines, JSON events, the archive's raw data).
pub fn run<P: ProbePath + ?Sized>(
    method: &mut dyn Method,
    path: &mut P,
    limits: Limits,
    on_observation: &mut dyn FnMut(&Observation),
) -> Result<Run, RunError<P::Error>> {
    let mut cost = ProbeCost::default();
    let mut lost_in_a_row = 0u32;
    let mut evidence = RunEvidence::default();
    for index in 0..limits.max_plans {
        let plan = method.next_plan();
        let Some(sched) = plan.schedule() else {
            break;
        };
        sched.check().map_err(RunError::Unusable)?;
        let obs = path.carry(&plan, index).map_err(RunError::Path)?;
        spend(&mut cost, &obs);
        lost_in_a_row = if obs.received_packets() == 0 {
            lost_in_a_row + 1
        } else {
            0
        };
        method.observe(&obs);
        evidence.observe(&obs);
        on_observation(&obs);
        if limits.max_lost_in_a_row.is_some_and(|m| lost_in_a_row >= m) {
            return Err(RunError::ProbesLost {
                trains: lost_in_a_row,
            });
        }
        if path.exhausted() {
            break;
        }
    }
    // An "estimate" of A ≤ 0 is no estimate, on every path; and every
    // answer is judged by what its own trains said of the hosts, so no
    // method can report a number a host made as the path's.
    let judged = method.estimate().map(|e| {
        e.into_answer().and_then(|e| {
            let verdict = evidence::assess(&e, &evidence, HostRole::Client);
            evidence::apply(e, verdict)
        })
    });
    let (estimate, refused, notes) = match judged {
        Some(Ok(e)) => (Some(e), None, Vec::new()),
        Some(Err(why)) => (None, Some(why), Vec::new()),
        None => (None, None, method.notes()),
    };
    Ok(Run {
        method: method.name(),
        estimate,
        refused,
        notes,
        cost,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::{FaultInjector, Faults};
    use crate::plan::{ProbePlan, TrainSpec};
    use crate::synthetic::{FluidPath, FluidPathConfig};
    use crate::units::{BitRate, DurationNs};
    use std::convert::Infallible;

    /// A method that sends `trains` trains of 50 packets and then answers
    /// `answer` Mb/s (or nothing).
    struct Script {
        trains: u32,
        seen: u32,
        answer: Option<f64>,
    }

    impl Script {
        fn new(trains: u32, answer: Option<f64>) -> Self {
            Script {
                trains,
                seen: 0,
                answer,
            }
        }
    }

    impl Method for Script {
        fn name(&self) -> &'static str {
            "script"
        }
        fn next_plan(&mut self) -> ProbePlan {
            if self.seen >= self.trains {
                return ProbePlan::Done;
            }
            ProbePlan::Train(TrainSpec {
                packet_size: Bytes(1000),
                packets_per_car: 1,
                cars: 50,
                rate: BitRate::from_mbps(100.0),
                idle_before: DurationNs::ZERO,
            })
        }
        fn observe(&mut self, _obs: &Observation) {
            self.seen += 1;
        }
        fn estimate(&self) -> Option<Estimate> {
            let a = self.answer?;
            Some(Estimate::test_band(
                crate::method_name::MethodName::Fac2,
                a,
                a,
                Some(a),
            ))
        }
        fn notes(&self) -> Vec<String> {
            vec!["nothing to say".into()]
        }
    }

    fn path() -> FluidPath {
        FluidPath::new(FluidPathConfig::new(
            BitRate::from_mbps(300.0),
            BitRate::from_mbps(100.0),
        ))
    }

    #[test]
    fn runs_to_done_counting_what_was_sent_and_telling_the_hook() {
        let mut heard = 0;
        let run = run(
            &mut Script::new(3, Some(200.0)),
            &mut path(),
            Limits::plans(10),
            &mut |_| heard += 1,
        )
        .unwrap();
        assert_eq!(heard, 3);
        assert_eq!(run.cost.trains, 3);
        assert_eq!(run.cost.packets, 150);
        assert_eq!(run.cost.bytes, Bytes(150_000));
        assert_eq!(run.answer().unwrap().available, BitRate::from_mbps(200.0));
    }

    #[test]
    fn stops_at_the_plan_limit() {
        let run = run(
            &mut Script::new(100, Some(1.0)),
            &mut path(),
            Limits::plans(4),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(run.cost.trains, 4);
    }

    #[test]
    fn gives_up_after_trains_that_lost_everything() {
        let mut lossy = FaultInjector::new(
            path(),
            Faults {
                loss: 1.0,
                duplicate: 0.0,
                shuffle: false,
                seed: 1,
            },
        );
        let limits = Limits {
            max_plans: 10,
            max_lost_in_a_row: Some(3),
        };
        let err = run(
            &mut Script::new(10, Some(1.0)),
            &mut lossy,
            limits,
            &mut |_| {},
        )
        .unwrap_err();
        assert!(matches!(err, RunError::ProbesLost { trains: 3 }), "{err}");
    }

    #[test]
    fn a_plan_no_path_can_carry_is_refused_before_it_is_sent() {
        struct Empty;
        impl Method for Empty {
            fn name(&self) -> &'static str {
                "empty"
            }
            fn next_plan(&mut self) -> ProbePlan {
                ProbePlan::Schedule(crate::plan::ScheduleSpec {
                    packet_size: Bytes(1000),
                    cars: vec![],
                    idle_before: DurationNs::ZERO,
                })
            }
            fn observe(&mut self, _: &Observation) {}
            fn estimate(&self) -> Option<Estimate> {
                None
            }
        }
        let mut p = path();
        let err = run(&mut Empty, &mut p, Limits::plans(5), &mut |_| {}).unwrap_err();
        assert!(
            matches!(&err, RunError::Unusable(crate::plan::ScheduleError::NoCars)),
            "{err}"
        );
    }

    #[test]
    fn an_exhausted_path_ends_the_run_with_the_answer_so_far() {
        struct OneShot(FluidPath, bool);
        impl ProbePath for OneShot {
            type Error = Infallible;
            fn carry(&mut self, plan: &ProbePlan, index: u32) -> Result<Observation, Infallible> {
                self.1 = true;
                self.0.carry(plan, index)
            }
            fn exhausted(&self) -> bool {
                self.1
            }
        }
        let run = run(
            &mut Script::new(5, Some(50.0)),
            &mut OneShot(path(), false),
            Limits::plans(10),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(run.cost.trains, 1);
        assert!(run.estimate.is_some());
    }

    #[test]
    fn no_estimate_or_a_zero_one_is_no_answer_and_says_why() {
        let none = run(
            &mut Script::new(1, None),
            &mut path(),
            Limits::plans(5),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(none.clone().answer().unwrap_err(), "script: nothing to say");
        let zero = run(
            &mut Script::new(1, Some(0.0)),
            &mut path(),
            Limits::plans(5),
            &mut |_| {},
        )
        .unwrap();
        assert!(zero.estimate.is_none());
        let why = zero.answer().unwrap_err();
        assert!(why.contains("no measurement"), "{why}");
    }
}
