//! UDPSTP Test Activation Requests as `pathsonde serve` reads them on a test
//! port, and Responses as `pathsonde capacity` reads them (the sending-rate
//! structure inside included): decode, re-encode, and check the bytes come
//! back except reserved fields, the checksum and the two booleans, which
//! read as the reference polices them.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pathsonde_wire::udpst::{activation, SendingRate};

fuzz_target!(|data: &[u8]| {
    if let Ok(rate) = SendingRate::parse(data) {
        assert_eq!(&rate.to_bytes()[..], &data[..28]);
    }
    let Ok(p) = activation::Packet::new_checked(data) else {
        return;
    };
    assert_eq!(p.authenticated_bytes().len(), activation::LEN);
    let r = activation::Repr::parse(&p).expect("parse after new_checked");
    let mut out = r.to_bytes();
    let mut want = data.to_vec();
    for i in [14, 58, 59, 62, 101, 102, 103] {
        want[i] = 0;
    }
    want[18] = u8::from(data[18] == 1);
    want[24] = u8::from(data[24] != 0);
    assert_eq!(out, want);
    activation::fill_checksum(&mut out);
    assert_eq!(activation::Repr::decode(&out).unwrap(), r);
});
