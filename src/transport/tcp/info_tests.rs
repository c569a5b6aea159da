use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use super::*;

#[test]
fn a_stream_that_sent_tells_its_segments_and_round_trip() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut sender = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut receiver, _) = listener.accept().unwrap();
    let before = TcpInfo::read(sender.as_fd()).unwrap();
    let sent = vec![7u8; 1 << 20];
    let reader = std::thread::spawn(move || {
        let mut got = vec![0u8; 1 << 20];
        receiver.read_exact(&mut got).map(|()| got.len())
    });
    sender.write_all(&sent).unwrap();
    assert_eq!(reader.join().unwrap().unwrap(), sent.len());
    let after = TcpInfo::read(sender.as_fd()).unwrap();
    // This kernel fills every field the view uses.
    let segs = after.data_segs_out.unwrap() - before.data_segs_out.unwrap();
    assert!(segs >= (1 << 20) / 65536, "1 MiB went in at least 16 segments of at most 64 KiB: {segs}");
    assert!(after.rtt_us > 0 && after.min_rtt_us.unwrap() > 0, "{after:?}");
    assert!(after.min_rtt_us.unwrap() <= after.rtt_us.max(after.min_rtt_us.unwrap()));
    assert!(after.snd_cwnd >= 1 && after.busy_us.is_some() && after.delivered_ce.is_some(), "{after:?}");
    let view = TcpView::of(&[Some(before)], &[Some(after)]).unwrap();
    assert_eq!((view.streams, view.data_segs_out), (1, Some(u64::from(segs))));
    assert_eq!(view.retrans_segs, u64::from(after.total_retrans - before.total_retrans));
}

#[test]
fn a_closed_descriptor_is_an_error_not_zeroes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // A listening socket is TCP too, but a file is not.
    let file = std::fs::File::open("/proc/self/stat").unwrap();
    assert!(TcpInfo::read(file.as_fd()).is_err());
    assert!(TcpInfo::read(listener.as_fd()).is_ok());
}

/// A kernel older than a field fills fewer bytes: those fields are unavailable.
#[test]
fn fields_past_what_the_kernel_filled_are_unavailable() {
    // SAFETY: tcp_info is plain integers.
    let mut raw: libc::tcp_info = unsafe { std::mem::zeroed() };
    (raw.tcpi_total_retrans, raw.tcpi_data_segs_out, raw.tcpi_busy_time) = (3, 40, 500);
    let linux_4_6 = offset_of!(libc::tcp_info, tcpi_delivery_rate);
    let old = TcpInfo::filled(&raw, linux_4_6, Instant::now());
    assert_eq!((old.total_retrans, old.data_segs_out, old.busy_us, old.delivery_rate), (3, Some(40), None, None));
    let new = TcpInfo::filled(&raw, size_of_val(&raw), Instant::now());
    assert_eq!((new.busy_us, new.delivered_ce), (Some(500), Some(0)));
}

fn info(at: Instant, segs: u32, retrans: u32, busy_us: u64, rwnd_us: u64) -> TcpInfo {
    TcpInfo {
        at: Some(at),
        total_retrans: retrans,
        rtt_us: 400,
        snd_cwnd: 10,
        data_segs_out: Some(segs),
        min_rtt_us: Some(50),
        delivery_rate: Some(125_000_000),
        busy_us: Some(busy_us),
        rwnd_limited_us: Some(rwnd_us),
        sndbuf_limited_us: Some(0),
        delivered_ce: Some(0),
    }
}

#[test]
fn the_view_sums_counts_and_averages_shares_over_the_streams() {
    let t0 = Instant::now();
    let t1 = t0 + Duration::from_secs(2);
    let open = [Some(info(t0, 100, 1, 0, 0)), Some(info(t0, 0, 0, 0, 0)), None];
    // Stream 0: 1000 segments, 10 again, busy the whole 2 s; stream 1: 1000, none again, busy half of it, all of
    // that held by the receiver's window; stream 2 was not read at the window's start and is left out.
    let close = [Some(info(t1, 1100, 11, 2_000_000, 0)), Some(info(t1, 1000, 0, 1_000_000, 1_000_000)), None];
    let view = TcpView::of(&open, &close).unwrap();
    assert_eq!((view.streams, view.data_segs_out, view.retrans_segs), (2, Some(2000), 10));
    assert!((view.retrans_pct.unwrap() - 0.5).abs() < 1e-9, "{view:?}");
    assert!((view.busy_pct.unwrap() - 75.0).abs() < 1e-6 && (view.rwnd_limited_pct.unwrap() - 25.0).abs() < 1e-6);
    assert_eq!((view.srtt_us, view.min_rtt_us, view.cwnd_segs), (400.0, Some(50.0), 20));
    assert!((view.delivery_gbps.unwrap() - 2.0).abs() < 1e-9, "two streams at 1 Gb/s: {view:?}");
    assert_eq!(TcpView::of(&[None], &close[..1]), None, "no stream read at both edges");
    let old_kernel = TcpInfo { busy_us: None, min_rtt_us: None, ..info(t1, 1100, 11, 0, 0) };
    let view = TcpView::of(&open[..2], &[Some(old_kernel), close[1]]).unwrap();
    assert_eq!((view.busy_pct, view.min_rtt_us), (None, None), "one stream's kernel lacks them: {view:?}");
}
