//! `fabricbench gpus`: this host's GPUs tested through the NVIDIA driver,
//! step by step (what scripts/gpu-check runs on a GPU host's first day).

use clap::Args;

use crate::units::ByteSize;

pub const EXAMPLES: &str = "\
Examples:
  # every GPU the driver sees: model, bus id, memory, then allocate, dma-buf, fill and validate
  fabricbench gpus

  # GPU 1 only, with 256 MiB buffers
  fabricbench gpus --gpu 1 --size 256M

  # through another driver library than libcuda.so.1
  FABRICBENCH_LIBCUDA=/usr/lib64/libcuda.so.1 fabricbench gpus";

/// The largest buffer one step allocates: a check, not a benchmark.
const MAX_SIZE: u64 = 16 << 30;

#[derive(Debug, Args)]
pub struct GpusArgs {
    /// Test only this GPU (CUDA's number, 0, 1, …); default: every GPU the driver counts
    #[arg(long, value_name = "N")]
    pub gpu: Option<usize>,
    /// Each buffer's size, e.g. 64M (1 byte to 16G)
    #[arg(long, value_name = "BYTES", default_value = "64M", value_parser = parse_size)]
    pub size: ByteSize,
}

fn parse_size(text: &str) -> Result<ByteSize, String> {
    let size = ByteSize::parse(text).map_err(|e| e.to_string())?;
    match size.bytes() {
        1..=MAX_SIZE => Ok(size),
        _ => Err(format!("`{text}` is outside 1 byte..=16G: give a buffer size such as 64M")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bounded_and_named() {
        assert_eq!(parse_size("64M").unwrap(), ByteSize(64 << 20));
        assert_eq!(parse_size("0").unwrap_err(), "`0` is outside 1 byte..=16G: give a buffer size such as 64M");
        assert!(parse_size("17G").unwrap_err().starts_with("`17G` is outside"));
        assert!(parse_size("lots").unwrap_err().starts_with("`lots` is not a size"));
    }
}
