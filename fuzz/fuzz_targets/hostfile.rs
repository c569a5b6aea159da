//! A hostfile (`-H`): every form `hostfile::parse` reads. What it accepts
//! keeps the documented limits, and written back one host per line in the
//! OpenMPI form (`slots=`, the host's devices gathered from its ranks) it
//! reads back as the same rank list.
#![no_main]

use std::fmt::Write;
use std::path::Path;

use fabricbench::hostfile::{self, MAX_RANKS};
use fabricbench_fuzz::check_host;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(hosts) = hostfile::parse(text, Path::new("fuzz")) else { return };
    assert!(!hosts.is_empty() && hosts.len() <= MAX_RANKS, "{} ranks", hosts.len());
    hosts.iter().for_each(check_host);
    let mut written = String::new();
    for (at, h) in hosts.iter().enumerate().filter(|(_, h)| h.slot == 0) {
        let ranks = &hosts[at..at + h.slots as usize];
        assert!(ranks.iter().enumerate().all(|(k, r)| r.name == h.name && r.slot as usize == k), "{ranks:?}");
        write!(written, "{} slots={}", h.name, h.slots).unwrap();
        if let Some(addr) = &h.addr {
            write!(written, " addr={addr}").unwrap();
        }
        let devices: Vec<&str> = ranks.iter().flat_map(|r| r.devices.iter().map(String::as_str)).collect();
        if !devices.is_empty() {
            write!(written, " devices={}", devices.join(",")).unwrap();
        }
        let addrs: Vec<&str> = ranks.iter().filter_map(|r| r.nic_addr()).collect();
        if !addrs.is_empty() {
            write!(written, " addrs={}", addrs.join(",")).unwrap();
        }
        written.push('\n');
    }
    let again = hostfile::parse(&written, Path::new("written")).expect("written hosts read back");
    assert_eq!(again, hosts);
});
