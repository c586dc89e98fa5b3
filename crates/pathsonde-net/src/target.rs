//! The far end a command names, as a user writes it: `HOST`, `HOST:PORT`,
//! `[V6]` or `[V6]:PORT` (a bare IPv6 address such as `::1` is a host).  A
//! port written in the host wins over the command's `--port`, so the
//! `HOST:PORT` that `history` prints can be pasted back.  Parsing is apart
//! from resolving so that a malformed target is a usage error (exit 2) and
//! a name that does not resolve a network one (exit 3).

use crate::error::NetError;
use std::net::{SocketAddr, ToSocketAddrs};
use thiserror::Error;

/// A target that is not `HOST[:PORT]` or `[V6][:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TargetError {
    #[error("'{0}': the port must be a number 0..65535")]
    Port(String),
    #[error("'{0}': an IPv6 address in [ ] needs its ]")]
    Bracket(String),
    #[error("'{0}': write [ADDRESS]:PORT")]
    AfterBracket(String),
}

/// `target` split into the host and the port written after it, if any.
pub fn split_host_port(target: &str) -> Result<(&str, Option<u16>), TargetError> {
    let port_of = |p: &str| {
        p.parse::<u16>()
            .map_err(|_| TargetError::Port(target.to_string()))
    };
    if let Some(rest) = target.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err(TargetError::Bracket(target.to_string()));
        };
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(p) => Ok((host, Some(port_of(p)?))),
                None => Err(TargetError::AfterBracket(target.to_string())),
            },
        };
    }
    match target.split_once(':') {
        Some((host, p)) if !p.contains(':') => Ok((host, Some(port_of(p)?))),
        _ => Ok((target, None)),
    }
}

/// Resolves `host` (already split) at `port` to its first address.
pub fn resolve(target: &str, host: &str, port: u16) -> Result<SocketAddr, NetError> {
    let failed = |source: std::io::Error| NetError::Resolve {
        host: target.to_string(),
        source,
    };
    let mut addrs = (host, port).to_socket_addrs().map_err(failed)?;
    addrs.next().ok_or_else(|| {
        failed(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no address",
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_may_carry_its_port() {
        assert_eq!(split_host_port("example.net"), Ok(("example.net", None)));
        assert_eq!(
            split_host_port("127.0.0.1:5310"),
            Ok(("127.0.0.1", Some(5310)))
        );
        assert_eq!(split_host_port("::1"), Ok(("::1", None)));
        assert_eq!(split_host_port("[::1]"), Ok(("::1", None)));
        assert_eq!(split_host_port("[::1]:7000"), Ok(("::1", Some(7000))));
        assert!(split_host_port("host:http").is_err());
        assert!(split_host_port("host:70000").is_err());
        assert!(split_host_port("[::1").is_err());
        assert!(split_host_port("[::1]7000").is_err());
    }

    #[test]
    fn resolving_gives_the_port_asked() {
        let a = resolve("127.0.0.1", "127.0.0.1", 5310).unwrap();
        assert_eq!(a, "127.0.0.1:5310".parse().unwrap());
    }
}
