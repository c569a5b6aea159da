//! The open-files limit. Rank 0 holds one control connection per rank, a
//! TCP receiver one socket per incoming stream, and the ssh launcher three
//! pipes per worker: the soft limit many systems start with (1024) ends a
//! run of a thousand hosts, so every fabricbench process raises it to the
//! hard limit the administrator allows, as Go programs do by default.
//! [`raise_to_hard`] does the same for any limit (the locked-memory one:
//! `transport::rdma::memlock`).

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit.
pub fn raise() -> nix::Result<u64> {
    raise_to_hard(Resource::RLIMIT_NOFILE)
}

/// Raises the soft limit of `resource` to its hard limit, as an
/// unprivileged `ulimit` may; returns the new soft limit.
pub fn raise_to_hard(resource: Resource) -> nix::Result<u64> {
    let (soft, hard) = getrlimit(resource)?;
    if soft < hard {
        setrlimit(resource, hard, hard)?;
    }
    Ok(hard)
}

/// The soft RLIMIT_NOFILE now (after [`raise`]: what this process may open).
pub fn current() -> nix::Result<u64> {
    Ok(getrlimit(Resource::RLIMIT_NOFILE)?.0)
}

/// What to add to an error that ran out of descriptors (EMFILE): the limit
/// and how to raise it; nothing for any other error.
pub fn hint(error: &std::io::Error) -> String {
    if error.raw_os_error() != Some(libc::EMFILE) {
        return String::new();
    }
    let limit = current().map_or_else(|_| "unknown".to_string(), |n| n.to_string());
    format!(
        " (this process may open {limit} files, RLIMIT_NOFILE at its hard limit: raise the hard limit with `ulimit -Hn`, `nofile` in limits.conf or systemd's LimitNOFILE=)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_descriptors_says_the_limit_and_how_to_raise_it() {
        let emfile = std::io::Error::from_raw_os_error(libc::EMFILE);
        let limit = current().unwrap();
        assert!(hint(&emfile).contains(&format!("may open {limit} files")), "{}", hint(&emfile));
        assert!(hint(&emfile).contains("ulimit -Hn"));
        assert_eq!(hint(&std::io::Error::from_raw_os_error(libc::ECONNREFUSED)), "");
    }

    #[test]
    fn soft_limit_ends_at_the_hard_limit() {
        let raised = raise().unwrap();
        assert_eq!(getrlimit(Resource::RLIMIT_NOFILE).unwrap(), (raised, raised));
    }
}
