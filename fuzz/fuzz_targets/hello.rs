//! A stranger's first frame: `wire::decode_hello`, the only decoder that
//! runs before a connection is authenticated.
#![no_main]

use fabricbench::control::wire::{decode_hello, HELLO_MAX};
use fabricbench_fuzz::round_trips;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|frame: &[u8]| {
    // The framing refuses longer first frames before they are read.
    if frame.len() > HELLO_MAX {
        return;
    }
    if let Ok(hello) = decode_hello(frame) {
        let body = round_trips(&hello, &frame[1..]);
        assert_eq!(decode_hello(&[&[0], &body[..]].concat()), Ok(hello));
    }
});
