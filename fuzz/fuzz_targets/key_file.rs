//! Key files (`--key-file`): text a person wrote, parsed before any secret
//! is used.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(ring) = pathsonde_net::auth::parse_key_file(text) {
            assert!(!ring.is_empty());
            let _ = format!("{ring:?}");
        }
    }
});
