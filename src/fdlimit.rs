//! The open-file limit, raised at start.
//!
//! Every RPC connection, peer socket and database table file takes a
//! descriptor. Under a soft limit of 1024 (systemd's and most shells'
//! default) a few hundred idle connections plus the database's file cache
//! reach EMFILE, and a read then fails. geth raises its soft limit to the
//! hard limit at start and sizes its database's handles within it; so does
//! this (the store sizes its file cache from the raised limit when it
//! opens: `sluice_store::db::cached_files_within`).

/// Linux's default `fs.nr_open`: a soft limit above it is refused, so an
/// unlimited hard limit is met with this.
#[cfg(unix)]
const NR_OPEN_DEFAULT: libc::rlim_t = 1 << 20;

/// The open-file soft limit before and after raising it to the hard limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Raised {
    /// The soft limit the process started with.
    pub(crate) before: u64,
    /// The soft limit now.
    pub(crate) after: u64,
    /// The hard limit (the most the soft limit may be raised to without
    /// privilege).
    pub(crate) hard: u64,
}

/// Raises `RLIMIT_NOFILE`'s soft limit to its hard limit. Raising it within
/// the hard limit needs no privilege; an error (which then leaves the limit
/// as it was) is the OS refusing anyway.
#[cfg(unix)]
pub(crate) fn raise_open_file_limit() -> std::io::Result<Raised> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit only writes the struct it is given, which outlives
    // the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let before = limit.rlim_cur;
    let target = if limit.rlim_max == libc::RLIM_INFINITY { NR_OPEN_DEFAULT } else { limit.rlim_max };
    if target > before {
        let raised = libc::rlimit { rlim_cur: target, rlim_max: limit.rlim_max };
        // SAFETY: setrlimit only reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(Raised { before, after: target.max(before), hard: limit.rlim_max })
}

/// Without `RLIMIT_NOFILE` there is nothing to raise.
#[cfg(not(unix))]
pub(crate) fn raise_open_file_limit() -> std::io::Result<Raised> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "no RLIMIT_NOFILE on this platform"))
}

/// Raises the limit and logs it, before and after. A failure is logged
/// and the node starts anyway, within the limit it has: the store sizes
/// its file cache within whatever limit it finds. Then keeps the HTTP
/// connection cap (`rpc.max_connections_per_worker` on each worker) within
/// half the soft limit, so a connection flood cannot take the descriptors
/// the database needs (lowering it, with a warning, if it does not fit).
pub(crate) fn raise_and_fit(rpc: &mut sluice_config::RpcConfig) {
    let soft = raise_and_log();
    let Some(soft) = soft else { return };
    let workers = rpc.workers().max(1) as u64;
    let room = soft / 2;
    if workers * rpc.max_connections_per_worker as u64 > room {
        let fitted = usize::try_from((room / workers).max(1)).unwrap_or(1);
        tracing::warn!(
            soft,
            configured = rpc.max_connections_per_worker,
            fitted,
            "rpc.max_connections_per_worker lowered to fit half the open-file limit; raise the hard limit (ulimit -Hn) to allow more"
        );
        rpc.max_connections_per_worker = fitted;
    }
}

/// Raises the limit and logs it; the soft limit now, if it could be read.
fn raise_and_log() -> Option<u64> {
    match raise_open_file_limit() {
        Ok(r) => {
            if r.after > r.before {
                tracing::info!(
                    before = r.before,
                    after = r.after,
                    hard = r.hard,
                    "raised the open-file soft limit to the hard limit"
                );
            } else {
                tracing::info!(
                    soft = r.after,
                    hard = r.hard,
                    "the open-file soft limit is already the hard limit"
                );
            }
            Some(r.after)
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot raise the open-file soft limit; running within the one inherited");
            None
        }
    }
}
