//! `addr=` and `addrs=`: the unicast IP addresses a host and its ranks
//! bind to, each in its canonical form (so `fd00::1` and `fd00:0::1` are
//! one address).

use std::collections::HashSet;
use std::net::IpAddr;

use super::{shorten, Problem, MAX_RANKS};

/// Why a text is no address a rank can bind to.
enum Unusable {
    NotIp,
    NotUnicast,
}

/// A unicast IP in its canonical form: no address that names every
/// interface, a group or the broadcast, which no rank can bind its data to.
fn unicast_ip(text: &str) -> Result<String, Unusable> {
    let ip: IpAddr = text.parse().map_err(|_| Unusable::NotIp)?;
    let broadcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
    if ip.is_unspecified() || ip.is_multicast() || broadcast {
        return Err(Unusable::NotUnicast);
    }
    Ok(ip.to_string())
}

/// `addr=`: the host's unicast IP.
pub fn unicast(value: &str) -> Result<String, Problem> {
    unicast_ip(value).map_err(|why| match why {
        Unusable::NotIp => Problem::NotAnIp { value: shorten(value) },
        Unusable::NotUnicast => Problem::NotUnicast { value: shorten(value) },
    })
}

/// `addrs=10.0.0.1,10.1.0.1`: distinct unicast IPs, one per rank of the
/// host; no more than a run takes ranks.
pub fn addr_list(value: &str) -> Result<Vec<String>, Problem> {
    let mut addrs: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for entry in value.split(',') {
        if addrs.len() == MAX_RANKS {
            return Err(Problem::TooManyAddrs { list: shorten(value) });
        }
        let (list, quoted) = (shorten(value), shorten(entry));
        let addr = unicast_ip(entry).map_err(|why| match why {
            Unusable::NotIp => Problem::AddrsEntry { list, entry: quoted },
            Unusable::NotUnicast => Problem::AddrsNotUnicast { list, entry: quoted },
        })?;
        if !seen.insert(addr.clone()) {
            return Err(Problem::AddrsTwice { list: shorten(value), entry: shorten(entry) });
        }
        addrs.push(addr);
    }
    Ok(addrs)
}
