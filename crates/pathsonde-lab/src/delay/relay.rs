//! The relay's two threads: a reader that stamps each packet on arrival and
//! queues it, and a releaser that sleeps to the oldest packet's due time and
//! writes every due packet back into the TUN.  Here too is what they share
//! and how they are started and stopped, so the timing-critical code reads
//! in one place.

use super::config::ENTRY_OVERHEAD;
use super::histogram::HoldHistogram;
use super::MAX_RELEASE_LEAD;
use super::{DelayLine, Scheduling};
use crate::error::{LabError, Result};
use pathsonde_core::TimeNs;
use pathsonde_net::clock;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// The releaser's lead starts here (its typical wake-up lateness on this
/// machine) and follows the measured lateness; it never exceeds
/// [`super::MAX_RELEASE_LEAD`].
const INITIAL_RELEASE_LEAD_NS: i64 = 25_000;

/// One packet held by the relay, stamped on arrival.
struct Packet {
    arrived_ns: i64,
    data: Box<[u8]>,
}

/// The held packets, oldest first, and their byte cost against the budget.
pub(super) struct Queue {
    packets: VecDeque<Packet>,
    bytes: usize,
    /// The releaser sleeps on the condvar only when the queue is empty; the
    /// reader wakes it only then (FIFO with one delay: a later arrival is never
    /// due before the head).
    releaser_idle: bool,
    stop: bool,
}

/// What the reader, the releaser and the owning [`DelayLine`] share: the
/// queue, its condvar, the settings the loops read, and every counter
/// [`DelayLine::stats`] reports.
pub(super) struct Shared {
    pub(super) queue: Mutex<Queue>,
    pub(super) ready: Condvar,
    pub(super) limit_bytes: usize,
    pub(super) hold_ns: i64,
    pub(super) adaptive: bool,
    pub(super) lead_ns: AtomicI64,
    pub(super) packets: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) dropped: AtomicU64,
    pub(super) write_errors: AtomicU64,
    pub(super) peak_bytes: AtomicU64,
    pub(super) reader_cpu_ns: AtomicI64,
    pub(super) releaser_cpu_ns: AtomicI64,
    pub(super) hist: HoldHistogram,
    pub(super) max_write_ns: AtomicI64,
    pub(super) reader_sched: Mutex<Scheduling>,
    pub(super) releaser_sched: Mutex<Scheduling>,
    pub(super) failure: Mutex<Option<String>>,
    pub(super) stopping: AtomicBool,
}

impl Shared {
    pub(super) fn new(limit_bytes: usize, hold_ns: i64, adaptive: bool) -> Self {
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
            hist: HoldHistogram::new(),
            max_write_ns: AtomicI64::new(0),
            reader_sched: Mutex::new(Scheduling::Pending),
            releaser_sched: Mutex::new(Scheduling::Pending),
            failure: Mutex::new(None),
            stopping: AtomicBool::new(false),
        }
    }

    /// Packets held now.
    pub(super) fn queued(&self) -> u64 {
        self.queue
            .lock()
            .map(|q| q.packets.len() as u64)
            .unwrap_or(0)
    }

    fn fail(&self, msg: String) {
        let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            *f = Some(msg);
        }
    }
}

impl DelayLine {
    /// Starts the reader and the releaser on `tun`; a thread started before
    /// a later failure is recorded in `self` so that `stop` joins it.
    pub(super) fn spawn(&mut self, tun: File) -> Result<()> {
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
                sh.reader_cpu_ns
                    .store(clock::thread_cpu().ns(), Ordering::Relaxed);
            })
            .map_err(|e| LabError::io("starting the delay line's reader thread", e))?;
        self.threads.push(reader);
        let (sh, t) = (self.shared.clone(), tun);
        let releaser = std::thread::Builder::new()
            .name(format!("dly-wr-{}", self.cfg.tun_name))
            .spawn(move || {
                *sh.releaser_sched.lock().unwrap_or_else(|e| e.into_inner()) = go_realtime(prio);
                release_loop(&sh, &t);
                sh.releaser_cpu_ns
                    .store(clock::thread_cpu().ns(), Ordering::Relaxed);
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

    /// Tells both threads to stop (the flag, the queue, the condvar, the
    /// eventfd the reader polls) and joins them; packets still held are
    /// discarded.
    pub(super) fn stop_threads(&mut self) {
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
                let now = clock::monotonic().ns();
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
                    sh.reader_cpu_ns
                        .store(clock::thread_cpu().ns(), Ordering::Relaxed);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                sh.reader_cpu_ns
                    .store(clock::thread_cpu().ns(), Ordering::Relaxed);
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
        let now = clock::monotonic().ns();
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
                    sh.releaser_cpu_ns
                        .store(clock::thread_cpu().ns(), Ordering::Relaxed);
                    q = sh.ready.wait(q).unwrap_or_else(|e| e.into_inner());
                }
                Some(at) => {
                    drop(q);
                    clock::sleep_until(TimeNs::from_ns(at));
                    q = sh.queue.lock().unwrap_or_else(|e| e.into_inner());
                }
            }
            continue;
        }
        drop(q);
        for p in due.drain(..) {
            let now = clock::monotonic().ns();
            let intended = p.arrived_ns + sh.hold_ns;
            sh.hist.record(now - intended);
            if sh.adaptive {
                // Lateness against the early deadline we slept to.
                let wake_late = (now - (intended - lead)).clamp(0, cap);
                lead += (wake_late - lead) / 64;
            }
            let written = writer.write(&p.data);
            sh.max_write_ns
                .fetch_max(clock::monotonic().ns() - now, Ordering::Relaxed);
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
                sh.releaser_cpu_ns
                    .store(clock::thread_cpu().ns(), Ordering::Relaxed);
            }
        }
        sh.lead_ns.store(lead, Ordering::Relaxed);
        q = sh.queue.lock().unwrap_or_else(|e| e.into_inner());
    }
}
