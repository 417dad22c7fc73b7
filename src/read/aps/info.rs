//! What `profconv info` prints for APS sample files.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::head::event_name;
use super::records::ApsFile;
use super::tables::{merged_modules, module_file_name};
use crate::error::Result;
use crate::read::input::Input;
use crate::read::options::ReadOptions;

/// The `info` text of one sample file.
pub(super) fn describe_file(out: &mut String, input: &Input, options: &ReadOptions) -> Result<()> {
    let path = input.name();
    {
        let (file, src) = ApsFile::open(input, options)?;
        let h = &file.head;
        let l = &file.layout;
        let _ = writeln!(out, "{}:", path.display());
        let _ = writeln!(out, "  format:        APS sample file");
        match file.cpu {
            Some(cpu) => {
                let _ = writeln!(out, "  cpu:           {cpu} (from the file name)");
            }
            None => {
                let _ = writeln!(
                    out,
                    "  cpu:           unknown (the file name is not sample_cpu_<N>_...)"
                );
            }
        }
        let _ = writeln!(
            out,
            "  byte order:    head and records {}, module table {}, vma table {}",
            h.endian.name(),
            l.module_endian.name(),
            l.vma_endian.name()
        );
        let _ = writeln!(
            out,
            "  call depth:    {} ({})",
            l.call_depth,
            l.call_depth_origin.describe()
        );
        let _ = writeln!(
            out,
            "  path length:   {} ({})",
            l.path_len,
            l.path_len_origin.describe()
        );
        let _ = writeln!(out, "  record size:   {} bytes", l.record_size());
        let _ = writeln!(out, "  records:       {}", h.index);
        let _ = writeln!(
            out,
            "  begintime:     {}.{:06} s (Unix time)",
            h.begin_sec, h.begin_usec
        );
        let _ = writeln!(
            out,
            "  endtime:       {}.{:06} s (Unix time)",
            h.end_sec, h.end_usec
        );
        let _ = writeln!(
            out,
            "  duration:      {:.6} s",
            (h.end_nanos() - h.begin_nanos()) as f64 / 1e9
        );
        let _ = writeln!(out, "  stBeginTime:   {} ticks", h.st_begin_time);
        let _ = writeln!(out, "  stEndTime:     {} ticks", h.st_end_time);
        let _ = writeln!(out, "  reset_value:   {} events per sample", h.reset_value);
        let _ = writeln!(out, "  cputype:       {}", h.cputype);
        let merged = merged_modules(&file.modules);
        let _ = writeln!(
            out,
            "  modules:       {} entries at byte {}, {} merged ranges",
            file.modules.len(),
            l.module_offset,
            merged.len()
        );
        for m in &merged {
            let _ = writeln!(
                out,
                "    {:#010x}..={:#010x} {}",
                m.start,
                m.end,
                module_file_name(&m.name)
            );
        }
        let pids: BTreeSet<i32> = file.vmas.iter().map(|v| v.pid).collect();
        let _ = writeln!(
            out,
            "  vmas:          {} entries at byte {} for {} processes",
            file.vmas.len(),
            l.vma_offset,
            pids.len()
        );
        let mut user = 0u64;
        let mut clamped = 0u64;
        let mut idle = 0u64;
        let mut per_event: BTreeMap<u32, u64> = BTreeMap::new();
        let depth = l.call_depth;
        file.for_each_record(&src, options, |r| {
            user += u64::from(r.user());
            idle += u64::from(r.pid() == 0);
            clamped += u64::from(r.cs_layer() < 0 || r.cs_layer() as u64 > depth as u64);
            *per_event.entry(r.event()).or_insert(0) += 1;
        })?;
        let total = u64::from(h.index);
        let _ = writeln!(
            out,
            "  samples:       {} user, {} kernel, {} of pid 0 (idle)",
            user,
            total - user,
            idle
        );
        for (event, n) in &per_event {
            let _ = writeln!(
                out,
                "    {} (event {event}): {n} samples",
                event_name(*event)
            );
        }
        if clamped > 0 {
            let _ = writeln!(
                out,
                "  warning:       {clamped} records have cs_layer outside 0..={depth} (clamped)"
            );
        }
    }
    Ok(())
}
