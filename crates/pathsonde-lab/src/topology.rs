//! The lab's path: namespaces, veth links, addresses, routes and the
//! bottleneck qdisc(s).
//!
//! ```text
//! one router:   snd ──┐                        ┌─> rcv   (probes and cross traffic end here)
//!                     ├─> rtr ──[tbf C, Q]─────┘
//!              x0.. ──┘
//!
//! two routers:  snd ──┐                                   ┌─> rcv   narrow link: tbf Cn, no cross traffic
//!                     ├─> rtr ──[tbf C, Q]──> rtr2 ──[tbf Cn]┘
//!              x0.. ──┘                         └──────────> xsnk  cross traffic leaves here
//! ```
//! With two routers the tight link (least available, rtr → rtr2) and the
//! narrow link (least capacity, rtr2 → rcv) are different links.
//!
//! Addresses come from 198.18.0.0/15, the range set aside for benchmarking
//! (RFC 2544), so a lab address is never mistaken for a real network.
//! Following the lab notes: TSO/GSO off on every veth, congestion control set
//! explicitly (cubic) in every namespace, tbf with a burst of about two frames.

use crate::error::{LabError, Result};
use crate::netns;
use pathsonde_core::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

/// Ethernet header bytes that tbf counts on a veth on top of each IP packet.
pub const L2_HEADER: u64 = 14;

/// What to build.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabSpec {
    /// Short name: the namespaces are `pathsonde-<name>-<role>`.
    pub name: String,
    /// Tight link capacity C, as tbf's rate (counts L2 bytes: IP + 14).
    pub capacity: BitRate,
    /// Tight link queue limit (tbf `limit`), bytes.
    pub queue: Bytes,
    /// Link MTU, 1500 or 9000.
    pub mtu: u32,
    /// Number of cross-traffic source namespaces.
    pub cross_sources: u32,
    /// With a second router: the narrow link's capacity (below `capacity`).
    pub narrow: Option<BitRate>,
    /// One-way delay added on the forward path (snd → rcv), by the delay line.
    pub delay: Option<DurationNs>,
    /// Threaded NAPI on the veths into the receivers: robust ordering under
    /// load at ≥ 500 Mb/s, at the price of batched receive stamps (a faithful
    /// stand-in for NIC interrupt coalescing).
    pub threaded_napi: bool,
}

impl LabSpec {
    pub fn validate(&self) -> Result<()> {
        let ok_name = !self.name.is_empty()
            && self.name.len() <= 16
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if !ok_name {
            return Err(LabError::Spec(format!(
                "lab name '{}' must be 1-16 lowercase letters or digits",
                self.name
            )));
        }
        if !(self.mtu == 1500 || self.mtu == 9000) {
            return Err(LabError::Spec(format!(
                "MTU {} (use 1500 or 9000)",
                self.mtu
            )));
        }
        let c = self.capacity.bps();
        if !(1e6..=10e9).contains(&c) {
            return Err(LabError::Spec(format!(
                "capacity {} outside 1 Mb/s .. 10 Gb/s",
                self.capacity
            )));
        }
        if self.queue.get() < self.burst().get() {
            return Err(LabError::Spec(format!(
                "queue {} is smaller than one burst of {} (two frames)",
                self.queue,
                self.burst()
            )));
        }
        if let Some(n) = self.narrow {
            if n.bps() >= c || n.bps() < 1e6 {
                return Err(LabError::Spec(format!(
                    "narrow link {n} must be at least 1 Mb/s and below the tight link's {}",
                    self.capacity
                )));
            }
        }
        if self.cross_sources > 8 {
            return Err(LabError::Spec("at most 8 cross-traffic sources".into()));
        }
        Ok(())
    }

    /// tbf burst: two full frames — enough for tbf to pass back-to-back
    /// frames at its rate, small enough that a train is not let through at
    /// sender speed (a 32 KB burst inflated dispersion by 26 % in the notes).
    pub fn burst(&self) -> Bytes {
        Bytes(2 * (u64::from(self.mtu) + L2_HEADER))
    }

    pub fn ns(&self, role: Role) -> String {
        format!("{}{}-{}", netns::PREFIX, self.name, role.suffix())
    }

    pub fn two_routers(&self) -> bool {
        self.narrow.is_some()
    }

    /// All namespaces this lab uses, in creation order.
    pub fn roles(&self) -> Vec<Role> {
        let mut r = vec![Role::Sender, Role::Router];
        if self.two_routers() {
            r.push(Role::Router2);
            r.push(Role::CrossSink);
        }
        r.push(Role::Receiver);
        r.extend((0..self.cross_sources).map(Role::Cross));
        r
    }

    /// IP-layer capacity for packets of `ip_size` bytes: tbf counts the 14-byte
    /// Ethernet header too, so a 1500-byte packet gets 1500/1514 of C.
    pub fn ip_capacity(&self, ip_size: Bytes) -> BitRate {
        ip_rate_of_l2(self.capacity, ip_size)
    }
}

/// Converts an L2 rate (as tbf counts it) to the IP-layer rate of packets of `ip_size`.
pub fn ip_rate_of_l2(l2: BitRate, ip_size: Bytes) -> BitRate {
    let s = ip_size.get() as f64;
    l2.scale(s / (s + L2_HEADER as f64))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    Sender,
    Router,
    Router2,
    Receiver,
    CrossSink,
    Cross(u32),
}

impl Role {
    pub fn suffix(self) -> String {
        match self {
            Role::Sender => "snd".into(),
            Role::Router => "rtr".into(),
            Role::Router2 => "rtr2".into(),
            Role::Receiver => "rcv".into(),
            Role::CrossSink => "xsnk".into(),
            Role::Cross(i) => format!("x{i}"),
        }
    }
}

/// Fixed addresses (198.18.0.0/15).
pub mod addr {
    use std::net::Ipv4Addr;
    pub const SENDER: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
    pub const ROUTER_SND: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
    pub const ROUTER_RCV: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 1);
    pub const RECEIVER: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
    pub const ROUTER_R2: Ipv4Addr = Ipv4Addr::new(198, 18, 3, 1);
    pub const ROUTER2_R1: Ipv4Addr = Ipv4Addr::new(198, 18, 3, 2);
    pub const ROUTER2_XSNK: Ipv4Addr = Ipv4Addr::new(198, 18, 4, 1);
    pub const CROSS_SINK: Ipv4Addr = Ipv4Addr::new(198, 18, 4, 2);
    pub fn cross(i: u32) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, 10 + i as u8, 1)
    }
    pub fn router_cross(i: u32) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, 10 + i as u8, 2)
    }
}

/// Where the bottleneck qdisc sits: namespace and device.
#[derive(Debug, Clone, Serialize)]
pub struct QdiscPlace {
    pub ns: String,
    pub dev: String,
}

/// A built lab.  Dropping it tears it down.
#[derive(Debug)]
pub struct Lab {
    pub spec: LabSpec,
    made: Vec<String>,
}

impl Lab {
    /// Builds the lab; on any failure removes whatever it had made.
    pub fn build(spec: LabSpec) -> Result<Lab> {
        spec.validate()?;
        netns::check_permitted()?;
        for role in spec.roles() {
            if netns::exists(&spec.ns(role)) {
                return Err(LabError::Exists(spec.name.clone()));
            }
        }
        let mut lab = Lab {
            spec,
            made: Vec::new(),
        };
        match lab.build_inner() {
            Ok(()) => Ok(lab),
            Err(e) => {
                let _ = lab.teardown();
                Err(e)
            }
        }
    }

    fn build_inner(&mut self) -> Result<()> {
        let s = self.spec.clone();
        for role in s.roles() {
            let ns = s.ns(role);
            netns::add(&ns)?;
            self.made.push(ns.clone());
            crate::registry::remember(&ns);
            netns::ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            set_congestion_control(&ns)?;
        }
        let rtr = s.ns(Role::Router);
        netns::sysctl(&rtr, "net.ipv4.ip_forward", "1")?;
        self.link(
            Role::Sender,
            "to-rtr",
            addr::SENDER,
            Role::Router,
            "to-snd",
            addr::ROUTER_SND,
        )?;
        for i in 0..s.cross_sources {
            self.link(
                Role::Cross(i),
                "to-rtr",
                addr::cross(i),
                Role::Router,
                &format!("to-x{i}"),
                addr::router_cross(i),
            )?;
            self.default_route(Role::Cross(i), addr::router_cross(i))?;
        }
        self.default_route(Role::Sender, addr::ROUTER_SND)?;
        if s.two_routers() {
            let rtr2 = s.ns(Role::Router2);
            netns::sysctl(&rtr2, "net.ipv4.ip_forward", "1")?;
            self.link(
                Role::Router,
                "to-rtr2",
                addr::ROUTER_R2,
                Role::Router2,
                "to-rtr",
                addr::ROUTER2_R1,
            )?;
            self.link(
                Role::Router2,
                "to-rcv",
                addr::ROUTER_RCV,
                Role::Receiver,
                "to-rtr",
                addr::RECEIVER,
            )?;
            self.link(
                Role::Router2,
                "to-xsnk",
                addr::ROUTER2_XSNK,
                Role::CrossSink,
                "to-rtr",
                addr::CROSS_SINK,
            )?;
            for net in ["198.18.2.0/24", "198.18.4.0/24"] {
                netns::ip(&[
                    "-n",
                    &rtr,
                    "route",
                    "add",
                    net,
                    "via",
                    &addr::ROUTER2_R1.to_string(),
                ])?;
            }
            netns::ip(&[
                "-n",
                &rtr2,
                "route",
                "add",
                "default",
                "via",
                &addr::ROUTER_R2.to_string(),
            ])?;
            self.default_route(Role::Receiver, addr::ROUTER_RCV)?;
            self.default_route(Role::CrossSink, addr::ROUTER2_XSNK)?;
            let narrow = s.narrow.expect("two routers have a narrow link");
            tbf(&rtr2, "to-rcv", narrow, s.queue, s.burst())?;
        } else {
            self.link(
                Role::Router,
                "to-rcv",
                addr::ROUTER_RCV,
                Role::Receiver,
                "to-rtr",
                addr::RECEIVER,
            )?;
            self.default_route(Role::Receiver, addr::ROUTER_RCV)?;
        }
        let tight = self.tight_link();
        tbf(&tight.ns, &tight.dev, s.capacity, s.queue, s.burst())?;
        Ok(())
    }

    /// Creates a veth pair between two roles, with addresses, MTU and the
    /// offload settings the lab notes found necessary.
    fn link(
        &self,
        a: Role,
        a_dev: &str,
        a_ip: Ipv4Addr,
        b: Role,
        b_dev: &str,
        b_ip: Ipv4Addr,
    ) -> Result<()> {
        let (na, nb) = (self.spec.ns(a), self.spec.ns(b));
        let mtu = self.spec.mtu.to_string();
        netns::ip(&[
            "link", "add", a_dev, "netns", &na, "mtu", &mtu, "type", "veth", "peer", "name", b_dev,
            "netns", &nb, "mtu", &mtu,
        ])?;
        for (ns, dev, ip) in [(&na, a_dev, a_ip), (&nb, b_dev, b_ip)] {
            netns::ip(&["-n", ns, "addr", "add", &format!("{ip}/24"), "dev", dev])?;
            offloads_off(ns, dev)?;
            netns::ip(&["-n", ns, "link", "set", dev, "up"])?;
            if self.spec.threaded_napi && matches!(b, Role::Receiver | Role::CrossSink) && ns == &nb
            {
                threaded_napi(ns, dev)?;
            }
        }
        Ok(())
    }

    fn default_route(&self, role: Role, via: Ipv4Addr) -> Result<()> {
        netns::ip(&[
            "-n",
            &self.spec.ns(role),
            "route",
            "add",
            "default",
            "via",
            &via.to_string(),
        ])
        .map(|_| ())
    }

    /// The tight link's qdisc: where cross traffic and probes share a queue.
    pub fn tight_link(&self) -> QdiscPlace {
        QdiscPlace {
            ns: self.spec.ns(Role::Router),
            dev: if self.spec.two_routers() {
                "to-rtr2"
            } else {
                "to-rcv"
            }
            .into(),
        }
    }

    /// Where cross traffic goes.
    pub fn cross_sink(&self) -> (Role, Ipv4Addr) {
        if self.spec.two_routers() {
            (Role::CrossSink, addr::CROSS_SINK)
        } else {
            (Role::Receiver, addr::RECEIVER)
        }
    }

    pub fn ns(&self, role: Role) -> String {
        self.spec.ns(role)
    }

    pub fn namespaces(&self) -> &[String] {
        &self.made
    }

    /// Removes every namespace of this lab (their veths go with them).
    pub fn teardown(&mut self) -> Result<()> {
        crate::registry::delete_all(&mut self.made)
    }

    /// Keeps the namespaces when this value is dropped (for `lab up`).
    pub fn leak(mut self) {
        self.made.clear();
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// Cubic in every namespace (the lab notes: BBR, the default here, drove
/// heavy drops and unstable rates through tbf; cubic was clean).  A new
/// namespace may only pick from the host's `tcp_allowed_congestion_control`;
/// where cubic is not allowed, reno (always allowed) is the closest
/// loss-based choice.
fn set_congestion_control(ns: &str) -> Result<()> {
    netns::sysctl(ns, "net.ipv4.tcp_congestion_control", "cubic")
        .or_else(|_| netns::sysctl(ns, "net.ipv4.tcp_congestion_control", "reno"))
}

fn tbf(ns: &str, dev: &str, rate: BitRate, limit: Bytes, burst: Bytes) -> Result<()> {
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
        &burst.get().to_string(),
        "limit",
        &limit.get().to_string(),
    ])
    .map(|_| ())
}

/// TSO/GSO off (the lab notes: with them on, the kernel hands the qdisc
/// 64 KB super-packets and dispersion means nothing).
fn offloads_off(ns: &str, dev: &str) -> Result<()> {
    netns::exec_in(ns, "ethtool", &["-K", dev, "tso", "off", "gso", "off"]).map(|_| ())
}

/// Threaded NAPI on a veth needs GRO on and TSO/GSO off first (lab notes).
fn threaded_napi(ns: &str, dev: &str) -> Result<()> {
    netns::exec_in(ns, "ethtool", &["-K", dev, "gro", "on"])?;
    netns::exec_in(
        ns,
        "sh",
        &["-c", &format!("echo 1 > /sys/class/net/{dev}/threaded")],
    )
    .map(|_| ())
}

/// Every lab currently standing, by name, from the namespaces that exist.
pub fn standing_labs() -> Result<Vec<(String, Vec<String>)>> {
    let mut labs: Vec<(String, Vec<String>)> = Vec::new();
    for ns in netns::list()? {
        let Some(rest) = ns.strip_prefix(netns::PREFIX) else {
            continue;
        };
        let name = rest.rsplit_once('-').map_or(rest, |(n, _)| n).to_string();
        match labs.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(ns),
            None => labs.push((name, vec![ns])),
        }
    }
    Ok(labs)
}

/// Removes every namespace of lab `name`.
pub fn down(name: &str) -> Result<Vec<String>> {
    let labs = standing_labs()?;
    let Some((_, namespaces)) = labs.into_iter().find(|(n, _)| n == name) else {
        return Err(LabError::NoSuchLab(name.to_string()));
    };
    for ns in &namespaces {
        netns::delete(ns)?;
    }
    Ok(namespaces)
}

/// Removes every `pathsonde-` namespace, whatever lab it belonged to.
pub fn down_all() -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for ns in netns::list()? {
        if ns.starts_with(netns::PREFIX) {
            netns::delete(&ns)?;
            removed.push(ns);
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> LabSpec {
        LabSpec {
            name: "t1".into(),
            capacity: BitRate::from_mbps(300.0),
            queue: Bytes(256 * 1024),
            mtu: 1500,
            cross_sources: 1,
            narrow: None,
            delay: None,
            threaded_napi: false,
        }
    }

    #[test]
    fn names_and_roles() {
        let s = spec();
        assert_eq!(s.ns(Role::Receiver), "pathsonde-t1-rcv");
        assert_eq!(s.ns(Role::Cross(0)), "pathsonde-t1-x0");
        assert_eq!(s.roles().len(), 4);
        let two = LabSpec {
            narrow: Some(BitRate::from_mbps(100.0)),
            ..spec()
        };
        assert!(two.roles().contains(&Role::CrossSink));
    }

    #[test]
    fn validation_names_the_problem() {
        let bad = LabSpec {
            name: "Bad Name".into(),
            ..spec()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("lab name"));
        let bad = LabSpec {
            mtu: 4000,
            ..spec()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("MTU"));
        let bad = LabSpec {
            queue: Bytes(1000),
            ..spec()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("queue"));
        let bad = LabSpec {
            narrow: Some(BitRate::from_mbps(500.0)),
            ..spec()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("narrow"));
        assert!(spec().validate().is_ok());
    }

    #[test]
    fn ip_capacity_discounts_the_ethernet_header() {
        let c = spec().ip_capacity(Bytes(1500));
        assert!((c.mbps() - 300.0 * 1500.0 / 1514.0).abs() < 1e-9);
    }
}
