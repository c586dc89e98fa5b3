//! The receive path's control-message parser (SCM_TIMESTAMPING), which walks
//! a cmsg buffer with raw pointers: any buffer must be read within bounds.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The kernel hands over an 8-byte-aligned buffer; so does the receiver.
    let mut aligned = vec![0u64; data.len().div_ceil(8)];
    // SAFETY: `aligned` holds at least data.len() bytes.
    let bytes =
        unsafe { std::slice::from_raw_parts_mut(aligned.as_mut_ptr().cast::<u8>(), data.len()) };
    bytes.copy_from_slice(data);
    let _ = pathsonde_net::udp::parse_rx_control(bytes);
});
