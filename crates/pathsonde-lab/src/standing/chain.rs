//! A standing chain: `lab up --hops N --tight-at K …` leaves the multi-hop
//! path of `lab run --method hops` (`crate::chain`, `crate::hops_lab`) in
//! service, so that `pathsonde hops` — or traceroute, mtr, any program — can
//! be run across it from the sender's namespace, and `lab truth` gives each
//! link's truth every 100 ms from the links' own counters and the cross
//! source's send log, as a `lab run --method hops` run is scored.
//!
//! The holder builds the chain, starts the tight link's cross traffic and a
//! pathsonde server on the receiver (the end-to-end measurement `hops` makes
//! when the far end runs one), writes `info.json` with the chain's routers
//! and target, then one [`ChainTruthLine`] a line into `truth.jsonl` until
//! it is told to stop.

use super::{io, Info, NamespaceInfo};
use crate::chain::{link_addr, link_addr6, Chain};
use crate::error::{LabError, Result};
use crate::hops_lab::{self, HopsLabPlan, LinkTruth};
use pathsonde_core::units::serde_secs;
use pathsonde_core::DurationNs;
use pathsonde_net::{clock, Server, ServerConfig};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a standing chain adds to its [`Info`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChainInfo {
    /// What was built: links, rates, cross traffic, silent routers.
    pub plan: HopsLabPlan,
    /// Where each router answers from (router 1 first).
    pub routers: Vec<String>,
    /// The far end `pathsonde hops` probes (the receiver, hops' port).
    pub target: String,
}

/// One line of a standing chain's `truth.jsonl`: every link over the last
/// 100 ms.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChainTruthLine {
    /// Since the holder started the traffic (seconds in JSON).
    #[serde(with = "serde_secs")]
    pub t_s: DurationNs,
    /// CLOCK_MONOTONIC at this line, ns.
    pub monotonic_ns: i64,
    /// Link 1 (sender → router 1) first.
    pub links: Vec<LinkTruth>,
}

/// How much of the cross source's send log the holder keeps behind the
/// interval it reads: a chain may stand for hours.
const LOG_KEPT: DurationNs = DurationNs::from_secs(1);

/// The namespaces, sender first (the text tells users to run there).
fn namespace_table(chain: &Chain) -> Vec<NamespaceInfo> {
    let spec = &chain.spec;
    let n = spec.links.len();
    let mut table: Vec<NamespaceInfo> = (0..=n)
        .map(|i| NamespaceInfo {
            role: match i {
                0 => "snd".into(),
                i if i == n => "rcv".into(),
                i => format!("r{i}"),
            },
            namespace: spec.node(i),
            // Node i answers from its side of link i; the sender is the
            // left end of link 1 (both families on a dual-stack chain).
            address: Some({
                let (j, left) = if i == 0 { (1, true) } else { (i, false) };
                if spec.ipv6 {
                    format!("{} {}", link_addr(j, left), link_addr6(j, left))
                } else {
                    link_addr(j, left).to_string()
                }
            }),
        })
        .collect();
    for (idx, l) in spec.links.iter().enumerate() {
        if l.cross {
            let j = idx + 1;
            table.push(NamespaceInfo {
                role: format!("x{j}"),
                namespace: spec.cross_source(j),
                address: None,
            });
        }
    }
    table
}

/// Builds and serves the chain until `stop` is set; removes it after.
pub(super) fn hold(name: &str, dir: &Path, plan: &HopsLabPlan, stop: &AtomicBool) -> Result<()> {
    plan.validate().map_err(LabError::Spec)?;
    let chain = Chain::build(plan.spec())?;
    let spec = chain.spec.clone();
    let model = plan.cross_model().map_err(LabError::Spec)?;
    let mut cross = hops_lab::start_cross(plan, &spec)?;
    // A server on the family `hops` probes, and on IPv4 as well when that
    // is IPv6, so that a dual-stack chain serves both.
    let server_addr = SocketAddr::new(chain.receiver_in(plan.ipv6), crate::live::SERVER_PORT);
    let mut addrs = vec![server_addr];
    if plan.ipv6 {
        addrs.push(SocketAddr::new(
            chain.receiver_in(false),
            crate::live::SERVER_PORT,
        ));
    }
    let mut servers = Vec::new();
    for addr in addrs {
        servers.push(crate::netns::run_in(
            &spec.node(plan.routers + 1),
            move || Ok(Server::bind(ServerConfig::new(addr))?.spawn()?),
        )?);
    }
    let info = Info {
        name: name.to_string(),
        holder_pid: std::process::id(),
        namespaces: namespace_table(&chain),
        server: server_addr.to_string(),
        udpst_server: None,
        capacity_bps: plan.tight_rate,
        cross: vec![model.describe()],
        truth_file: dir.join("truth.jsonl").display().to_string(),
        chain: Some(ChainInfo {
            plan: plan.clone(),
            routers: (1..=plan.routers)
                .map(|k| chain.router_in(k, plan.ipv6).to_string())
                .collect(),
            target: SocketAddr::new(
                chain.receiver_in(plan.ipv6),
                pathsonde_net::hops::DEFAULT_PORT,
            )
            .to_string(),
        }),
    };
    let mut truth = std::fs::File::create(dir.join("truth.jsonl"))
        .map_err(io("creating the truth file".into()))?;
    super::publish(dir, &info)?;

    let start = clock::monotonic();
    let step = DurationNs::from_ms(100);
    let (mut prev, mut before) = (start, hops_lab::read_all(&spec));
    while !stop.load(Ordering::SeqCst) {
        let next = prev + step;
        clock::wait_until(next);
        let after = hops_lab::read_all(&spec);
        let logs = [cross.log.points()];
        let line = ChainTruthLine {
            t_s: next.since(start),
            monotonic_ns: next.ns(),
            links: hops_lab::link_truth(&spec, plan.tight_at, &logs, (prev, next), &before, &after),
        };
        let _ = writeln!(
            truth,
            "{}",
            serde_json::to_string(&line).expect("plain data")
        );
        cross.log.forget_before(next - LOG_KEPT);
        (prev, before) = (next, after);
    }
    let _ = cross.stop();
    for server in servers {
        let _ = server.stop();
    }
    drop(chain);
    Ok(())
}
