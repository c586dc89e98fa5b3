//! What the server makes of a Test Activation Request (spec §3.3's
//! policing table): the response it sends and the search's configuration.

use super::UdpstServerConfig;
use crate::udpst::pdu;
use crate::udpst::Direction;
use pathsonde_core::capacity::adjust::{AdjustConfig, Algorithm, RateMode};
use pathsonde_core::capacity::rate_table::{sending_rate, RowIndex};
use pathsonde_core::DurationNs;
use pathsonde_wire::udpst::activation::{
    ActivationModifiers, ActivationResult, RateAdjAlgo, Repr as ActivationRepr,
};
use pathsonde_wire::udpst::auth::AuthTrailer;
use pathsonde_wire::udpst::rate::SendingRate as WireRate;

/// What the server makes of a TA Request (spec §3.3's policing): the
/// response to send, and the search's configuration.
pub fn police(
    req: &ActivationRepr,
    cfg: &UdpstServerConfig,
    ceiling: RowIndex,
) -> (ActivationRepr, AdjustConfig) {
    let mut r = *req;
    r.result = ActivationResult::Ack;
    r.auth = AuthTrailer::NONE;
    let ok = |v: u16| (1..=10_000).contains(&v);
    if !ok(r.low_thresh_ms) {
        r.low_thresh_ms = 30;
    }
    if !ok(r.upper_thresh_ms) {
        r.upper_thresh_ms = 90;
    }
    if r.low_thresh_ms > r.upper_thresh_ms {
        r.low_thresh_ms = 30;
        r.upper_thresh_ms = 90;
    }
    if !(5..=250).contains(&r.trial_interval_ms) {
        r.trial_interval_ms = 50;
    }
    let cap = cfg.max_duration_s();
    if !(5..=3600).contains(&r.test_duration_s) {
        r.test_duration_s = 10;
    }
    r.test_duration_s = r.test_duration_s.min(cap);
    if !(100..=10_000).contains(&r.sub_interval_ms) {
        r.sub_interval_ms = 1000;
    }
    if u32::from(r.sub_interval_ms) > u32::from(r.test_duration_s) * 1000 {
        r.test_duration_s = 10u16.min(cap);
        r.sub_interval_ms = 1000;
    }
    r.sr_index = match r.sr_index {
        None => None,
        Some(v) if v > RowIndex::MAX.get() => None,
        Some(v) => Some(v.min(ceiling.get())),
    };
    if r.high_speed_delta == 0 {
        r.high_speed_delta = 10;
    }
    if r.slow_adj_thresh == 0 {
        r.slow_adj_thresh = 3;
    }
    if let RateAdjAlgo::Unknown(_) = r.rate_adj_algo {
        r.rate_adj_algo = RateAdjAlgo::TypeB;
    }
    // Only the start-index bit is kept: random payload is not offered.
    r.modifiers = ActivationModifiers(r.modifiers.0 & ActivationModifiers::START_INDEX);
    // ECN marks are not read by this server: no CE threshold.
    r.ecn_ce_thresh = 0;
    let subints = u32::from(r.test_duration_s) * 1000 / u32::from(r.sub_interval_ms.max(1));
    if u32::from(r.suppress_subints) >= subints {
        r.suppress_subints = 0;
    }
    let row = |v: u16| RowIndex::new(v).unwrap_or(RowIndex::MAX);
    let mode = match r.sr_index {
        None => RateMode::Search,
        Some(v) if r.modifiers.start_index() => RateMode::StartAt(row(v)),
        Some(v) => RateMode::Fixed(row(v)),
    };
    let ms = |v: u16| DurationNs::from_ms(i64::from(v));
    let adj = AdjustConfig {
        algorithm: match r.rate_adj_algo {
            RateAdjAlgo::TypeC => Algorithm::C,
            _ => Algorithm::B,
        },
        mode,
        ceiling,
        low_thresh: ms(r.low_thresh_ms),
        upper_thresh: ms(r.upper_thresh_ms),
        use_owd: r.use_owd,
        high_speed_delta: r.high_speed_delta,
        slow_adj_thresh: r.slow_adj_thresh,
        seq_err_thresh: r.seq_err_thresh,
        ignore_reorder_dup: r.ignore_reorder_dup,
        ecn_ce_thresh: 0,
        suppress_subints: r.suppress_subints,
    }
    .policed();
    r.sending_rate = match r.direction {
        Direction::Upstream => pdu::to_wire_rate(&sending_rate(adj.initial_row(), cfg.table())),
        Direction::Downstream => WireRate::ZERO,
    };
    (r, adj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> UdpstServerConfig {
        UdpstServerConfig::new("127.0.0.1:0".parse().unwrap())
    }

    #[test]
    fn policing_follows_the_spec_table() {
        let mut req = ActivationRepr::request(Direction::Upstream);
        req.low_thresh_ms = 0;
        req.upper_thresh_ms = 20_000;
        req.trial_interval_ms = 1;
        req.test_duration_s = 4000;
        req.sub_interval_ms = 50;
        req.sr_index = Some(2000);
        req.high_speed_delta = 0;
        req.slow_adj_thresh = 0;
        req.rate_adj_algo = RateAdjAlgo::Unknown(9);
        req.modifiers = ActivationModifiers(0xFF);
        req.ecn_ce_thresh = 5;
        req.suppress_subints = 100;
        let mut c = cfg();
        c.max_duration = DurationNs::from_secs(60);
        let (r, adj) = police(&req, &c, RowIndex::MAX);
        assert_eq!((r.low_thresh_ms, r.upper_thresh_ms), (30, 90));
        assert_eq!(r.trial_interval_ms, 50);
        assert_eq!(r.test_duration_s, 10);
        assert_eq!(r.sub_interval_ms, 1000);
        assert_eq!(r.sr_index, None);
        assert_eq!((r.high_speed_delta, r.slow_adj_thresh), (10, 3));
        assert_eq!(r.rate_adj_algo, RateAdjAlgo::TypeB);
        assert_eq!(r.modifiers.0, ActivationModifiers::START_INDEX);
        assert_eq!(r.ecn_ce_thresh, 0);
        assert_eq!(r.suppress_subints, 0);
        assert_eq!(r.result, ActivationResult::Ack);
        assert_eq!(adj.mode, RateMode::Search);
        // Row 0 in the response of an upstream search.
        assert_eq!(r.sending_rate.tx2_interval_us, 50_000);

        // The duration is capped at --max-duration; a fixed row at the ceiling.
        let mut req = ActivationRepr::request(Direction::Downstream);
        req.test_duration_s = 100;
        req.sr_index = Some(900);
        let (r, adj) = police(&req, &c, RowIndex::new(200).unwrap());
        assert_eq!(r.test_duration_s, 60);
        assert_eq!(r.sr_index, Some(200));
        assert_eq!(adj.mode, RateMode::Fixed(RowIndex::new(200).unwrap()));
        assert!(r.sending_rate.is_zero());
    }
}
