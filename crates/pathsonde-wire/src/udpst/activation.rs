//! Test Activation Request and Response (`0xACE2`, 104 bytes): the client
//! asks for the direction and proposes every test parameter; the server
//! polices them and echoes the PDU with its result and, for an upstream
//! test, the initial sending-rate row.  The client must use the values in
//! the response (spec section 3.3).
//!
//! ```text
//! off size field                 off size field
//! 0   2    pdu_id 0xACE2         20  2    slow_adj_thresh
//! 2   2    protocol_version 20   22  2    seq_err_thresh
//! 4   1    cmd_request 1 up/2 dn 24  1    ignore_reorder_dup
//! 5   1    cmd_response          25  1    modifiers (0x01 start index, 0x02 random payload)
//! 6   2    low_thresh, ms        26  1    rate_adj_algo (0 B, 1 C)
//! 8   2    upper_thresh, ms      27  1    ecn_ce_thresh [ext]
//! 10  2    trial_interval, ms    28  28   sending_rate
//! 12  2    test_duration, s      56  2    sub_interval, ms
//! 14  1    reserved              58  2    reserved
//! 15  1    dscp_ecn              60  2    suppress_subints [ext]
//! 16  2    sr_index (0xFFFF auto)62  1    reserved
//! 18  1    use_owd               63  41   authentication trailer
//! 19  1    high_speed_delta
//! ```
//!
//! Only the version-20 layout is decoded: exactly 104 bytes, version 20
//! (the pre-20 60-byte PDU is refused as too short).

use super::auth::{self, AuthTrailer};
use super::rate::SendingRate;
use super::{
    check_fixed, check_out, checksum_verifies, get_u16, get_u8, internet_checksum, put_u16, put_u8,
    Result, UdpstError, PDU_ID_ACTIVATION, PROTOCOL_VERSION,
};

/// Length of a version-20 Test Activation PDU.
pub const LEN: usize = 104;
const PDU: &str = "Test Activation PDU";
/// `sr_index` meaning "automatic search from row 0".
pub const SR_INDEX_AUTO: u16 = 0xFFFF;
/// The highest sending-rate table row.
pub const MAX_SR_INDEX: u16 = 1152;

/// `cmd_request`: the direction of the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// 1: the client sends Load PDUs, the server Status PDUs.
    Upstream,
    /// 2: the server sends Load PDUs, the client Status PDUs.
    Downstream,
}

impl Direction {
    pub fn code(self) -> u8 {
        match self {
            Direction::Upstream => 1,
            Direction::Downstream => 2,
        }
    }
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Direction::Upstream),
            2 => Some(Direction::Downstream),
            _ => None,
        }
    }
}

/// `cmd_response`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ActivationResult {
    /// 0: request.
    #[default]
    None,
    /// 1: accepted; the PDU carries the parameters to use.
    Ack,
    /// 2: parameters rejected (the reference server never rejects; its
    /// client reports ErrorStatus 152).
    Rejected,
    /// Any other code (the reference client reports ErrorStatus 150).
    Unknown(u8),
}

impl ActivationResult {
    pub fn code(self) -> u8 {
        match self {
            ActivationResult::None => 0,
            ActivationResult::Ack => 1,
            ActivationResult::Rejected => 2,
            ActivationResult::Unknown(c) => c,
        }
    }
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => ActivationResult::None,
            1 => ActivationResult::Ack,
            2 => ActivationResult::Rejected,
            c => ActivationResult::Unknown(c),
        }
    }
}

/// `rate_adj_algo`: the load-adjustment algorithm (section 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RateAdjAlgo {
    /// 0: Type B, RFC 9097 / Y.1540 Annex B (default).
    #[default]
    TypeB,
    /// 1: Type C, "multiply and retry".
    TypeC,
    /// Anything else (the reference server polices it to Type B).
    Unknown(u8),
}

impl RateAdjAlgo {
    pub fn code(self) -> u8 {
        match self {
            RateAdjAlgo::TypeB => 0,
            RateAdjAlgo::TypeC => 1,
            RateAdjAlgo::Unknown(c) => c,
        }
    }
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => RateAdjAlgo::TypeB,
            1 => RateAdjAlgo::TypeC,
            c => RateAdjAlgo::Unknown(c),
        }
    }
}

/// `modifiers` of the TA PDU (unknown bits are kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ActivationModifiers(pub u8);

impl ActivationModifiers {
    /// 0x01: `sr_index` is the starting row of a search, not a fixed rate.
    pub const START_INDEX: u8 = 0x01;
    /// 0x02: random payload content (the server clears it unless allowed).
    pub const RANDOM_PAYLOAD: u8 = 0x02;
    pub fn start_index(self) -> bool {
        self.0 & Self::START_INDEX != 0
    }
    pub fn random_payload(self) -> bool {
        self.0 & Self::RANDOM_PAYLOAD != 0
    }
}

/// A checked view of a Test Activation PDU.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks length (exactly 104), identifier, version (20), cmd_request ∈
    /// {1, 2} and the checksum when non-zero.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        check_fixed(b, PDU, LEN, PDU_ID_ACTIVATION)?;
        let got = get_u16(b, 2);
        if !super::version_accepted(got) {
            return Err(UdpstError::BadVersion {
                pdu: PDU,
                got,
                ours: PROTOCOL_VERSION,
            });
        }
        let cmd = get_u8(b, 4);
        if Direction::from_code(cmd).is_none() {
            return Err(UdpstError::BadField {
                pdu: PDU,
                field: "cmd_request",
                value: u32::from(cmd),
            });
        }
        if !checksum_verifies(b, get_u16(b, LEN - 2)) {
            return Err(UdpstError::BadChecksum { pdu: PDU });
        }
        Ok(Packet { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    fn u8_at(&self, at: usize) -> u8 {
        get_u8(self.as_bytes(), at)
    }
    fn u16_at(&self, at: usize) -> u16 {
        get_u16(self.as_bytes(), at)
    }
    pub fn version(&self) -> u16 {
        self.u16_at(2)
    }
    pub fn direction(&self) -> Direction {
        Direction::from_code(self.u8_at(4)).unwrap_or(Direction::Upstream)
    }
    pub fn result(&self) -> ActivationResult {
        ActivationResult::from_code(self.u8_at(5))
    }
    pub fn low_thresh_ms(&self) -> u16 {
        self.u16_at(6)
    }
    pub fn upper_thresh_ms(&self) -> u16 {
        self.u16_at(8)
    }
    pub fn trial_interval_ms(&self) -> u16 {
        self.u16_at(10)
    }
    pub fn test_duration_s(&self) -> u16 {
        self.u16_at(12)
    }
    pub fn dscp_ecn(&self) -> u8 {
        self.u8_at(15)
    }
    /// `None` = automatic search (0xFFFF).
    pub fn sr_index(&self) -> Option<u16> {
        let v = self.u16_at(16);
        (v != SR_INDEX_AUTO).then_some(v)
    }
    /// The raw byte; see [`Repr::use_owd`] for how other values read.
    pub fn use_owd_raw(&self) -> u8 {
        self.u8_at(18)
    }
    pub fn high_speed_delta(&self) -> u8 {
        self.u8_at(19)
    }
    pub fn slow_adj_thresh(&self) -> u16 {
        self.u16_at(20)
    }
    pub fn seq_err_thresh(&self) -> u16 {
        self.u16_at(22)
    }
    /// The raw byte; see [`Repr::ignore_reorder_dup`].
    pub fn ignore_reorder_dup_raw(&self) -> u8 {
        self.u8_at(24)
    }
    pub fn modifiers(&self) -> ActivationModifiers {
        ActivationModifiers(self.u8_at(25))
    }
    pub fn rate_adj_algo(&self) -> RateAdjAlgo {
        RateAdjAlgo::from_code(self.u8_at(26))
    }
    pub fn ecn_ce_thresh(&self) -> u8 {
        self.u8_at(27)
    }
    pub fn sending_rate(&self) -> SendingRate {
        SendingRate::read(self.as_bytes(), 28)
    }
    pub fn sub_interval_ms(&self) -> u16 {
        self.u16_at(56)
    }
    pub fn suppress_subints(&self) -> u16 {
        self.u16_at(60)
    }
    pub fn auth(&self) -> AuthTrailer {
        AuthTrailer::read(self.as_bytes())
    }
    /// The bytes the HMAC covers (the PDU with digest and checksum zeroed).
    pub fn authenticated_bytes(&self) -> Vec<u8> {
        auth::authenticated_bytes(self.as_bytes()).unwrap_or_default()
    }
}

/// A Test Activation Request or Response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub version: u16,
    pub direction: Direction,
    pub result: ActivationResult,
    /// Lower delay-variation threshold, ms.
    pub low_thresh_ms: u16,
    /// Upper delay-variation threshold, ms.
    pub upper_thresh_ms: u16,
    /// Status-feedback (trial) interval, ms.
    pub trial_interval_ms: u16,
    /// Test duration, s.
    pub test_duration_s: u16,
    /// The full TOS / Traffic Class byte for test packets.
    pub dscp_ecn: u8,
    /// `None` = automatic search from row 0 (0xFFFF on the wire); otherwise
    /// a fixed row, or the starting row if `modifiers.start_index()`.
    /// (`Some(0xFFFF)` is written as 0xFFFF and reads back as `None`.)
    pub sr_index: Option<u16>,
    /// Use one-way delay variation (true) or RTT variation.  On receipt
    /// only 1 reads as true: the reference server polices other values to 0.
    pub use_owd: bool,
    /// Fast-step size, rows (Δ).
    pub high_speed_delta: u8,
    /// Congestion count that triggers the back-off / slow mode (S).
    pub slow_adj_thresh: u16,
    /// Sequence-error threshold per trial interval.
    pub seq_err_thresh: u16,
    /// Only loss counts as a sequence error.  On receipt only 0 reads as
    /// false: the reference server polices other values to 1.
    pub ignore_reorder_dup: bool,
    pub modifiers: ActivationModifiers,
    pub rate_adj_algo: RateAdjAlgo,
    /// [ext] 0 = off, 1–255 = CE threshold.
    pub ecn_ce_thresh: u8,
    /// Request: zero.  Response: the initial row for an upstream test.
    pub sending_rate: SendingRate,
    /// Sub-interval period, ms.
    pub sub_interval_ms: u16,
    /// [ext] Initial sub-intervals without rate adjustment; 0 = off.
    pub suppress_subints: u16,
    pub auth: AuthTrailer,
}

impl Repr {
    /// A version-20 request with the reference client's defaults: thresholds
    /// 30/90 ms, trial 50 ms, 10 s, search from row 0, Δ 10, S 3, sequence
    /// error threshold 10, reordering and duplicates ignored, Type B,
    /// sub-interval 1000 ms.
    pub fn request(direction: Direction) -> Self {
        Repr {
            version: PROTOCOL_VERSION,
            direction,
            result: ActivationResult::None,
            low_thresh_ms: 30,
            upper_thresh_ms: 90,
            trial_interval_ms: 50,
            test_duration_s: 10,
            dscp_ecn: 0,
            sr_index: None,
            use_owd: false,
            high_speed_delta: 10,
            slow_adj_thresh: 3,
            seq_err_thresh: 10,
            ignore_reorder_dup: true,
            modifiers: ActivationModifiers(0),
            rate_adj_algo: RateAdjAlgo::TypeB,
            ecn_ce_thresh: 0,
            sending_rate: SendingRate::ZERO,
            sub_interval_ms: 1000,
            suppress_subints: 0,
            auth: AuthTrailer::NONE,
        }
    }

    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self> {
        Ok(Repr {
            version: p.version(),
            direction: p.direction(),
            result: p.result(),
            low_thresh_ms: p.low_thresh_ms(),
            upper_thresh_ms: p.upper_thresh_ms(),
            trial_interval_ms: p.trial_interval_ms(),
            test_duration_s: p.test_duration_s(),
            dscp_ecn: p.dscp_ecn(),
            sr_index: p.sr_index(),
            use_owd: p.use_owd_raw() == 1,
            high_speed_delta: p.high_speed_delta(),
            slow_adj_thresh: p.slow_adj_thresh(),
            seq_err_thresh: p.seq_err_thresh(),
            ignore_reorder_dup: p.ignore_reorder_dup_raw() != 0,
            modifiers: p.modifiers(),
            rate_adj_algo: p.rate_adj_algo(),
            ecn_ce_thresh: p.ecn_ce_thresh(),
            sending_rate: p.sending_rate(),
            sub_interval_ms: p.sub_interval_ms(),
            suppress_subints: p.suppress_subints(),
            auth: p.auth(),
        })
    }

    /// `new_checked` then `parse`.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        Self::parse(&Packet::new_checked(bytes)?)
    }

    /// Writes the PDU into `buf[..104]`, reserved bytes and checksum zero.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        check_out(buf, PDU, LEN)?;
        let b = &mut buf[..LEN];
        b.fill(0);
        put_u16(b, 0, PDU_ID_ACTIVATION);
        put_u16(b, 2, self.version);
        put_u8(b, 4, self.direction.code());
        put_u8(b, 5, self.result.code());
        put_u16(b, 6, self.low_thresh_ms);
        put_u16(b, 8, self.upper_thresh_ms);
        put_u16(b, 10, self.trial_interval_ms);
        put_u16(b, 12, self.test_duration_s);
        put_u8(b, 15, self.dscp_ecn);
        put_u16(b, 16, self.sr_index.unwrap_or(SR_INDEX_AUTO));
        put_u8(b, 18, u8::from(self.use_owd));
        put_u8(b, 19, self.high_speed_delta);
        put_u16(b, 20, self.slow_adj_thresh);
        put_u16(b, 22, self.seq_err_thresh);
        put_u8(b, 24, u8::from(self.ignore_reorder_dup));
        put_u8(b, 25, self.modifiers.0);
        put_u8(b, 26, self.rate_adj_algo.code());
        put_u8(b, 27, self.ecn_ce_thresh);
        self.sending_rate.write(b, 28);
        put_u16(b, 56, self.sub_interval_ms);
        put_u16(b, 60, self.suppress_subints);
        self.auth.write(b);
        Ok(())
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; LEN];
        let _ = self.emit(&mut v);
        v
    }
}

/// Sets the optional checksum of an emitted TA PDU (`buf[..104]`).
pub fn fill_checksum(buf: &mut [u8]) {
    if let Some(b) = buf.get_mut(..LEN) {
        put_u16(b, LEN - 2, 0);
        let c = internet_checksum(b);
        put_u16(b, LEN - 2, c);
    }
}

#[cfg(test)]
mod tests {
    use super::super::rate::tests::arb_rate;
    use super::super::rate::PayloadSize;
    use super::super::test_util::hex;
    use super::super::AuthMode;
    use super::*;
    use proptest::prelude::*;

    /// Section 12's TA Request.
    fn request_bytes() -> Vec<u8> {
        let mut b =
            hex("ace2 0014 01 00 001e 005a 0032 0005 00 00 ffff 00 0a 0003 000a 01 00 00 00");
        assert_eq!(b.len(), 28);
        b.extend_from_slice(&[0; 28]);
        b.extend_from_slice(&[0x03, 0xE8]);
        b.extend_from_slice(&[0; 46]);
        b
    }

    #[test]
    fn worked_example_request() {
        let b = request_bytes();
        let r = Repr::decode(&b).unwrap();
        let want = Repr {
            test_duration_s: 5,
            ..Repr::request(Direction::Upstream)
        };
        assert_eq!(r, want);
        assert_eq!(r.low_thresh_ms, 30);
        assert_eq!(r.upper_thresh_ms, 90);
        assert_eq!(r.trial_interval_ms, 50);
        assert_eq!(r.sr_index, None);
        assert_eq!(r.high_speed_delta, 10);
        assert_eq!(r.slow_adj_thresh, 3);
        assert_eq!(r.seq_err_thresh, 10);
        assert!(r.ignore_reorder_dup);
        assert_eq!(r.rate_adj_algo, RateAdjAlgo::TypeB);
        assert_eq!(r.sub_interval_ms, 1000);
        assert_eq!(r.auth.mode, AuthMode::None);
        assert_eq!(r.to_bytes(), b);
    }

    #[test]
    fn worked_example_response() {
        let mut b = request_bytes();
        b[5] = 1;
        b[28..56].copy_from_slice(&hex(
            "00000000 00000000 00000000 0000c350 00000000 00000000 800004c6",
        ));
        let r = Repr::decode(&b).unwrap();
        assert_eq!(r.result, ActivationResult::Ack);
        assert_eq!(r.direction, Direction::Upstream);
        assert_eq!(r.sending_rate.tx2_interval_us, 50_000);
        assert_eq!(r.sending_rate.tx2_addon, PayloadSize::random_up_to(1222));
        assert_eq!(r.to_bytes(), b);
    }

    #[test]
    fn specific_errors() {
        let b = request_bytes();
        // A pre-20 TA PDU is 60 bytes.
        assert_eq!(
            Packet::new_checked(&b[..60]).unwrap_err(),
            UdpstError::Truncated {
                pdu: PDU,
                need: 104,
                have: 60
            }
        );
        let mut x = b.clone();
        x[0] = 0xAC;
        x[1] = 0xE1;
        assert!(matches!(
            Packet::new_checked(&x[..]),
            Err(UdpstError::BadPduId { got: 0xACE1, .. })
        ));
        let mut x = b.clone();
        x[3] = 11;
        assert_eq!(
            Packet::new_checked(&x[..]).unwrap_err(),
            UdpstError::BadVersion {
                pdu: PDU,
                got: 11,
                ours: 20
            }
        );
        let mut x = b.clone();
        x[4] = 0;
        assert!(matches!(
            Packet::new_checked(&x[..]),
            Err(UdpstError::BadField {
                field: "cmd_request",
                value: 0,
                ..
            })
        ));
        let mut x = b.clone();
        fill_checksum(&mut x);
        Packet::new_checked(&x[..]).unwrap();
        x[7] ^= 1;
        assert!(matches!(
            Packet::new_checked(&x[..]),
            Err(UdpstError::BadChecksum { .. })
        ));
    }

    #[test]
    fn out_of_range_booleans_read_as_the_reference_polices_them() {
        let mut b = request_bytes();
        b[18] = 7;
        b[24] = 7;
        let r = Repr::decode(&b).unwrap();
        assert!(!r.use_owd);
        assert!(r.ignore_reorder_dup);
        b[26] = 9;
        assert_eq!(
            Repr::decode(&b).unwrap().rate_adj_algo,
            RateAdjAlgo::Unknown(9)
        );
    }

    fn arb_repr() -> impl Strategy<Value = Repr> {
        (
            (
                1u8..=2,
                any::<u8>(),
                any::<u16>(),
                any::<u16>(),
                any::<u16>(),
                any::<u16>(),
                any::<u8>(),
                prop::option::of(0u16..0xFFFF),
            ),
            (
                any::<bool>(),
                any::<u8>(),
                any::<u16>(),
                any::<u16>(),
                any::<bool>(),
                any::<u8>(),
                any::<u8>(),
                any::<u8>(),
            ),
            (
                arb_rate(),
                any::<u16>(),
                any::<u16>(),
                any::<u8>(),
                any::<u32>(),
                any::<[u8; 32]>(),
                any::<u8>(),
            ),
        )
            .prop_map(
                |(
                    (dir, result, low, up, trial, dur, dscp, sr),
                    (owd, delta, slow, seq, ign, mods, algo, ce),
                    (rate, sub, supp, mode, time, digest, key_id),
                )| Repr {
                    version: PROTOCOL_VERSION,
                    direction: Direction::from_code(dir).unwrap(),
                    result: ActivationResult::from_code(result),
                    low_thresh_ms: low,
                    upper_thresh_ms: up,
                    trial_interval_ms: trial,
                    test_duration_s: dur,
                    dscp_ecn: dscp,
                    sr_index: sr,
                    use_owd: owd,
                    high_speed_delta: delta,
                    slow_adj_thresh: slow,
                    seq_err_thresh: seq,
                    ignore_reorder_dup: ign,
                    modifiers: ActivationModifiers(mods),
                    rate_adj_algo: RateAdjAlgo::from_code(algo),
                    ecn_ce_thresh: ce,
                    sending_rate: rate,
                    sub_interval_ms: sub,
                    suppress_subints: supp,
                    auth: AuthTrailer {
                        mode: AuthMode::from_code(mode),
                        time,
                        digest,
                        key_id,
                    },
                },
            )
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..120)) {
            if let Ok(r) = Repr::decode(&b) {
                prop_assert_eq!(Repr::decode(&r.to_bytes()).unwrap(), r);
            }
        }

        #[test]
        fn valid_header_never_panics(mut b in prop::collection::vec(any::<u8>(), LEN)) {
            b[..4].copy_from_slice(&[0xAC, 0xE2, 0, 20]);
            b[4] = 1 + (b[4] & 1);
            b[LEN - 2] = 0;
            b[LEN - 1] = 0;
            let r = Repr::decode(&b).unwrap();
            prop_assert_eq!(Repr::decode(&r.to_bytes()).unwrap(), r);
        }

        #[test]
        fn any_repr_round_trips(r in arb_repr()) {
            prop_assert_eq!(Repr::decode(&r.to_bytes()).unwrap(), r);
        }
    }
}
