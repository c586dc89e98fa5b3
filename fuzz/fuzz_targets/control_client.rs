//! Client-to-server control frames, as the server reads them: header,
//! length cap, postcard body, trailing bytes.  A message that decodes must
//! survive a round trip.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pathsonde_wire::control::{decode_body, decode_frame, encode_frame, ClientMessage};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((m, used))) = decode_frame::<ClientMessage>(data) {
        assert!(used <= data.len());
        let f = encode_frame(&m).expect("a decoded message encodes");
        let (back, _) = decode_frame::<ClientMessage>(&f).unwrap().unwrap();
        assert_eq!(back, m);
    }
    let _ = decode_body::<ClientMessage>(data);
});
