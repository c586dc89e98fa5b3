//! TLS to the database, as libpq's `sslmode` asks for it: `disable`,
//! `prefer` (TLS when the server offers it, else plain; libpq's default),
//! `require` (TLS or nothing; the certificate checked against a root
//! certificate only when one is there, as libpq does), `verify-ca` (the
//! chain checked against the root certificate) and `verify-full` (and the
//! host name against the certificate).
//!
//! The `postgres` crate reads `disable`, `prefer` and `require` from a URL
//! and refuses the two `verify-` modes, and it reads neither `sslrootcert`
//! nor `PGSSLMODE`/`PGSSLROOTCERT`; this module takes those out of the URL
//! and builds a rustls connector that does what they ask.

use postgres::config::SslMode;
use postgres::{Client, NoTls};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error as TlsError, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;

/// libpq's `sslmode` values (`allow` is read as `prefer`: both take TLS
/// when it is there and go on without it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(v: &str) -> Option<Mode> {
        Some(match v {
            "disable" => Mode::Disable,
            "allow" | "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            _ => return None,
        })
    }
}

/// What the URL and the environment ask of TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    pub mode: Mode,
    /// The root certificate(s) to check the server's chain against: the
    /// URL's `sslrootcert`, else `PGSSLROOTCERT`, else
    /// `~/.postgresql/root.crt` — the last only if it exists.
    pub root_cert: Option<PathBuf>,
}

/// Takes `sslmode` and `sslrootcert` out of `url`'s query (the rest is
/// the `postgres` crate's to parse) and completes them from `env`.
/// `Err` names a value libpq would refuse.
pub(crate) fn split(
    url: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> std::result::Result<(String, Settings), String> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let mut mode = None;
    let mut root = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "sslmode" => {
                mode = Some(Mode::parse(v).ok_or_else(|| {
                    format!("sslmode={v} is not one of disable, allow, prefer, require, verify-ca, verify-full")
                })?)
            }
            "sslrootcert" => root = Some(PathBuf::from(percent_decode(v))),
            _ => kept.push(pair),
        }
    }
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    let mode = match mode {
        Some(m) => m,
        None => match set("PGSSLMODE") {
            Some(v) => Mode::parse(&v).ok_or_else(|| format!("PGSSLMODE={v} is not an sslmode"))?,
            None => Mode::Prefer,
        },
    };
    let root_cert = root
        .or_else(|| set("PGSSLROOTCERT").map(PathBuf::from))
        .or_else(|| {
            let home = set("HOME")?;
            let p = PathBuf::from(home).join(".postgresql/root.crt");
            p.exists().then_some(p)
        });
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, Settings { mode, root_cert }))
}

/// `%XX` escapes in a query value (a path may carry spaces).
fn percent_decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `postgres` crate's own mode for `mode`: it decides whether TLS is
/// tried and whether a server without it is accepted.
pub(crate) fn crate_mode(mode: Mode) -> SslMode {
    match mode {
        Mode::Disable => SslMode::Disable,
        Mode::Prefer => SslMode::Prefer,
        Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
    }
}

/// Connects with `config` (whose ssl mode [`crate_mode`] set) and the
/// verification `settings` ask for.
pub(crate) fn connect(
    config: &postgres::Config,
    settings: &Settings,
) -> std::result::Result<Client, ConnectError> {
    if settings.mode == Mode::Disable {
        return config.connect(NoTls).map_err(ConnectError::Postgres);
    }
    // TLS is never used over a unix socket (libpq's rule: the socket's
    // permissions are its protection), whatever sslmode says.
    let unix_only = !config.get_hosts().is_empty()
        && config
            .get_hosts()
            .iter()
            .all(|h| matches!(h, postgres::config::Host::Unix(_)));
    if unix_only {
        let mut plain = config.clone();
        plain.ssl_mode(SslMode::Disable);
        return plain.connect(NoTls).map_err(ConnectError::Postgres);
    }
    let tls = client_config(settings).map_err(ConnectError::Tls)?;
    config
        .connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
        .map_err(ConnectError::Postgres)
}

/// Why a connection failed: the TLS set-up (a root certificate that cannot
/// be read) or the connection itself.
#[derive(Debug)]
pub(crate) enum ConnectError {
    Tls(String),
    Postgres(postgres::Error),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The rustls configuration `settings` ask for.
fn client_config(settings: &Settings) -> std::result::Result<rustls::ClientConfig, String> {
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?;
    // libpq's require checks the chain when a root certificate is there.
    let check = match (settings.mode, &settings.root_cert) {
        (Mode::VerifyFull, _) => Check::Full,
        (Mode::VerifyCa, _) | (Mode::Require, Some(_)) => Check::Chain,
        _ => Check::Nothing,
    };
    let verifier: Arc<dyn ServerCertVerifier> = match check {
        Check::Nothing => Arc::new(Unverified(provider)),
        Check::Chain | Check::Full => {
            let path = settings.root_cert.as_ref().ok_or_else(|| {
                "sslmode=verify-ca and verify-full need a root certificate: sslrootcert=FILE in \
                 the URL, PGSSLROOTCERT, or ~/.postgresql/root.crt"
                    .to_string()
            })?;
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("root certificate {}: {e}", path.display()))?;
            for c in certs {
                let c = c.map_err(|e| format!("root certificate {}: {e}", path.display()))?;
                roots
                    .add(c)
                    .map_err(|e| format!("root certificate {}: {e}", path.display()))?;
            }
            if roots.is_empty() {
                return Err(format!(
                    "root certificate {}: no certificate in it",
                    path.display()
                ));
            }
            let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("root certificate {}: {e}", path.display()))?;
            if check == Check::Full {
                inner
            } else {
                Arc::new(ChainOnly(inner))
            }
        }
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    Nothing,
    Chain,
    Full,
}

/// `sslmode=prefer`/`require` without a root certificate: encrypted, but
/// the server is not authenticated (libpq's behaviour; the handshake's
/// signatures are still checked).
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, TlsError> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, TlsError> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, TlsError> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `sslmode=verify-ca`: the chain must lead to the root certificate; the
/// host name is not compared (a database reached by an address its
/// certificate does not name).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, TlsError> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(a, _)| *a == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn sslmode_and_root_cert_leave_the_url_and_the_rest_stays() {
        let (url, s) = split(
            "postgresql://u@h/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20x.pem&connect_timeout=5",
            &env(&[]),
        )
        .unwrap();
        assert_eq!(url, "postgresql://u@h/db?connect_timeout=5");
        assert_eq!(s.mode, Mode::VerifyFull);
        assert_eq!(s.root_cert, Some(PathBuf::from("/etc/ca x.pem")));
        let (url, s) = split("postgresql://u@h/db", &env(&[("PGSSLMODE", "require")])).unwrap();
        assert_eq!(
            (url.as_str(), s.mode),
            ("postgresql://u@h/db", Mode::Require)
        );
        // libpq's default, and the URL over the environment.
        assert_eq!(
            split("postgresql://h/d", &env(&[])).unwrap().1.mode,
            Mode::Prefer
        );
        let (_, s) = split(
            "postgresql://h/d?sslmode=disable",
            &env(&[("PGSSLMODE", "verify-full"), ("PGSSLROOTCERT", "/r.pem")]),
        )
        .unwrap();
        assert_eq!(s.mode, Mode::Disable);
        assert_eq!(s.root_cert, Some(PathBuf::from("/r.pem")));
        assert!(split("postgresql://h/d?sslmode=sometimes", &env(&[])).is_err());
        assert!(split("postgresql://h/d", &env(&[("PGSSLMODE", "x")])).is_err());
    }

    #[test]
    fn verifying_without_a_root_certificate_says_where_one_goes() {
        let s = Settings {
            mode: Mode::VerifyCa,
            root_cert: None,
        };
        let e = client_config(&s).unwrap_err();
        assert!(e.contains("sslrootcert") && e.contains("root.crt"), "{e}");
        let s = Settings {
            mode: Mode::VerifyFull,
            root_cert: Some(PathBuf::from("/nonexistent/root.crt")),
        };
        assert!(client_config(&s)
            .unwrap_err()
            .contains("/nonexistent/root.crt"));
        // Encrypted without a root certificate: a configuration, no error.
        for mode in [Mode::Prefer, Mode::Require] {
            assert!(client_config(&Settings {
                mode,
                root_cert: None
            })
            .is_ok());
        }
    }
}
