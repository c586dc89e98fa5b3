//! One train sent across a lab path built for it, for `trace capture`: the
//! lab (one tight link, no cross traffic), the live server at the receiver,
//! and the train sent from the sender's namespace.
//!
//! Here rather than in the binary because it is lab work (the lock, the
//! namespaces, tearing the lab down whatever happens); reading the train
//! as a trace is `pathsonde_trace::capture`'s, which the lab does not need.

use crate::live::LivePath;
use crate::topology::{Lab, LabSpec, Role};
use crate::{netns, LabError, Result};
use pathsonde_core::{BitRate, Bytes, TrainSpec};
use pathsonde_net::capture::CapturedTrain;

/// The lab a capture builds: one tight link of `capacity` with a `queue`
/// of that many bytes, MTU 1500, no cross traffic, no delay line; named
/// `name` or `t8<pid>`.
pub fn capture_spec(
    name: Option<String>,
    capacity: BitRate,
    queue: Bytes,
    threaded_napi: bool,
) -> LabSpec {
    LabSpec {
        name: name.unwrap_or_else(|| format!("t8{}", std::process::id())),
        capacity,
        queue,
        mtu: 1500,
        cross_sources: 0,
        narrow: None,
        delay: None,
        threaded_napi,
    }
}

/// Builds the lab `spec` (holding the lab lock; `waiting` runs before
/// taking it, `building` once it is held), sends `train` from the sender to
/// the live server at the receiver, and tears the lab down.  Returns the
/// train as captured and the live path's notes.
pub fn send_train_across(
    spec: LabSpec,
    train: &TrainSpec,
    waiting: impl FnOnce(),
    building: impl FnOnce(),
) -> Result<(CapturedTrain, Vec<String>)> {
    netns::check_permitted()?;
    spec.validate()?;
    waiting();
    let _lock = crate::exclusive::lab_lock()?;
    building();
    let rate = train.rate;
    let lab = Lab::build(spec)?;
    let live = match LivePath::start(&lab, &[], 1, rate) {
        Ok(l) => l,
        Err(e) => {
            drop(lab);
            return Err(e);
        }
    };
    let train = *train;
    let snd = lab.ns(Role::Sender);
    // A socket error inside the namespace reaches the user as the lab's
    // (it cannot cross the thread as a `NetError` with its exit code).
    let got = netns::run_in(&snd, move || {
        pathsonde_net::capture::send_train(LivePath::server_addr(), &train)
            .map_err(|e| LabError::Capability(e.to_string()))
    });
    let (_, notes) = live.stop();
    drop(lab);
    Ok((got?, notes))
}
