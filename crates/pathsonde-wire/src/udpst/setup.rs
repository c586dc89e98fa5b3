//! Setup Request and Setup Response (`0xACE1`, 56 bytes): the client asks the
//! server's control port for a test connection; the server echoes the PDU
//! with a result code and, on ACK, the new test port (spec section 3.1).
//!
//! ```text
//! off size field
//! 0   2    pdu_id 0xACE1
//! 2   2    protocol_version (request: 20; a "bad version" response: the server's)
//! 4   1    mc_index          5   1  mc_count        6  2  mc_ident
//! 8   1    cmd_request: 1 Setup Request, 2 Setup Response
//! 9   1    cmd_response: result code (0 in requests)
//! 10  2    max_bandwidth: bit 15 = upstream, bits 14-0 = Mb/s (0 = not stated)
//! 12  2    test_port (response with ACK)
//! 14  1    modifiers: 0x01 jumbo, 0x02 traditional MTU
//! 15  41   authentication trailer
//! ```
//!
//! `new_checked` refuses a wrong length (exactly 56), identifier,
//! cmd_request or a non-zero checksum that does not verify.  It does **not**
//! refuse a foreign protocol version: a server must read such a request to
//! answer it with code 2 ([`Packet::check_version`], [`Repr::response`]).

use super::auth::{self, AuthTrailer};
use super::{
    check_fixed, check_out, checksum_verifies, get_u16, get_u8, internet_checksum, put_u16, put_u8,
    Result, UdpstError, PDU_ID_SETUP, PROTOCOL_VERSION,
};

/// Length of a Setup PDU.
pub const LEN: usize = 56;
const PDU: &str = "Setup PDU";
/// Largest `max_bandwidth` a client may state, Mb/s (15 bits).
pub const MAX_BANDWIDTH_MBPS: u16 = 0x7FFF;
/// Largest number of connections in one multi-connection test.
pub const MAX_MC_COUNT: u8 = 24;

/// `cmd_request`: which of the two the PDU is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetupCommand {
    /// 1: client → server control port.
    Request,
    /// 2: server → client, the request echoed with a result.
    Response,
}

impl SetupCommand {
    pub fn code(self) -> u8 {
        match self {
            SetupCommand::Request => 1,
            SetupCommand::Response => 2,
        }
    }
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(SetupCommand::Request),
            2 => Some(SetupCommand::Response),
            _ => None,
        }
    }
}

/// `cmd_response` of a Setup Response (the reference client's ErrorStatus is
/// 100 + code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SetupResult {
    /// 0: none (requests).
    #[default]
    None,
    /// 1: accepted; `test_port` is valid.
    Ack,
    /// 2: protocol version not accepted.
    BadVersion,
    /// 3: the jumbo bit does not match the server's configuration.
    JumboMismatch,
    /// 4: authentication used, none configured on the server.
    AuthNotConfigured,
    /// 5: the server requires authentication.
    AuthRequired,
    /// 6: auth_mode above 1.
    InvalidAuthMode,
    /// 7: digest failure.
    AuthFailure,
    /// 8: auth_time outside the ±5 s window.
    AuthTimeInvalid,
    /// 9: the server requires max_bandwidth.
    BandwidthRequired,
    /// 10: requested bandwidth exceeds what the server has free.
    BandwidthExceeded,
    /// 11: the traditional-MTU bit does not match the server.
    TraditionalMtuMismatch,
    /// 12: mc_count 0 or above 24, or mc_index ≥ mc_count.
    InvalidMultiConnection,
    /// 13: the server could not allocate a connection or socket.
    AllocationFailed,
    /// Any other code (the reference client reports ErrorStatus 100).
    Unknown(u8),
}

impl SetupResult {
    pub fn code(self) -> u8 {
        use SetupResult::*;
        match self {
            None => 0,
            Ack => 1,
            BadVersion => 2,
            JumboMismatch => 3,
            AuthNotConfigured => 4,
            AuthRequired => 5,
            InvalidAuthMode => 6,
            AuthFailure => 7,
            AuthTimeInvalid => 8,
            BandwidthRequired => 9,
            BandwidthExceeded => 10,
            TraditionalMtuMismatch => 11,
            InvalidMultiConnection => 12,
            AllocationFailed => 13,
            Unknown(c) => c,
        }
    }
    pub fn from_code(code: u8) -> Self {
        use SetupResult::*;
        match code {
            0 => None,
            1 => Ack,
            2 => BadVersion,
            3 => JumboMismatch,
            4 => AuthNotConfigured,
            5 => AuthRequired,
            6 => InvalidAuthMode,
            7 => AuthFailure,
            8 => AuthTimeInvalid,
            9 => BandwidthRequired,
            10 => BandwidthExceeded,
            11 => TraditionalMtuMismatch,
            12 => InvalidMultiConnection,
            13 => AllocationFailed,
            c => Unknown(c),
        }
    }
    /// The reference client's ErrorStatus for this response: 100 + code for
    /// the defined rejections, 100 for an unknown code, 0 for ACK.
    pub fn error_status(self) -> u8 {
        match self {
            SetupResult::Ack => 0,
            SetupResult::Unknown(_) | SetupResult::None => 100,
            r => 100 + r.code(),
        }
    }
}

/// `max_bandwidth`: the rate this connection needs and its direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MaxBandwidth {
    /// Bit 15: the bandwidth is for upstream.
    pub upstream: bool,
    /// Bits 14–0, Mb/s; 0 = not stated.  Values above 32767 are written as
    /// 32767.
    pub mbps: u16,
}

impl MaxBandwidth {
    pub fn from_wire(v: u16) -> Self {
        MaxBandwidth {
            upstream: v & 0x8000 != 0,
            mbps: v & MAX_BANDWIDTH_MBPS,
        }
    }
    pub fn to_wire(self) -> u16 {
        (if self.upstream { 0x8000 } else { 0 }) | self.mbps.min(MAX_BANDWIDTH_MBPS)
    }
}

/// `modifiers` of the Setup PDU (unknown bits are kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SetupModifiers(pub u8);

impl SetupModifiers {
    /// 0x01: jumbo datagram sizes allowed above 1 Gb/s (the reference's
    /// default).
    pub const JUMBO: u8 = 0x01;
    /// 0x02: "traditional" 1500-byte MTU sizes.
    pub const TRADITIONAL_MTU: u8 = 0x02;
    pub fn jumbo(self) -> bool {
        self.0 & Self::JUMBO != 0
    }
    pub fn traditional_mtu(self) -> bool {
        self.0 & Self::TRADITIONAL_MTU != 0
    }
    pub fn new(jumbo: bool, traditional_mtu: bool) -> Self {
        SetupModifiers(
            (if jumbo { Self::JUMBO } else { 0 })
                | (if traditional_mtu {
                    Self::TRADITIONAL_MTU
                } else {
                    0
                }),
        )
    }
}

/// A checked view of a Setup PDU.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks length (exactly 56), identifier, cmd_request ∈ {1, 2} and the
    /// checksum (when non-zero).  The version is not checked (see the module
    /// doc).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        check_fixed(b, PDU, LEN, PDU_ID_SETUP)?;
        let cmd = get_u8(b, 8);
        if SetupCommand::from_code(cmd).is_none() {
            return Err(UdpstError::BadField {
                pdu: PDU,
                field: "cmd_request",
                value: u32::from(cmd),
            });
        }
        if !checksum_verifies(b, get_u16(b, 54)) {
            return Err(UdpstError::BadChecksum { pdu: PDU });
        }
        Ok(Packet { buffer })
    }

    /// Refuses a protocol version pathsonde does not speak
    /// ([`super::version_accepted`]).
    pub fn check_version(&self) -> Result<()> {
        let got = self.version();
        if super::version_accepted(got) {
            Ok(())
        } else {
            Err(UdpstError::BadVersion {
                pdu: PDU,
                got,
                ours: PROTOCOL_VERSION,
            })
        }
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
    pub fn mc_index(&self) -> u8 {
        get_u8(self.as_bytes(), 4)
    }
    pub fn mc_count(&self) -> u8 {
        get_u8(self.as_bytes(), 5)
    }
    pub fn mc_ident(&self) -> u16 {
        get_u16(self.as_bytes(), 6)
    }
    pub fn command(&self) -> SetupCommand {
        SetupCommand::from_code(get_u8(self.as_bytes(), 8)).unwrap_or(SetupCommand::Request)
    }
    pub fn result(&self) -> SetupResult {
        SetupResult::from_code(get_u8(self.as_bytes(), 9))
    }
    pub fn max_bandwidth(&self) -> MaxBandwidth {
        MaxBandwidth::from_wire(get_u16(self.as_bytes(), 10))
    }
    pub fn test_port(&self) -> u16 {
        get_u16(self.as_bytes(), 12)
    }
    pub fn modifiers(&self) -> SetupModifiers {
        SetupModifiers(get_u8(self.as_bytes(), 14))
    }
    pub fn auth(&self) -> AuthTrailer {
        AuthTrailer::read(self.as_bytes())
    }
    pub fn checksum(&self) -> u16 {
        get_u16(self.as_bytes(), 54)
    }
    /// The bytes the HMAC covers (the PDU with digest and checksum zeroed).
    pub fn authenticated_bytes(&self) -> Vec<u8> {
        auth::authenticated_bytes(self.as_bytes()).unwrap_or_default()
    }
}

/// A Setup Request or Response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub version: u16,
    pub command: SetupCommand,
    pub result: SetupResult,
    pub mc_index: u8,
    pub mc_count: u8,
    pub mc_ident: u16,
    pub max_bandwidth: MaxBandwidth,
    pub test_port: u16,
    pub modifiers: SetupModifiers,
    pub auth: AuthTrailer,
}

impl Repr {
    /// A version-20 Setup Request (auth trailer zero; fill it for mode 1).
    pub fn request(
        mc_index: u8,
        mc_count: u8,
        mc_ident: u16,
        max_bandwidth: MaxBandwidth,
        modifiers: SetupModifiers,
    ) -> Self {
        Repr {
            version: PROTOCOL_VERSION,
            command: SetupCommand::Request,
            result: SetupResult::None,
            mc_index,
            mc_count,
            mc_ident,
            max_bandwidth,
            test_port: 0,
            modifiers,
            auth: AuthTrailer::NONE,
        }
    }

    /// The server's answer: this request echoed with `result` and (on ACK)
    /// `test_port`; on [`SetupResult::BadVersion`] the version field carries
    /// ours.  The trailer is zero (the server signs it with its own key).
    pub fn response(&self, result: SetupResult, test_port: u16) -> Self {
        Repr {
            version: if result == SetupResult::BadVersion {
                PROTOCOL_VERSION
            } else {
                self.version
            },
            command: SetupCommand::Response,
            result,
            test_port: if result == SetupResult::Ack {
                test_port
            } else {
                self.test_port
            },
            auth: AuthTrailer::NONE,
            ..*self
        }
    }

    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        Ok(Repr {
            version: packet.version(),
            command: packet.command(),
            result: packet.result(),
            mc_index: packet.mc_index(),
            mc_count: packet.mc_count(),
            mc_ident: packet.mc_ident(),
            max_bandwidth: packet.max_bandwidth(),
            test_port: packet.test_port(),
            modifiers: packet.modifiers(),
            auth: packet.auth(),
        })
    }

    /// `new_checked` then `parse`.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        Self::parse(&Packet::new_checked(bytes)?)
    }

    /// Writes the PDU into `buf[..56]` with the checksum zero.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        check_out(buf, PDU, LEN)?;
        let b = &mut buf[..LEN];
        b.fill(0);
        put_u16(b, 0, PDU_ID_SETUP);
        put_u16(b, 2, self.version);
        put_u8(b, 4, self.mc_index);
        put_u8(b, 5, self.mc_count);
        put_u16(b, 6, self.mc_ident);
        put_u8(b, 8, self.command.code());
        put_u8(b, 9, self.result.code());
        put_u16(b, 10, self.max_bandwidth.to_wire());
        put_u16(b, 12, self.test_port);
        put_u8(b, 14, self.modifiers.0);
        self.auth.write(b);
        Ok(())
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; LEN];
        let _ = self.emit(&mut v);
        v
    }
}

/// Sets the optional checksum of an emitted Setup PDU (`buf[..56]`); call
/// after the digest.  Does nothing on a shorter buffer.
pub fn fill_checksum(buf: &mut [u8]) {
    if let Some(b) = buf.get_mut(..LEN) {
        put_u16(b, 54, 0);
        let c = internet_checksum(b);
        put_u16(b, 54, c);
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::hex;
    use super::super::AuthMode;
    use super::*;
    use proptest::prelude::*;

    /// Section 12's Setup Request, captured on loopback.
    const REQUEST: &str = "ace1001400013c94010000000000010000000000000000000000000000000000\
                           000000000000000000000000000000000000000000000000";

    #[test]
    fn worked_example_request() {
        let b = hex(REQUEST);
        let p = Packet::new_checked(&b[..]).unwrap();
        p.check_version().unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr::request(
                0,
                1,
                0x3C94,
                MaxBandwidth::default(),
                SetupModifiers::new(true, false)
            )
        );
        assert_eq!(r.auth.mode, AuthMode::None);
        assert_eq!(r.to_bytes(), b);
    }

    #[test]
    fn worked_example_response() {
        let req = Repr::decode(&hex(REQUEST)).unwrap();
        let mut b = hex(REQUEST);
        b[8] = 0x02;
        b[9] = 0x01;
        b[12] = 0x8F;
        b[13] = 0xB5;
        let r = Repr::decode(&b).unwrap();
        assert_eq!(r.command, SetupCommand::Response);
        assert_eq!(r.result, SetupResult::Ack);
        assert_eq!(r.test_port, 36789);
        assert_eq!(r, req.response(SetupResult::Ack, 36789));
        assert_eq!(r.to_bytes(), b);
    }

    #[test]
    fn specific_errors() {
        let b = hex(REQUEST);
        assert_eq!(
            Packet::new_checked(&b[..55]).unwrap_err(),
            UdpstError::Truncated {
                pdu: PDU,
                need: 56,
                have: 55
            }
        );
        let mut long = b.clone();
        long.push(0);
        assert!(matches!(
            Packet::new_checked(&long[..]),
            Err(UdpstError::WrongLength {
                expected: 56,
                got: 57,
                ..
            })
        ));
        let mut x = b.clone();
        x[0] = 0xAC;
        x[1] = 0xE2;
        assert!(matches!(
            Packet::new_checked(&x[..]),
            Err(UdpstError::BadPduId {
                expected: 0xACE1,
                got: 0xACE2,
                ..
            })
        ));
        let mut x = b.clone();
        x[8] = 3;
        assert!(matches!(
            Packet::new_checked(&x[..]),
            Err(UdpstError::BadField {
                field: "cmd_request",
                value: 3,
                ..
            })
        ));
        let mut x = b.clone();
        x[3] = 99;
        let p = Packet::new_checked(&x[..]).unwrap();
        assert_eq!(
            p.check_version(),
            Err(UdpstError::BadVersion {
                pdu: PDU,
                got: 99,
                ours: 20
            })
        );
        // The server answers it with code 2 and its own version.
        let resp = Repr::parse(&p)
            .unwrap()
            .response(SetupResult::BadVersion, 0);
        assert_eq!(resp.version, 20);
        assert_eq!(resp.result.error_status(), 102);
    }

    #[test]
    fn checksum_checked_only_when_present() {
        let mut b = hex(REQUEST);
        fill_checksum(&mut b);
        assert_ne!(&b[54..56], &[0, 0]);
        Packet::new_checked(&b[..]).unwrap();
        b[20] ^= 0x40;
        assert_eq!(
            Packet::new_checked(&b[..]).unwrap_err(),
            UdpstError::BadChecksum { pdu: PDU }
        );
    }

    #[test]
    fn bandwidth_saturates_and_short_buffer_is_an_error() {
        let mut r = Repr::decode(&hex(REQUEST)).unwrap();
        r.max_bandwidth = MaxBandwidth {
            upstream: true,
            mbps: 60000,
        };
        let b = r.to_bytes();
        assert_eq!(&b[10..12], &[0xFF, 0xFF]);
        assert_eq!(
            Repr::decode(&b).unwrap().max_bandwidth,
            MaxBandwidth {
                upstream: true,
                mbps: 32767
            }
        );
        assert!(matches!(
            r.emit(&mut [0u8; 10]),
            Err(UdpstError::BufferTooSmall { need: 56, .. })
        ));
    }

    pub(crate) fn arb_repr() -> impl Strategy<Value = Repr> {
        (
            (any::<u16>(), 1u8..=2, any::<u8>(), any::<u8>(), any::<u8>()),
            (any::<u16>(), any::<bool>(), 0u16..=0x7FFF, any::<u16>()),
            (
                any::<u8>(),
                any::<u8>(),
                any::<u32>(),
                any::<[u8; 32]>(),
                any::<u8>(),
            ),
        )
            .prop_map(
                |(
                    (version, cmd, result, mc_index, mc_count),
                    (mc_ident, upstream, mbps, test_port),
                    (modifiers, mode, time, digest, key_id),
                )| Repr {
                    version,
                    command: SetupCommand::from_code(cmd).unwrap(),
                    result: SetupResult::from_code(result),
                    mc_index,
                    mc_count,
                    mc_ident,
                    max_bandwidth: MaxBandwidth { upstream, mbps },
                    test_port,
                    modifiers: SetupModifiers(modifiers),
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
        fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Packet::new_checked(&b[..]) {
                let _ = p.check_version();
                let r = Repr::parse(&p).unwrap();
                prop_assert_eq!(Repr::decode(&r.to_bytes()).unwrap(), r);
            }
        }

        #[test]
        fn valid_length_and_id_never_panic(mut b in prop::collection::vec(any::<u8>(), LEN)) {
            b[0] = 0xAC;
            b[1] = 0xE1;
            if let Ok(r) = Repr::decode(&b) {
                prop_assert_eq!(Repr::decode(&r.to_bytes()).unwrap(), r);
            }
        }

        #[test]
        fn any_repr_round_trips(r in arb_repr()) {
            prop_assert_eq!(Repr::decode(&r.to_bytes()).unwrap(), r);
        }
    }
}
