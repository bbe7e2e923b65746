//! Start-up pages given back. Reading `server.toml`, building the modules
//! and starting the workers runs code (TOML, serde, clap, regex
//! compilation, the importer) that a running server never runs again, yet
//! its pages stay mapped and count in the resident set (RSS) until the
//! kernel reclaims them. Once the workers are ready, and again after a
//! reload, [`release_startup_pages`] unmaps the pages of the executable
//! and its shared libraries; the pages a request needs map back in at
//! once from the page cache (a minor fault each, the first time). On
//! 2026-12-02 this took the release binary's RSS with 1,000 open
//! connections from 10.4 MiB to 6.8 to 7 MiB.
//!
//! Only the read-only `PT_LOAD` segments of loaded objects are touched, and
//! only where `/proc/self/smaps` shows a read-only, file-backed mapping with
//! no private (copy-on-write) page, resident or swapped: dropping those
//! pages loses nothing, as the file holds the same bytes. The segments are
//! advised from inside `dl_iterate_phdr`, which holds the dynamic loader's
//! lock, so no object can be unloaded (and its addresses reused by other
//! memory) between the check and the advice. Just before each range is
//! advised, `/proc/self/pagemap` is read again and every page that became
//! private since the snapshot (a debugger's breakpoint, a uprobe) is
//! skipped; a write in the microseconds between that read and the advice
//! would still be undone. Linux only; a no-op elsewhere.

/// Unmaps the resident pages of the read-only segments of the executable and
/// of every loaded shared object, where they hold no anonymous
/// (copy-on-write) page, with `madvise(MADV_DONTNEED)`, and logs the amount
/// at debug level (KiB). Returns the bytes of the pages that were resident
/// in the ranges it advised (`0` off Linux, or when `/proc/self/smaps` or
/// `/proc/self/pagemap` cannot be read); some of them fault back in at
/// once, as the code that runs next needs them. Never fails: a range the
/// kernel refuses is not counted.
pub fn release_startup_pages() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
            return 0;
        };
        let released = release(releasable(&smaps));
        tracing::debug!("start-up pages released: {} KiB", released / 1024);
        released
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// Advises the parts of the loaded objects' read-only segments that lie in
/// `eligible` (a snapshot of `/proc/self/smaps`, see [`releasable`]), and
/// returns the resident bytes of the mappings advised. A mapping of the
/// snapshot that is gone since, with other memory in its place, is never
/// touched: only addresses of objects the loader holds are advised.
#[cfg(target_os = "linux")]
fn release(eligible: Vec<Mapping>) -> u64 {
    // No per-page check, no release: the snapshot alone is too old to trust.
    let Ok(pagemap) = std::fs::File::open("/proc/self/pagemap") else {
        return 0;
    };
    #[allow(unsafe_code)]
    // SAFETY: sysconf has no preconditions
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let mut walk = Walk {
        eligible,
        pagemap,
        page: usize::try_from(page).unwrap_or(4096),
        released: 0,
    };
    #[allow(unsafe_code)] // the loader's iteration with a plain callback
    // SAFETY: `on_object` only reads the `dl_phdr_info` it is given and
    // the `Walk` passed as `data`, which outlives the call.
    unsafe {
        libc::dl_iterate_phdr(
            Some(on_object),
            std::ptr::from_mut(&mut walk).cast::<std::ffi::c_void>(),
        );
    }
    walk.released
}

/// The state of one `dl_iterate_phdr` walk: the mappings that may be
/// dropped (each advised at most once), `/proc/self/pagemap`, and the bytes
/// released so far.
#[cfg(target_os = "linux")]
struct Walk {
    eligible: Vec<Mapping>,
    pagemap: std::fs::File,
    /// The page size, bytes.
    page: usize,
    released: u64,
}

/// The `dl_iterate_phdr` callback: advises the parts of the object's
/// read-only `PT_LOAD` segments that lie in an eligible mapping. Runs with
/// the loader's lock held, so the object stays mapped meanwhile.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
unsafe extern "C" fn on_object(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut std::ffi::c_void,
) -> libc::c_int {
    // SAFETY: the loader passes a valid `dl_phdr_info` whose `dlpi_phdr`
    // points at `dlpi_phnum` program headers; `data` is the `Walk` of
    // `release_startup_pages`, borrowed by nothing else during the walk.
    let (info, walk) = unsafe { (&*info, &mut *data.cast::<Walk>()) };
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: as above.
    let headers =
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let page = walk.page;
    for ph in headers {
        if ph.p_type != libc::PT_LOAD || ph.p_flags & libc::PF_W != 0 {
            continue;
        }
        let Some(start) = (info.dlpi_addr as usize).checked_add(ph.p_vaddr as usize) else {
            continue;
        };
        let Some(end) = start.checked_add(ph.p_memsz as usize) else {
            continue;
        };
        let (start, end) = (start & !(page - 1), end.next_multiple_of(page));
        for i in 0..walk.eligible.len() {
            let m = &walk.eligible[i];
            let (a, b) = (start.max(m.start), end.min(m.start + m.len));
            if a >= b || m.rss == 0 {
                continue;
            }
            walk.eligible[i].rss = 0;
            walk.released += advise_file_pages(&walk.pagemap, a, b, page);
        }
    }
    0
}

/// Advises `a..b` (page-aligned, in a read-only segment of a loaded object)
/// run by run, skipping every page that `/proc/self/pagemap` shows as
/// private now (present and not a file page, or swapped): a page written
/// since the `smaps` snapshot, by a debugger's breakpoint, a uprobe or
/// live patching, keeps its bytes. Returns the bytes of the pages that were
/// present in the runs advised. A range whose entries cannot be read is
/// left alone.
#[cfg(target_os = "linux")]
fn advise_file_pages(pagemap: &std::fs::File, a: usize, b: usize, page: usize) -> u64 {
    use std::os::unix::fs::FileExt;
    /// pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst)
    const PRESENT: u64 = 1 << 63;
    const SWAPPED: u64 = 1 << 62;
    const FILE: u64 = 1 << 61;
    let (mut released, mut run, mut run_present) = (0u64, None::<usize>, 0u64);
    let mut advise = |from: usize, to: usize, present: u64| {
        #[allow(unsafe_code)]
        // SAFETY: `from..to` lies in a read-only segment of an object that
        // stays loaded during the walk, and held no private page a moment
        // ago: every page dropped reads back from the file unchanged.
        let r = unsafe {
            rustix::mm::madvise(
                from as *mut std::ffi::c_void,
                to - from,
                rustix::mm::Advice::LinuxDontNeed,
            )
        };
        if r.is_ok() {
            released += present * page as u64;
        }
    };
    let mut at = a;
    while at < b {
        let n = ((b - at) / page).min(512);
        let mut bytes = [0u8; 512 * 8];
        let want = &mut bytes[..n * 8];
        if pagemap.read_exact_at(want, (at / page * 8) as u64).is_err() {
            break;
        }
        for (k, e) in want.chunks_exact(8).enumerate() {
            // an entry that does not parse counts as private
            let e = e.try_into().map_or(SWAPPED, u64::from_ne_bytes);
            let addr = at + k * page;
            let private = (e & PRESENT != 0 && e & FILE == 0) || e & SWAPPED != 0;
            match (private, run) {
                (true, Some(from)) => {
                    advise(from, addr, run_present);
                    run = None;
                }
                (false, None) => {
                    run = Some(addr);
                    run_present = u64::from(e & PRESENT != 0);
                }
                (false, Some(_)) => run_present += u64::from(e & PRESENT != 0),
                (true, None) => {}
            }
        }
        at += n * page;
        // a run is advised at each chunk's end: the window between a
        // page's check and its advice stays one chunk's read
        if let Some(from) = run.take() {
            advise(from, at, run_present);
        }
    }
    released
}

/// One mapping [`release_startup_pages`] may drop: start address, length
/// and resident bytes.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
struct Mapping {
    start: usize,
    len: usize,
    rss: u64,
}

/// The mappings of `smaps` (the text of `/proc/self/smaps`) that are
/// read-only, backed by a file (a non-zero inode), resident, and without
/// anonymous pages, resident or swapped out.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn releasable(smaps: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    // (mapping, eligible by its header line), and its Anonymous + Swap in kB
    let mut cur: Option<(Mapping, bool)> = None;
    let mut anon = 0u64;
    let mut finish = |cur: &mut Option<(Mapping, bool)>, anon: u64| {
        if let Some((m, true)) = cur.take() {
            if anon == 0 && m.rss > 0 {
                out.push(m);
            }
        }
    };
    for line in smaps.lines() {
        let mut f = line.split_ascii_whitespace();
        let Some(first) = f.next() else { continue };
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                finish(&mut cur, anon);
                anon = 0;
                let perms = f.next().unwrap_or("");
                let inode = f.nth(2).unwrap_or("0");
                let ok = perms.starts_with('r') && !perms.contains('w') && inode != "0";
                cur = Some((
                    Mapping {
                        start: a,
                        len: b.saturating_sub(a),
                        rss: 0,
                    },
                    ok,
                ));
                continue;
            }
        }
        let kb = || {
            f.clone()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        match first {
            "Rss:" => {
                if let Some((m, _)) = cur.as_mut() {
                    m.rss = kb() * 1024;
                }
            }
            // a private page in swap is not in Anonymous, and is lost too
            "Anonymous:" | "Swap:" => anon += kb(),
            _ => {}
        }
    }
    finish(&mut cur, anon);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0a00000-55d0c0cfe000 r--p 00000000 fd:01 123 /usr/sbin/tessera
Size:               3064 kB
Rss:                1200 kB
Anonymous:             0 kB
55d0c0cfe000-55d0c1492000 r-xp 002fe000 fd:01 123 /usr/sbin/tessera
Size:               7760 kB
Rss:                4000 kB
Anonymous:             0 kB
55d0c1492000-55d0c14f4000 r--p 00992000 fd:01 123 /usr/sbin/tessera
Size:                392 kB
Rss:                 392 kB
Anonymous:           392 kB
55d0c14f4000-55d0c14f8000 rw-p 009f4000 fd:01 123 /usr/sbin/tessera
Size:                 16 kB
Rss:                  16 kB
Anonymous:            16 kB
7f0000000000-7f0000100000 r-xp 00028000 fd:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6
Size:               1024 kB
Rss:                 900 kB
Anonymous:             0 kB
7f0000200000-7f0000201000 r--p 00000000 fd:01 78 /var/www/data.bin
Size:                  4 kB
Rss:                   4 kB
Anonymous:             0 kB
7f0000280000-7f0000281000 r--p 00000000 fd:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6
Size:                  4 kB
Rss:                   4 kB
Anonymous:             0 kB
Swap:                  4 kB
7f0000300000-7f0000301000 r-xp 00000000 00:00 0
Size:                  4 kB
Rss:                   4 kB
Anonymous:             4 kB
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]
Size:                  8 kB
Rss:                   8 kB
Anonymous:             0 kB
7f0000400000-7f0000401000 r--p 00000000 fd:01 77 /usr/lib/x86_64-linux-gnu/libm.so.6
Size:                  4 kB
Rss:                   0 kB
Anonymous:             0 kB
";

    #[test]
    fn only_read_only_file_mappings_without_private_pages() {
        // the loaded objects' segments are then intersected with these
        // (`on_object`): /var/www/data.bin is in no segment
        let got = releasable(SMAPS);
        let starts: Vec<usize> = got.iter().map(|m| m.start).collect();
        assert_eq!(
            starts,
            [
                0x55d0c0a00000,
                0x55d0c0cfe000,
                0x7f0000000000,
                0x7f0000200000
            ]
        );
        assert_eq!(
            got[1],
            Mapping {
                start: 0x55d0c0cfe000,
                len: 0x794000,
                rss: 4000 * 1024
            }
        );
    }

    #[test]
    fn a_path_with_spaces_or_a_deleted_file_is_still_a_file() {
        let smaps = "\
5600-7600 r-xp 00000000 fd:01 123 /opt/my server/tessera (deleted)
Rss:                   8 kB
Anonymous:             0 kB
";
        assert_eq!(releasable(smaps).len(), 1);
    }

    /// The race a hostile review found in the first form, which advised the
    /// snapshot's ranges: a listed file mapping goes away and anonymous
    /// memory takes its addresses before the advice. That memory must keep
    /// its bytes.
    #[cfg(target_os = "linux")]
    #[test]
    #[allow(unsafe_code)]
    fn memory_that_took_a_listed_mappings_place_is_never_touched() {
        use std::os::fd::AsRawFd;
        let len = 64 * 1024;
        let path = std::env::temp_dir().join(format!("residency-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; len]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: a fresh private read-only mapping of our own file, read
        // (so that it is resident), unmapped, and replaced at the same
        // address only if nothing else took it (MAP_FIXED_NOREPLACE)
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            let bytes = std::slice::from_raw_parts(p.cast::<u8>(), len);
            assert_eq!(
                bytes.iter().map(|&b| u64::from(b)).sum::<u64>(),
                7 * len as u64
            );
            let listed = releasable(&std::fs::read_to_string("/proc/self/smaps").unwrap());
            assert!(
                listed.iter().any(|m| m.start == p as usize),
                "the file mapping is listed"
            );
            assert_eq!(libc::munmap(p, len), 0);
            let q = libc::mmap(
                p,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            );
            let _ = std::fs::remove_file(&path);
            if q != p {
                // another thread of the test run took the addresses first
                return;
            }
            std::ptr::write_bytes(q.cast::<u8>(), 0xA5, len);
            release(listed);
            let after = std::slice::from_raw_parts(q.cast::<u8>(), len);
            assert!(
                after.iter().all(|&b| b == 0xA5),
                "anonymous memory was zeroed"
            );
            libc::munmap(q, len);
        }
    }

    /// Bytes that live in the executable's read-only data, for the test
    /// below to write into as a debugger would.
    #[cfg(target_os = "linux")]
    static RODATA: [u8; 3 * 4096] = [0x3C; 3 * 4096];

    /// A page of a read-only segment written after the `smaps` snapshot (a
    /// breakpoint set meanwhile) is now private: it must keep its bytes.
    #[cfg(target_os = "linux")]
    #[test]
    #[allow(unsafe_code)]
    fn a_page_written_after_the_snapshot_keeps_its_bytes() {
        let page = 4096;
        let at = (std::ptr::addr_of!(RODATA) as usize).next_multiple_of(page);
        assert!(at + page <= std::ptr::addr_of!(RODATA) as usize + RODATA.len());
        // SAFETY: the page lies in RODATA (checked above); it is made
        // writable for one volatile write, as ptrace would write it, and
        // read back only with volatile reads.
        unsafe {
            let p = at as *mut u8;
            assert_eq!(std::ptr::read_volatile(p), 0x3C);
            let listed = releasable(&std::fs::read_to_string("/proc/self/smaps").unwrap());
            if !listed.iter().any(|m| m.start <= at && at < m.start + m.len) {
                // another test's write made this mapping private already
                return;
            }
            let pv = p.cast::<std::ffi::c_void>();
            assert_eq!(
                libc::mprotect(pv, page, libc::PROT_READ | libc::PROT_WRITE),
                0
            );
            std::ptr::write_volatile(p, 0x5A);
            assert_eq!(libc::mprotect(pv, page, libc::PROT_READ), 0);
            release(listed);
            assert_eq!(
                std::ptr::read_volatile(p),
                0x5A,
                "the written page was dropped"
            );
        }
    }

    /// Resident kB of this process's read-only mappings of its executable.
    #[cfg(target_os = "linux")]
    fn own_code_kb() -> u64 {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let (mut ours, mut kb) = (false, 0);
        for line in smaps.lines() {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            if f.first().is_some_and(|a| a.contains('-')) && f.len() >= 5 {
                ours = f.get(5).map(std::path::Path::new) == Some(exe.as_path())
                    && !f[1].contains('w');
            } else if ours && f.first() == Some(&"Rss:") {
                kb += f[1].parse::<u64>().unwrap();
            }
        }
        kb
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn releasing_unmaps_the_code_and_the_process_goes_on() {
        let before = own_code_kb();
        let released = release_startup_pages();
        let after = own_code_kb();
        assert!(
            released / 1024 >= before / 2,
            "{released} B released of {before} kB"
        );
        // reading smaps maps some code back in, and with it its neighbours
        // (fault-around, large folios: 1.6 MiB for the first request of a
        // release build on the 6.18 kernel of 2026-12-03)
        assert!(
            after < before,
            "{after} kB resident after, {before} kB before"
        );
        // the code that runs next maps back in
        let v: Vec<u64> = (0..1000).collect();
        assert_eq!(v.iter().sum::<u64>(), 499_500);
    }
}
