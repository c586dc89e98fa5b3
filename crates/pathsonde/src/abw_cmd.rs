//! `pathsonde abw`: one measurement to a server with the method the flags
//! name, its progress and train events, the archive record, and the report.
//! The measuring is `pathsonde_net::client::measure`'s; this connects the
//! flags to it and prints.

use crate::settings::{
    build_method, check_max_rate, default_max_rate, method_settings, AbwOptions,
};
use crate::{archive_cmd, output, report, serve_cmd, usage, Failure};
use pathsonde_core::{DurationNs, Estimate, Method, Observation, ProbePlan};
use pathsonde_net::client::{self, ClientConfig};
use std::cell::Cell;
use std::net::SocketAddr;

/// A method that publishes its [`Method::progress`] after each observation,
/// so the progress hook (which runs while the runner holds the method) can
/// read it: middleware in the spirit of smoltcp's device wrappers.
struct Watched<'a> {
    inner: &'a mut dyn Method,
    progress: &'a Cell<Option<f64>>,
}

impl Method for Watched<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn next_plan(&mut self) -> ProbePlan {
        self.inner.next_plan()
    }
    fn observe(&mut self, obs: &Observation) {
        self.inner.observe(obs);
        self.progress.set(self.inner.progress());
    }
    fn estimate(&self) -> Option<Estimate> {
        self.inner.estimate()
    }
    fn notes(&self) -> Vec<String> {
        self.inner.notes()
    }
    fn progress(&self) -> Option<f64> {
        self.inner.progress()
    }
}

/// `abw HOST`: resolves the server and measures to it.
pub(crate) fn run(host: &str, port: u16, opts: &AbwOptions) -> Result<(), Failure> {
    let addr = crate::resolve(host, port)?;
    measure(addr, opts, None, "abw")
}

/// Measures to `addr` and archives and prints the result; `banner` goes
/// above the text report, `kind` names the command in the archive (`abw`,
/// or `demo` over loopback).
pub(crate) fn measure(
    addr: SocketAddr,
    opts: &AbwOptions,
    banner: Option<&str>,
    kind: &str,
) -> Result<(), Failure> {
    if !(opts.timeout.ns() > 0 && opts.timeout <= DurationNs::from_secs(3600)) {
        return Err(usage(format!(
            "--timeout {} must be in (0, 3600] seconds",
            opts.timeout
        )));
    }
    let settings = method_settings(opts, default_max_rate());
    let mut method = build_method(opts, &settings)?;
    check_max_rate(&opts.method, &settings)?;
    let mut cfg = ClientConfig::new(addr);
    cfg.reply_timeout = opts.timeout.to_std();
    cfg.connect_timeout = cfg.reply_timeout;
    if let Some(path) = &opts.key_file {
        cfg.key = Some(serve_cmd::client_key(path, opts.key_id.as_deref())?);
    }
    output::event(
        "start",
        serde_json::json!({ "command": kind, "target": addr.to_string(), "method": opts.method, "settings": report::settings_json(&settings) }),
    );
    // Every probe's stamps, for the archive's raw data (bounded).
    let mut kept: Vec<pathsonde_core::Observation> = Vec::new();
    let mut kept_packets = 0usize;
    let fraction = Cell::new(None);
    // Per mille of the method's own progress, when it can say.
    let bar = output::show_progress().then(|| output::progress_bar(1000, true));
    let mut progress = |o: &pathsonde_core::Observation| {
        // On a terminal a bar with the last train beside it; under
        // --json-lines a `progress` event (with the fraction done when the
        // method knows it) beside the `train` event.
        let line = report::progress_line(o);
        if let Some(bar) = &bar {
            if let Some(f) = fraction.get() {
                bar.set_position((f * 1000.0) as u64);
            }
            bar.set_message(line.clone());
        }
        output::event(
            "progress",
            serde_json::json!({ "message": line, "fraction": fraction.get() }),
        );
        output::event("train", output::train_event(o));
        if kept_packets + o.packets.len() <= pathsonde_lab::run::KEEP_OBSERVATIONS_PACKETS {
            kept_packets += o.packets.len();
            kept.push(o.clone());
        }
    };
    let mut watched = Watched {
        inner: method.as_mut(),
        progress: &fraction,
    };
    let run = client::measure(cfg, &mut watched, &mut progress);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let run = run?;
    let record = pathsonde_archive::Record {
        kind: kind.into(),
        target: addr.to_string(),
        method: Some(run.estimate.method.to_string()),
        started: archive_cmd::started_ago(run.duration.to_std()),
        duration: run.duration.to_std(),
        summary: archive_cmd::abw_summary(&run),
        result: report::abw_json(&run, &settings),
        raw: Some(archive_cmd::raw_observations(&[(0, &kept)])),
    };
    archive_cmd::finish(record, || {
        let mut t = String::new();
        if let Some(b) = banner {
            t.push_str(b);
            t.push_str("\n\n");
        }
        t.push_str(&report::abw_text(&run, &settings));
        t
    });
    Ok(())
}
