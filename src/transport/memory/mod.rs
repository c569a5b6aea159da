//! Where a flow end's buffers live: host memory, or a GPU's. One small
//! interface, [`MemoryProvider`] (as perftest's memory.h: set up, allocate,
//! free, copy to and from the host, fill, check, export as dma-buf), and
//! one backend per file: `host` and `cuda` (the CUDA driver API opened at
//! run time, no CUDA needed to build). ROCm is refused with a clear error.
//! RDMA flow ends in GPU memory allocate and free their buffers here
//! (transport::rdma::gpu; docs/RDMA.md, "GPU memory").

pub mod cuda;
mod host;

use std::os::fd::OwnedFd;
use std::path::PathBuf;

pub use cuda::{CudaMemory, CudaMemoryType};
pub use host::HostMemory;

/// Which memory a run asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryKind {
    Host,
    /// An NVIDIA GPU by CUDA's number.
    Cuda {
        gpu: usize,
        placement: CudaMemoryType,
    },
    /// An AMD GPU: not supported yet.
    Rocm {
        gpu: usize,
    },
}

/// Why a memory provider could not be set up or do what was asked. Every
/// message names the library, entry point or GPU and what would fix it.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(
        "no NVIDIA driver: {library} not found ({why}); install the NVIDIA driver, or name the library with {}",
        cuda::LIBRARY_ENV
    )]
    NoDriver { library: PathBuf, why: String },
    #[error(
        "{library} has no {symbol} ({why}): the NVIDIA driver is too old for GPU memory (R470 or newer is needed)"
    )]
    NoSymbol { library: PathBuf, symbol: &'static str, why: String },
    #[error("GPU {gpu} not on this host (it has {count}; GPUs are numbered from 0 as CUDA counts them)")]
    NoSuchGpu { gpu: usize, count: usize },
    #[error("GPU {bus} is not on this host (CUDA sees {seen}); give one of those or an index")]
    NoSuchBusId { bus: String, seen: String },
    #[error("{call} on GPU {gpu} failed: {message} (CUresult {code})")]
    Driver { call: &'static str, gpu: usize, code: i32, message: String },
    #[error("{len} bytes at offset {offset} do not fit a buffer of {size} bytes")]
    OutOfBounds { offset: usize, len: usize, size: usize },
    #[error("buffer check failed at byte {offset}: {found:#04x}, expected {expected:#04x}")]
    Mismatch { offset: usize, expected: u8, found: u8 },
    #[error("a buffer of {owner} memory was given to the {provider} provider")]
    Foreign { owner: String, provider: String },
    #[error("{provider} memory cannot be exported as dma-buf: {why}")]
    NoDmaBuf { provider: String, why: String },
    #[error("{what} GPU memory is not supported yet: use host memory or an NVIDIA GPU")]
    Unsupported { what: &'static str },
}

/// One allocation of a provider. Free it with the provider that made it.
#[derive(Debug)]
pub struct Buffer {
    /// What verbs would register: a host address, or a device address.
    address: u64,
    len: usize,
    /// Which provider made it (the one that may free it).
    owner: String,
    memory: Memory,
}

/// What backs a buffer.
#[derive(Debug)]
enum Memory {
    Host(Box<[u8]>),
    Cuda(cuda::Allocation),
}

impl Buffer {
    pub fn address(&self) -> u64 {
        self.address
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A buffer as a dma-buf: the file descriptor and the buffer's offset in it.
#[derive(Debug)]
pub struct DmaBuf {
    pub fd: OwnedFd,
    pub offset: u64,
}

/// One kind of memory. Set up by each backend's constructor (its `init`).
pub trait MemoryProvider: Send + Sync {
    /// What it is, for messages: "host", "CUDA GPU 0 (NVIDIA H100, 0000:1B:00.0)".
    fn describe(&self) -> String;
    fn allocate(&self, len: usize) -> Result<Buffer, MemoryError>;
    fn free(&self, buffer: Buffer) -> Result<(), MemoryError>;
    /// Copies `from` into the buffer at `offset`.
    fn copy_from_host(&self, to: &mut Buffer, offset: usize, from: &[u8]) -> Result<(), MemoryError>;
    /// Copies from the buffer at `offset` into `to`.
    fn copy_to_host(&self, from: &Buffer, offset: usize, to: &mut [u8]) -> Result<(), MemoryError>;
    /// Sets every byte of the buffer to `byte`.
    fn fill(&self, buffer: &mut Buffer, byte: u8) -> Result<(), MemoryError>;
    fn dma_buf(&self, buffer: &Buffer) -> Result<DmaBuf, MemoryError>;

    /// Whether every byte of the buffer is `byte` (read back in 1 MiB
    /// pieces); the error names the first that is not.
    fn check(&self, buffer: &Buffer, byte: u8) -> Result<(), MemoryError> {
        let mut piece = vec![0u8; buffer.len.min(1 << 20)];
        let mut offset = 0;
        while offset < buffer.len {
            let n = piece.len().min(buffer.len - offset);
            self.copy_to_host(buffer, offset, &mut piece[..n])?;
            if let Some(at) = piece[..n].iter().position(|&b| b != byte) {
                return Err(MemoryError::Mismatch { offset: offset + at, expected: byte, found: piece[at] });
            }
            offset += n;
        }
        Ok(())
    }
}

/// The provider for `kind` (for CUDA, the driver is found as
/// [`CudaMemory::open`] says).
pub fn open(kind: MemoryKind) -> Result<Box<dyn MemoryProvider>, MemoryError> {
    match kind {
        MemoryKind::Host => Ok(Box::new(HostMemory)),
        MemoryKind::Cuda { gpu, placement } => Ok(Box::new(CudaMemory::open(gpu, placement)?)),
        MemoryKind::Rocm { .. } => Err(MemoryError::Unsupported { what: "ROCm" }),
    }
}

/// `offset..offset + len` of a buffer of `size` bytes, or why not.
fn within(offset: usize, len: usize, size: usize) -> Result<(), MemoryError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(MemoryError::OutOfBounds { offset, len, size }),
    }
}
