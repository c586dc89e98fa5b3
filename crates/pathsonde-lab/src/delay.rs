//! The lab's delay element: a user-space TUN relay that holds every packet for
//! a set one-way delay.
//!
//! The kernel here has no netem, and a tc/BPF program that sets a future
//! `skb->tstamp` delays nothing (only fq or etf honour it, neither is built),
//! so delay is added in user space.  In the router namespace a TUN device
//! (`dly0`) is created and a policy rule sends everything that arrives on one
//! input interface into it:
//!
//! ```text
//!   ip rule  add iif <from_iface> lookup <table>
//!   ip route add default dev dly0 table <table>
//! ```
//!
//! The relay reads each packet, stamps it with CLOCK_MONOTONIC, holds it in a
//! bounded FIFO for the delay, and writes it back into the TUN; the written
//! packet enters the router again with `iif dly0`, misses the rule, and is
//! forwarded through the main table — e.g. to the bottleneck qdisc.
//!
//! Two threads do the work: a reader (stamps on arrival) and a releaser (sleeps
//! on an absolute CLOCK_MONOTONIC deadline until the oldest packet is due,
//! then writes every due packet).  Both ask for SCHED_FIFO, because at normal
//! priority wake-up latency added up to 5 ms and bunched packets (LAB-NOTES,
//! "Delay"); a refusal is recorded in [`Scheduling`], never hidden.
//!
//! The relay can carry only so much: the [`Sustained`] constants hold what it
//! carried loss-free on this class of machine (measured by
//! `examples/delay_bench.rs`, table in `docs/lab-delay.md`), and
//! [`DelayLine::start`] refuses a request for more with
//! [`LabError::Capability`] instead of silently dropping or bunching packets.

pub mod bench;
mod capacity;
mod config;
mod histogram;
mod relay;
mod setup;
mod stats;

pub use capacity::Sustained;
pub use config::{
    DelayConfig, DEFAULT_FIXED_CORRECTION, DEFAULT_RT_PRIORITY, DEFAULT_TABLE, DEFAULT_TUN,
    MAX_DELAY, MAX_RELEASE_LEAD, MIN_DELAY,
};
pub use histogram::HoldError;
pub use stats::{DelayStats, Scheduling};

use crate::error::{LabError, Result};
use crate::netns;
use pathsonde_core::{Bytes, DurationNs};
use relay::Shared;
use setup::open_tun;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

/// A running delay line in a namespace.  Dropping it stops it.
pub struct DelayLine {
    ns: String,
    cfg: DelayConfig,
    shared: Arc<Shared>,
    wake: Option<OwnedFd>,
    threads: Vec<JoinHandle<()>>,
    rule_installed: bool,
    stopped: bool,
    /// The TUN's kernel drop count read just before it was closed.
    final_tun_dropped: Option<u64>,
    /// Sysctls changed in the namespace, for the record.
    notes: Vec<String>,
}

impl std::fmt::Debug for DelayLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelayLine")
            .field("ns", &self.ns)
            .field("cfg", &self.cfg)
            .field("stopped", &self.stopped)
            .finish()
    }
}

impl DelayLine {
    /// Creates the TUN, the rule and the route in `ns`, sets the sysctls the
    /// write-back path needs, and starts the relay.
    ///
    /// Refuses (before touching the namespace) a delay outside 1–100 ms and a
    /// rate above [`Sustained`].  On any failure after that, whatever was
    /// set up is removed again.
    pub fn start(ns: &str, cfg: DelayConfig) -> Result<DelayLine> {
        cfg.validate()?;
        Self::start_inner(ns, cfg)
    }

    /// [`Self::start`] without the capacity guard: only for measuring the
    /// relay beyond what it sustains (`examples/delay_bench.rs`).  The lab
    /// must not use it — past the guard the line drops or bunches packets.
    #[doc(hidden)]
    pub fn start_unguarded(ns: &str, cfg: DelayConfig) -> Result<DelayLine> {
        cfg.validate_shape()?;
        Self::start_inner(ns, cfg)
    }

    fn start_inner(ns: &str, cfg: DelayConfig) -> Result<DelayLine> {
        if !netns::exists(ns) {
            return Err(LabError::NoSuchLab(ns.to_string()));
        }
        let name = cfg.tun_name.clone();
        let tun = netns::run_in(ns, move || open_tun(&name))?;

        let shared = Arc::new(Shared::new(
            cfg.queue_limit_bytes(),
            cfg.target_hold().ns(),
            cfg.adaptive_lead,
        ));
        let mut line = DelayLine {
            ns: ns.to_string(),
            cfg,
            shared,
            wake: None,
            threads: Vec::new(),
            rule_installed: false,
            stopped: false,
            final_tun_dropped: None,
            notes: Vec::new(),
        };
        // From here on, an error drops `line`, which undoes the setup.
        line.configure_namespace()?;
        line.spawn(tun)?;
        Ok(line)
    }

    pub fn namespace(&self) -> &str {
        &self.ns
    }

    pub fn config(&self) -> &DelayConfig {
        &self.cfg
    }

    /// Sysctls `start` changed in the namespace beyond the TUN's own.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// A snapshot of the line's counters.
    pub fn stats(&self) -> DelayStats {
        let sh = &self.shared;
        let queued = sh.queued();
        DelayStats {
            packets: sh.packets.load(Ordering::Relaxed),
            bytes: Bytes::new(sh.bytes.load(Ordering::Relaxed)),
            dropped_queue_full: sh.dropped.load(Ordering::Relaxed),
            write_errors: sh.write_errors.load(Ordering::Relaxed),
            queued,
            peak_queue_bytes: Bytes::new(sh.peak_bytes.load(Ordering::Relaxed)),
            queue_limit: Bytes::new(sh.limit_bytes as u64),
            hold_error: sh.hist.summary(),
            reader: sh
                .reader_sched
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            releaser: sh
                .releaser_sched
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            release_lead: DurationNs::from_ns(sh.lead_ns.load(Ordering::Relaxed)),
            tun_dropped: self.final_tun_dropped,
            max_write: DurationNs::from_ns(sh.max_write_ns.load(Ordering::Relaxed)),
            cpu: DurationNs::from_ns(
                sh.reader_cpu_ns.load(Ordering::Relaxed)
                    + sh.releaser_cpu_ns.load(Ordering::Relaxed),
            ),
            failure: sh.failure.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }

    /// [`Self::stats`] plus the TUN's kernel drop counter, read with `ip -s`
    /// (a fork, a few ms: not for a 100-ms sampler).
    pub fn stats_with_kernel(&self) -> Result<DelayStats> {
        let mut s = self.stats();
        if !self.stopped {
            s.tun_dropped = Some(self.read_tun_dropped()?);
        }
        Ok(s)
    }

    /// Stops the relay (packets still held are discarded), removes the rule,
    /// and closes the TUN (which deletes it and its route).  Idempotent; a
    /// namespace that is already gone is not an error.  Returns the final
    /// counters.
    pub fn stop(&mut self) -> Result<DelayStats> {
        if !self.stopped {
            // Read before the threads exit: the TUN goes when its fd closes.
            if netns::exists(&self.ns) {
                self.final_tun_dropped = self.read_tun_dropped().ok();
            }
            self.stopped = true;
            self.stop_threads();
        }
        self.remove_rule()?;
        Ok(self.stats())
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
