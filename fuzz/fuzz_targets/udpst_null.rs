//! UDPSTP Null Requests as `pathsonde capacity` reads them from the server's
//! new test port: decode, re-encode, and check the bytes come back except the
//! fields a receiver ignores (cmd_response, reserved, checksum).
#![no_main]
use libfuzzer_sys::fuzz_target;
use pathsonde_wire::udpst::null;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = null::Packet::new_checked(data) else {
        return;
    };
    assert_eq!(p.authenticated_bytes().len(), null::LEN);
    let r = null::Repr::parse(&p).expect("parse after new_checked");
    let mut out = r.to_bytes();
    let mut want = data.to_vec();
    for i in [5, 6, 45, 46, 47] {
        want[i] = 0;
    }
    assert_eq!(out, want);
    null::fill_checksum(&mut out);
    assert_eq!(null::Repr::decode(&out).unwrap(), r);
});
