//! Null Request (`0xDEAD`, 48 bytes): sent by a version-20 server from the
//! new test port to the client right after an ACK, only to open a stateful
//! firewall or NAT in front of the server.  The client accepts it and throws
//! it away (spec section 3.2).
//!
//! ```text
//! off size field
//! 0   2    pdu_id 0xDEAD
//! 2   2    protocol_version (the client's: 20)
//! 4   1    cmd_request: 1 (null request)
//! 5   1    cmd_response: 0 (ignored on receipt)
//! 6   1    reserved
//! 7   41   authentication trailer (same mode as the setup; server key)
//! ```

use super::auth::{self, AuthTrailer};
use super::{
    check_fixed, check_out, checksum_verifies, get_u16, get_u8, internet_checksum, put_u16, put_u8,
    Result, UdpstError, PDU_ID_NULL, PROTOCOL_VERSION,
};

/// Length of a Null Request.
pub const LEN: usize = 48;
const PDU: &str = "Null Request";

/// A checked view of a Null Request.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks length (exactly 48), identifier, version (20), cmd_request (1)
    /// and the checksum when non-zero.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        check_fixed(b, PDU, LEN, PDU_ID_NULL)?;
        let got = get_u16(b, 2);
        if !super::version_accepted(got) {
            return Err(UdpstError::BadVersion {
                pdu: PDU,
                got,
                ours: PROTOCOL_VERSION,
            });
        }
        let cmd = get_u8(b, 4);
        if cmd != 1 {
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
    pub fn version(&self) -> u16 {
        get_u16(self.as_bytes(), 2)
    }
    pub fn auth(&self) -> AuthTrailer {
        AuthTrailer::read(self.as_bytes())
    }
    /// The bytes the HMAC covers (the PDU with digest and checksum zeroed).
    pub fn authenticated_bytes(&self) -> Vec<u8> {
        auth::authenticated_bytes(self.as_bytes()).unwrap_or_default()
    }
}

/// A Null Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub version: u16,
    pub auth: AuthTrailer,
}

impl Default for Repr {
    fn default() -> Self {
        Repr {
            version: PROTOCOL_VERSION,
            auth: AuthTrailer::NONE,
        }
    }
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        Ok(Repr {
            version: packet.version(),
            auth: packet.auth(),
        })
    }
    /// `new_checked` then `parse`.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        Self::parse(&Packet::new_checked(bytes)?)
    }
    /// Writes the PDU into `buf[..48]` with the checksum zero.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        check_out(buf, PDU, LEN)?;
        let b = &mut buf[..LEN];
        b.fill(0);
        put_u16(b, 0, PDU_ID_NULL);
        put_u16(b, 2, self.version);
        put_u8(b, 4, 1);
        self.auth.write(b);
        Ok(())
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; LEN];
        let _ = self.emit(&mut v);
        v
    }
}

/// Sets the optional checksum of an emitted Null Request (`buf[..48]`).
pub fn fill_checksum(buf: &mut [u8]) {
    if let Some(b) = buf.get_mut(..LEN) {
        put_u16(b, LEN - 2, 0);
        let c = internet_checksum(b);
        put_u16(b, LEN - 2, c);
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::hex;
    use super::super::AuthMode;
    use super::*;
    use proptest::prelude::*;

    fn example() -> Vec<u8> {
        let mut b = hex("dead 0014 01 00 00 00");
        b.resize(48, 0);
        b
    }

    #[test]
    fn worked_example() {
        let b = example();
        let r = Repr::decode(&b).unwrap();
        assert_eq!(r, Repr::default());
        assert_eq!(r.to_bytes(), b);
    }

    #[test]
    fn specific_errors() {
        let b = example();
        assert!(matches!(
            Packet::new_checked(&b[..47]),
            Err(UdpstError::Truncated {
                need: 48,
                have: 47,
                ..
            })
        ));
        let mut x = b.clone();
        x[1] = 0xAE;
        assert!(matches!(
            Packet::new_checked(&x[..]),
            Err(UdpstError::BadPduId { got: 0xDEAE, .. })
        ));
        let mut x = b.clone();
        x[3] = 19;
        assert_eq!(
            Packet::new_checked(&x[..]).unwrap_err(),
            UdpstError::BadVersion {
                pdu: PDU,
                got: 19,
                ours: 20
            }
        );
        let mut x = b.clone();
        x[4] = 0;
        assert!(matches!(
            Packet::new_checked(&x[..]),
            Err(UdpstError::BadField {
                field: "cmd_request",
                ..
            })
        ));
        let mut x = b.clone();
        fill_checksum(&mut x);
        Packet::new_checked(&x[..]).unwrap();
        x[10] = 1;
        assert!(matches!(
            Packet::new_checked(&x[..]),
            Err(UdpstError::BadChecksum { .. })
        ));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(r) = Repr::decode(&b) {
                prop_assert_eq!(Repr::decode(&r.to_bytes()).unwrap(), r);
            }
        }

        #[test]
        fn any_repr_round_trips(mode: u8, time: u32, digest: [u8; 32], key_id: u8) {
            let r = Repr {
                version: PROTOCOL_VERSION,
                auth: AuthTrailer { mode: AuthMode::from_code(mode), time, digest, key_id },
            };
            prop_assert_eq!(Repr::decode(&r.to_bytes()).unwrap(), r);
        }
    }
}
