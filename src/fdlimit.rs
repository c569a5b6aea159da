//! The open-files limit. Rank 0 holds one control connection per rank, a
//! TCP receiver one socket per incoming stream, and the ssh launcher three
//! pipes per worker: the soft limit many systems start with (1024) ends a
//! run of a thousand hosts, so every fabricbench process raises it to the
//! hard limit the administrator allows, as Go programs do by default.

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit.
pub fn raise() -> std::io::Result<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid pointer to an rlimit we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            limit = raised;
        }
    }
    Ok(limit.rlim_cur)
}

#[cfg(test)]
mod tests {
    #[test]
    fn soft_limit_ends_at_the_hard_limit() {
        let soft = super::raise().unwrap();
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
        assert_eq!((soft, limit.rlim_cur), (limit.rlim_max, limit.rlim_max));
    }
}
