//! The host probes' parsers of /proc, /sys and ethtool output: text the
//! kernel and tools write, read as untrusted anyway (a container may fake
//! /proc, a tool version may change its format).
#![no_main]
use libfuzzer_sys::fuzz_target;
use pathsonde_net::host::{cpu, interfaces, memory, sysctls};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = cpu::parse_cpuinfo(text);
    let _ = memory::parse_meminfo(text);
    let _ = interfaces::parse_features(text);
    let _ = interfaces::parse_coalesce(text);
    let _ = interfaces::parse_timestamping(text);
    let _ = sysctls::parse_triple(text);
});
