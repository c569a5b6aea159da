//! Where an RDMA group's buffers live (`memory`), which GPU (`gpu`) and how
//! the NIC is given GPU memory (`[group.rdma] gpu_registration`). The
//! scenario forms (a string or a table, an index or a bus id) are read only
//! from human-readable formats; on the postcard wire each is a plain tagged
//! value, since postcard cannot tell a string from a number by looking.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use crate::hostfile::GpuChoice;

/// The memory one end of a flow sends from or receives into.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Memory {
    /// Page-aligned host memory (the default).
    #[default]
    Host,
    /// GPU device memory (cuMemAlloc).
    Cuda,
    /// CUDA managed memory (cuMemAllocManaged).
    CudaManaged,
    /// Pinned host memory the GPU maps (cuMemHostAlloc).
    CudaHost,
}

impl Memory {
    /// Every memory, in the order messages list them.
    pub const ALL: [Memory; 4] = [Memory::Host, Memory::Cuda, Memory::CudaManaged, Memory::CudaHost];

    /// The memory a scenario's name (`"cuda-managed"`) names.
    pub fn named(name: &str) -> Option<Memory> {
        Memory::ALL.into_iter().find(|m| m.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Memory::Host => "host",
            Memory::Cuda => "cuda",
            Memory::CudaManaged => "cuda-managed",
            Memory::CudaHost => "cuda-host",
        }
    }

    pub fn is_gpu(self) -> bool {
        self != Memory::Host
    }
}

/// Each end's memory: `memory = "cuda"` (both) or
/// `memory = { sender = "cuda", receiver = "host" }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MemorySides {
    pub sender: Memory,
    pub receiver: Memory,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SidesTable {
    sender: Memory,
    receiver: Memory,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SidesForm {
    Both(Memory),
    Table(SidesTable),
}

impl MemorySides {
    pub fn any_gpu(&self) -> bool {
        self.sender.is_gpu() || self.receiver.is_gpu()
    }
}

impl Serialize for MemorySides {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() && self.sender == self.receiver {
            return self.sender.serialize(s);
        }
        SidesTable { sender: self.sender, receiver: self.receiver }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for MemorySides {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let table = match d.is_human_readable() {
            true => match SidesForm::deserialize(d).map_err(|_| {
                serde::de::Error::custom(
                    "expected \"host\", \"cuda\", \"cuda-managed\" or \"cuda-host\", or a table \
                     { sender = \"cuda\", receiver = \"host\" }",
                )
            })? {
                SidesForm::Both(m) => SidesTable { sender: m, receiver: m },
                SidesForm::Table(t) => t,
            },
            false => SidesTable::deserialize(d)?,
        };
        Ok(MemorySides { sender: table.sender, receiver: table.receiver })
    }
}

/// How GPU memory is registered with the NIC.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum GpuRegistration {
    /// dma-buf when the driver exports the buffer, else peer memory.
    #[default]
    Auto,
    /// `ibv_reg_dmabuf_mr` on the buffer's dma-buf (kernel ≥ 5.12, NVIDIA
    /// driver ≥ 515 with the open kernel modules); no fallback.
    Dmabuf,
    /// `ibv_reg_mr` on the device address (needs nvidia_peermem loaded).
    Peermem,
}

impl GpuRegistration {
    /// As the scenario writes it.
    pub fn name(self) -> &'static str {
        match self {
            GpuRegistration::Auto => "auto",
            GpuRegistration::Dmabuf => "dmabuf",
            GpuRegistration::Peermem => "peermem",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse;
    use crate::scenario::tests::{err, FAN_IN};

    /// FAN_IN with `lines` added to its group.
    fn group(lines: &str) -> String {
        FAN_IN.replace("senders = \"1-3\"", &format!("senders = \"1-3\"\n{lines}"))
    }

    #[test]
    fn gpu_memory_on_a_tcp_group_is_refused_naming_file_group_and_key() {
        assert_eq!(
            err(&group("memory = \"cuda\"")),
            "s.toml:14: group \"incast\": field `memory`: GPU memory is registered with an RDMA NIC: it needs \
             transport = \"rdma\" (TCP streams send from host memory)"
        );
        let e = err(&group("gpu = 1"));
        assert!(e.starts_with("s.toml:14: group \"incast\": field `gpu`: GPU memory is registered"), "{e}");
        parse(&group("memory = \"host\""), std::path::Path::new("s.toml")).expect("host memory is TCP's own");
    }

    #[test]
    fn an_rdma_group_carries_memory_gpu_and_registration_to_its_flows() {
        let text = group(
            "transport = \"rdma\"\nmemory = { sender = \"cuda\", receiver = \"host\" }\ngpu = \"0000:1B:00.0\"\n\
             [group.rdma]\ngpu_registration = \"peermem\"",
        );
        let (s, _) = parse(&text, std::path::Path::new("s.toml")).expect("parses");
        let p = s.groups[0].rdma_params().expect("an RDMA group");
        assert_eq!(p.memory, MemorySides { sender: Memory::Cuda, receiver: Memory::Host });
        assert_eq!(p.gpu, GpuChoice::BusId("0000:1b:00.0".into()));
        assert_eq!(p.knobs.gpu_registration, GpuRegistration::Peermem);
    }

    #[test]
    fn gpu_memory_is_for_bandwidth_flows_the_cpu_does_not_touch() {
        let rdma = |lines: &str| group(&format!("transport = \"rdma\"\nmemory = \"cuda\"\n{lines}"));
        let e = err(&rdma("mode = \"latency\""));
        assert!(
            e.ends_with(
                "field `rdma`: invalid RDMA parameter memory: GPU memory carries bandwidth flows only: \
                         latency mode polls the buffer from the CPU; use memory = \"host\" for latency"
            ),
            "{e}"
        );
        let e = err(&rdma("op = \"fetch_add\"").replace("message_size = \"64K\"\n", ""));
        assert!(e.contains("invalid RDMA parameter memory: GPU memory carries write, read and send"), "{e}");
        let e = err(&(rdma("") + "[group.rdma]\ninline_size = 65536\n"));
        assert!(e.contains("inline sends are copied from the buffer by the CPU"), "{e}");
        let e = err(&(group("transport = \"rdma\"") + "[group.rdma]\nmemory = \"cuda\"\n"));
        assert!(e.contains("`memory` is the group's, not a knob of its rdma table"), "{e}");
        for op in ["write", "read", "send"] {
            let (s, _) = parse(&rdma(&format!("op = \"{op}\"")), std::path::Path::new("s.toml")).expect("valid");
            assert!(!s.groups[0].effective_op().is_atomic());
        }
    }

    #[derive(Deserialize, Serialize, Debug, PartialEq)]
    struct Keys {
        memory: MemorySides,
        gpu: GpuChoice,
    }

    #[test]
    fn scenario_forms_read_and_write_back() {
        let k: Keys = toml::from_str("memory = \"cuda\"\ngpu = 3").unwrap();
        assert_eq!(k.memory, MemorySides { sender: Memory::Cuda, receiver: Memory::Cuda });
        assert_eq!(k.gpu, GpuChoice::Index(3));
        let k: Keys =
            toml::from_str("memory = { sender = \"cuda-host\", receiver = \"host\" }\ngpu = \"0000:1B:00.0\"").unwrap();
        assert_eq!(k.memory, MemorySides { sender: Memory::CudaHost, receiver: Memory::Host });
        assert_eq!(k.gpu, GpuChoice::BusId("0000:1b:00.0".into()));
        assert_eq!(toml::from_str::<Keys>(&toml::to_string(&k).unwrap()).unwrap(), k);
        let k: Keys = toml::from_str("memory = \"host\"\ngpu = \"auto\"").unwrap();
        assert_eq!((k.memory, k.gpu), (MemorySides::default(), GpuChoice::Auto));
    }

    #[test]
    fn wrong_forms_say_what_is_valid() {
        let e = toml::from_str::<Keys>("memory = \"rocm\"\ngpu = 0").unwrap_err().to_string();
        assert!(e.contains("expected \"host\", \"cuda\", \"cuda-managed\" or \"cuda-host\""), "{e}");
        let e = toml::from_str::<Keys>("memory = \"cuda\"\ngpu = \"first\"").unwrap_err().to_string();
        assert!(e.contains("expected \"auto\", a GPU index (0, 1, …) or a PCI bus id"), "{e}");
    }

    #[test]
    fn bus_ids_as_sysfs_or_nvidia_smi_write_them() {
        let bus = |t: &str| GpuChoice::bus_id(t);
        assert_eq!(bus("0000:1B:00.0"), Some(GpuChoice::BusId("0000:1b:00.0".into())));
        assert_eq!(bus("00000000:1B:00.0"), Some(GpuChoice::BusId("0000:1b:00.0".into())), "nvidia-smi's domain");
        for wrong in
            ["1b:00.0", "0000:1b:00", "0000:1b:00.0.1", "0001000:1b:00.0", "00010000:1b:00.0", "0000:zz:00.0", ""]
        {
            assert_eq!(bus(wrong), None, "{wrong}");
        }
        let k: Keys = toml::from_str("memory = \"cuda\"\ngpu = \"00000000:C2:00.0\"").unwrap();
        assert_eq!(k.gpu, GpuChoice::BusId("0000:c2:00.0".into()));
    }

    #[test]
    fn postcard_carries_every_form() {
        for gpu in [GpuChoice::Auto, GpuChoice::Index(7), GpuChoice::BusId("0000:1b:00.0".into())] {
            let k = Keys { memory: MemorySides { sender: Memory::Cuda, receiver: Memory::CudaManaged }, gpu };
            let bytes = postcard::to_allocvec(&k).unwrap();
            assert_eq!(postcard::from_bytes::<Keys>(&bytes).unwrap(), k);
        }
    }
}
