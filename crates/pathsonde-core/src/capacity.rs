//! RFC 9097's maximum IP-layer capacity over the UDP Speed Test Protocol
//! (UDPSTP, protocol version 20; `docs/capacity.md`), as sans-IO logic.
//!
//! A load sender sends at a row of a fixed sending-rate table
//! ([`rate_table`]); the load receiver counts what arrives — loss,
//! reordering, duplicates, one-way delay and RTT variation — and reports it
//! every trial interval (50 ms) in a status feedback ([`receiver`]); the
//! server turns each feedback into the next row with Type B or Type C
//! ([`adjust`]); the client turns the per-sub-interval statistics (1 s)
//! into rows and a summary whose maximum is the metric ([`summary`]); and
//! the status feedback's trial counts give the rate at zero loss beside it
//! ([`zero_loss`]).
//!
//! Nothing here reads a clock or touches a socket: every time is passed in
//! as a [`TimeNs`](crate::units::TimeNs), and the net layer maps wire fields to
//! these plain structs (this crate does not know the wire codecs).
//! The protocol's timers (spec §8) are named below so that the net layer
//! and the core use one set of numbers.

pub mod adjust;
pub mod host;
pub mod rate_table;
pub mod receiver;
pub mod summary;
pub mod zero_loss;

pub use adjust::{
    adjuster, AdjustConfig, Adjuster, Algorithm, Class, DecidedBy, Decision, Feedback, LoadAdjust,
    RateMode, Search,
};
pub use rate_table::{
    row_at_or_below, sending_rate, IpFamily, Payload, RowIndex, SendingRate, TableOptions,
};
pub use receiver::{
    Ecn, LoadArrival, LoadReceiver, ReceiverConfig, StatusReport, SubIntervalStats, TrialStats,
    Variation,
};
pub use summary::{CapacityReport, CapacitySummary, SubIntervalRow};
pub use zero_loss::{Trial, Unclear, ZeroLoss, ZeroLossFit};

use crate::units::DurationNs;

/// The protocol version spoken (spec §13).
pub const PROTOCOL_VERSION: u16 = 20;
/// The server's standard control port (spec §1).
pub const DEFAULT_CONTROL_PORT: u16 = 24601;
/// Default trial interval: one status feedback, and one rate decision, per 50 ms.
pub(crate) const DEFAULT_TRIAL_INTERVAL: DurationNs = DurationNs::from_ms(50);
/// The shortest trial interval a server accepts (5 ms; outside 5–250 ms it uses the default).
pub const MIN_TRIAL_INTERVAL: DurationNs = DurationNs::from_ms(5);
/// The longest trial interval a server accepts (250 ms).
pub const MAX_TRIAL_INTERVAL: DurationNs = DurationNs::from_ms(250);
/// Default sub-interval: the reporting granularity, and RFC 9097's dt (1 s).
pub(crate) const DEFAULT_SUB_INTERVAL: DurationNs = DurationNs::from_ms(1000);
/// The shortest sub-interval a server accepts (100 ms; outside 100–10000 ms it uses the default).
pub const MIN_SUB_INTERVAL: DurationNs = DurationNs::from_ms(100);
/// The longest sub-interval a server accepts (10 s).
pub const MAX_SUB_INTERVAL: DurationNs = DurationNs::from_ms(10_000);
/// Default test duration (10 s; accepted 5–3600 s).
pub const DEFAULT_TEST_DURATION: DurationNs = DurationNs::from_secs(10);
/// The shortest test a server accepts (5 s).
pub const MIN_TEST_DURATION: DurationNs = DurationNs::from_secs(5);
/// The longest test a server accepts, and its default maximum (3600 s).
pub const MAX_TEST_DURATION: DurationNs = DurationNs::from_secs(3600);
/// The server's stop timer fires this long after the test duration, counted from activation.
pub const SERVER_STOP_GRACE: DurationNs = DurationNs::from_ms(500);
/// The client forces a local stop this long after the test duration, counted from activation.
pub const CLIENT_BACKSTOP_GRACE: DurationNs = DurationNs::from_ms(3500);
/// The client's set-up timer, from Setup Request to TA Response.
pub const SETUP_TIMEOUT: DurationNs = DurationNs::from_secs(3);
/// The connection watchdog on both sides, reset by every valid PDU while testing.
pub const WATCHDOG: DurationNs = DurationNs::from_secs(3);
/// With no PDU received for this long, a side sets rx_stopped and warns.
pub(crate) const TRAFFIC_STOPPED_AFTER: DurationNs = DurationNs::from_secs(1);
/// The shortest random delay before a load transmitter starts.
pub const TX_START_JITTER_MIN: DurationNs = DurationNs::from_ms(5);
/// The longest random delay before a load transmitter starts.
pub const TX_START_JITTER_MAX: DurationNs = DurationNs::from_ms(50);
/// The reference's transmit timer tick.
pub const TX_TIMER_TICK: DurationNs = DurationNs::from_us(100);
/// How far an authenticated PDU's time may be from the receiver's clock (±5 s).
pub const AUTH_TIME_WINDOW: DurationNs = DurationNs::from_secs(5);
/// The most connections one client test may run.
pub const MAX_CONNECTIONS: u8 = 24;
/// The most connections one server instance holds.
pub const MAX_SERVER_CONNECTIONS: u16 = 256;

/// `d` in whole milliseconds, rounded half up (the spec's round_ms: add
/// 0.5 ms and truncate, taken as a floor so that negative values round the
/// same way as positive ones).
pub(crate) fn round_ms(d: DurationNs) -> i64 {
    d.ns().saturating_add(500_000).div_euclid(1_000_000)
}

/// The number of sub-intervals a test reports: duration / sub-interval
/// (spec §8); results past it are dropped.
pub fn planned_sub_intervals(duration: DurationNs, sub_interval: DurationNs) -> u32 {
    if sub_interval.ns() <= 0 || duration.ns() <= 0 {
        return 0;
    }
    u32::try_from(duration.ns() / sub_interval.ns()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_to_milliseconds() {
        assert_eq!(round_ms(DurationNs::from_us(1499)), 1);
        assert_eq!(round_ms(DurationNs::from_us(1500)), 2);
        assert_eq!(round_ms(DurationNs::from_us(-400)), 0);
        assert_eq!(round_ms(DurationNs::from_us(-600)), -1);
        assert_eq!(
            round_ms(DurationNs::from_ns(i64::MAX)),
            i64::MAX / 1_000_000
        );
    }

    #[test]
    fn planned_sub_intervals_divide_the_duration() {
        assert_eq!(
            planned_sub_intervals(DEFAULT_TEST_DURATION, DEFAULT_SUB_INTERVAL),
            10
        );
        assert_eq!(
            planned_sub_intervals(DurationNs::from_secs(5), DurationNs::from_ms(300)),
            16
        );
        assert_eq!(
            planned_sub_intervals(DurationNs::from_secs(5), DurationNs::ZERO),
            0
        );
    }
}
