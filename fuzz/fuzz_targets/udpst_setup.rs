//! UDPSTP Setup Requests as `pathsonde serve` reads them on its control port,
//! and Setup Responses as `pathsonde capacity` reads them: decode, re-encode,
//! and check the bytes come back except the fields a receiver ignores
//! (trailer reserved byte, checksum).
#![no_main]
use libfuzzer_sys::fuzz_target;
use pathsonde_wire::udpst::{auth, setup};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = setup::Packet::new_checked(data) else {
        return;
    };
    let _ = p.check_version();
    assert_eq!(p.authenticated_bytes().len(), setup::LEN);
    let r = setup::Repr::parse(&p).expect("parse after new_checked");
    let mut out = r.to_bytes();
    let mut want = data.to_vec();
    want[53] = 0;
    want[54] = 0;
    want[55] = 0;
    assert_eq!(out, want);
    assert_eq!(setup::Repr::decode(&out).unwrap(), r);
    let _ = r.response(setup::SetupResult::BadVersion, 1);
    setup::fill_checksum(&mut out);
    assert_eq!(setup::Repr::decode(&out).unwrap(), r);
    let covered = auth::authenticated_bytes(&out).unwrap();
    assert!(covered[20..52].iter().all(|&b| b == 0));
});
