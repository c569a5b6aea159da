//! The locked-memory limit. Verbs pin what they register (`ibv_reg_mr`, and
//! on NICs the CQ and QP rings), charged to RLIMIT_MEMLOCK unless the
//! process holds CAP_IPC_LOCK; many systems start shells and services with
//! 64 KiB or 8 MiB, and the setup call then fails with ENOMEM alone.

use std::io;

use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};

/// What to add to a verbs setup error that ran out of memory while this
/// process's locked-memory limit is finite: the limit and how to raise it;
/// nothing for any other error or an unlimited process.
pub(crate) fn hint(error: &(dyn std::error::Error + 'static)) -> String {
    if !out_of_memory(error) {
        return String::new();
    }
    match getrlimit(Resource::RLIMIT_MEMLOCK) {
        Ok((soft, _)) if soft != RLIM_INFINITY => limited_to(soft),
        _ => String::new(),
    }
}

fn limited_to(soft: u64) -> String {
    format!(
        " (RLIMIT_MEMLOCK is {} KiB here, and verbs pin the memory they register: raise it where fabricbench \
         starts — `ulimit -l unlimited`, LimitMEMLOCK=infinity for a systemd unit, `* - memlock unlimited` in \
         /etc/security/limits.conf — and run again)",
        soft / 1024
    )
}

/// Whether an io::Error among the causes says ENOMEM.
fn out_of_memory(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == io::ErrorKind::OutOfMemory) {
            return true;
        }
        cause = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("failed to create completion queue")]
    struct Outer(#[source] io::Error);

    #[test]
    fn out_of_memory_is_found_among_the_causes() {
        assert!(out_of_memory(&Outer(io::Error::from_raw_os_error(libc::ENOMEM))));
        assert!(out_of_memory(&io::Error::new(io::ErrorKind::OutOfMemory, "ibv_reg_mr(1048576 bytes)")));
        assert!(!out_of_memory(&Outer(io::Error::from_raw_os_error(libc::EINVAL))));
        assert_eq!(hint(&Outer(io::Error::from_raw_os_error(libc::EINVAL))), "");
    }

    #[test]
    fn the_hint_names_the_limit_and_how_to_raise_it() {
        let h = limited_to(64 * 1024);
        assert!(h.starts_with(" (RLIMIT_MEMLOCK is 64 KiB here,"), "{h}");
        assert!(h.contains("`ulimit -l unlimited`") && h.contains("LimitMEMLOCK=infinity"), "{h}");
    }
}
