//! Registered memory for the NIC: page-aligned, zero-initialised, freed only
//! after deregistration, touched by the CPU only through volatile accesses
//! (the NIC may be reading or writing it at any time).

use std::alloc::{self, Layout};
use std::io;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::AccessFlags;

/// Registered, page-aligned, zero-initialised memory.
pub(crate) struct Arena {
    /// Deregistered in `Drop` before the memory is freed.
    mr: Option<Arc<MemoryRegion>>,
    ptr: NonNull<u8>,
    layout: Layout,
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
            Ok(mr) => Ok(Arena { mr: Some(mr), ptr, layout }),
            Err(e) => {
                // SAFETY: allocated above with this layout, never registered.
                unsafe { alloc::dealloc(ptr.as_ptr(), layout) };
                let os = e.0.to_string();
                Err(io::Error::other(format!("ibv_reg_mr({} bytes): {os}", layout.size())))
            }
        }
    }

    fn mr(&self) -> &MemoryRegion {
        self.mr.as_deref().expect("MR present until drop")
    }
    pub(crate) fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
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

    pub(crate) fn read_u8(&self, off: usize) -> u8 {
        self.check(off, 1);
        // SAFETY: in bounds (checked); volatile because the NIC writes it.
        unsafe { ptr::read_volatile(self.ptr.as_ptr().add(off)) }
    }
    pub(crate) fn write_u8(&self, off: usize, v: u8) {
        self.check(off, 1);
        // SAFETY: in bounds (checked); volatile because the NIC reads it.
        unsafe { ptr::write_volatile(self.ptr.as_ptr().add(off), v) }
    }
    /// Reads an 8-byte word (atomics targets/results); `off` must be 8-aligned.
    pub(crate) fn read_u64(&self, off: usize) -> u64 {
        self.check(off, 8);
        assert!(off.is_multiple_of(8), "unaligned u64 at {off}");
        // SAFETY: in bounds and aligned (base is page-aligned); volatile (DMA).
        unsafe { ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<u64>()) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // Deregister first: the NIC must not touch the memory once it is freed.
        drop(self.mr.take());
        // SAFETY: allocated in `new` with `self.layout`; the MR is gone and no
        // QP can reference the arena any more (QPs hold an `Arc<Arena>`).
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}
