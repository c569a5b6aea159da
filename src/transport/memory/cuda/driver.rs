//! The CUDA driver API (libcuda.so.1), opened at run time with `dlopen`:
//! one binary runs on hosts with and without an NVIDIA driver, and nothing
//! of CUDA is needed to build it. The only unsafe of `transport::memory`:
//! every call into the library is here, behind safe methods that check
//! what the library cannot (a copy stays inside the allocation it names).
#![allow(unsafe_code)] // the crate denies it everywhere else (Cargo.toml [lints])

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;

use libloading::Library;

type CuResult = c_int;
type CuDevice = c_int;
type CuContext = *mut c_void;
type CuDevicePtr = u64;

const CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: c_int = 124;
const CU_MEM_ATTACH_GLOBAL: c_uint = 1;
/// Pinned host memory mapped into the device's address space.
const CU_MEMHOSTALLOC_DEVICEMAP: c_uint = 2;
const CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: c_int = 1;
/// CUresult of a driver that cannot do what was asked.
pub(super) const CUDA_ERROR_NOT_SUPPORTED: c_int = 801;

/// Where an allocation lives (perftest's --use_cuda, its managed and
/// host-pinned variants).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaMemoryType {
    /// `cuMemAlloc`: device memory, what GPUDirect RDMA registers.
    Device,
    /// `cuMemAllocManaged`: unified memory, migrated on demand.
    Managed,
    /// `cuMemHostAlloc`: pinned host memory the GPU maps.
    HostPinned,
}

/// Why opening the library failed.
#[derive(Debug)]
pub(super) enum OpenFailure {
    Library(String),
    Symbol(&'static str, String),
}

/// A driver call that returned an error.
#[derive(Debug)]
pub(super) struct CallFailure {
    pub call: &'static str,
    pub code: i32,
    pub message: String,
}

/// The entry points used; each resolved when the library is opened.
struct Api {
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    device_get_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult,
    device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult,
    device_get_pci_bus_id: unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult,
    device_get_name: unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult,
    primary_ctx_retain: unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult,
    primary_ctx_release: unsafe extern "C" fn(CuDevice) -> CuResult,
    ctx_set_current: unsafe extern "C" fn(CuContext) -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut CuDevicePtr, usize) -> CuResult,
    mem_alloc_managed: unsafe extern "C" fn(*mut CuDevicePtr, usize, c_uint) -> CuResult,
    mem_host_alloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CuResult,
    mem_free: unsafe extern "C" fn(CuDevicePtr) -> CuResult,
    mem_free_host: unsafe extern "C" fn(*mut c_void) -> CuResult,
    memcpy_htod: unsafe extern "C" fn(CuDevicePtr, *const c_void, usize) -> CuResult,
    memcpy_dtoh: unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize) -> CuResult,
    memset_d8: unsafe extern "C" fn(CuDevicePtr, u8, usize) -> CuResult,
    get_error_string: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    device_total_mem: unsafe extern "C" fn(*mut usize, CuDevice) -> CuResult,
    /// Absent before R515 (CUDA 11.7): dma-buf export is then unavailable.
    get_handle_for_address_range: Option<ExportFn>,
}

/// `cuMemGetHandleForAddressRange`: (handle, address, length, handle type, flags).
type ExportFn = unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize, c_int, u64) -> CuResult;

/// The driver, opened, with one GPU's primary context retained.
pub(super) struct Driver {
    api: Api,
    device: CuDevice,
    context: CuContext,
    // Last: the entry points above point into it.
    _library: Library,
}

// SAFETY: a CUDA context may be made current on any thread (each call does
// so first), and the driver API is thread-safe; the entry points are plain
// function pointers into a library this struct keeps loaded.
unsafe impl Send for Driver {}
// SAFETY: as for Send; no method mutates the struct.
unsafe impl Sync for Driver {}

/// Which GPU a driver opened, in its own words.
pub(crate) struct Identity {
    /// PCI bus id, e.g. "0000:1B:00.0".
    pub bus_id: String,
    /// Model name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
}

/// One allocation. Only [`Driver`] makes one, so its address and length
/// are what the driver returned; not `Clone`, so it is freed once.
#[derive(Debug)]
pub(crate) struct Allocation {
    address: u64,
    len: usize,
    kind: CudaMemoryType,
    /// The context it was made in: another driver's allocation is refused.
    context: usize,
}

impl Allocation {
    pub fn address(&self) -> u64 {
        self.address
    }
}

/// How many GPUs the library counts, or why it could not be asked.
pub(super) enum Count {
    Gpus(usize),
    Failed(CallFailure),
}

impl Driver {
    /// Opens `library`, resolves every entry point, initialises the driver
    /// and retains `gpu`'s primary context. `Ok(Err(count))` when the GPU
    /// is not among the `count` the driver sees.
    pub fn open(library: &Path, gpu: usize) -> Result<Result<Driver, Count>, OpenFailure> {
        // SAFETY: loading runs the library's initialisers; libcuda's (and
        // the test double's) have no preconditions.
        let lib = unsafe { Library::new(library) }.map_err(|e| OpenFailure::Library(e.to_string()))?;
        let api = Api::resolve(&lib)?;
        let started = (|| {
            // SAFETY: cuInit takes flags, which must be 0.
            check(&api, "cuInit", unsafe { (api.init)(0) })?;
            let mut n: c_int = 0;
            // SAFETY: n is a valid out pointer.
            check(&api, "cuDeviceGetCount", unsafe { (api.device_get_count)(&mut n) })?;
            Ok::<_, CallFailure>(n)
        })();
        let count = match started {
            Ok(n) => usize::try_from(n).unwrap_or(0),
            Err(failure) => return Ok(Err(Count::Failed(failure))),
        };
        let Some(ordinal) = c_int::try_from(gpu).ok().filter(|_| gpu < count) else {
            return Ok(Err(Count::Gpus(count)));
        };
        let retained = (|| {
            let mut device: CuDevice = 0;
            // SAFETY: device is a valid out pointer; ordinal < count.
            check(&api, "cuDeviceGet", unsafe { (api.device_get)(&mut device, ordinal) })?;
            let mut context: CuContext = std::ptr::null_mut();
            // SAFETY: context is a valid out pointer, device one the driver gave.
            check(&api, "cuDevicePrimaryCtxRetain", unsafe { (api.primary_ctx_retain)(&mut context, device) })?;
            Ok((device, context))
        })();
        match retained {
            Ok((device, context)) => Ok(Ok(Driver { api, device, context, _library: lib })),
            Err(failure) => Ok(Err(Count::Failed(failure))),
        }
    }

    /// Makes this GPU's context current on the calling thread.
    fn current(&self) -> Result<(), CallFailure> {
        // SAFETY: the context was retained by open and is released only on drop.
        check(&self.api, "cuCtxSetCurrent", unsafe { (self.api.ctx_set_current)(self.context) })
    }

    /// The GPU's PCI bus id and name.
    pub fn identity(&self) -> Result<Identity, CallFailure> {
        let text = |call: &'static str, f: unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult| {
            let mut buf = [0 as c_char; 128];
            // SAFETY: the buffer holds the 128 bytes the call is told of.
            check(&self.api, call, unsafe { f(buf.as_mut_ptr(), buf.len() as c_int, self.device) })?;
            buf[127] = 0;
            // SAFETY: the driver wrote a NUL-terminated string into buf, and its last byte is 0.
            Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
        };
        Ok(Identity {
            bus_id: text("cuDeviceGetPCIBusId", self.api.device_get_pci_bus_id)?,
            name: text("cuDeviceGetName", self.api.device_get_name)?,
        })
    }

    pub fn allocate(&self, len: usize, kind: CudaMemoryType) -> Result<Allocation, CallFailure> {
        self.current()?;
        let mut address: CuDevicePtr = 0;
        // SAFETY: the out pointers are valid; len is the size asked for.
        let (call, code) = unsafe {
            match kind {
                CudaMemoryType::Device => ("cuMemAlloc", (self.api.mem_alloc)(&mut address, len)),
                CudaMemoryType::Managed => {
                    ("cuMemAllocManaged", (self.api.mem_alloc_managed)(&mut address, len, CU_MEM_ATTACH_GLOBAL))
                }
                CudaMemoryType::HostPinned => {
                    let mut host: *mut c_void = std::ptr::null_mut();
                    let code = (self.api.mem_host_alloc)(&mut host, len, CU_MEMHOSTALLOC_DEVICEMAP);
                    address = host as u64;
                    ("cuMemHostAlloc", code)
                }
            }
        };
        check(&self.api, call, code)?;
        Ok(Allocation { address, len, kind, context: self.context as usize })
    }

    /// Asserts that `allocation` is this driver's (the provider refuses
    /// another's before calling, so this never fires).
    fn mine(&self, allocation: &Allocation) {
        assert_eq!(allocation.context, self.context as usize, "an allocation of another GPU's context");
    }

    pub fn free(&self, allocation: Allocation) -> Result<(), CallFailure> {
        self.mine(&allocation);
        self.current()?;
        // SAFETY: the allocation came from this driver and is freed once (it is moved in).
        let (call, code) = unsafe {
            match allocation.kind {
                CudaMemoryType::HostPinned => {
                    ("cuMemFreeHost", (self.api.mem_free_host)(allocation.address as *mut c_void))
                }
                _ => ("cuMemFree", (self.api.mem_free)(allocation.address)),
            }
        };
        check(&self.api, call, code)
    }

    /// Copies `from` to `offset` of the allocation; the caller has checked
    /// that it fits (asserted here too: a copy past the end is never made).
    pub fn copy_in(&self, to: &Allocation, offset: usize, from: &[u8]) -> Result<(), CallFailure> {
        self.mine(to);
        assert!(offset.checked_add(from.len()).is_some_and(|end| end <= to.len), "copy past the allocation");
        self.current()?;
        // SAFETY: the destination range lies inside a live allocation (asserted), the source is a valid slice.
        check(&self.api, "cuMemcpyHtoD", unsafe {
            (self.api.memcpy_htod)(to.address + offset as u64, from.as_ptr().cast(), from.len())
        })
    }

    /// Copies from `offset` of the allocation into `to` (bounds as copy_in).
    pub fn copy_out(&self, from: &Allocation, offset: usize, to: &mut [u8]) -> Result<(), CallFailure> {
        self.mine(from);
        assert!(offset.checked_add(to.len()).is_some_and(|end| end <= from.len), "copy past the allocation");
        self.current()?;
        // SAFETY: the source range lies inside a live allocation (asserted), the destination is a valid slice.
        check(&self.api, "cuMemcpyDtoH", unsafe {
            (self.api.memcpy_dtoh)(to.as_mut_ptr().cast(), from.address + offset as u64, to.len())
        })
    }

    pub fn fill(&self, allocation: &Allocation, byte: u8) -> Result<(), CallFailure> {
        self.mine(allocation);
        self.current()?;
        // SAFETY: the whole allocation, as the driver returned it.
        check(&self.api, "cuMemsetD8", unsafe { (self.api.memset_d8)(allocation.address, byte, allocation.len) })
    }

    /// Whether this GPU and driver export dma-buf: the entry point is there
    /// (R515, CUDA 11.7, and later) and the device says it supports it. The
    /// GPU preflight asks this, and every export asks it first, so the two
    /// never disagree.
    pub fn dma_buf_supported(&self) -> Result<(), CallFailure> {
        self.dma_buf_export().map(|_| ())
    }

    fn dma_buf_export(&self) -> Result<ExportFn, CallFailure> {
        let unsupported = |message: &str| CallFailure {
            call: "cuMemGetHandleForAddressRange",
            code: CUDA_ERROR_NOT_SUPPORTED,
            message: message.to_string(),
        };
        let Some(export) = self.api.get_handle_for_address_range else {
            return Err(unsupported("the driver has no cuMemGetHandleForAddressRange (it came with R515, CUDA 11.7)"));
        };
        self.current()?;
        let mut supported: c_int = 0;
        let attribute = CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED;
        // SAFETY: supported is a valid out pointer, the device one the driver gave.
        check(&self.api, "cuDeviceGetAttribute", unsafe {
            (self.api.device_get_attribute)(&mut supported, attribute, self.device)
        })?;
        if supported == 0 {
            return Err(unsupported("the GPU or driver does not support dma-buf (the open kernel modules do)"));
        }
        Ok(export)
    }

    /// The GPU's memory in bytes (cuDeviceTotalMem).
    pub fn total_memory(&self) -> Result<usize, CallFailure> {
        let mut bytes: usize = 0;
        // SAFETY: bytes is a valid out pointer, the device one the driver gave.
        check(&self.api, "cuDeviceTotalMem_v2", unsafe { (self.api.device_total_mem)(&mut bytes, self.device) })?;
        Ok(bytes)
    }

    /// The allocation as a dma-buf file descriptor (for `ibv_reg_dmabuf_mr`).
    pub fn dma_buf(&self, allocation: &Allocation) -> Result<OwnedFd, CallFailure> {
        self.mine(allocation);
        let export = self.dma_buf_export()?;
        let mut fd: c_int = -1;
        let handle_type = CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD;
        // SAFETY: fd is a valid out pointer (the call writes an int); the range is a live allocation.
        let code =
            unsafe { export((&mut fd as *mut c_int).cast(), allocation.address, allocation.len, handle_type, 0) };
        check(&self.api, "cuMemGetHandleForAddressRange", code)?;
        // SAFETY: on success the driver handed over a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // SAFETY: retained once in open; released once here.
        unsafe { (self.api.primary_ctx_release)(self.device) };
    }
}

impl Api {
    fn resolve(lib: &Library) -> Result<Api, OpenFailure> {
        // Each entry point under the name libcuda exports (the `_v2` ones
        // are what cuda.h's macros call).
        fn get<T: Copy>(lib: &Library, name: &'static str) -> Result<T, OpenFailure> {
            // SAFETY: T is the entry point's C signature, as declared in cuda.h.
            unsafe { lib.get::<T>(name.as_bytes()) }.map(|s| *s).map_err(|e| OpenFailure::Symbol(name, e.to_string()))
        }
        Ok(Api {
            init: get(lib, "cuInit")?,
            device_get_count: get(lib, "cuDeviceGetCount")?,
            device_get: get(lib, "cuDeviceGet")?,
            device_get_attribute: get(lib, "cuDeviceGetAttribute")?,
            device_get_pci_bus_id: get(lib, "cuDeviceGetPCIBusId")?,
            device_get_name: get(lib, "cuDeviceGetName")?,
            primary_ctx_retain: get(lib, "cuDevicePrimaryCtxRetain")?,
            primary_ctx_release: get(lib, "cuDevicePrimaryCtxRelease_v2")?,
            ctx_set_current: get(lib, "cuCtxSetCurrent")?,
            mem_alloc: get(lib, "cuMemAlloc_v2")?,
            mem_alloc_managed: get(lib, "cuMemAllocManaged")?,
            mem_host_alloc: get(lib, "cuMemHostAlloc")?,
            mem_free: get(lib, "cuMemFree_v2")?,
            mem_free_host: get(lib, "cuMemFreeHost")?,
            memcpy_htod: get(lib, "cuMemcpyHtoD_v2")?,
            memcpy_dtoh: get(lib, "cuMemcpyDtoH_v2")?,
            memset_d8: get(lib, "cuMemsetD8_v2")?,
            get_error_string: get(lib, "cuGetErrorString")?,
            device_total_mem: get(lib, "cuDeviceTotalMem_v2")?,
            get_handle_for_address_range: get(lib, "cuMemGetHandleForAddressRange").ok(),
        })
    }
}

/// A call's CUresult as a failure naming the call and the driver's words.
fn check(api: &Api, call: &'static str, code: CuResult) -> Result<(), CallFailure> {
    if code == 0 {
        return Ok(());
    }
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: text is a valid out pointer; the driver points it at a static string or leaves it null.
    let known = unsafe { (api.get_error_string)(code, &mut text) } == 0 && !text.is_null();
    let message = match known {
        // SAFETY: a static NUL-terminated string of the driver's.
        true => unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned(),
        false => "unknown error".to_string(),
    };
    Err(CallFailure { call, code, message })
}
