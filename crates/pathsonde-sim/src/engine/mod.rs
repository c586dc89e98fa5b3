//! The discrete-event path model: links with drop-tail byte-limited FIFOs,
//! store-and-forward routers (optionally forwarding only on the ticks of a
//! service clock), cross-traffic sources, probe cars from the sender host,
//! and the two hosts' receive NICs.
//!
//! [`Sim`] is split by job into children of this module, each adding its
//! own `impl Sim` block and seeing the engine's private state, never each
//! other's: `queue` (the event heap), `nic` (receive coalescing), `tcp`
//! (Reno senders with ICIM), `stream` (a constant-rate stream's stamps);
//! `tests` check the engine against hand-worked cases.
//!
//! Nodes are numbered 0 (sender host) to `n` (receiver host); forward link
//! `i` runs from node `i` to node `i + 1` and is the output queue of node
//! `i`; reverse link `i` (index `n + i`) runs from node `i + 1` back to node
//! `i` and carries ACKs.  A packet knows where it leaves the path (`exit`).
//!
//! The hot loop touches only flat vectors: events are 8–12-byte `Copy`
//! values in a binary heap, packets live in a slab and are named by index,
//! and queues are `VecDeque<u32>` whose buffers are reused, so a running
//! simulation allocates nothing per event.

mod nic;
mod queue;
mod stream;
mod tcp;

pub use stream::StreamStamp;
pub use tcp::TcpStats;

use crate::scenario::{HostConfig, Scenario};
use crate::time::{rate_bps, ByteTime, Ps};
use nic::Nic;
use pathsonde_core::rng::SplitMix64;
use pathsonde_core::traffic::Schedule;
use pathsonde_core::BitRate;
use queue::{Ev, EventQueue};
use std::collections::VecDeque;
use tcp::TcpConn;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("link {link}: cannot read trace {path}: {why}")]
    Trace {
        link: usize,
        path: String,
        why: String,
    },
    #[error("link {0}: a rate below 1 b/s")]
    Rate(usize),
    #[error("{0}")]
    Plan(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Probe,
    Cross,
    Data,
    Ack,
}

/// One packet in flight.  `Copy`, 32 bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Packet {
    pub(crate) seq: u64,
    pub(crate) size: u32,
    pub(crate) hop: u16,
    pub(crate) exit: u16,
    pub(crate) conn: u16,
    pub(crate) kind: Kind,
    pub(crate) fwd: bool,
    /// Counts as cross traffic in the ground truth.
    pub(crate) cross: bool,
}

/// What a link has carried, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkStats {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub drops: u64,
    pub max_queue_bytes: u64,
}

pub(crate) struct Link {
    bt: ByteTime,
    pub(crate) rate_bps: u64,
    delay: Ps,
    /// The queue limit as transmission time.
    limit_ps: Ps,
    /// When the link has sent everything it has been given.
    free_at: Ps,
    max_backlog: Ps,
    /// Packets on their way to the far end, with their arrival times.
    pipe: VecDeque<(Ps, u32)>,
    /// Service clock of the router feeding this link.
    clock: Option<Ps>,
    pub(crate) stats: LinkStats,
    /// Cross-traffic bytes offered to this link per truth bin.
    pub(crate) truth: Vec<u64>,
}

enum CrossGen {
    Model(Box<Schedule>),
    Trace {
        pkts: std::sync::Arc<Vec<(Ps, u32)>>,
        i: usize,
    },
}

struct CrossSrc {
    gen: CrossGen,
    link: u16,
    exit: u16,
    next_size: u32,
}

impl CrossSrc {
    fn pull(&mut self) -> Option<(Ps, u32)> {
        match &mut self.gen {
            CrossGen::Model(s) => s.next().map(|p| {
                (
                    Ps::from_duration(p.at),
                    p.size.get().min(u64::from(u32::MAX)) as u32,
                )
            }),
            CrossGen::Trace { pkts, i } => {
                let p = pkts.get(*i).copied();
                *i += 1;
                p
            }
        }
    }
}

/// The probe currently being carried.
#[derive(Debug, Default)]
pub(crate) struct ProbeRun {
    pub(crate) sent: Vec<Ps>,
    pub(crate) recv: Vec<Ps>,
    pub(crate) car_of: Vec<u32>,
    /// First packet and packet count of each car.
    pub(crate) cars: Vec<(u32, u32)>,
    pub(crate) size: u32,
    pub(crate) outstanding: u64,
}

/// Most truth bins a link keeps (800 MB of counters at most).
const MAX_TRUTH_BINS: usize = 100_000_000;

/// Not received (yet).
pub(crate) const NEVER: Ps = Ps::MAX;

/// A simulated path.
pub struct Sim {
    pub(crate) now: Ps,
    pub(crate) q: EventQueue,
    pub(crate) pkts: Vec<Packet>,
    free: Vec<u32>,
    pub(crate) links: Vec<Link>,
    pub(crate) n: usize,
    pub(crate) nics: [Nic; 2],
    pub(crate) hosts: [HostConfig; 2],
    cross: Vec<CrossSrc>,
    pub(crate) probe: ProbeRun,
    pub(crate) tcp: Vec<TcpConn>,
    pub(crate) touched: Vec<u16>,
    pub(crate) rng: SplitMix64,
    host_busy: Ps,
    pub(crate) truth_bin: Ps,
    /// The truth bin of the last lookup and its span `[lo, hi)`: the clock
    /// stays in one bin for many packets, and this saves a 64-bit division
    /// per cross packet.
    bin_cache: (Ps, Ps, usize),
    pub(crate) events: u64,
    pub(crate) mss: u32,
}

fn load_trace(path: &std::path::Path, link: usize) -> Result<Vec<(Ps, u32)>, SimError> {
    let err = |why: String| SimError::Trace {
        link,
        path: path.display().to_string(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let mut out = Vec::new();
    let mut last = Ps::ZERO;
    for (no, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut it = line.split(|c: char| c.is_whitespace() || c == ',');
        let mut fields = it.by_ref().filter(|s| !s.is_empty());
        let (Some(t), Some(s)) = (fields.next(), fields.next()) else {
            return Err(err(format!("line {}: expected `time size`", no + 1)));
        };
        let t: f64 = t
            .parse()
            .map_err(|_| err(format!("line {}: time `{t}` is not seconds", no + 1)))?;
        let s: u32 = s
            .parse()
            .map_err(|_| err(format!("line {}: size `{s}` is not bytes", no + 1)))?;
        if !(t.is_finite() && (0.0..=1e6).contains(&t) && (29..=65_535).contains(&s)) {
            return Err(err(format!(
                "line {}: time must be in [0, 1e6] s and size in 29..=65535 B",
                no + 1
            )));
        }
        let ps = Ps::from_secs_f64(t);
        if ps < last {
            return Err(err(format!("line {}: times go backwards", no + 1)));
        }
        last = ps;
        out.push((ps, s));
        if out.len() > 50_000_000 {
            return Err(err("more than 50 M packets".into()));
        }
    }
    Ok(out)
}

impl Sim {
    /// Builds the path of `scn` with random streams from `seed` (the
    /// scenario's own seed is ignored here; callers pass it or a sweep's).
    pub fn new(scn: &Scenario, seed: u64) -> Result<Sim, SimError> {
        let n = scn.links.len();
        let bins = (scn.duration / scn.truth_bin + 2) as usize;
        let mut links = Vec::with_capacity(2 * n);
        for dir in 0..2 {
            for (i, l) in scn.links.iter().enumerate() {
                let r = rate_bps(l.rate);
                let bt = ByteTime::for_rate(r).ok_or(SimError::Rate(i))?;
                links.push(Link {
                    bt,
                    rate_bps: r,
                    delay: l.delay,
                    limit_ps: bt.of(l.queue.get()),
                    free_at: Ps::ZERO,
                    max_backlog: Ps::ZERO,
                    pipe: VecDeque::with_capacity(1024),
                    clock: if dir == 0 { l.service_clock } else { None },
                    stats: LinkStats::default(),
                    truth: if dir == 0 { vec![0; bins] } else { Vec::new() },
                });
            }
        }
        let mut sim = Sim {
            now: Ps::ZERO,
            q: EventQueue::with_capacity(4096),
            pkts: Vec::with_capacity(1 << 16),
            free: Vec::with_capacity(1 << 16),
            links,
            n,
            nics: [Nic::new(scn.sender.nic), Nic::new(scn.receiver.nic)],
            hosts: [scn.sender, scn.receiver],
            cross: Vec::new(),
            probe: ProbeRun::default(),
            tcp: Vec::new(),
            touched: Vec::new(),
            rng: SplitMix64::for_stream(seed, 0xC0FFEE),
            host_busy: Ps::ZERO,
            truth_bin: scn.truth_bin,
            bin_cache: (Ps::from_ps(1), Ps::ZERO, 0),
            events: 0,
            mss: scn.mtu.get() as u32,
        };
        let mut stream = 0u64;
        for (i, l) in scn.links.iter().enumerate() {
            for c in &l.cross {
                stream += 1;
                let s = SplitMix64::for_stream(seed, stream).next_u64();
                if let Some(sched) = c.model.schedule(s) {
                    sim.add_cross(CrossGen::Model(Box::new(sched)), i, i + c.hops);
                }
            }
            if let Some(path) = &l.trace {
                let pkts = load_trace(path, i)?;
                sim.add_cross(
                    CrossGen::Trace {
                        pkts: std::sync::Arc::new(pkts),
                        i: 0,
                    },
                    i,
                    i + 1,
                );
            }
        }
        let mut conn = 0u16;
        let mut starts = SplitMix64::for_stream(seed, 0x7C9_57A7);
        for t in &scn.tcp {
            for _ in 0..t.flows {
                let start = t.start
                    + if t.start_jitter > Ps::ZERO {
                        Ps::from_ps(starts.below(t.start_jitter.ps() + 1))
                    } else {
                        Ps::ZERO
                    };
                sim.tcp.push(TcpConn::new(
                    t.icim.then_some(scn.icim),
                    scn.mtu.get() as u32,
                    t.window,
                    t.ssthresh,
                    scn.links[0].rate.bps(),
                ));
                sim.q.push(start, Ev::TcpStart { conn });
                conn += 1;
            }
        }
        Ok(sim)
    }

    fn add_cross(&mut self, mut gen: CrossGen, link: usize, exit: usize) {
        let mut src = CrossSrc {
            gen: CrossGen::Trace {
                pkts: Default::default(),
                i: 0,
            },
            link: link as u16,
            exit: exit as u16,
            next_size: 0,
        };
        std::mem::swap(&mut src.gen, &mut gen);
        if let Some((t, size)) = src.pull() {
            src.next_size = size;
            let id = self.cross.len() as u16;
            self.cross.push(src);
            self.q.push(t, Ev::Cross { src: id });
        }
    }

    /// Simulated time now.
    pub fn now(&self) -> Ps {
        self.now
    }

    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Packet events: every packet's passage through a link (forward and
    /// reverse), dropped or carried, plus every packet a NIC handed up.
    pub fn packet_events(&self) -> u64 {
        let links: u64 = self
            .links
            .iter()
            .map(|l| l.stats.tx_packets + l.stats.drops)
            .sum();
        links + self.nics[0].packets + self.nics[1].packets
    }

    /// Number of forward links.
    pub fn hops(&self) -> usize {
        self.n
    }

    /// Counters of forward link `i`.
    pub fn link_stats(&self, i: usize) -> LinkStats {
        let l = &self.links[i];
        LinkStats {
            max_queue_bytes: (l.max_backlog.ps() as f64 * l.rate_bps as f64 / 8e12) as u64,
            ..l.stats
        }
    }

    pub fn link_rate(&self, i: usize) -> BitRate {
        BitRate::from_bps(self.links[i].rate_bps as f64)
    }

    #[inline]
    pub(crate) fn alloc(&mut self, p: Packet) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.pkts[i as usize] = p;
                i
            }
            None => {
                self.pkts.push(p);
                (self.pkts.len() - 1) as u32
            }
        }
    }

    #[inline]
    pub(crate) fn release(&mut self, id: u32) {
        self.free.push(id);
    }

    /// Runs every event due at or before `until`, then sets the clock to it.
    pub fn run_until(&mut self, until: Ps) {
        while let Some(t) = self.q.peek_time() {
            if t > until {
                break;
            }
            self.step();
        }
        self.now = self.now.max(until);
    }

    /// Runs while the probe has packets in flight, up to `deadline`.
    pub(crate) fn run_probe(&mut self, deadline: Ps) {
        while self.probe.outstanding > 0 {
            match self.q.peek_time() {
                Some(t) if t <= deadline => self.step(),
                _ => break,
            }
        }
    }

    #[inline]
    pub(crate) fn step(&mut self) {
        let Some((t, ev)) = self.q.pop() else { return };
        self.now = t;
        self.events += 1;
        match ev {
            Ev::PipeOut { link } => self.pipe_out(link as usize),
            Ev::NicFire { host } => self.nic_fire(host as usize),
            Ev::Cross { src } => self.cross_emit(src as usize),
            Ev::ProbeCar { car } => self.probe_car(car as usize),
            Ev::TcpStart { conn } => self.tcp_start(conn as usize),
            Ev::TcpRto { conn } => self.tcp_rto(conn as usize),
            Ev::TcpDelAck { conn } => self.tcp_delack(conn as usize),
        }
    }

    fn cross_emit(&mut self, src: usize) {
        let s = &mut self.cross[src];
        let (link, exit, size) = (s.link, s.exit, s.next_size);
        let next = s.pull();
        if let Some((t, sz)) = next {
            s.next_size = sz;
            self.q.push(t.max(self.now), Ev::Cross { src: src as u16 });
        }
        if usize::from(exit) == usize::from(link) + 1 {
            // The common case: a one-hop source, whose packets leave the
            // path right after their link.  No slab slot, no packet copy.
            self.cross_one_hop(link as usize, size);
            return;
        }
        let id = self.alloc(Packet {
            seq: 0,
            size,
            hop: link,
            exit,
            conn: 0,
            kind: Kind::Cross,
            fwd: true,
            cross: true,
        });
        self.enqueue(link as usize, id);
    }

    /// `now / truth_bin`, from the cached bin when `now` is still in it.
    #[inline]
    fn truth_bin_now(&mut self) -> usize {
        let now = self.now;
        let (lo, hi, bin) = self.bin_cache;
        if lo <= now && now < hi {
            return bin;
        }
        let w = self.truth_bin;
        let b = now / w;
        let lo = b * w;
        self.bin_cache = (lo, lo.saturating_add(w), b as usize);
        b as usize
    }

    /// What [`Sim::enqueue`] does with a cross-traffic packet that leaves
    /// the path right after forward link `l`: the truth, drop-tail and the
    /// link's counters, the same arithmetic in the same order.
    #[inline]
    fn cross_one_hop(&mut self, l: usize, size: u32) {
        let now = self.now;
        let bin = self.truth_bin_now();
        let link = &mut self.links[l];
        if bin >= link.truth.len() && bin < MAX_TRUTH_BINS {
            link.truth.resize((bin + 1).max(link.truth.len() * 2), 0);
        }
        if let Some(b) = link.truth.get_mut(bin) {
            *b += u64::from(size);
        }
        let size = u64::from(size);
        let start = now.max(link.free_at);
        let backlog = start - now;
        let tx = link.bt.of(size);
        if backlog > Ps::ZERO && backlog + tx > link.limit_ps {
            link.stats.drops += 1;
            return;
        }
        link.max_backlog = link.max_backlog.max(backlog);
        link.free_at = start + tx;
        link.stats.tx_packets += 1;
        link.stats.tx_bytes += size;
    }

    /// A packet joins the queue of link `l` (index into `links`).
    ///
    /// A FIFO link of constant rate is fully determined by its arrivals
    /// (Lindley's recursion): a packet starts onto the wire when the link
    /// has finished everything ahead of it (`free_at`) and its last bit
    /// reaches the far end one serialisation time plus the propagation delay
    /// later.  So a link needs no per-packet departure event: the packet goes
    /// straight into the link's delay line, and the only event it costs is
    /// its arrival at the next node.  Drop-tail compares the unfinished work
    /// ahead of the packet plus the packet itself with the queue limit.
    #[inline]
    pub(crate) fn enqueue(&mut self, l: usize, id: u32) {
        let p = self.pkts[id as usize];
        let now = self.now;
        let bin_w = self.truth_bin;
        let n = self.n;
        let link = &mut self.links[l];
        if p.cross && p.fwd {
            let bin = (now / bin_w) as usize;
            if bin >= link.truth.len() && bin < MAX_TRUTH_BINS {
                // Past the scenario's duration (a method finishing its
                // last estimate): grow, amortised.
                link.truth.resize((bin + 1).max(link.truth.len() * 2), 0);
            }
            if let Some(b) = link.truth.get_mut(bin) {
                *b += u64::from(p.size);
            }
        }
        let size = u64::from(p.size);
        let start = now.max(link.free_at);
        let backlog = start - now;
        let tx = link.bt.of(size);
        if backlog > Ps::ZERO && backlog + tx > link.limit_ps {
            link.stats.drops += 1;
            self.dropped(id);
            return;
        }
        link.max_backlog = link.max_backlog.max(backlog);
        let end = start + tx;
        link.free_at = end;
        link.stats.tx_packets += 1;
        link.stats.tx_bytes += size;
        let arrive = end + link.delay;
        if l == 0 && p.kind == Kind::Probe {
            self.probe.sent[p.seq as usize] = start;
        }
        // Where the packet goes after this link: exits of cross traffic
        // leave at once; everything else enters the link's delay line.
        let (node, next_link) = if p.fwd {
            let node = usize::from(p.hop) + 1;
            (node, node)
        } else {
            let node = usize::from(p.hop);
            (node, (n + node).wrapping_sub(1))
        };
        let at = if node == usize::from(p.exit) {
            if p.kind == Kind::Cross || (node != 0 && node != n) {
                self.release(id);
                return;
            }
            arrive
        } else {
            let pk = &mut self.pkts[id as usize];
            pk.hop = if p.fwd {
                node as u16
            } else {
                (node - 1) as u16
            };
            match self.links[next_link].clock {
                Some(period) => arrive.ceil_to(period),
                None => arrive,
            }
        };
        let pipe = &mut self.links[l].pipe;
        pipe.push_back((at, id));
        if pipe.len() == 1 {
            self.q.push(at, Ev::PipeOut { link: l as u16 });
        }
    }

    fn dropped(&mut self, id: u32) {
        if self.pkts[id as usize].kind == Kind::Probe {
            self.probe.outstanding -= 1;
        }
        self.release(id);
    }

    /// The packet at the far end of link `l`'s delay line arrives at the
    /// next node: a router's queue or a host's NIC.  A link's delay is
    /// constant and a service clock's rounding keeps order, so its packets
    /// arrive in the order they left and one pending event per link suffices
    /// (the heap holds O(links + sources) events, not one per packet in
    /// flight).
    fn pipe_out(&mut self, l: usize) {
        let Some((_, id)) = self.links[l].pipe.pop_front() else {
            return;
        };
        if let Some(&(next, _)) = self.links[l].pipe.front() {
            self.q.push(next, Ev::PipeOut { link: l as u16 });
        }
        let n = self.n;
        let p = self.pkts[id as usize];
        let node = if l < n { l + 1 } else { l - n };
        if node == usize::from(p.exit) {
            self.nic_arrival(if node == 0 { 0 } else { 1 }, id);
        } else {
            let next_link = if p.fwd { node } else { n + node - 1 };
            self.enqueue(next_link, id);
        }
    }

    /// Sends a packet from host 0 forward (to the receiver) or from host 1
    /// back (to the sender).
    pub(crate) fn host_send(&mut self, from_receiver: bool, p: Packet) {
        let id = self.alloc(p);
        let l = if from_receiver { 2 * self.n - 1 } else { 0 };
        self.enqueue(l, id);
    }

    /// Schedules the cars of a probe from `start`, with the sender host's
    /// timer grid, send-call cost and jitter.  Returns the time the last car
    /// reaches the NIC.
    pub(crate) fn schedule_probe(&mut self, sched: &pathsonde_core::ScheduleSpec, start: Ps) -> Ps {
        let h = self.hosts[0];
        let total = sched.total_packets() as usize;
        let pr = &mut self.probe;
        pr.sent.clear();
        pr.sent.resize(total, NEVER);
        pr.recv.clear();
        pr.recv.resize(total, NEVER);
        pr.car_of.clear();
        pr.cars.clear();
        pr.size = sched.packet_size.get() as u32;
        pr.outstanding = total as u64;
        let mut first = 0u32;
        let start = start + Ps::from_duration(sched.idle_before);
        let mut last = start;
        for (k, car) in sched.cars.iter().enumerate() {
            let want = start + Ps::from_duration(car.offset);
            let grid = want.ceil_to(h.timer_resolution);
            let jitter = if h.jitter > Ps::ZERO {
                Ps::from_ps(self.rng.below(h.jitter.ps() + 1))
            } else {
                Ps::ZERO
            };
            let t = (grid + jitter).max(self.host_busy) + h.syscall;
            self.host_busy = t;
            last = t;
            self.probe.cars.push((first, car.packets));
            for _ in 0..car.packets {
                self.probe.car_of.push(k as u32);
            }
            first += car.packets;
            self.q.push(t, Ev::ProbeCar { car: k as u32 });
        }
        last
    }

    fn probe_car(&mut self, car: usize) {
        let (first, count) = self.probe.cars[car];
        let size = self.probe.size;
        let exit = self.n as u16;
        for s in first..first + count {
            // Stamped again when it starts onto the wire.
            self.probe.sent[s as usize] = self.now;
            self.host_send(
                false,
                Packet {
                    seq: u64::from(s),
                    size,
                    hop: 0,
                    exit,
                    conn: 0,
                    kind: Kind::Probe,
                    fwd: true,
                    cross: false,
                },
            );
        }
    }

    /// A packet handed up by host `h`'s NIC at `now`.
    pub(crate) fn host_receive(&mut self, h: usize, id: u32) {
        let p = self.pkts[id as usize];
        self.release(id);
        match p.kind {
            Kind::Probe => {
                let r = &mut self.probe.recv[p.seq as usize];
                if *r == NEVER {
                    *r = self.now;
                    self.probe.outstanding -= 1;
                }
            }
            Kind::Data if h == 1 => self.tcp_data(p.conn as usize, p.seq),
            Kind::Ack if h == 0 => self.tcp_ack(p.conn as usize, p.seq),
            _ => {}
        }
    }

    /// Cross-traffic bytes offered to forward link `l` over `[t0, t1)`,
    /// with partial bins taken in proportion.
    pub fn cross_bytes(&self, l: usize, t0: Ps, t1: Ps) -> f64 {
        let bins = &self.links[l].truth;
        let w = self.truth_bin;
        if t1 <= t0 {
            return 0.0;
        }
        let (b0, b1) = ((t0 / w) as usize, (t1 / w) as usize);
        let get = |b: usize| bins.get(b).copied().unwrap_or(0) as f64;
        let w_f = w.ps() as f64;
        if b0 == b1 {
            return get(b0) * (t1 - t0).ps() as f64 / w_f;
        }
        let mut sum = get(b0) * ((b0 as u64 + 1) * w - t0).ps() as f64 / w_f;
        for b in b0 + 1..b1.min(bins.len()) {
            sum += get(b);
        }
        sum + get(b1) * (t1 - b1 as u64 * w).ps() as f64 / w_f
    }

    /// Available bandwidth of forward link `l` over `[t0, t1)`: its rate
    /// minus the cross traffic offered to it.
    pub fn link_available(&self, l: usize, t0: Ps, t1: Ps) -> BitRate {
        let span = t1.saturating_sub(t0).as_secs_f64();
        if span <= 0.0 {
            return BitRate::ZERO;
        }
        let x = self.cross_bytes(l, t0, t1) * 8.0 / span;
        BitRate::from_bps((self.links[l].rate_bps as f64 - x).max(0.0))
    }

    /// The path's available bandwidth over `[t0, t1)`: the least over its
    /// links, and which link that is (the tight link).
    pub fn path_available(&self, t0: Ps, t1: Ps) -> (BitRate, usize) {
        (0..self.n)
            .map(|l| (self.link_available(l, t0, t1), l))
            .min_by(|a, b| a.0.bps().total_cmp(&b.0.bps()))
            .unwrap_or((BitRate::ZERO, 0))
    }

    /// Rounds a time to whole nanoseconds (for stamps).
    pub fn round_ns(t: Ps) -> Ps {
        t.floor_to(Ps::NS)
    }
}

#[cfg(test)]
mod tests;
