//! Process metrics the node exports about itself: CPU time, resident
//! memory, open file descriptors (and their limit) and threads.
//!
//! [`sample`] reads `/proc/self` and sets the gauges; call it from a periodic
//! sampler. Linux only: elsewhere it does nothing. A file that cannot be read
//! or parsed leaves its gauge unchanged rather than failing the sampler.

use crate::metrics as m;

/// Kernel clock ticks per second for `/proc/<pid>/stat` times (`USER_HZ`).
/// It is 100 on every Linux architecture's userspace ABI; Prometheus's own
/// procfs library assumes the same.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const USER_HZ: f64 = 100.0;

/// Samples the process gauges once.
pub fn sample() {
    #[cfg(target_os = "linux")]
    linux::sample();
}

#[cfg(target_os = "linux")]
mod linux {
    use super::{m, parse_cpu_seconds, parse_max_fds, parse_status_value};

    pub(super) fn sample() {
        if let Some(secs) =
            std::fs::read_to_string("/proc/self/stat").ok().as_deref().and_then(parse_cpu_seconds)
        {
            metrics::gauge!(m::PROCESS_CPU_SECONDS).set(secs);
        }
        if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
            if let Some(kib) = parse_status_value(&status, "VmRSS:") {
                metrics::gauge!(m::PROCESS_RESIDENT_MEMORY_BYTES).set(kib * 1024.0);
            }
            if let Some(threads) = parse_status_value(&status, "Threads:") {
                metrics::gauge!(m::PROCESS_THREADS).set(threads);
            }
        }
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            // Counts the descriptor used to read the directory too, as
            // Prometheus's client libraries do.
            metrics::gauge!(m::PROCESS_OPEN_FDS).set(dir.count() as f64);
        }
        if let Some(max) =
            std::fs::read_to_string("/proc/self/limits").ok().as_deref().and_then(parse_max_fds)
        {
            metrics::gauge!(m::PROCESS_MAX_FDS).set(max);
        }
    }
}

/// User plus system CPU seconds from the text of `/proc/<pid>/stat`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_cpu_seconds(stat: &str) -> Option<f64> {
    // The command name (field 2) is in parentheses and may contain spaces or
    // parentheses itself: fields are counted after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After ')': field 3 (state) is index 0, so utime (14) is 11, stime (15) 12.
    let utime: f64 = fields.nth(11)?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

/// The number after `key` in `/proc/<pid>/status` (`Threads:`; `VmRSS:` is in kB).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_status_value(status: &str, key: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// The soft limit on open files from `/proc/<pid>/limits`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_max_fds(limits: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..].split_whitespace().next()?;
    if soft == "unlimited" {
        return None;
    }
    soft.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_seconds_count_fields_after_the_command_name() {
        // A command name with spaces and a ')' must not shift the fields.
        let stat = "1234 (we ird) name) S 1 1234 1234 0 -1 4194560 2660 0 0 0 250 70 0 0 20 0 \
                    9 0 55 123456 789 18446744073709551615";
        assert_eq!(parse_cpu_seconds(stat), Some(3.2));
        assert_eq!(parse_cpu_seconds("garbage"), None);
    }

    #[test]
    fn status_values() {
        let status = "Name:\tsluice\nVmRSS:\t   20480 kB\nThreads:\t17\n";
        assert_eq!(parse_status_value(status, "VmRSS:"), Some(20480.0));
        assert_eq!(parse_status_value(status, "Threads:"), Some(17.0));
        assert_eq!(parse_status_value(status, "VmSwap:"), None);
    }

    #[test]
    fn max_open_files_soft_limit() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_max_fds(limits), Some(1024.0));
        assert_eq!(parse_max_fds("Max open files unlimited unlimited files"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        assert!(parse_cpu_seconds(&stat).is_some());
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        assert!(parse_status_value(&status, "VmRSS:").is_some_and(|kib| kib > 0.0));
        assert!(parse_status_value(&status, "Threads:").is_some_and(|t| t >= 1.0));
        // Without a recorder installed this is a no-op; it must not panic.
        sample();
    }
}
