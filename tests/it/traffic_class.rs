//! Traffic classes on the wire and rdma_cm connection setup, checked by
//! capturing real packets: TCP groups' `dscp` on the namespace bed, RDMA
//! groups' `traffic_class` (RoCE v2: UDP 4791, DSCP = traffic_class >> 2)
//! and `connect = "rdma_cm"` across two Soft-RoCE VMs
//! (`scripts/softroce-vm --vms 2 --env FB_RDMA_PEER_HOST=vm2`).

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::common;
use common::testbed::Bed;
use common::{run_json, Bench};

/// What `tcpdump -n -v` printed: each packet's IP TOS byte, source and
/// destination ("addr.port"), and IP length.
#[derive(Debug)]
struct Packet {
    tos: u8,
    from: String,
    to: String,
    len: u64,
}

fn packets(tcpdump: &str) -> Vec<Packet> {
    let lines: Vec<&str> = tcpdump.lines().collect();
    lines
        .windows(2)
        .filter_map(|w| {
            let tos = w[0].split("(tos 0x").nth(1)?;
            let hex: String = tos.chars().take_while(char::is_ascii_hexdigit).collect();
            let len = w[0].rsplit("length ").next()?.trim_end_matches(')').trim().parse().ok()?;
            let mut ends = w[1].trim().split(' ');
            let from = ends.next()?.to_string();
            (ends.next()? == ">").then_some(())?;
            let to = ends.next()?.trim_end_matches(':').to_string();
            Some(Packet { tos: u8::from_str_radix(&hex, 16).ok()?, from, to, len })
        })
        .collect()
}

/// tcpdump on `iface` (through `prefix`, e.g. the bed's `exec h2`) for
/// `filter`, in a process group of its own, until [`end`] or at most
/// `secs` seconds (longer than the run it watches, should the test fail
/// before it ends the capture). `--foreground`: timeout keeps tcpdump in
/// that group instead of one of its own.
fn capture(prefix: &[&str], secs: u32, iface: &str, filter: &str) -> Child {
    let secs = secs.to_string();
    let mut args: Vec<&str> = prefix.to_vec();
    args.extend(["timeout", "--foreground", &secs, "tcpdump", "-i", iface, "-n", "-v", "-l", "-s", "96", filter]);
    let mut command = Command::new(args[0]);
    command.args(&args[1..]).process_group(0).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn();
    let child = child.expect("tcpdump (scripts/lib/deps.sh: ensure_packages tcpdump)");
    std::thread::sleep(Duration::from_secs(1)); // tcpdump attaches before the run starts
    child
}

/// Ends the capture once the run it watched is over: SIGINT to its group
/// (the bed's nsenter, timeout, tcpdump), on which tcpdump prints what it
/// captured and exits. Waiting for the timeout instead cost each test its
/// whole `secs`.
fn end(child: Child) -> Output {
    // A group already gone (tcpdump failed to start) is no error here: the
    // caller's count of packets says so, with tcpdump's own words.
    let group = format!("-{}", child.id());
    let _ = Command::new("kill").args(["-INT", "--", &group]).stderr(Stdio::null()).status();
    child.wait_with_output().unwrap()
}

/// Ends the capture and returns what it saw.
fn stop(child: Child) -> Vec<Packet> {
    let out = end(child);
    let seen = packets(&common::text(&out.stdout));
    println!("captured {} packets ({})", seen.len(), common::text(&out.stderr).trim());
    seen
}

#[test]
fn the_captured_tos_parses() {
    let dump = "12:00:00.1 IP (tos 0xb8, ttl 64, id 1, offset 0, flags [DF], proto TCP (6), length 1500)\n    \
                10.199.0.1.40000 > 10.199.0.2.5201: Flags [.], seq 1:1449\n\
                12:00:00.2 IP (tos 0x6a,ECT(0), ttl 64, id 0, offset 0, flags [DF], proto UDP (17), length 1104)\n    \
                10.0.3.1.49152 > 10.0.3.2.4791: UDP, length 1076\n";
    let p = packets(dump);
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(
        (p[0].tos >> 2, p[0].from.as_str(), p[0].to.as_str(), p[0].len),
        (46, "10.199.0.1.40000", "10.199.0.2.5201", 1500)
    );
    assert_eq!((p[1].tos >> 2, p[1].tos & 3, p[1].len), (26, 2, 1104));
}

/// A TCP group with `dscp = 46` between two bed hosts: the data the sender
/// streams and the ACKs the receiver returns both carry DSCP 46 (EF); the
/// control connection, not the group's, keeps the default.
#[test]
fn tcp_dscp_marks_both_ends_on_the_bed() {
    let Some(bed) = Bed::up(2, &[]) else { return };
    let bench = Bench::new();
    let scenario = bench.write(
        "dscp.toml",
        "[run]\nduration = \"1s\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\n\n[[group]]\nname = \"ef\"\n\
         pattern = \"pairwise\"\nflows = [[0, 1]]\nmessage_size = \"64K\"\ndscp = 46\n",
    );
    let testbed = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/testbed");
    let cap = capture(&[testbed, "exec", "h2"], 20, "eth0", "tcp");
    let ssh = bed.ssh_args();
    let extra: Vec<&str> = ssh.iter().map(String::as_str).collect();
    let run = run_json(&bench, &scenario, &bed.hostfile, &extra);
    let seen = stop(cap);
    let flow = &run["phases"][0]["flows"][0];
    assert!(flow["bytes"].as_u64().unwrap() > 0, "{flow}");
    let ef: Vec<&Packet> = seen.iter().filter(|p| p.tos >> 2 == 46).collect();
    let data: u64 = ef.iter().filter(|p| p.from.starts_with("10.199.0.1.")).map(|p| p.len).sum();
    assert!(data > 1 << 20, "the streamed data is marked EF: {data} B of {} packets", seen.len());
    assert!(ef.iter().any(|p| p.from.starts_with("10.199.0.2.")), "the receiver's ACKs are marked EF too");
    // The launcher's ssh sessions (port 22) set their own IPQoS; the rest is
    // the group's streams (EF) and the control connection (unmarked).
    let ours: Vec<&Packet> = seen.iter().filter(|p| !p.from.ends_with(".22") && !p.to.ends_with(".22")).collect();
    assert!(ours.iter().any(|p| p.tos == 0), "the control connection is not the group's (unmarked)");
    let other: Vec<&&Packet> = ours.iter().filter(|p| p.tos != 0 && p.tos >> 2 != 46).take(5).collect();
    assert!(other.is_empty(), "no other class: {other:?}");
}

/// Classes out of range, as a user types them in a scenario or to `pair`:
/// exit 2 naming the file, line and field (or the flag) and the valid
/// range, before any worker starts or any folder is made.
#[test]
fn a_class_out_of_range_is_refused_naming_the_field_and_the_range() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", common::LOCAL_HOSTS);
    let group = "[run]\nduration = \"1s\"\n\n[[group]]\nname = \"g\"\npattern = \"pairwise\"\nflows = [[0, 1]]\n";
    let refused = |args: &[&str], said: &str| {
        let out = bench.run(args);
        let err = common::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?} should say `{said}`:\n{err}");
    };
    let tcp = bench.write("tcp.toml", &format!("{group}dscp = 64\n"));
    refused(
        &["run", tcp.to_str().unwrap(), "-H", hosts.to_str().unwrap()],
        "tcp.toml:8: group \"g\": field `dscp`: 64 is outside 0..=63 (the 6-bit DSCP; e.g. 46 for EF, 26 for AF31)",
    );
    let rdma =
        |name: &str, line: &str| bench.write(name, &format!("{group}transport = \"rdma\"\n\n[group.rdma]\n{line}\n"));
    let tc = rdma("tc.toml", "traffic_class = 256");
    refused(
        &["run", tc.to_str().unwrap(), "-H", hosts.to_str().unwrap()],
        "field `rdma`: invalid RDMA parameter traffic_class: 256 is outside 0..=255 (the GRH traffic class",
    );
    let sl = rdma("sl.toml", "service_level = 16");
    refused(
        &["plan", sl.to_str().unwrap(), "-H", hosts.to_str().unwrap()],
        "invalid RDMA parameter service_level: 16 is outside 0..=15 (the InfiniBand service level, 4 bits)",
    );
    refused(&["pair", "127.0.0.1", "127.0.0.2", "write", "--tclass", "256"], "--tclass: 256 is outside 0..=255");
    refused(&["pair", "127.0.0.1", "127.0.0.2", "write", "--sl", "16"], "-S/--sl: 16 is outside 0..=15");
    assert!(!bench.results().exists(), "nothing was started");
}

/// The peer VM and this one, or None (skipped) outside the two-VM run.
fn two_vms(test: &str) -> Option<(String, String)> {
    let peer = std::env::var("FB_RDMA_PEER_HOST").ok().filter(|h| !h.is_empty());
    let here = std::env::var("SOFTROCE_HOSTS").ok().and_then(|h| h.split_whitespace().next().map(str::to_string));
    match (peer, here) {
        (Some(peer), Some(here)) if crate::rdma_run::has_rdma() => Some((peer, here)),
        _ => {
            eprintln!("SKIP {test}: needs the two-VM run (FB_RDMA_PEER_HOST, SOFTROCE_HOSTS)");
            None
        }
    }
}

/// A write flow from this VM (rank 1) to the peer (rank 0) with `rdma` as its table.
fn vm_run(bench: &Bench, peer: &str, here: &str, rdma: &str) -> serde_json::Value {
    vm_run_on(bench, &format!("{peer}\n{here}\n"), "[[1, 0]]", rdma)
}

/// Write flows `flows` on the hostfile `hosts` (rank 0 the peer, rank 1 this VM).
fn vm_run_on(bench: &Bench, hosts: &str, flows: &str, rdma: &str) -> serde_json::Value {
    let hosts = bench.write("hosts", hosts);
    let scenario = bench.write(
        "cm.toml",
        &format!(
            "[run]\nduration = \"1s\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\n\n[[group]]\nname = \"w\"\n\
             pattern = \"pairwise\"\ntransport = \"rdma\"\nflows = {flows}\nmessage_size = \"4K\"\n\n\
             [group.rdma]\n{rdma}\n"
        ),
    );
    run_json(bench, &scenario, &hosts, &["--connect-timeout", "60s"])
}

/// RoCE v2 with `traffic_class = 104` (DSCP 26, AF31): every RoCE packet
/// on eth0, the writes out and the ACKs back, carries TOS 104.
#[test]
fn rdma_traffic_class_is_the_dscp_on_the_wire() {
    let Some((peer, here)) = two_vms("rdma_traffic_class_is_the_dscp_on_the_wire") else { return };
    let bench = Bench::new();
    let cap = capture(&[], 60, "eth0", "udp port 4791");
    let run = vm_run(&bench, &peer, &here, "traffic_class = 104\nservice_level = 3");
    let seen = stop(cap);
    let flow = &run["phases"][0]["flows"][0];
    assert!(flow["bytes"].as_u64().unwrap() > 0, "{flow}");
    assert!(seen.len() > 100, "RoCE v2 packets on eth0: {}", seen.len());
    let wrong: Vec<&Packet> = seen.iter().filter(|p| p.tos != 104).take(5).collect();
    assert!(wrong.is_empty(), "every RoCE packet carries TOS 104 (DSCP 26): {wrong:?}");
    let out = seen.iter().filter(|p| p.to.ends_with(".4791") && !p.from.starts_with(&here)).count();
    assert!(out > 0, "both directions captured");
}

/// `connect = "rdma_cm"`: two QPs a flow, each way between the VMs,
/// connected through librdmacm to the peer's address: each rank dials one
/// flow and accepts the other, both handshakes driven on one thread. The
/// writes arrive (the flows' totals are what their QPs completed) and the
/// RoCE packets go between the two VMs' eth0 addresses.
#[test]
fn rdma_cm_connects_the_qps_across_two_vms() {
    let Some((peer, here)) = two_vms("rdma_cm_connects_the_qps_across_two_vms") else { return };
    let bench = Bench::new();
    let cap = capture(&[], 60, "eth0", "udp port 4791");
    let hosts = format!("{peer}\n{here}\n");
    let run = vm_run_on(&bench, &hosts, "[[1, 0], [0, 1]]", "connect = \"rdma_cm\"\nqps = 2");
    let seen = stop(cap);
    let phase = &run["phases"][0];
    for flow in phase["flows"].as_array().unwrap() {
        assert!(flow["bytes"].as_u64().unwrap() > 4096 * 100, "{flow}");
    }
    assert_eq!(phase["flows"].as_array().unwrap().len(), 2, "{phase}");
    assert_eq!(phase["complete"], true, "{phase}");
    assert!(seen.len() > 100, "the writes went over RoCE v2 on eth0: {}", seen.len());
    let group = &run["plan"]["phases"][0]["groups"][0];
    assert_eq!(group["rdma"]["connect"], "rdma_cm", "{group}");
}

/// rdma_cm on loopback ranks (no RDMA netdev address) fails before any
/// traffic, naming the address and what to use instead.
#[test]
fn rdma_cm_on_loopback_ranks_is_refused_by_name() {
    if !crate::rdma_run::has_rdma() {
        return;
    }
    let bench = Bench::new();
    let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n");
    let scenario = bench.write(
        "cm.toml",
        "[run]\nduration = \"1s\"\nwarmup = \"200ms\"\n\n[[group]]\nname = \"w\"\npattern = \"pairwise\"\n\
         transport = \"rdma\"\nflows = [[0, 1]]\n\n[group.rdma]\nconnect = \"rdma_cm\"\n",
    );
    let out = bench.run(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--no-save", "--quiet"]);
    let err = common::text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("rdma_cm address 127.0.0.") && err.contains("is not the address of an RDMA netdev"), "{err}");
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "processes left");
}

/// A unique-local IPv6 address on eth0 of a VM for the test's length
/// (the VMs' eth0 has IPv4 only; rxe adds the RoCE v2 GID of the address).
struct Ipv6On {
    host: Option<String>,
    addr: String,
}

impl Ipv6On {
    fn add(host: Option<&str>, addr: &str) -> Ipv6On {
        let me = Ipv6On { host: host.map(str::to_string), addr: addr.to_string() };
        let out = me.ip(&["-6", "addr", "add", &format!("{addr}/64"), "dev", "eth0", "nodad"]);
        assert!(out.status.success(), "ip -6 addr add {addr}: {}", common::text(&out.stderr));
        me
    }

    fn ip(&self, args: &[&str]) -> std::process::Output {
        let mut cmd = match &self.host {
            Some(host) => {
                let mut c = Command::new("ssh");
                c.arg(host).arg("ip");
                c
            }
            None => Command::new("ip"),
        };
        cmd.args(args).output().expect("ip")
    }
}

impl Drop for Ipv6On {
    fn drop(&mut self) {
        let addr = format!("{}/64", self.addr);
        self.ip(&["-6", "addr", "del", &addr, "dev", "eth0"]);
    }
}

/// `connect = "rdma_cm"` over IPv6: the ranks' data addresses are IPv6
/// (hostfile `addr=`), rdma_cm resolves and connects over them, and the
/// RoCE v2 packets on eth0 are IPv6 ones between the two addresses.
#[test]
fn rdma_cm_connects_over_ipv6_across_two_vms() {
    let Some((peer, here)) = two_vms("rdma_cm_connects_over_ipv6_across_two_vms") else { return };
    let (mine, theirs) = ("fd00:fb::1", "fd00:fb::2");
    let _here6 = Ipv6On::add(None, mine);
    let _peer6 = Ipv6On::add(Some(&peer), theirs);
    std::thread::sleep(Duration::from_secs(1)); // the GIDs of the new addresses
    let bench = Bench::new();
    let cap = capture(&[], 60, "eth0", "ip6 and udp port 4791");
    let hosts = format!("{peer} addr={theirs}\n{here} addr={mine}\n");
    let run = vm_run_on(&bench, &hosts, "[[1, 0]]", "connect = \"rdma_cm\"");
    let out = end(cap);
    let dump = common::text(&out.stdout);
    let flow = &run["phases"][0]["flows"][0];
    assert!(flow["bytes"].as_u64().unwrap() > 4096 * 100, "{flow}");
    let roce6 =
        dump.lines().filter(|l| l.contains(&format!("{mine}.")) && l.contains(&format!("{theirs}.4791"))).count();
    assert!(
        roce6 > 100,
        "RoCE v2 over IPv6 from {mine} to {theirs}: {roce6} packets\n{}",
        &dump[..dump.len().min(2000)]
    );
}

/// `fabricbench pair HERE PEER write -R` (ib_write_bw -R): perftest's table
/// with a row that moved data, the QPs connected through rdma_cm.
#[test]
fn pair_dash_r_connects_through_rdma_cm_across_two_vms() {
    let Some((peer, here)) = two_vms("pair_dash_r_connects_through_rdma_cm_across_two_vms") else { return };
    let bench = Bench::new();
    // 2 s: a 1-vCPU VM under TCG started a rank 110 ms late, which degraded a 1 s window.
    let args = ["pair", &here, &peer, "write", "-R", "-q", "2", "-s", "4K", "-D", "2", "--report-gbits"];
    let out = bench.run(&[&args[..], &["--connect-timeout", "60s", "--no-save", "--no-progress"]].concat());
    let stdout = common::text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", common::text(&out.stderr));
    assert!(stdout.contains(" Number of qps   : 2"), "{stdout}");
    let rows = common::perftest_rows(&stdout, " #bytes     #iterations    BW peak[Gb/sec]");
    assert!(rows.len() == 1 && rows[0][0] == 4096.0 && rows[0][1] > 0.0 && rows[0][3] > 0.0, "{stdout}");
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "processes left");
}
