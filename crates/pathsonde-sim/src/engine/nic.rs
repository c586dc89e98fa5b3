//! A host's receive NIC with interrupt coalescing (Intel AP-450; ICIM paper
//! II.B, Fig. 1).
//!
//! * **Absolute timer** (`RxAbsIntDelay`): armed by the first packet after an
//!   interrupt and not moved by later ones; when it expires every packet
//!   received since is handed to the host at once, all stamped with the
//!   interrupt's time.
//! * **Packet timer** (`RxIntDelay`): an idle timer re-armed by every packet.
//! * **Throttle** (`ITR`): interrupts at least this far apart.
//!
//! The interrupt fires at the earlier of the armed timers, but not before
//! the throttle allows.  With all three zero every packet is handed up the
//! moment its last bit arrives.  Timers are lazy: one pending event per NIC,
//! re-checked when it fires, so a burst of arrivals costs no extra events.

use super::queue::Ev;
use super::Sim;
use crate::scenario::NicConfig;
use crate::time::Ps;

#[derive(Debug)]
pub(crate) struct Nic {
    cfg: NicConfig,
    buf: Vec<u32>,
    first_arrival: Ps,
    abs_deadline: Ps,
    pkt_deadline: Ps,
    pending: bool,
    last_irq: Option<Ps>,
    /// Interrupts raised and packets handed up, for reports.
    pub(crate) interrupts: u64,
    pub(crate) packets: u64,
}

impl Nic {
    pub(crate) fn new(cfg: NicConfig) -> Nic {
        Nic {
            cfg,
            buf: Vec::with_capacity(256),
            first_arrival: Ps::ZERO,
            abs_deadline: Ps::ZERO,
            pkt_deadline: Ps::ZERO,
            pending: false,
            last_irq: None,
            interrupts: 0,
            packets: 0,
        }
    }

    fn due(&self) -> Ps {
        let mut t = Ps::MAX;
        if self.cfg.rx_abs_delay > Ps::ZERO {
            t = t.min(self.abs_deadline);
        }
        if self.cfg.rx_pkt_delay > Ps::ZERO {
            t = t.min(self.pkt_deadline);
        }
        if t == Ps::MAX {
            t = self.first_arrival;
        }
        if let Some(last) = self.last_irq {
            t = t.max(last + self.cfg.throttle);
        }
        t
    }
}

impl Sim {
    pub(crate) fn nic_arrival(&mut self, h: usize, id: u32) {
        let now = self.now;
        let nic = &mut self.nics[h];
        if !nic.cfg.coalesces() {
            nic.interrupts += 1;
            nic.packets += 1;
            self.host_receive(h, id);
            self.after_batch(h);
            return;
        }
        if nic.buf.is_empty() {
            nic.first_arrival = now;
            nic.abs_deadline = now + nic.cfg.rx_abs_delay;
        }
        nic.pkt_deadline = now + nic.cfg.rx_pkt_delay;
        nic.buf.push(id);
        if !nic.pending {
            nic.pending = true;
            let due = nic.due().max(now);
            self.q.push(due, Ev::NicFire { host: h as u8 });
        }
    }

    pub(crate) fn nic_fire(&mut self, h: usize) {
        let now = self.now;
        let nic = &mut self.nics[h];
        let due = nic.due();
        if due > now {
            self.q.push(due, Ev::NicFire { host: h as u8 });
            return;
        }
        nic.pending = false;
        nic.last_irq = Some(now);
        nic.interrupts += 1;
        let mut batch = std::mem::take(&mut nic.buf);
        nic.packets += batch.len() as u64;
        for &id in &batch {
            self.host_receive(h, id);
        }
        batch.clear();
        // Hand the (empty) buffer back so its capacity is reused.
        let nic = &mut self.nics[h];
        if nic.buf.is_empty() {
            nic.buf = batch;
        }
        self.after_batch(h);
    }

    /// (interrupts, packets) handed up by host `h`'s NIC so far.
    pub fn nic_counts(&self, h: usize) -> (u64, u64) {
        (self.nics[h].interrupts, self.nics[h].packets)
    }
}
