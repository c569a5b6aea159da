//! What a worker reads from rank 0: frames decoded as `ToWorker` (Welcome,
//! Setup with its plan of flows, Peers, Start, Abort, Bye), each re-encoded
//! to the same bytes. The input is a connection's stream of frames.
#![no_main]

use fabricbench::control::wire::ToWorker;
use fabricbench::scenario::limits::MAX_SAMPLES;
use fabricbench_fuzz::{frames, round_trips};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for frame in frames(data) {
        if let Ok(msg) = postcard::from_bytes::<ToWorker>(frame) {
            round_trips(&msg, frame);
            if let ToWorker::Start { window, .. } = msg {
                // Any window's arithmetic is total; one a worker takes
                // (`Window::check`) has bounded samples and closes at its end.
                let last = window.boundaries() - 1;
                let close = window.boundary(last);
                if window.check().is_ok() {
                    assert!(u128::from(last) <= MAX_SAMPLES, "{window:?}");
                    assert_eq!(close, window.warmup + window.duration, "{window:?}");
                }
            }
        }
    }
});
