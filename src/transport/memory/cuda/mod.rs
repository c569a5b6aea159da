//! NVIDIA GPU memory through the CUDA driver API, opened at run time
//! (`driver`, the only unsafe here): the library FABRICBENCH_LIBCUDA names,
//! else libcuda.so.1 as the dynamic loader finds it. One provider is one
//! GPU (by CUDA's number) and one kind of allocation.

mod driver;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{within, Buffer, DmaBuf, Memory, MemoryError, MemoryProvider};
use crate::hostfile::GpuChoice;
pub(super) use driver::Allocation;
pub use driver::CudaMemoryType;
use driver::{CallFailure, Count, Driver, Identity, OpenFailure};

/// The variable naming the driver library to open instead of libcuda.so.1.
pub const LIBRARY_ENV: &str = "FABRICBENCH_LIBCUDA";

/// The driver library's name, as the NVIDIA driver installs it.
const LIBRARY: &str = "libcuda.so.1";

/// CUresult when the driver sees no GPU at all (cuInit says so).
const CUDA_ERROR_NO_DEVICE: i32 = 100;

/// One GPU's memory.
pub struct CudaMemory {
    driver: Driver,
    gpu: usize,
    placement: CudaMemoryType,
    bus_id: String,
    name: String,
}

impl std::fmt::Debug for CudaMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// The library to open: `given` (FABRICBENCH_LIBCUDA's value) unless unset
/// or empty.
pub fn library(given: Option<OsString>) -> PathBuf {
    given.filter(|g| !g.is_empty()).map_or_else(|| PathBuf::from(LIBRARY), PathBuf::from)
}

/// The allocation a scenario's `memory` asks for (host memory has none
/// here: it is given as device memory, as the transport takes it).
pub fn placement(memory: crate::plan::Memory) -> CudaMemoryType {
    use crate::plan::Memory as Asked;
    match memory {
        Asked::Cuda | Asked::Host => CudaMemoryType::Device,
        Asked::CudaManaged => CudaMemoryType::Managed,
        Asked::CudaHost => CudaMemoryType::HostPinned,
    }
}

impl CudaMemory {
    /// GPU `gpu` through the library [`library`] picks from FABRICBENCH_LIBCUDA.
    pub fn open(gpu: usize, placement: CudaMemoryType) -> Result<CudaMemory, MemoryError> {
        CudaMemory::open_at(&library(std::env::var_os(LIBRARY_ENV)), gpu, placement)
    }

    /// GPU `gpu` through the driver library at `library` (a path, or a name
    /// the dynamic loader searches for).
    pub fn open_at(library: &Path, gpu: usize, placement: CudaMemoryType) -> Result<CudaMemory, MemoryError> {
        let driver = match Driver::open(library, gpu) {
            Err(OpenFailure::Library(why)) => return Err(MemoryError::NoDriver { library: library.into(), why }),
            Err(OpenFailure::Symbol(symbol, why)) => {
                return Err(MemoryError::NoSymbol { library: library.into(), symbol, why })
            }
            Ok(Err(Count::Gpus(count))) => return Err(MemoryError::NoSuchGpu { gpu, count }),
            Ok(Err(Count::Failed(f))) if f.code == CUDA_ERROR_NO_DEVICE => {
                return Err(MemoryError::NoSuchGpu { gpu, count: 0 })
            }
            Ok(Err(Count::Failed(f))) => return Err(failed(f, gpu)),
            Ok(Ok(driver)) => driver,
        };
        let Identity { bus_id, name } = driver.identity().map_err(|f| failed(f, gpu))?;
        Ok(CudaMemory { driver, gpu, placement, bus_id, name })
    }

    /// The GPU `choice` names, through the driver library at `library`: by
    /// index; by PCI address among the GPUs CUDA counts; `auto` (which the
    /// worker resolves from the host's facts where it can) as GPU 0.
    pub fn open_choice(
        library: &Path,
        choice: &GpuChoice,
        placement: CudaMemoryType,
    ) -> Result<CudaMemory, MemoryError> {
        let bus = match choice {
            GpuChoice::Index(gpu) => return CudaMemory::open_at(library, *gpu, placement),
            GpuChoice::Auto => return CudaMemory::open_at(library, 0, placement),
            GpuChoice::BusId(bus) => bus,
        };
        let mut seen = Vec::new();
        for gpu in 0.. {
            match CudaMemory::open_at(library, gpu, placement) {
                Ok(cuda) if cuda.bus_id.eq_ignore_ascii_case(bus) => return Ok(cuda),
                Ok(cuda) => seen.push(cuda.bus_id.to_ascii_lowercase()),
                Err(MemoryError::NoSuchGpu { .. }) => break,
                Err(e) => return Err(e),
            }
        }
        let seen = if seen.is_empty() { "no GPU".to_string() } else { seen.join(", ") };
        Err(MemoryError::NoSuchBusId { bus: bus.clone(), seen })
    }

    /// CUDA's number of the GPU.
    pub fn index(&self) -> usize {
        self.gpu
    }

    /// The GPU's PCI address as CUDA writes it, e.g. "0000:1B:00.0".
    pub fn bus_id(&self) -> &str {
        &self.bus_id
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this GPU's memory can be exported as dma-buf (the driver's
    /// entry point and the device's attribute), asked without allocating.
    pub fn dma_buf_supported(&self) -> Result<(), MemoryError> {
        self.driver.dma_buf_supported().map_err(|f| self.no_dma_buf(f))
    }

    /// The GPU's memory in bytes, as the driver counts it.
    pub fn total_memory(&self) -> Result<usize, MemoryError> {
        self.driver.total_memory().map_err(|f| failed(f, self.gpu))
    }

    fn no_dma_buf(&self, f: CallFailure) -> MemoryError {
        MemoryError::NoDmaBuf {
            provider: self.describe(),
            why: format!("{}: {} (CUresult {})", f.call, f.message, f.code),
        }
    }

    fn allocation<'a>(&self, buffer: &'a Buffer) -> Result<&'a Allocation, MemoryError> {
        match &buffer.memory {
            Memory::Cuda(a) if buffer.owner == self.describe() => Ok(a),
            _ => Err(MemoryError::Foreign { owner: buffer.owner.clone(), provider: self.describe() }),
        }
    }
}

fn failed(f: CallFailure, gpu: usize) -> MemoryError {
    MemoryError::Driver { call: f.call, gpu, code: f.code, message: f.message }
}

impl MemoryProvider for CudaMemory {
    fn describe(&self) -> String {
        format!("CUDA GPU {} ({}, {}, {:?} memory)", self.gpu, self.name, self.bus_id, self.placement)
    }

    fn allocate(&self, len: usize) -> Result<Buffer, MemoryError> {
        let a = self.driver.allocate(len, self.placement).map_err(|f| failed(f, self.gpu))?;
        Ok(Buffer { address: a.address(), len, owner: self.describe(), memory: Memory::Cuda(a) })
    }

    fn free(&self, buffer: Buffer) -> Result<(), MemoryError> {
        self.allocation(&buffer)?;
        let Memory::Cuda(a) = buffer.memory else { unreachable!("checked by allocation()") };
        self.driver.free(a).map_err(|f| failed(f, self.gpu))
    }

    fn copy_from_host(&self, to: &mut Buffer, offset: usize, from: &[u8]) -> Result<(), MemoryError> {
        within(offset, from.len(), to.len)?;
        self.driver.copy_in(self.allocation(to)?, offset, from).map_err(|f| failed(f, self.gpu))
    }

    fn copy_to_host(&self, from: &Buffer, offset: usize, to: &mut [u8]) -> Result<(), MemoryError> {
        within(offset, to.len(), from.len)?;
        self.driver.copy_out(self.allocation(from)?, offset, to).map_err(|f| failed(f, self.gpu))
    }

    fn fill(&self, buffer: &mut Buffer, byte: u8) -> Result<(), MemoryError> {
        self.driver.fill(self.allocation(buffer)?, byte).map_err(|f| failed(f, self.gpu))
    }

    fn dma_buf(&self, buffer: &Buffer) -> Result<DmaBuf, MemoryError> {
        let fd = self.driver.dma_buf(self.allocation(buffer)?).map_err(|f| self.no_dma_buf(f))?;
        Ok(DmaBuf { fd, offset: 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_libcuda_unless_named() {
        assert_eq!(library(None), Path::new("libcuda.so.1"));
        assert_eq!(library(Some(OsString::new())), Path::new("libcuda.so.1"));
        assert_eq!(library(Some("/opt/double.so".into())), Path::new("/opt/double.so"));
    }

    #[test]
    fn no_library_is_no_driver_naming_it_and_the_fix() {
        let e = CudaMemory::open_at(Path::new("/no/such/libcuda.so.1"), 0, CudaMemoryType::Device).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("no NVIDIA driver: /no/such/libcuda.so.1 not found (")
                && text.ends_with("install the NVIDIA driver, or name the library with FABRICBENCH_LIBCUDA"),
            "{text}"
        );
    }
}
