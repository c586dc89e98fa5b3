//! UDP probe datagrams as the server's receive thread and the client's echo
//! reader see them.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pathsonde_wire::probe::{ProbeHeader, PROBE_HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = ProbeHeader::decode(data) {
        let b = h
            .encode(data.len().max(PROBE_HEADER_LEN))
            .expect("re-encode");
        assert_eq!(ProbeHeader::decode(&b).unwrap(), h);
    }
});
