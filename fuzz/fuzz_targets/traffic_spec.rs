//! Cross-traffic specs (`--cross poisson:30%:packet=1000`, ...), parsed and
//! validated against a capacity and MTU taken from the first bytes; the same
//! text through core's unit grammar (rates, sizes, durations).
#![no_main]
use libfuzzer_sys::fuzz_target;
use pathsonde_core::traffic::CrossModel;
use pathsonde_core::{BitRate, Bytes, DurationNs};

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let capacity = BitRate::from_mbps(f64::from(u16::from_be_bytes([data[0], data[1]])));
    let mtu = Bytes(576 + u64::from(data[2]) * 40);
    if let Ok(text) = std::str::from_utf8(&data[3..]) {
        if let Ok(m) = CrossModel::parse(text, capacity, mtu) {
            let _ = m.describe();
        }
        let _ = text.parse::<BitRate>();
        let _ = text.parse::<Bytes>();
        let _ = text.parse::<DurationNs>();
    }
});
