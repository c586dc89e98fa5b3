//! `pathsonde hops HOST[:PORT]`: where on the path the bottleneck is.  The
//! flags become a `Hops` method (pathsonde-core), `pathsonde_net::hops`
//! carries its trains over UDP with per-packet TTLs and reads the routers'
//! ICMP answers, and this module prints the hop list, each hop's rate, the
//! tight link and the silent hops (docs/hops.md).

use crate::exit::Exit;
use crate::{archive_cmd, args, output, usage, Failure};
use clap::Args;
use pathsonde_core::methods::hops::queue::{HopQueue, QueueConfig, QueueEstimate};
use pathsonde_core::methods::hops::{
    narrow, CapacityFrom, Hops, HopsConfig, HopsEstimate, HopsPlan,
};
use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_net::hops::{self, HopsProber};
use serde_json::{json, Value};
use std::fmt::Write;
use std::net::SocketAddr;

#[derive(Args)]
pub(crate) struct HopsArgs {
    /// The far end: HOST, HOST:PORT, [V6] or [V6]:PORT.  Nothing needs to
    /// run there; by default probes go to port 33434, where nothing listens.
    pub host: String,
    /// The port probes go to, unless HOST names one.
    #[arg(long, short, default_value_t = hops::DEFAULT_PORT)]
    pub port: u16,
    /// Trains in all: 2 back-to-back trains find the hops, the rest scan
    /// rates for the tight link, but for the last 4, which check a narrow
    /// link ahead of it when the hops show a step there (3..=60; the checks
    /// need 8 or more).
    #[arg(long, default_value_t = 14)]
    pub trains: u32,
    /// Idle time between trains, so routers' ICMP rate limits refill
    /// (Linux: a burst of 6, then 1 answer a second; each train asks every
    /// router for 2).  Below 2 s answers go missing.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = args::seconds)]
    pub train_gap: DurationNs,
    /// Then find each hop's largest loss-free burst (netest's maximum
    /// burst size, hop by hop): 8 more bursts, 2 s apart (about 14 s more).
    #[arg(long)]
    pub queue: bool,
    #[command(flatten)]
    pub json: args::JsonFlags,
    #[command(flatten)]
    pub save: args::SaveFlags,
}

/// Checks the flags and builds the method's settings.
fn config(a: &HopsArgs) -> Result<HopsConfig, Failure> {
    if !(3..=60).contains(&a.trains) {
        return Err(usage(format!(
            "--trains {}: give 3 to 60 (2 find the hops, the rest scan rates)",
            a.trains
        )));
    }
    if a.train_gap > DurationNs::from_secs(60) {
        return Err(usage(format!("--train-gap {}: at most 60 s", a.train_gap)));
    }
    Ok(HopsConfig {
        trains: a.trains,
        train_gap: a.train_gap,
        ..HopsConfig::default()
    })
}

pub(crate) fn run(a: &HopsArgs) -> Result<(), Failure> {
    let cfg = config(a)?;
    let target = crate::resolve(&a.host, a.port)?;
    output::event(
        "start",
        json!({ "method": "hops", "target": target.to_string(), "trains": cfg.trains }),
    );
    let started = std::time::Instant::now();
    // Every train's send stamps and answers, kept as the run's raw data so
    // `show`, `plot` and a re-analysis have what the estimate came from.
    let mut observations: Vec<Value> = Vec::new();
    let m = measure(target, cfg, a.queue, |obs| {
        observations.push(serde_json::to_value(obs).unwrap_or(Value::Null));
        let answered = obs.answers.len();
        output::progress(&format!(
            "train {} of {}: {} answers",
            obs.train + 1,
            cfg.trains,
            answered
        ));
        output::event(
            "train",
            json!({
                "train": obs.train,
                "load_rate_bps": obs.spec.load_rate.map(|r| r.bps()),
                "markers": obs.spec.markers,
                "packets_sent": obs.sent.iter().filter(|s| s.is_some()).count(),
                "answers": answered,
                "bytes_sent": obs.spec.total_bytes().get(),
            }),
        );
    })?;
    let mut value = to_json(target, &m.estimate, m.elapsed, m.unmatched);
    if let Some(q) = &m.queue {
        value["queue"] = queue_json(q);
    }
    let record = pathsonde_archive::Record {
        kind: "hops".into(),
        target: target.to_string(),
        method: Some("hops".into()),
        started: archive_cmd::started_ago(started.elapsed()),
        duration: started.elapsed(),
        summary: summary_line(&m.estimate),
        result: value,
        raw: Some(json!({ "format": RAW_FORMAT, "observations": observations })),
    };
    archive_cmd::finish(record, || {
        let mut text = render(target, &m.estimate, m.elapsed);
        if let Some(q) = &m.queue {
            text.push_str(&render_queue(q));
        }
        text
    });
    Ok(())
}

/// One measurement and what it took.
pub(crate) struct Measurement {
    pub estimate: HopsEstimate,
    pub elapsed: DurationNs,
    /// ICMP answers that could not be matched to a probe.
    pub unmatched: u32,
    /// `--queue`'s bursts, after the trains.
    pub queue: Option<QueueEstimate>,
}

/// Runs the method against `target` from this thread's network namespace:
/// the one code path of `pathsonde hops` and `lab run --method hops`.
/// Errors as `hops` reports them (exit 9 when nothing answered).
pub(crate) fn measure(
    target: SocketAddr,
    cfg: HopsConfig,
    queue: bool,
    on_train: impl FnMut(&pathsonde_core::methods::hops::HopsObservation),
) -> Result<Measurement, Failure> {
    let mut prober = HopsProber::new(target)?;
    let mut method = Hops::new(cfg);
    let started = std::time::Instant::now();
    let est = hops::run(&mut method, &mut prober, on_train)?;
    let Some(est) = est else {
        return Err(Failure {
            exit: Exit::NoEstimate,
            message: "hops: no train was sent".into(),
        });
    };
    if est.hops.iter().all(|h| h.address.is_none()) {
        return Err(Failure {
            exit: Exit::NoEstimate,
            message: format!(
                "hops: nothing answered any probe to {target} (ICMP filtered on the way, or by this host's firewall)"
            ),
        });
    }
    let queue = if queue {
        Some(run_queue(&est, &mut prober)?)
    } else {
        None
    };
    Ok(Measurement {
        estimate: est,
        elapsed: DurationNs::from_std(started.elapsed()),
        unmatched: prober.unmatched,
        queue,
    })
}

/// The raw data's format tag: `observations` holds every train's
/// `HopsObservation` (its spec, each packet's send stamp, every answer).
pub(crate) const RAW_FORMAT: &str = "pathsonde-hops-raw/1";

/// The one line `history` shows for a hops run.
fn summary_line(est: &HopsEstimate) -> String {
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

/// `--queue`: bursts after the main trains, their markers as far as the
/// far end the main trains found.
fn run_queue(est: &HopsEstimate, prober: &mut HopsProber) -> Result<QueueEstimate, Failure> {
    let markers = est
        .destination_ttl
        .unwrap_or(est.hops.len().min(usize::from(u8::MAX)) as u8)
        .max(1);
    let mut q = HopQueue::new(QueueConfig {
        markers,
        ..QueueConfig::default()
    });
    let mut train = est.trains;
    while let HopsPlan::Train(spec) = q.next_plan() {
        let obs = prober.carry(&spec, train)?;
        output::progress(&format!(
            "burst of {}: {} answers",
            spec.total_bytes(),
            obs.answers.len()
        ));
        q.observe(&obs);
        train += 1;
    }
    q.estimate().ok_or_else(|| Failure {
        exit: Exit::NoEstimate,
        message: "hops --queue: no burst was sent".into(),
    })
}

/// The `queue` object of `--json` (docs/hops.md).
pub(crate) fn queue_json(q: &QueueEstimate) -> Value {
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
pub(crate) fn render_queue(q: &QueueEstimate) -> String {
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
pub(crate) fn to_json(
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
        "elapsed_s": elapsed.secs_f64(),
        "notes": notes,
    })
}

/// The text report.
pub(crate) fn render(target: SocketAddr, est: &HopsEstimate, elapsed: DurationNs) -> String {
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
        Some(n) => match (
            n.capacity_from,
            n.check_rate_in,
            n.check_rate,
            n.tight_available_if_no_wider,
            n.tight_ratio,
        ) {
            (CapacityFrom::Clamp, Some(ci), Some(co), Some(a0), Some(ratio)) => {
                let _ = writeln!(
                    s,
                    "narrow link: {} -> {}, ahead of the tight link: an idle link of about {}: back-to-back trains in at {} left at {}, a check train in at {} at {}; the tight link after it spread trains below {} to {:.1} % of their rate, so it is wider",
                    name(n.from_ttl, n.from_address),
                    name(n.to_ttl, n.to_address),
                    n.rate,
                    n.rate_in,
                    n.rate,
                    ci,
                    co,
                    a0.scale(narrow::BELOW),
                    100.0 * ratio
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

#[cfg(test)]
mod tests {
    use super::*;
    use pathsonde_core::synthetic::multihop::{HopLink, MultiHopConfig, MultiHopPath};

    fn estimate() -> HopsEstimate {
        let mut links = vec![
            HopLink::new(1000.0, 0.2),
            HopLink::new(300.0, 0.8),
            HopLink::new(100.0, 0.0),
            HopLink::new(1000.0, 0.1),
        ];
        links[2].answers = false;
        let mut path = MultiHopPath::new(MultiHopConfig::new(links, 4));
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
        let plots = pathsonde_render::archived::plots("hops", &v, None).expect("a readable result");
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

    #[test]
    fn bad_train_counts_are_refused_in_words() {
        let a = |trains| HopsArgs {
            host: "x".into(),
            port: 1,
            trains,
            train_gap: DurationNs::from_secs(2),
            queue: false,
            json: Default::default(),
            save: Default::default(),
        };
        assert!(config(&a(2)).is_err());
        assert!(config(&a(61)).is_err());
        assert!(config(&a(12)).is_ok());
    }
}
