//! The version handshake: the first bytes on every control connection.
//!
//! Its layout is fixed for all protocol versions, so two builds of any age can
//! always tell each other which version they speak and why they part.
//!
//! ```text
//! client hello (12 bytes)            server reply (12 bytes)
//! 0..8   magic "PSONDE\x00C"         0..8   magic "PSONDE\x00S"
//! 8..10  version (u16, big-endian)   8..10  server's version (u16, BE)
//! 10..12 reserved, 0                 10     status (0 ok, 1 version, 2 busy, 3 refused)
//!                                    11     reserved, 0
//! ```

use crate::error::WireError;

pub const HELLO_LEN: usize = 12;
const CLIENT_MAGIC: &[u8; 8] = b"PSONDE\x00C";
const SERVER_MAGIC: &[u8; 8] = b"PSONDE\x00S";

/// The client's opening words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientHello {
    pub version: u16,
}

/// Whether the server will measure with this client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelloStatus {
    Ok,
    /// The server does not speak the client's version.
    VersionMismatch,
    /// Another measurement is running; try later.
    Busy,
    /// The server will not serve this client (policy).
    Refused,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerHello {
    pub version: u16,
    pub status: HelloStatus,
}

impl ClientHello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..8].copy_from_slice(CLIENT_MAGIC);
        b[8..10].copy_from_slice(&self.version.to_be_bytes());
        b
    }
    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        let b = fixed(b)?;
        if &b[..8] != CLIENT_MAGIC {
            return Err(WireError::BadMagic {
                what: "client hello",
            });
        }
        Ok(ClientHello {
            version: u16::from_be_bytes([b[8], b[9]]),
        })
    }
}

impl ServerHello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..8].copy_from_slice(SERVER_MAGIC);
        b[8..10].copy_from_slice(&self.version.to_be_bytes());
        b[10] = match self.status {
            HelloStatus::Ok => 0,
            HelloStatus::VersionMismatch => 1,
            HelloStatus::Busy => 2,
            HelloStatus::Refused => 3,
        };
        b
    }
    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        let b = fixed(b)?;
        if &b[..8] != SERVER_MAGIC {
            return Err(WireError::BadMagic {
                what: "server hello",
            });
        }
        let status = match b[10] {
            0 => HelloStatus::Ok,
            1 => HelloStatus::VersionMismatch,
            2 => HelloStatus::Busy,
            3 => HelloStatus::Refused,
            code => {
                return Err(WireError::UnknownCode {
                    what: "hello status",
                    code,
                })
            }
        };
        Ok(ServerHello {
            version: u16::from_be_bytes([b[8], b[9]]),
            status,
        })
    }
}

fn fixed(b: &[u8]) -> Result<&[u8; HELLO_LEN], WireError> {
    b.get(..HELLO_LEN)
        .and_then(|s| s.try_into().ok())
        .ok_or(WireError::Truncated {
            need: HELLO_LEN,
            have: b.len(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hellos_round_trip() {
        let c = ClientHello { version: 7 };
        assert_eq!(ClientHello::decode(&c.encode()).unwrap(), c);
        for status in [
            HelloStatus::Ok,
            HelloStatus::VersionMismatch,
            HelloStatus::Busy,
            HelloStatus::Refused,
        ] {
            let s = ServerHello { version: 3, status };
            assert_eq!(ServerHello::decode(&s.encode()).unwrap(), s);
        }
    }

    #[test]
    fn client_and_server_magic_differ() {
        let c = ClientHello { version: 1 }.encode();
        assert!(matches!(
            ServerHello::decode(&c),
            Err(WireError::BadMagic { .. })
        ));
        assert!(matches!(
            ClientHello::decode(&c[..5]),
            Err(WireError::Truncated { need: 12, have: 5 })
        ));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..40)) {
            let _ = ClientHello::decode(&b);
            let _ = ServerHello::decode(&b);
        }
    }
}
