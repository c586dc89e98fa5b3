//! The `hops` method's result as a person and a program read it: the text
//! report of `pathsonde hops` (hop list, each hop's rate, the tight and
//! narrow links, the silent hops), `--queue`'s lines, the `--json` object
//! (docs/hops.md lists its fields), the progress lines and events while it
//! runs, and `history`'s one line.  Kept apart from the measuring
//! (`pathsonde_net::hops`) so the same words serve a fresh run and `lab run
//! --method hops`.

pub mod end_to_end;

use pathsonde_core::methods::hops::narrow;
use pathsonde_core::methods::hops::queue::QueueEstimate;
use pathsonde_core::methods::hops::{
    CapacityFrom, HopTrainSpec, HopsEstimate, HopsObservation, NarrowLink,
};
use pathsonde_core::{BitRate, Bytes, DurationNs};
use serde_json::{json, Value};
use std::fmt::Write;
use std::net::SocketAddr;

/// The one line `history` shows for a hops run.
pub fn summary_line(est: &HopsEstimate) -> String {
    let hops = match est.hops.len() {
        1 => "1 hop".to_string(),
        n => format!("{n} hops"),
    };
    let silent = match est.silent.len() {
        0 => String::new(),
        n => format!(", {n} silent"),
    };
    match &est.tight_link {
        Some(t) => format!(
            "tight link TTL {} -> {}, about {} available; {hops}{silent}",
            t.from_ttl, t.to_ttl, t.available
        ),
        None => format!("tight link not found; {hops}{silent}"),
    }
}

/// The progress line after each train: "train 3 of 14: 9 answers".
pub fn train_line(obs: &HopsObservation, trains: u32) -> String {
    format!(
        "train {} of {}: {} answers",
        obs.train + 1,
        trains,
        obs.answers.len()
    )
}

/// The `train` event of `--json-lines` after each train.
pub fn train_event(obs: &HopsObservation) -> Value {
    json!({
        "train": obs.train,
        "load_rate_bps": obs.spec.load_rate.map(|r| r.bps()),
        "markers": obs.spec.markers,
        "packets_sent": obs.sent.iter().filter(|s| s.is_some()).count(),
        "answers": obs.answers.len(),
        "bytes_sent": obs.spec.total_bytes().get(),
    })
}

/// The progress line after each of `--queue`'s bursts.
pub fn burst_line(spec: &HopTrainSpec, obs: &HopsObservation) -> String {
    format!(
        "burst of {}: {} answers",
        spec.total_bytes(),
        obs.answers.len()
    )
}

/// The `queue` object of `--json` (docs/hops.md).
pub fn queue_json(q: &QueueEstimate) -> Value {
    let bytes = |b: Option<Bytes>| b.map_or(Value::Null, |b| json!(b.get()));
    json!({
        "first_overflow_ttl": q.first_overflow,
        "mbs_passed_bytes": bytes(q.mbs_passed),
        "mbs_lost_bytes": bytes(q.mbs_lost),
        "hops": q.hops.iter().map(|h| json!({
            "ttl": h.ttl,
            "passed_bytes": bytes(h.passed),
            "lost_bytes": bytes(h.lost),
        })).collect::<Vec<_>>(),
        "bursts": q.bursts,
        "probe_bytes": q.probe_bytes.get(),
        "notes": q.notes,
    })
}

/// The `--queue` lines of the text report.
pub fn render_queue(q: &QueueEstimate) -> String {
    let mut s = String::new();
    let b = |x: Option<Bytes>| x.map_or("—".to_string(), |b| b.to_string());
    match q.first_overflow {
        Some(t) => {
            let _ = writeln!(
                s,
                "queue: the burst overflowed first at TTL {t}: maximum burst size between {} (passed) and {} (lost), {} bursts",
                b(q.mbs_passed),
                b(q.mbs_lost),
                q.bursts
            );
        }
        None => {
            let _ = writeln!(s, "queue: no hop lost a burst ({} bursts)", q.bursts);
        }
    }
    for h in &q.hops {
        let _ = writeln!(
            s,
            "  TTL {:>3}: passed {}{}",
            h.ttl,
            b(h.passed),
            h.lost
                .map_or(String::new(), |l| format!(", first lost {l}"))
        );
    }
    for n in &q.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

fn bps(r: Option<BitRate>) -> Value {
    r.map_or(Value::Null, |r| json!(r.bps()))
}

/// The `--json` object (docs/hops.md lists its fields).
pub fn to_json(
    target: SocketAddr,
    est: &HopsEstimate,
    elapsed: DurationNs,
    unmatched: u32,
) -> Value {
    let hops: Vec<Value> = est
        .hops
        .iter()
        .map(|h| {
            json!({
                "ttl": h.ttl,
                "address": h.address.map(|a| a.to_string()),
                "rtt_s": h.rtt.map(|r| r.secs_f64()),
                "rate_bps": bps(h.rate),
                "answers": h.answers,
                "asked": h.asked,
                "destination": h.destination,
            })
        })
        .collect();
    let tight = est.tight_link.as_ref().map_or(Value::Null, |t| {
        json!({
            "from_ttl": t.from_ttl,
            "to_ttl": t.to_ttl,
            "from_address": t.from_address.map(|a| a.to_string()),
            "to_address": t.to_address.map(|a| a.to_string()),
            "rate_in_bps": t.rate_in.bps(),
            "rate_out_bps": t.rate_out.bps(),
            "passed_bps": bps(t.passed),
            "available_bps": t.available.bps(),
            "agreeing": t.agreeing,
            "considered": t.considered,
            "confidence": t.confidence,
        })
    });
    let narrow = est.narrow_link.as_ref().map_or(Value::Null, |n| {
        json!({
            "from_ttl": n.from_ttl,
            "to_ttl": n.to_ttl,
            "from_address": n.from_address.map(|a| a.to_string()),
            "to_address": n.to_address.map(|a| a.to_string()),
            "rate_in_bps": n.rate_in.bps(),
            "rate_bps": n.rate.bps(),
            "capacity_from": n.capacity_from,
            "check_rate_in_bps": bps(n.check_rate_in),
            "check_rate_bps": bps(n.check_rate),
            "tight_available_if_no_wider_bps": bps(n.tight_available_if_no_wider),
            "tight_ratio": n.tight_ratio,
            "tight_capacity_bps": bps(n.tight_capacity),
        })
    });
    let mut notes = est.notes.clone();
    if unmatched > 0 {
        notes.push(format!(
            "{unmatched} ICMP answer(s) quoted too little of the probe to tell which packet they answered"
        ));
    }
    json!({
        "method": "hops",
        "target": target.to_string(),
        "hops": hops,
        "tight_link": tight,
        "narrow_link": narrow,
        "silent": est.silent,
        "destination_ttl": est.destination_ttl,
        "trains": est.trains,
        "probe_bytes": est.probe_bytes.get(),
        "probe_packets": est.probe_packets,
        "pacing": json!({
            "trains": est.pacing.trains,
            "median_sent_over_asked": est.pacing.median,
            "least_sent_over_asked": est.pacing.least,
            "most_sent_over_asked": est.pacing.most,
            "off_plan": est.pacing.off,
        }),
        "elapsed_s": elapsed.secs_f64(),
        "notes": notes,
    })
}

/// The text report.
pub fn render(target: SocketAddr, est: &HopsEstimate, elapsed: DurationNs) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "hops to {target}: {} trains, {} of probes, {:.1} s",
        est.trains,
        est.probe_bytes,
        elapsed.secs_f64()
    );
    let _ = writeln!(s, "  TTL  {:<40} {:>10}  {:>12}", "address", "RTT", "rate");
    for h in &est.hops {
        let addr = h.address.map_or("*".to_string(), |a| a.to_string());
        let rtt = h
            .rtt
            .map_or("—".to_string(), |r| format!("{:.3} ms", r.ms_f64()));
        let rate = h.rate.map_or("—".to_string(), |r| r.to_string());
        let tag = if h.destination {
            "  far end"
        } else if h.address.is_none() {
            "  silent"
        } else {
            ""
        };
        let _ = writeln!(s, "  {:>3}  {addr:<40} {rtt:>10}  {rate:>12}{tag}", h.ttl);
    }
    match &est.tight_link {
        Some(t) => {
            let name = |ttl: u8, a: Option<std::net::IpAddr>| match (ttl, a) {
                (0, _) => "this host".to_string(),
                (n, Some(a)) => format!("TTL {n} ({a})"),
                (n, None) => format!("TTL {n}"),
            };
            let _ = writeln!(
                s,
                "tight link: {} -> {}: available about {} (trains at {} and up were spread, leaving at {}{}); {} of {} trains agree (confidence {:.2})",
                name(t.from_ttl, t.from_address),
                name(t.to_ttl, t.to_address),
                t.available,
                t.rate_in,
                t.rate_out,
                t.passed
                    .map_or(String::new(), |p| format!("; {p} passed unspread")),
                t.agreeing,
                t.considered,
                t.confidence
            );
        }
        None => {
            let _ = writeln!(s, "tight link: not found");
        }
    }
    let name = |ttl: u8, a: Option<std::net::IpAddr>| match (ttl, a) {
        (0, _) => "this host".to_string(),
        (n, Some(a)) => format!("TTL {n} ({a})"),
        (n, None) => format!("TTL {n}"),
    };
    match &est.narrow_link {
        Some(n) => match (n.capacity_from, n.check_rate_in, n.check_rate) {
            (CapacityFrom::Clamp, Some(ci), Some(co)) => {
                let _ = writeln!(
                    s,
                    "narrow link: {} -> {}, ahead of the tight link: an idle link of about {}: back-to-back trains in at {} left at {}, a check train in at {} at {}; {}",
                    name(n.from_ttl, n.from_address),
                    name(n.to_ttl, n.to_address),
                    n.rate,
                    n.rate_in,
                    n.rate,
                    ci,
                    co,
                    why_wider(n)
                );
            }
            _ => {
                let _ = writeln!(
                    s,
                    "narrow link: {} -> {}, after the tight link: back-to-back trains came in at {} and left at {} (its capacity is at least that)",
                    name(n.from_ttl, n.from_address),
                    name(n.to_ttl, n.to_address),
                    n.rate_in,
                    n.rate
                );
            }
        },
        None => {
            let _ = writeln!(
                s,
                "narrow link: not told apart from the tight link (a note says why)"
            );
        }
    }
    if !est.silent.is_empty() {
        let list: Vec<String> = est.silent.iter().map(u8::to_string).collect();
        let _ = writeln!(s, "silent hops: TTL {}", list.join(", "));
    }
    for n in &est.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// Why the tight link after a narrow link ahead of it is wider: its probe
/// trains were spread, or the fluid model reads its capacity well above.
fn why_wider(n: &NarrowLink) -> String {
    match (n.tight_ratio, n.tight_available_if_no_wider, n.tight_capacity) {
        (Some(ratio), Some(a0), _) if ratio <= 1.0 - narrow::SPREAD => format!(
            "the tight link after it spread trains below {} to {:.1} % of their rate, so it is wider",
            a0.scale(narrow::BELOW),
            100.0 * ratio
        ),
        (_, _, Some(c)) => format!(
            "the tight link after it reads a capacity of about {c} by the fluid model, so it is wider"
        ),
        _ => "the tight link after it is wider".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathsonde_core::methods::hops::queue::{HopQueue, QueueConfig};
    use pathsonde_core::methods::hops::{Hops, HopsConfig, HopsPlan};
    use pathsonde_core::synthetic::multihop::{HopLink, MultiHopConfig, MultiHopPath};

    fn estimate() -> HopsEstimate {
        let mut path = MultiHopPath::new(MultiHopConfig::silent_narrow_behind_a_busy_first_hop(4));
        path.run(&mut Hops::new(HopsConfig::default())).unwrap()
    }

    #[test]
    fn json_has_the_fields_the_issue_names() {
        let target: SocketAddr = "10.0.4.1:33434".parse().unwrap();
        let v = to_json(target, &estimate(), DurationNs::from_secs(22), 0);
        let h = &v["hops"][0];
        for k in ["ttl", "address", "rtt_s", "rate_bps"] {
            assert!(h.get(k).is_some(), "{k}");
        }
        let t = &v["tight_link"];
        for k in [
            "from_ttl",
            "to_ttl",
            "from_address",
            "to_address",
            "rate_in_bps",
            "available_bps",
        ] {
            assert!(t.get(k).is_some(), "{k}");
        }
        assert_eq!(t["to_ttl"], 2);
        assert_eq!(v["silent"], json!([3]));
        // The narrow link (3) is the silent hop: nothing tells it apart.
        assert!(v["narrow_link"].is_null());
        // The synthetic sender paces every train as asked up to its 1 Gb/s
        // line: the two faster check trains of the busy first hop, asked for
        // 1.51 Gb/s, left at 1 Gb/s, and the summary says so.
        let p = &v["pacing"];
        assert!(p["trains"].as_u64().unwrap() >= 8, "{p}");
        assert_eq!(p["off_plan"], 2, "{p}");
        let least = p["least_sent_over_asked"].as_f64().unwrap();
        assert!((least - 1.0 / 1.51).abs() < 0.02, "{p}");
        assert!((p["median_sent_over_asked"].as_f64().unwrap() - 1.0).abs() < 0.05);
    }

    #[test]
    fn the_report_names_the_tight_link_and_the_silent_hop() {
        let target: SocketAddr = "10.0.4.1:33434".parse().unwrap();
        let text = render(target, &estimate(), DurationNs::from_secs(22));
        assert!(
            text.contains("tight link: TTL 1 (10.0.1.1) -> TTL 2 (10.0.2.1)"),
            "{text}"
        );
        assert!(text.contains("silent hops: TTL 3"), "{text}");
    }

    /// The per-hop picture: a bar for each hop that has a rate, at its TTL,
    /// and the tight link's available bandwidth as the line across.
    #[test]
    fn the_plot_has_a_bar_per_measured_hop_and_the_tight_link_line() {
        let target: SocketAddr = "10.0.4.1:33434".parse().unwrap();
        let est = estimate();
        let v = to_json(target, &est, DurationNs::from_secs(22), 0);
        let plots = crate::archived::plots("hops", &v, None).expect("a readable result");
        let p = plots
            .iter()
            .find(|p| p.name == "hops")
            .expect("a hops plot");
        let measured: Vec<(f64, f64)> = est
            .hops
            .iter()
            .filter_map(|h| Some((f64::from(h.ttl), h.rate?.bps())))
            .collect();
        assert!(measured.len() >= 2);
        let bars: Vec<(f64, f64)> = p.bars.iter().map(|b| (b.0, b.2)).collect();
        assert_eq!(bars, measured);
        let a = est.tight_link.as_ref().unwrap().available.bps();
        assert!(p.series[1].points.iter().all(|q| q.1 == a));
        assert!(crate::plot::svg(p).unwrap().contains("Rate per hop"));
    }

    #[test]
    fn the_report_names_a_narrow_link_ahead_of_the_tight_link() {
        // 100 Mb/s idle, then the tight 300 Mb/s link at 80 % (A = 60).
        let links = vec![
            HopLink::new(100.0, 0.0),
            HopLink::new(1000.0, 0.3),
            HopLink::new(300.0, 0.8),
            HopLink::new(1000.0, 0.1),
        ];
        let mut path = MultiHopPath::new(MultiHopConfig::new(links, 4));
        let est = path.run(&mut Hops::new(HopsConfig::default())).unwrap();
        let target: SocketAddr = "10.0.4.1:33434".parse().unwrap();
        let text = render(target, &est, path.elapsed());
        println!("{text}");
        assert!(
            text.contains("tight link: TTL 2 (10.0.2.1) -> TTL 3 (10.0.3.1)"),
            "{text}"
        );
        assert!(
            text.contains("narrow link: this host -> TTL 1 (10.0.1.1), ahead of the tight link"),
            "{text}"
        );
        let v = to_json(target, &est, path.elapsed(), 0);
        assert_eq!(v["narrow_link"]["to_ttl"], 1);
        assert_eq!(v["narrow_link"]["capacity_from"], "clamp");
        assert!(v["narrow_link"]["tight_ratio"].as_f64().unwrap() < 1.0);
    }

    #[test]
    fn the_queue_report_names_the_short_queue() {
        // A 100 Mb/s link whose queue holds 30 KB at hop 2.
        let mut links = vec![
            HopLink::new(1000.0, 0.1),
            HopLink::new(100.0, 0.1),
            HopLink::new(1000.0, 0.1),
            HopLink::new(1000.0, 0.0),
        ];
        links[1].queue = Some(Bytes(30_000));
        let mut path = MultiHopPath::new(MultiHopConfig::new(links, 9));
        let mut q = HopQueue::new(QueueConfig {
            markers: 4,
            ..QueueConfig::default()
        });
        while let HopsPlan::Train(spec) = q.next_plan() {
            let obs = path.carry(&spec);
            q.observe(&obs);
        }
        let q = q.estimate().unwrap();
        let text = render_queue(&q);
        println!("{text}");
        assert!(text.contains("overflowed first at TTL 2"), "{text}");
        let v = queue_json(&q);
        assert_eq!(v["first_overflow_ttl"], 2);
        assert!(v["mbs_lost_bytes"].as_u64().unwrap() > v["mbs_passed_bytes"].as_u64().unwrap());
    }
}
