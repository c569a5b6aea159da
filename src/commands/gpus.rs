//! `fabricbench gpus`: each GPU the NVIDIA driver sees, tested the way a
//! GPU-memory run will use it (allocate each kind of memory, export
//! dma-buf, fill and read back), one PASS or FAIL line per step, so a GPU
//! host's first day shows what works before any RDMA run is tried.

use std::fmt::Write as _;
use std::path::Path;

use crate::cli::gpus::GpusArgs;
use crate::commands::Failure;
use crate::report::terminal::stdout;
use crate::transport::memory::{cuda, Buffer, CudaMemory, CudaMemoryType, MemoryError, MemoryProvider};
use crate::units::ByteSize;

/// The byte every buffer is filled with, then checked for.
const FILL: u8 = 0xa5;

/// The lines written so far and whether any step failed.
#[derive(Default)]
struct Steps {
    text: String,
    failed: usize,
}

impl Steps {
    fn step(&mut self, name: &str, outcome: Result<String, MemoryError>) {
        let (word, saw) = match outcome {
            Ok(saw) => ("PASS", saw),
            Err(e) => ("FAIL", e.to_string()),
        };
        self.failed += usize::from(word == "FAIL");
        let _ = writeln!(self.text, "{word} {name}: {saw}");
    }
}

pub fn gpus(args: &GpusArgs) -> Result<(), Failure> {
    let library = cuda::library(std::env::var_os(cuda::LIBRARY_ENV));
    let size = usize::try_from(args.size.bytes()).map_err(Failure::bad_input)?;
    let mut steps = Steps::default();
    let indices = match args.gpu {
        Some(gpu) => vec![gpu],
        None => counted(&library, &mut steps),
    };
    for gpu in indices {
        check(&library, gpu, size, &mut steps);
    }
    stdout::print(&steps.text)?;
    match steps.failed {
        0 => Ok(()),
        n => Err(Failure::CheckFailed(format!("{n} GPU step(s) failed"))),
    }
}

/// The GPUs the driver counts, by number; a driver that cannot be opened,
/// or sees none, is a failed step.
fn counted(library: &Path, steps: &mut Steps) -> Vec<usize> {
    let mut gpus = Vec::new();
    let outcome = loop {
        match CudaMemory::open_at(library, gpus.len(), CudaMemoryType::Device) {
            Ok(_) => gpus.push(gpus.len()),
            Err(MemoryError::NoSuchGpu { count: 0, .. }) => {
                break Err(MemoryError::NoSuchGpu { gpu: 0, count: 0 });
            }
            Err(MemoryError::NoSuchGpu { .. }) => {
                break Ok(format!("{} opened, {} GPU(s)", library.display(), gpus.len()))
            }
            Err(e) => break Err(e),
        }
    };
    steps.step("driver", outcome);
    gpus
}

/// One GPU: who it is, then each kind of memory allocated, filled and
/// read back, and device memory exported as dma-buf.
fn check(library: &Path, gpu: usize, size: usize, steps: &mut Steps) {
    let identity = CudaMemory::open_at(library, gpu, CudaMemoryType::Device).and_then(|cuda| {
        let memory = cuda.total_memory()?;
        Ok(format!("{} at {}, {} of memory", cuda.name(), cuda.bus_id(), ByteSize(memory as u64)))
    });
    let known = identity.is_ok();
    steps.step(&format!("GPU {gpu}"), identity);
    if !known {
        return;
    }
    for placement in [CudaMemoryType::Device, CudaMemoryType::Managed, CudaMemoryType::HostPinned] {
        let opened = CudaMemory::open_at(library, gpu, placement);
        let (cuda, buffer) = match opened.and_then(|cuda| cuda.allocate(size).map(|b| (cuda, b))) {
            Ok(made) => made,
            Err(e) => {
                steps.step(&format!("GPU {gpu} allocate {placement:?} memory"), Err(e));
                continue;
            }
        };
        steps.step(&format!("GPU {gpu} allocate {placement:?} memory"), Ok(format!("{} bytes", buffer.len())));
        if placement == CudaMemoryType::Device {
            let exported = cuda.dma_buf(&buffer).map(|_| format!("a descriptor for {} bytes", buffer.len()));
            steps.step(&format!("GPU {gpu} dma-buf export"), exported);
        }
        let mut buffer = buffer;
        let validated = fill_and_validate(&cuda, &mut buffer);
        steps.step(&format!("GPU {gpu} fill and validate {placement:?} memory"), validated);
        steps.step(&format!("GPU {gpu} free {placement:?} memory"), cuda.free(buffer).map(|()| "freed".to_string()));
    }
}

/// Every byte set through the driver and read back; then a pattern copied
/// into the buffer's end and back.
fn fill_and_validate(cuda: &CudaMemory, buffer: &mut Buffer) -> Result<String, MemoryError> {
    cuda.fill(buffer, FILL)?;
    cuda.check(buffer, FILL)?;
    let len = buffer.len().min(4096);
    let pattern: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let at = buffer.len() - len;
    cuda.copy_from_host(buffer, at, &pattern)?;
    let mut back = vec![0u8; len];
    cuda.copy_to_host(buffer, at, &mut back)?;
    match back.iter().zip(&pattern).position(|(b, p)| b != p) {
        None => Ok(format!("{} bytes set to {FILL:#04x} and read back; {len} bytes copied in and back", buffer.len())),
        Some(i) => Err(MemoryError::Mismatch { offset: at + i, expected: pattern[i], found: back[i] }),
    }
}
