//! Host memory: what every flow end uses today, behind the same interface
//! as a GPU's so that callers need not tell them apart.

use super::{within, Buffer, DmaBuf, Memory, MemoryError, MemoryProvider};

const NAME: &str = "host";

/// Ordinary, zeroed heap memory.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostMemory;

impl HostMemory {
    fn bytes<'a>(&self, buffer: &'a Buffer) -> Result<&'a [u8], MemoryError> {
        match &buffer.memory {
            Memory::Host(bytes) => Ok(bytes),
            Memory::Cuda(_) => Err(foreign(buffer)),
        }
    }

    fn bytes_mut<'a>(&self, buffer: &'a mut Buffer) -> Result<&'a mut [u8], MemoryError> {
        let owner = buffer.owner.clone();
        match &mut buffer.memory {
            Memory::Host(bytes) => Ok(bytes),
            Memory::Cuda(_) => Err(MemoryError::Foreign { owner, provider: NAME.into() }),
        }
    }
}

fn foreign(buffer: &Buffer) -> MemoryError {
    MemoryError::Foreign { owner: buffer.owner.clone(), provider: NAME.into() }
}

impl MemoryProvider for HostMemory {
    fn describe(&self) -> String {
        NAME.into()
    }

    fn allocate(&self, len: usize) -> Result<Buffer, MemoryError> {
        let bytes = vec![0u8; len].into_boxed_slice();
        Ok(Buffer { address: bytes.as_ptr() as u64, len, owner: NAME.into(), memory: Memory::Host(bytes) })
    }

    fn free(&self, buffer: Buffer) -> Result<(), MemoryError> {
        self.bytes(&buffer).map(drop)
    }

    fn copy_from_host(&self, to: &mut Buffer, offset: usize, from: &[u8]) -> Result<(), MemoryError> {
        within(offset, from.len(), to.len)?;
        self.bytes_mut(to)?[offset..offset + from.len()].copy_from_slice(from);
        Ok(())
    }

    fn copy_to_host(&self, from: &Buffer, offset: usize, to: &mut [u8]) -> Result<(), MemoryError> {
        within(offset, to.len(), from.len)?;
        to.copy_from_slice(&self.bytes(from)?[offset..offset + to.len()]);
        Ok(())
    }

    fn fill(&self, buffer: &mut Buffer, byte: u8) -> Result<(), MemoryError> {
        self.bytes_mut(buffer)?.fill(byte);
        Ok(())
    }

    fn dma_buf(&self, _: &Buffer) -> Result<DmaBuf, MemoryError> {
        Err(MemoryError::NoDmaBuf { provider: NAME.into(), why: "host memory is registered as it is".into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_memory_copies_fills_checks_and_refuses_what_does_not_fit() {
        let host = HostMemory;
        let mut b = host.allocate(4096).unwrap();
        assert_eq!((b.len(), b.address() != 0), (4096, true));
        host.check(&b, 0).unwrap();
        host.fill(&mut b, 0xa5).unwrap();
        host.check(&b, 0xa5).unwrap();
        host.copy_from_host(&mut b, 100, b"xyz").unwrap();
        let mut back = [0u8; 5];
        host.copy_to_host(&b, 99, &mut back).unwrap();
        assert_eq!(&back, b"\xa5xyz\xa5");
        let e = host.check(&b, 0xa5).unwrap_err();
        assert_eq!(e.to_string(), "buffer check failed at byte 100: 0x78, expected 0xa5");
        let e = host.copy_from_host(&mut b, 4095, b"ab").unwrap_err();
        assert_eq!(e.to_string(), "2 bytes at offset 4095 do not fit a buffer of 4096 bytes");
        assert!(host.copy_to_host(&b, usize::MAX, &mut back).is_err(), "no overflow");
        assert!(matches!(host.dma_buf(&b), Err(MemoryError::NoDmaBuf { .. })));
        host.free(b).unwrap();
    }

    #[test]
    fn rocm_is_refused_with_a_clear_error() {
        let e = super::super::open(super::super::MemoryKind::Rocm { gpu: 0 }).err().unwrap();
        assert_eq!(e.to_string(), "ROCm GPU memory is not supported yet: use host memory or an NVIDIA GPU");
        assert_eq!(super::super::open(super::super::MemoryKind::Host).unwrap().describe(), "host");
    }
}
