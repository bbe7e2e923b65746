//! `userdir`: `/~user/…` served from that user's home (lighttpd mod_userdir,
//! Apache mod_userdir; Cherokee and nginx have no built-in equivalent, nginx
//! writes it as `location ~ ^/~(.+?)(/.*)?$ { alias /home/$1/public_html$2; }`).
//!
//! ```toml
//! [vhost.userdir]
//! path = "public_html"          # /~alice/x.html -> ~alice/public_html/x.html
//! exclude-user = ["root"]
//! ```
//!
//! In the request phase, a path `/~NAME/REST` whose NAME is a valid user name,
//! not in `exclude-user` and, when `include-user` is not empty, in it, gets the
//! document root `HOME/path` ([`tessera_core::Ctx::set_document_root`] with the
//! prefix `/~NAME`): HOME is `basepath/NAME` (`basepath/N/NAME` with
//! `letterhomes`, N the name's first letter), or without `basepath` the home
//! directory in the password database (`getpwnam_r`, so NSS sources such as
//! LDAP count). `/~NAME` without its slash gets 301 to `/~NAME/` (query kept),
//! as from lighttpd. Static-file then serves the files with its own rules:
//! hidden files (`/~alice/.ssh/` is 404), the symlink policy (`inside-root`
//! means inside `~alice/public_html`), the open-file cache keyed by that root.
//!
//! Anything else passes on with the vhost's document root, as in lighttpd: an
//! invalid name (`/~../`, `/~.x/`, longer than 32 bytes), an excluded or not
//! included user, an unknown user, or a user without the directory. The
//! password lookup runs on the worker thread, once per name and minute
//! ([`HOME_TTL`], unknown names too); with a slow NSS source set `basepath`.

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tessera_core::response::redirect_to_slash;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl, Outcome};

use crate::doc_root::RootCache;

/// Longest user name accepted, in bytes (Linux `useradd`'s limit).
pub const MAX_USER_NAME: usize = 32;

/// Options of `[vhost.userdir]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct UserdirConfig {
    /// The directory in the home that is served, relative, without `..`;
    /// `""` serves the home itself. Default `"public_html"` (lighttpd
    /// `userdir.path`).
    #[serde(default = "default_path")]
    pub path: String,
    /// Homes are `basepath/NAME` instead of the password database's
    /// (lighttpd `userdir.basepath`); relative to the configuration file's
    /// directory unless absolute; must exist. Default none.
    #[serde(default)]
    pub basepath: Option<String>,
    /// Users never served (lighttpd `userdir.exclude-user`), compared exactly.
    /// Default none.
    #[serde(default)]
    pub exclude_user: Vec<String>,
    /// When not empty, only these users are served (lighttpd
    /// `userdir.include-user`). Default none.
    #[serde(default)]
    pub include_user: Vec<String>,
    /// Homes are `basepath/N/NAME`, N the name's first letter (lighttpd
    /// `userdir.letterhomes`); needs `basepath`. Default `false`.
    #[serde(default)]
    pub letterhomes: bool,
}

fn default_path() -> String {
    "public_html".into()
}

impl Default for UserdirConfig {
    fn default() -> Self {
        UserdirConfig {
            path: default_path(),
            basepath: None,
            exclude_user: Vec::new(),
            include_user: Vec::new(),
            letterhomes: false,
        }
    }
}

/// The `userdir` module instance of one vhost or rule.
pub struct Userdir {
    path: PathBuf,
    basepath: Option<Arc<Path>>,
    exclude: Vec<String>,
    include: Vec<String>,
    letterhomes: bool,
    roots: RootCache,
    /// The configuration's directory, canonical: a home holding it is never
    /// served (the server's own files).
    config_dir: PathBuf,
}

/// Accounts below this uid are system accounts (Debian's `FIRST_UID`):
/// their homes (`/`, `/bin`, `/var/lib/...`) are never served from the
/// password database unless `include-user` names them.
const FIRST_UID: u32 = 1000;

impl ModuleDecl for Userdir {
    const NAME: &'static str = "userdir";
    type Config = UserdirConfig;

    /// # Errors
    /// One line naming the key: `path` absolute or with a `..` segment;
    /// `basepath` missing or not a directory; `letterhomes` without
    /// `basepath`.
    fn build(cfg: UserdirConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        let path = Path::new(&cfg.path);
        if path.is_absolute()
            || cfg.path.contains('\0')
            || path
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(format!(
                "path: \"{}\" must be relative, without '.' or '..'",
                cfg.path
            ));
        }
        let basepath = match &cfg.basepath {
            Some(b) => Some(crate::doc_root::configured("basepath", b, cx.config_dir)?),
            None => None,
        };
        if cfg.letterhomes && basepath.is_none() {
            return Err("letterhomes: needs basepath".into());
        }
        Ok(Userdir {
            path: path.to_path_buf(),
            basepath,
            exclude: cfg.exclude_user,
            include: cfg.include_user,
            letterhomes: cfg.letterhomes,
            roots: RootCache::default(),
            config_dir: cx
                .config_dir
                .canonicalize()
                .unwrap_or_else(|_| cx.config_dir.to_path_buf()),
        })
    }
}

/// The user name of `/~NAME` or `/~NAME/…` and whether a slash follows it;
/// `None` for other paths.
fn split_user(path: &str) -> Option<(&str, bool)> {
    let rest = path.strip_prefix("/~")?;
    Some(match rest.find('/') {
        Some(i) => (&rest[..i], true),
        None => (rest, false),
    })
}

/// A user name as POSIX's portable set has it: letters, digits, `.`, `_`,
/// `-`, not starting with `-` or `.` (so never `.` or `..`), 1 to
/// [`MAX_USER_NAME`] bytes.
fn valid_user(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_USER_NAME
        && !name.starts_with(['-', '.'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Userdir {
    /// Whether the lists let `name` be served.
    fn allowed(&self, name: &str) -> bool {
        !self.exclude.iter().any(|u| u == name)
            && (self.include.is_empty() || self.include.iter().any(|u| u == name))
    }

    /// The home directory of `name`: under `basepath`, or from the password
    /// database, where a system account (uid below 1000) has none unless
    /// `include-user` names it.
    fn home(&self, name: &str) -> Option<PathBuf> {
        match &self.basepath {
            Some(base) if self.letterhomes => Some(base.join(&name[..1]).join(name)),
            Some(base) => Some(base.join(name)),
            None => {
                let (home, uid) = home_of_cached(name)?;
                let named = self.include.iter().any(|u| u == name);
                (uid >= FIRST_UID || named).then_some(home)
            }
        }
    }
}

impl Module for Userdir {
    fn hooks(&self) -> Hooks {
        Hooks::REQUEST
    }

    fn on_request(&self, cx: &mut Ctx<'_>) -> Outcome {
        let Some((name, slash)) = split_user(cx.path()) else {
            return Outcome::Continue;
        };
        if !valid_user(name) || !self.allowed(name) {
            return Outcome::Continue;
        }
        if !slash {
            return Outcome::Respond(redirect_to_slash(cx));
        }
        let Some(root) = self
            .home(name)
            .and_then(|home| self.roots.lookup(&home.join(&self.path)))
        else {
            return Outcome::Continue;
        };
        // never the whole file system, nor the server's own configuration
        if root.parent().is_none() || self.config_dir.starts_with(&*root) {
            tracing::warn!(user = name, root = %root.display(), "userdir: refused: the root or a directory holding the configuration");
            return Outcome::Continue;
        }
        let prefix_len = 2 + name.len();
        let prefix = cx.path()[..prefix_len].to_owned();
        // cannot fail: `/~NAME` is followed by `/` in the path
        let _ = cx.set_document_root(root, &prefix);
        Outcome::Continue
    }
}

/// How long a worker keeps an answer of the password database (seconds):
/// a user added, removed or moved is seen within it, as lighttpd's stat
/// cache sees a changed file within its own. Unknown names are kept too, so
/// that requests for random names do not each reach NSS.
pub const HOME_TTL: std::time::Duration = std::time::Duration::from_secs(60);

/// Names kept per worker; the cache is emptied when it is full, so names
/// from requests cannot grow it without bound.
const HOME_CACHE: usize = 1024;

/// One worker's answers: name -> (answer, when it was asked).
type Homes = std::collections::HashMap<String, (Option<(PathBuf, u32)>, std::time::Instant)>;

thread_local! {
    static HOMES: std::cell::RefCell<Homes> = std::cell::RefCell::new(Homes::new());
}

/// [`home_of`], answered from this worker's cache when asked less than
/// [`HOME_TTL`] ago.
fn home_of_cached(user: &str) -> Option<(PathBuf, u32)> {
    let now = std::time::Instant::now();
    let kept = HOMES.with(|h| {
        h.borrow()
            .get(user)
            .filter(|(_, at)| now.duration_since(*at) < HOME_TTL)
            .map(|(answer, _)| answer.clone())
    });
    if let Some(answer) = kept {
        return answer;
    }
    let answer = home_of(user);
    HOMES.with(|h| {
        let mut h = h.borrow_mut();
        if h.len() >= HOME_CACHE {
            h.clear();
        }
        h.insert(user.to_owned(), (answer.clone(), now));
    });
    answer
}

/// The home directory and uid of `user` in the password database
/// (`getpwnam_r(3)`, through NSS); `None` for an unknown user or a failed
/// lookup.
#[allow(unsafe_code)]
pub fn home_of(user: &str) -> Option<(PathBuf, u32)> {
    let name = CString::new(user).ok()?;
    let mut buf = vec![0u8; 1024];
    loop {
        // SAFETY: `passwd` is plain data (integers and pointers) for which all
        // zeroes is a valid value; getpwnam_r only writes into it.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: `name` is a NUL-terminated string; `pwd`, `buf` (with its
        // true length) and `result` are valid for writes for the duration of
        // the call, and getpwnam_r is reentrant (it keeps no static state).
        let rc = unsafe {
            libc::getpwnam_r(
                name.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut result,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 || result.is_null() || pwd.pw_dir.is_null() {
            return None;
        }
        // SAFETY: on success `pw_dir` points to a NUL-terminated string inside
        // `buf`, which is alive and unchanged here.
        let dir = unsafe { CStr::from_ptr(pwd.pw_dir) };
        return Some((PathBuf::from(OsStr::from_bytes(dir.to_bytes())), pwd.pw_uid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc_root::testing;

    #[test]
    fn password_answers_are_kept_per_name_and_the_cache_stays_bounded() {
        // root is in every password database; a name no database has
        let root = home_of_cached("root");
        assert_eq!(root, home_of("root"));
        assert_eq!(home_of_cached("no-such-user-x9"), None);
        HOMES.with(|h| {
            let h = h.borrow();
            assert!(h.contains_key("root") && h.contains_key("no-such-user-x9"));
        });
        // an answer older than HOME_TTL is asked again
        HOMES.with(|h| {
            let mut h = h.borrow_mut();
            let old = std::time::Instant::now()
                .checked_sub(HOME_TTL + std::time::Duration::from_secs(1))
                .expect("the monotonic clock is older than a minute");
            h.insert("root".into(), (None, old));
        });
        assert_eq!(home_of_cached("root"), root);
        // full: emptied before the next name goes in
        for i in 0..HOME_CACHE + 10 {
            let _ = home_of_cached(&format!("no-such-user-{i}"));
        }
        HOMES.with(|h| assert!(h.borrow().len() <= HOME_CACHE));
    }

    #[test]
    fn user_names() {
        assert_eq!(split_user("/~alice/x"), Some(("alice", true)));
        assert_eq!(split_user("/~alice"), Some(("alice", false)));
        assert_eq!(split_user("/~/x"), Some(("", true)));
        assert_eq!(split_user("/alice/x"), None);
        for ok in ["alice", "a", "bob.smith", "c_d-e", "x9"] {
            assert!(valid_user(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".x",
            "-x",
            "a b",
            "a%2f",
            "a:b",
            &"x".repeat(33),
        ] {
            assert!(!valid_user(bad), "{bad}");
        }
    }

    #[test]
    fn password_database() {
        // Debian's root is always there, with home /root
        assert_eq!(home_of("root"), Some((PathBuf::from("/root"), 0)));
        assert_eq!(home_of("no-such-user-tessera"), None);
        assert_eq!(home_of("nul\0byte"), None);
    }

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tessera-userdir-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("home/alice/public_html")).unwrap();
        std::fs::create_dir_all(d.join("home/b/bob/public_html")).unwrap();
        std::fs::create_dir_all(d.join("www")).unwrap();
        std::fs::canonicalize(d).unwrap()
    }

    fn build(d: &Path, cfg: UserdirConfig) -> Result<Userdir, String> {
        testing::build(cfg, d)
    }

    fn run(u: &Userdir, d: &Path, path: &str) -> Result<(PathBuf, String), u16> {
        testing::request(u, d, path)
    }

    #[test]
    fn basepath_lists_and_letterhomes() {
        let d = tmp("lists");
        let cfg = |f: fn(&mut UserdirConfig)| {
            let mut c = UserdirConfig {
                basepath: Some("home".into()),
                ..Default::default()
            };
            f(&mut c);
            c
        };
        let u = build(&d, cfg(|_| {})).unwrap();
        let alice = d.join("home/alice/public_html");
        assert_eq!(
            run(&u, &d, "/~alice/a/b"),
            Ok((alice.clone(), "/a/b".into()))
        );
        assert_eq!(run(&u, &d, "/~alice/"), Ok((alice.clone(), "/".into())));
        assert_eq!(run(&u, &d, "/~alice"), Err(301));
        // no such directory, invalid names: the vhost's root
        assert_eq!(
            run(&u, &d, "/~carol/x"),
            Ok((d.join("www"), "/~carol/x".into()))
        );
        assert_eq!(run(&u, &d, "/~../x"), Ok((d.join("www"), "/~../x".into())));
        assert_eq!(run(&u, &d, "/~..").map(|r| r.1), Ok("/~..".into()));
        let u = build(&d, cfg(|c| c.exclude_user = vec!["alice".into()])).unwrap();
        assert_eq!(run(&u, &d, "/~alice/x").map(|r| r.0), Ok(d.join("www")));
        assert_eq!(run(&u, &d, "/~alice").map(|r| r.0), Ok(d.join("www")));
        let u = build(&d, cfg(|c| c.include_user = vec!["bob".into()])).unwrap();
        assert_eq!(run(&u, &d, "/~alice/x").map(|r| r.0), Ok(d.join("www")));
        let u = build(&d, cfg(|c| c.letterhomes = true)).unwrap();
        assert_eq!(
            run(&u, &d, "/~bob/x").map(|r| r.0),
            Ok(d.join("home/b/bob/public_html"))
        );
        let u = build(&d, cfg(|c| c.path = String::new())).unwrap();
        assert_eq!(
            run(&u, &d, "/~alice/x").map(|r| r.0),
            Ok(d.join("home/alice"))
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn configuration_errors() {
        let d = tmp("errors");
        let err = |c: UserdirConfig| build(&d, c).err().unwrap();
        let with_path = |p: &str| UserdirConfig {
            path: p.into(),
            ..Default::default()
        };
        assert!(err(with_path("/abs")).starts_with("path: "));
        assert!(err(with_path("a/../b")).starts_with("path: "));
        assert!(err(with_path("./x")).starts_with("path: "));
        assert_eq!(
            err(UserdirConfig {
                letterhomes: true,
                ..Default::default()
            }),
            "letterhomes: needs basepath"
        );
        assert!(err(UserdirConfig {
            basepath: Some("missing".into()),
            ..Default::default()
        })
        .starts_with("basepath: \"missing\": "));
        let _ = std::fs::remove_dir_all(&d);
    }
}
