//! `--allow` address lists: which client addresses may open a control
//! connection at all (docs/security.md).  Checked at accept, before a byte
//! is read, so a refused address costs the server one 12-byte answer.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An address block: `10.0.0.0/8`, `2001:db8::/32`, or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        // A v4 client reaching a server bound to [::] shows as ::ffff:a.b.c.d.
        let ip = ip.to_canonical();
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Cidr, String> {
        let s = s.trim();
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("'{s}' is not an address or CIDR block (e.g. 10.0.0.0/8, ::1)"))?;
        let addr = addr.to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| format!("'{s}': prefix length must be 0..={max}"))?,
        };
        Ok(Cidr { addr, prefix })
    }
}

/// The addresses allowed to connect; empty means everyone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList(Vec<Cidr>);

impl AllowList {
    /// Parses a comma- or space-separated list of blocks.
    pub fn parse(s: &str) -> Result<AllowList, String> {
        let blocks = s
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty())
            .map(Cidr::from_str)
            .collect::<Result<Vec<_>, _>>()?;
        if blocks.is_empty() {
            return Err("an empty --allow list would refuse everyone".into());
        }
        Ok(AllowList(blocks))
    }
    pub fn from_blocks(blocks: Vec<Cidr>) -> AllowList {
        AllowList(blocks)
    }
    pub fn is_open(&self) -> bool {
        self.0.is_empty()
    }
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.is_open() || self.0.iter().any(|c| c.contains(ip))
    }
    pub fn blocks(&self) -> &[Cidr] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn blocks_match_their_addresses_only() {
        let l = AllowList::parse("10.0.0.0/8, 192.168.1.5 2001:db8::/32").unwrap();
        assert!(l.allows(ip("10.200.3.4")));
        assert!(!l.allows(ip("11.0.0.1")));
        assert!(l.allows(ip("192.168.1.5")));
        assert!(!l.allows(ip("192.168.1.6")));
        assert!(l.allows(ip("2001:db8:1::7")));
        assert!(!l.allows(ip("2001:db9::1")));
        // A v4 client seen through a dual-stack socket.
        assert!(l.allows(ip("::ffff:10.1.2.3")));
        assert!(AllowList::parse("0.0.0.0/0").unwrap().allows(ip("8.8.8.8")));
        assert!(!AllowList::parse("0.0.0.0/0").unwrap().allows(ip("::1")));
        assert!(AllowList::default().allows(ip("8.8.8.8")));
    }

    #[test]
    fn bad_blocks_are_named() {
        for bad in [
            "10.0.0.0/33",
            "::/129",
            "ten",
            "10.0.0.0/",
            "1.2.3.4/-1",
            "",
        ] {
            assert!(AllowList::parse(bad).is_err(), "{bad}");
        }
        let e = AllowList::parse("10.0.0.0/8,nope").unwrap_err();
        assert!(e.contains("nope"), "{e}");
    }
}
