//! The open-files limit. Rank 0 holds one control connection per rank, a
//! TCP receiver one socket per incoming stream, and the ssh launcher three
//! pipes per worker: the soft limit many systems start with (1024) ends a
//! run of a thousand hosts, so every fabricbench process raises it to the
//! hard limit the administrator allows, as Go programs do by default.

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit.
pub fn raise() -> nix::Result<u64> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok(hard)
}

/// The soft RLIMIT_NOFILE now (after [`raise`]: what this process may open).
pub fn current() -> nix::Result<u64> {
    Ok(getrlimit(Resource::RLIMIT_NOFILE)?.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_limit_ends_at_the_hard_limit() {
        let raised = raise().unwrap();
        assert_eq!(getrlimit(Resource::RLIMIT_NOFILE).unwrap(), (raised, raised));
    }
}
