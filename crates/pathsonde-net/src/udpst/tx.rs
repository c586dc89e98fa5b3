//! The UDPSTP load sender (spec §9.4): two transmitters firing at the
//! intervals of the current sending-rate row, one shared sequence number,
//! random sizes, IPv6 payload adjustment, a one-datagram-per-firing stop
//! mode.  Runs on its own thread (the client upstream, the server
//! downstream) while the connection's thread receives Status PDUs and
//! updates [`TxShared`]: [`send_load`] is that pair, the one load-send
//! loop both sides run, with what they do differently on each Status PDU
//! as [`SteerRole`] hooks.
//!
//! Pacing: the thread sleeps on CLOCK_MONOTONIC until the next firing with
//! an absolute `clock_nanosleep` (never spinning), then sends every firing
//! that is due in one `sendmmsg` batch.  Firings are scheduled on an
//! absolute timeline (each one interval after the previous one's target),
//! so a late wake-up sends the firings it missed at once and the row's
//! average rate holds through small delays; a backlog older than
//! [`MAX_BACKLOG`] is dropped rather than sent as one burst.  The bound is
//! short on purpose: with 10 ms a late thread sent chains of up to 400
//! datagrams back to back (measured on a veth at row 500), a burst that
//! overflows a bottleneck queue the path would not otherwise have filled.
//! The reference sender keeps no backlog at all and falls 2–10 % short of
//! its row under host load (docs/capacity.md, "The two clients' send
//! patterns").

use super::pdu::to_timestamp;
use crate::clock;
use crate::udp::BatchSender;
use pathsonde_core::capacity::rate_table::{Payload, SendingRate, Transmitter};
use pathsonde_core::rng::SplitMix64;
use pathsonde_core::{DurationNs, TimeNs};
use pathsonde_wire::udpst::load::{Repr as LoadRepr, HEADER_LEN};
use pathsonde_wire::udpst::status::Repr as StatusRepr;
use pathsonde_wire::udpst::{TestAction, Timestamp};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Firings older than this are dropped, not sent late: at most ten of
/// transmitter 1's 100 µs firings and one of transmitter 2's go out together.
pub(crate) const MAX_BACKLOG: DurationNs = DurationNs::from_ms(1);
/// The most datagrams one wake-up sends (bounds memory and a catch-up burst).
const MAX_BATCH: usize = 1024;
/// The largest datagram sent (the table's jumbo payload is 8972).
pub(crate) const MAX_DATAGRAM: usize = 9000;
/// The most datagrams per firing honoured (the table's bursts are ≤ 100).
const MAX_BURST: u32 = 100;
/// The shortest transmitter interval honoured (the table's shortest is 100 µs).
const MIN_INTERVAL: DurationNs = DurationNs::from_us(100);
/// How often the thread wakes with nothing to send, to see new rows and stops.
const IDLE_WAKE: DurationNs = DurationNs::from_ms(5);

/// What the receiving side tells the sender.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TxShared {
    pub row: SendingRate,
    /// send time of the last Status PDU received (zero until one arrived).
    pub echo: Timestamp,
    /// CLOCK_MONOTONIC receipt of that Status PDU.
    pub status_at: Option<TimeNs>,
    pub status_loss: u16,
    pub rx_stopped: bool,
    /// Testing, or the stop value to carry.
    pub action: TestAction,
    /// Send one datagram carrying `action` at the next firing, then end
    /// (the client's stop confirmation).
    pub stop_once: bool,
    /// End the thread now.
    pub done: bool,
    /// The peer's host answered the load with an ICMP error (nobody
    /// listens there): set by the sender, read by the steering loop.
    pub refused: bool,
    /// The most load bytes this connection may send while testing (the
    /// server's `--max-bytes` share): the sender itself holds at it, since
    /// the steering loop, which then sends the stop, may wake a batch late.
    pub max_bytes: u64,
}

impl TxShared {
    pub fn new(row: SendingRate) -> TxShared {
        TxShared {
            row,
            echo: Timestamp::default(),
            status_at: None,
            status_loss: 0,
            rx_stopped: false,
            action: TestAction::Testing,
            stop_once: false,
            done: false,
            refused: false,
            max_bytes: u64::MAX,
        }
    }
}

/// Uniform in `lo ..= hi` (`lo` when `hi <= lo`), from the project's
/// SplitMix64 (random sizes and start jitter; not for secrets).
fn uniform(rng: &mut SplitMix64, lo: u64, hi: u64) -> u64 {
    if hi <= lo {
        return lo;
    }
    lo + rng.below(hi - lo + 1)
}

/// The random 5–50 ms delay before a transmitter starts.
fn start_jitter(rng: &mut SplitMix64) -> DurationNs {
    DurationNs::from_us(uniform(rng, 5_000, 50_000) as i64)
}

struct TxState {
    next: Option<TimeNs>,
}

/// The load sender of one connection.
pub(crate) struct LoadSender<'a> {
    sock: &'a UdpSocket,
    shared: &'a Mutex<TxShared>,
    v6: bool,
    activated: TimeNs,
    seq: u32,
    batch: BatchSender,
    bufs: Vec<Vec<u8>>,
    /// The datagram sizes due at one wake-up, kept to reuse its allocation
    /// (the loop wakes every 100 µs).
    sizes: Vec<usize>,
    rng: SplitMix64,
    tx: [TxState; 2],
    bytes_sent: &'a AtomicU64,
    /// The largest UDP payload that leaves in one IP packet on this path.
    max_payload: usize,
    /// Datagrams sent smaller than their row asked (see [`path_max_payload`]).
    clamped: &'a AtomicU64,
}

/// The largest UDP payload one unfragmented packet carries to the
/// connected peer: the kernel's path MTU (IP_MTU, IPV6_MTU) less 28 or 48
/// bytes of headers; `None` when the kernel does not say.
///
/// Why: the table's jumbo rows (above 1 Gb/s, the protocol's default) send
/// datagrams of up to 9000 bytes.  On a 1500-byte path they leave as IP
/// fragments, and a lab Type C search that overshot into them stalled: the
/// receiver's reassembly gave up, no load arrived, the search saw neither
/// loss nor delay and held, and the test ended with "no response" after
/// 3 s.  Sending such rows at the path's largest payload keeps the test
/// alive; the client reports how many datagrams were cut.
pub(crate) fn path_max_payload(sock: &UdpSocket, v6: bool) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let (level, name, headers) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU, 48)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU, 28)
    };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `mtu`, a c_int
    // that outlives the call; the descriptor is the live socket's.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0 && mtu > headers).then(|| (mtu - headers) as usize)
}

/// The sender's shared state, whoever holds the lock (a panicked holder
/// leaves plain data behind, still usable).
pub(crate) fn lock(m: &Mutex<TxShared>) -> std::sync::MutexGuard<'_, TxShared> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stops the load sender when the thread that steers it unwinds.  The
/// steering loop reads peer input; if it ever panicked, the sender would go
/// on sending and the thread scope would wait for it forever.  Normal
/// returns stop the sender their own way (a stop PDU first), so only an
/// unwinding drop sets `done`.
pub(crate) struct StopSenderOnPanic<'a>(pub(crate) &'a Mutex<TxShared>);

impl Drop for StopSenderOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            lock(self.0).done = true;
        }
    }
}

impl<'a> LoadSender<'a> {
    /// `activated` is CLOCK_MONOTONIC at activation; `sock` is connected to the peer.
    pub fn new(
        sock: &'a UdpSocket,
        shared: &'a Mutex<TxShared>,
        v6: bool,
        activated: TimeNs,
        bytes_sent: &'a AtomicU64,
        clamped: &'a AtomicU64,
    ) -> LoadSender<'a> {
        let max_payload = path_max_payload(sock, v6)
            .unwrap_or(MAX_DATAGRAM)
            .clamp(HEADER_LEN, MAX_DATAGRAM);
        LoadSender {
            sock,
            shared,
            v6,
            activated,
            seq: 1,
            batch: BatchSender::new(64),
            bufs: Vec::new(),
            sizes: Vec::new(),
            rng: SplitMix64::new(crate::random::u64()),
            tx: [TxState { next: None }, TxState { next: None }],
            bytes_sent,
            max_payload,
            clamped,
        }
    }

    fn size(&mut self, p: Payload) -> Option<usize> {
        let (min, adj) = if self.v6 { (32u64, 20u64) } else { (52u64, 0) };
        let n = match p {
            Payload::Fixed(b) => {
                let b = b.get();
                if b == 0 {
                    return None;
                }
                if b >= 52 {
                    b - adj
                } else {
                    b
                }
            }
            Payload::Random { max } => {
                let hi = max.get().max(52).saturating_sub(adj).max(min);
                uniform(&mut self.rng, min, hi)
            }
        };
        let n = (n as usize).clamp(HEADER_LEN, MAX_DATAGRAM);
        if n > self.max_payload {
            self.clamped.fetch_add(1, Ordering::Relaxed);
            return Some(self.max_payload);
        }
        Some(n)
    }

    /// Runs until told to stop.  Returns the last sequence number used.
    pub fn run(mut self) -> u32 {
        let start = clock::monotonic();
        loop {
            let snap = *lock(self.shared);
            if snap.done {
                break;
            }
            let now = clock::monotonic();
            // (Re)arm transmitters from the current row: idle → stop; newly
            // active → first firing one interval from now (after the
            // 5–50 ms start jitter at the start of the test).
            let txs = [snap.row.tx1(), snap.row.tx2()];
            for (i, t) in txs.iter().enumerate() {
                if t.is_idle() {
                    self.tx[i].next = None;
                } else if self.tx[i].next.is_none() {
                    let first = if now.since(start) < DurationNs::from_ms(1) {
                        now + start_jitter(&mut self.rng)
                    } else {
                        now + interval(t)
                    };
                    self.tx[i].next = Some(first);
                }
            }
            let wake = self
                .tx
                .iter()
                .filter_map(|t| t.next)
                .min()
                .unwrap_or(now + IDLE_WAKE)
                .min(now + IDLE_WAKE);
            if wake > now {
                clock::sleep_until(wake);
            }
            let snap = *lock(self.shared);
            if snap.done {
                break;
            }
            let now = clock::monotonic();
            let stopping = snap.action.is_stop();
            let mut sizes = std::mem::take(&mut self.sizes);
            sizes.clear();
            for (i, t) in [snap.row.tx1(), snap.row.tx2()].iter().enumerate() {
                let Some(mut next) = self.tx[i].next else {
                    continue;
                };
                if t.is_idle() {
                    self.tx[i].next = None;
                    continue;
                }
                if now.since(next) > MAX_BACKLOG {
                    next = now;
                }
                while next <= now && sizes.len() < MAX_BATCH {
                    let burst = if stopping { 1 } else { t.burst.min(MAX_BURST) };
                    for _ in 0..burst {
                        if let Some(s) = self.size(t.payload) {
                            sizes.push(s);
                        }
                    }
                    if i == 1 {
                        if let Some(s) = self.size(snap.row.tx2_addon) {
                            sizes.push(s);
                        }
                    }
                    next = next + interval(t);
                    if stopping {
                        // One firing per wake-up during a stop.
                        if next <= now {
                            next = now + interval(t);
                        }
                        break;
                    }
                }
                self.tx[i].next = Some(next);
            }
            // A stop with nothing due this wake still confirms at once.
            if snap.stop_once && sizes.is_empty() {
                sizes.push(
                    self.size(Payload::Fixed(pathsonde_core::Bytes::new(52)))
                        .unwrap_or(52),
                );
            }
            if snap.stop_once {
                sizes.truncate(1);
            }
            if !stopping {
                // Never past the byte limit while testing: keep the
                // datagrams that fit in what is left.
                let mut left = snap
                    .max_bytes
                    .saturating_sub(self.bytes_sent.load(Ordering::Relaxed));
                let fit = sizes
                    .iter()
                    .take_while(|&&n| {
                        let ok = n as u64 <= left;
                        left = left.saturating_sub(n as u64);
                        ok
                    })
                    .count();
                sizes.truncate(fit);
            }
            if !sizes.is_empty() {
                self.send(&snap, &sizes);
            }
            let sent_any = !sizes.is_empty();
            self.sizes = sizes;
            if !sent_any {
                continue;
            }
            if snap.stop_once {
                lock(self.shared).done = true;
                break;
            }
        }
        self.seq.wrapping_sub(1)
    }

    fn send(&mut self, snap: &TxShared, sizes: &[usize]) {
        let now_mono = clock::monotonic();
        let send_time = to_timestamp(clock::realtime());
        let resp_delay = match snap.status_at {
            Some(t) => now_mono.since(t),
            None => now_mono.since(self.activated),
        };
        let resp_delay_ms = ((resp_delay.ns().max(0) + 500_000) / 1_000_000).min(0xFFFF) as u16;
        if self.bufs.len() < sizes.len() {
            self.bufs.resize_with(sizes.len(), Vec::new);
        }
        let first = self.seq;
        for (k, &len) in sizes.iter().enumerate() {
            let buf = &mut self.bufs[k];
            buf.resize(len, 0);
            let h = LoadRepr {
                test_action: snap.action,
                rx_stopped: snap.rx_stopped,
                seq: first.wrapping_add(k as u32),
                payload_len: len as u16,
                status_loss: snap.status_loss,
                echo_time: snap.echo,
                send_time,
                resp_delay_ms,
            };
            let _ = h.emit_header(buf);
        }
        let refusals = self.batch.refusals();
        let sent = self
            .batch
            .send(self.sock, &self.bufs[..sizes.len()])
            .unwrap_or(0);
        if self.batch.refusals() != refusals {
            lock(self.shared).refused = true;
        }
        // Datagrams the kernel refused give back their sequence numbers
        // (spec §9.4, local back-pressure is not network loss).
        self.seq = first.wrapping_add(sent as u32);
        let bytes: usize = sizes[..sent.min(sizes.len())].iter().sum();
        self.bytes_sent.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// What the two load senders' steering loops do differently; every hook
/// runs on the steering thread while the sender thread sends.
pub(crate) trait SteerRole {
    type Out;
    /// The most bytes of a datagram read (the rest is cut off).
    fn buf_len(&self) -> usize;
    /// The sender thread could not be started.
    fn spawn_failed(&mut self) -> Self::Out;
    /// The checks at the top of each pass, before the receive.
    fn pass(&mut self, now: TimeNs, shared: &Mutex<TxShared>) -> Option<Self::Out>;
    /// A receive failed (a timeout, usually).
    fn recv_error(&mut self, e: &std::io::Error, shared: &Mutex<TxShared>) -> Option<Self::Out>;
    /// A datagram arrived: its Status PDU, if it is one (counted and
    /// warned about as the role does).
    fn datagram(&mut self, d: &[u8]) -> Option<StatusRepr>;
    /// A Status PDU arrived.
    fn status(&mut self, st: &StatusRepr, shared: &Mutex<TxShared>) -> Option<Self::Out>;
}

/// The sending half of one connection: where and what [`LoadSender`] sends.
pub(crate) struct SendSide<'a> {
    /// Connected to the peer.
    pub sock: &'a UdpSocket,
    pub shared: &'a Mutex<TxShared>,
    pub thread_name: String,
    pub v6: bool,
    /// CLOCK_MONOTONIC at activation.
    pub activated: TimeNs,
    pub bytes_sent: &'a AtomicU64,
    pub clamped: &'a AtomicU64,
}

/// Sends the load on its own thread while this one receives Status PDUs
/// (a 20 ms receive timeout) and steers the sender through `role`, until
/// `role` ends the test.  A panic in `role` stops the sender.
pub(crate) fn send_load<R: SteerRole>(side: SendSide<'_>, role: &mut R) -> R::Out {
    let SendSide {
        sock,
        shared,
        thread_name,
        v6,
        activated,
        bytes_sent,
        clamped,
    } = side;
    let _ = sock.set_read_timeout(Some(Duration::from_millis(20)));
    std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name(thread_name)
            .spawn_scoped(s, || {
                LoadSender::new(sock, shared, v6, activated, bytes_sent, clamped).run()
            });
        if spawned.is_err() {
            return role.spawn_failed();
        }
        let _stop_on_panic = StopSenderOnPanic(shared);
        let mut buf = [0u8; 512];
        let len = role.buf_len().min(buf.len());
        let buf = &mut buf[..len];
        loop {
            let now = clock::monotonic();
            if let Some(o) = role.pass(now, shared) {
                return o;
            }
            let len = match sock.recv(buf) {
                Ok(n) => n,
                Err(e) => match role.recv_error(&e, shared) {
                    Some(o) => return o,
                    None => continue,
                },
            };
            let Some(st) = role.datagram(&buf[..len]) else {
                continue;
            };
            if let Some(o) = role.status(&st, shared) {
                return o;
            }
        }
    })
}

fn interval(t: &Transmitter) -> DurationNs {
    if t.interval < MIN_INTERVAL {
        MIN_INTERVAL
    } else {
        t.interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathsonde_core::capacity::rate_table::{sending_rate, RowIndex, TableOptions};
    use std::time::Duration;

    #[test]
    fn the_path_mtu_bounds_the_payload() {
        // Loopback's MTU is 65536 unless someone lowered it: at least a
        // 1500-byte path's payload, and the headers taken off.
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let max = path_max_payload(&tx, false).expect("the kernel knows a connected socket's MTU");
        assert!((1472..=65536 - 28).contains(&max), "{max}");
        // An unconnected socket has no path: no answer, not a guess.
        assert_eq!(path_max_payload(&rx, false), None);
    }

    /// A panic in the steering loop stops the sender and ends the scope; a
    /// normal return leaves the sender to its own stop.
    #[test]
    fn a_panicking_steering_loop_stops_the_sender() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let row = sending_rate(RowIndex::new(5).unwrap(), TableOptions::default());
            let shared = Mutex::new(TxShared::new(row));
            let (bytes, clamped) = (AtomicU64::new(0), AtomicU64::new(0));
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                std::thread::scope(|s| {
                    s.spawn(|| {
                        LoadSender::new(&tx, &shared, false, clock::monotonic(), &bytes, &clamped)
                            .run()
                    });
                    let _guard = StopSenderOnPanic(&shared);
                    std::thread::sleep(Duration::from_millis(50));
                    panic!("a peer's counter overflowed");
                })
            }));
            let _ = done_tx.send((unwound.is_err(), lock(&shared).done));
        });
        // A hang is the failure: without the guard the scope never returns.
        let (unwound, done) = done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the scope returned once the steering loop panicked");
        assert!(unwound && done);

        // Not unwinding: the guard leaves `done` alone.
        let shared = Mutex::new(TxShared::new(sending_rate(
            RowIndex::new(5).unwrap(),
            TableOptions::default(),
        )));
        drop(StopSenderOnPanic(&shared));
        assert!(!lock(&shared).done);
    }

    /// A row's datagrams arrive at the row's rate, numbered from 1 without gaps.
    #[test]
    fn sends_a_row_at_its_rate() {
        /// Stops the sender however the receiving side ends, a failed
        /// assertion included: otherwise the scope would wait for it forever.
        struct StopOnDrop<'a>(&'a Mutex<TxShared>);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                lock(self.0).done = true;
            }
        }
        // Large buffers, so a receiving thread the machine delays loses nothing.
        let rx = crate::udp::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let row = sending_rate(RowIndex::new(20).unwrap(), TableOptions::default()); // 20 Mb/s
        let shared = Mutex::new(TxShared::new(row));
        let bytes = AtomicU64::new(0);
        let clamped = AtomicU64::new(0);
        let mut seqs = Vec::new();
        let mut total = 0u64;
        let mut bad_len = 0usize;
        let mut span = Duration::ZERO;
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&shared);
            s.spawn(|| {
                LoadSender::new(&tx, &shared, false, clock::monotonic(), &bytes, &clamped).run()
            });
            let mut buf = [0u8; 2048];
            let mut first: Option<std::time::Instant> = None;
            let t0 = std::time::Instant::now();
            while t0.elapsed() < Duration::from_millis(600) {
                if let Ok(len) = rx.recv(&mut buf) {
                    let now = std::time::Instant::now();
                    let first = *first.get_or_insert(now);
                    span = now - first;
                    let Ok(l) = LoadRepr::decode(&buf[..len]) else {
                        bad_len += 1;
                        continue;
                    };
                    seqs.push(l.seq);
                    if usize::from(l.payload_len) != len {
                        bad_len += 1;
                    }
                    total += len as u64 + 28;
                }
            }
        });
        assert_eq!(
            bad_len, 0,
            "datagrams whose payload_len is not their length"
        );
        assert_eq!(seqs.first(), Some(&1));
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "gaps or reordering"
        );
        // About 20 Mb/s at the IP layer over the span the datagrams arrived
        // in; generous bounds, since a shared machine delays threads.
        let mbps = total as f64 * 8.0 / span.as_secs_f64().max(1e-3) / 1e6;
        assert!(
            seqs.len() > 300 && (12.0..30.0).contains(&mbps),
            "{} datagrams, {mbps} Mb/s",
            seqs.len()
        );
    }
}
