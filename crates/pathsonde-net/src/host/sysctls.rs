//! Kernel version and the network settings that bound a measurement:
//! socket buffer limits, TCP congestion control, the default qdisc.

use super::{read_trimmed, Known};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kernel {
    /// uname: sysname, release, version, machine.
    pub sysname: Known<String>,
    pub release: Known<String>,
    pub version: Known<String>,
    pub machine: Known<String>,
    pub hostname: Known<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sysctls {
    pub rmem_max_bytes: Known<u64>,
    pub wmem_max_bytes: Known<u64>,
    pub rmem_default_bytes: Known<u64>,
    pub wmem_default_bytes: Known<u64>,
    /// net.ipv4.tcp_rmem / tcp_wmem: min, default, max.
    pub tcp_rmem_bytes: Known<[u64; 3]>,
    pub tcp_wmem_bytes: Known<[u64; 3]>,
    pub tcp_congestion_control: Known<String>,
    pub tcp_available_congestion_control: Known<String>,
    pub default_qdisc: Known<String>,
}

/// Parses "4096\t131072\t6291456" (tcp_rmem, tcp_wmem).
pub fn parse_triple(text: &str) -> Result<[u64; 3], String> {
    let v: Vec<u64> = text
        .split_whitespace()
        .map(|s| s.parse::<u64>().map_err(|e| format!("'{s}': {e}")))
        .collect::<Result<_, _>>()?;
    <[u64; 3]>::try_from(v.as_slice()).map_err(|_| format!("expected 3 numbers in '{text}'"))
}

fn number(path: &str) -> Known<u64> {
    read_trimmed(path)
        .and_then(|s| s.parse::<u64>().map_err(|e| format!("{path}: {e}")))
        .into()
}

pub fn probe() -> Sysctls {
    let triple =
        |p: &str| -> Known<[u64; 3]> { read_trimmed(p).and_then(|s| parse_triple(&s)).into() };
    Sysctls {
        rmem_max_bytes: number("/proc/sys/net/core/rmem_max"),
        wmem_max_bytes: number("/proc/sys/net/core/wmem_max"),
        rmem_default_bytes: number("/proc/sys/net/core/rmem_default"),
        wmem_default_bytes: number("/proc/sys/net/core/wmem_default"),
        tcp_rmem_bytes: triple("/proc/sys/net/ipv4/tcp_rmem"),
        tcp_wmem_bytes: triple("/proc/sys/net/ipv4/tcp_wmem"),
        tcp_congestion_control: read_trimmed("/proc/sys/net/ipv4/tcp_congestion_control").into(),
        tcp_available_congestion_control: read_trimmed(
            "/proc/sys/net/ipv4/tcp_available_congestion_control",
        )
        .into(),
        default_qdisc: read_trimmed("/proc/sys/net/core/default_qdisc").into(),
    }
}

pub fn kernel() -> Kernel {
    // SAFETY: utsname is plain bytes; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        let why = format!("uname: {}", std::io::Error::last_os_error());
        return Kernel {
            sysname: Known::unavailable(why.clone()),
            release: read_trimmed("/proc/sys/kernel/osrelease").into(),
            version: read_trimmed("/proc/sys/kernel/version").into(),
            machine: Known::unavailable(why.clone()),
            hostname: Known::unavailable(why),
        };
    }
    let field = |f: &[libc::c_char]| -> Known<String> {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        Known::Value(String::from_utf8_lossy(&bytes).into_owned())
    };
    Kernel {
        sysname: field(&u.sysname),
        release: field(&u.release),
        version: field(&u.version),
        machine: field(&u.machine),
        hostname: field(&u.nodename),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_rmem() {
        assert_eq!(
            parse_triple("4096\t131072\t6291456\n").unwrap(),
            [4096, 131072, 6291456]
        );
        assert!(parse_triple("4096 131072").is_err());
        assert!(parse_triple("a b c").is_err());
    }
}
