//! GPU memory in the summary: one line per phase with GPU-memory flows,
//! saying what each end registered and how (dma-buf or peer memory), and
//! why, each distinct way once with the flows that used it.

use crate::result::PhaseResult;
use crate::scenario::memory::GpuRegistration;
use crate::transport::rdma::GpuMemoryUse;

/// "sender on h1: cuda on GPU 0 (auto: …), dma-buf (why)".
fn describe(end: &str, host: &str, g: &GpuMemoryUse) -> String {
    let how = match g.registration {
        GpuRegistration::Dmabuf => "dma-buf",
        GpuRegistration::Peermem | GpuRegistration::Auto => "peer memory",
    };
    format!("{end} on {host}: {} on GPU {} ({}), registered by {how} ({})", g.memory.name(), g.gpu, g.chosen, g.why)
}

/// The summary's line for a phase whose flows had GPU memory.
pub fn line(p: &PhaseResult) -> Option<String> {
    let mut ways: Vec<(String, Vec<u32>)> = Vec::new();
    for f in &p.flows {
        let Some(gpu) = &f.gpu_memory else { continue };
        let ends = [("sender", &f.src_host, &gpu.sender), ("receiver", &f.dst_host, &gpu.receiver)];
        for (end, host, rails) in ends {
            for way in rails.iter().map(|g| describe(end, host, g)) {
                match ways.iter_mut().find(|(w, _)| *w == way) {
                    Some((_, flows)) => flows.push(f.id),
                    None => ways.push((way, vec![f.id])),
                }
            }
        }
    }
    if ways.is_empty() {
        return None;
    }
    let named: Vec<String> = ways
        .iter()
        .map(|(way, flows)| match flows.len() {
            1 => format!("flow {}: {way}", flows[0]),
            n => format!("{n} flows: {way}"),
        })
        .collect();
    Some(format!("GPU memory: {}", named.join("; ")))
}
