//! Registered memory for the NIC: page-aligned, zero-initialised, freed only
//! after deregistration, touched by the CPU only through volatile accesses
//! (the NIC may be reading or writing it at any time). Or a memory
//! provider's buffer (a GPU's), registered through its dma-buf or its
//! address (peer memory), freed through the provider; the CPU never
//! touches that one.

use std::alloc::{self, Layout};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use sideway::ibverbs::memory_region::{MemoryRegion, RegisterMemoryRegionErrorKind};
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::AccessFlags;

use crate::plan::GpuRegistration;
use crate::transport::memory::{Buffer, MemoryError, MemoryProvider};

/// What dma-buf needs, said wherever it failed.
const DMA_BUF_NEEDS: &str = "Linux ≥ 5.12 and an NVIDIA driver ≥ 515 with the open kernel modules";

/// Why a provider's buffer could not be allocated or registered; each says
/// what would fix it.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error("allocating {len} bytes of {what}: {cause}")]
    Allocate { len: usize, what: String, cause: MemoryError },
    #[error(
        "gpu_registration = \"dmabuf\" on {what}: {why}; dma-buf needs {needs}, or use \
         gpu_registration = \"peermem\" with nvidia_peermem loaded",
        needs = DMA_BUF_NEEDS
    )]
    Dmabuf { what: String, why: DmabufFailure },
    #[error(
        "ibv_reg_mr on {what} at {addr:#x} ({len} bytes): {cause}: load nvidia_peermem (modprobe nvidia_peermem) \
         so verbs can register GPU memory, or register through dma-buf, which needs {needs}{tried}",
        needs = DMA_BUF_NEEDS,
        tried = .dma_buf.as_ref().map(|why| format!(" (dma-buf was tried: {why})")).unwrap_or_default()
    )]
    Peermem {
        what: String,
        addr: u64,
        len: usize,
        cause: RegisterMemoryRegionErrorKind,
        dma_buf: Option<DmabufFailure>,
    },
}

/// Why a buffer was not registered through its dma-buf.
#[derive(Debug, thiserror::Error)]
pub enum DmabufFailure {
    /// The provider could not export the buffer.
    #[error(transparent)]
    Export(MemoryError),
    #[error("ibv_reg_dmabuf_mr({len} bytes): {cause}")]
    Register { len: usize, cause: RegisterMemoryRegionErrorKind },
}

/// Registered, page-aligned, zero-initialised memory.
pub(crate) struct Arena {
    /// Deregistered in `Drop` before the memory is freed.
    mr: Option<Arc<MemoryRegion>>,
    ptr: NonNull<u8>,
    layout: Layout,
    /// A provider's buffer instead of `ptr` (which is then dangling and
    /// never read): freed through its provider after deregistration.
    provided: Option<Provided>,
}

struct Provided {
    provider: Box<dyn MemoryProvider>,
    /// Locked only to copy to or from it (data validation), which the
    /// provider's interface takes `&mut` for.
    buffer: Mutex<Option<Buffer>>,
    /// The dma-buf the MR was made from, closed after deregistration.
    _dma_buf: Option<OwnedFd>,
}

impl Provided {
    fn buffer(&self) -> MutexGuard<'_, Option<Buffer>> {
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How a provider's buffer was registered, and why that way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Registered {
    pub how: GpuRegistration,
    pub why: String,
}

// SAFETY: the arena exclusively owns its allocation; the CPU touches it only
// through the volatile accessors below (plain integers, no references handed
// out), so sharing or moving it between threads cannot create data races in
// the Rust sense; the NIC's DMA is outside the language model either way.
unsafe impl Send for Arena {}
// SAFETY: see `Send`: all accessors take `&self` and use volatile raw access.
unsafe impl Sync for Arena {}

impl Arena {
    pub(crate) fn new(pd: &Arc<ProtectionDomain>, len: usize, access: AccessFlags) -> io::Result<Arena> {
        let layout = Layout::from_size_align(len.max(64), 4096)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        // SAFETY: `ptr` is valid for `layout.size()` bytes and stays allocated
        // until `Drop`, which deregisters the MR before freeing it.
        let mr = unsafe { pd.reg_mr(ptr.as_ptr() as usize, layout.size(), access) };
        match mr {
            Ok(mr) => Ok(Arena { mr: Some(mr), ptr, layout, provided: None }),
            Err(e) => {
                // SAFETY: allocated above with this layout, never registered.
                unsafe { alloc::dealloc(ptr.as_ptr(), layout) };
                // Keep the kind (ENOMEM: out of locked memory) under the text.
                let kind = match &e.0 {
                    RegisterMemoryRegionErrorKind::Ibverbs(os) => os.kind(),
                    _ => io::ErrorKind::Other,
                };
                Err(io::Error::new(kind, format!("ibv_reg_mr({} bytes): {}", layout.size(), e.0)))
            }
        }
    }

    /// `len` bytes of `provider`'s memory, registered as `how` says:
    /// dma-buf first under `Auto`, then peer memory. The error says what
    /// each way needs; the buffer is freed when registration fails.
    pub(crate) fn provided(
        pd: &Arc<ProtectionDomain>,
        provider: Box<dyn MemoryProvider>,
        len: usize,
        how: GpuRegistration,
        access: AccessFlags,
    ) -> Result<(Arena, Registered), RegisterError> {
        let len = len.max(64).next_multiple_of(4096);
        let what = provider.describe();
        let buffer = match provider.allocate(len) {
            Ok(buffer) => buffer,
            Err(cause) => return Err(RegisterError::Allocate { len, what, cause }),
        };
        let addr = buffer.address();
        let mut dma_buf = None;
        if how != GpuRegistration::Peermem {
            let tried = provider.dma_buf(&buffer).map_err(DmabufFailure::Export).and_then(|dma| {
                // SAFETY: the fd is the buffer's dma-buf, covering `offset..offset + len`;
                // the buffer stays allocated until `Drop`, which deregisters first.
                let mr = unsafe { pd.reg_dmabuf_mr(dma.offset, len, addr, dma.fd.as_raw_fd(), access) };
                mr.map(|mr| (mr, dma.fd)).map_err(|e| DmabufFailure::Register { len, cause: e.0 })
            });
            match tried {
                Ok((mr, fd)) => {
                    let why = "the driver exported the buffer as dma-buf".to_string();
                    return Ok((
                        Arena::holding(mr, provider, buffer, Some(fd)),
                        Registered { how: GpuRegistration::Dmabuf, why },
                    ));
                }
                Err(why) if how == GpuRegistration::Dmabuf => {
                    drop(provider.free(buffer));
                    return Err(RegisterError::Dmabuf { what, why });
                }
                Err(why) => dma_buf = Some(why),
            }
        }
        // SAFETY: `addr..addr + len` is the buffer's, allocated until `Drop`,
        // which deregisters before freeing it.
        match unsafe { pd.reg_mr(addr as usize, len, access) } {
            Ok(mr) => {
                // dma-buf was tried (and failed) unless peer memory was asked for.
                let why = match &dma_buf {
                    Some(failed) => format!("no dma-buf ({failed}); the buffer's address registered as peer memory"),
                    None => "asked for (gpu_registration = \"peermem\")".to_string(),
                };
                Ok((Arena::holding(mr, provider, buffer, None), Registered { how: GpuRegistration::Peermem, why }))
            }
            Err(e) => {
                drop(provider.free(buffer));
                Err(RegisterError::Peermem { what, addr, len, cause: e.0, dma_buf })
            }
        }
    }

    fn holding(
        mr: Arc<MemoryRegion>,
        provider: Box<dyn MemoryProvider>,
        buffer: Buffer,
        dma_buf: Option<OwnedFd>,
    ) -> Arena {
        let layout = Layout::from_size_align(buffer.len(), 4096).expect("a page-aligned length");
        Arena {
            mr: Some(mr),
            ptr: NonNull::dangling(),
            layout,
            provided: Some(Provided { provider, buffer: Mutex::new(Some(buffer)), _dma_buf: dma_buf }),
        }
    }

    fn mr(&self) -> &MemoryRegion {
        self.mr.as_deref().expect("MR present until drop")
    }
    pub(crate) fn addr(&self) -> u64 {
        match &self.provided {
            Some(p) => p.buffer().as_ref().map_or(0, Buffer::address),
            None => self.ptr.as_ptr() as u64,
        }
    }
    pub(crate) fn len(&self) -> usize {
        self.layout.size()
    }
    pub(crate) fn lkey(&self) -> u32 {
        self.mr().lkey()
    }
    pub(crate) fn rkey(&self) -> u32 {
        self.mr().rkey()
    }

    /// Panics unless `[off, off+len)` lies inside the arena.
    pub(super) fn check(&self, off: usize, len: usize) {
        assert!(off.checked_add(len).is_some_and(|end| end <= self.len()), "arena access {off}+{len} out of bounds");
    }

    /// Panics on a provider's buffer: scenario validation keeps the flows
    /// whose CPU reads or writes the buffer (latency, atomics) on host memory.
    fn cpu_check(&self, off: usize, len: usize) {
        assert!(self.provided.is_none(), "the CPU does not touch GPU memory");
        self.check(off, len);
    }

    pub(crate) fn read_u8(&self, off: usize) -> u8 {
        self.cpu_check(off, 1);
        // SAFETY: in bounds (checked); volatile because the NIC writes it.
        unsafe { ptr::read_volatile(self.ptr.as_ptr().add(off)) }
    }
    pub(crate) fn write_u8(&self, off: usize, v: u8) {
        self.cpu_check(off, 1);
        // SAFETY: in bounds (checked); volatile because the NIC reads it.
        unsafe { ptr::write_volatile(self.ptr.as_ptr().add(off), v) }
    }
    /// Copies `from` into the arena at `off` (data validation's patterns,
    /// written before the flow runs); a provider's buffer through its
    /// provider (for a GPU's, the driver).
    pub(crate) fn write_bytes(&self, off: usize, from: &[u8]) -> Result<(), MemoryError> {
        self.check(off, from.len());
        match &self.provided {
            Some(p) => p.buffer().as_mut().map_or(Ok(()), |b| p.provider.copy_from_host(b, off, from)),
            None => {
                // SAFETY: in bounds (checked); `from` is the caller's memory, never the arena's.
                unsafe { ptr::copy_nonoverlapping(from.as_ptr(), self.ptr.as_ptr().add(off), from.len()) };
                Ok(())
            }
        }
    }
    /// Copies the arena's bytes at `off` into `to`: a snapshot of what the
    /// NIC last wrote there (data validation's checks), as `write_bytes`.
    pub(crate) fn read_bytes(&self, off: usize, to: &mut [u8]) -> Result<(), MemoryError> {
        self.check(off, to.len());
        match &self.provided {
            Some(p) => p.buffer().as_ref().map_or(Ok(()), |b| p.provider.copy_to_host(b, off, to)),
            None => {
                // SAFETY: in bounds (checked); `to` is the caller's memory, never the arena's.
                unsafe { ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), to.as_mut_ptr(), to.len()) };
                Ok(())
            }
        }
    }
    /// Reads an 8-byte word (atomics targets/results); `off` must be 8-aligned.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn read_u64(&self, off: usize) -> u64 {
        self.cpu_check(off, 8);
        assert!(off.is_multiple_of(8), "unaligned u64 at {off}");
        // SAFETY: in bounds and aligned (base is page-aligned); volatile (DMA).
        unsafe { ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<u64>()) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // Deregister first: the NIC must not touch the memory once it is freed.
        drop(self.mr.take());
        if let Some(mut p) = self.provided.take() {
            let buffer = p.buffer.get_mut().unwrap_or_else(PoisonError::into_inner).take();
            if let Some(Err(e)) = buffer.map(|b| p.provider.free(b)) {
                crate::diag!("fabricbench: freeing {}: {e}", p.provider.describe());
            }
            return;
        }
        // SAFETY: allocated in `new` with `self.layout`; the MR is gone and no
        // QP can reference the arena any more (QPs hold an `Arc<Arena>`).
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registration_errors_say_what_would_fix_them() {
        let what = "CUDA GPU 0 (Device memory)".to_string();
        let export =
            || DmabufFailure::Export(MemoryError::NoDmaBuf { provider: what.clone(), why: "old driver".into() });
        let refused = RegisterError::Dmabuf { what: what.clone(), why: export() };
        assert_eq!(
            refused.to_string(),
            "gpu_registration = \"dmabuf\" on CUDA GPU 0 (Device memory): CUDA GPU 0 (Device memory) memory cannot be \
             exported as dma-buf: old driver; dma-buf needs Linux ≥ 5.12 and an NVIDIA driver ≥ 515 with the open \
             kernel modules, or use gpu_registration = \"peermem\" with nvidia_peermem loaded"
        );
        let cause = || RegisterMemoryRegionErrorKind::Ibverbs(io::Error::from_raw_os_error(14));
        let peermem =
            |dma_buf| RegisterError::Peermem { what: what.clone(), addr: 0x7f00, len: 4096, cause: cause(), dma_buf };
        let text = peermem(None).to_string();
        assert!(
            text.starts_with("ibv_reg_mr on CUDA GPU 0 (Device memory) at 0x7f00 (4096 bytes): Bad address"),
            "{text}"
        );
        assert!(text.ends_with("with the open kernel modules"), "{text}");
        let tried = DmabufFailure::Register { len: 4096, cause: cause() };
        let text = peermem(Some(tried)).to_string();
        assert!(
            text.ends_with(" (dma-buf was tried: ibv_reg_dmabuf_mr(4096 bytes): Bad address (os error 14))"),
            "{text}"
        );
    }
}
