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

use crate::error::{LabError, Result};
use crate::netns;
use pathsonde_core::{BitRate, Bytes, DurationNs};
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// The shortest delay the line adds.  Below about 1 ms the wake-up and
/// forwarding cost (tens of µs) is no longer small beside the delay.
pub const MIN_DELAY: DurationNs = DurationNs::from_ms(1);
/// The longest delay the line adds; the queue holds rate × delay bytes, so
/// this also bounds its memory (see [`DelayConfig::queue_limit_bytes`]).
pub const MAX_DELAY: DurationNs = DurationNs::from_ms(100);

/// What the relay carries without loss on this class of machine (2 vCPU,
/// kernel 6.18, Firecracker guest), in 1500-byte packets.
///
/// Measured with
/// `cargo run --release -p pathsonde-lab --example delay_bench` (table in
/// `docs/lab-delay.md`).  The cost is per packet, so the guard compares
/// packet rates: smaller packets at the same bit rate are refused sooner.
pub struct Sustained;

impl Sustained {
    /// Bit rate of 1500-byte IP packets carried with no loss at every delay
    /// from 1 to 100 ms, with the sender and the relay sharing the 2 cores.
    pub const MBPS_1500: f64 = 500.0;
    /// The same figure as packets per second: the quantity the guard checks.
    pub const PACKETS_PER_SEC: f64 = Self::MBPS_1500 * 1e6 / (1500.0 * 8.0);
}

/// Subtracted from the hold for the part of the added delay that the relay's
/// own clock cannot see: the time from the packet entering the TUN to the
/// reader's stamp (its wake-up), plus the write-back's forwarding.  Measured
/// as median(end-to-end delay − D) − median(relay's own hold error) with
/// this at zero (`delay_bench --fixed-us 0`); see `docs/lab-delay.md`.
///
/// The releaser's own wake-up lateness (20–35 µs here, even under
/// SCHED_FIFO) is not in this constant: the releaser measures it on every
/// packet and wakes that much earlier (see [`DelayStats::release_lead`]).
pub const DEFAULT_FIXED_CORRECTION: DurationNs = DurationNs::from_us(6);
/// The releaser's lead starts here (its typical wake-up lateness on this
/// machine) and follows the measured lateness; it never exceeds
/// [`MAX_RELEASE_LEAD`].
const INITIAL_RELEASE_LEAD_NS: i64 = 25_000;
/// Bound on the releaser's lead, so a stall (a late wake of milliseconds)
/// cannot drag every later packet early.
pub const MAX_RELEASE_LEAD: DurationNs = DurationNs::from_us(100);

/// Default TUN name, routing table and SCHED_FIFO priority.
pub const DEFAULT_TUN: &str = "dly0";
pub const DEFAULT_TABLE: u32 = 100;
pub const DEFAULT_RT_PRIORITY: i32 = 50;

/// How the TUN's kernel-side queue (`txqueuelen`) is sized: it only has to
/// absorb the reader's scheduling hiccups, the hold itself is in user space.
const TUN_TXQUEUELEN: u32 = 10_000;
/// Per-packet bookkeeping charged against the queue's byte budget, so that a
/// flood of tiny packets is bounded too.
const ENTRY_OVERHEAD: usize = 64;
/// Resolution and range of the hold-error histogram (1 µs bins up to 20 ms;
/// later releases land in the last bin and in `max`).
const HIST_BIN_NS: i64 = 1_000;
const HIST_MIN_NS: i64 = -1_000_000;
const HIST_BINS: usize = 21_001;

/// What the lab asks of one delay line.
#[derive(Debug, Clone, PartialEq)]
pub struct DelayConfig {
    /// Packets arriving on this interface (in the line's namespace) are
    /// delayed, e.g. `"to-snd"`.  Packets addressed to the router itself are
    /// not (the `local` table is consulted before the rule).
    pub from_iface: String,
    /// One-way delay to add, 1–100 ms.
    pub delay: DurationNs,
    /// The most the lab will push through the line; checked against
    /// [`Sustained`] and used to size the queue.
    pub rate: BitRate,
    /// Typical IP packet size of that traffic (1500 for full-size frames);
    /// the relay's cost is per packet.
    pub packet_size: Bytes,
    /// Name of the TUN device to create; unique within the namespace.
    pub tun_name: String,
    /// Policy-routing table for the rule; unique within the namespace.
    pub table: u32,
    /// MTU of the TUN: must be at least the links' MTU, or large packets are
    /// fragmented or refused with ICMP "fragmentation needed".
    pub mtu: u32,
    /// SCHED_FIFO priority for the relay threads (1–99).
    pub rt_priority: i32,
    /// Subtracted from the hold so that the end-to-end delay is centred on
    /// `delay` (see [`DEFAULT_FIXED_CORRECTION`]).
    pub fixed_correction: DurationNs,
    /// Wake the releaser early by its measured wake-up lateness (on by
    /// default; off only to measure the raw lateness).
    pub adaptive_lead: bool,
}

impl DelayConfig {
    /// A line delaying packets that arrive on `from_iface` by `delay`, for
    /// traffic of up to `rate` in 1500-byte packets; other fields default.
    pub fn new(from_iface: &str, delay: DurationNs, rate: BitRate) -> Self {
        DelayConfig {
            from_iface: from_iface.to_string(),
            delay,
            rate,
            packet_size: Bytes::new(1500),
            tun_name: DEFAULT_TUN.to_string(),
            table: DEFAULT_TABLE,
            mtu: 1500,
            rt_priority: DEFAULT_RT_PRIORITY,
            fixed_correction: DEFAULT_FIXED_CORRECTION,
            adaptive_lead: true,
        }
    }

    /// Checks the request against what the relay can do: delay in range,
    /// rate within the measured sustained packet rate, names valid.
    pub fn validate(&self) -> Result<()> {
        self.validate_shape()?;
        self.check_capacity()
    }

    /// Refuses a packet rate above [`Sustained::PACKETS_PER_SEC`].
    pub fn check_capacity(&self) -> Result<()> {
        let pps = self.rate.bps() / (self.packet_size.get() as f64 * 8.0);
        if pps > Sustained::PACKETS_PER_SEC * 1.0001 {
            let equiv = Sustained::PACKETS_PER_SEC * self.packet_size.get() as f64 * 8.0 / 1e6;
            return Err(LabError::Capability(format!(
                "delay line sustains about {:.0} Mb/s of 1500-byte packets loss-free here \
                 ({:.0} packets/s{}); asked for {:.0} Mb/s of {}-byte packets ({:.0} packets/s)",
                Sustained::MBPS_1500,
                Sustained::PACKETS_PER_SEC,
                if self.packet_size.get() == 1500 {
                    String::new()
                } else {
                    format!(
                        ", i.e. {equiv:.0} Mb/s of {}-byte packets",
                        self.packet_size.get()
                    )
                },
                self.rate.mbps(),
                self.packet_size.get(),
                pps
            )));
        }
        Ok(())
    }

    /// Everything [`Self::validate`] checks except the capacity guard.
    fn validate_shape(&self) -> Result<()> {
        if self.delay < MIN_DELAY || self.delay > MAX_DELAY {
            return Err(LabError::Spec(format!(
                "delay line: a one-way delay of {} is outside {}–{} ms (omit the delay line for no delay)",
                self.delay,
                MIN_DELAY.ns() / 1_000_000,
                MAX_DELAY.ns() / 1_000_000
            )));
        }
        if self.rate.bps().is_nan() || self.rate.bps() <= 0.0 || !self.rate.bps().is_finite() {
            return Err(LabError::Spec(format!(
                "delay line: the rate to carry must be positive, not {}",
                self.rate
            )));
        }
        if self.packet_size.get() < 28 || self.packet_size.get() > u64::from(self.mtu) {
            return Err(LabError::Spec(format!(
                "delay line: packet size {} must be 28 bytes to the MTU ({})",
                self.packet_size, self.mtu
            )));
        }
        if self.tun_name.is_empty()
            || self.tun_name.len() >= libc::IFNAMSIZ
            || !self
                .tun_name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return Err(LabError::Spec(format!(
                "delay line: bad TUN name {:?} (1–15 characters, letters, digits, - _ .)",
                self.tun_name
            )));
        }
        if self.from_iface.is_empty() || self.from_iface == self.tun_name {
            return Err(LabError::Spec(format!(
                "delay line: bad input interface {:?}",
                self.from_iface
            )));
        }
        if self.table == 0 || self.table >= 252 && self.table <= 255 {
            return Err(LabError::Spec(format!(
                "delay line: table {} is reserved",
                self.table
            )));
        }
        if !(1..=99).contains(&self.rt_priority) {
            return Err(LabError::Spec(format!(
                "delay line: SCHED_FIFO priority {} outside 1–99",
                self.rt_priority
            )));
        }
        if self.fixed_correction.ns() < 0 || self.fixed_correction.ns() * 2 >= self.delay.ns() {
            return Err(LabError::Spec(format!(
                "delay line: fixed correction {} must be ≥ 0 and below half the delay",
                self.fixed_correction
            )));
        }
        Ok(())
    }

    /// The hold the relay aims for on its own clock: the delay less the part
    /// it cannot see.
    pub fn target_hold(&self) -> DurationNs {
        self.delay - self.fixed_correction
    }

    /// Byte budget of the queue: rate × (delay × 1.5 + 250 ms), plus room for
    /// 256 full packets.  The 250 ms absorbs the catch-up burst of a paced
    /// sender after the whole VM stalls (100–140 ms stalls were seen here,
    /// see `docs/lab-delay.md`); a sustained overload is dropped and
    /// counted, never stored without bound (800 Mb/s × 100 ms: 42 MB).
    pub fn queue_limit_bytes(&self) -> usize {
        let span = self.delay.secs_f64() * 1.5 + 0.250;
        let per_pkt = self.packet_size.get() as f64 + ENTRY_OVERHEAD as f64;
        let pkts = self.rate.bps() / (self.packet_size.get() as f64 * 8.0) * span;
        (pkts * per_pkt) as usize + 256 * (self.mtu as usize + ENTRY_OVERHEAD)
    }
}

/// Which scheduling class a relay thread got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheduling {
    /// Not known yet (the thread has not started).
    Pending,
    /// SCHED_FIFO at this priority, as asked.
    RealTime { priority: i32 },
    /// The kernel refused SCHED_FIFO; the thread runs at normal priority and
    /// delays can be late by milliseconds under load.
    Normal { reason: String },
}

/// Distribution of (actual hold − target hold), read from the relay's own
/// clock between its arrival stamp and the moment it writes the packet back.
/// Negative means released early (the adaptive lead overshot).  It leaves out
/// what the relay cannot see (its reader's wake-up, the write-back's
/// forwarding), which [`DEFAULT_FIXED_CORRECTION`] accounts for on average.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HoldError {
    pub samples: u64,
    pub median: DurationNs,
    pub p99: DurationNs,
    pub max: DurationNs,
}

/// Counters of one delay line.
#[derive(Debug, Clone, PartialEq)]
pub struct DelayStats {
    /// Packets and bytes written back into the TUN after their hold.
    pub packets: u64,
    pub bytes: Bytes,
    /// Packets dropped because the queue's byte budget was full.
    pub dropped_queue_full: u64,
    /// Packets the kernel refused on write-back (counted, then discarded).
    pub write_errors: u64,
    /// Packets in the queue now.
    pub queued: u64,
    /// Most bytes the queue held at once, and its budget.
    pub peak_queue_bytes: Bytes,
    pub queue_limit: Bytes,
    /// How late the releaser was, if any packet has been released.
    pub hold_error: Option<HoldError>,
    pub reader: Scheduling,
    pub releaser: Scheduling,
    /// The longest single write-back into the TUN: the kernel forwards the
    /// packet inside the write, so a long one means the forwarding path (not
    /// the relay's scheduling) held the releaser up.
    pub max_write: DurationNs,
    /// How early the releaser currently wakes to make up for its measured
    /// wake-up lateness (0 when `adaptive_lead` is off).
    pub release_lead: DurationNs,
    /// Packets the kernel dropped because the TUN's queue to the reader was
    /// full (the TUN's tx_dropped).  Filled by [`DelayLine::stop`] and
    /// [`DelayLine::stats_with_kernel`]; `None` from the cheap
    /// [`DelayLine::stats`].
    pub tun_dropped: Option<u64>,
    /// CPU time used by the two relay threads so far (sampled every 1024
    /// packets and whenever a thread goes idle).
    pub cpu: DurationNs,
    /// The first error that stopped a relay thread, if any.
    pub failure: Option<String>,
}

impl DelayStats {
    /// CPU time per relayed packet, if any were relayed.
    pub fn cpu_per_packet(&self) -> Option<DurationNs> {
        (self.packets > 0).then(|| DurationNs::from_ns(self.cpu.ns() / self.packets as i64))
    }

    /// True when the line has been faithful so far: nothing dropped, nothing
    /// refused, both threads real-time, no thread failure.
    pub fn is_clean(&self) -> bool {
        self.dropped_queue_full == 0
            && self.write_errors == 0
            && self.tun_dropped.unwrap_or(0) == 0
            && self.failure.is_none()
            && matches!(self.reader, Scheduling::RealTime { .. })
            && matches!(self.releaser, Scheduling::RealTime { .. })
    }
}

struct Packet {
    arrived_ns: i64,
    data: Box<[u8]>,
}

struct Queue {
    packets: VecDeque<Packet>,
    bytes: usize,
    /// The releaser sleeps on the condvar only when the queue is empty; the
    /// reader wakes it only then (FIFO with one delay: a later arrival is never
    /// due before the head).
    releaser_idle: bool,
    stop: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    limit_bytes: usize,
    hold_ns: i64,
    adaptive: bool,
    lead_ns: AtomicI64,
    packets: AtomicU64,
    bytes: AtomicU64,
    dropped: AtomicU64,
    write_errors: AtomicU64,
    peak_bytes: AtomicU64,
    reader_cpu_ns: AtomicI64,
    releaser_cpu_ns: AtomicI64,
    hist: Box<[AtomicU64]>,
    max_late_ns: AtomicI64,
    max_write_ns: AtomicI64,
    reader_sched: Mutex<Scheduling>,
    releaser_sched: Mutex<Scheduling>,
    failure: Mutex<Option<String>>,
    stopping: AtomicBool,
}

impl Shared {
    fn new(limit_bytes: usize, hold_ns: i64, adaptive: bool) -> Self {
        Shared {
            queue: Mutex::new(Queue {
                packets: VecDeque::new(),
                bytes: 0,
                releaser_idle: false,
                stop: false,
            }),
            ready: Condvar::new(),
            limit_bytes,
            hold_ns,
            adaptive,
            lead_ns: AtomicI64::new(if adaptive { INITIAL_RELEASE_LEAD_NS } else { 0 }),
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            peak_bytes: AtomicU64::new(0),
            reader_cpu_ns: AtomicI64::new(0),
            releaser_cpu_ns: AtomicI64::new(0),
            hist: (0..HIST_BINS).map(|_| AtomicU64::new(0)).collect(),
            max_late_ns: AtomicI64::new(i64::MIN),
            max_write_ns: AtomicI64::new(0),
            reader_sched: Mutex::new(Scheduling::Pending),
            releaser_sched: Mutex::new(Scheduling::Pending),
            failure: Mutex::new(None),
            stopping: AtomicBool::new(false),
        }
    }

    fn fail(&self, msg: String) {
        let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            *f = Some(msg);
        }
    }

    fn record_late(&self, late_ns: i64) {
        let bin = ((late_ns - HIST_MIN_NS).max(0) / HIST_BIN_NS) as usize;
        self.hist[bin.min(HIST_BINS - 1)].fetch_add(1, Ordering::Relaxed);
        self.max_late_ns.fetch_max(late_ns, Ordering::Relaxed);
    }

    fn hold_error(&self) -> Option<HoldError> {
        let counts: Vec<u64> = self
            .hist
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let at = |q: f64| {
            let rank = ((total as f64 * q).ceil() as u64).clamp(1, total);
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    // The bin's midpoint: ±0.5 µs.
                    return DurationNs::from_ns(
                        HIST_MIN_NS + i as i64 * HIST_BIN_NS + HIST_BIN_NS / 2,
                    );
                }
            }
            DurationNs::from_ns(HIST_MIN_NS + HIST_BINS as i64 * HIST_BIN_NS)
        };
        Some(HoldError {
            samples: total,
            median: at(0.5),
            p99: at(0.99),
            max: DurationNs::from_ns(self.max_late_ns.load(Ordering::Relaxed)),
        })
    }
}

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

fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn thread_cpu_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: as in `monotonic_ns`; the calling thread's CPU clock always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Sleeps until `deadline_ns` on CLOCK_MONOTONIC (absolute, so a late wake-up
/// does not add to the next one).
fn sleep_until(deadline_ns: i64) {
    let ts = libc::timespec {
        tv_sec: deadline_ns / 1_000_000_000,
        tv_nsec: deadline_ns % 1_000_000_000,
    };
    // SAFETY: `ts` is a valid timespec; the remainder pointer may be null
    // with TIMER_ABSTIME.  EINTR just returns early; the caller re-checks.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Puts the calling thread under SCHED_FIFO at `priority`; on refusal, asks
/// for the smallest timer slack instead and says why it fell back.
fn go_realtime(priority: i32) -> Scheduling {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `pthread_self()` is this live thread; `param` outlives the call.
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if rc == 0 {
        return Scheduling::RealTime { priority };
    }
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer; no memory is passed.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    Scheduling::Normal {
        reason: format!(
            "SCHED_FIFO refused: {} (wake-ups may be milliseconds late)",
            std::io::Error::from_raw_os_error(rc)
        ),
    }
}

/// Opens `/dev/net/tun` and creates TUN device `name` (IFF_TUN | IFF_NO_PI)
/// in the calling thread's network namespace.  The device lives as long as
/// the returned file (it is not persistent), so a crashed lab leaves no TUN.
fn open_tun(name: &str) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .map_err(|e| LabError::io("opening /dev/net/tun (is the tun module available?)", e))?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which `req` is,
    // and the fd is an open /dev/net/tun.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF as _, &mut req) };
    if rc != 0 {
        return Err(LabError::io(
            format!("creating TUN device {name} (TUNSETIFF)"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(file)
}

fn set_nonblocking(fd: i32) -> std::io::Result<()> {
    // SAFETY: fcntl on an fd we own, with integer arguments only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn read_sysctl(ns: &str, key: &str) -> Option<String> {
    netns::exec_in(ns, "sysctl", &["-n", key])
        .ok()
        .map(|s| s.trim().to_string())
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

    fn configure_namespace(&mut self) -> Result<()> {
        let ns = self.ns.clone();
        let tun = self.cfg.tun_name.clone();
        let mtu = self.cfg.mtu.to_string();
        let qlen = TUN_TXQUEUELEN.to_string();
        netns::ip(&[
            "-n",
            &ns,
            "link",
            "set",
            &tun,
            "mtu",
            &mtu,
            "txqueuelen",
            &qlen,
            "up",
        ])?;
        // Forwarding: the written-back packet is *input* on the TUN, so the
        // TUN itself must forward (a device made after ip_forward=1 inherits
        // it from `default`, but say so explicitly).
        if read_sysctl(&ns, "net.ipv4.ip_forward").as_deref() != Some("1") {
            netns::sysctl(&ns, "net.ipv4.ip_forward", "1")?;
            self.notes.push("set net.ipv4.ip_forward=1".into());
        }
        netns::sysctl(&ns, &format!("net.ipv4.conf.{tun}.forwarding"), "1")?;
        // Reverse-path filter: the source of a written-back packet is reached
        // via `from_iface`, not the TUN, so strict mode (1) drops it.  The
        // effective value is max(all, dev): turn the TUN's off and, if `all`
        // is strict, relax it to loose (2), which still checks reachability.
        netns::sysctl(&ns, &format!("net.ipv4.conf.{tun}.rp_filter"), "0")?;
        if read_sysctl(&ns, "net.ipv4.conf.all.rp_filter").as_deref() == Some("1") {
            netns::sysctl(&ns, "net.ipv4.conf.all.rp_filter", "2")?;
            self.notes
                .push("relaxed net.ipv4.conf.all.rp_filter from 1 (strict) to 2 (loose)".into());
        }
        // A packet whose source is one of the router's own addresses (rare:
        // the router's own traffic does not match `iif`) would otherwise be
        // dropped as a martian on re-entry.
        netns::sysctl(&ns, &format!("net.ipv4.conf.{tun}.accept_local"), "1")?;
        let table = self.cfg.table.to_string();
        netns::ip(&[
            "-n", &ns, "route", "replace", "default", "dev", &tun, "table", &table,
        ])?;
        netns::ip(&[
            "-n",
            &ns,
            "rule",
            "add",
            "iif",
            &self.cfg.from_iface,
            "lookup",
            &table,
        ])?;
        self.rule_installed = true;
        Ok(())
    }

    fn spawn(&mut self, tun: File) -> Result<()> {
        // SAFETY: eventfd takes integers only; the result is checked below.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(LabError::io(
                "creating the delay line's wake-up eventfd",
                std::io::Error::last_os_error(),
            ));
        }
        // SAFETY: `efd` is a fresh fd that nothing else owns.
        let wake = unsafe { OwnedFd::from_raw_fd(efd) };
        set_nonblocking(tun.as_raw_fd())
            .map_err(|e| LabError::io("making the TUN non-blocking", e))?;
        let tun = Arc::new(tun);
        let wake_fd = wake.as_raw_fd();
        self.wake = Some(wake);

        let prio = self.cfg.rt_priority;
        let mtu = self.cfg.mtu as usize;
        let (sh, t) = (self.shared.clone(), tun.clone());
        let reader = std::thread::Builder::new()
            .name(format!("dly-rd-{}", self.cfg.tun_name))
            .spawn(move || {
                *sh.reader_sched.lock().unwrap_or_else(|e| e.into_inner()) = go_realtime(prio);
                if let Err(e) = read_loop(&sh, &t, wake_fd, mtu) {
                    sh.fail(format!("delay line reader: {e}"));
                }
                sh.reader_cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
            })
            .map_err(|e| LabError::io("starting the delay line's reader thread", e))?;
        self.threads.push(reader);
        let (sh, t) = (self.shared.clone(), tun);
        let releaser = std::thread::Builder::new()
            .name(format!("dly-wr-{}", self.cfg.tun_name))
            .spawn(move || {
                *sh.releaser_sched.lock().unwrap_or_else(|e| e.into_inner()) = go_realtime(prio);
                release_loop(&sh, &t);
                sh.releaser_cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
            })
            .map_err(|e| LabError::io("starting the delay line's releaser thread", e))?;
        self.threads.push(releaser);
        // Wait (briefly) until both threads have settled their scheduling
        // class, so that `stats()` right after `start` tells the truth.
        for _ in 0..200 {
            let pending = |m: &Mutex<Scheduling>| {
                *m.lock().unwrap_or_else(|e| e.into_inner()) == Scheduling::Pending
            };
            if !pending(&self.shared.reader_sched) && !pending(&self.shared.releaser_sched) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Ok(())
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
        let queued = sh.queue.lock().map(|q| q.packets.len() as u64).unwrap_or(0);
        DelayStats {
            packets: sh.packets.load(Ordering::Relaxed),
            bytes: Bytes::new(sh.bytes.load(Ordering::Relaxed)),
            dropped_queue_full: sh.dropped.load(Ordering::Relaxed),
            write_errors: sh.write_errors.load(Ordering::Relaxed),
            queued,
            peak_queue_bytes: Bytes::new(sh.peak_bytes.load(Ordering::Relaxed)),
            queue_limit: Bytes::new(sh.limit_bytes as u64),
            hold_error: sh.hold_error(),
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

    fn read_tun_dropped(&self) -> Result<u64> {
        let out = netns::ip(&[
            "-n",
            &self.ns,
            "-s",
            "-j",
            "link",
            "show",
            "dev",
            &self.cfg.tun_name,
        ])?;
        let v: serde_json::Value = serde_json::from_str(&out).map_err(|e| {
            LabError::Capability(format!("cannot read `ip -s -j link` output: {e}"))
        })?;
        v.get(0)
            .and_then(|l| l.pointer("/stats64/tx/dropped"))
            .and_then(|d| d.as_u64())
            .ok_or_else(|| {
                LabError::Capability(format!(
                    "no tx dropped counter for {} in `ip -s -j link` output",
                    self.cfg.tun_name
                ))
            })
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
            self.shared.stopping.store(true, Ordering::SeqCst);
            {
                let mut q = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
                q.stop = true;
            }
            self.shared.ready.notify_all();
            if let Some(w) = &self.wake {
                // SAFETY: writing one u64 to our own eventfd.
                unsafe { libc::eventfd_write(w.as_raw_fd(), 1) };
            }
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
            self.wake = None;
        }
        if self.rule_installed {
            self.rule_installed = false;
            if netns::exists(&self.ns) {
                let table = self.cfg.table.to_string();
                let r = netns::ip(&[
                    "-n",
                    &self.ns,
                    "rule",
                    "del",
                    "iif",
                    &self.cfg.from_iface,
                    "lookup",
                    &table,
                ]);
                // The namespace may vanish between the check and the call.
                if let Err(e) = r {
                    if netns::exists(&self.ns) {
                        return Err(e);
                    }
                }
            }
        }
        Ok(self.stats())
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Reads packets from the TUN as they come, stamps them, and queues them.
/// A full queue drops (and counts) the packet; it never grows.
fn read_loop(sh: &Shared, tun: &File, wake_fd: i32, mtu: usize) -> std::io::Result<()> {
    let mut buf = vec![0u8; mtu.max(1500) + 64];
    let mut reader: &File = tun;
    let mut since_cpu = 0u32;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => continue,
            Ok(n) => {
                let now = monotonic_ns();
                let cost = n + ENTRY_OVERHEAD;
                let mut q = sh.queue.lock().unwrap_or_else(|e| e.into_inner());
                if q.bytes + cost > sh.limit_bytes {
                    drop(q);
                    sh.dropped.fetch_add(1, Ordering::Relaxed);
                } else {
                    q.packets.push_back(Packet {
                        arrived_ns: now,
                        data: buf[..n].into(),
                    });
                    q.bytes += cost;
                    let b = q.bytes as u64;
                    let wake = q.releaser_idle;
                    q.releaser_idle = false;
                    drop(q);
                    sh.peak_bytes.fetch_max(b, Ordering::Relaxed);
                    if wake {
                        sh.ready.notify_one();
                    }
                }
                since_cpu += 1;
                if since_cpu >= 1024 {
                    since_cpu = 0;
                    sh.reader_cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                sh.reader_cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
                if sh.stopping.load(Ordering::SeqCst) {
                    return Ok(());
                }
                let mut fds = [
                    libc::pollfd {
                        fd: tun.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: wake_fd,
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                // SAFETY: `fds` is a valid array of two pollfds for the call.
                let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
                if rc < 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
                if fds[1].revents != 0 {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Writes each packet back into the TUN once it has been held for the
/// target hold, oldest first, and records how late it was.
fn release_loop(sh: &Shared, tun: &File) {
    let mut due: Vec<Packet> = Vec::with_capacity(256);
    let mut writer: &File = tun;
    let mut since_cpu = 0u32;
    // The lead: how much earlier than due the releaser wakes, an average of
    // its measured lateness after each wake (each sample capped, so one long
    // stall does not pull later packets early).
    let mut lead = sh.lead_ns.load(Ordering::Relaxed);
    let cap = MAX_RELEASE_LEAD.ns();
    let mut q = sh.queue.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if q.stop {
            return;
        }
        let now = monotonic_ns();
        let mut next_due = None;
        let mut freed = 0;
        while let Some(p) = q.packets.front() {
            let at = p.arrived_ns + sh.hold_ns - lead;
            if at > now {
                next_due = Some(at);
                break;
            }
            let p = q.packets.pop_front().expect("front exists");
            freed += p.data.len() + ENTRY_OVERHEAD;
            due.push(p);
        }
        q.bytes -= freed;
        if due.is_empty() {
            match next_due {
                None => {
                    q.releaser_idle = true;
                    sh.releaser_cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
                    q = sh.ready.wait(q).unwrap_or_else(|e| e.into_inner());
                }
                Some(at) => {
                    drop(q);
                    sleep_until(at);
                    q = sh.queue.lock().unwrap_or_else(|e| e.into_inner());
                }
            }
            continue;
        }
        drop(q);
        for p in due.drain(..) {
            let now = monotonic_ns();
            let intended = p.arrived_ns + sh.hold_ns;
            sh.record_late(now - intended);
            if sh.adaptive {
                // Lateness against the early deadline we slept to.
                let wake_late = (now - (intended - lead)).clamp(0, cap);
                lead += (wake_late - lead) / 64;
            }
            let written = writer.write(&p.data);
            sh.max_write_ns
                .fetch_max(monotonic_ns() - now, Ordering::Relaxed);
            match written {
                Ok(_) => {
                    sh.packets.fetch_add(1, Ordering::Relaxed);
                    sh.bytes.fetch_add(p.data.len() as u64, Ordering::Relaxed);
                }
                Err(_) => {
                    sh.write_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            since_cpu += 1;
            if since_cpu >= 1024 {
                since_cpu = 0;
                sh.releaser_cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
            }
        }
        sh.lead_ns.store(lead, Ordering::Relaxed);
        q = sh.queue.lock().unwrap_or_else(|e| e.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(ms: i64, mbps: f64) -> DelayConfig {
        DelayConfig::new("to-snd", DurationNs::from_ms(ms), BitRate::from_mbps(mbps))
    }

    #[test]
    fn delay_outside_range_is_refused() {
        for ms in [0, 101, -1] {
            let e = cfg(ms, 100.0).validate().unwrap_err();
            assert!(matches!(e, LabError::Spec(_)), "{e}");
            assert!(e.to_string().contains("outside"), "{e}");
        }
        for ms in [1, 10, 100] {
            cfg(ms, 100.0).validate().unwrap();
        }
    }

    #[test]
    fn rate_above_sustained_is_refused_clearly() {
        let e = cfg(10, Sustained::MBPS_1500 * 2.0).validate().unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, LabError::Capability(_)), "{msg}");
        assert!(msg.contains("sustains about"), "{msg}");
        assert!(msg.contains("asked for"), "{msg}");
        cfg(10, Sustained::MBPS_1500).validate().unwrap();
        // Small packets cost as much each: the same bit rate is refused.
        let mut small = cfg(10, Sustained::MBPS_1500 / 2.0);
        small.packet_size = Bytes::new(200);
        let e = small.validate().unwrap_err();
        assert!(matches!(e, LabError::Capability(_)), "{e}");
    }

    #[test]
    fn queue_budget_covers_rate_times_delay() {
        let c = cfg(100, 500.0);
        let need = 500e6 / 8.0 * (0.1 + 0.15);
        assert!(c.queue_limit_bytes() as f64 > need * 1.4);
        assert!((c.queue_limit_bytes() as f64) < need * 2.5);
    }

    #[test]
    fn hold_error_quantiles_from_histogram() {
        let sh = Shared::new(0, 0, false);
        assert!(sh.hold_error().is_none());
        for i in 0..100 {
            sh.record_late(i * 1_000 + 300);
        }
        sh.record_late(50_000_000);
        let h = sh.hold_error().unwrap();
        assert_eq!(h.samples, 101);
        assert_eq!(h.median.ns(), 50_500);
        assert_eq!(h.p99.ns(), 99_500);
        assert_eq!(h.max.ns(), 50_000_000);
    }
}
