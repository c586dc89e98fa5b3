//! The server's host report JSON, read by the client exactly as a session
//! reads it (size check, then the typed report, then the "unavailable" form).
#![no_main]
use libfuzzer_sys::fuzz_target;
use pathsonde_net::client::HostSide;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let side = HostSide::from_json(text);
        assert!(side.report.is_some() || side.unavailable.is_some());
    }
});
