//! A multi-hop lab path for `hops`: a chain of routers between a sender and
//! a receiver, a tbf on any link, and one-hop cross traffic on any link.
//!
//! ```text
//! snd ─L1─> r1 ─L2─> r2 ─L3─> … ─> rN ─L(N+1)─> rcv
//!           ^        |
//!   x2 ─────┘        └──> k2      (cross traffic of L2 enters at r1, leaves at r2)
//! ```
//!
//! Link `j` joins node `j-1` and node `j` (node 0 is the sender, node N+1
//! the receiver); its tbf sits on node `j-1`'s device towards node `j`.  The
//! cross traffic of link `j` comes from namespace `x<j>` behind node `j-1`
//! and is delivered to `k<j>` behind node `j`, so it shares only link `j`
//! with the probes (pathneck's one-hop persistent cross traffic); for link 1
//! the sender forwards it, as a host sharing its access link with others.
//!
//! Addresses come from 198.19.0.0/16 (RFC 2544's benchmarking range, the
//! half the two-node lab does not use): link `j` is 198.19.j.0/24 with `.1`
//! on the sender's side and `.2` on the receiver's, so router `k` answers
//! ICMP from 198.19.k.2.  With `ipv6` the links are dual-stack: link `j` is
//! also fd19:198:19:j::/64 (a unique-local prefix, RFC 4193) with `::1` and
//! `::2` on the same sides, so router `k` answers ICMPv6 from
//! fd19:198:19:k::2; the cross traffic stays IPv4 and shares each link's
//! tbf with the IPv6 probes, as mixed traffic shares a real router's queue.
//! Routers keep their namespaces' default ICMP rate limits
//! (`net.ipv4.icmp_ratelimit`, `net.ipv6.icmp.ratelimit`,
//! `icmp_msgs_per_sec`): the method must live with them.  TSO/GSO are off
//! on every veth and tbf's burst is about
//! two frames, as the lab notes ask.

use crate::error::{LabError, Result};
use crate::netns;
use pathsonde_core::{BitRate, Bytes};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One link of the chain.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChainLink {
    /// tbf rate (L2 bytes, as the two-node lab's); `None` leaves the veth
    /// unshaped.
    pub rate: Option<BitRate>,
    /// Whether this link gets a cross-traffic source and sink.
    pub cross: bool,
    /// This link's tbf queue limit, when it differs from the chain's
    /// (`ChainSpec::queue`): a short queue for `hops --queue` to find.
    pub queue: Option<Bytes>,
}

/// What to build.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainSpec {
    /// Short name: namespaces are `pathsonde-<name>-<node>`.
    pub name: String,
    /// Links from the sender to the receiver: routers = links − 1.
    pub links: Vec<ChainLink>,
    /// tbf queue limit on shaped links that name none of their own.
    pub queue: Bytes,
    /// Routers (1-based) that never answer the sender (see `silence_rules`),
    /// as a router whose operator filters ICMP.
    pub silent: Vec<usize>,
    /// Dual-stack links (see the module comment), so that `hops` can probe
    /// the chain over IPv6.
    pub ipv6: bool,
}

/// A built chain.  Dropping it removes every namespace it made.
#[derive(Debug)]
pub struct Chain {
    pub spec: ChainSpec,
    made: Vec<String>,
}

impl ChainSpec {
    pub fn routers(&self) -> usize {
        self.links.len().saturating_sub(1)
    }

    fn validate(&self) -> Result<()> {
        let ok_name = !self.name.is_empty()
            && self.name.len() <= 16
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if !ok_name {
            return Err(LabError::Spec(format!(
                "chain name '{}': 1 to 16 lowercase letters or digits",
                self.name
            )));
        }
        if !(2..=8).contains(&self.links.len()) {
            return Err(LabError::Spec("a chain has 2 to 8 links".into()));
        }
        if let Some(k) = self
            .silent
            .iter()
            .find(|&&k| k == 0 || k >= self.links.len())
        {
            return Err(LabError::Spec(format!(
                "router {k} cannot be silenced: the chain's routers are 1 to {}",
                self.routers()
            )));
        }
        Ok(())
    }

    /// Namespace of node `i` (0 = sender, links = receiver).
    pub fn node(&self, i: usize) -> String {
        let n = self.links.len();
        let tag = match i {
            0 => "snd".to_string(),
            i if i == n => "rcv".to_string(),
            i => format!("r{i}"),
        };
        format!("{}{}-{tag}", netns::PREFIX, self.name)
    }

    /// Namespace of link `j`'s cross-traffic source.
    pub fn cross_source(&self, j: usize) -> String {
        format!("{}{}-x{j}", netns::PREFIX, self.name)
    }

    fn cross_sink_ns(&self, j: usize) -> String {
        format!("{}{}-k{j}", netns::PREFIX, self.name)
    }
}

/// Address of node `j-1` (`left`) or node `j` on link `j`.
pub fn link_addr(j: usize, left: bool) -> Ipv4Addr {
    Ipv4Addr::new(198, 19, j as u8, if left { 1 } else { 2 })
}

/// The same over IPv6 (chains built with `ipv6`).
pub fn link_addr6(j: usize, left: bool) -> Ipv6Addr {
    Ipv6Addr::new(
        0xfd19,
        0x198,
        0x19,
        j as u16,
        0,
        0,
        0,
        if left { 1 } else { 2 },
    )
}

/// Link `j`'s IPv6 prefix, as `ip route` takes it.
fn link_net6(j: usize) -> String {
    format!("fd19:198:19:{j:x}::/64")
}

/// Where link `j`'s cross traffic is sent.
pub fn cross_sink_addr(j: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 19, 200 + j as u8, 2)
}

fn cross_src_addr(j: usize, source: bool) -> Ipv4Addr {
    Ipv4Addr::new(198, 19, 100 + j as u8, if source { 1 } else { 2 })
}

impl Chain {
    /// Builds the chain; on any failure removes whatever it had made.
    pub fn build(spec: ChainSpec) -> Result<Chain> {
        spec.validate()?;
        netns::check_permitted()?;
        if netns::exists(&spec.node(0)) {
            return Err(LabError::Exists(spec.name.clone()));
        }
        let mut chain = Chain {
            spec,
            made: Vec::new(),
        };
        match chain.build_inner() {
            Ok(()) => Ok(chain),
            Err(e) => {
                let _ = chain.teardown();
                Err(e)
            }
        }
    }

    fn add_ns(&mut self, ns: &str) -> Result<()> {
        netns::add(ns)?;
        self.made.push(ns.to_string());
        crate::registry::remember(ns);
        netns::ip(&["-n", ns, "link", "set", "lo", "up"]).map(|_| ())
    }

    fn build_inner(&mut self) -> Result<()> {
        let s = self.spec.clone();
        let n = s.links.len();
        for i in 0..=n {
            self.add_ns(&s.node(i))?;
            // The sender forwards too when the first link carries cross
            // traffic: its source sits behind the sender, as other hosts
            // behind one access link.
            if (i > 0 && i < n) || (i == 0 && s.links[0].cross) {
                netns::sysctl(&s.node(i), "net.ipv4.ip_forward", "1")?;
            }
            if s.ipv6 {
                no_dad(&s.node(i))?;
                if i > 0 && i < n {
                    netns::sysctl(&s.node(i), "net.ipv6.conf.all.forwarding", "1")?;
                }
            }
        }
        for j in 1..=n {
            veth(
                (&s.node(j - 1), "fwd", link_addr(j, true)),
                (&s.node(j), "back", link_addr(j, false)),
            )?;
            if s.ipv6 {
                address6(&s.node(j - 1), "fwd", link_addr6(j, true))?;
                address6(&s.node(j), "back", link_addr6(j, false))?;
            }
        }
        for (idx, l) in s.links.iter().enumerate() {
            let j = idx + 1;
            if !l.cross {
                continue;
            }
            let (src, snk) = (s.cross_source(j), s.cross_sink_ns(j));
            self.add_ns(&src)?;
            self.add_ns(&snk)?;
            veth(
                (&src, "xout", cross_src_addr(j, true)),
                (&s.node(j - 1), &format!("x{j}"), cross_src_addr(j, false)),
            )?;
            veth(
                (
                    &s.node(j),
                    &format!("k{j}"),
                    Ipv4Addr::new(198, 19, 200 + j as u8, 1),
                ),
                (&snk, "xin", cross_sink_addr(j)),
            )?;
            route(&src, "default", cross_src_addr(j, false))?;
            route(&snk, "default", Ipv4Addr::new(198, 19, 200 + j as u8, 1))?;
        }
        // Ends: default towards the chain.
        route(&s.node(0), "default", link_addr(1, false))?;
        route(&s.node(n), "default", link_addr(n, true))?;
        if s.ipv6 {
            route(&s.node(0), "default", link_addr6(1, false))?;
            route(&s.node(n), "default", link_addr6(n, true))?;
        }
        // Routers: every subnet they are not on, forwards or backwards.
        for k in 1..n {
            let ns = s.node(k);
            let (fwd, back) = (link_addr(k + 1, false), link_addr(k, true));
            for j in 1..=n {
                if j != k && j != k + 1 {
                    let via = if j > k { fwd } else { back };
                    route(&ns, &format!("198.19.{j}.0/24"), via)?;
                    if s.ipv6 {
                        let via6 = if j > k {
                            link_addr6(k + 1, false)
                        } else {
                            link_addr6(k, true)
                        };
                        route(&ns, &link_net6(j), via6)?;
                    }
                }
            }
            for (idx, l) in s.links.iter().enumerate() {
                let j = idx + 1;
                if !l.cross {
                    continue;
                }
                // Source subnet at node j-1, sink subnet at node j.
                if j - 1 != k {
                    let via = if j - 1 > k { fwd } else { back };
                    route(&ns, &format!("198.19.{}.0/24", 100 + j), via)?;
                }
                if j != k {
                    let via = if j > k { fwd } else { back };
                    route(&ns, &format!("198.19.{}.0/24", 200 + j), via)?;
                }
            }
        }
        for (idx, l) in s.links.iter().enumerate() {
            if let Some(rate) = l.rate {
                tbf(&s.node(idx), "fwd", rate, l.queue.unwrap_or(s.queue))?;
            }
        }
        for &k in &s.silent {
            silence(&s.node(k), s.ipv6)?;
        }
        Ok(())
    }

    /// The receiver's address (the far end `hops` probes).
    pub fn receiver(&self) -> Ipv4Addr {
        link_addr(self.spec.links.len(), false)
    }

    /// The address router `k` answers ICMP from.
    pub fn router(&self, k: usize) -> Ipv4Addr {
        link_addr(k, false)
    }

    /// The receiver's address in the family asked for (`v6` needs a chain
    /// built with `ipv6`).
    pub fn receiver_in(&self, v6: bool) -> IpAddr {
        if v6 {
            link_addr6(self.spec.links.len(), false).into()
        } else {
            self.receiver().into()
        }
    }

    /// The address router `k` answers from, ICMPv6 with `v6`.
    pub fn router_in(&self, k: usize, v6: bool) -> IpAddr {
        if v6 {
            link_addr6(k, false).into()
        } else {
            self.router(k).into()
        }
    }

    pub fn namespaces(&self) -> &[String] {
        &self.made
    }

    /// Removes every namespace of this chain (their veths go with them).
    pub fn teardown(&mut self) -> Result<()> {
        crate::registry::delete_all(&mut self.made)
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// A veth pair between two namespaces, addressed /24, offloads off, up.
fn veth(a: (&str, &str, Ipv4Addr), b: (&str, &str, Ipv4Addr)) -> Result<()> {
    netns::ip(&[
        "link", "add", a.1, "netns", a.0, "type", "veth", "peer", "name", b.1, "netns", b.0,
    ])?;
    for (ns, dev, ip) in [a, b] {
        netns::ip(&["-n", ns, "addr", "add", &format!("{ip}/24"), "dev", dev])?;
        netns::exec_in(ns, "ethtool", &["-K", dev, "tso", "off", "gso", "off"])?;
        netns::ip(&["-n", ns, "link", "set", dev, "up"])?;
    }
    Ok(())
}

/// The `ip` commands that keep a router from answering the sender: what the
/// router itself sends (`iif lo`) to the sender's subnet goes to a table
/// whose only route is a blackhole, so its ICMP errors die at the route
/// lookup while the answers of the routers beyond it are still forwarded.
/// (The issue names an nft rule; nftables is not installed on this machine
/// nor by `.ci/run`, and iproute2 does the same.)  With `v6` the same two
/// for the sender's IPv6 subnet (`ip -6`).
fn silence_rules(ns: &str, v6: bool) -> [Vec<String>; 2] {
    let (family, sender) = if v6 {
        ("-6", link_net6(1))
    } else {
        ("-4", "198.19.1.0/24".to_string())
    };
    let v = |a: &[&str]| a.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    [
        v(&[
            family, "-n", ns, "rule", "add", "iif", "lo", "to", &sender, "table", "29", "pref",
            "100",
        ]),
        v(&[
            family,
            "-n",
            ns,
            "route",
            "add",
            "blackhole",
            &sender,
            "table",
            "29",
        ]),
    ]
}

fn silence(ns: &str, ipv6: bool) -> Result<()> {
    let families: &[bool] = if ipv6 { &[false, true] } else { &[false] };
    for &v6 in families {
        for args in silence_rules(ns, v6) {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            netns::ip(&a)?;
        }
    }
    Ok(())
}

fn route(ns: &str, to: &str, via: impl Into<IpAddr>) -> Result<()> {
    let via = via.into();
    let family = if via.is_ipv6() { "-6" } else { "-4" };
    netns::ip(&[
        family,
        "-n",
        ns,
        "route",
        "add",
        to,
        "via",
        &via.to_string(),
    ])
    .map(|_| ())
}

/// No duplicate address detection on the devices a namespace makes from
/// now on.  While a new veth's link-local address is tentative (a second
/// or two), neighbour discovery can wait, and the lab test that probes a
/// fresh chain at once over IPv6 read its 100 Mb/s tight hop at 598 and
/// 641 Mb/s in two of three runs, as if trains were held and let go
/// together; with DAD off, six runs read it at 72–121 Mb/s.
fn no_dad(ns: &str) -> Result<()> {
    for key in [
        "net.ipv6.conf.all.accept_dad",
        "net.ipv6.conf.default.accept_dad",
    ] {
        netns::sysctl(ns, key, "0")?;
    }
    Ok(())
}

/// An IPv6 address on a device, usable at once (`nodad`: duplicate address
/// detection would hold it tentative for a second or two, and nothing else
/// on a veth can hold it).
fn address6(ns: &str, dev: &str, ip: Ipv6Addr) -> Result<()> {
    netns::ip(&[
        "-n",
        ns,
        "addr",
        "add",
        &format!("{ip}/64"),
        "dev",
        dev,
        "nodad",
    ])
    .map(|_| ())
}

/// The chain's tbf bucket: two 1514-byte frames (the lab notes' faithful
/// setting).  A burst's head passes it at once, so a link holds its queue
/// limit and this much of a burst before it drops.
pub const TBF_BURST: Bytes = Bytes(3028);

/// tbf with a [`TBF_BURST`] bucket.
fn tbf(ns: &str, dev: &str, rate: BitRate, limit: Bytes) -> Result<()> {
    netns::tc(&[
        "-n",
        ns,
        "qdisc",
        "add",
        "dev",
        dev,
        "root",
        "tbf",
        "rate",
        &format!("{}bit", rate.bps().round() as u64),
        "burst",
        &TBF_BURST.get().to_string(),
        "limit",
        &limit.get().to_string(),
    ])
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(links: usize) -> ChainSpec {
        ChainSpec {
            name: "t".into(),
            links: vec![
                ChainLink {
                    rate: None,
                    cross: false,
                    queue: None,
                };
                links
            ],
            queue: Bytes(150_000),
            silent: Vec::new(),
            ipv6: false,
        }
    }

    #[test]
    fn names_and_addresses_follow_the_chain() {
        let s = spec(4);
        assert_eq!(s.routers(), 3);
        assert_eq!(s.node(0), "pathsonde-t-snd");
        assert_eq!(s.node(2), "pathsonde-t-r2");
        assert_eq!(s.node(4), "pathsonde-t-rcv");
        assert_eq!(link_addr(2, false), Ipv4Addr::new(198, 19, 2, 2));
        assert!(s.validate().is_ok());
        let mut first = spec(4);
        first.links[0].cross = true;
        assert!(first.validate().is_ok());
        assert!(spec(1).validate().is_err());
        let mut silent = spec(4);
        silent.silent = vec![3];
        assert!(silent.validate().is_ok());
        silent.silent = vec![4];
        assert!(silent.validate().is_err());
        assert_eq!(silence_rules("n", false)[1][5], "blackhole");
        assert_eq!(silence_rules("n", true)[0][0], "-6");
        assert_eq!(silence_rules("n", true)[1][6], "fd19:198:19:1::/64");
        assert_eq!(
            link_addr6(2, false),
            "fd19:198:19:2::2".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(link_net6(12), "fd19:198:19:c::/64");
    }
}
