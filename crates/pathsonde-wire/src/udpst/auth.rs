//! The 41-byte authentication trailer that ends every UDPSTP control PDU
//! (spec sections 2 and 5), the bytes its HMAC-SHA256 digest covers, and the
//! input of the version-20 session-key derivation.
//!
//! ```text
//! offset from the PDU's end   size  field
//! len-41                      1     auth_mode (0 none, 1 control PDUs, 2 control+status: not supported)
//! len-40                      4     auth_time, Unix seconds
//! len-36                      32    auth_digest, HMAC-SHA256
//! len-4                       1     key_id
//! len-3                       1     reserved
//! len-2                       2     checksum (optional)
//! ```
//!
//! The digest is HMAC-SHA256(session key, the whole PDU with the digest and
//! checksum fields zeroed): [`authenticated_bytes`].  The session keys come
//! from a counter-mode KBKDF whose per-block input is [`kdf_input`].  The
//! HMAC itself is computed in pathsonde-net.

use super::{get_u32, get_u8, put_u32, put_u8};
use core::ops::Range;

/// Length of the trailer.
pub const AUTH_TRAILER_LEN: usize = 41;
/// Length of the HMAC-SHA256 digest.
pub const DIGEST_LEN: usize = 32;
/// Largest allowed |auth_time − now|, seconds (section 5).
pub const AUTH_TIME_WINDOW_S: u32 = 5;
/// The KBKDF label (section 5).
pub const KDF_LABEL: &[u8; 6] = b"UDPSTP";
/// Bits of key material the KBKDF produces (two 32-byte keys).
pub const KDF_OUTPUT_BITS: u32 = 512;

/// `auth_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AuthMode {
    /// 0: unauthenticated; the rest of the trailer is zero.
    #[default]
    None,
    /// 1: control PDUs carry an HMAC-SHA256 digest.
    Control,
    /// 2: control and status PDUs; defined but not supported (the server
    /// answers a Setup Request with it with code 6).
    ControlAndStatus,
    /// Any other value, kept so that a server can answer it with code 6.
    Unknown(u8),
}

impl AuthMode {
    pub fn code(self) -> u8 {
        match self {
            AuthMode::None => 0,
            AuthMode::Control => 1,
            AuthMode::ControlAndStatus => 2,
            AuthMode::Unknown(c) => c,
        }
    }
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => AuthMode::None,
            1 => AuthMode::Control,
            2 => AuthMode::ControlAndStatus,
            c => AuthMode::Unknown(c),
        }
    }
}

/// The trailer's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AuthTrailer {
    pub mode: AuthMode,
    /// Unix seconds at which the sender authenticated the PDU (0 in mode 0).
    pub time: u32,
    /// HMAC-SHA256 (zeros in mode 0, and while the digest is computed).
    pub digest: [u8; DIGEST_LEN],
    /// Selects the shared secret, 0–255.
    pub key_id: u8,
}

impl AuthTrailer {
    /// The all-zero trailer of an unauthenticated PDU.
    pub const NONE: AuthTrailer = AuthTrailer {
        mode: AuthMode::None,
        time: 0,
        digest: [0; DIGEST_LEN],
        key_id: 0,
    };

    /// A mode-1 trailer with a zero digest, ready for [`authenticated_bytes`]
    /// and [`set_digest`].
    pub fn control(time: u32, key_id: u8) -> Self {
        AuthTrailer {
            mode: AuthMode::Control,
            time,
            digest: [0; DIGEST_LEN],
            key_id,
        }
    }

    /// Reads the trailer at the end of `pdu` (all zero if `pdu` is shorter
    /// than the trailer).
    pub fn read(pdu: &[u8]) -> Self {
        let Some(t) = trailer_start(pdu.len()) else {
            return AuthTrailer::NONE;
        };
        let mut digest = [0u8; DIGEST_LEN];
        if let Some(d) = pdu.get(t + 5..t + 5 + DIGEST_LEN) {
            digest.copy_from_slice(d);
        }
        AuthTrailer {
            mode: AuthMode::from_code(get_u8(pdu, t)),
            time: get_u32(pdu, t + 1),
            digest,
            key_id: get_u8(pdu, t + 37),
        }
    }

    /// Writes the trailer at the end of `pdu`, with reserved and checksum
    /// zero.  Does nothing if `pdu` is shorter than the trailer.
    pub fn write(&self, pdu: &mut [u8]) {
        let Some(t) = trailer_start(pdu.len()) else {
            return;
        };
        put_u8(pdu, t, self.mode.code());
        put_u32(pdu, t + 1, self.time);
        if let Some(d) = pdu.get_mut(t + 5..t + 5 + DIGEST_LEN) {
            d.copy_from_slice(&self.digest);
        }
        put_u8(pdu, t + 37, self.key_id);
        put_u8(pdu, t + 38, 0);
        if let Some(c) = pdu.get_mut(t + 39..t + 41) {
            c.fill(0);
        }
    }
}

fn trailer_start(pdu_len: usize) -> Option<usize> {
    pdu_len.checked_sub(AUTH_TRAILER_LEN)
}

/// Where the digest sits in a control PDU of `pdu_len` bytes
/// (`len-36 .. len-4`), or `None` if the PDU cannot hold a trailer.
pub fn digest_range(pdu_len: usize) -> Option<Range<usize>> {
    let t = trailer_start(pdu_len)?;
    Some(t + 5..t + 5 + DIGEST_LEN)
}

/// Where the checksum sits in a control PDU of `pdu_len` bytes (`len-2 ..
/// len`).
pub fn checksum_range(pdu_len: usize) -> Option<Range<usize>> {
    let t = trailer_start(pdu_len)?;
    Some(t + 39..t + 41)
}

/// The bytes HMAC-SHA256 covers: the whole control PDU (header, body and
/// trailer, `0..pdu.len()`) with the digest and checksum fields set to zero.
/// The sender fills in mode, time and key id first, hashes this, writes the
/// digest with [`set_digest`], and computes the optional checksum last; the
/// receiver hashes this and compares with the received digest
/// ([`AuthTrailer::read`]).  `None` if `pdu` is too short for a trailer.
pub fn authenticated_bytes(pdu: &[u8]) -> Option<Vec<u8>> {
    let d = digest_range(pdu.len())?;
    let c = checksum_range(pdu.len())?;
    let mut v = pdu.to_vec();
    v.get_mut(d)?.fill(0);
    v.get_mut(c)?.fill(0);
    Some(v)
}

/// Writes `digest` into the trailer of `pdu`.  Returns false (and writes
/// nothing) if `pdu` is too short for a trailer.
pub fn set_digest(pdu: &mut [u8], digest: &[u8; DIGEST_LEN]) -> bool {
    match digest_range(pdu.len()).and_then(|r| pdu.get_mut(r)) {
        Some(d) => {
            d.copy_from_slice(digest);
            true
        }
        None => false,
    }
}

/// The message of KBKDF block `counter` (1 and 2 for the two keys):
/// `BE32(counter) || "UDPSTP" || 0x00 || decimal(setup_auth_time) || BE32(512)`.
/// `K(i) = HMAC-SHA256(secret, kdf_input(i, t))`; the client key is `K(1)`,
/// the server key `K(2)`; `t` is the auth_time of the Setup Request.
pub fn kdf_input(counter: u32, setup_auth_time: u32) -> Vec<u8> {
    let time = setup_auth_time.to_string();
    let mut v = Vec::with_capacity(4 + KDF_LABEL.len() + 1 + time.len() + 4);
    v.extend_from_slice(&counter.to_be_bytes());
    v.extend_from_slice(KDF_LABEL);
    v.push(0);
    v.extend_from_slice(time.as_bytes());
    v.extend_from_slice(&KDF_OUTPUT_BITS.to_be_bytes());
    v
}

/// Section 5's time check: |auth_time − now| ≤ 5 s.
pub fn auth_time_ok(auth_time: u32, now_unix_s: u64) -> bool {
    u64::from(auth_time).abs_diff(now_unix_s) <= u64::from(AUTH_TIME_WINDOW_S)
}

#[cfg(test)]
mod tests {
    use super::super::setup;
    use super::super::test_util::hex;
    use super::*;
    use hmac::{Hmac, Mac};
    use proptest::prelude::*;
    use sha2::Sha256;

    fn hmac(key: &[u8], msg: &[u8]) -> [u8; 32] {
        let mut m = Hmac::<Sha256>::new_from_slice(key).unwrap();
        m.update(msg);
        m.finalize().into_bytes().into()
    }

    /// Section 5's vector, captured from the reference: the KDF input gives
    /// its session keys, and `authenticated_bytes` its digest.
    #[test]
    fn reference_test_vector() {
        let secret = b"testkey123";
        let t = 1_795_634_991;
        let k1 = hmac(secret, &kdf_input(1, t));
        let k2 = hmac(secret, &kdf_input(2, t));
        assert_eq!(
            k1.to_vec(),
            hex("bce32953158eae75581d5dfa1b9a1b255c663ffefae460966d902b1b73be96b2")
        );
        assert_eq!(
            k2.to_vec(),
            hex("a2bdbd6c85125158b2168e402933f8f12e545c355649253eb0cc2c8764034f02")
        );
        let pdu = hex("ace1 0014 0001 dd57 0100 0000 0000 0101 6b07 372f \
             e941591b727050b01eeffa81d35ba93d78bb31f92343990d610dcb8be1312975 0700 0000");
        assert_eq!(pdu.len(), 56);
        let tr = AuthTrailer::read(&pdu);
        assert_eq!(tr.mode, AuthMode::Control);
        assert_eq!(tr.time, t);
        assert_eq!(tr.key_id, 7);
        let covered = authenticated_bytes(&pdu).unwrap();
        assert_eq!(digest_range(56), Some(20..52));
        assert!(covered[20..52].iter().all(|&b| b == 0));
        assert_eq!(&covered[..20], &pdu[..20]);
        assert_eq!(&covered[52..], &pdu[52..]);
        assert_eq!(hmac(&k1, &covered), tr.digest);

        // The same PDU built from a Repr and signed the same way.
        let p = setup::Packet::new_checked(&pdu[..]).unwrap();
        let mut r = setup::Repr::parse(&p).unwrap();
        assert_eq!(r.auth, tr);
        r.auth.digest = [0; 32];
        let mut out = r.to_bytes();
        let d = hmac(&k1, &authenticated_bytes(&out).unwrap());
        assert!(set_digest(&mut out, &d));
        assert_eq!(out, pdu);
    }

    #[test]
    fn kdf_input_layout() {
        let v = kdf_input(1, 42);
        assert_eq!(v, b"\x00\x00\x00\x01UDPSTP\x0042\x00\x00\x02\x00");
    }

    #[test]
    fn short_pdus_have_no_trailer() {
        assert_eq!(digest_range(40), None);
        assert_eq!(authenticated_bytes(&[0u8; 40]), None);
        assert!(!set_digest(&mut [0u8; 40], &[1; 32]));
        assert_eq!(AuthTrailer::read(&[7u8; 3]), AuthTrailer::NONE);
        AuthTrailer::control(1, 2).write(&mut [0u8; 3]);
    }

    #[test]
    fn time_window() {
        assert!(auth_time_ok(100, 105));
        assert!(auth_time_ok(105, 100));
        assert!(!auth_time_ok(100, 106));
        assert!(!auth_time_ok(106, 100));
        assert!(auth_time_ok(u32::MAX, u64::from(u32::MAX) + 5));
    }

    proptest! {
        #[test]
        fn trailer_round_trips(mode: u8, time: u32, digest: [u8; 32], key_id: u8, len in 41usize..200) {
            let t = AuthTrailer { mode: AuthMode::from_code(mode), time, digest, key_id };
            let mut b = vec![0xAAu8; len];
            t.write(&mut b);
            prop_assert_eq!(AuthTrailer::read(&b), t);
            prop_assert!(b[..len - 41].iter().all(|&x| x == 0xAA));
            prop_assert_eq!(&b[len - 3..], &[0u8, 0, 0][..]);
        }
    }
}
