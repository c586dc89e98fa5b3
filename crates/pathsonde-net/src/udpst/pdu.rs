//! Wire ↔ core conversions for UDPSTP: the sending-rate row, timestamps,
//! the Status PDU a load receiver sends (from core's `StatusReport`), the
//! feedback the server's search reads from a received Status PDU, and the
//! sub-interval block an upstream client records from one.

use pathsonde_core::capacity::adjust::Feedback;
use pathsonde_core::capacity::rate_table::SendingRate as CoreRate;
use pathsonde_core::capacity::receiver::{StatusReport, SubIntervalStats, Variation};
use pathsonde_core::capacity::zero_loss::Trial;
use pathsonde_core::{Bytes, DurationNs, TimeNs};
use pathsonde_wire::udpst::auth::AuthMode;
use pathsonde_wire::udpst::rate::{PayloadSize, SendingRate as WireRate};
use pathsonde_wire::udpst::status::{Repr as StatusRepr, StatusFlags, SubIntervalStats as WireSub};
use pathsonde_wire::udpst::{TestAction, Timestamp};

pub(crate) fn to_wire_rate(r: &CoreRate) -> WireRate {
    let w = r.to_words();
    WireRate {
        tx1_interval_us: w[0],
        tx1_payload: PayloadSize::from_wire(w[1]),
        tx1_burst: w[2],
        tx2_interval_us: w[3],
        tx2_payload: PayloadSize::from_wire(w[4]),
        tx2_burst: w[5],
        tx2_addon: PayloadSize::from_wire(w[6]),
    }
}

pub(crate) fn to_core_rate(r: &WireRate) -> CoreRate {
    CoreRate::from_words([
        r.tx1_interval_us,
        r.tx1_payload.to_wire(),
        r.tx1_burst,
        r.tx2_interval_us,
        r.tx2_payload.to_wire(),
        r.tx2_burst,
        r.tx2_addon.to_wire(),
    ])
}

/// A wall-clock time (ns since the epoch) as the PDUs carry it.
pub(crate) fn to_timestamp(t: TimeNs) -> Timestamp {
    let ns = t.ns().max(0);
    Timestamp {
        sec: u32::try_from(ns / 1_000_000_000).unwrap_or(u32::MAX),
        nsec: (ns % 1_000_000_000) as u32,
    }
}

pub(crate) fn from_timestamp(t: Timestamp) -> TimeNs {
    TimeNs::from_ns(i64::from(t.sec) * 1_000_000_000 + i64::from(t.nsec))
}

fn ms_u32(d: DurationNs) -> u32 {
    u32::try_from(d.ns().max(0) / 1_000_000).unwrap_or(u32::MAX)
}

fn ms(v: u32) -> DurationNs {
    DurationNs::from_ms(i64::from(v))
}

fn sat32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn wire_sub(s: &SubIntervalStats) -> WireSub {
    WireSub {
        rx_datagrams: sat32(s.rx_datagrams),
        rx_bytes: s.rx_bytes.get(),
        elapsed_us: u32::try_from(s.elapsed.ns().max(0) / 1_000).unwrap_or(u32::MAX),
        loss: sat32(s.loss),
        reorder: sat32(s.reorder),
        dup: sat32(s.dup),
        owdv_min_ms: s.owdv.min.filter(|_| s.owdv.count > 0).map(ms_u32),
        owdv_max_ms: ms_u32(s.owdv.max),
        owdv_sum_ms: ms_u32(s.owdv.sum),
        owdv_count: sat32(s.owdv.count),
        rttv_min_ms: s.rttv.min.map(ms_u32),
        rttv_max_ms: ms_u32(s.rttv.max),
        accum_ms: ms_u32(s.accum),
    }
}

/// What a load receiver's Status PDU carries, from its report.
pub(crate) struct StatusFields<'a> {
    pub report: &'a StatusReport,
    pub status_seq: u32,
    pub action: TestAction,
    pub rx_stopped: bool,
    /// The row the load sender must use (server, upstream); zero otherwise.
    pub row: WireRate,
    pub sent_at: TimeNs,
    pub auth_mode: AuthMode,
}

pub(crate) fn status_pdu(f: &StatusFields<'_>) -> StatusRepr {
    let t = &f.report.trial;
    let sub = f.report.subint.as_ref();
    StatusRepr {
        test_action: f.action,
        rx_stopped: f.rx_stopped,
        status_seq: f.status_seq,
        sending_rate: f.row,
        subint_seq: f.report.subint_seq,
        // Before the first sub-interval closes the reference sends zeros.
        subint: sub.map(wire_sub).unwrap_or_default(),
        ti_loss: sat32(t.loss),
        ti_reorder: sat32(t.reorder),
        ti_dup: sat32(t.dup),
        clock_delta_min_ms: t
            .clock_delta_min
            .map(|d| (d.ns() / 1_000_000).clamp(i32::MIN as i64, i32::MAX as i64) as i32)
            .unwrap_or(0),
        owdv_min_ms: t.owdv.min.filter(|_| t.owdv.count > 0).map(ms_u32),
        owdv_max_ms: ms_u32(t.owdv.max),
        owdv_sum_ms: ms_u32(t.owdv.sum),
        owdv_count: sat32(t.owdv.count),
        rtt_min_ms: t.rtt_min.map(ms_u32),
        rtt_var_sample_ms: t.rtt_var_sample.map(ms_u32),
        min_updated: t.min_updated,
        ti_elapsed_us: u32::try_from(t.elapsed.ns().max(0) / 1_000).unwrap_or(u32::MAX),
        ti_rx_datagrams: sat32(t.rx_datagrams),
        ti_rx_bytes: sat32(t.rx_bytes.get()),
        send_time: to_timestamp(f.sent_at),
        auth_mode: f.auth_mode,
        ti_ce_count: sat32(t.ce_count),
        subint_ce_count: sub.map(|s| sat32(s.ce_count)).unwrap_or(0),
        status_flags: StatusFlags(if t.ecn_bleaching {
            StatusFlags::ECN_BLEACHING
        } else {
            0
        }),
    }
}

/// A stop Status PDU (test_action ≠ 0) when no report is at hand.
pub(crate) fn stop_status(
    status_seq: u32,
    action: TestAction,
    sent_at: TimeNs,
    auth_mode: AuthMode,
) -> StatusRepr {
    StatusRepr {
        test_action: action,
        status_seq,
        subint: WireSub::default(),
        send_time: to_timestamp(sent_at),
        auth_mode,
        ..StatusRepr::default()
    }
}

/// A server's Status PDU's trial counts, for the zero-loss fit (upstream).
pub(crate) fn trial_of(s: &StatusRepr) -> Trial {
    Trial {
        rx_datagrams: u64::from(s.ti_rx_datagrams),
        rx_bytes: Bytes::new(u64::from(s.ti_rx_bytes)),
        loss: u64::from(s.ti_loss),
        elapsed: DurationNs::from_us(i64::from(s.ti_elapsed_us)),
    }
}

/// The search's input from a client's Status PDU (downstream, §10.1).
pub(crate) fn feedback(s: &StatusRepr) -> Feedback {
    Feedback {
        loss: u64::from(s.ti_loss),
        reorder: u64::from(s.ti_reorder),
        dup: u64::from(s.ti_dup),
        owdv_sum: ms(s.owdv_sum_ms),
        owdv_count: u64::from(s.owdv_count),
        rtt_var_sample: s.rtt_var_sample_ms.map(ms),
        rx_datagrams: u64::from(s.ti_rx_datagrams),
        ce_count: u64::from(s.ti_ce_count),
        subint_seq: s.subint_seq,
    }
}

/// The completed sub-interval a server's Status PDU reports (upstream),
/// with the RTT-variation samples the client collected since the last one
/// (`rtt_sum`, `rtt_count`) for the average.
pub(crate) fn subint_from_status(
    s: &StatusRepr,
    rtt_sum: DurationNs,
    rtt_count: u64,
) -> SubIntervalStats {
    let b = &s.subint;
    let owdv_count = u64::from(b.owdv_count);
    SubIntervalStats {
        rx_datagrams: u64::from(b.rx_datagrams),
        rx_bytes: Bytes::new(b.rx_bytes),
        elapsed: DurationNs::from_us(i64::from(b.elapsed_us)),
        loss: u64::from(b.loss),
        reorder: u64::from(b.reorder),
        dup: u64::from(b.dup),
        owdv: Variation {
            min: b.owdv_min_ms.filter(|_| owdv_count > 0).map(ms),
            max: ms(b.owdv_max_ms),
            sum: ms(b.owdv_sum_ms),
            count: owdv_count,
        },
        rttv: Variation {
            min: b.rttv_min_ms.map(ms),
            max: ms(b.rttv_max_ms),
            sum: rtt_sum,
            count: rtt_count,
        },
        accum: ms(b.accum_ms),
        ce_count: u64::from(s.subint_ce_count),
        clock_delta_min: Some(DurationNs::from_ms(i64::from(s.clock_delta_min_ms))),
        rtt_min: s.rtt_min_ms.map(ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathsonde_core::capacity::rate_table::{sending_rate, RowIndex, TableOptions};

    #[test]
    fn rows_round_trip_through_the_wire_structure() {
        for n in [0u16, 1, 10, 99, 100, 999, 1000, 1062, 1152] {
            let row = sending_rate(RowIndex::new(n).unwrap(), TableOptions::default());
            assert_eq!(to_core_rate(&to_wire_rate(&row)), row, "row {n}");
        }
        // Row 0 is the spec's worked example.
        let w = to_wire_rate(&sending_rate(RowIndex::ZERO, TableOptions::default()));
        assert_eq!(w.tx2_interval_us, 50_000);
        assert_eq!(w.tx2_addon.to_wire(), 0x8000_04c6);
    }

    #[test]
    fn timestamps_round_trip() {
        let t = TimeNs::from_ns(1_795_634_991_123_456_789);
        assert_eq!(from_timestamp(to_timestamp(t)), t);
    }
}

/// The Status PDUs a load sender has seen, for the `status_loss` field it
/// puts in its Load PDUs (spec §6.1).  The peer supplies the numbers, so
/// they are compared by serial arithmetic (RFC 1982): a counter that jumps
/// to `u32::MAX` and wraps neither overflows nor stalls the count.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StatusSequence {
    last: Option<u32>,
}

/// What one Status PDU's sequence number says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatusSeen {
    /// Status PDUs missing just before it, or
    /// [`STATUS_LOSS_OUT_OF_ORDER`](pathsonde_wire::udpst::load::STATUS_LOSS_OUT_OF_ORDER)
    /// when it is a duplicate or older than one already seen.
    pub status_loss: u16,
    /// True when it is newer than every Status PDU before it.
    pub newer: bool,
}

impl StatusSequence {
    pub(crate) fn on_status(&mut self, seq: u32) -> StatusSeen {
        use pathsonde_wire::udpst::load::STATUS_LOSS_OUT_OF_ORDER;
        let Some(last) = self.last else {
            // The first one seen: nothing known to be missing before it.
            self.last = Some(seq);
            return StatusSeen {
                status_loss: 0,
                newer: true,
            };
        };
        let ahead = seq.wrapping_sub(last);
        if ahead == 0 || ahead > i32::MAX as u32 {
            return StatusSeen {
                status_loss: STATUS_LOSS_OUT_OF_ORDER,
                newer: false,
            };
        }
        self.last = Some(seq);
        StatusSeen {
            // 0xFFFF means "out of order": a gap that large reads one less.
            status_loss: u16::try_from(ahead - 1)
                .unwrap_or(u16::MAX)
                .min(STATUS_LOSS_OUT_OF_ORDER - 1),
            newer: true,
        }
    }
}

#[cfg(test)]
mod status_sequence_tests {
    use super::*;
    use pathsonde_wire::udpst::load::STATUS_LOSS_OUT_OF_ORDER;
    use proptest::prelude::*;

    #[test]
    fn gaps_duplicates_and_wraps_are_counted_without_overflow() {
        let mut s = StatusSequence::default();
        assert_eq!(s.on_status(1).status_loss, 0);
        assert_eq!(s.on_status(2).status_loss, 0);
        assert_eq!(s.on_status(5).status_loss, 2);
        let dup = s.on_status(5);
        assert_eq!(
            (dup.status_loss, dup.newer),
            (STATUS_LOSS_OUT_OF_ORDER, false)
        );
        assert!(!s.on_status(3).newer);
        // A jump of a billion: counted, capped below the out-of-order mark.
        assert_eq!(
            s.on_status(1_000_000_005).status_loss,
            STATUS_LOSS_OUT_OF_ORDER - 1
        );
        // Half the number space back is "older", not a huge gap.
        assert!(!s.on_status(u32::MAX - 1).newer);
        // A peer whose counter sits at the top and wraps: no panic.
        let mut s = StatusSequence::default();
        assert_eq!(s.on_status(u32::MAX - 1).status_loss, 0);
        assert_eq!(s.on_status(u32::MAX).status_loss, 0);
        let w = s.on_status(1);
        assert_eq!(
            (w.status_loss, w.newer),
            (1, true),
            "MAX → 0 → 1: one missing"
        );
    }

    proptest! {
        /// Any sequence a peer sends is taken without a panic (overflow
        /// checks are on in tests), and a status is "newer" only when it is
        /// ahead of the last newer one by serial arithmetic.
        #[test]
        fn never_panics_and_newer_means_ahead(seqs in proptest::collection::vec(any::<u32>(), 1..64)) {
            let mut s = StatusSequence::default();
            let mut last: Option<u32> = None;
            for q in seqs {
                let seen = s.on_status(q);
                if let Some(l) = last {
                    let ahead = q.wrapping_sub(l);
                    prop_assert_eq!(seen.newer, ahead != 0 && ahead <= i32::MAX as u32);
                }
                if seen.newer {
                    last = Some(q);
                } else {
                    prop_assert_eq!(seen.status_loss, STATUS_LOSS_OUT_OF_ORDER);
                }
            }
        }
    }
}
