//! How a host's facts are printed: `pathsonde host`'s text report (in
//! sections like netest's verbose output), and its pieces — a probed value
//! or why it is unknown, a byte count in the largest binary unit that fits —
//! which the host section of `measure`'s report shares, so both say it
//! alike.  Takes `pathsonde_net::host::HostReport` as the probes return it.

use pathsonde_core::BitRate;
use pathsonde_net::host::{HostReport, Known};
use std::fmt::{Display, Write};

/// A probed fact through `f`, or `unknown (why)` when the probe could not
/// read it.
pub fn show<T>(k: &Known<T>, f: impl Fn(&T) -> String) -> String {
    match k {
        Known::Value(v) => f(v),
        Known::Unavailable { unavailable } => format!("unknown ({unavailable})"),
    }
}

/// A probed fact by its `Display`, or `unknown (why)`.
pub fn plain<T: Display>(k: &Known<T>) -> String {
    show(k, |v| v.to_string())
}

/// A byte count as GiB, MiB or KiB (with the exact count below a MiB).
pub fn bytes(b: &u64) -> String {
    if *b >= 1 << 30 {
        format!("{:.1} GiB", *b as f64 / (1u64 << 30) as f64)
    } else if *b >= 1 << 20 {
        format!("{:.1} MiB", *b as f64 / (1u64 << 20) as f64)
    } else if *b >= 1 << 10 {
        format!("{:.1} KiB ({b} bytes)", *b as f64 / 1024.0)
    } else {
        format!("{b} bytes")
    }
}

/// A duration in nanoseconds, as ns or (from 10 µs) µs.
pub fn ns(v: &f64) -> String {
    if *v >= 10_000.0 {
        format!("{:.1} µs", v / 1e3)
    } else {
        format!("{v:.1} ns")
    }
}

fn rate(r: &BitRate) -> String {
    let bps = r.bps();
    if bps >= 1e9 {
        format!("{:.2} Gb/s", bps / 1e9)
    } else {
        format!("{:.1} Mb/s", bps / 1e6)
    }
}

fn yes(b: &bool) -> String {
    (if *b { "on" } else { "off" }).to_string()
}

/// The text report, in sections like netest's verbose output.
pub fn text(r: &HostReport) -> String {
    let mut o = String::new();
    let k = &r.kernel;
    let _ = writeln!(o, "Host {}", plain(&k.hostname));
    let _ = writeln!(
        o,
        "  kernel             {} {} ({})",
        plain(&k.sysname),
        plain(&k.release),
        plain(&k.machine)
    );
    let _ = writeln!(o, "\nCPU");
    let c = &r.cpu;
    let _ = writeln!(o, "  model              {}", plain(&c.model));
    let _ = writeln!(o, "  logical CPUs       {}", plain(&c.logical_cpus));
    let _ = writeln!(o, "  physical cores     {}", plain(&c.physical_cores));
    let _ = writeln!(
        o,
        "  frequency          {} (/proc/cpuinfo)",
        show(&c.cpuinfo_frequency_hz, |h| format!("{:.0} MHz", h / 1e6))
    );
    let _ = writeln!(
        o,
        "  cpufreq            {}",
        show(&c.cpufreq, |f| format!(
            "current {}, min {}, max {}, governor {}, driver {}",
            show(&f.current_hz, |h| format!("{:.0} MHz", h / 1e6)),
            show(&f.min_hz, |h| format!("{:.0} MHz", h / 1e6)),
            show(&f.max_hz, |h| format!("{:.0} MHz", h / 1e6)),
            plain(&f.governor),
            plain(&f.driver)
        ))
    );
    let m = &r.memory;
    let _ = writeln!(o, "\nMemory");
    let _ = writeln!(o, "  total              {}", show(&m.total_bytes, bytes));
    let _ = writeln!(
        o,
        "  available          {}",
        show(&m.available_bytes, bytes)
    );
    let _ = writeln!(
        o,
        "  memcpy bandwidth   min {} / max {} ({} copies of {})",
        show(&m.memcpy_min_bps, |b| format!("{:.0} MB/s", b.bps() / 8e6)),
        show(&m.memcpy_max_bps, |b| format!("{:.0} MB/s", b.bps() / 8e6)),
        m.memcpy_repeats,
        bytes(&m.memcpy_block_bytes)
    );
    let t = &r.timing;
    let _ = writeln!(o, "\nTiming (median cost per call)");
    let _ = writeln!(o, "  clock              {}", t.clock);
    let _ = writeln!(o, "  clocksource        {}", plain(&t.clocksource));
    let _ = writeln!(o, "  clock read         {}", show(&t.clock_read_ns, ns));
    let _ = writeln!(
        o,
        "  clock resolution   clock_getres {}, smallest step seen {} ns",
        show(&t.clock_getres_ns, |v| format!("{v} ns")),
        t.clock_step_ns
    );
    let _ = writeln!(
        o,
        "  read(0 bytes)      {} (non-blocking pipe)",
        show(&t.syscall_read_ns, ns)
    );
    let _ = writeln!(
        o,
        "  write(0 bytes)     {} (/dev/null)",
        show(&t.syscall_write_ns, ns)
    );
    let _ = writeln!(o, "  getppid()          {}", ns(&t.syscall_getppid_ns));
    let _ = writeln!(
        o,
        "  sendto(1472 bytes) {} (p99 {}) to a loopback UDP socket",
        show(&t.sendto_1472_median_ns, ns),
        show(&t.sendto_1472_p99_ns, ns)
    );
    let _ = writeln!(o, "  function call      {}", ns(&t.call_ns));
    let _ = writeln!(o, "\nInterfaces");
    for i in &r.interfaces {
        let _ = writeln!(
            o,
            "  {}: {}, speed {}, MTU {}, driver {}",
            i.name,
            plain(&i.operstate),
            show(&i.speed_bps, rate),
            plain(&i.mtu_bytes),
            plain(&i.driver)
        );
        let _ = writeln!(
            o,
            "    offloads         {}",
            show(&i.offloads, |f| format!(
                "GSO {}, GRO {}, TSO {}, LRO {}",
                show(&f.gso, yes),
                show(&f.gro, yes),
                show(&f.tso, yes),
                show(&f.lro, yes)
            ))
        );
        let _ = writeln!(
            o,
            "    coalescing       {}",
            show(&i.coalescing, |c| format!(
                "adaptive-rx {}, rx-usecs {}, rx-frames {}, tx-usecs {}, tx-frames {}\n    \
                 → receiver bunch {} packets every {} (1500-byte packets at {}{}; I_time)",
                show(&c.adaptive_rx, yes),
                plain(&c.rx_usecs),
                plain(&c.rx_frames),
                plain(&c.tx_usecs),
                plain(&c.tx_frames),
                plain(&c.bunch_packets),
                show(&c.bunch_interval_ns, |v| ns(&(*v as f64))),
                rate(&c.bunch_line_speed_bps),
                if c.bunch_speed_assumed {
                    ", assumed"
                } else {
                    ""
                }
            ))
        );
        let _ = writeln!(
            o,
            "    timestamping     {}",
            show(&i.timestamping, |ts| format!(
                "hardware tx {}, rx {}; software tx {}, rx {}; PHC {}",
                yes(&ts.hardware_transmit),
                yes(&ts.hardware_receive),
                yes(&ts.software_transmit),
                yes(&ts.software_receive),
                show(&ts.phc_index, |p| format!("/dev/ptp{p}"))
            ))
        );
    }
    let s = &r.sysctls;
    let _ = writeln!(o, "\nSocket buffers and TCP");
    let _ = writeln!(o, "  net.core.rmem_max  {}", show(&s.rmem_max_bytes, bytes));
    let _ = writeln!(o, "  net.core.wmem_max  {}", show(&s.wmem_max_bytes, bytes));
    let _ = writeln!(
        o,
        "  rmem/wmem default  {} / {}",
        show(&s.rmem_default_bytes, bytes),
        show(&s.wmem_default_bytes, bytes)
    );
    let triple = |v: &[u64; 3]| format!("min {} default {} max {}", v[0], v[1], v[2]);
    let _ = writeln!(
        o,
        "  tcp_rmem           {}",
        show(&s.tcp_rmem_bytes, triple)
    );
    let _ = writeln!(
        o,
        "  tcp_wmem           {}",
        show(&s.tcp_wmem_bytes, triple)
    );
    let _ = writeln!(
        o,
        "  congestion control {} (available: {})",
        plain(&s.tcp_congestion_control),
        plain(&s.tcp_available_congestion_control)
    );
    let _ = writeln!(o, "  default qdisc      {}", plain(&s.default_qdisc));
    let _ = writeln!(o, "\nPacing (busy-wait on CLOCK_MONOTONIC, then send)");
    let _ = writeln!(o, "  sink               {}", r.pacing.sink);
    let _ = writeln!(o, "  paced trains       {}", r.pacing.paced_trains);
    for p in &r.pacing.sizes {
        let _ = writeln!(
            o,
            "  {}-byte packets    max {} pps = {} (back to back)",
            p.packet_bytes,
            show(&p.max_rate_pps, |v| format!("{v:.0}")),
            show(&p.max_rate_bps, rate)
        );
        let ratio = match (
            p.paced_train_bps_gso.value(),
            p.paced_train_bps_batch.value(),
        ) {
            (Some(g), Some(b)) if b.bps() > 0.0 => format!(", GSO/batch {:.2}x", g.bps() / b.bps()),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "    paced trains     GSO cars {}, sendmmsg batches {}{ratio}",
            show(&p.paced_train_bps_gso, rate),
            show(&p.paced_train_bps_batch, rate)
        );
        for g in &p.gaps {
            let _ = writeln!(
                o,
                "    gap {:>8}  achieved median {}, error median {}, p99 {}, within ±10 % {}",
                ns(&(g.target_gap_ns as f64)),
                show(&g.achieved_median_ns, ns),
                show(&g.error_median_ns, ns),
                show(&g.error_p99_ns, ns),
                show(&g.within_10pct, |v| format!("{:.1} %", v * 100.0))
            );
        }
    }
    let _ = writeln!(o, "\nprobes took {:.2} s", r.probe_duration_ns as f64 / 1e9);
    o
}
