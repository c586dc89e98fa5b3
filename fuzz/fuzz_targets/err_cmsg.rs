//! The hop prober's error-queue decoders (ICMP error control messages and
//! the quoted probe payload), which read bytes derived from routers' ICMP
//! answers: any input must be read within bounds and never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pathsonde_net::hops::errqueue::parse_err_control(data);
    let _ = pathsonde_net::hops::errqueue::decode_payload(data);
    if let Some(e) = pathsonde_net::hops::errqueue::parse_err_control(data).err {
        let _ = e.kind();
    }
});
