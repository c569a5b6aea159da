//! TCP's own view of a sending stream (`TCP_INFO`, linux/tcp.h), read at
//! the window's edges: what it retransmitted, its round trip against the
//! lowest it saw, its congestion window, and how long it had data waiting
//! that the network, the receiver's window or its own send buffer held.
//! The one `unsafe` outside the verbs and CUDA bindings: `getsockopt` into
//! the kernel's struct. Each field newer than the kernel is `None`, never 0
//! (the kernel says how many bytes of the struct it filled).
#![allow(unsafe_code)] // the crate denies it everywhere else (Cargo.toml [lints])

use std::mem::{offset_of, size_of_val};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// One stream's `TCP_INFO` at one instant. Fields from Linux 4.6 on and
/// later are `None` where the kernel is older.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TcpInfo {
    /// When it was read.
    pub at: Option<Instant>,
    /// Segments retransmitted since the stream connected.
    pub total_retrans: u32,
    /// Smoothed round trip, µs.
    pub rtt_us: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Segments with data sent, retransmissions included (4.6).
    pub data_segs_out: Option<u32>,
    /// The lowest round trip seen, µs (4.6).
    pub min_rtt_us: Option<u32>,
    /// The rate the latest acknowledged data was delivered at, bytes/s (4.9).
    pub delivery_rate: Option<u64>,
    /// Time with data not yet acknowledged, µs (4.10), and the parts of it
    /// held by the receiver's window and by the stream's send buffer.
    pub busy_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    /// Segments acknowledged with an ECN congestion mark (4.18).
    pub delivered_ce: Option<u32>,
}

impl TcpInfo {
    /// Reads `sock`'s `TCP_INFO` now.
    pub fn read(sock: BorrowedFd<'_>) -> std::io::Result<TcpInfo> {
        // SAFETY: tcp_info is plain integers, so all zeroes is a valid value.
        let mut raw: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = size_of_val(&raw) as libc::socklen_t;
        // SAFETY: `raw` is a live, writable tcp_info of `len` bytes, and the
        // kernel writes at most `len` bytes into it (and says how many).
        let rc = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                (&raw mut raw).cast::<libc::c_void>(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(TcpInfo::filled(&raw, len as usize, Instant::now()))
    }

    /// The fields of `raw` that lie within the `len` bytes the kernel filled.
    fn filled(raw: &libc::tcp_info, len: usize, at: Instant) -> TcpInfo {
        macro_rules! newer {
            ($field:ident) => {
                (offset_of!(libc::tcp_info, $field) + size_of_val(&raw.$field) <= len).then_some(raw.$field)
            };
        }
        TcpInfo {
            at: Some(at),
            total_retrans: raw.tcpi_total_retrans,
            rtt_us: raw.tcpi_rtt,
            snd_cwnd: raw.tcpi_snd_cwnd,
            data_segs_out: newer!(tcpi_data_segs_out),
            min_rtt_us: newer!(tcpi_min_rtt),
            delivery_rate: newer!(tcpi_delivery_rate),
            busy_us: newer!(tcpi_busy_time),
            rwnd_limited_us: newer!(tcpi_rwnd_limited),
            sndbuf_limited_us: newer!(tcpi_sndbuf_limited),
            delivered_ce: newer!(tcpi_delivered_ce),
        }
    }
}

/// What a flow end's sending streams told of the window: counts over it,
/// states at its end. A field some stream's kernel lacks is `None`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TcpView {
    /// Streams read at both edges.
    pub streams: u32,
    /// Segments with data sent in the window, retransmissions included.
    pub data_segs_out: Option<u64>,
    /// Segments retransmitted in the window.
    pub retrans_segs: u64,
    /// …as a share of `data_segs_out`, %.
    pub retrans_pct: Option<f64>,
    /// Smoothed round trip at the window's end, the streams' mean, µs.
    pub srtt_us: f64,
    /// The lowest round trip any stream saw since it connected, µs.
    pub min_rtt_us: Option<f64>,
    /// Congestion windows at the window's end, summed, segments.
    pub cwnd_segs: u64,
    /// Delivery rates at the window's end, summed, Gb/s.
    pub delivery_gbps: Option<f64>,
    /// Time with data unacknowledged, the streams' mean, % of the window…
    pub busy_pct: Option<f64>,
    /// …of which held by the receiver's advertised window…
    pub rwnd_limited_pct: Option<f64>,
    /// …and by the stream's own send buffer.
    pub sndbuf_limited_pct: Option<f64>,
    /// Segments acknowledged with an ECN congestion mark in the window.
    pub ce_marked: Option<u64>,
}

impl TcpView {
    /// The view of streams read at the window's `open` and `close` (in
    /// stream order; a stream missing a reading is left out); `None` when
    /// no stream was read at both edges.
    pub fn of(open: &[Option<TcpInfo>], close: &[Option<TcpInfo>]) -> Option<TcpView> {
        let pairs: Vec<(TcpInfo, TcpInfo)> = open.iter().zip(close).filter_map(|(a, b)| Some(((*a)?, (*b)?))).collect();
        let n = pairs.len();
        if n == 0 {
            return None;
        }
        let grew = |f: fn(&TcpInfo) -> Option<u64>| -> Option<u64> {
            pairs.iter().map(|(a, b)| Some(f(b)?.saturating_sub(f(a)?))).sum()
        };
        let mean_pct = |f: fn(&TcpInfo) -> Option<u64>| -> Option<f64> {
            let shares = pairs.iter().map(|(a, b)| {
                let span_us = b.at?.saturating_duration_since(a.at?).as_secs_f64() * 1e6;
                Some(f(b)?.saturating_sub(f(a)?) as f64 / span_us.max(1.0) * 100.0)
            });
            Some(shares.sum::<Option<f64>>()? / n as f64)
        };
        let data_segs_out = grew(|i| i.data_segs_out.map(u64::from));
        let retrans_segs = grew(|i| Some(u64::from(i.total_retrans))).unwrap_or(0);
        let ends = || pairs.iter().map(|(_, b)| b);
        Some(TcpView {
            streams: n as u32,
            data_segs_out,
            retrans_segs,
            retrans_pct: data_segs_out.filter(|&s| s > 0).map(|s| retrans_segs as f64 / s as f64 * 100.0),
            srtt_us: ends().map(|b| f64::from(b.rtt_us)).sum::<f64>() / n as f64,
            min_rtt_us: ends()
                .map(|b| b.min_rtt_us)
                .collect::<Option<Vec<u32>>>()
                .and_then(|v| v.into_iter().min())
                .map(f64::from),
            cwnd_segs: ends().map(|b| u64::from(b.snd_cwnd)).sum(),
            delivery_gbps: ends().map(|b| b.delivery_rate.map(|r| r as f64 * 8.0 / 1e9)).sum(),
            busy_pct: mean_pct(|i| i.busy_us),
            rwnd_limited_pct: mean_pct(|i| i.rwnd_limited_us),
            sndbuf_limited_pct: mean_pct(|i| i.sndbuf_limited_us),
            ce_marked: grew(|i| i.delivered_ce.map(u64::from)),
        })
    }
}

#[cfg(test)]
#[path = "info_tests.rs"]
mod tests;
