//! UDPSTP Status Feedback PDUs as either end reads them: decode, re-encode,
//! and check the bytes come back except the reserved fields, the checksum
//! and the 16 trailing bytes the reference may fill with stale data.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pathsonde_wire::udpst::status;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = status::Packet::new_checked(data) else {
        return;
    };
    let r = status::Repr::parse(&p).expect("parse after new_checked");
    let mut out = r.to_bytes();
    let mut want = data.to_vec();
    for range in [137..140, 160..163, 164..176, 184..185, 186..204] {
        want[range].fill(0);
    }
    assert_eq!(out, want);
    status::fill_checksum(&mut out);
    assert_eq!(status::Repr::decode(&out).unwrap(), r);
});
