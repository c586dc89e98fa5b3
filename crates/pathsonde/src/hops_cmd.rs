//! `pathsonde hops HOST[:PORT]`: where on the path the bottleneck is.  The
//! flags become a `Hops` method (pathsonde-core), `pathsonde_net::hops`
//! carries its trains over UDP with per-packet TTLs and reads the routers'
//! ICMP answers, and `pathsonde_render::hops` prints the hop list, each
//! hop's rate, the tight link and the silent hops (docs/hops.md).

use crate::exit::Exit;
use crate::settings;
use crate::{archive_cmd, args, output, usage, Failure};
use clap::Args;
use pathsonde_core::methods::hops::end_to_end::compare;
use pathsonde_core::methods::hops::{HopTrainSpec, HopsConfig, HopsObservation};
use pathsonde_core::methods::registry::{self, MethodName};
use pathsonde_core::Bytes;
use pathsonde_core::DurationNs;
use pathsonde_net::client::{self, ClientConfig, MeasurementRun};
use pathsonde_net::hops::{self, MeasureError};
use pathsonde_render::hops as report;
use pathsonde_render::hops::end_to_end::EndToEnd;
use serde_json::{json, Value};
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
    /// rates for the tight link, but for the last 5, which check a narrow
    /// link ahead of it when the hops show a step there (3..=60; the checks
    /// need 9 or more).
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
    /// Then measure the path end to end with the default method (FAC²)
    /// against a pathsonde server on HOST at this port, and say whether the
    /// tight link found agrees with it.  Without a server there, `hops`
    /// says so and stands on ICMP alone.
    #[arg(long, value_name = "PORT", default_value_t = crate::DEFAULT_PORT)]
    pub server_port: u16,
    /// ICMP only: do not look for a pathsonde server on HOST.
    #[arg(long)]
    pub no_server: bool,
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
    let on_train = |obs: &HopsObservation| {
        observations.push(serde_json::to_value(obs).unwrap_or(Value::Null));
        output::progress(&report::train_line(obs, cfg.trains));
        output::event("train", report::train_event(obs));
    };
    let on_burst = |spec: &HopTrainSpec, obs: &HopsObservation| {
        output::progress(&report::burst_line(spec, obs));
    };
    let m = hops::measure(target, cfg, a.queue, on_train, on_burst).map_err(failure)?;
    let mut value = report::to_json(target, &m.estimate, m.elapsed, m.unmatched);
    if let Some(q) = &m.queue {
        value["queue"] = report::queue_json(q);
    }
    let e2e = (!a.no_server).then(|| end_to_end(target, a.server_port));
    let comparison = match &e2e {
        Some(Ok(run)) => Some(compare(m.estimate.tight_link.as_ref(), &run.estimate)),
        _ => None,
    };
    let e2e_view = match (&e2e, &comparison) {
        (Some(Ok(run)), Some(c)) => Some(EndToEnd::Measured {
            server: run.server,
            estimate: &run.estimate,
            comparison: c,
        }),
        (Some(Err((server, why))), _) => Some(EndToEnd::NotMeasured {
            server: *server,
            why: why.clone(),
        }),
        _ => None,
    };
    if let Some(v) = &e2e_view {
        value["end_to_end"] = report::end_to_end::json(v);
    }
    let record = pathsonde_archive::Record {
        kind: "hops".into(),
        target: target.to_string(),
        method: Some("hops".into()),
        started: archive_cmd::started_ago(started.elapsed()),
        duration: started.elapsed(),
        summary: report::summary_line(&m.estimate),
        result: value,
        raw: Some(json!({ "format": RAW_FORMAT, "observations": observations })),
    };
    archive_cmd::finish(record, || {
        let mut text = report::render(target, &m.estimate, m.elapsed);
        if let Some(q) = &m.queue {
            text.push_str(&report::render_queue(q));
        }
        if let Some(v) = &e2e_view {
            text.push_str(&report::end_to_end::text(v));
        }
        text
    });
    Ok(())
}

/// The path measured end to end by the default method against a pathsonde
/// server on the far end, at `port`.  Its failure (no server, a busy one,
/// no estimate) is one line beside the ICMP result, never `hops`'s failure.
pub(crate) fn end_to_end(
    target: SocketAddr,
    port: u16,
) -> Result<MeasurementRun, (SocketAddr, String)> {
    let server = SocketAddr::new(target.ip(), port);
    output::progress(&format!(
        "measuring end to end against a pathsonde server at {server}"
    ));
    let settings = settings::settings_of(settings::default_max_rate(), Bytes(1500), None);
    let mut method = registry::build(MethodName::Fac2, &settings);
    let mut cfg = ClientConfig::new(server);
    cfg.connect_timeout = std::time::Duration::from_secs(2);
    client::measure(cfg, method.as_mut(), &mut |_| {}).map_err(|e| (server, e.to_string()))
}

/// `hops`'s failure for a measurement that ended without an estimate: the
/// network's own exit code, or exit 9 (no estimate) in the method's words.
fn failure(e: MeasureError) -> Failure {
    match e {
        MeasureError::Net(e) => Failure::from(e),
        e => Failure {
            exit: Exit::NoEstimate,
            message: e.to_string(),
        },
    }
}

/// The raw data's format tag: `observations` holds every train's
/// `HopsObservation` (its spec, each packet's send stamp, every answer).
const RAW_FORMAT: &str = "pathsonde-hops-raw/1";
