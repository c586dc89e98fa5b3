//! The UDP Speed Test Protocol (UDPSTP, RFC 9946, protocol version 20): the
//! PDUs that RFC 9097's maximum IP-layer capacity test exchanges with
//! OB-UDPST and with `pathsonde serve`.
//!
//! The layouts follow `shared/specs/udp-speed-test-protocol.md` (sections
//! 2–6, 13, 14); `docs/udpst-wire.md` summarises them.  Every PDU is one UDP
//! datagram, every integer big-endian.
//!
//! | PDU | id | size | module |
//! | --- | --- | --- | --- |
//! | Setup Request / Response | `0xACE1` | 56 | [`setup`] |
//! | Null Request (firewall opener) | `0xDEAD` | 48 | [`null`] |
//! | Test Activation Request / Response | `0xACE2` | 104 | [`activation`] |
//! | sending-rate structure (inside TA Response and Status) | — | 28 | [`rate`] |
//! | Load | `0xBEEF` | 32 + filler | [`load`] |
//! | Status Feedback | `0xFEED` | 204 | [`status`] |
//!
//! Each PDU module follows smoltcp's pattern: a checked view
//! `Packet<T: AsRef<[u8]>>` whose `new_checked` validates the length, the
//! PDU identifier, the version (where a receiver must refuse it), every
//! enumerated field a receiver must refuse, and the optional checksum, before
//! any field is read; getters that cannot panic; and a plain `Repr` with
//! `parse`, `emit` and `to_bytes`.  Decoders never panic on any input and
//! encoders never panic on any `Repr` (out-of-range values saturate, a
//! short output buffer is an error).
//!
//! Authentication (HMAC-SHA256 over the control PDUs, section 5) is laid out
//! here ([`auth`]) — trailer fields, the bytes the digest covers, the key
//! derivation's input — but computed in pathsonde-net, which already holds the
//! HMAC implementation.

pub mod activation;
pub mod auth;
pub mod load;
pub mod null;
pub mod rate;
pub mod setup;
pub mod status;

pub use activation::{Packet as ActivationPacket, Repr as ActivationRepr};
pub use auth::{AuthMode, AuthTrailer};
pub use load::{Packet as LoadPacket, Repr as LoadRepr};
pub use null::{Packet as NullPacket, Repr as NullRepr};
pub use rate::{PayloadSize, SendingRate};
pub use setup::{Packet as SetupPacket, Repr as SetupRepr};
pub use status::{Packet as StatusPacket, Repr as StatusRepr, SubIntervalStats};

use crate::error::WireError;
use thiserror::Error;

/// The protocol version pathsonde speaks and puts in every control PDU.
pub const PROTOCOL_VERSION: u16 = 20;
/// The oldest version the reference server still accepts in a Setup
/// Request (versions 11–19 use older layouts pathsonde does not decode).
pub const REFERENCE_MIN_VERSION: u16 = 11;
/// Default server control port (older reference releases used 25000).
pub const DEFAULT_CONTROL_PORT: u16 = 24601;

/// PDU identifiers (the first two bytes of every PDU).
pub const PDU_ID_SETUP: u16 = 0xACE1;
pub const PDU_ID_ACTIVATION: u16 = 0xACE2;
pub const PDU_ID_NULL: u16 = 0xDEAD;
pub const PDU_ID_LOAD: u16 = 0xBEEF;
pub const PDU_ID_STATUS: u16 = 0xFEED;

/// Which PDU a datagram claims to be, by its first two bytes: for
/// dispatching on a socket that receives several kinds (a test port gets TA
/// Requests, Load and Status PDUs).  Says nothing about validity; the
/// module's `new_checked` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PduKind {
    Setup,
    Activation,
    Null,
    Load,
    Status,
}

impl PduKind {
    /// `None` for a datagram shorter than 2 bytes or an unknown identifier.
    pub fn of(datagram: &[u8]) -> Option<PduKind> {
        if datagram.len() < 2 {
            return None;
        }
        match get_u16(datagram, 0) {
            PDU_ID_SETUP => Some(PduKind::Setup),
            PDU_ID_ACTIVATION => Some(PduKind::Activation),
            PDU_ID_NULL => Some(PduKind::Null),
            PDU_ID_LOAD => Some(PduKind::Load),
            PDU_ID_STATUS => Some(PduKind::Status),
            _ => None,
        }
    }
    pub fn pdu_id(self) -> u16 {
        match self {
            PduKind::Setup => PDU_ID_SETUP,
            PduKind::Activation => PDU_ID_ACTIVATION,
            PduKind::Null => PDU_ID_NULL,
            PduKind::Load => PDU_ID_LOAD,
            PduKind::Status => PDU_ID_STATUS,
        }
    }
}

/// "No value" in 32-bit delay fields (no sample yet).
pub const NO_SAMPLE: u32 = 0xFFFF_FFFF;

/// Whether a pathsonde server accepts a Setup Request of this version.
///
/// Section 13: the reference accepts 11–20, and "a new implementation may
/// support 20 only".  pathsonde decodes only the version-20 layouts (a
/// pre-20 Test Activation PDU is 60 bytes and a pre-20 Status PDU 168), so it
/// accepts exactly [`PROTOCOL_VERSION`]; any other version is answered with
/// [`setup::SetupResult::BadVersion`] and our own version in the version
/// field ([`setup::Repr::response`] does that).
pub fn version_accepted(version: u16) -> bool {
    version == PROTOCOL_VERSION
}

/// What the reference server accepts (11–20), for reports and tests that
/// compare with it; pathsonde itself uses [`version_accepted`].
pub fn reference_accepts_version(version: u16) -> bool {
    (REFERENCE_MIN_VERSION..=PROTOCOL_VERSION).contains(&version)
}

/// Why a datagram is not a valid UDPSTP PDU (the receiver drops it with no
/// reply), or why a PDU could not be written.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum UdpstError {
    #[error("{pdu} truncated: need {need} bytes, have {have}")]
    Truncated {
        pdu: &'static str,
        need: usize,
        have: usize,
    },
    #[error("{pdu} must be {expected} bytes, got {got}")]
    WrongLength {
        pdu: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("not a {pdu}: PDU identifier {got:#06x}, expected {expected:#06x}")]
    BadPduId {
        pdu: &'static str,
        expected: u16,
        got: u16,
    },
    #[error("{pdu}: protocol version {got} not supported (this build speaks {ours})")]
    BadVersion {
        pdu: &'static str,
        got: u16,
        ours: u16,
    },
    #[error("{pdu}: {field} = {value} is outside the values the protocol defines")]
    BadField {
        pdu: &'static str,
        field: &'static str,
        value: u32,
    },
    #[error("{pdu}: header checksum does not verify")]
    BadChecksum { pdu: &'static str },
    #[error("output buffer of {have} bytes is too small for a {pdu} of {need}")]
    BufferTooSmall {
        pdu: &'static str,
        need: usize,
        have: usize,
    },
}

impl From<UdpstError> for WireError {
    fn from(e: UdpstError) -> Self {
        match e {
            UdpstError::Truncated { need, have, .. } => WireError::Truncated { need, have },
            UdpstError::WrongLength { expected, got, .. } => WireError::OutOfRange {
                what: if got > expected {
                    "UDPSTP PDU length (too long)"
                } else {
                    "UDPSTP PDU length"
                },
                value: got as u64,
            },
            UdpstError::BadPduId { pdu, .. } => WireError::BadMagic { what: pdu },
            UdpstError::BadVersion { got, ours, .. } => WireError::Version { got, ours },
            UdpstError::BadField { field, value, .. } => WireError::OutOfRange {
                what: field,
                value: u64::from(value),
            },
            UdpstError::BadChecksum { pdu } => WireError::Malformed(format!("{pdu}: bad checksum")),
            UdpstError::BufferTooSmall { need, have, .. } => WireError::Truncated { need, have },
        }
    }
}

pub type Result<T> = core::result::Result<T, UdpstError>;

/// A wall-clock (Unix epoch) time as the PDUs carry it: seconds, then
/// nanoseconds (0–999 999 999; larger values are carried as received).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Timestamp {
    pub sec: u32,
    pub nsec: u32,
}

/// `test_action` of Load and Status PDUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TestAction {
    /// 0: the test is running.
    #[default]
    Testing,
    /// 1: stop, set locally by a backstop timer (a client may send it).
    StopLocal,
    /// 2: stop, exchanged between the peers.
    Stop,
}

impl TestAction {
    pub fn code(self) -> u8 {
        match self {
            TestAction::Testing => 0,
            TestAction::StopLocal => 1,
            TestAction::Stop => 2,
        }
    }
    /// `None` for values above 2, which make a data PDU invalid.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(TestAction::Testing),
            1 => Some(TestAction::StopLocal),
            2 => Some(TestAction::Stop),
            _ => None,
        }
    }
    /// Whether this value asks the peer to stop (anything but 0).
    pub fn is_stop(self) -> bool {
        self != TestAction::Testing
    }
}

/// The RFC 1071 Internet checksum of `data` (one's-complement sum of
/// big-endian 16-bit words, an odd last byte padded with zero), complemented:
/// the value a sender stores with the checksum field zeroed.
pub fn internet_checksum(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

/// Receiver's rule (section 2): a checksum field of zero is not checked; a
/// non-zero one must make the one's-complement sum over `covered` all-ones.
/// `covered` includes the checksum field itself.
pub fn checksum_verifies(covered: &[u8], field: u16) -> bool {
    field == 0 || ones_complement_sum(covered) == 0xFFFF
}

/// Big-endian reads that return 0 instead of panicking when the buffer is
/// shorter than expected (cannot happen after `new_checked`, which checks the
/// length; this keeps the getters panic-free by construction).
pub(crate) fn get_u16(b: &[u8], at: usize) -> u16 {
    match b.get(at..at + 2) {
        Some(s) => u16::from_be_bytes([s[0], s[1]]),
        None => 0,
    }
}

pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(s) => u32::from_be_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

pub(crate) fn get_u64(b: &[u8], at: usize) -> u64 {
    match b.get(at..at + 8) {
        Some(s) => {
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            u64::from_be_bytes(a)
        }
        None => 0,
    }
}

pub(crate) fn get_u8(b: &[u8], at: usize) -> u8 {
    b.get(at).copied().unwrap_or(0)
}

/// Writes that do nothing past the end of the buffer (emitters check the
/// length first; this keeps them panic-free by construction).
pub(crate) fn put_u16(b: &mut [u8], at: usize, v: u16) {
    if let Some(s) = b.get_mut(at..at + 2) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    if let Some(s) = b.get_mut(at..at + 4) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    if let Some(s) = b.get_mut(at..at + 8) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

pub(crate) fn put_u8(b: &mut [u8], at: usize, v: u8) {
    if let Some(x) = b.get_mut(at) {
        *x = v;
    }
}

/// `Some(v)` unless `v` is the [`NO_SAMPLE`] sentinel.
pub(crate) fn sample(v: u32) -> Option<u32> {
    (v != NO_SAMPLE).then_some(v)
}

/// The wire value of an optional sample: `None` is [`NO_SAMPLE`].  (A
/// `Some(0xFFFF_FFFF)` is written as the sentinel too, so it reads back as
/// `None`.)
pub(crate) fn unsample(v: Option<u32>) -> u32 {
    v.unwrap_or(NO_SAMPLE)
}

/// Checks a fixed-size PDU's length and identifier.
pub(crate) fn check_fixed(b: &[u8], pdu: &'static str, len: usize, id: u16) -> Result<()> {
    check_min(b, pdu, len, id)?;
    if b.len() != len {
        return Err(UdpstError::WrongLength {
            pdu,
            expected: len,
            got: b.len(),
        });
    }
    Ok(())
}

/// Checks a PDU's minimum length and identifier.
pub(crate) fn check_min(b: &[u8], pdu: &'static str, len: usize, id: u16) -> Result<()> {
    if b.len() < len {
        return Err(UdpstError::Truncated {
            pdu,
            need: len,
            have: b.len(),
        });
    }
    let got = get_u16(b, 0);
    if got != id {
        return Err(UdpstError::BadPduId {
            pdu,
            expected: id,
            got,
        });
    }
    Ok(())
}

pub(crate) fn check_out(buf: &[u8], pdu: &'static str, need: usize) -> Result<()> {
    if buf.len() < need {
        return Err(UdpstError::BufferTooSmall {
            pdu,
            need,
            have: buf.len(),
        });
    }
    Ok(())
}

pub(crate) fn bool_field(pdu: &'static str, field: &'static str, v: u8) -> Result<bool> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(UdpstError::BadField {
            pdu,
            field,
            value: u32::from(v),
        }),
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    /// Bytes from a hex string with spaces and newlines allowed.
    pub fn hex(s: &str) -> Vec<u8> {
        let d: Vec<u8> = s
            .bytes()
            .filter(|c| c.is_ascii_hexdigit())
            .map(|c| (c as char).to_digit(16).unwrap() as u8)
            .collect();
        assert!(d.len() % 2 == 0, "odd hex length");
        d.chunks(2).map(|p| p[0] << 4 | p[1]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn version_rule() {
        assert!(version_accepted(20));
        assert!(!version_accepted(19));
        assert!(!version_accepted(21));
        assert!(!version_accepted(99));
        assert!(reference_accepts_version(11));
        assert!(reference_accepts_version(20));
        assert!(!reference_accepts_version(10));
        assert!(!reference_accepts_version(21));
    }

    #[test]
    fn pdu_kind_by_identifier() {
        for k in [
            PduKind::Setup,
            PduKind::Activation,
            PduKind::Null,
            PduKind::Load,
            PduKind::Status,
        ] {
            assert_eq!(PduKind::of(&k.pdu_id().to_be_bytes()), Some(k));
        }
        assert_eq!(PduKind::of(&[0xAC]), None);
        assert_eq!(PduKind::of(&[0xAC, 0xE3, 0]), None);
    }

    #[test]
    fn checksum_rfc1071_example() {
        // RFC 1071 section 3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ones_complement_sum(&d), 0xddf2);
        assert_eq!(internet_checksum(&d), !0xddf2);
        let mut with = d.to_vec();
        with.extend_from_slice(&internet_checksum(&d).to_be_bytes());
        assert!(checksum_verifies(&with, 1));
        with[0] ^= 1;
        assert!(!checksum_verifies(&with, 1));
        assert!(checksum_verifies(&with, 0));
    }

    #[test]
    fn errors_map_to_wire_errors() {
        let e: WireError = UdpstError::BadVersion {
            pdu: "x",
            got: 7,
            ours: 20,
        }
        .into();
        assert_eq!(e, WireError::Version { got: 7, ours: 20 });
        let e: WireError = UdpstError::BadPduId {
            pdu: "Setup PDU",
            expected: 1,
            got: 2,
        }
        .into();
        assert_eq!(e, WireError::BadMagic { what: "Setup PDU" });
    }

    proptest! {
        #[test]
        fn checksum_written_verifies(mut d in prop::collection::vec(any::<u8>(), 2..300)) {
            let n = d.len() & !1;
            d.truncate(n);
            d[0] = 0;
            d[1] = 0;
            let c = internet_checksum(&d);
            d[0..2].copy_from_slice(&c.to_be_bytes());
            prop_assert!(checksum_verifies(&d, c));
        }
    }
}
