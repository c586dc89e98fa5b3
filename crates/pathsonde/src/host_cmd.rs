//! `pathsonde host [--json]`: this host's capabilities (netest's verbose
//! section; Jin & Tierney 2003).  The probes live in
//! `pathsonde_net::host`, the report `pathsonde_render::host`; this file
//! probes, prints and archives.

use crate::Failure;
use pathsonde_net::host;
use pathsonde_render::host::{ns, plain, show, text};

pub(crate) fn run() -> Result<(), Failure> {
    let started = std::time::Instant::now();
    let report = host::probe();
    let v = serde_json::to_value(&report).map_err(|e| Failure {
        exit: crate::exit::Exit::Internal,
        message: e.to_string(),
    })?;
    let duration = started.elapsed();
    // Kept in the archive like a measurement: a host's capabilities change
    // with kernels, tuning and hardware, and a result is read beside them.
    let record = pathsonde_archive::Record {
        kind: "host".into(),
        target: plain(&report.kernel.hostname),
        method: None,
        started: crate::archive_cmd::started_ago(duration),
        duration,
        summary: format!(
            "{} CPUs, clock read {}, sendto {}",
            plain(&report.cpu.logical_cpus),
            show(&report.timing.clock_read_ns, ns),
            show(&report.timing.sendto_1472_median_ns, ns)
        ),
        result: v,
        raw: None,
    };
    crate::archive_cmd::finish(record, || text(&report));
    Ok(())
}
