//! `--allow` lists: any text either parses into blocks that answer for any
//! address, or is refused.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::net::IpAddr;

fuzz_target!(|data: &[u8]| {
    if data.len() < 16 {
        return;
    }
    let mut v6 = [0u8; 16];
    v6.copy_from_slice(&data[..16]);
    let probe6 = IpAddr::from(v6);
    let probe4 = IpAddr::from([data[0], data[1], data[2], data[3]]);
    if let Ok(text) = std::str::from_utf8(&data[16..]) {
        if let Ok(list) = pathsonde_net::allow::AllowList::parse(text) {
            let _ = list.allows(probe4);
            let _ = list.allows(probe6);
            for b in list.blocks() {
                let again: pathsonde_net::allow::Cidr =
                    b.to_string().parse().expect("Display parses back");
                assert_eq!(&again, b);
            }
        }
    }
});
