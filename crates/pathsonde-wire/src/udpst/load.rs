//! Load PDU (`0xBEEF`): the test traffic, a 32-byte header then filler up
//! to the datagram's size.  Sent by the client in an upstream test and by the
//! server in a downstream one (spec section 6.1).
//!
//! ```text
//! off size field
//! 0   2    pdu_id 0xBEEF
//! 2   1    test_action (0 testing, 1 stop local, 2 stop; >2 invalid)
//! 3   1    rx_stopped (0/1; other values invalid)
//! 4   4    seq (from 1, one counter for all datagrams of the connection)
//! 8   2    payload_len: the datagram's UDP payload length, header included
//! 10  2    status_loss (Status PDUs missing at the last one received; 0xFFFF out of order/duplicate)
//! 12  8    echo time: send time of the last Status PDU received (sec, nsec)
//! 20  8    send time of this datagram's burst (sec, nsec)
//! 28  2    resp_delay, ms
//! 30  2    checksum (optional, covers bytes 0-31)
//! 32  n    filler: zeros or random, ignored
//! ```
//!
//! A receiver counts bytes from `payload_len`, not from the datagram's
//! length, so it may read only the first 32 bytes: `new_checked` accepts any
//! buffer of at least 32 bytes (a truncated read included) and refuses a
//! shorter one.  `payload_len` is not compared with the buffer's length.

use super::{
    bool_field, check_min, check_out, checksum_verifies, get_u16, get_u32, get_u8,
    internet_checksum, put_u16, put_u32, put_u8, Result, TestAction, Timestamp, UdpstError,
    PDU_ID_LOAD,
};

/// Length of the header; the smallest valid Load PDU.
pub const HEADER_LEN: usize = 32;
/// Smallest `payload_len` a sender uses over IPv4 (section 6.1).
pub const MIN_PAYLOAD_IPV4: u16 = 52;
/// Smallest `payload_len` a sender uses over IPv6.
pub const MIN_PAYLOAD_IPV6: u16 = 32;
/// `status_loss` meaning "the last Status PDU was out of order or
/// duplicated".
pub const STATUS_LOSS_OUT_OF_ORDER: u16 = 0xFFFF;
const PDU: &str = "Load PDU";

/// A checked view of a Load PDU (header and whatever filler was read).
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks length (at least 32), identifier, test_action ≤ 2, rx_stopped
    /// ∈ {0, 1} and the header checksum when non-zero.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        check_min(b, PDU, HEADER_LEN, PDU_ID_LOAD)?;
        let action = get_u8(b, 2);
        if TestAction::from_code(action).is_none() {
            return Err(UdpstError::BadField {
                pdu: PDU,
                field: "test_action",
                value: u32::from(action),
            });
        }
        bool_field(PDU, "rx_stopped", get_u8(b, 3))?;
        let header = b.get(..HEADER_LEN).unwrap_or_default();
        if !checksum_verifies(header, get_u16(b, 30)) {
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
    pub fn test_action(&self) -> TestAction {
        TestAction::from_code(get_u8(self.as_bytes(), 2)).unwrap_or_default()
    }
    pub fn rx_stopped(&self) -> bool {
        get_u8(self.as_bytes(), 3) == 1
    }
    pub fn seq(&self) -> u32 {
        get_u32(self.as_bytes(), 4)
    }
    pub fn payload_len(&self) -> u16 {
        get_u16(self.as_bytes(), 8)
    }
    pub fn status_loss(&self) -> u16 {
        get_u16(self.as_bytes(), 10)
    }
    pub fn echo_time(&self) -> Timestamp {
        Timestamp {
            sec: get_u32(self.as_bytes(), 12),
            nsec: get_u32(self.as_bytes(), 16),
        }
    }
    pub fn send_time(&self) -> Timestamp {
        Timestamp {
            sec: get_u32(self.as_bytes(), 20),
            nsec: get_u32(self.as_bytes(), 24),
        }
    }
    pub fn resp_delay_ms(&self) -> u16 {
        get_u16(self.as_bytes(), 28)
    }
    pub fn checksum(&self) -> u16 {
        get_u16(self.as_bytes(), 30)
    }
    /// The bytes after the header (as many as were read).
    pub fn filler(&self) -> &[u8] {
        self.as_bytes().get(HEADER_LEN..).unwrap_or_default()
    }
}

/// A Load PDU's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    pub test_action: TestAction,
    /// The sender has received nothing from its peer for ≥ 1 s.
    pub rx_stopped: bool,
    /// Load sequence number, from 1.
    pub seq: u32,
    /// The datagram's whole UDP payload length, header included.
    pub payload_len: u16,
    /// Status PDUs found missing when the last one arrived;
    /// [`STATUS_LOSS_OUT_OF_ORDER`] if it was out of order or duplicated.
    pub status_loss: u16,
    /// Send time of the last Status PDU received (zero until one arrived).
    pub echo_time: Timestamp,
    /// When this datagram's burst was built.
    pub send_time: Timestamp,
    /// ms from receipt of the last Status PDU to this send (before any: ms
    /// since activation).
    pub resp_delay_ms: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self> {
        Ok(Repr {
            test_action: p.test_action(),
            rx_stopped: p.rx_stopped(),
            seq: p.seq(),
            payload_len: p.payload_len(),
            status_loss: p.status_loss(),
            echo_time: p.echo_time(),
            send_time: p.send_time(),
            resp_delay_ms: p.resp_delay_ms(),
        })
    }

    /// `new_checked` then `parse`.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        Self::parse(&Packet::new_checked(bytes)?)
    }

    /// Rewrites only the 32-byte header of `buf` (checksum zero), leaving the
    /// filler alone: a pacing loop reuses buffers and need not re-zero them.
    pub fn emit_header(&self, buf: &mut [u8]) -> Result<()> {
        check_out(buf, PDU, HEADER_LEN)?;
        let b = &mut buf[..HEADER_LEN];
        put_u16(b, 0, PDU_ID_LOAD);
        put_u8(b, 2, self.test_action.code());
        put_u8(b, 3, u8::from(self.rx_stopped));
        put_u32(b, 4, self.seq);
        put_u16(b, 8, self.payload_len);
        put_u16(b, 10, self.status_loss);
        put_u32(b, 12, self.echo_time.sec);
        put_u32(b, 16, self.echo_time.nsec);
        put_u32(b, 20, self.send_time.sec);
        put_u32(b, 24, self.send_time.nsec);
        put_u16(b, 28, self.resp_delay_ms);
        put_u16(b, 30, 0);
        Ok(())
    }

    /// Writes the header into `buf` and zeroes the rest: the whole of `buf`
    /// is then the datagram (`payload_len` is written as given; make it
    /// `buf.len()`).
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        self.emit_header(buf)?;
        if let Some(f) = buf.get_mut(HEADER_LEN..) {
            f.fill(0);
        }
        Ok(())
    }

    /// A datagram of `max(payload_len, 32)` bytes with zero filler.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; usize::from(self.payload_len).max(HEADER_LEN)];
        let _ = self.emit(&mut v);
        v
    }
}

/// Sets the optional checksum over the first 32 bytes of an emitted Load
/// PDU.  Does nothing on a shorter buffer.
pub fn fill_checksum(buf: &mut [u8]) {
    if let Some(b) = buf.get_mut(..HEADER_LEN) {
        put_u16(b, 30, 0);
        let c = internet_checksum(b);
        put_u16(b, 30, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn repr() -> Repr {
        Repr {
            test_action: TestAction::Testing,
            rx_stopped: false,
            seq: 1,
            payload_len: 684,
            status_loss: 0,
            echo_time: Timestamp::default(),
            send_time: Timestamp {
                sec: 1_795_634_991,
                nsec: 123_456_789,
            },
            resp_delay_ms: 45,
        }
    }

    #[test]
    fn layout_and_filler_lengths() {
        let b = repr().to_bytes();
        assert_eq!(b.len(), 684);
        assert_eq!(&b[..4], &[0xBE, 0xEF, 0, 0]);
        assert_eq!(&b[4..8], &[0, 0, 0, 1]);
        assert_eq!(&b[8..10], &684u16.to_be_bytes());
        assert_eq!(&b[20..24], &1_795_634_991u32.to_be_bytes());
        assert_eq!(&b[28..30], &[0, 45]);
        assert!(b[32..].iter().all(|&x| x == 0));
        // Any length from the header up decodes the same: a full datagram,
        // a read truncated to 32 bytes, a jumbo one.
        for len in [32, 33, 52, 684, 1222, 8972, 65_507] {
            let mut v = vec![0xA5u8; len];
            repr().emit_header(&mut v).unwrap();
            let p = Packet::new_checked(&v[..]).unwrap();
            assert_eq!(p.filler().len(), len - 32);
            assert_eq!(Repr::parse(&p).unwrap(), repr());
        }
    }

    /// The first Load PDU the reference server (OB-UDPST 9.0.0) sent on
    /// loopback in a downstream test: a 1217-byte datagram of zeros after
    /// the header (row 0: one random size up to 1222 every 50 ms).
    #[test]
    fn reference_capture() {
        let mut b = super::super::test_util::hex(
            "beef00000000000104c100006b07ad2a0a32cab66b07ad2a0cac7b3a00290000",
        );
        b.resize(1217, 0);
        let r = Repr::decode(&b).unwrap();
        assert_eq!(
            r,
            Repr {
                test_action: TestAction::Testing,
                rx_stopped: false,
                seq: 1,
                payload_len: 1217,
                status_loss: 0,
                echo_time: Timestamp {
                    sec: 0x6B07_AD2A,
                    nsec: 0x0A32_CAB6
                },
                send_time: Timestamp {
                    sec: 0x6B07_AD2A,
                    nsec: 0x0CAC_7B3A
                },
                resp_delay_ms: 41,
            }
        );
        assert_eq!(r.to_bytes(), b);
        // A receiver that reads only the header gets the same.
        assert_eq!(Repr::decode(&b[..32]).unwrap(), r);
    }

    #[test]
    fn specific_errors() {
        let b = repr().to_bytes();
        assert_eq!(
            Packet::new_checked(&b[..31]).unwrap_err(),
            UdpstError::Truncated {
                pdu: PDU,
                need: 32,
                have: 31
            }
        );
        let mut x = b.clone();
        x[1] = 0xEE;
        assert!(matches!(
            Packet::new_checked(&x[..]),
            Err(UdpstError::BadPduId { got: 0xBEEE, .. })
        ));
        let mut x = b.clone();
        x[2] = 3;
        assert!(matches!(
            Packet::new_checked(&x[..]),
            Err(UdpstError::BadField {
                field: "test_action",
                value: 3,
                ..
            })
        ));
        let mut x = b.clone();
        x[3] = 2;
        assert!(matches!(
            Packet::new_checked(&x[..]),
            Err(UdpstError::BadField {
                field: "rx_stopped",
                value: 2,
                ..
            })
        ));
    }

    #[test]
    fn checksum_covers_the_header_only() {
        let mut b = repr().to_bytes();
        fill_checksum(&mut b);
        assert_ne!(&b[30..32], &[0, 0]);
        b[100] = 0xFF; // filler: not covered
        Packet::new_checked(&b[..]).unwrap();
        b[5] ^= 1;
        assert!(matches!(
            Packet::new_checked(&b[..]),
            Err(UdpstError::BadChecksum { .. })
        ));
    }

    #[test]
    fn short_output_is_an_error() {
        assert!(matches!(
            repr().emit(&mut [0u8; 31]),
            Err(UdpstError::BufferTooSmall { need: 32, .. })
        ));
    }

    pub(crate) fn arb_repr() -> impl Strategy<Value = Repr> {
        (
            0u8..=2,
            any::<bool>(),
            any::<u32>(),
            any::<u16>(),
            any::<u16>(),
            any::<[u32; 4]>(),
            any::<u16>(),
        )
            .prop_map(|(a, rx, seq, len, loss, t, d)| Repr {
                test_action: TestAction::from_code(a).unwrap(),
                rx_stopped: rx,
                seq,
                payload_len: len,
                status_loss: loss,
                echo_time: Timestamp {
                    sec: t[0],
                    nsec: t[1],
                },
                send_time: Timestamp {
                    sec: t[2],
                    nsec: t[3],
                },
                resp_delay_ms: d,
            })
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..100)) {
            if let Ok(p) = Packet::new_checked(&b[..]) {
                let r = Repr::parse(&p).unwrap();
                let mut out = vec![0u8; b.len()];
                r.emit_header(&mut out).unwrap();
                // Bytes round trip except the checksum field.
                prop_assert_eq!(&out[..30], &b[..30]);
                prop_assert_eq!(Repr::decode(&out).unwrap(), r);
            }
        }

        #[test]
        fn valid_header_never_panics(mut b in prop::collection::vec(any::<u8>(), 32..80)) {
            b[0] = 0xBE;
            b[1] = 0xEF;
            let _ = Repr::decode(&b);
        }

        #[test]
        fn any_repr_round_trips(r in arb_repr()) {
            let b = r.to_bytes();
            prop_assert_eq!(b.len(), usize::from(r.payload_len).max(32));
            prop_assert_eq!(Repr::decode(&b).unwrap(), r);
        }
    }
}
