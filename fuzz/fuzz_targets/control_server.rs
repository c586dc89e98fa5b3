//! Server-to-client control frames, as the client reads them (train
//! reports, host reports, errors), plus the host-report size check the
//! client applies.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pathsonde_wire::control::{
    check_host_report, decode_body, decode_frame, encode_frame, ServerMessage,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((m, used))) = decode_frame::<ServerMessage>(data) {
        assert!(used <= data.len());
        if let ServerMessage::HostReport { json } = &m {
            let _ = check_host_report(json);
        }
        let f = encode_frame(&m).expect("a decoded message encodes");
        let (back, _) = decode_frame::<ServerMessage>(&f).unwrap().unwrap();
        assert_eq!(back, m);
    }
    let _ = decode_body::<ServerMessage>(data);
});
