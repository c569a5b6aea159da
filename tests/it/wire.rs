//! Everything that crosses the control wire survives postcard, field for
//! field: a binary format has no field names, so a skipped or reordered
//! field would shift everything after it.

use fabricbench::control::wire::{FlowRole, ToCoordinator, ToWorker, Window};
use fabricbench::histogram::Histogram;
use fabricbench::hostfacts::{HostFacts, PcieLink};
use fabricbench::load::placement::Placed;
use fabricbench::load::stress::StressReport;
use fabricbench::metrics::cpu::{CpuUsage, ThreadDemand, ThreadsCpu};
use fabricbench::metrics::links::LinkEvent;
use fabricbench::metrics::netdev::NetdevDelta;
use fabricbench::metrics::qdisc::Limiter;
use fabricbench::metrics::{EngineSeat, FlowSamples, GroupPlacement, RankReport};
use fabricbench::plan::{Flow, GroupPlan};
use fabricbench::scenario::memory::GpuChoice;
use fabricbench::scenario::placement::{Numa, Placement};
use fabricbench::scenario::rate::{Rate, Schedule};
use fabricbench::scenario::rdma::{ConnectMethod, RdmaKnobs, RdmaSetup};
use fabricbench::scenario::stress::{StressSpec, Threads};
use fabricbench::scenario::{Mode, Op, Pattern, Transport};
use fabricbench::transport::rdma::{CounterDelta, InventoryDevice, InventoryPort, RdmaEndpoint, RdmaInventory};
use fabricbench::transport::tcp::info::TcpView;
use fabricbench::transport::tcp::FlowProof;
use fabricbench::transport::validation::{BadByte, DvTally};
use fabricbench::transport::Side;
use fabricbench::units::ByteSize;

fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(value: &T) {
    let bytes = postcard::to_stdvec(value).unwrap();
    assert_eq!(&postcard::from_bytes::<T>(&bytes).unwrap(), value);
}

#[test]
fn setup_with_stress_and_placement() {
    let group = GroupPlan {
        index: 0,
        name: "g".into(),
        pattern: Pattern::FanIn,
        transport: Transport::Tcp,
        op: Op::Send,
        mode: Mode::Latency,
        message_size: ByteSize(4096),
        streams: 2,
        placement: Placement { cores: Some(vec![1, 3]), numa: Numa::Far },
        rdma: Some(RdmaSetup {
            knobs: RdmaKnobs {
                qps: 4,
                inline_size: Some(64),
                device: Some("rxe0".into()),
                connect: ConnectMethod::RdmaCm,
                traffic_class: 104,
                service_level: 3,
                ..Default::default()
            },
            ..Default::default()
        }),
        rate: Some(Rate::Messages(10_000.0)),
        schedule: Some(Schedule::Poisson),
        dscp: Some(46),
        validate: true,
    };
    let role = FlowRole {
        flow: Flow { id: 7, group: 0, src: 1, dst: 0 },
        side: Side::Receiver,
        group: group.into(),
        rails: vec!["mlx5_1".into()],
        gpu: Some(GpuChoice::BusId("0000:1b:00.0".into())),
        proof: FlowProof([7; 32]),
    };
    for stress in [
        None,
        Some(StressSpec {
            threads: Threads::All,
            placement: Placement::default(),
            load: 60,
            memory: Some(ByteSize(1 << 20)),
        }),
    ] {
        round_trip(&ToWorker::Setup { phase: 3, flows: vec![role.clone()], stress });
    }
    let window = Window {
        warmup: std::time::Duration::from_millis(5),
        duration: std::time::Duration::from_secs(2),
        interval: std::time::Duration::from_millis(500),
    };
    round_trip(&ToWorker::Start { phase: 0, t0_ns: -5, window });
}

#[test]
fn report_with_every_optional_part() {
    let mut rtts = Histogram::default();
    rtts.record(12_345);
    for (note, error) in [(None, None), (Some("n".to_string()), Some("e".to_string()))] {
        let report = RankReport {
            phase: 1,
            rank: 2,
            boundaries: 2,
            flows: vec![FlowSamples {
                flow: 0,
                side: Side::Sender,
                start_ns: Some(-3),
                error: error.clone(),
                rtts: Some(rtts.clone()),
                refused: 3,
                lanes: Vec::new(),
                engines: vec![EngineSeat { engine: 1, core: Some(3), lanes: 2 }],
                gpu_memory: Vec::new(),
                validation: Some(DvTally {
                    checked: 9,
                    errors: 1,
                    first_bad: Some(BadByte { lane: 1, message: 4, offset: 77 }),
                }),
                tcp: Some(TcpView {
                    streams: 2,
                    data_segs_out: Some(1000),
                    retrans_segs: 12,
                    retrans_pct: Some(1.2),
                    srtt_us: 812.5,
                    min_rtt_us: None,
                    cwnd_segs: 40,
                    delivery_gbps: Some(0.19),
                    busy_pct: Some(99.0),
                    rwnd_limited_pct: Some(0.0),
                    sndbuf_limited_pct: None,
                    ce_marked: Some(3),
                }),
            }],
            clock_offset_ns: 9,
            rtt_ns: 4,
            cpu: CpuUsage {
                worker_pct: 1.0,
                worker_user_pct: 0.5,
                worker_system_pct: 0.5,
                data: Some(ThreadsCpu {
                    pct: 0.75,
                    user_pct: 0.25,
                    system_pct: 0.5,
                    threads: 2,
                    busiest_thread_pct: 0.5,
                    wanting_thread: Some(ThreadDemand { demand_pct: 0.7, waited_pct: 0.2 }),
                }),
                control: Some(ThreadsCpu {
                    pct: 0.25,
                    user_pct: 0.25,
                    system_pct: 0.0,
                    threads: 5,
                    busiest_thread_pct: 0.1,
                    wanting_thread: None,
                }),
                burners: Some(ThreadsCpu {
                    pct: 99.0,
                    user_pct: 99.0,
                    system_pct: 0.0,
                    threads: 2,
                    busiest_thread_pct: 50.0,
                    wanting_thread: None,
                }),
                process_pct: Some(100.0),
                host_pct: 2.0,
                host_cores: 2,
            },
            netdevs: vec![NetdevDelta {
                iface: "lo".into(),
                rx_bytes: 1,
                tx_bytes: 2,
                speed_mbps: Some(25_000),
                limiter: Some(Limiter { qdisc: "tbf".into(), rate_bps: 200_000_000 }),
                pcie: Some(PcieLink { speed_gts: 16.0, max_speed_gts: 32.0, width: 8, max_width: 16 }),
            }],
            rdma_counters: vec![CounterDelta {
                device: "mlx5_0".into(),
                port: 1,
                counters: [("counters/port_xmit_data".to_string(), 7)].into(),
                signals: Some(vec!["out_of_sequence".into()]),
            }],
            stress: Some(StressReport {
                threads: 2,
                cores: vec![0],
                asked_load_pct: 50.0,
                measured_load_pct: 49.0,
                note: note.clone(),
            }),
            placements: vec![GroupPlacement {
                group: "g".into(),
                cores: vec![3],
                note: note.clone(),
                core_nodes: vec![1],
                device_node: Some(0),
            }],
            error,
            link_events: vec![LinkEvent {
                device: "eth0".into(),
                from_ns: 100,
                until_ns: note.as_ref().map(|_| 2_100),
                states: vec!["down".into()],
                counters: [("carrier_changes".to_string(), 2)].into(),
            }],
            link_events_dropped: 1,
        };
        round_trip(&ToCoordinator::Report(Box::new(report)));
    }
    round_trip(&Placed { cores: vec![1], note: Some("x".into()) });
    for error in [None, Some("no RDMA devices".to_string())] {
        let port = InventoryPort {
            port: 1,
            state: "ACTIVE".into(),
            link_layer: "Ethernet".into(),
            rate_gbps: None,
            mtu: 4096,
        };
        let device = InventoryDevice { name: "rxe0".into(), numa_node: None, ports: vec![port], error: error.clone() };
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/two-nics");
        let facts = Box::new(HostFacts::under(&fixture));
        assert_eq!(facts.rdma_devices.len(), 2);
        round_trip(&ToCoordinator::Probe(RdmaInventory { devices: vec![device], error }, facts, None));
    }
    let endpoint = RdmaEndpoint {
        lid: 0,
        gid: [7; 16],
        gid_index: 1,
        qpns: vec![17, 18],
        psns: vec![1, 2],
        mtu: 5,
        rkey: 9,
        qkey: 0x0100_0001,
        addr: 0xdead_0000,
        len: 1 << 20,
        cm_addr: Some("[fd00:fb::2]:20001".parse().unwrap()),
    };
    let peers = vec![fabricbench::control::wire::FlowEndpoint {
        flow: 1,
        side: Side::Sender,
        endpoint: fabricbench::control::wire::Endpoint::Rdma(vec![endpoint]),
    }];
    round_trip(&ToWorker::Peers { phase: 0, peers });
}

#[test]
fn a_first_frame_is_read_as_a_hello_and_nothing_else() {
    use fabricbench::control::wire::{decode_hello, Hello, HelloError, HELLO_MAX, MAGIC, PROTOCOL_VERSION};
    let hello = Hello {
        magic: MAGIC,
        token: "t".repeat(64),
        version: PROTOCOL_VERSION,
        tool_version: "0.1.0".into(),
        job: 7,
        rank: 3,
        host: "node0003".into(),
        pid: 42,
    };
    let frame = postcard::to_stdvec(&ToCoordinator::Hello(hello.clone())).unwrap();
    assert!(frame.len() < HELLO_MAX / 8, "a Hello is {} bytes", frame.len());
    assert_eq!(decode_hello(&frame), Ok(hello));
    let heartbeat = postcard::to_stdvec(&ToCoordinator::Heartbeat).unwrap();
    assert_eq!(decode_hello(&heartbeat), Err(HelloError::NotHello(6)));
    assert_eq!(decode_hello(&heartbeat).unwrap_err().to_string(), "the first frame must be a Hello, not message 6");
    assert_eq!(decode_hello(&[]).unwrap_err().to_string(), "an empty first frame");
    assert!(decode_hello(&frame[..frame.len() / 2]).unwrap_err().to_string().starts_with("not a Hello"));
}
