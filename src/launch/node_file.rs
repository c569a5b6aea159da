//! A list of nodes the launcher hands a job starter (srun's SLURM_HOSTFILE,
//! mpirun's --hostfile): node names, not secret, removed when dropped.

use std::path::{Path, PathBuf};

use rand::Rng;

pub struct NodeFile(PathBuf);

impl NodeFile {
    /// Writes `text` to a new file in the temporary directory.
    pub fn write(text: &str) -> std::io::Result<NodeFile> {
        let name = format!("fabricbench-{}-{:08x}.nodes", std::process::id(), rand::thread_rng().gen::<u32>());
        let path = std::env::temp_dir().join(name);
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&path)?;
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        Ok(NodeFile(path))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for NodeFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
