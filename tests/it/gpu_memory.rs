//! GPU memory through the CUDA provider, loaded against a test double of
//! the driver API (tests/doubles/libcuda-double.c, built here with cc):
//! every entry point resolved by its real name, bytes moved, every failure
//! named. The double is host memory; it cannot prove anything about a real
//! GPU (see its header).

use std::path::{Path, PathBuf};
use std::process::Command;

use fabricbench::transport::memory::{CudaMemory, CudaMemoryType, HostMemory, MemoryError, MemoryProvider};

/// The double built with `defines` (once per set, shared by the tests).
pub(crate) fn double(name: &str, defines: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cuda-double");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("libcuda-{name}.so"));
    // Built to a file of this process's own, then renamed: tests run at once.
    let building = dir.join(format!(".libcuda-{name}.{}.so", std::process::id()));
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/doubles/libcuda-double.c");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&building)
        .args(defines)
        .arg(&source)
        .status()
        .expect("cc (gcc) builds the CUDA double");
    assert!(status.success(), "cc failed on {}", source.display());
    std::fs::rename(&building, &out).unwrap();
    out
}

fn gpu(library: &Path, index: usize, placement: CudaMemoryType) -> CudaMemory {
    CudaMemory::open_at(library, index, placement).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn cuda_memory_allocates_copies_fills_checks_and_frees_through_the_driver_api() {
    let library = double("two", &[]);
    for placement in [CudaMemoryType::Device, CudaMemoryType::Managed, CudaMemoryType::HostPinned] {
        let cuda = gpu(&library, 1, placement);
        assert_eq!((cuda.bus_id(), cuda.name()), ("0000:1C:00.0", "CUDA test double"));
        // Over 1 MiB: the check reads back in pieces.
        let len = (1 << 20) + 3;
        let mut b = cuda.allocate(len).unwrap();
        assert_eq!(b.len(), len);
        cuda.fill(&mut b, 0x5a).unwrap();
        cuda.check(&b, 0x5a).unwrap();
        cuda.copy_from_host(&mut b, len - 2, b"ok").unwrap();
        let mut back = [0u8; 3];
        cuda.copy_to_host(&b, len - 3, &mut back).unwrap();
        assert_eq!(&back, b"\x5aok", "{placement:?}");
        let e = cuda.check(&b, 0x5a).unwrap_err();
        assert_eq!(e.to_string(), format!("buffer check failed at byte {}: 0x6f, expected 0x5a", len - 2));
        let e = cuda.copy_to_host(&b, len - 2, &mut back).unwrap_err();
        assert_eq!(e.to_string(), format!("3 bytes at offset {} do not fit a buffer of {len} bytes", len - 2));
        cuda.free(b).unwrap();
    }
}

#[test]
fn driver_failures_name_the_call_the_gpu_and_the_fix() {
    let library = double("two", &[]);
    let e = CudaMemory::open_at(&library, 3, CudaMemoryType::Device).unwrap_err();
    assert_eq!(e.to_string(), "GPU 3 not on this host (it has 2; GPUs are numbered from 0 as CUDA counts them)");
    let none = double("none", &["-DGPUS=0"]);
    let e = CudaMemory::open_at(&none, 0, CudaMemoryType::Device).unwrap_err();
    assert!(matches!(e, MemoryError::NoSuchGpu { gpu: 0, count: 0 }), "cuInit's CUDA_ERROR_NO_DEVICE: {e}");

    let cuda = gpu(&library, 0, CudaMemoryType::Device);
    let e = cuda.allocate(0).unwrap_err();
    assert_eq!(e.to_string(), "cuMemAlloc on GPU 0 failed: invalid argument (CUresult 1)");
    let b = cuda.allocate(4096).unwrap();
    let e = cuda.dma_buf(&b).unwrap_err();
    assert!(
        e.to_string().contains(
            "cannot be exported as dma-buf: cuMemGetHandleForAddressRange: the GPU or driver does not support dma-buf"
        ),
        "{e}"
    );
    // A buffer goes back to the provider that made it only.
    let other = gpu(&library, 1, CudaMemoryType::Device);
    let e = other.free(b).unwrap_err();
    assert!(matches!(e, MemoryError::Foreign { .. }), "{e}");
    let mut host = HostMemory.allocate(16).unwrap();
    let e = cuda.fill(&mut host, 1).unwrap_err();
    assert!(e.to_string().starts_with("a buffer of host memory was given to the CUDA GPU 0 ("), "{e}");
}

#[test]
fn a_driver_without_an_entry_point_is_named() {
    let library = double("no-memset", &["-DOMIT_MEMSET"]);
    let e = CudaMemory::open_at(&library, 0, CudaMemoryType::Device).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, MemoryError::NoSymbol { symbol: "cuMemsetD8_v2", .. }), "{text}");
    assert!(text.contains("has no cuMemsetD8_v2 (") && text.contains("the NVIDIA driver is too old"), "{text}");
}

#[test]
fn without_libcuda_the_error_says_there_is_no_driver() {
    let e = CudaMemory::open_at(Path::new("libcuda-not-installed.so.1"), 0, CudaMemoryType::Device).unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("no NVIDIA driver: libcuda-not-installed.so.1 not found ("), "{text}");
    assert!(text.ends_with("install the NVIDIA driver, or name the library with FABRICBENCH_LIBCUDA"), "{text}");
}

/// The GPU preflight through the real CLI: `pair --use_cuda=5` on two local
/// ranks whose driver (the double) has GPUs 0 and 1. Every rank opens its
/// GPUs before it makes any end (no RDMA device is needed to get there), so
/// the run refuses naming the rank, its host and the GPU, exits as bad
/// input (nothing ran), and leaves nothing.
#[test]
fn a_gpu_the_host_lacks_is_refused_before_any_end_is_made() {
    let _machine = crate::common::busy_machine();
    let library = double("two", &[]);
    let bench = crate::common::Bench::new();
    let args = ["pair", "localhost", "localhost", "write", "--use_cuda=5", "-D", "0.1", "--no-save", "--no-progress"];
    let out = bench.command(&args).env("FABRICBENCH_LIBCUDA", &library).output().expect("run fabricbench");
    let stderr = crate::common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let refusal = "GPU preflight: group \"pair\" (phase 0) puts this rank's buffers in cuda memory on gpu = 5, which \
                   cannot be used here: GPU 5 not on this host (it has 2; GPUs are numbered from 0 as CUDA counts them)";
    let named =
        [0, 1].iter().any(|r| stderr.contains(&format!("rank {r} (127.0.0.{}): failed in phase 0: {refusal}", r + 1)));
    assert!(named, "{stderr}");
    assert!(!stderr.contains("flow 0"), "no flow end was made: {stderr}");
    assert!(bench.leftovers(std::time::Duration::from_secs(5)).is_empty(), "processes left");
}

/// A GPU that opens but whose memory the NIC could not be given: the
/// double exports no dma-buf and the recorded tree (gpu-across) loads no
/// peer-memory module, so `gpu_registration = "auto"` has neither way, and
/// `--use_cuda_dmabuf` not the one it forces. Exit 2 before any end,
/// naming the rank, host, GPU and the fix.
#[test]
fn a_registration_the_host_cannot_do_is_refused_with_the_fix() {
    let _machine = crate::common::busy_machine();
    let library = double("two", &[]);
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/gpu-across/sys");
    let bench = crate::common::Bench::new();
    let pair = ["pair", "localhost", "localhost", "write", "--use_cuda=1", "-D", "0.1", "--no-save", "--no-progress"];
    let run = |extra: &[&str]| {
        let mut command = bench.command(&pair);
        command.args(extra).env("FABRICBENCH_LIBCUDA", &library).env(fabricbench::sysfs::ROOT_ENV, &tree);
        let out = command.output().expect("run fabricbench");
        (out.status.code(), crate::common::text(&out.stderr))
    };
    let (code, stderr) = run(&[]);
    assert_eq!(code, Some(2), "{stderr}");
    let named = [0, 1].iter().any(|r| {
        stderr.contains(&format!(
            "rank {r} (127.0.0.{}): failed in phase 0: GPU preflight: group \"pair\" (phase 0) puts this rank's \
             buffers in cuda memory on gpu = 1, which cannot be used here: its memory cannot be registered with the \
             NIC (gpu_registration = \"auto\", CUDA GPU 1 (CUDA test double, 0000:1C:00.0, Device memory)): no peer \
             memory: neither nvidia_peermem nor nv_peer_mem is loaded (",
            r + 1
        ))
    });
    assert!(named, "{stderr}");
    assert!(stderr.contains("fix: load nvidia_peermem (`modprobe nvidia_peermem`"), "{stderr}");
    assert!(!stderr.contains("flow 0"), "no flow end was made: {stderr}");

    let (code, stderr) = run(&["--use_cuda_dmabuf"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("(gpu_registration = \"dmabuf\", CUDA GPU 1 ("), "{stderr}");
    assert!(stderr.contains("fix: for dma-buf, install an NVIDIA driver that exports it"), "{stderr}");
    assert!(!stderr.contains("nvidia_peermem"), "peer memory was not asked for: {stderr}");
    assert!(bench.leftovers(std::time::Duration::from_secs(5)).is_empty(), "processes left");
}

#[test]
fn a_gpu_is_opened_by_index_bus_id_or_auto() {
    use fabricbench::scenario::memory::GpuChoice;
    let library = double("two", &[]);
    let open = |choice: GpuChoice| CudaMemory::open_choice(&library, &choice, CudaMemoryType::Device);
    assert_eq!(open(GpuChoice::Index(1)).unwrap().index(), 1);
    assert_eq!(open(GpuChoice::Auto).unwrap().index(), 0, "auto the worker could not resolve: GPU 0");
    let by_bus = open(GpuChoice::bus_id("00000000:1C:00.0").unwrap()).unwrap();
    assert_eq!((by_bus.index(), by_bus.bus_id()), (1, "0000:1C:00.0"));
    let e = open(GpuChoice::bus_id("0000:3b:00.0").unwrap()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "GPU 0000:3b:00.0 is not on this host (CUDA sees 0000:1b:00.0, 0000:1c:00.0); give one of those or an index"
    );
}

/// A hostfile's `gpus=` reaches each rank: the group asks for GPU 1, which
/// the double has, but each host names its own GPU (one the double lacks,
/// by index on one host, by bus id on the other), so whichever rank's
/// preflight ends the run names its own hostfile entry, never the group's.
/// `plan` shows each rank's GPU.
#[test]
fn a_hostfile_gpus_entry_is_the_gpu_its_rank_opens() {
    let _machine = crate::common::busy_machine();
    let library = double("two", &[]);
    let bench = crate::common::Bench::new();
    let scenario = bench.write(
        "gdr.toml",
        "[run]\nname = \"gdr\"\nduration = \"100ms\"\n\n[[group]]\nname = \"gdr\"\npattern = \"pairwise\"\n\
         transport = \"rdma\"\nflows = [[0, 1]]\nmemory = \"cuda\"\ngpu = 1\n",
    );
    let hosts = bench.write("hosts", "127.0.0.1 gpus=7\n127.0.0.2 gpus=00000000:3B:00.0\n");
    let (scenario, hosts) = (scenario.to_str().unwrap(), hosts.to_str().unwrap());

    let out = bench.run(&["plan", scenario, "-H", hosts]);
    let stdout = crate::common::text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", crate::common::text(&out.stderr));
    assert!(stdout.contains("127.0.0.1                slot 0 of 1  devices -  gpu 7 (gpus=)"), "{stdout}");
    assert!(stdout.contains("127.0.0.2                slot 0 of 1  devices -  gpu 0000:3b:00.0 (gpus=)"), "{stdout}");

    let mut run = bench.command(&["run", scenario, "-H", hosts, "--no-save", "--no-progress"]);
    let out = run.env("FABRICBENCH_LIBCUDA", &library).output().expect("run fabricbench");
    let stderr = crate::common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let refused = |rank: usize, gpu: &str, cause: &str| {
        stderr.contains(&format!(
            "rank {rank} (127.0.0.{}): failed in phase 0: GPU preflight: group \"gdr\" (phase 0) puts this rank's \
             buffers in cuda memory on gpu = {gpu} (this host's gpus= in the hostfile), which cannot be used here: {cause}",
            rank + 1
        ))
    };
    let named = refused(0, "7", "GPU 7 not on this host (it has 2;")
        || refused(1, "0000:3b:00.0", "GPU 0000:3b:00.0 is not on this host (CUDA sees 0000:1b:00.0, 0000:1c:00.0)");
    assert!(named, "{stderr}");
    assert!(!stderr.contains("on gpu = 1"), "the group's GPU is not what the ranks open: {stderr}");
    assert!(bench.leftovers(std::time::Duration::from_secs(5)).is_empty(), "processes left");
}

/// `pair -m` through the real CLI: a name the scenario does not take, and a
/// GPU flag beside host memory only, are refused as bad input (exit 2)
/// naming the option before anything starts. (Which side is in GPU memory
/// is proven on the plan, in commands::pair_scenario's tests: a run here
/// would race the GPU side's preflight against the host side's RDMA setup.)
#[test]
fn pair_memory_values_and_conflicts_are_refused_naming_the_option() {
    let bench = crate::common::Bench::new();
    let pair = |extra: &[&str]| {
        let out = bench.command(&["pair", "localhost", "localhost", "write", "--no-save"]).args(extra).output();
        let out = out.expect("runs");
        (out.status.code(), crate::common::text(&out.stderr))
    };
    let (code, stderr) = pair(&["-m", "rocm"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("'--memory <SEND[,RECV]>'"), "{stderr}");
    assert!(
        stderr.contains("`rocm` is not a memory: give SEND[,RECV], each one of host, cuda, cuda-managed, cuda-host")
    );
    let (code, stderr) = pair(&["--memory", "host", "--use_cuda=0"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--use_cuda: names a GPU, but -m/--memory puts both sides in host memory"), "{stderr}");
    assert!(bench.leftovers(std::time::Duration::from_secs(5)).is_empty(), "nothing started");
}
