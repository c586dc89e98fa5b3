//! A self-contained three-namespace rig for measuring the delay line: what it
//! sustains and what delay error it adds.  Used by `tests/delay.rs` and
//! `examples/delay_bench.rs`; the lab proper uses `topology`.
//!
//! ```text
//!   snd [to-rtr 198.18.1.1] ── [to-snd 198.18.1.2] rtr [to-rcv 198.18.2.1] ── [to-rtr 198.18.2.2] rcv
//!                                      └─ iif to-snd → dly0 (delay line) → main table ─┘
//! ```
//!
//! Interface names and addresses match the lab's one-router topology, so the
//! figures carry over.  There is no bottleneck qdisc: the rig measures the
//! relay alone.
//!
//! One-way delay is the receiver's kernel receive stamp (`SO_TIMESTAMPING`,
//! CLOCK_REALTIME) minus the sender's CLOCK_REALTIME read just before
//! `send`, carried in the payload.  All namespaces share one clock; realtime
//! is used on both ends because the kernel stamps in it, and a kernel stamp
//! leaves out the receiving thread's own scheduling.  The realtime −
//! monotonic offset is read before and after each run and reported, so a
//! clock step during a run cannot pass unseen.

use crate::delay::{DelayConfig, DelayLine, DelayStats};
use crate::error::{LabError, Result};
use crate::netns;
use pathsonde_core::{BitRate, DurationNs};
use pathsonde_net::clock;
use pathsonde_net::udp::{bind, TimestampingReceiver};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const SENDER: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
pub const ROUTER_SND: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
pub const ROUTER_RCV: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 1);
pub const RECEIVER: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
const PORT: u16 = 9_411;
/// Payload bytes that make a 1500-byte IPv4 packet.
const IPV4_UDP_OVERHEAD: usize = 28;

static RIG_SEQ: AtomicU32 = AtomicU32::new(0);

/// The three namespaces and two links; deleted on drop, even on panic.
pub struct Rig {
    pub snd: String,
    pub rtr: String,
    pub rcv: String,
    made: Vec<String>,
}

impl Rig {
    /// Builds `pathsonde-dly<pid>[-<n>]-{snd,rtr,rcv}`.
    pub fn build() -> Result<Rig> {
        netns::check_permitted()?;
        let n = RIG_SEQ.fetch_add(1, Ordering::Relaxed);
        let base = if n == 0 {
            format!("{}dly{}", netns::PREFIX, std::process::id())
        } else {
            format!("{}dly{}-{n}", netns::PREFIX, std::process::id())
        };
        let mut rig = Rig {
            snd: format!("{base}-snd"),
            rtr: format!("{base}-rtr"),
            rcv: format!("{base}-rcv"),
            made: Vec::new(),
        };
        rig.build_inner()?;
        Ok(rig)
    }

    fn build_inner(&mut self) -> Result<()> {
        for ns in [self.snd.clone(), self.rtr.clone(), self.rcv.clone()] {
            netns::add(&ns)?;
            self.made.push(ns.clone());
            crate::registry::remember(&ns);
            netns::ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        netns::sysctl(&self.rtr, "net.ipv4.ip_forward", "1")?;
        let (snd, rtr, rcv) = (self.snd.clone(), self.rtr.clone(), self.rcv.clone());
        link(&snd, "to-rtr", SENDER, &rtr, "to-snd", ROUTER_SND)?;
        link(&rtr, "to-rcv", ROUTER_RCV, &rcv, "to-rtr", RECEIVER)?;
        netns::ip(&[
            "-n",
            &snd,
            "route",
            "add",
            "default",
            "via",
            &ROUTER_SND.to_string(),
        ])?;
        netns::ip(&[
            "-n",
            &rcv,
            "route",
            "add",
            "default",
            "via",
            &ROUTER_RCV.to_string(),
        ])?;
        Ok(())
    }

    /// Starts a delay line on the router for traffic from the sender.
    pub fn delay_line(&self, delay: DurationNs, rate: BitRate) -> Result<DelayLine> {
        DelayLine::start(&self.rtr, DelayConfig::new("to-snd", delay, rate))
    }

    /// Deletes the namespaces now (also done on drop).
    pub fn teardown(&mut self) -> Result<()> {
        let mut first = None;
        for ns in self.made.drain(..).rev() {
            if netns::exists(&ns) {
                if let Err(e) = netns::delete(&ns) {
                    first.get_or_insert(e);
                }
            }
            crate::registry::forget(&ns);
        }
        first.map_or(Ok(()), Err)
    }

    pub fn namespaces(&self) -> [&str; 3] {
        [&self.snd, &self.rtr, &self.rcv]
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

fn link(a: &str, a_dev: &str, a_ip: Ipv4Addr, b: &str, b_dev: &str, b_ip: Ipv4Addr) -> Result<()> {
    netns::ip(&[
        "-n", a, "link", "add", a_dev, "type", "veth", "peer", "name", b_dev, "netns", b,
    ])?;
    for (ns, dev, ip) in [(a, a_dev, a_ip), (b, b_dev, b_ip)] {
        netns::ip(&["-n", ns, "addr", "add", &format!("{ip}/24"), "dev", dev])?;
        // TSO/GSO off, as in the lab: a 64 KB super-packet would otherwise
        // cross the TUN as one "packet".  ethtool missing is not fatal here
        // (UDP at 1500 bytes is not segmented), but say so once.
        if let Err(e) = netns::exec_in(ns, "ethtool", &["-K", dev, "tso", "off", "gso", "off"]) {
            if matches!(e, LabError::Missing { .. }) {
                static SAID: AtomicBool = AtomicBool::new(false);
                if !SAID.swap(true, Ordering::Relaxed) {
                    eprintln!("delay rig: ethtool missing, offloads left on ({e})");
                }
            } else {
                return Err(e);
            }
        }
        netns::ip(&["-n", ns, "link", "set", dev, "up"])?;
    }
    Ok(())
}

/// What one paced UDP run saw.
#[derive(Debug, Clone)]
pub struct UdpRun {
    pub rate_asked: BitRate,
    /// Rate the sender achieved (IP bytes over its sending span).
    pub rate_sent: BitRate,
    pub sent: u64,
    pub received: u64,
    /// Arrivals whose sequence number was below one already seen.
    pub reordered: u64,
    /// One-way delays in ns, in arrival order.
    pub delays_ns: Vec<i64>,
    /// Change of (CLOCK_REALTIME − CLOCK_MONOTONIC) over the run; non-zero
    /// means the realtime clock was stepped or slewed and delays are suspect.
    pub clock_step: DurationNs,
    /// Datagrams the receiver's socket dropped (UDP RcvbufErrors in rcv):
    /// loss that is the receiver's, not the path's.
    pub rcv_buf_errors: u64,
    /// Hypervisor steal time during the run (all vCPUs).
    pub steal: Duration,
    /// The sender's worst lateness against its schedule: a stall of the
    /// relay that the sender saw too was the whole machine's.
    pub sender_max_late: DurationNs,
}

impl UdpRun {
    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }

    pub fn loss_fraction(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.lost() as f64 / self.sent as f64
        }
    }

    /// The `q` quantile of one-way delay (nearest rank), if anything arrived.
    pub fn delay_quantile(&self, q: f64) -> Option<DurationNs> {
        if self.delays_ns.is_empty() {
            return None;
        }
        let mut v = self.delays_ns.clone();
        v.sort_unstable();
        let rank = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len());
        Some(DurationNs::from_ns(v[rank - 1]))
    }

    pub fn delay_max(&self) -> Option<DurationNs> {
        self.delays_ns.iter().max().map(|&n| DurationNs::from_ns(n))
    }
}

/// UDP RcvbufErrors of the calling thread's namespace.
fn udp_rcvbuf_errors() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap_or_default();
    let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// Fraction of CPU time not idle over `window`, all cores (from /proc/stat).
pub fn cpu_busy(window: Duration) -> f64 {
    fn read() -> Option<(u64, u64)> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        let v: Vec<u64> = text
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
        Some((v.iter().sum(), idle))
    }
    let Some((t0, i0)) = read() else {
        return 0.0;
    };
    std::thread::sleep(window);
    let Some((t1, i1)) = read() else {
        return 0.0;
    };
    let total = t1.saturating_sub(t0).max(1);
    1.0 - i1.saturating_sub(i0) as f64 / total as f64
}

/// Waits (up to `limit`) until the machine is at most `busy` busy over a
/// 300 ms window, because other work on the 2 cores moves timing figures.
/// Returns the last busy fraction seen.
pub fn wait_for_idle(busy: f64, limit: Duration) -> f64 {
    let start = std::time::Instant::now();
    loop {
        let b = cpu_busy(Duration::from_millis(300));
        if b <= busy || start.elapsed() >= limit {
            return b;
        }
    }
}

/// Time the hypervisor ran something else instead of this VM's vCPUs, all
/// cores together ("steal" in /proc/stat): a stalled relay with steal during
/// the run is the host's doing, not the relay's.
pub fn steal_time() -> Duration {
    // SAFETY: sysconf takes an integer and has no other preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let ticks = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| {
            t.lines()
                .next()?
                .split_whitespace()
                .nth(8)?
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0);
    Duration::from_nanos(ticks * 1_000_000_000 / hz)
}

/// Sends `ip_size`-byte UDP packets from snd to rcv at `rate` for `span`,
/// paced on a schedule (a late packet is sent at once, never skipped), and
/// measures each packet's one-way delay.
pub fn udp_run(rig: &Rig, rate: BitRate, ip_size: usize, span: Duration) -> Result<UdpRun> {
    if !(IPV4_UDP_OVERHEAD + 16..=1500).contains(&ip_size) {
        return Err(LabError::Spec(format!(
            "probe size {ip_size} outside 44–1500"
        )));
    }
    let gap_ns = (ip_size as f64 * 8.0 / rate.bps() * 1e9) as i64;
    let count = (span.as_secs_f64() * 1e9 / gap_ns as f64).ceil() as u64;
    let step0 = clock::realtime_minus_monotonic();
    let steal0 = steal_time();

    // Receiver first, so nothing is sent to a closed port.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let done = Arc::new(AtomicBool::new(false));
    let done_rx = done.clone();
    let payload = ip_size - IPV4_UDP_OVERHEAD;
    let receiver = netns::spawn_in(&rig.rcv, "dly-bench-rcv", move || {
        let sock = bind(SocketAddr::from((RECEIVER, PORT)))?;
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| LabError::io("setting the receive timeout", e))?;
        let mut rx = TimestampingReceiver::new(sock);
        let drops0 = udp_rcvbuf_errors();
        let _ = ready_tx.send(());
        let mut buf = vec![0u8; 2048];
        let mut delays = Vec::with_capacity(count as usize);
        let mut highest: Option<u64> = None;
        let mut reordered = 0u64;
        let mut idle_since_done = 0;
        loop {
            match rx.recv(&mut buf) {
                Ok(r) if r.len >= 16 => {
                    let seq = u64::from_be_bytes(buf[0..8].try_into().expect("8 bytes"));
                    let sent = i64::from_be_bytes(buf[8..16].try_into().expect("8 bytes"));
                    delays.push(r.at.ns() - sent);
                    match highest {
                        Some(h) if seq < h => reordered += 1,
                        _ => highest = Some(seq),
                    }
                    idle_since_done = 0;
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    // 100 ms timeouts: stop 500 ms after the sender is done
                    // and nothing more arrives (the longest delay is 100 ms).
                    if done_rx.load(Ordering::SeqCst) {
                        idle_since_done += 1;
                        if idle_since_done >= 5 {
                            break;
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(LabError::io("receiving probe packets", e)),
            }
        }
        Ok((
            delays,
            reordered,
            udp_rcvbuf_errors().saturating_sub(drops0),
        ))
    })?;
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|_| LabError::Capability("the bench receiver did not start".into()))?;

    let sender = netns::spawn_in(&rig.snd, "dly-bench-snd", move || {
        let sock = UdpSocket::bind((SENDER, 0))
            .map_err(|e| LabError::io("binding the bench sender", e))?;
        sock.connect((RECEIVER, PORT))
            .map_err(|e| LabError::io("connecting the bench sender", e))?;
        let mut buf = vec![0u8; payload];
        let t0 = clock::monotonic().ns() + 1_000_000;
        let mut first = None;
        let mut last = 0;
        let mut max_late = 0;
        for seq in 0..count {
            let at = t0 + seq as i64 * gap_ns;
            clock::wait_until(pathsonde_core::TimeNs::from_ns(at));
            let now_rt = clock::realtime().ns();
            buf[0..8].copy_from_slice(&seq.to_be_bytes());
            buf[8..16].copy_from_slice(&now_rt.to_be_bytes());
            let m = clock::monotonic().ns();
            first.get_or_insert(m);
            last = m;
            max_late = max_late.max(m - at);
            loop {
                match sock.send(&buf) {
                    Ok(_) => break,
                    // A full socket buffer: the path is slower than asked.
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => std::thread::yield_now(),
                    Err(e) => return Err(LabError::io("sending probe packets", e)),
                }
            }
        }
        let span_ns = last - first.unwrap_or(last);
        Ok((span_ns, max_late))
    })?;
    let sent_span = sender
        .join()
        .unwrap_or_else(|_| Err(LabError::Capability("the bench sender panicked".into())));
    done.store(true, Ordering::SeqCst);
    let received = receiver
        .join()
        .unwrap_or_else(|_| Err(LabError::Capability("the bench receiver panicked".into())));
    let (span_ns, sender_max_late) = sent_span?;
    let (delays_ns, reordered, rcv_buf_errors) = received?;
    let rate_sent = if span_ns > 0 && count > 1 {
        BitRate::from_bps((count - 1) as f64 * ip_size as f64 * 8.0 / (span_ns as f64 * 1e-9))
    } else {
        rate
    };
    Ok(UdpRun {
        rate_asked: rate,
        rate_sent,
        sent: count,
        received: delays_ns.len() as u64,
        reordered,
        delays_ns,
        clock_step: DurationNs::from_ns(clock::realtime_minus_monotonic() - step0),
        rcv_buf_errors,
        steal: steal_time().saturating_sub(steal0),
        sender_max_late: DurationNs::from_ns(sender_max_late),
    })
}

/// One row of the bench: a UDP run through a delay line and the line's own
/// counters.
#[derive(Debug, Clone)]
pub struct Measured {
    pub delay: DurationNs,
    pub run: UdpRun,
    pub line: DelayStats,
}

/// Starts a line with `cfg` (unguarded: the bench goes past the sustained
/// rate on purpose), runs UDP through it, stops it.
pub fn measure(rig: &Rig, cfg: DelayConfig, ip_size: usize, span: Duration) -> Result<Measured> {
    let delay = cfg.delay;
    let rate = cfg.rate;
    let mut line = DelayLine::start_unguarded(&rig.rtr, cfg)?;
    // Let the relay threads settle before the first packet.
    std::thread::sleep(Duration::from_millis(20));
    let run = udp_run(rig, rate, ip_size, span);
    let line_stats = line.stop()?;
    Ok(Measured {
        delay,
        run: run?,
        line: line_stats,
    })
}
