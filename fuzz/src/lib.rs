//! What the fuzz targets share: cutting an input into wire frames, and the
//! round-trip property every decoded message must have.

use std::net::IpAddr;

use fabricbench::hostfile::{Host, MAX_NAME};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The frames of `data` as the control connection carries them: a 4-byte
/// big-endian length, then that many bytes (the last frame may be short).
/// The seed corpus is recorded in this form, so seeds are real traffic.
pub fn frames(mut data: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let (len, rest) = data.split_first_chunk::<4>()?;
        let len = (u32::from_be_bytes(*len) as usize).min(rest.len());
        let (frame, rest) = rest.split_at(len);
        data = rest;
        Some(frame)
    })
}

/// A decoded message re-encodes to bytes that decode to a message with
/// the same encoding (bytes are compared, not values: a float may be NaN),
/// and that encoding is no longer than the frame it came from, so no frame
/// decodes into more than it carried. Returns the encoding.
pub fn round_trips<M: Serialize + DeserializeOwned>(msg: &M, frame: &[u8]) -> Vec<u8> {
    let bytes = postcard::to_stdvec(msg).expect("a decoded message encodes");
    let again: M = postcard::from_bytes(&bytes).expect("an encoded message decodes");
    assert_eq!(postcard::to_stdvec(&again).expect("encodes"), bytes, "decode(encode(m)) differs from m");
    assert!(bytes.len() <= frame.len(), "{} bytes re-encode to {}", frame.len(), bytes.len());
    bytes
}

/// The limits every accepted host keeps (docs/SECURITY.md, "Input limits").
pub fn check_host(host: &Host) {
    let name = &host.name;
    assert!(!name.is_empty() && name.len() <= MAX_NAME, "name `{name}`");
    assert!(!name.starts_with('-'), "`{name}` would be an ssh option");
    assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || ".-_:@".contains(c)), "name `{name}`");
    assert!(host.slots > 0, "{name}: slots 0");
    if let Some(addr) = &host.addr {
        let ip: IpAddr = addr.parse().expect("addr= is an IP");
        assert!(!ip.is_unspecified() && !ip.is_multicast(), "addr={addr}");
    }
    assert!(host.addrs.len() <= 1, "{name}: a rank has one address of its own, not {:?}", host.addrs);
    for addr in &host.addrs {
        let ip: IpAddr = addr.parse().expect("addrs= are IPs");
        assert!(!ip.is_unspecified() && !ip.is_multicast(), "addrs= {addr}");
    }
}
