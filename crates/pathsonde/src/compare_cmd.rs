//! `pathsonde compare`: every chosen method on one lab path over a sweep of
//! cross-traffic kinds and loads, with the comparison paper's table and
//! figures (docs/compare.md).  The sweep itself is `pathsonde_lab::compare`;
//! this module parses options, shows progress and writes the results.

use crate::compare_plot;
use crate::exit::Exit;
use crate::{usage, Failure};
use clap::Args;
use pathsonde_core::methods::registry::{self, MethodSettings};
use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_lab::compare::{self, CompareOptions, CompareReport, Progress};
use pathsonde_lab::topology::LabSpec;
use pathsonde_render::compare::{markdown, text};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Args, Clone)]
pub struct CompareArgs {
    /// Tight-link capacity (tbf rate; counts Ethernet headers), e.g. 300mbit.
    #[arg(long, default_value = "300mbit", value_parser = crate::args::positive_rate)]
    pub capacity: BitRate,
    /// Cross-traffic kinds, comma-separated or repeated, without a rate:
    /// poisson, cbr, mix, icim, web, with options as in docs/cross-traffic.md
    /// (e.g. mix:flows=4).  Each runs at every load.
    #[arg(long = "cross", default_value = "poisson", value_delimiter = ',')]
    pub cross: Vec<String>,
    /// Loads in percent of the capacity, comma-separated.
    #[arg(long, default_value = "10,30,50,70,90", value_delimiter = ',')]
    pub loads: Vec<f64>,
    /// Runs of each method at each load.
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
    /// Methods, comma-separated, or `all` (every available-bandwidth method);
    /// `capacity` adds RFC 9097's maximum IP-layer capacity (one UDPST test
    /// per run, judged against the tight link's IP-layer rate minus the
    /// cross traffic; docs/capacity.md).
    #[arg(long, default_value = "all", value_delimiter = ',')]
    pub methods: Vec<String>,
    /// Each `capacity` test's duration, whole seconds from 5 s.
    #[arg(long, default_value = "10s", value_parser = crate::args::seconds)]
    pub capacity_duration: DurationNs,
    /// The `capacity` tests' load-adjustment search: b or c.
    #[arg(long, value_enum, default_value = "b")]
    pub algorithm: crate::capacity_cmd::AlgorithmArg,
    /// Cross traffic alone after each load starts, e.g. 2s (a bare number
    /// is seconds).
    #[arg(long, default_value = "2s", value_parser = crate::args::seconds)]
    pub settle: DurationNs,
    /// Quiet before each measurement (the paper's settling delay), e.g. 500ms.
    #[arg(long, default_value = "0.5s", value_parser = crate::args::seconds)]
    pub tool_settle: DurationNs,
    /// Tight-link queue limit, e.g. 256KiB (sizes: docs/units.md).
    #[arg(long, default_value = "256KiB", value_parser = crate::args::positive_size)]
    pub queue: Bytes,
    /// Link MTU: 1500 or 9000.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// One-way delay on the forward path, 1ms..100ms.
    #[arg(long)]
    pub delay: Option<DurationNs>,
    /// Add a second router whose link to the receiver is the narrow link, at this rate.
    #[arg(long, value_parser = crate::args::positive_rate)]
    pub narrow: Option<BitRate>,
    /// Threaded NAPI on the receivers' veths (bunches receive stamps, as NIC coalescing does).
    #[arg(long)]
    pub threaded_napi: bool,
    /// Lab name (namespaces are pathsonde-NAME-ROLE); default: cmp<pid>.
    #[arg(long)]
    pub name: Option<String>,
    /// Seed for the cross-traffic schedules.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// IP packet size of probes in bytes (headers included).
    #[arg(long, default_value = "1500", value_parser = crate::args::packet_size)]
    pub packet_size: Bytes,
    /// Highest rate any method probes at [default: 1G, as `abw`; 500M
    /// with --delay, the most the delay line carries].
    #[arg(long, value_parser = crate::args::positive_rate)]
    pub max_rate: Option<BitRate>,
    /// Tell every method the tight link's capacity (IP layer), as a user who
    /// knows it would with `abw --known-capacity` [default: not given: the
    /// methods run blind, as on a real path].
    #[arg(long, value_name = "RATE", value_parser = crate::args::positive_rate)]
    pub known_capacity: Option<BitRate>,
    /// The band half-width FAC² and SLoPS probe for, e.g. 2%, as `abw
    /// --precision` [default: each method's own rule].
    #[arg(long, value_name = "PCT", value_parser = crate::args::precision)]
    pub precision: Option<f64>,
    /// The most probe bytes FAC² or SLoPS may spend per run, as `abw
    /// --max-bytes` [default: each method's own].
    #[arg(long, value_name = "SIZE", value_parser = crate::args::positive_size)]
    pub max_bytes: Option<Bytes>,
    /// Directory for compare.json, compare.txt, compare.md and the figures.
    #[arg(long, default_value = "compare-out")]
    pub out: PathBuf,
    #[command(flatten)]
    pub json: crate::args::JsonFlags,
}

/// The methods to run: `all` means every registry name.
fn methods(args: &CompareArgs) -> Result<Vec<String>, Failure> {
    let mut out: Vec<String> = Vec::new();
    for m in &args.methods {
        let m = m.trim();
        let add: Vec<String> = if m == "all" {
            registry::MethodName::ALL
                .iter()
                .map(|m| m.to_string())
                .collect()
        } else if m.parse::<registry::MethodName>().is_ok() || m == crate::settings::CAPACITY_METHOD
        {
            vec![m.to_string()]
        } else {
            return Err(usage(format!(
                "--methods: unknown method '{m}' (known: {}, capacity, or all)",
                registry::MethodName::list()
            )));
        };
        for a in add {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    if out.is_empty() {
        return Err(usage("--methods names no method".into()));
    }
    Ok(out)
}

fn options(args: &CompareArgs) -> Result<CompareOptions, Failure> {
    for (what, v) in [
        ("--settle", args.settle),
        ("--tool-settle", args.tool_settle),
    ] {
        if v > DurationNs::from_secs(600) {
            return Err(usage(format!("{what} {v} must be at most 600 s")));
        }
    }
    let spec = LabSpec {
        name: args
            .name
            .clone()
            .unwrap_or_else(|| format!("cmp{}", std::process::id())),
        capacity: args.capacity,
        queue: args.queue,
        mtu: args.mtu,
        cross_sources: 1,
        narrow: args.narrow,
        delay: args.delay,
        threaded_napi: args.threaded_napi,
    };
    // Blind, as `abw` on a real path: only what the user said.
    let settings = pathsonde_core::methods::registry::MethodSettings {
        precision: args.precision,
        max_bytes: args.max_bytes,
        ..crate::settings::settings_of(
            args.max_rate
                .unwrap_or_else(|| crate::settings::lab_default_max_rate(args.delay)),
            args.packet_size,
            args.known_capacity,
        )
    };
    crate::settings::check_settings(&settings)?;
    let opts = CompareOptions {
        spec,
        kinds: args.cross.iter().map(|k| k.trim().to_string()).collect(),
        loads: args.loads.clone(),
        methods: methods(args)?,
        capacity: pathsonde_lab::capacity::CapacitySettings {
            duration_s: args.capacity_duration,
            algorithm: match args.algorithm {
                crate::capacity_cmd::AlgorithmArg::B => pathsonde_net::udpst::Algorithm::B,
                crate::capacity_cmd::AlgorithmArg::C => pathsonde_net::udpst::Algorithm::C,
            },
        },
        runs: args.runs,
        settle: args.settle.to_std(),
        tool_settle: args.tool_settle.to_std(),
        settings,
        seed: args.seed,
    };
    opts.validate().map_err(Failure::from)?;
    Ok(opts)
}

pub fn run(args: CompareArgs) -> Result<(), Failure> {
    let opts = options(&args)?;
    std::fs::create_dir_all(&args.out).map_err(|e| Failure {
        exit: Exit::Usage,
        message: format!("--out {}: {e}", args.out.display()),
    })?;
    pathsonde_lab::netns::check_permitted().map_err(Failure::from)?;
    let terminal = crate::output::show_progress();
    // One lab experiment at a time on this machine, for the whole sweep.
    let _lock = pathsonde_lab::exclusive::lab_lock_or_inherit(|| {
        eprintln!(
            "pathsonde: waiting for the lab lock ({}): another lab experiment is running",
            pathsonde_lab::exclusive::LOCK_PATH
        )
    })
    .map_err(Failure::from)?;
    let make = |name: &str, settings: &MethodSettings| {
        name.parse::<registry::MethodName>()
            .map(|m| registry::build(m, settings))
            .map_err(|e| e.to_string())
    };
    let bar = terminal.then(|| progress_bar(opts.total_runs()));
    let mut on_progress = |p: Progress<'_>| {
        match &p {
            Progress::Done(Ok(r)) => {
                crate::output::event("run", serde_json::to_value(r).unwrap_or_default())
            }
            Progress::Done(Err(f)) => {
                crate::output::event("failure", serde_json::to_value(f).unwrap_or_default())
            }
            Progress::Start {
                kind,
                load,
                method,
                run,
            } => crate::output::event(
                "progress",
                serde_json::json!({ "message": format!("{kind} {load} %: {method} run {}", run + 1) }),
            ),
            Progress::Phase { .. } => {}
        }
        let Some(bar) = &bar else { return };
        match p {
            Progress::Phase { kind, load } => {
                bar.set_message(format!("{kind} {load} %: cross traffic settling"))
            }
            Progress::Start {
                kind,
                load,
                method,
                run,
            } => bar.set_message(format!("{kind} {load} %: {method} run {}", run + 1)),
            Progress::Done(Ok(r)) => {
                bar.inc(1);
                bar.println(format!(
                    "{} {} % {:<6} run {}: {}  truth {}  error {:+.1} %  {}  {:.1} s",
                    r.kind,
                    r.load,
                    r.method,
                    r.run + 1,
                    r.estimate_bps,
                    r.truth_bps,
                    r.error * 100.0,
                    match r.in_band {
                        Some(true) => "in band",
                        Some(false) => "band missed",
                        None => "no band",
                    },
                    r.duration_s.secs_f64()
                ));
            }
            Progress::Done(Err(f)) => {
                bar.inc(1);
                bar.println(format!(
                    "{} {} % {:<6} run {}: no estimate ({})",
                    f.kind,
                    f.load,
                    f.method,
                    f.run + 1,
                    f.error
                ));
            }
        }
    };
    let report = compare::compare(&opts, &make, &mut on_progress).map_err(Failure::from)?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let files = write_outputs(&report, &args.out)?;
    let v = json(&report, &files);
    crate::output::result(&v, || {
        let mut t = String::new();
        let _ = write!(t, "{}", text(&report));
        let _ = writeln!(t);
        for f in &files {
            let _ = writeln!(t, "wrote {}", f.display());
        }
        t
    });
    if report.runs.is_empty() {
        return Err(Failure {
            exit: Exit::NoEstimate,
            message: "no measurement of the sweep produced an estimate".into(),
        });
    }
    Ok(())
}

fn progress_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {pos}/{len} runs, eta {eta}  {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// compare.json, compare.txt, compare.md and the figures; returns the paths.
fn write_outputs(report: &CompareReport, dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let io = |p: &Path, e: std::io::Error| Failure {
        exit: Exit::Internal,
        message: format!("writing {}: {e}", p.display()),
    };
    let mut files = Vec::new();
    let txt = dir.join("compare.txt");
    std::fs::write(&txt, text(report)).map_err(|e| io(&txt, e))?;
    files.push(txt);
    let md = dir.join("compare.md");
    std::fs::write(&md, markdown(report)).map_err(|e| io(&md, e))?;
    files.push(md);
    match compare_plot::write_all(report, dir) {
        Ok(f) => files.extend(f),
        Err(why) => {
            return Err(Failure {
                exit: Exit::Internal,
                message: format!("plots: {why}"),
            })
        }
    }
    let js = dir.join("compare.json");
    files.push(js.clone());
    std::fs::write(&js, json(report, &files).to_string()).map_err(|e| io(&js, e))?;
    Ok(files)
}

/// The one JSON object `compare --json` prints (and compare.json holds).
pub fn json(report: &CompareReport, files: &[PathBuf]) -> serde_json::Value {
    let mut v = serde_json::to_value(report)
        .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }));
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "settings".into(),
            crate::report::settings_json(&report.settings),
        );
        o.insert(
            "command".into(),
            serde_json::json!(std::env::args().collect::<Vec<_>>().join(" ")),
        );
        o.insert(
            "files".into(),
            serde_json::json!(files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()),
        );
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathsonde_core::DurationNs;
    use pathsonde_lab::compare::{CompareFailure, CompareRun};

    fn run(method: &str, estimate: f64) -> CompareRun {
        CompareRun {
            kind: "poisson".into(),
            load: 30.0,
            method: method.into(),
            run: 0,
            start_s: DurationNs::from_secs_f64(1.0),
            end_s: DurationNs::from_secs_f64(2.0),
            estimate_bps: BitRate::from_bps(estimate),
            estimate_low_bps: BitRate::from_bps(estimate),
            estimate_high_bps: None,
            truth_bps: BitRate::from_bps(200e6),
            truth_qdisc_bps: None,
            cross_bps: BitRate::from_bps(90e6),
            error: (estimate - 200e6) / 200e6,
            sampling_error: None,
            in_band: Some(true),
            drops_caused: Some(0.0),
            duration_s: DurationNs::from_secs_f64(1.0),
            window_s: DurationNs::from_secs_f64(0.5),
            window_start_s: DurationNs::from_secs_f64(1.2),
            window_end_s: DurationNs::from_secs_f64(1.7),
            probe_bytes: 3_000_000,
            probe_packets: 2000,
            probe_rate_bps: BitRate::from_bps(24e6),
            intrusiveness: 0.12,
            overhead: Some(24.0 / 90.0),
            converged: true,
            host_limited: None,
            coalescing: None,
            notes: vec![],
            host_resource: None,
        }
    }

    fn report() -> CompareReport {
        let runs = vec![run("fac2", 210e6)];
        let failures = vec![CompareFailure {
            kind: "poisson".into(),
            load: 30.0,
            method: "chirp".into(),
            run: 0,
            start_s: DurationNs::from_secs_f64(3.0),
            end_s: DurationNs::from_secs_f64(4.0),
            error: "no usable chirp".into(),
        }];
        CompareReport {
            lab: LabSpec {
                name: "t".into(),
                capacity: BitRate::from_mbps(300.0),
                queue: Bytes(262_144),
                mtu: 1500,
                cross_sources: 1,
                narrow: None,
                delay: None,
                threaded_napi: false,
            },
            settings: crate::settings::settings_of(BitRate::from_gbps(1.0), Bytes(1500), None),
            capacity_ip_bps: BitRate::from_bps(297.2e6),
            probe_size_bytes: 1500,
            kinds: vec!["poisson".into()],
            loads: vec![30.0],
            methods: vec!["fac2".into(), "chirp".into()],
            capacity: None,
            runs_per_cell: 1,
            settle_s: DurationNs::from_secs_f64(2.0),
            tool_settle_s: DurationNs::from_secs_f64(0.5),
            elapsed_s: DurationNs::from_secs_f64(10.0),
            load_average_before: Some([1.0, 1.0, 1.0]),
            load_average_after: None,
            rows: compare::rows(&runs, &failures),
            runs,
            failures,
            phases: vec![],
            qdisc_series: vec![],
            notes: vec![],
        }
    }

    #[test]
    fn the_text_and_markdown_tables_show_every_cell_and_every_failure() {
        let r = report();
        let t = text(&r);
        assert!(t.contains("fac2") && t.contains("chirp"), "{t}");
        // fac2: one run, 5 % off, no standard deviation.
        let line = t.lines().find(|l| l.contains("fac2")).unwrap();
        assert!(
            line.contains("210.0") && line.contains("5.0 %") && line.contains(" - "),
            "{line}"
        );
        assert!(
            t.contains("chirp run 1: no estimate: no usable chirp"),
            "{t}"
        );
        assert!(t.contains("before 1.00, after ?"), "{t}");
        let md = markdown(&r);
        assert!(
            md.contains(
                "| 30 % | fac2 | no | 1/1 | 200.0 | 210.0 | - | 5.0 % | 5.0 % | 5.0 % | 100 % | 0, 0 |"
            ),
            "{md}"
        );
        assert!(md.contains("| 30 % | chirp | no | 0/1 | - |"), "{md}");
        assert!(t.contains("not given: the method measured"), "{t}");
        let v = json(&r, &[PathBuf::from("x/compare.json")]);
        assert_eq!(v["rows"][0]["method"], "fac2");
        assert_eq!(v["files"][0], "x/compare.json");
    }

    #[test]
    fn all_means_every_registry_method_once() {
        let mut args = CompareArgs::parse_from(["x", "--methods", "fac2,all"]);
        let m = methods(&args).unwrap();
        assert_eq!(m.len(), registry::MethodName::ALL.len());
        assert_eq!(m[0], "fac2");
        // `all` is the available-bandwidth methods; capacity is asked for by name.
        assert!(!m.iter().any(|x| x == "capacity"));
        args.methods = vec!["fac2".into(), "capacity".into()];
        assert_eq!(methods(&args).unwrap(), ["fac2", "capacity"]);
        args.methods = vec!["warp".into()];
        assert!(methods(&args).is_err());
    }

    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        args: CompareArgs,
    }

    impl CompareArgs {
        fn parse_from(argv: [&str; 3]) -> CompareArgs {
            use clap::Parser;
            Wrap::parse_from(argv).args
        }
    }
}
