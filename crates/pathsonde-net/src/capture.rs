//! Capturing one train for a latency trace: the socket side.  Sends a
//! constant-rate train to a server and reads, right after it, the offset
//! between this host's CLOCK_REALTIME (the kernel's receive stamps) and
//! CLOCK_MONOTONIC (the send stamps), which turning the observation into a
//! trace needs (`pathsonde_trace::capture`, which holds no sockets).

use crate::client::{Client, ClientConfig};
use crate::clock;
use crate::error::Result;
use pathsonde_core::{Observation, TrainSpec};
use std::net::SocketAddr;
use std::time::Duration;

/// One train as the server saw it, and the clocks' offset to read it by.
#[derive(Debug, Clone)]
pub struct CapturedTrain {
    pub observation: Observation,
    /// This host's CLOCK_REALTIME − CLOCK_MONOTONIC in ns, read right after
    /// the train (see [`clock::realtime_minus_monotonic`]).
    pub realtime_minus_monotonic_ns: i64,
}

/// Sends the train `spec` to the server at `addr` and collects what arrived.
/// The reply timeout grows with the train's length (5 s + twice its span),
/// so a long capture is not cut short.
pub fn send_train(addr: SocketAddr, spec: &TrainSpec) -> Result<CapturedTrain> {
    let mut cfg = ClientConfig::new(addr);
    let secs = spec.duration().map_or(1.0, |d| d.secs_f64());
    cfg.reply_timeout = Duration::from_secs_f64(5.0 + 2.0 * secs);
    let mut client = Client::connect(cfg)?;
    let observation = client.run_train(spec, Duration::from_millis(200))?;
    let realtime_minus_monotonic_ns = clock::realtime_minus_monotonic();
    client.close();
    Ok(CapturedTrain {
        observation,
        realtime_minus_monotonic_ns,
    })
}
