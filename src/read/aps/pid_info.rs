//! `pid_info` (§7): the thread and process names `ps` printed on the board.

use std::collections::HashMap;
use std::path::Path;

use crate::error::Result;

/// The largest `pid_info` read: a `ps` listing of a million threads is
/// about 50 MiB.
pub const PID_INFO_LIMIT: u64 = 64 << 20;

/// Thread and process names from `pid_info` (`pid tid tty time name` lines).
#[derive(Debug, Default, Clone)]
pub struct PidInfo {
    threads: HashMap<(i64, i64), String>,
    by_tid: HashMap<i64, String>,
}

impl PidInfo {
    /// Parses `ps` output lines (`pid tid tty time name`); other lines are skipped.
    pub fn parse(text: &str) -> PidInfo {
        let mut info = PidInfo::default();
        for line in text.lines() {
            let columns: Vec<&str> = line.split_whitespace().collect();
            // Header lines (`PID TID TTY TIME CMD`) and short lines carry no thread.
            let (Some(pid), Some(tid)) = (
                columns.first().and_then(|c| c.parse::<i64>().ok()),
                columns.get(1).and_then(|c| c.parse::<i64>().ok()),
            ) else {
                continue;
            };
            let Some(name) = columns
                .get(4..)
                .filter(|n| !n.is_empty())
                .map(|n| n.join(" "))
            else {
                continue;
            };
            info.threads
                .entry((pid, tid))
                .or_insert_with(|| name.clone());
            info.by_tid.entry(tid).or_insert(name);
        }
        info
    }

    /// Reads a `pid_info` file of at most `PID_INFO_LIMIT` bytes (a `ps`
    /// listing; `--pid-info /dev/zero` must not read forever).
    pub fn load(path: &Path) -> Result<PidInfo> {
        let limit = crate::file::Limit {
            bytes: PID_INFO_LIMIT,
            why: "a pid_info listing of `pid tid tty time name` lines is at most 64 MiB",
        };
        let bytes = crate::file::read_small(path, limit, "a pid_info file")?;
        Ok(PidInfo::parse(&String::from_utf8_lossy(&bytes)))
    }

    /// The name of thread `tid` of process `pid` (or of `tid` in any process).
    pub fn thread_name(&self, pid: i64, tid: i64) -> Option<&str> {
        self.threads
            .get(&(pid, tid))
            .or_else(|| self.by_tid.get(&tid))
            .map(String::as_str)
    }

    /// The name of the process: its main thread's (tid = pid).
    pub fn process_name(&self, pid: i64) -> Option<&str> {
        self.threads.get(&(pid, pid)).map(String::as_str)
    }

    /// Threads named.
    pub fn len(&self) -> usize {
        self.threads.len()
    }
}

// Inputs: files, capture directories, pid_info.
