//! The host verdict of a throughput flow (`udp`, `tcp`, `measure`'s flows):
//! did a host, not the path, set the rate the flow reached?
//!
//! Jin & Tierney's system-capability paper: a tool at speed measures its
//! own hosts unless it checks them.  A flow carries its own evidence, and
//! this module reads it; nothing here is a capability test run beside it:
//! - **UDP, the sender's reach**: the rate asked (`-b`) against what the
//!   sender put out.  A sender that fell short while the path carried what
//!   it sent shows only that the path carries *at least* that much.
//! - **UDP, the receiver's own drops**: datagrams the receiving socket
//!   dropped because its buffer was full (the kernel's per-socket count,
//!   `SO_RXQ_OVFL`'s figure) are the receiving host's loss, not the path's.
//! - **TCP, the windows**: the kernel's own account of the time a stream
//!   was limited by the receiver's advertised window or by the sender's
//!   send buffer (`tcpi_rwnd_limited`, `tcpi_sndbuf_limited` against
//!   `tcpi_busy_time`).  A stream held by a window most of its busy time
//!   moved what the window allowed over the RTT, not what the path carries.
//!
//! Pure: the caller gathers the figures (`pathsonde_net::throughput`).

use super::{rate_words, HostLimit, HostRole, Resource, Verdict};
use crate::units::{BitRate, DurationNs};

/// A UDP sender more than this fraction below the rate asked fell short.
pub const SENDER_SHORTFALL: f64 = 0.05;
/// A UDP flow that lost at most this fraction on the path was carried: the
/// path could take what the sender put out.
pub const CARRIED_LOSS: f64 = 0.01;
/// A TCP stream limited by a window for at least this share of its busy
/// time moved what the window allowed.
pub const WINDOW_LIMITED_SHARE: f64 = 0.5;

/// Which transport the flow used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowKind {
    Udp,
    Tcp,
}

/// What one flow showed of its hosts, as plain numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowEvidence {
    pub kind: FlowKind,
    /// Which end sent (the client unless the flow ran reversed).
    pub sender: HostRole,
    /// UDP: the rate asked for (all streams); `None` for TCP.
    pub target: Option<BitRate>,
    /// What the sender put out over its span.
    pub sent: BitRate,
    /// What the receiver got over its span (the flow's throughput).
    pub received: BitRate,
    /// UDP: datagrams sent and received (all streams).
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    /// UDP: datagrams the receiving socket dropped itself; `None` when the
    /// receiver could not count them (another OS, an older peer).
    pub receiver_drops: Option<u64>,
    /// TCP, summed over the sender's streams: the time the kernel counted
    /// the streams busy, and limited by the receive window / send buffer.
    pub busy: DurationNs,
    pub rwnd_limited: DurationNs,
    pub sndbuf_limited: DurationNs,
    /// TCP: the most the receiving socket could buffer (the window asked
    /// with `-w`, else the receiver's `net.ipv4.tcp_rmem` maximum), bytes,
    /// and the sender's smoothed RTT; they tell a window the buffer capped
    /// from one a slow reader kept full.
    pub receive_buffer_cap: Option<u64>,
    pub rtt: Option<DurationNs>,
}

impl FlowEvidence {
    fn receiver(&self) -> HostRole {
        self.sender.peer()
    }

    /// Datagrams lost between the sending socket and the receiving one.
    fn lost(&self) -> u64 {
        self.datagrams_sent.saturating_sub(self.datagrams_received)
    }

    /// Of those, the ones the path lost: not dropped by the receiving host.
    fn path_lost(&self) -> u64 {
        self.lost()
            .saturating_sub(self.receiver_drops.unwrap_or(0).min(self.lost()))
    }
}

/// Every host limit the flow's evidence shows, binding ones first.  A
/// binding limit ([`Verdict::is_host_limited`]) means the flow's throughput
/// is the host's: the path carries at least that much.
pub fn judge_flow(e: &FlowEvidence) -> Verdict {
    let mut limits = match e.kind {
        FlowKind::Udp => udp_limits(e),
        FlowKind::Tcp => tcp_limits(e),
    };
    limits.sort_by_key(|l| !l.binds_result);
    Verdict { limits }
}

fn udp_limits(e: &FlowEvidence) -> Vec<HostLimit> {
    let mut limits = Vec::new();
    let sent = e.datagrams_sent.max(1) as f64;
    let path_loss = e.path_lost() as f64 / sent;
    if let Some(target) = e.target.filter(|t| t.bps() > 0.0) {
        let reach = e.sent.bps() / target.bps();
        if e.datagrams_sent > 0 && reach < 1.0 - SENDER_SHORTFALL {
            let carried = path_loss <= CARRIED_LOSS;
            let so = if carried {
                format!(
                    "and the path carried it (it lost {:.2} %): the path carries at least {}; the sender, not the path, set that figure",
                    path_loss * 100.0,
                    rate_words(e.received)
                )
            } else {
                format!(
                    "yet the path still lost {:.1} % of it: the path's limit was reached even so",
                    path_loss * 100.0
                )
            };
            limits.push(HostLimit {
                host: e.sender,
                resource: Resource::Pacing,
                limit_bps: e.sent,
                binds_result: carried,
                why: format!(
                    "The {} (sender) was asked for {} and put out only {} ({:.0} %), {so}.",
                    e.sender,
                    rate_words(target),
                    rate_words(e.sent),
                    reach * 100.0
                ),
                fix: Some(
                    "Send larger datagrams (--packet-size, up to the path MTU), pin the sender to an idle core, or send from a faster host."
                        .into(),
                ),
            });
        }
    }
    if let Some(drops) = e.receiver_drops.filter(|d| *d > 0) {
        let lost = e.lost().max(drops);
        // Most of the loss was the receiving host's: the throughput (and
        // the loss a user reads as the path's) is the receiver's.
        let binds = 2 * drops >= lost;
        limits.push(HostLimit {
            host: e.receiver(),
            resource: Resource::Receiver,
            limit_bps: e.received,
            binds_result: binds,
            why: format!(
                "The {} (receiver) dropped {drops} of the {lost} datagrams lost itself, its socket's receive buffer full ({:.2} % of those sent): that loss is the receiving host's, not the path's{}.",
                e.receiver(),
                drops as f64 / sent * 100.0,
                if binds {
                    ", and the throughput may be the receiver's"
                } else {
                    ""
                }
            ),
            fix: Some(
                "Raise net.core.rmem_max and the socket buffer (-w), pin the receiver to an idle core, or receive on a faster host."
                    .into(),
            ),
        });
    }
    limits
}

/// A receive buffer this many times the flow's bandwidth-delay product or
/// more did not cap its window: a window that stayed full was kept full by
/// a reader slower than the path.  (A buffer-capped flow moves about half
/// its buffer per round trip, the rest being the kernel's overhead.)
const ROOMY_BUFFER_BDPS: f64 = 4.0;

fn tcp_limits(e: &FlowEvidence) -> Vec<HostLimit> {
    let mut limits = Vec::new();
    let busy = e.busy.secs_f64();
    if busy <= 0.0 {
        return limits;
    }
    let share = |limited: DurationNs| limited.secs_f64() / busy;
    let at_least = rate_words(e.received);
    let rwnd = share(e.rwnd_limited);
    if rwnd >= WINDOW_LIMITED_SHARE {
        let bdp = e.rtt.map(|rtt| e.received.bps() / 8.0 * rtt.secs_f64());
        let slow_reader = match (e.receive_buffer_cap, bdp) {
            (Some(cap), Some(bdp)) if bdp > 0.0 => cap as f64 >= ROOMY_BUFFER_BDPS * bdp,
            _ => false,
        };
        let receiver = e.receiver();
        limits.push(if slow_reader {
            HostLimit {
                host: receiver,
                resource: Resource::Receiver,
                limit_bps: e.received,
                binds_result: true,
                why: format!(
                    "The {receiver}'s (receiver) receive window held the flow back {:.0} % of its busy time (the kernel's count) with a buffer of {} — many times the flow's bandwidth-delay product — so the receiving application, not the buffer or the path, kept it full: the path carries at least {at_least}.",
                    rwnd.min(1.0) * 100.0,
                    e.receive_buffer_cap.map_or("?".into(), super::kib),
                ),
                fix: Some("Pin the receiver to an idle core, run fewer things beside it, or receive on a faster host.".into()),
            }
        } else {
            HostLimit {
                host: receiver,
                resource: Resource::SocketBuffer,
                limit_bps: e.received,
                binds_result: true,
                why: format!(
                    "The {receiver}'s (receiver) receive window held the flow back {:.0} % of its busy time (the kernel's count): the throughput is what that buffer moves per round trip, so the path carries at least {at_least}.",
                    rwnd.min(1.0) * 100.0
                ),
                fix: Some("Raise the receiver's net.ipv4.tcp_rmem maximum (and net.core.rmem_max for -w), or ask for a larger window (-w).".into()),
            }
        });
    }
    let sndbuf = share(e.sndbuf_limited);
    if sndbuf >= WINDOW_LIMITED_SHARE {
        let sender = e.sender;
        limits.push(HostLimit {
            host: sender,
            resource: Resource::SocketBuffer,
            limit_bps: e.received,
            binds_result: true,
            why: format!(
                "The {sender}'s (sender) send buffer held the flow back {:.0} % of its busy time (the kernel's count): the throughput is what that buffer moves per round trip, so the path carries at least {at_least}.",
                sndbuf.min(1.0) * 100.0
            ),
            fix: Some("Raise the sender's net.ipv4.tcp_wmem maximum (and net.core.wmem_max for -w), or ask for a larger window (-w).".into()),
        });
    }
    limits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp(
        target_mbps: f64,
        sent_mbps: f64,
        sent: u64,
        got: u64,
        drops: Option<u64>,
    ) -> FlowEvidence {
        FlowEvidence {
            kind: FlowKind::Udp,
            sender: HostRole::Client,
            target: Some(BitRate::from_mbps(target_mbps)),
            sent: BitRate::from_mbps(sent_mbps),
            received: BitRate::from_mbps(sent_mbps * got as f64 / sent as f64),
            datagrams_sent: sent,
            datagrams_received: got,
            receiver_drops: drops,
            busy: DurationNs::ZERO,
            rwnd_limited: DurationNs::ZERO,
            sndbuf_limited: DurationNs::ZERO,
            receive_buffer_cap: None,
            rtt: None,
        }
    }

    fn tcp(busy_ms: i64, rwnd_ms: i64, sndbuf_ms: i64) -> FlowEvidence {
        FlowEvidence {
            kind: FlowKind::Tcp,
            sender: HostRole::Server,
            target: None,
            sent: BitRate::from_mbps(100.0),
            received: BitRate::from_mbps(95.0),
            datagrams_sent: 0,
            datagrams_received: 0,
            receiver_drops: None,
            busy: DurationNs::from_ms(busy_ms),
            rwnd_limited: DurationNs::from_ms(rwnd_ms),
            sndbuf_limited: DurationNs::from_ms(sndbuf_ms),
            // 95 Mb/s over 10 ms: a BDP of about 119 KB.
            receive_buffer_cap: Some(128 << 10),
            rtt: Some(DurationNs::from_ms(10)),
        }
    }

    fn limits_of(e: &FlowEvidence) -> Vec<HostLimit> {
        judge_flow(e).limits
    }

    fn binding(l: &[HostLimit]) -> Vec<(HostRole, Resource)> {
        l.iter()
            .filter(|l| l.binds_result)
            .map(|l| (l.host, l.resource))
            .collect()
    }

    #[test]
    fn a_sender_short_of_its_rate_on_a_path_that_carried_it_binds() {
        let l = limits_of(&udp(1000.0, 600.0, 100_000, 99_950, Some(0)));
        assert_eq!(binding(&l), [(HostRole::Client, Resource::Pacing)]);
        assert!(l[0].why.contains("at least 599.7 Mb/s"), "{}", l[0].why);
    }

    #[test]
    fn a_short_sender_whose_flow_the_path_still_lost_does_not_bind() {
        let l = limits_of(&udp(1000.0, 600.0, 100_000, 80_000, Some(0)));
        assert_eq!(l.len(), 1);
        assert!(!l[0].binds_result, "{l:?}");
    }

    #[test]
    fn a_sender_that_reached_its_rate_and_a_receiver_that_dropped_nothing_are_not_flagged() {
        assert!(limits_of(&udp(100.0, 99.0, 10_000, 9_000, Some(0))).is_empty());
        assert!(limits_of(&udp(100.0, 99.0, 10_000, 10_000, None)).is_empty());
    }

    #[test]
    fn loss_the_receiving_socket_made_is_the_receivers() {
        // 1000 lost, 900 of them dropped by the receiving socket.
        let l = limits_of(&udp(100.0, 99.0, 10_000, 9_000, Some(900)));
        assert_eq!(binding(&l), [(HostRole::Server, Resource::Receiver)]);
        assert!(l[0].why.contains("dropped 900 of the 1000"), "{}", l[0].why);
        // A few socket drops beside a lossy path are reported, not binding.
        let l = limits_of(&udp(100.0, 99.0, 10_000, 9_000, Some(10)));
        assert_eq!(l.len(), 1);
        assert!(!l[0].binds_result);
        // A sender that fell short with the path's loss all the
        // receiver's: both, the sender's reach read against the path loss.
        let l = limits_of(&udp(1000.0, 500.0, 10_000, 9_000, Some(1000)));
        assert_eq!(
            binding(&l),
            [
                (HostRole::Client, Resource::Pacing),
                (HostRole::Server, Resource::Receiver)
            ]
        );
    }

    #[test]
    fn a_tcp_stream_held_by_a_window_most_of_its_time_is_the_hosts() {
        let l = limits_of(&tcp(1000, 800, 0));
        assert_eq!(binding(&l), [(HostRole::Client, Resource::SocketBuffer)]);
        assert!(
            l[0].why.contains("receive window held the flow back 80 %"),
            "{}",
            l[0].why
        );
        let l = limits_of(&tcp(1000, 0, 700));
        assert_eq!(binding(&l), [(HostRole::Server, Resource::SocketBuffer)]);
        // Windows that held it a little, or a kernel that counts nothing.
        assert!(limits_of(&tcp(1000, 300, 100)).is_empty());
        assert!(limits_of(&tcp(0, 0, 0)).is_empty());
    }

    #[test]
    fn a_full_window_on_a_roomy_buffer_is_a_slow_reader() {
        // The loopback run of `tcp` on this machine: 9 Gb/s, a 6 MiB buffer,
        // a window full 78 % of the time because the reader lagged.
        let mut e = tcp(1000, 780, 0);
        e.receive_buffer_cap = Some(6 << 20);
        e.rtt = Some(DurationNs::from_us(50));
        e.received = BitRate::from_gbps(9.0);
        let l = limits_of(&e);
        assert_eq!(binding(&l), [(HostRole::Client, Resource::Receiver)]);
        assert!(l[0].why.contains("receiving application"), "{}", l[0].why);
        // Without the buffer's size, the window is the buffer's.
        e.receive_buffer_cap = None;
        assert_eq!(
            binding(&limits_of(&e)),
            [(HostRole::Client, Resource::SocketBuffer)]
        );
    }
}
