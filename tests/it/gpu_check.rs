//! scripts/gpu-check against the CUDA test double (tests/doubles/
//! libcuda-double.c, named by FABRICBENCH_LIBCUDA) and a recorded sysfs
//! tree (tests/fixtures/hosts/gpu-dgx, named by FABRICBENCH_SYSFS_ROOT):
//! every step's PASS where the double does what a driver should, the
//! dma-buf step's FAIL and exit 3 where it refuses, and bad usage said
//! plainly. The double is host memory: what this proves is the script's
//! and `fabricbench gpus`' plumbing, never a real GPU (docs/RDMA.md).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{bin, text};
use crate::gpu_memory::double;

fn gpu_check(library: &Path, args: &[&str]) -> Output {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    Command::new(root.join("scripts/gpu-check"))
        .args(["--bin", bin(), "--size", "64K"])
        .args(args)
        .env("FABRICBENCH_LIBCUDA", library)
        .env(fabricbench::sysfs::ROOT_ENV, root.join("tests/fixtures/hosts/gpu-dgx/sys"))
        .output()
        .expect("scripts/gpu-check runs")
}

/// Each step's line: (PASS or FAIL, step, what it saw).
fn steps(out: &Output) -> Vec<(String, String, String)> {
    text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (word, rest) = l.split_once(' ')?;
            let (step, saw) = rest.split_once(": ")?;
            ["PASS", "FAIL"].contains(&word).then(|| (word.into(), step.into(), saw.into()))
        })
        .collect()
}

const GPU_STEPS: [&str; 11] = [
    "GPU 0",
    "GPU 0 allocate Device memory",
    "GPU 0 dma-buf export",
    "GPU 0 fill and validate Device memory",
    "GPU 0 free Device memory",
    "GPU 0 allocate Managed memory",
    "GPU 0 fill and validate Managed memory",
    "GPU 0 free Managed memory",
    "GPU 0 allocate HostPinned memory",
    "GPU 0 fill and validate HostPinned memory",
    "GPU 0 free HostPinned memory",
];

#[test]
fn every_step_passes_where_the_driver_does_what_it_should() {
    let _machine = crate::common::busy_machine();
    let out = gpu_check(&double("dma-buf", &["-DDMA_BUF"]), &[]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let steps = steps(&out);
    let names: Vec<&str> = steps.iter().map(|(_, step, _)| step.as_str()).collect();
    let gpu1: Vec<String> = GPU_STEPS.iter().map(|s| s.replacen("GPU 0", "GPU 1", 1)).collect();
    let expected: Vec<&str> = ["facts", "driver"]
        .into_iter()
        .chain(GPU_STEPS)
        .chain(gpu1.iter().map(String::as_str))
        .chain(["preflight"])
        .collect();
    assert_eq!(names, expected, "{stdout}");
    assert!(steps.iter().all(|(word, ..)| word == "PASS"), "{stdout}");
    let saw = |name: &str| &steps.iter().find(|(_, step, _)| step == name).unwrap().2;
    assert!(saw("facts").starts_with("GPUs: 8 · NVIDIA driver 550.54.15 · peer memory: nvidia_peermem"), "{stdout}");
    assert!(stdout.contains("    4    0000:83:00.0  1     "), "the recorded tree's GPUs, NUMA nodes: {stdout}");
    assert_eq!(saw("GPU 0"), "CUDA test double at 0000:1B:00.0, 80G of memory");
    assert_eq!(saw("GPU 0 dma-buf export"), "a descriptor for 65536 bytes");
    assert_eq!(
        saw("GPU 0 fill and validate Managed memory"),
        "65536 bytes set to 0xa5 and read back; 4096 bytes copied in and back"
    );
    assert!(saw("preflight").starts_with("GPU 0 passed the preflight; no RDMA device is present"), "{stdout}");
    assert!(stdout.ends_with("gpu-check: every step passed\n"), "{stdout}");
}

#[test]
fn a_driver_that_exports_no_dma_buf_fails_that_step_and_exits_3() {
    let _machine = crate::common::busy_machine();
    let out = gpu_check(&double("two", &[]), &["--gpu", "1"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}{}", text(&out.stderr));
    let failed: Vec<_> = steps(&out).into_iter().filter(|(word, ..)| word == "FAIL").collect();
    let [(_, step, saw)] = &failed[..] else { panic!("one FAIL: {stdout}") };
    assert_eq!(step, "GPU 1 dma-buf export");
    assert!(saw.contains("cuMemGetHandleForAddressRange: the GPU or driver does not support dma-buf"), "{saw}");
    // Peer memory (the recorded tree's nvidia_peermem) still lets the preflight pass.
    assert!(stdout.contains("PASS preflight: GPU 1 passed the preflight"), "{stdout}");
    assert!(stdout.ends_with("gpu-check: some steps FAILED (above)\n"), "{stdout}");
}

/// `fabricbench gpus` alone: a GPU the driver lacks, and no driver at all,
/// are failed steps naming them (exit 3), not a crash.
#[test]
fn fabricbench_gpus_names_a_missing_gpu_or_driver() {
    let gpus = |library: &Path, args: &[&str]| {
        let out = Command::new(bin()).arg("gpus").args(args).env("FABRICBENCH_LIBCUDA", library).output().unwrap();
        (out.status.code(), text(&out.stdout))
    };
    let (code, stdout) = gpus(&double("two", &[]), &["--gpu", "9"]);
    assert_eq!(code, Some(3), "{stdout}");
    assert_eq!(stdout, "FAIL GPU 9: GPU 9 not on this host (it has 2; GPUs are numbered from 0 as CUDA counts them)\n");
    let (code, stdout) = gpus(Path::new("/no/such/libcuda.so.1"), &[]);
    assert_eq!(code, Some(3), "{stdout}");
    assert!(stdout.starts_with("FAIL driver: no NVIDIA driver: /no/such/libcuda.so.1 not found ("), "{stdout}");
    let help = Command::new(bin()).args(["gpus", "--help"]).output().unwrap();
    assert!(text(&help.stdout).contains("fabricbench gpus --gpu 1 --size 256M"), "{}", text(&help.stdout));
}

#[test]
fn bad_usage_is_named_and_help_exits_0() {
    let library = double("two", &[]);
    let cases: [(&[&str], &str); 4] = [
        (&["--gpu", "one"], "gpu-check: --gpu takes CUDA's number of a GPU (0, 1, …), not 'one'"),
        (&["--gpu"], "gpu-check: --gpu needs a GPU number, e.g. --gpu 0"),
        (&["--frobnicate"], "gpu-check: unknown option '--frobnicate' (see --help)"),
        (&["--bin", "/no/such/fabricbench"], "gpu-check: /no/such/fabricbench is not an executable file"),
    ];
    for (args, said) in cases {
        let out = gpu_check(&library, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).starts_with(said), "{args:?}: {}", text(&out.stderr));
    }
    let out = gpu_check(&library, &["--size", "0"]);
    assert_eq!(out.status.code(), Some(3), "fabricbench refuses the size");
    let said =
        "FAIL fabricbench gpus: exit 2: error: invalid value '0' for '--size <BYTES>': `0` is outside 1 byte..=16G";
    assert!(text(&out.stdout).contains(said), "{}", text(&out.stdout));
    let help = gpu_check(&library, &["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(text(&help.stdout).contains("scripts/gpu-check --gpu 1 --size 256M"), "{}", text(&help.stdout));
}
