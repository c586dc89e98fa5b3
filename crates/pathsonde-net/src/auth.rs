//! Optional shared-secret authentication of a control session
//! (docs/security.md).
//!
//! A challenge–response over the control channel, so the secret never
//! crosses the network: the server sends a fresh 32-byte nonce, the client
//! answers with its key id, its own fresh nonce and
//! `HMAC-SHA256(secret, "pathsonde-auth-v1 client" ‖ key id ‖ server nonce ‖ client nonce)`;
//! the server checks it in constant time and proves it holds the same secret
//! with the same construction under the label `server`.  Both nonces in both
//! MACs: neither side can replay an answer it saw in another session.
//!
//! Keys live in a file (never on a command line, where `ps` shows them):
//! one key a line, `<key-id> <secret as hex>`, `#` comments.  The file must
//! not be readable by group or others.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;
use std::path::Path;
use thiserror::Error;

/// Bytes of each side's nonce.
pub const NONCE_LEN: usize = 32;
/// Bytes of an HMAC-SHA256 tag.
pub const MAC_LEN: usize = 32;
/// Shortest secret accepted: 128 bits.
pub const MIN_SECRET_BYTES: usize = 16;
/// Longest secret accepted.
pub const MAX_SECRET_BYTES: usize = 512;
/// Longest key id (a user or host name).
pub const MAX_KEY_ID_LEN: usize = 64;
/// Largest key file read.
pub const MAX_KEY_FILE_BYTES: u64 = 1 << 20;

type HmacSha256 = Hmac<Sha256>;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AuthError {
    #[error("key file {path}: {why}")]
    File { path: String, why: String },
    #[error("key file line {line}: {why}")]
    Syntax { line: usize, why: String },
    #[error("key file has no keys")]
    Empty,
}

/// One shared secret and the name it goes by.
#[derive(Clone)]
pub struct Key {
    pub id: String,
    secret: Vec<u8>,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print a secret, not even in a debug dump.
        write!(
            f,
            "Key {{ id: {:?}, secret: <{} bytes> }}",
            self.id,
            self.secret.len()
        )
    }
}

impl Key {
    /// The secret's bytes (for protocols that do their own HMAC, such as UDPST's mode 1).
    pub fn secret(&self) -> &[u8] {
        &self.secret
    }
    /// A key from raw bytes (tests and callers that hold the secret already).
    pub fn new(id: &str, secret: &[u8]) -> Result<Key, AuthError> {
        check_id(id).map_err(|why| AuthError::Syntax { line: 0, why })?;
        check_secret_len(secret.len()).map_err(|why| AuthError::Syntax { line: 0, why })?;
        Ok(Key {
            id: id.to_string(),
            secret: secret.to_vec(),
        })
    }
}

/// The keys a server accepts, or the one a client uses (the first).
#[derive(Debug, Clone)]
pub struct KeyRing {
    keys: Vec<Key>,
}

impl KeyRing {
    pub fn new(keys: Vec<Key>) -> Result<KeyRing, AuthError> {
        if keys.is_empty() {
            return Err(AuthError::Empty);
        }
        Ok(KeyRing { keys })
    }
    pub fn get(&self, id: &str) -> Option<&Key> {
        self.keys.iter().find(|k| k.id == id)
    }
    /// Every key, in file order.
    pub fn keys(&self) -> &[Key] {
        &self.keys
    }
    /// The key a client presents when none is named.
    pub fn first(&self) -> &Key {
        &self.keys[0]
    }
    pub fn len(&self) -> usize {
        self.keys.len()
    }
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_KEY_ID_LEN {
        return Err(format!("key id must be 1..={MAX_KEY_ID_LEN} characters"));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
    {
        return Err(format!(
            "key id '{}' may hold only letters, digits and . _ - @",
            id.escape_default()
        ));
    }
    Ok(())
}

fn check_secret_len(n: usize) -> Result<(), String> {
    if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&n) {
        return Err(format!(
            "secret of {n} bytes; use {MIN_SECRET_BYTES}..={MAX_SECRET_BYTES} (e.g. `openssl rand -hex 32`)"
        ));
    }
    Ok(())
}

fn hex_decode(s: &str) -> Result<Vec<u8>, String> {
    if s.len() % 2 != 0 {
        return Err("secret must be an even number of hex digits".into());
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    s.as_bytes()
        .chunks_exact(2)
        .map(|p| match (digit(p[0]), digit(p[1])) {
            (Some(h), Some(l)) => Ok(h << 4 | l),
            _ => Err("secret must be hex digits".to_string()),
        })
        .collect()
}

/// Parses a key file's text: `<key-id> <hex secret>` per line, blank lines
/// and `#` comments ignored, ids unique.
pub fn parse_key_file(text: &str) -> Result<KeyRing, AuthError> {
    let mut keys: Vec<Key> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let syntax = |why: String| AuthError::Syntax { line, why };
        let mut fields = l.split_whitespace();
        let (Some(id), Some(hex), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err(syntax("expected `<key-id> <hex secret>`".into()));
        };
        check_id(id).map_err(syntax)?;
        if hex.len() > 2 * MAX_SECRET_BYTES {
            return Err(syntax(format!(
                "secret longer than {MAX_SECRET_BYTES} bytes"
            )));
        }
        let secret = hex_decode(hex).map_err(syntax)?;
        check_secret_len(secret.len()).map_err(syntax)?;
        if keys.iter().any(|k| k.id == id) {
            return Err(syntax(format!("key id '{id}' appears twice")));
        }
        keys.push(Key {
            id: id.to_string(),
            secret,
        });
    }
    KeyRing::new(keys)
}

/// Reads and parses a key file, refusing one that group or others may read.
pub fn load_key_file(path: &Path) -> Result<KeyRing, AuthError> {
    use std::os::unix::fs::PermissionsExt;
    let file_err = |why: String| AuthError::File {
        path: path.display().to_string(),
        why,
    };
    let meta = std::fs::metadata(path).map_err(|e| file_err(e.to_string()))?;
    if !meta.is_file() {
        return Err(file_err("not a regular file".into()));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(file_err(format!(
            "readable by group or others (mode {mode:03o}); `chmod 600` it"
        )));
    }
    if meta.len() > MAX_KEY_FILE_BYTES {
        return Err(file_err(format!("larger than {MAX_KEY_FILE_BYTES} bytes")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| file_err(e.to_string()))?;
    parse_key_file(&text).map_err(|e| match e {
        AuthError::Syntax { line, why } => file_err(format!("line {line}: {why}")),
        AuthError::Empty => file_err("no keys in it".into()),
        other => other,
    })
}

fn mac(
    key: &Key,
    role: &[u8],
    server_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(&key.secret).expect("HMAC takes any key length");
    m.update(b"pathsonde-auth-v1 ");
    m.update(role);
    // Length-prefixed id: no two (id, nonce) pairs share a transcript.
    m.update(&[key.id.len() as u8]);
    m.update(key.id.as_bytes());
    m.update(server_nonce);
    m.update(client_nonce);
    m
}

/// The client's answer to a challenge.
pub fn client_proof(
    key: &Key,
    server_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
) -> [u8; MAC_LEN] {
    mac(key, b"client", server_nonce, client_nonce)
        .finalize()
        .into_bytes()
        .into()
}

/// The server's proof that it holds the same key.
pub fn server_proof(
    key: &Key,
    server_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
) -> [u8; MAC_LEN] {
    mac(key, b"server", server_nonce, client_nonce)
        .finalize()
        .into_bytes()
        .into()
}

/// Checks a client's answer in constant time.
pub fn verify_client(
    key: &Key,
    server_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
    tag: &[u8],
) -> bool {
    mac(key, b"client", server_nonce, client_nonce)
        .verify_slice(tag)
        .is_ok()
}

/// Checks the server's proof in constant time.
pub fn verify_server(
    key: &Key,
    server_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
    tag: &[u8],
) -> bool {
    mac(key, b"server", server_nonce, client_nonce)
        .verify_slice(tag)
        .is_ok()
}

/// A fresh nonce from the kernel's random source.
pub fn nonce() -> [u8; NONCE_LEN] {
    let mut b = [0u8; NONCE_LEN];
    crate::random::fill(&mut b);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    #[test]
    fn key_files_parse_and_name_their_errors() {
        let ring = parse_key_file(&format!(
            "# keys\n\nalice {SECRET}\nbob.lab {}\n",
            &SECRET[..32]
        ))
        .unwrap();
        assert_eq!(ring.len(), 2);
        assert_eq!(ring.first().id, "alice");
        assert_eq!(ring.get("bob.lab").unwrap().secret.len(), 16);
        let err = |t: &str| parse_key_file(t).unwrap_err().to_string();
        assert!(
            err("alice 0011").contains("line 1"),
            "{}",
            err("alice 0011")
        );
        assert!(err("alice zz11223344556677889900112233445566").contains("hex"));
        assert!(err(&format!("a b {SECRET}")).contains("expected"));
        assert!(err(&format!("al/ice {SECRET}")).contains("letters"));
        assert!(err(&format!("a {SECRET}\na {SECRET}")).contains("twice"));
        assert_eq!(parse_key_file("# nothing\n").unwrap_err(), AuthError::Empty);
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let ring = parse_key_file(&format!("alice {SECRET}")).unwrap();
        let dump = format!("{ring:?}");
        assert!(!dump.contains("0011") && !dump.contains("[0, 17"), "{dump}");
    }

    #[test]
    fn proofs_bind_the_key_the_role_and_both_nonces() {
        let k = Key::new("alice", &[7u8; 32]).unwrap();
        let other = Key::new("alice", &[8u8; 32]).unwrap();
        let renamed = Key::new("bob", &[7u8; 32]).unwrap();
        let (s, c) = ([1u8; 32], [2u8; 32]);
        let p = client_proof(&k, &s, &c);
        assert!(verify_client(&k, &s, &c, &p));
        assert!(!verify_client(&other, &s, &c, &p), "wrong secret");
        assert!(!verify_client(&renamed, &s, &c, &p), "wrong id");
        assert!(
            !verify_client(&k, &[9u8; 32], &c, &p),
            "replayed to a new challenge"
        );
        assert!(!verify_client(&k, &s, &[9u8; 32], &p), "other client nonce");
        assert!(
            !verify_server(&k, &s, &c, &p),
            "a client proof is not a server proof"
        );
        assert!(!verify_client(&k, &s, &c, &p[..31]), "truncated");
        let sp = server_proof(&k, &s, &c);
        assert!(verify_server(&k, &s, &c, &sp));
        assert_ne!(nonce(), nonce());
    }

    #[test]
    fn a_group_readable_key_file_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("pathsonde-auth-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("key");
        std::fs::write(&p, format!("alice {SECRET}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = load_key_file(&p).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(load_key_file(&p).unwrap().first().id, "alice");
        assert!(load_key_file(&dir.join("none")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
