//! The egress rate limiter of an interface (what `tc qdisc show` lists),
//! read over rtnetlink: a root `tbf` sends no faster than its rate, and a
//! root `htb` whose classes all hang under one top class no faster than
//! that class's ceil. Either is the interface's line rate for what it sends.

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla, NlasIterator, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage, TcOption};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use serde::{Deserialize, Serialize};

/// An egress rate limiter on an interface.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limiter {
    /// The qdisc that limits: `tbf`, or `htb` (its one top class's ceil).
    pub qdisc: String,
    /// Its rate, bit/s.
    pub rate_bps: u64,
}

/// linux/rtnetlink.h: a qdisc's (class's) options, nested.
const TCA_OPTIONS: u16 = 2;
/// linux/pkt_sched.h: the attributes inside a tbf's and an htb class's options.
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
const TCA_HTB_PARMS: u16 = 1;
const TCA_HTB_CEIL64: u16 = 7;
/// `struct tc_ratespec` is 12 bytes, its `rate` (bytes/s) the last 4; a
/// tbf's parameters start with its rate's, an htb class's with its rate's
/// and then its ceil's.
const RATESPEC_LEN: usize = 12;
const RATESPEC_RATE: usize = 8;

/// The limiter on what `iface` sends, if any (none where netlink cannot be
/// read: the answer is then unknown, and no verdict rests on it).
pub fn egress_limiter(iface: &str) -> Option<Limiter> {
    let index = ifindex(iface)?;
    let qdiscs = dump(RouteNetlinkMessage::GetQueueDiscipline(request(index))).ok()?;
    let root = qdiscs.iter().find(|q| q.header.index == index && q.header.parent == TcHandle::ROOT)?;
    match kind(root)? {
        "tbf" => Some(Limiter { qdisc: "tbf".into(), rate_bps: tbf_rate(root)?.saturating_mul(8) }),
        "htb" => {
            let classes = dump(RouteNetlinkMessage::GetTrafficClass(request(index))).ok()?;
            Some(Limiter { qdisc: "htb".into(), rate_bps: top_ceil(&classes, root.header.handle)?.saturating_mul(8) })
        }
        _ => None,
    }
}

fn ifindex(iface: &str) -> Option<i32> {
    let text = std::fs::read_to_string(std::path::Path::new("/sys/class/net").join(iface).join("ifindex")).ok()?;
    text.trim().parse().ok()
}

fn request(index: i32) -> TcMessage {
    let mut message = TcMessage::default();
    message.header.index = index;
    message
}

/// Sends a dump request and gathers the qdiscs (classes) it answers with.
fn dump(ask: RouteNetlinkMessage) -> std::io::Result<Vec<TcMessage>> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let mut packet = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::from(ask));
    packet.header.flags = NLM_F_DUMP | NLM_F_REQUEST;
    packet.finalize();
    let mut buf = vec![0; packet.buffer_len()];
    packet.serialize(&mut buf);
    socket.send(&buf, 0)?;
    let mut found = Vec::new();
    let mut received = vec![0; 64 * 1024];
    loop {
        let size = socket.recv(&mut &mut received[..], 0)?;
        let mut at = 0;
        while at < size {
            let bad = |e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("rtnetlink: {e}"));
            let message = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&received[at..size]).map_err(bad)?;
            match message.payload {
                NetlinkPayload::Done(_) => return Ok(found),
                NetlinkPayload::Error(e) => return Err(e.to_io()),
                NetlinkPayload::InnerMessage(
                    RouteNetlinkMessage::NewQueueDiscipline(tc) | RouteNetlinkMessage::NewTrafficClass(tc),
                ) => found.push(tc),
                _ => {}
            }
            let length = message.header.length as usize;
            if length == 0 {
                break;
            }
            at += length;
        }
    }
}

fn kind(tc: &TcMessage) -> Option<&str> {
    tc.attributes.iter().find_map(|a| match a {
        TcAttribute::Kind(kind) => Some(kind.as_str()),
        _ => None,
    })
}

/// The raw value of option attribute `which` of `tc`: netlink-packet-route
/// keeps the options of a qdisc it does not know (tbf, htb) as one
/// attribute, TCA_OPTIONS, whose value holds them as nested attributes.
fn option(tc: &TcMessage, which: u16) -> Option<Vec<u8>> {
    tc.attributes.iter().find_map(|a| match a {
        TcAttribute::Options(options) => options.iter().find_map(|o| match o {
            TcOption::Other(nla) if nla.kind() == TCA_OPTIONS => {
                let mut nested = vec![0; nla.value_len()];
                nla.emit_value(&mut nested);
                let found = NlasIterator::new(&nested[..]).filter_map(Result::ok).find(|n| n.kind() == which);
                found.map(|n| n.value().to_vec())
            }
            _ => None,
        }),
        _ => None,
    })
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?)))
}

fn u64_of(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_ne_bytes(bytes.get(..8)?.try_into().ok()?))
}

/// A tbf's rate, bytes/s: the 64-bit one where the rate passes 32 bits.
fn tbf_rate(tbf: &TcMessage) -> Option<u64> {
    option(tbf, TCA_TBF_RATE64)
        .as_deref()
        .and_then(u64_of)
        .or_else(|| u32_at(&option(tbf, TCA_TBF_PARMS)?, RATESPEC_RATE))
}

/// The ceil of the one class directly under htb qdisc `handle`, bytes/s;
/// none where several share the top (their sum is no single cap). The
/// kernel gives a top class the parent ROOT, not its qdisc; the classes of
/// a qdisc further down (their own major) say ROOT too.
fn top_ceil(classes: &[TcMessage], handle: TcHandle) -> Option<u64> {
    let mut under = classes.iter().filter(|c| {
        c.header.parent == TcHandle::ROOT && c.header.handle.major == handle.major && kind(c) == Some("htb")
    });
    let class = under.next()?;
    if under.next().is_some() {
        return None;
    }
    let ceil = option(class, TCA_HTB_CEIL64).as_deref().and_then(u64_of);
    ceil.or_else(|| u32_at(&option(class, TCA_HTB_PARMS)?, RATESPEC_LEN + RATESPEC_RATE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::{DefaultNla, Emitable};

    fn qdisc(kind: &str, parent: TcHandle, handle: TcHandle, options: Vec<(u16, Vec<u8>)>) -> TcMessage {
        let mut tc = request(7);
        (tc.header.parent, tc.header.handle) = (parent, handle);
        // As the kernel sends them and netlink-packet-route keeps them: one TCA_OPTIONS of nested attributes.
        let nested: Vec<DefaultNla> = options.into_iter().map(|(k, v)| DefaultNla::new(k, v)).collect();
        let mut value = vec![0; nested.as_slice().buffer_len()];
        nested.as_slice().emit(&mut value);
        let options = vec![TcOption::Other(DefaultNla::new(TCA_OPTIONS, value))];
        tc.attributes = vec![TcAttribute::Kind(kind.into()), TcAttribute::Options(options)];
        tc
    }

    /// A `tc_ratespec` of `rate` bytes/s.
    fn ratespec(rate: u32) -> Vec<u8> {
        [[0u8; RATESPEC_RATE].as_slice(), &rate.to_ne_bytes()].concat()
    }

    #[test]
    fn a_tbf_gives_its_rate_and_its_64_bit_rate_past_32_bits() {
        let h = TcHandle { major: 1, minor: 0 };
        let params = [ratespec(25_000_000), vec![0; 24]].concat(); // 200 Mbit/s, then peakrate and sizes
        let tbf = qdisc("tbf", TcHandle::ROOT, h, vec![(TCA_TBF_PARMS, params.clone())]);
        assert_eq!(tbf_rate(&tbf), Some(25_000_000));
        let fast = qdisc(
            "tbf",
            TcHandle::ROOT,
            h,
            vec![(TCA_TBF_PARMS, params), (TCA_TBF_RATE64, 50_000_000_000u64.to_ne_bytes().to_vec())],
        );
        assert_eq!(tbf_rate(&fast), Some(50_000_000_000), "400 Gb/s needs the 64-bit rate");
        assert_eq!(tbf_rate(&qdisc("tbf", TcHandle::ROOT, h, vec![(TCA_TBF_PARMS, vec![0; 4])])), None, "short");
    }

    #[test]
    fn an_htb_caps_at_its_one_top_class_ceil_and_not_at_several() {
        let root = TcHandle { major: 1, minor: 0 };
        let class = |minor, parent, rate: u32, ceil: u32| {
            let params = [ratespec(rate), ratespec(ceil), vec![0; 20]].concat();
            qdisc("htb", parent, TcHandle { major: 1, minor }, vec![(TCA_HTB_PARMS, params)])
        };
        // As the kernel dumps them: a top class's parent is ROOT.
        let top = class(1, TcHandle::ROOT, 1_000_000, 12_500_000);
        let leaf = class(10, TcHandle { major: 1, minor: 1 }, 1_000_000, 2_000_000);
        // The top class of an htb 2: hung under leaf 1:10.
        let mut nested = class(1, TcHandle::ROOT, 1, 99);
        nested.header.handle.major = 2;
        assert_eq!(top_ceil(&[top.clone(), leaf, nested], root), Some(12_500_000), "100 Mbit/s over everything");
        assert_eq!(
            top_ceil(&[top.clone(), class(2, TcHandle::ROOT, 1, 99)], root),
            None,
            "two top classes: no one cap"
        );
        assert_eq!(top_ceil(&[], root), None);
    }

    #[test]
    fn an_interface_that_does_not_exist_has_no_limiter() {
        assert_eq!(egress_limiter("no-such-if0"), None);
        assert_eq!(kind(&request(1)), None);
        // The kernel answers a dump (loopback's `noqueue` is no limiter).
        assert!(dump(RouteNetlinkMessage::GetQueueDiscipline(request(1))).is_ok());
        assert_eq!(egress_limiter("lo"), None);
    }
}
