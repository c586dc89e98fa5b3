//! What `lab up`, `lab truth` and `lab list` print about standing labs:
//! the namespaces to run a program in and the commands that use them, the
//! truth series so far, the labs still up.  The lab (`pathsonde_lab::standing`
//! and `topology`) keeps them; this only says what they are.

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
    t += &format!(
        "run a program across it:  ip netns exec {} pathsonde abw {}\n",
        info.namespaces[0].namespace,
        info.server.split(':').next().unwrap_or("")
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
