//! The 28-byte sending-rate structure: one row of the server's sending-rate
//! table, as carried in the Test Activation Response (the initial row of an
//! upstream test) and in every server→client Status PDU (the row the client
//! must transmit next) (spec section 3.4).
//!
//! ```text
//! +off field          meaning
//! 0    tx1_interval   transmitter 1 period, µs (0 = idle)
//! 4    tx1_payload    UDP payload per datagram, bytes (bit 31 = random size)
//! 8    tx1_burst      datagrams per period
//! 12   tx2_interval   transmitter 2 period, µs (0 = idle)
//! 16   tx2_payload    (bit 31 = random size)
//! 20   tx2_burst
//! 24   tx2_addon      one extra datagram after each transmitter-2 burst (0 = none; bit 31 = random)
//! ```

use super::{get_u32, put_u32, Result, UdpstError};

/// Length of the structure.
pub const LEN: usize = 28;
const WHAT: &str = "sending-rate structure";
/// Bit 31 of a payload or add-on value: "random size up to the low 31 bits".
pub const RANDOM_BIT: u32 = 0x8000_0000;

/// A payload or add-on size: fixed, or random in [minimum, `bytes`] (the
/// minimum is 52 over IPv4, 32 over IPv6; section 9.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PayloadSize {
    /// Bit 31: each datagram gets a size drawn uniformly up to `bytes`.
    pub random: bool,
    /// The size, or the maximum of a random size: the low 31 bits (larger
    /// values are written as 0x7FFF_FFFF).
    pub bytes: u32,
}

impl PayloadSize {
    pub const ZERO: PayloadSize = PayloadSize {
        random: false,
        bytes: 0,
    };
    pub fn fixed(bytes: u32) -> Self {
        PayloadSize {
            random: false,
            bytes,
        }
    }
    pub fn random_up_to(max: u32) -> Self {
        PayloadSize {
            random: true,
            bytes: max,
        }
    }
    pub fn from_wire(v: u32) -> Self {
        PayloadSize {
            random: v & RANDOM_BIT != 0,
            bytes: v & !RANDOM_BIT,
        }
    }
    pub fn to_wire(self) -> u32 {
        (if self.random { RANDOM_BIT } else { 0 }) | self.bytes.min(!RANDOM_BIT)
    }
}

/// One sending-rate table row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SendingRate {
    /// Transmitter 1 period, µs; 0 = transmitter 1 idle.
    pub tx1_interval_us: u32,
    /// Transmitter 1 UDP payload per datagram.
    pub tx1_payload: PayloadSize,
    /// Transmitter 1 datagrams per period.
    pub tx1_burst: u32,
    /// Transmitter 2 period, µs; 0 = idle.
    pub tx2_interval_us: u32,
    /// Transmitter 2 UDP payload per datagram.
    pub tx2_payload: PayloadSize,
    /// Transmitter 2 datagrams per period.
    pub tx2_burst: u32,
    /// Size of one extra datagram after every transmitter-2 burst; zero =
    /// none.
    pub tx2_addon: PayloadSize,
}

impl SendingRate {
    /// All zero: what the client sends in a TA Request and in its Status
    /// PDUs, and the server in a downstream TA Response.
    pub const ZERO: SendingRate = SendingRate {
        tx1_interval_us: 0,
        tx1_payload: PayloadSize::ZERO,
        tx1_burst: 0,
        tx2_interval_us: 0,
        tx2_payload: PayloadSize::ZERO,
        tx2_burst: 0,
        tx2_addon: PayloadSize::ZERO,
    };

    pub fn is_zero(&self) -> bool {
        *self == Self::ZERO
    }

    /// Reads the structure from the first 28 bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<Self> {
        if b.len() < LEN {
            return Err(UdpstError::Truncated {
                pdu: WHAT,
                need: LEN,
                have: b.len(),
            });
        }
        Ok(Self::read(b, 0))
    }

    /// Reads at `at` (zeros past the end; callers check lengths first).
    pub(crate) fn read(b: &[u8], at: usize) -> Self {
        SendingRate {
            tx1_interval_us: get_u32(b, at),
            tx1_payload: PayloadSize::from_wire(get_u32(b, at + 4)),
            tx1_burst: get_u32(b, at + 8),
            tx2_interval_us: get_u32(b, at + 12),
            tx2_payload: PayloadSize::from_wire(get_u32(b, at + 16)),
            tx2_burst: get_u32(b, at + 20),
            tx2_addon: PayloadSize::from_wire(get_u32(b, at + 24)),
        }
    }

    /// Writes the structure into `buf[..28]`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < LEN {
            return Err(UdpstError::BufferTooSmall {
                pdu: WHAT,
                need: LEN,
                have: buf.len(),
            });
        }
        self.write(buf, 0);
        Ok(())
    }

    pub(crate) fn write(&self, b: &mut [u8], at: usize) {
        put_u32(b, at, self.tx1_interval_us);
        put_u32(b, at + 4, self.tx1_payload.to_wire());
        put_u32(b, at + 8, self.tx1_burst);
        put_u32(b, at + 12, self.tx2_interval_us);
        put_u32(b, at + 16, self.tx2_payload.to_wire());
        put_u32(b, at + 20, self.tx2_burst);
        put_u32(b, at + 24, self.tx2_addon.to_wire());
    }

    pub fn to_bytes(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        self.write(&mut b, 0);
        b
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::test_util::hex;
    use super::*;
    use proptest::prelude::*;

    /// Row 0 from section 12's TA Response.
    #[test]
    fn worked_example_row_0() {
        let b = hex("00000000 00000000 00000000 0000c350 00000000 00000000 800004c6");
        let r = SendingRate::parse(&b).unwrap();
        assert_eq!(
            r,
            SendingRate {
                tx2_interval_us: 50_000,
                tx2_addon: PayloadSize::random_up_to(1222),
                ..SendingRate::ZERO
            }
        );
        assert_eq!(r.to_bytes().to_vec(), b);
    }

    #[test]
    fn short_input_and_output_are_errors() {
        assert!(matches!(
            SendingRate::parse(&[0u8; 27]),
            Err(UdpstError::Truncated { need: 28, .. })
        ));
        assert!(matches!(
            SendingRate::ZERO.emit(&mut [0u8; 27]),
            Err(UdpstError::BufferTooSmall { need: 28, .. })
        ));
    }

    #[test]
    fn oversize_payload_saturates() {
        let p = PayloadSize {
            random: false,
            bytes: u32::MAX,
        };
        assert_eq!(p.to_wire(), 0x7FFF_FFFF);
    }

    pub(crate) fn arb_payload() -> impl Strategy<Value = PayloadSize> {
        (any::<bool>(), 0u32..=0x7FFF_FFFF)
            .prop_map(|(random, bytes)| PayloadSize { random, bytes })
    }

    pub(crate) fn arb_rate() -> impl Strategy<Value = SendingRate> {
        (
            any::<u32>(),
            arb_payload(),
            any::<u32>(),
            any::<u32>(),
            arb_payload(),
            any::<u32>(),
            arb_payload(),
        )
            .prop_map(|(a, b, c, d, e, f, g)| SendingRate {
                tx1_interval_us: a,
                tx1_payload: b,
                tx1_burst: c,
                tx2_interval_us: d,
                tx2_payload: e,
                tx2_burst: f,
                tx2_addon: g,
            })
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_round_trip(b in prop::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(r) = SendingRate::parse(&b) {
                prop_assert_eq!(&r.to_bytes()[..], &b[..LEN]);
            }
        }

        #[test]
        fn any_rate_round_trips(r in arb_rate()) {
            prop_assert_eq!(SendingRate::parse(&r.to_bytes()).unwrap(), r);
        }
    }
}
