//! The GPU preflight against the CUDA test double (tests/doubles/
//! libcuda-double.c, built here with cc) and recorded sysfs trees
//! (tests/fixtures/hosts): which GPU `auto` opens, and whether the
//! registration asked for is possible.

use std::path::{Path, PathBuf};

use super::*;
use crate::plan::{GpuRegistration, Memory};
use crate::transport::memory::CudaMemoryType;

/// CUDA test doubles, built into a folder that goes with them.
struct Doubles(tempfile::TempDir);

impl Doubles {
    fn new() -> Doubles {
        Doubles(tempfile::tempdir().expect("a temporary folder"))
    }

    /// The double built with `defines`.
    fn built(&self, name: &str, defines: &[&str]) -> PathBuf {
        let out = self.0.path().join(format!("libcuda-{name}.so"));
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/doubles/libcuda-double.c");
        let mut cc = std::process::Command::new("cc");
        cc.args(["-shared", "-fPIC", "-o"]).arg(&out).args(defines).arg(&source);
        assert!(cc.status().expect("cc builds the CUDA test double").success(), "cc failed on {}", source.display());
        out
    }
}

/// A recorded host tree's GPU facts.
fn recorded(name: &str) -> HostFacts {
    HostFacts::under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts").join(name))
}

fn offer(kernel: &str, peer_memory: Option<&str>) -> HostOffer {
    HostOffer { kernel: Some(kernel.into()), sys: "/recorded/sys".into(), peer_memory: peer_memory.map(String::from) }
}

fn ask(gpu: GpuChoice, nic: Option<&str>, registration: GpuRegistration) -> GpuAsk {
    GpuAsk {
        memory: Memory::Cuda,
        gpu,
        hostfile: false,
        nic: nic.map(String::from),
        registration,
        phase: 0,
        group: "gdr".into(),
    }
}

#[test]
fn a_host_without_the_driver_is_refused_naming_the_gpu_and_group() {
    let ask = GpuAsk { phase: 2, ..ask(GpuChoice::Index(3), None, GpuRegistration::Auto) };
    let host = offer("6.1.0", Some("nvidia_peermem"));
    let missing = Path::new("/nonexistent/libcuda.so.1");
    assert!(preflight_at(missing, &[], None, &host).is_ok(), "nothing asked, nothing opened");
    let e = preflight_at(missing, &[ask], None, &host).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "GPU preflight: group \"gdr\" (phase 2) puts this rank's buffers in cuda memory on gpu = 3, which \
             cannot be used here: no NVIDIA driver: /nonexistent/libcuda.so.1 not found"
        ),
        "{e}"
    );
}

/// `auto` opens the GPU nearest each rail's NIC, as setup will: on the
/// recorded DGX-like tree mlx5_3's nearest is GPU 4, which a driver with
/// two GPUs lacks (so the preflight did not open GPU 0).
#[test]
fn auto_checks_the_gpu_nearest_each_nic_not_gpu_0() {
    let facts = recorded("gpu-dgx");
    let gpus = facts.gpus.as_deref();
    let host = offer("6.1.0", Some("nvidia_peermem"));
    let doubles = Doubles::new();
    let (two, eight) = (doubles.built("two", &[]), doubles.built("eight", &["-DGPUS=8"]));
    let far = ask(GpuChoice::Auto, Some("mlx5_3"), GpuRegistration::Auto);
    let e = preflight_at(&two, std::slice::from_ref(&far), gpus, &host).unwrap_err().to_string();
    assert!(
        e.contains(
            "on gpu = auto: nearest mlx5_3 (PIX, one PCIe switch): GPU 4 at 0000:83:00.0, which cannot be \
             used here: GPU 4 not on this host (it has 2;"
        ),
        "{e}"
    );
    assert!(preflight_at(&eight, &[far], gpus, &host).is_ok());
    assert_eq!(resolve(&GpuChoice::Auto, Some("mlx5_2"), gpus).value, GpuChoice::Index(2));
    assert_eq!(resolve(&GpuChoice::Auto, None, gpus).value, GpuChoice::Index(0), "the first NIC's");
    let as_it_is = |value| Resolved { value, why: None };
    assert_eq!(resolve(&GpuChoice::Auto, None, None), as_it_is(GpuChoice::Auto), "no affinity: as it is");
    assert_eq!(resolve(&GpuChoice::Index(7), Some("mlx5_2"), gpus), as_it_is(GpuChoice::Index(7)));
}

/// The registration each host can do, in setup's order (dma-buf first
/// under `auto`), and the fix when it can do none.
#[test]
fn registration_is_decided_before_any_end_and_refusals_name_the_fix() {
    let doubles = Doubles::new();
    let (plain, exports) = (doubles.built("two", &[]), doubles.built("dma-buf", &["-DDMA_BUF"]));
    let open = |library: &Path, placement| CudaMemory::open_at(library, 0, placement).unwrap();
    let (device, pinned) = (CudaMemoryType::Device, CudaMemoryType::HostPinned);
    let choose = |host: &HostOffer, asked, library: &Path, placement| {
        host.registration(asked, &open(library, placement), placement)
    };
    let (new_kernel, old_kernel) = (offer("6.1.0-18-amd64", None), offer("5.4.0-150-generic", None));
    let peer = offer("5.4.0-150-generic", Some("nvidia_peermem"));
    use GpuRegistration::*;
    assert_eq!(choose(&new_kernel, Auto, &exports, device), Ok(Dmabuf), "dma-buf first, as setup tries");
    assert_eq!(choose(&peer, Auto, &exports, device), Ok(Peermem), "old kernel: peer memory");
    assert_eq!(choose(&peer, Peermem, &plain, device), Ok(Peermem));
    assert_eq!(choose(&new_kernel, Peermem, &plain, pinned), Ok(Peermem), "pinned host memory needs no module");

    let e = choose(&new_kernel, Auto, &plain, device).unwrap_err().to_string();
    assert_eq!(
        e,
        "its memory cannot be registered with the NIC (gpu_registration = \"auto\", CUDA GPU 0 (CUDA test double, \
         0000:1B:00.0, Device memory)): no peer memory: neither nvidia_peermem nor nv_peer_mem is loaded \
         (/recorded/sys/module has neither); no dma-buf: CUDA GPU 0 (CUDA test double, 0000:1B:00.0, Device memory) \
         memory cannot be exported as dma-buf: cuMemGetHandleForAddressRange: the GPU or driver does not support \
         dma-buf (the open kernel modules do) (CUresult 801); fix: load nvidia_peermem (`modprobe nvidia_peermem`; \
         it comes with the NVIDIA driver), or for dma-buf, install an NVIDIA driver that exports it (R515 or later, \
         open kernel modules)"
    );
    let e = choose(&peer, Dmabuf, &exports, device).unwrap_err().to_string();
    assert!(
        e.ends_with(
            "no dma-buf: kernel 5.4.0-150-generic is older than 5.12 (ibv_reg_dmabuf_mr); fix: for dma-buf, boot a \
             kernel 5.12 or later"
        ),
        "{e}"
    );
    let e = choose(&old_kernel, Peermem, &exports, device).unwrap_err().to_string();
    assert!(
        e.contains("(gpu_registration = \"peermem\", CUDA GPU 0 (") && e.ends_with("it comes with the NVIDIA driver)")
    );
}

/// A refusal through the preflight names the group, the GPU and the fix.
#[test]
fn the_preflight_refuses_a_registration_the_host_cannot_do() {
    let doubles = Doubles::new();
    let plain = doubles.built("two", &[]);
    let asks = [ask(GpuChoice::Index(1), None, GpuRegistration::Peermem)];
    let e = preflight_at(&plain, &asks, None, &offer("6.1.0", None)).unwrap_err();
    assert!(matches!(*e.cause, Unusable::Register(_)), "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with("GPU preflight: group \"gdr\" (phase 0) puts this rank's buffers in cuda memory on gpu = 1")
    );
    assert!(
        text.contains("CUDA GPU 1 (")
            && text.ends_with("fix: load nvidia_peermem (`modprobe nvidia_peermem`; it comes with the NVIDIA driver)"),
        "{text}"
    );
    assert!(preflight_at(&plain, &asks, None, &offer("6.1.0", Some("nv_peer_mem"))).is_ok());
}

/// The hostfile's `gpus=` entry is the GPU of this rank's ends in GPU
/// memory, said as such (in the run's `chosen`, and in a refusal); its
/// ends in host memory are left alone.
#[test]
fn a_hosts_gpus_entry_is_what_its_gpu_ends_open_and_is_named_as_the_hostfiles() {
    use crate::plan::MemorySides;
    let rail = RdmaParams {
        memory: MemorySides { sender: Memory::Cuda, receiver: Memory::Host },
        gpu: GpuChoice::Auto,
        ..Default::default()
    };
    let own = GpuChoice::BusId("0000:1c:00.0".into());
    let Resolved { value: sender, why } = resolve_end(&rail, Side::Sender, Some(&own));
    assert_eq!((sender.gpu, why.as_deref()), (own.clone(), Some("0000:1c:00.0 (this host's gpus= in the hostfile)")));
    let Resolved { value: receiver, why } = resolve_end(&rail, Side::Receiver, Some(&own));
    assert_eq!((receiver.gpu, why), (GpuChoice::Auto, None), "host memory: no GPU, whatever gpus= says");

    let doubles = Doubles::new();
    let two = doubles.built("two", &[]);
    let asks = [GpuAsk { hostfile: true, ..ask(GpuChoice::Index(5), None, GpuRegistration::Auto) }];
    let e = preflight_at(&two, &asks, None, &offer("6.1.0", Some("nvidia_peermem"))).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "GPU preflight: group \"gdr\" (phase 0) puts this rank's buffers in cuda memory on gpu = 5 (this host's \
             gpus= in the hostfile), which cannot be used here: GPU 5 not on this host"
        ),
        "{e}"
    );
}
