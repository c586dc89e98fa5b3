//! The UDP probe packet.
//!
//! ```text
//! offset size field
//! 0      4    magic "PSPR"
//! 4      1    version (low byte of PROTOCOL_VERSION)
//! 5      1    kind: 0 probe, 1 echo request, 2 echo reply
//! 6      2    reserved, 0
//! 8      8    session id (u64)
//! 16     4    train number (u32)
//! 20     4    car number within the train (u32)
//! 24     4    sequence within the train (u32)
//! 28     8    send timestamp, ns on the sender's clock (i64)
//! 36     ..   padding (zeros) up to the requested payload size
//! ```
//! All integers big-endian.  The send stamp is the time the sender meant to
//! send (it is written before the packet leaves); the achieved time is kept by
//! the sender and reported separately.

use crate::error::WireError;

pub const PROBE_MAGIC: &[u8; 4] = b"PSPR";
/// Bytes of header before the padding; the smallest valid probe payload.
pub const PROBE_HEADER_LEN: usize = 36;
/// Largest UDP payload pathsonde sends or accepts (IPv4 limit).
pub const MAX_PROBE_PAYLOAD: usize = 65_507;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    /// A packet of a measurement train.
    Probe,
    /// Asks the server to send the packet back (RTT over the probe path).
    EchoRequest,
    /// The server's answer to an echo request.
    EchoReply,
}

impl ProbeKind {
    fn code(self) -> u8 {
        match self {
            ProbeKind::Probe => 0,
            ProbeKind::EchoRequest => 1,
            ProbeKind::EchoReply => 2,
        }
    }
    fn from_code(code: u8) -> Result<Self, WireError> {
        match code {
            0 => Ok(ProbeKind::Probe),
            1 => Ok(ProbeKind::EchoRequest),
            2 => Ok(ProbeKind::EchoReply),
            code => Err(WireError::UnknownCode {
                what: "probe kind",
                code,
            }),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeHeader {
    pub kind: ProbeKind,
    pub session: u64,
    pub train: u32,
    pub car: u32,
    pub seq: u32,
    pub send_ns: i64,
}

impl ProbeHeader {
    /// Writes the header into the front of `buf` and zeroes the rest, so the
    /// whole buffer is a probe payload of `buf.len()` bytes.
    pub fn write_into(&self, buf: &mut [u8]) -> Result<(), WireError> {
        if buf.len() < PROBE_HEADER_LEN {
            return Err(WireError::Truncated {
                need: PROBE_HEADER_LEN,
                have: buf.len(),
            });
        }
        self.write_header(buf);
        buf[PROBE_HEADER_LEN..].fill(0);
        Ok(())
    }

    /// Rewrites only the header fields of an already padded buffer (the pacing
    /// loop reuses buffers and must not re-zero the padding every packet).
    pub fn write_header(&self, buf: &mut [u8]) {
        let h = &mut buf[..PROBE_HEADER_LEN];
        h[0..4].copy_from_slice(PROBE_MAGIC);
        h[4] = crate::PROTOCOL_VERSION as u8;
        h[5] = self.kind.code();
        h[6..8].fill(0);
        h[8..16].copy_from_slice(&self.session.to_be_bytes());
        h[16..20].copy_from_slice(&self.train.to_be_bytes());
        h[20..24].copy_from_slice(&self.car.to_be_bytes());
        h[24..28].copy_from_slice(&self.seq.to_be_bytes());
        h[28..36].copy_from_slice(&self.send_ns.to_be_bytes());
    }

    /// Encodes a header padded to `payload_len` bytes.
    pub fn encode(&self, payload_len: usize) -> Result<Vec<u8>, WireError> {
        if payload_len > MAX_PROBE_PAYLOAD {
            return Err(WireError::OutOfRange {
                what: "probe payload length",
                value: payload_len as u64,
            });
        }
        let mut v = vec![0u8; payload_len];
        self.write_into(&mut v)?;
        Ok(v)
    }

    /// Decodes the header of a received datagram.  Padding is not inspected.
    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        let h: &[u8; PROBE_HEADER_LEN] = b
            .get(..PROBE_HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(WireError::Truncated {
                need: PROBE_HEADER_LEN,
                have: b.len(),
            })?;
        if &h[0..4] != PROBE_MAGIC {
            return Err(WireError::BadMagic { what: "probe" });
        }
        if h[4] != crate::PROTOCOL_VERSION as u8 {
            return Err(WireError::Version {
                got: u16::from(h[4]),
                ours: crate::PROTOCOL_VERSION,
            });
        }
        let kind = ProbeKind::from_code(h[5])?;
        let u32_at = |o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let mut session = [0u8; 8];
        session.copy_from_slice(&h[8..16]);
        let mut send = [0u8; 8];
        send.copy_from_slice(&h[28..36]);
        Ok(ProbeHeader {
            kind,
            session: u64::from_be_bytes(session),
            train: u32_at(16),
            car: u32_at(20),
            seq: u32_at(24),
            send_ns: i64::from_be_bytes(send),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header() -> ProbeHeader {
        ProbeHeader {
            kind: ProbeKind::Probe,
            session: 0x0102_0304_0506_0708,
            train: 3,
            car: 9,
            seq: 77,
            send_ns: -5,
        }
    }

    #[test]
    fn round_trip_and_padding() {
        let b = header().encode(1472).unwrap();
        assert_eq!(b.len(), 1472);
        assert!(b[PROBE_HEADER_LEN..].iter().all(|&x| x == 0));
        assert_eq!(ProbeHeader::decode(&b).unwrap(), header());
    }

    #[test]
    fn layout_is_as_documented() {
        let b = header().encode(PROBE_HEADER_LEN).unwrap();
        assert_eq!(&b[0..4], b"PSPR");
        assert_eq!(b[5], 0);
        assert_eq!(&b[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[24..28], &[0, 0, 0, 77]);
    }

    #[test]
    fn too_small_or_too_large_is_an_error() {
        assert!(matches!(
            header().encode(10),
            Err(WireError::Truncated { .. })
        ));
        assert!(matches!(
            header().encode(MAX_PROBE_PAYLOAD + 1),
            Err(WireError::OutOfRange { .. })
        ));
    }

    #[test]
    fn wrong_version_and_kind_are_named() {
        let mut b = header().encode(64).unwrap();
        b[4] = 99;
        assert!(matches!(
            ProbeHeader::decode(&b),
            Err(WireError::Version { got: 99, .. })
        ));
        b[4] = crate::PROTOCOL_VERSION as u8;
        b[5] = 7;
        assert!(matches!(
            ProbeHeader::decode(&b),
            Err(WireError::UnknownCode { code: 7, .. })
        ));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..100)) {
            let _ = ProbeHeader::decode(&b);
        }

        #[test]
        fn any_header_round_trips(session: u64, train: u32, car: u32, seq: u32, send_ns: i64,
                                  kind in 0u8..3, len in PROBE_HEADER_LEN..2000) {
            let h = ProbeHeader { kind: ProbeKind::from_code(kind).unwrap(), session, train, car, seq, send_ns };
            prop_assert_eq!(ProbeHeader::decode(&h.encode(len).unwrap()).unwrap(), h);
        }

        #[test]
        fn valid_prefix_with_garbage_tail_decodes(tail in prop::collection::vec(any::<u8>(), 0..64)) {
            let mut b = header().encode(PROBE_HEADER_LEN).unwrap();
            b.extend_from_slice(&tail);
            prop_assert_eq!(ProbeHeader::decode(&b).unwrap(), header());
        }
    }
}
