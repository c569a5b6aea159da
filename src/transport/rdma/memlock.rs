//! The locked-memory limit. Verbs pin what they register (`ibv_reg_mr`, and
//! on NICs the CQ and QP rings), charged to RLIMIT_MEMLOCK unless the
//! process holds CAP_IPC_LOCK; many systems start shells and services with
//! 64 KiB or 8 MiB, and the setup call then fails with ENOMEM alone.
//! Every fabricbench process raises its soft limit to the hard one (what
//! `ulimit -l` may do unprivileged); what is left is named in the error.

use std::io;

use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};

/// Raises the soft RLIMIT_MEMLOCK to the hard limit.
pub fn raise() -> nix::Result<()> {
    crate::fdlimit::raise_to_hard(Resource::RLIMIT_MEMLOCK).map(drop)
}

/// What to add to a verbs setup error that ran out of memory while this
/// process's locked-memory limit is finite: the limit and how to raise it;
/// nothing for any other error or an unlimited process.
pub(crate) fn hint(error: &(dyn std::error::Error + 'static)) -> String {
    if !out_of_memory(error) {
        return String::new();
    }
    match getrlimit(Resource::RLIMIT_MEMLOCK) {
        Ok((soft, hard)) if soft != RLIM_INFINITY => limited_to(soft, hard),
        _ => String::new(),
    }
}

fn limited_to(soft: u64, hard: u64) -> String {
    let hard = match hard {
        RLIM_INFINITY => "unlimited".to_string(),
        h if h == soft => "its hard limit too".to_string(),
        h => format!("hard limit {} KiB", h / 1024),
    };
    format!(
        " (RLIMIT_MEMLOCK is {} KiB here, {hard}, and verbs pin the memory they register: raise it where \
         fabricbench starts — {HOW_TO_RAISE} — and run again)",
        soft / 1024
    )
}

/// The ways to lift the locked-memory limit of the processes a host starts.
pub const HOW_TO_RAISE: &str = "`ulimit -l unlimited`, LimitMEMLOCK=infinity for a systemd unit (sshd, slurmd), \
     `* - memlock unlimited` in /etc/security/limits.conf";

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
    fn soft_limit_ends_at_the_hard_limit() {
        raise().unwrap();
        let (soft, hard) = getrlimit(Resource::RLIMIT_MEMLOCK).unwrap();
        assert_eq!(soft, hard);
    }

    #[test]
    fn the_hint_names_the_limit_and_how_to_raise_it() {
        let h = limited_to(64 * 1024, 64 * 1024);
        assert!(h.starts_with(" (RLIMIT_MEMLOCK is 64 KiB here, its hard limit too,"), "{h}");
        assert!(limited_to(64 * 1024, 8 << 20).starts_with(" (RLIMIT_MEMLOCK is 64 KiB here, hard limit 8192 KiB,"));
        assert!(limited_to(64 * 1024, RLIM_INFINITY).starts_with(" (RLIMIT_MEMLOCK is 64 KiB here, unlimited,"));
        assert!(h.contains("`ulimit -l unlimited`") && h.contains("LimitMEMLOCK=infinity"), "{h}");
    }
}
