//! Mode-1 authentication of UDPSTP control PDUs (spec §5): the KBKDF that
//! turns a shared secret and the Setup Request's auth_time into the client
//! and server keys, and HMAC-SHA256 over a PDU's authenticated bytes, signed
//! and checked (in constant time).  The layout (trailer, what the digest
//! covers, the KDF's input) is pathsonde-wire's `udpst::auth`.

use hmac::{Hmac, Mac};
use pathsonde_wire::udpst::auth::{self, AuthMode, AuthTrailer, DIGEST_LEN};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The two keys of one connection, derived once from the Setup Request's auth_time.
#[derive(Clone)]
pub(crate) struct SessionKeys {
    /// Authenticates client → server PDUs (K(1)).
    pub client: [u8; DIGEST_LEN],
    /// Authenticates server → client PDUs (K(2)).
    pub server: [u8; DIGEST_LEN],
    pub key_id: u8,
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; DIGEST_LEN] {
    // HMAC takes keys of any length.
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    m.update(data);
    m.finalize().into_bytes().into()
}

impl SessionKeys {
    /// KBKDF in counter mode with HMAC-SHA256: K(i) = HMAC(secret, kdf_input(i, t)).
    pub fn derive(secret: &[u8], setup_auth_time: u32, key_id: u8) -> SessionKeys {
        SessionKeys {
            client: hmac(secret, &auth::kdf_input(1, setup_auth_time)),
            server: hmac(secret, &auth::kdf_input(2, setup_auth_time)),
            key_id,
        }
    }
}

/// Unix seconds now (the auth_time clock).
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Writes a mode-1 trailer (now, `key_id`) into the emitted control PDU
/// `pdu` and signs it with `key`.
pub(crate) fn sign(pdu: &mut [u8], key: &[u8; DIGEST_LEN], key_id: u8) {
    sign_at(pdu, key, key_id, unix_now() as u32);
}

/// [`sign`] with a given auth_time (the Setup Request's, from which the keys were derived).
pub(crate) fn sign_at(pdu: &mut [u8], key: &[u8; DIGEST_LEN], key_id: u8, time: u32) {
    AuthTrailer::control(time, key_id).write(pdu);
    if let Some(bytes) = auth::authenticated_bytes(pdu) {
        let d = hmac(key, &bytes);
        auth::set_digest(pdu, &d);
    }
}

/// Why a received control PDU fails mode-1 validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthFailure {
    /// Not mode 1, or the digest does not match.
    Digest,
    /// auth_time outside ±5 s of this clock.
    Time,
}

/// Checks a received control PDU's mode, digest (constant time) and time window.
pub(crate) fn verify(pdu: &[u8], key: &[u8; DIGEST_LEN]) -> Result<(), AuthFailure> {
    let t = AuthTrailer::read(pdu);
    if t.mode != AuthMode::Control {
        return Err(AuthFailure::Digest);
    }
    digest_ok(pdu, key, &t)?;
    if !auth::auth_time_ok(t.time, unix_now()) {
        return Err(AuthFailure::Time);
    }
    Ok(())
}

/// The digest check alone.
pub(crate) fn digest_ok(
    pdu: &[u8],
    key: &[u8; DIGEST_LEN],
    t: &AuthTrailer,
) -> Result<(), AuthFailure> {
    let Some(bytes) = auth::authenticated_bytes(pdu) else {
        return Err(AuthFailure::Digest);
    };
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).map_err(|_| AuthFailure::Digest)?;
    m.update(&bytes);
    m.verify_slice(&t.digest).map_err(|_| AuthFailure::Digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The spec's §5 test vector, captured from the reference.
    #[test]
    fn reference_test_vector() {
        let k = SessionKeys::derive(b"testkey123", 1_795_634_991, 7);
        assert_eq!(
            k.client.to_vec(),
            unhex("bce32953158eae75581d5dfa1b9a1b255c663ffefae460966d902b1b73be96b2")
        );
        assert_eq!(
            k.server.to_vec(),
            unhex("a2bdbd6c85125158b2168e402933f8f12e545c355649253eb0cc2c8764034f02")
        );
        let pdu = unhex(
            "ace1 0014 0001 dd57 0100 0000 0000 0101 6b07 372f e941591b727050b01eeffa81d35ba93d78bb31f92343990d610dcb8be1312975 0700 0000"
                .replace(' ', "")
                .as_str(),
        );
        assert_eq!(pdu.len(), 56);
        let t = AuthTrailer::read(&pdu);
        assert_eq!(digest_ok(&pdu, &k.client, &t), Ok(()));
        assert_eq!(digest_ok(&pdu, &k.server, &t), Err(AuthFailure::Digest));
        // Old time: the digest holds, the window does not.
        assert_eq!(verify(&pdu, &k.client), Err(AuthFailure::Time));
    }

    #[test]
    fn sign_then_verify() {
        let k = SessionKeys::derive(b"secret", 1000, 3);
        let mut pdu = vec![0u8; 104];
        pdu[0] = 0xAC;
        sign(&mut pdu, &k.client, 3);
        assert_eq!(verify(&pdu, &k.client), Ok(()));
        pdu[10] ^= 1;
        assert_eq!(verify(&pdu, &k.client), Err(AuthFailure::Digest));
    }
}
