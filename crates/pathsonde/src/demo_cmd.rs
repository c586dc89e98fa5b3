//! `pathsonde demo`, the README's main command: an emulated lab path beside
//! its ground truth where namespaces are permitted, else a server and a
//! client in this process over loopback, saying why.

use crate::settings::AbwOptions;
use crate::{abw_cmd, archive_cmd, exit, lab_cmd, report, Failure};
use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_net::{Server, ServerConfig};
use std::net::SocketAddr;

/// The README's main command.  As root with namespaces, an emulated lab
/// path with ground truth (300 Mb/s tight link, 30 % Poisson cross traffic,
/// 10 ms delay); otherwise a server and client over loopback, saying why.
pub(crate) fn run(opts: &AbwOptions) -> Result<(), Failure> {
    match pathsonde_lab::netns::check_permitted() {
        Ok(()) => demo_lab(opts),
        Err(why) => {
            let banner = format!(
                "demo: no lab here ({why}); measuring loopback instead.\n\
                 Loopback has no bottleneck, so expect the host, not the path, to set the limit."
            );
            demo_loopback(opts, &banner)
        }
    }
}

fn demo_lab(opts: &AbwOptions) -> Result<(), Failure> {
    let path = lab_cmd::PathArgs {
        capacity: Some(BitRate::from_mbps(300.0)),
        cross: vec!["poisson:30%".into()],
        delay: Some(pathsonde_core::DurationNs::from_ms(10)),
        queue: Bytes(256 * 1024),
        mtu: 1500,
        narrow: None,
        threaded_napi: false,
        name: None,
        settle: DurationNs::from_secs(1),
        seed: 1,
    };
    let started = std::time::Instant::now();
    let report = lab_cmd::lab_run(&path, 1, opts)?;
    if report.runs.is_empty() {
        return Err(Failure {
            exit: exit::Exit::NoEstimate,
            message: format!("the demo produced no estimate: {}", report.notes.join("; ")),
        });
    }
    let record = archive_cmd::lab_record(
        "demo",
        &report,
        report::lab_json(&report),
        started.elapsed(),
    );
    archive_cmd::finish(record, || {
        let mut t = String::from(
            "demo: an emulated path in network namespaces — tight link 300 Mb/s (tbf), \
             30 % Poisson cross traffic, 10 ms one-way delay — measured by pathsonde's \
             own client and server, blind (told nothing of the path, as on a real one), \
             beside the ground truth.\n\n",
        );
        if let Some(m) = report.measurements.first() {
            t.push_str(&report::abw_text(m, &report.settings));
            t.push('\n');
        }
        t.push_str(&report::lab_text(&report));
        t
    });
    Ok(())
}

fn demo_loopback(opts: &AbwOptions, banner: &str) -> Result<(), Failure> {
    let server = Server::bind(ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0))))?;
    let handle = server.spawn()?;
    let addr = handle.local_addr();
    let banner = format!("{banner}\nServer and client in one process over loopback ({addr}).");
    let result = abw_cmd::measure(addr, opts, Some(&banner), "demo");
    let stopped = handle.stop();
    result?;
    stopped?;
    Ok(())
}
