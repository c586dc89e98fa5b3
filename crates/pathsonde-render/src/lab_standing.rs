//! What `lab up`, `lab truth` and `lab list` print about standing labs:
//! the namespaces to run a program in and the commands that use them, the
//! truth series so far, the labs still up.  The lab (`pathsonde_lab::standing`
//! and `topology`) keeps them; this only says what they are.

use pathsonde_lab::standing::chain::ChainTruthLine;
use pathsonde_lab::standing::{self, Info, TruthLine};
use serde_json::{json, Value};

/// `lab up`'s text: the lab, its namespaces, and how to use and remove it.
pub fn up_text(info: &Info) -> String {
    let mut t = format!("lab {} is up\n", standing::describe(info));
    for n in &info.namespaces {
        t += &format!(
            "  {:<5} {:<28} {}\n",
            n.role,
            n.namespace,
            n.address.as_deref().unwrap_or("")
        );
    }
    let sender = &info.namespaces[0].namespace;
    if let Some(c) = &info.chain {
        t += &format!(
            "find its tight link:      ip netns exec {sender} pathsonde hops {}\n",
            c.target
        );
        t += &format!(
            "or traceroute it:         ip netns exec {sender} traceroute -n {}\n",
            host_of(&c.target)
        );
    }
    t += &format!(
        "run a program across it:  ip netns exec {sender} pathsonde abw {}\n",
        host_of(&info.server)
    );
    if let Some(u) = &info.udpst_server {
        t += &format!(
            "or a UDPST test:          ip netns exec {} pathsonde capacity {u}\n",
            info.namespaces[0].namespace
        );
    }
    t += &format!(
        "truth so far:             pathsonde lab truth {}\n",
        info.name
    );
    t += &format!(
        "take it down:             pathsonde lab down {}\n",
        info.name
    );
    t
}

/// The host part of `ip:port` or `[ip6]:port`.
fn host_of(addr: &str) -> String {
    addr.parse::<std::net::SocketAddr>()
        .map_or_else(|_| addr.to_string(), |a| a.ip().to_string())
}

/// `lab truth`'s text for a standing chain: the chain, then one line per
/// 100 ms interval with each shaped link's available bandwidth (IP bytes of
/// `hops`' load packets) and its cross traffic.
pub fn chain_truth_text(info: &Info, series: &[ChainTruthLine]) -> String {
    let mut t = format!("{}\n", standing::describe(info));
    let shaped: Vec<usize> = series
        .first()
        .map(|l| {
            l.links
                .iter()
                .filter(|x| x.capacity_l2_bps.is_some())
                .map(|x| x.link)
                .collect()
        })
        .unwrap_or_default();
    t += &format!("{:>8}", "t s");
    for j in &shaped {
        t += &format!(
            " {:>16} {:>14}",
            format!("link {j} available"),
            "cross (L2)"
        );
    }
    t += "\n";
    for p in series {
        t += &format!("{:>8.1}", p.t_s.secs_f64());
        for j in &shaped {
            match p.links.iter().find(|x| x.link == *j) {
                Some(x) => {
                    t += &format!(
                        " {:>16} {:>14}",
                        x.available_ip_bps.map_or("–".into(), |a| a.to_string()),
                        x.cross_l2_bps.to_string()
                    )
                }
                None => t += &format!(" {:>16} {:>14}", "–", "–"),
            }
        }
        t += "\n";
    }
    t
}

/// `lab truth`'s text: the lab, then one line per truth interval.
pub fn truth_text(info: &Info, series: &[TruthLine]) -> String {
    let mut t = format!("{}\n", standing::describe(info));
    t += &format!(
        "{:>8} {:>14} {:>14} {:>10} {:>10}\n",
        "t s", "available", "cross (L2)", "drops", "backlog B"
    );
    for p in series {
        t += &format!(
            "{:>8.1} {:>14} {:>14} {:>10} {:>10}\n",
            p.t_s.secs_f64(),
            p.available_bps.to_string(),
            p.cross_l2_bps.to_string(),
            p.qdisc_drops,
            p.qdisc_backlog_bytes
        );
    }
    t
}

/// `lab list --json`: `{"labs": [{"name", "namespaces"}]}`.
pub fn list_json(labs: &[(String, Vec<String>)]) -> Value {
    let v: Vec<_> = labs
        .iter()
        .map(|(n, ns)| json!({"name": n, "namespaces": ns}))
        .collect();
    json!({ "labs": v })
}

/// `lab list`'s text: each standing lab and its namespaces.
pub fn list_text(labs: &[(String, Vec<String>)]) -> String {
    if labs.is_empty() {
        return "no lab is standing\n".into();
    }
    labs.iter()
        .map(|(n, ns)| format!("{n}: {}\n", ns.join(" ")))
        .collect()
}
