//! A hostfile (`-H`): every form `hostfile::parse` reads. What it accepts
//! keeps the documented limits, and written back one host per line in the
//! OpenMPI form it reads back as the same hosts.
#![no_main]

use std::fmt::Write;
use std::path::Path;

use fabricbench::hostfile::{self, MAX_HOSTS};
use fabricbench_fuzz::check_host;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(hosts) = hostfile::parse(text, Path::new("fuzz")) else { return };
    assert!(!hosts.is_empty() && hosts.len() <= MAX_HOSTS, "{} hosts", hosts.len());
    hosts.iter().for_each(check_host);
    let mut written = String::new();
    for h in &hosts {
        write!(written, "{} slots={}", h.name, h.slots).unwrap();
        if let Some(addr) = &h.addr {
            write!(written, " addr={addr}").unwrap();
        }
        if !h.devices.is_empty() {
            write!(written, " devices={}", h.devices.join(",")).unwrap();
        }
        written.push('\n');
    }
    let again = hostfile::parse(&written, Path::new("written")).expect("written hosts read back");
    assert_eq!(again, hosts);
});
