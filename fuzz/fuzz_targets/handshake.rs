//! The 12-byte hellos: both decoders on any bytes; whatever decodes must
//! encode back to the same 12 bytes (reserved bytes aside).
#![no_main]
use libfuzzer_sys::fuzz_target;
use pathsonde_wire::handshake::{ClientHello, ServerHello};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = ClientHello::decode(data) {
        let again = ClientHello::decode(&h.encode()).expect("re-decode");
        assert_eq!(again, h);
    }
    if let Ok(h) = ServerHello::decode(data) {
        let again = ServerHello::decode(&h.encode()).expect("re-decode");
        assert_eq!(again, h);
    }
});
