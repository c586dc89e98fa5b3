//! UDPSTP Load PDUs as the load receiver reads them (any length from the
//! 32-byte header up, a truncated read included): decode, re-encode into a
//! buffer of the same length, and check the header comes back except the
//! checksum, with zero filler.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pathsonde_wire::udpst::load;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = load::Packet::new_checked(data) else {
        return;
    };
    assert_eq!(p.filler().len(), data.len() - load::HEADER_LEN);
    let r = load::Repr::parse(&p).expect("parse after new_checked");
    let mut out = vec![0xA5u8; data.len()];
    r.emit(&mut out).unwrap();
    assert_eq!(&out[..30], &data[..30]);
    assert_eq!(&out[30..32], &[0, 0]);
    assert!(out[32..].iter().all(|&b| b == 0));
    load::fill_checksum(&mut out);
    assert_eq!(load::Repr::decode(&out).unwrap(), r);
    assert_eq!(load::Repr::decode(&r.to_bytes()).unwrap(), r);
});
