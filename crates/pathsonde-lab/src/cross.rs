//! Cross-traffic senders: replay a packet schedule from a source namespace
//! towards the sink, logging every batch for ground truth.
//!
//! The schedule (when each packet is due and how big it is) is pure logic from
//! `pathsonde_core::traffic`; this module only puts it on the wire.  Packets
//! that are due within the next 20 µs go out together, and the thread sleeps
//! (with a 1 µs timer slack) when the next packet is far: Poisson traffic at
//! 300 Mb/s is 25 000 packets/s, and busy-waiting for each would take the core
//! the probe sender needs.  Batching smooths nothing at time scales above
//! ~0.1 ms, which is the scale a bottleneck queue integrates over.

use crate::error::{LabError, Result};
use crate::netns;
use crate::topology::L2_HEADER;
use crate::truth::{LogPoint, SendLog, LATE};
use pathsonde_core::{Bytes, DurationNs};
use pathsonde_net::clock;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// UDP port cross traffic is sent to.  Nothing listens there: the receiver's
/// kernel drops the datagrams after they crossed the bottleneck, which costs
/// less CPU than a sink reading them (ICMP errors are rate-limited, and an
/// unconnected socket never sees them).
pub const CROSS_UDP_PORT: u16 = 9;
/// TCP port of the sink that greedy TCP cross flows write to.
pub const CROSS_TCP_PORT: u16 = 5399;

const IP_UDP_HEADERS: u64 = 28;
/// Packets due within this much of now go out in the same batch.
const BATCH_WINDOW: DurationNs = DurationNs::from_us(20);

/// A packet the schedule wants sent `at` after the start.
pub type Due = (DurationNs, Bytes);

/// A running cross-traffic source.
pub struct CrossSource {
    pub log: SendLog,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Result<()>>>,
}

impl CrossSource {
    /// Replays `schedule` from namespace `ns` to `sink`, starting now.
    pub fn udp(
        ns: &str,
        sink: Ipv4Addr,
        schedule: Box<dyn Iterator<Item = Due> + Send>,
    ) -> Result<CrossSource> {
        let log = SendLog::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (log2, stop2) = (log.clone(), stop.clone());
        let dest = SocketAddr::from((sink, CROSS_UDP_PORT));
        let t = netns::spawn_in(ns, "pathsonde-cross", move || {
            replay_udp(dest, schedule, &log2, &stop2)
        })?;
        Ok(CrossSource {
            log,
            stop,
            threads: vec![t],
        })
    }

    /// `flows` greedy TCP connections from `ns` to the TCP sink at `sink`.
    /// The log counts bytes the application wrote (TCP's own pacing decides
    /// when they cross; the qdisc counters are the truth for TCP).
    pub fn tcp(ns: &str, sink: Ipv4Addr, flows: u32) -> Result<CrossSource> {
        let log = SendLog::default();
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let total = Arc::new(std::sync::atomic::AtomicU64::new(0));
        for i in 0..flows {
            let (log2, stop2, total2) = (log.clone(), stop.clone(), total.clone());
            threads.push(netns::spawn_in(
                ns,
                &format!("pathsonde-tcp{i}"),
                move || {
                    let mut s = TcpStream::connect_timeout(
                        &SocketAddr::from((sink, CROSS_TCP_PORT)),
                        Duration::from_secs(3),
                    )
                    .map_err(|e| LabError::io("connecting a TCP cross flow", e))?;
                    let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
                    let chunk = vec![0u8; 64 * 1024];
                    while !stop2.load(Ordering::SeqCst) {
                        match s.write(&chunk) {
                            Ok(n) => {
                                let all = total2.fetch_add(n as u64, Ordering::SeqCst) + n as u64;
                                log2.push(LogPoint {
                                    at_ns: clock::monotonic().ns(),
                                    ip_bytes: all,
                                    l2_bytes: all,
                                    late_packets: 0,
                                    max_late_ns: 0,
                                });
                            }
                            Err(e)
                                if e.kind() == std::io::ErrorKind::WouldBlock
                                    || e.kind() == std::io::ErrorKind::TimedOut => {}
                            Err(e) => return Err(LabError::io("writing a TCP cross flow", e)),
                        }
                    }
                    Ok(())
                },
            )?);
        }
        Ok(CrossSource { log, stop, threads })
    }

    /// Stops the source and reports the first error it met, if any.
    pub fn stop(&mut self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        let mut first = Ok(());
        for t in self.threads.drain(..) {
            let r = t.join().unwrap_or_else(|_| {
                Err(LabError::Capability(
                    "a cross-traffic thread panicked".into(),
                ))
            });
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

impl Drop for CrossSource {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn replay_udp(
    dest: SocketAddr,
    mut schedule: Box<dyn Iterator<Item = Due> + Send>,
    log: &SendLog,
    stop: &AtomicBool,
) -> Result<()> {
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0);
    }
    let sock = UdpSocket::bind(("0.0.0.0", 0))
        .map_err(|e| LabError::io("binding a cross-traffic socket", e))?;
    let buf = vec![0u8; 65_536];
    let start = clock::monotonic();
    let (mut ip_total, mut l2_total, mut late_total) = (0u64, 0u64, 0u64);
    let mut pending = schedule.next();
    while let Some((at, size)) = pending {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let due = start + at;
        let now = clock::monotonic();
        let wait = due.since(now);
        if wait > DurationNs::from_us(150) {
            // Sleep most of the way; the timer slack keeps wake-ups prompt.
            std::thread::sleep((wait - DurationNs::from_us(60)).to_std());
            continue;
        }
        // Send everything due up to now + the batch window.
        let horizon = now.max(due) + BATCH_WINDOW;
        let mut next = Some((at, size));
        let mut max_late = 0i64;
        while let Some((a, s)) = next {
            if start + a > horizon {
                break;
            }
            // One clock read per packet, as before: a packet that had to
            // wait left on time; one that did not is as late as the read.
            let t = clock::monotonic();
            if start + a > t {
                clock::wait_until(start + a);
            } else {
                let late = t.since(start + a).ns();
                if late > LATE.ns() {
                    late_total += 1;
                }
                max_late = max_late.max(late);
            }
            let payload = s.get().saturating_sub(IP_UDP_HEADERS).min(buf.len() as u64) as usize;
            if sock.send_to(&buf[..payload], dest).is_ok() {
                ip_total += payload as u64 + IP_UDP_HEADERS;
                l2_total += payload as u64 + IP_UDP_HEADERS + L2_HEADER;
            }
            next = schedule.next();
        }
        log.push(LogPoint {
            at_ns: clock::monotonic().ns(),
            ip_bytes: ip_total,
            l2_bytes: l2_total,
            late_packets: late_total,
            max_late_ns: max_late,
        });
        pending = next;
    }
    Ok(())
}

/// Accepts TCP cross flows in the sink namespace and discards what they send.
pub struct TcpSink {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl TcpSink {
    pub fn start(ns: &str, addr: Ipv4Addr) -> Result<TcpSink> {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = netns::spawn_in(ns, "pathsonde-tcpsink", move || {
            let l = TcpListener::bind((addr, CROSS_TCP_PORT))
                .map_err(|e| LabError::io("binding the TCP sink", e))?;
            l.set_nonblocking(true)
                .map_err(|e| LabError::io("configuring the TCP sink", e))?;
            let mut readers = Vec::new();
            while !stop2.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((mut s, _)) => {
                        let stop3 = stop2.clone();
                        let _ = s.set_nonblocking(false);
                        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                        readers.push(std::thread::spawn(move || {
                            let mut b = vec![0u8; 256 * 1024];
                            while !stop3.load(Ordering::SeqCst) {
                                match s.read(&mut b) {
                                    Ok(0) => break,
                                    Ok(_) => {}
                                    Err(e)
                                        if e.kind() == std::io::ErrorKind::WouldBlock
                                            || e.kind() == std::io::ErrorKind::TimedOut => {}
                                    Err(_) => break,
                                }
                            }
                        }));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            for r in readers {
                let _ = r.join();
            }
            Ok(())
        })?;
        Ok(TcpSink {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for TcpSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
