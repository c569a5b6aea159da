//! Open-loop latency: probes leave on a fixed schedule whatever the echoes
//! do, and each is timed from the moment it was scheduled, not from when
//! it could be sent. A stall then shows in every probe it delays — the
//! ones that would have gone during it too — where a ping-pong client
//! would have sent none of them and measured one slow round trip: the
//! "coordinated omission" Gil Tene named (wrk2, HdrHistogram).
//!
//! One thread writes on the schedule; the calling thread reads the echoes.
//! TCP keeps their order, so the k-th echo answers the k-th probe, and the
//! reader draws the same schedule (same start, rate and seed) to know when
//! that probe was due: the two threads share nothing but the socket.

use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::{prepare_latency, stream_error, transfer, Direction, TcpError, DRAIN_LIMIT};
use crate::histogram::Recorder;
use crate::transport::pace::{sleep_until, ProbePlan};
use crate::transport::FlowCounters;

/// The open-loop client of one stream: `buf.len()`-byte probes on `plan`
/// until `stop`, each echo recorded into `rtts` from its scheduled time.
pub fn probe_loop(
    sock: TcpStream,
    buf: &mut [u8],
    counters: &FlowCounters,
    stop: &AtomicBool,
    rtts: &mut Recorder,
    plan: ProbePlan,
) -> Result<(), TcpError> {
    let fail = stream_error(&sock, counters);
    prepare_latency(&sock).map_err(&fail)?;
    let mut writer = sock.try_clone().map_err(&fail)?;
    let mut reader = sock;
    let probe = buf.to_vec();
    let writer_done = AtomicBool::new(false);
    std::thread::scope(|s| {
        // The writer inherits the data-path thread's name and cores.
        let sending = s.spawn(|| {
            let mut schedule = plan.schedule();
            let mut probe = probe;
            let mut give_up = |_heard: bool| stop.load(Ordering::Relaxed);
            let result = loop {
                if !sleep_until(schedule.advance(), stop) {
                    break Ok(());
                }
                match transfer(&mut writer, &mut probe, &mut give_up, Direction::Write) {
                    Ok(true) => {}
                    Ok(false) => break Ok(()),
                    Err(e) => break Err(e),
                }
            };
            let _ = writer.shutdown(Shutdown::Write);
            writer_done.store(true, Ordering::Relaxed);
            result
        });
        let mut schedule = plan.schedule();
        // After the stop, the echoes of probes in flight still come back;
        // the server closes once it has echoed the last (EOF), or we give up.
        let mut stopped_at = None;
        let mut drained = |_heard: bool| {
            writer_done.load(Ordering::Relaxed) && stopped_at.get_or_insert_with(Instant::now).elapsed() >= DRAIN_LIMIT
        };
        let read = loop {
            match transfer(&mut reader, buf, &mut drained, Direction::Read) {
                Ok(true) => {
                    rtts.record_scheduled(schedule.advance(), Instant::now());
                    counters.add(buf.len() as u64, 1);
                }
                Ok(false) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        let sent = sending.join().expect("the probe writer does not panic");
        sent.and(read).map_err(&fail)
    })
}
