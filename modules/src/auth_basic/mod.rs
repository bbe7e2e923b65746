//! `auth-basic`: HTTP Basic authentication (RFC 7617) against an htpasswd
//! file (lighttpd mod_auth with `auth.backend = "htpasswd"`, Cherokee's
//! htpasswd validator, nginx `auth_basic` + `auth_basic_user_file`).
//!
//! ```toml
//! [vhost.auth-basic]
//! realm = "Staff only"
//! user-file = "htpasswd"          # relative to the configuration file's directory
//! require = ["alice", "bob"]      # or "valid-user" (the default)
//! ```
//!
//! Request phase. A request without valid credentials gets `401 Unauthorized`
//! with `WWW-Authenticate: Basic realm="…", charset="UTF-8"` (RFC 7617 §2,
//! §2.1); so do malformed `Authorization` headers (another scheme, bad base64,
//! no colon, not UTF-8, longer than 4 KiB: see [`header::credentials`]), never a
//! 400 or 500. On success the user name is recorded for the access log (`%u`).
//!
//! The htpasswd file ([`htpasswd`]) is read when the configuration is built (an
//! unreadable or malformed file is a configuration error) and again when it
//! changes: at most once per second per instance, one `stat` compares its
//! modification time, size and inode; a file that then fails to parse is
//! logged and the previous users stay in force. A request pays one atomic load,
//! a read lock and an `Arc` clone for this.
//!
//! bcrypt is slow by design (cost 10 is tens of milliseconds) and runs on the
//! worker thread, holding up the worker's other connections meanwhile; a
//! successful verification is therefore remembered (up to
//! [`VERIFIED_CACHE`] entries, keyed by a keyed SHA-256 of user and password,
//! cleared when the file is reloaded), so a browser that sends the same
//! credentials with every request pays bcrypt once. Failed attempts are not
//! cached and always pay the full cost.

pub mod header;
pub mod htpasswd;
pub mod md5_crypt;

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::num::NonZeroUsize;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use lru::LruCache;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tessera_core::actix_web::http::header::{HeaderValue, WWW_AUTHENTICATE};
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpResponse;
use tessera_core::module::Outcome;
use tessera_core::response::error_response;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};

use htpasswd::Table;

/// How many successful verifications an instance remembers (least recently
/// used out first).
pub const VERIFIED_CACHE: usize = 1024;

/// Options of `[vhost.auth-basic]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AuthBasicConfig {
    /// The protection space shown by the browser's prompt (RFC 7617 §2;
    /// lighttpd `auth.require` `realm`, nginx `auth_basic "…"`, Cherokee
    /// `auth!realm`). Printable ASCII. Default `"Restricted"`.
    #[serde(default)]
    pub realm: Option<String>,
    /// The htpasswd file, relative to the configuration file's directory
    /// (lighttpd `auth.backend.htpasswd.userfile`, nginx `auth_basic_user_file`,
    /// Cherokee `auth!passwdfile`). Required.
    #[serde(default)]
    pub user_file: Option<PathBuf>,
    /// Accept plain-text entries (`user:{PLAIN}secret` or no hash prefix).
    /// Default `false`: they are a configuration error.
    #[serde(default)]
    pub allow_plain: bool,
    /// Who may pass: `"valid-user"` (any user in the file; the default, Apache
    /// and lighttpd `require valid-user`) or a list of user names (lighttpd
    /// `require = "user=alice|user=bob"`).
    #[serde(default)]
    pub require: RequireSpec,
}

/// `require` as written: the string `"valid-user"` or a list of user names.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RequireSpec {
    /// Must be `"valid-user"`.
    Keyword(String),
    /// These users (exact, case-sensitive names), at least one.
    Users(Vec<String>),
}

impl Default for RequireSpec {
    fn default() -> Self {
        RequireSpec::Keyword("valid-user".into())
    }
}

/// Who may pass once the password is right.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Require {
    /// Any user of the file.
    ValidUser,
    /// Only these users.
    Users(Box<[Box<str>]>),
}

impl Require {
    fn permits(&self, user: &str) -> bool {
        match self {
            Require::ValidUser => true,
            Require::Users(list) => list.iter().any(|u| &**u == user),
        }
    }
}

/// What identifies a version of the user file: modification time (seconds and
/// nanoseconds), size, inode and device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp(i64, i64, u64, u64, u64);

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp(m.mtime(), m.mtime_nsec(), m.size(), m.ino(), m.dev())
    }
}

/// The `auth-basic` module instance of one vhost or rule.
pub struct AuthBasic {
    challenge: HeaderValue,
    path: PathBuf,
    allow_plain: bool,
    require: Require,
    table: RwLock<Arc<Table>>,
    stamp: Mutex<Option<Stamp>>,
    epoch: Instant,
    /// Seconds since `epoch` before which the file is not looked at again.
    next_check: AtomicU64,
    /// Keyed SHA-256 of (user, password) -> the hash field it was verified
    /// against.
    verified: Mutex<LruCache<[u8; 32], Arc<str>>>,
    /// Random key for the cache digests, so that memory never holds a plain
    /// SHA-256 of a password.
    key: [u8; 32],
}

/// Reads and parses the user file.
fn load(path: &Path, allow_plain: bool) -> Result<(Table, Stamp), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text =
        String::from_utf8(text).map_err(|_| format!("{}: not UTF-8 text", path.display()))?;
    let table = Table::parse(&text, allow_plain).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((table, Stamp::of(&meta)))
}

/// 32 bytes from the standard library's per-process random hasher keys.
fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    for (i, chunk) in key.chunks_mut(8).enumerate() {
        let v = RandomState::new().hash_one(i);
        chunk.copy_from_slice(&v.to_le_bytes());
    }
    key
}

impl ModuleDecl for AuthBasic {
    const NAME: &'static str = "auth-basic";
    type Config = AuthBasicConfig;

    fn build(cfg: AuthBasicConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        let realm = cfg.realm.as_deref().unwrap_or("Restricted");
        let challenge = header::challenge(realm)?;
        let Some(file) = cfg.user_file else {
            return Err("user-file: missing (the htpasswd file to check passwords against)".into());
        };
        let path = cx.config_dir.join(file);
        let (table, stamp) = load(&path, cfg.allow_plain).map_err(|e| format!("user-file: {e}"))?;
        let require = match cfg.require {
            RequireSpec::Keyword(k) if k == "valid-user" => Require::ValidUser,
            RequireSpec::Keyword(k) => {
                return Err(format!(
                    "require: {k:?}: expected \"valid-user\" or a list of user names"
                ))
            }
            RequireSpec::Users(list) if list.is_empty() => {
                return Err("require: the list of users is empty".into())
            }
            RequireSpec::Users(list) => {
                for u in &list {
                    if table.get(u).is_none() {
                        tracing::warn!(user = %u, file = %path.display(),
                            "auth-basic: a required user is not in the user file");
                    }
                }
                Require::Users(list.into_iter().map(String::into_boxed_str).collect())
            }
        };
        Ok(AuthBasic {
            challenge,
            path,
            allow_plain: cfg.allow_plain,
            require,
            table: RwLock::new(Arc::new(table)),
            stamp: Mutex::new(Some(stamp)),
            epoch: Instant::now(),
            next_check: AtomicU64::new(1),
            verified: Mutex::new(LruCache::new(
                NonZeroUsize::new(VERIFIED_CACHE).expect("non-zero"),
            )),
            key: random_key(),
        })
    }
}

impl AuthBasic {
    /// The current users, after reloading the file if it changed and a second
    /// has passed since the last look.
    fn users(&self) -> Arc<Table> {
        let now = self.epoch.elapsed().as_secs();
        let next = self.next_check.load(Ordering::Relaxed);
        if now >= next
            && self
                .next_check
                .compare_exchange(next, now + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.reload_if_changed();
        }
        Arc::clone(&self.table.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// One `stat`; when the file changed, parse it and swap the table in (and
    /// forget cached verifications), or keep the old table and log why.
    fn reload_if_changed(&self) {
        let mut stamp = self.stamp.lock().unwrap_or_else(|e| e.into_inner());
        let now = match std::fs::metadata(&self.path) {
            Ok(m) => Stamp::of(&m),
            Err(e) => {
                if stamp.take().is_some() {
                    tracing::warn!(file = %self.path.display(), error = %e,
                        "auth-basic: user file unreadable; keeping the users loaded before");
                }
                return;
            }
        };
        if *stamp == Some(now) {
            return;
        }
        *stamp = Some(now);
        match load(&self.path, self.allow_plain) {
            Ok((table, _)) => {
                tracing::info!(file = %self.path.display(), users = table.len(),
                    "auth-basic: user file reloaded");
                *self.table.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(table);
                self.verified
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clear();
            }
            Err(e) => tracing::warn!(error = %e,
                "auth-basic: user file not reloaded; keeping the users loaded before"),
        }
    }

    fn cache_key(&self, user: &str, password: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.key);
        h.update((user.len() as u64).to_le_bytes());
        h.update(user.as_bytes());
        h.update(password.as_bytes());
        h.finalize().into()
    }

    /// Checks a user name and password against the file; `true` when they match
    /// (whether or not `require` permits the user).
    fn check_password(&self, user: &str, password: &str) -> bool {
        let table = self.users();
        let Some(entry) = table.get(user) else {
            return false;
        };
        let key = self.cache_key(user, password);
        {
            let mut cache = self.verified.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(raw) = cache.get(&key) {
                if Arc::ptr_eq(raw, &entry.raw) {
                    return true;
                }
            }
        }
        if !entry.hash.verify(password.as_bytes()) {
            return false;
        }
        self.verified
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .put(key, Arc::clone(&entry.raw));
        true
    }

    fn unauthorized(&self) -> HttpResponse {
        let mut r = error_response(StatusCode::UNAUTHORIZED);
        r.headers_mut()
            .insert(WWW_AUTHENTICATE, self.challenge.clone());
        r
    }

    #[cfg(test)]
    fn force_check(&self) {
        self.next_check.store(0, Ordering::Relaxed);
    }
}

impl Module for AuthBasic {
    fn hooks(&self) -> Hooks {
        Hooks::REQUEST
    }

    fn on_request(&self, cx: &mut Ctx<'_>) -> Outcome {
        let Some(c) = header::credentials(cx.req.headers()) else {
            return Outcome::Respond(self.unauthorized());
        };
        if !self.require.permits(&c.user) || !self.check_password(&c.user, &c.password) {
            return Outcome::Respond(self.unauthorized());
        }
        cx.user = Some(c.user);
        Outcome::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use std::borrow::Cow;
    use tessera_core::actix_web::test::TestRequest;
    use tessera_core::vhost::VhostInfo;

    const APR1: &str = "$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0"; // "secret"

    struct Dir(PathBuf);
    impl Dir {
        fn new(tag: &str) -> Dir {
            static N: AtomicU64 = AtomicU64::new(0);
            let p = std::env::temp_dir().join(format!(
                "tessera-auth-{}-{}-{tag}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
        fn write(&self, name: &str, text: &str) {
            std::fs::write(self.0.join(name), text).unwrap();
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn build(dir: &Dir, json: serde_json::Value) -> Result<AuthBasic, String> {
        crate::testing::build_in(json, &std::env::temp_dir(), &dir.0)
    }

    /// Runs the request hook with an Authorization header (if any); returns
    /// the user on success or the challenge on 401.
    fn run(m: &AuthBasic, auth: Option<&str>) -> Result<String, String> {
        let mut req = TestRequest::get().uri("/");
        if let Some(a) = auth {
            req = req.insert_header(("Authorization", a));
        }
        let req = req.to_http_request();
        let v = VhostInfo {
            index: 0,
            names: vec![],
            document_root: std::env::temp_dir(),
        };
        let mut cx = Ctx::new(&req, &v, Cow::Borrowed("/"));
        match m.on_request(&mut cx) {
            Outcome::Continue => Ok(cx.user.clone().unwrap()),
            Outcome::Respond(r) => {
                assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
                Err(r
                    .headers()
                    .get(WWW_AUTHENTICATE)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned())
            }
        }
    }

    fn basic(user: &str, pw: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"))
        )
    }

    #[test]
    fn accepts_and_refuses() {
        let d = Dir::new("ok");
        let bc = bcrypt::hash("hunter2", 4).unwrap();
        d.write("htpasswd", &format!("alice:{APR1}\nbob:{bc}\n"));
        let m = build(
            &d,
            serde_json::json!({"realm": "Staff", "user-file": "htpasswd"}),
        )
        .unwrap();
        assert_eq!(run(&m, Some(&basic("alice", "secret"))), Ok("alice".into()));
        assert_eq!(run(&m, Some(&basic("bob", "hunter2"))), Ok("bob".into()));
        // cached: the second time hits the cache and still succeeds
        assert_eq!(run(&m, Some(&basic("bob", "hunter2"))), Ok("bob".into()));
        let challenge = "Basic realm=\"Staff\", charset=\"UTF-8\"".to_string();
        assert_eq!(
            run(&m, Some(&basic("bob", "hunter3"))),
            Err(challenge.clone())
        );
        assert_eq!(
            run(&m, Some(&basic("carol", "secret"))),
            Err(challenge.clone())
        );
        assert_eq!(run(&m, None), Err(challenge.clone()));
        assert_eq!(run(&m, Some("Basic %%%")), Err(challenge));
    }

    #[test]
    fn require_list() {
        let d = Dir::new("req");
        d.write("htpasswd", &format!("alice:{APR1}\nbob:{APR1}\n"));
        let m = build(
            &d,
            serde_json::json!({"user-file": "htpasswd", "require": ["bob"]}),
        )
        .unwrap();
        assert!(run(&m, Some(&basic("alice", "secret"))).is_err());
        assert_eq!(run(&m, Some(&basic("bob", "secret"))), Ok("bob".into()));
        let m = build(
            &d,
            serde_json::json!({"user-file": "htpasswd", "require": "valid-user"}),
        )
        .unwrap();
        assert!(run(&m, Some(&basic("alice", "secret"))).is_ok());
    }

    #[test]
    fn build_errors_name_the_key() {
        let d = Dir::new("err");
        d.write("plain", "alice:secret\n");
        d.write("good", &format!("alice:{APR1}\n"));
        let e = |j| build(&d, j).err().unwrap();
        assert!(e(serde_json::json!({})).starts_with("user-file: missing"));
        let msg = e(serde_json::json!({"user-file": "nope"}));
        assert!(
            msg.starts_with("user-file: ") && msg.contains("nope"),
            "{msg}"
        );
        let msg = e(serde_json::json!({"user-file": "plain"}));
        assert!(
            msg.starts_with("user-file: ") && msg.contains("line 1: user \"alice\": plain-text"),
            "{msg}"
        );
        assert!(build(
            &d,
            serde_json::json!({"user-file": "plain", "allow-plain": true})
        )
        .is_ok());
        let msg = e(serde_json::json!({"user-file": "good", "require": "everyone"}));
        assert!(msg.starts_with("require: "), "{msg}");
        let msg = e(serde_json::json!({"user-file": "good", "require": []}));
        assert!(msg.starts_with("require: "), "{msg}");
        let msg = e(serde_json::json!({"user-file": "good", "realm": "a\u{7}b"}));
        assert!(msg.starts_with("realm: "), "{msg}");
        assert!(build(&d, serde_json::json!({"user-file": "good", "users": "x"})).is_err());
        assert!(build(&d, serde_json::json!({"user-file": "good", "require": 3})).is_err());
    }

    #[test]
    fn reload_on_change_keeps_old_table_on_error() {
        let d = Dir::new("reload");
        d.write("htpasswd", &format!("alice:{APR1}\n"));
        let m = build(&d, serde_json::json!({"user-file": "htpasswd"})).unwrap();
        assert!(run(&m, Some(&basic("alice", "secret"))).is_ok());
        // a change is not looked at before the next check is due ...
        m.next_check.store(u64::MAX, Ordering::Relaxed);
        d.write("htpasswd", &format!("bob:{APR1}\n"));
        assert!(run(&m, Some(&basic("alice", "secret"))).is_ok());
        // ... and is picked up once it is; the verification cache is cleared
        m.force_check();
        assert!(run(&m, Some(&basic("alice", "secret"))).is_err());
        assert!(run(&m, Some(&basic("bob", "secret"))).is_ok());
        // a broken file keeps the previous users
        d.write("htpasswd", "bob:secret-in-plain-text\n");
        m.force_check();
        assert!(run(&m, Some(&basic("bob", "secret"))).is_ok());
        // so does a missing one
        std::fs::remove_file(d.0.join("htpasswd")).unwrap();
        m.force_check();
        assert!(run(&m, Some(&basic("bob", "secret"))).is_ok());
        // and it comes back
        d.write("htpasswd", &format!("carol:{APR1}\n"));
        m.force_check();
        assert!(run(&m, Some(&basic("carol", "secret"))).is_ok());
        assert!(run(&m, Some(&basic("bob", "secret"))).is_err());
    }

    #[test]
    fn cache_is_bounded_and_keyed_by_password() {
        let d = Dir::new("cache");
        let bc = bcrypt::hash("pw", 4).unwrap();
        d.write("htpasswd", &format!("u:{bc}\n"));
        let m = build(&d, serde_json::json!({"user-file": "htpasswd"})).unwrap();
        assert!(m.check_password("u", "pw"));
        assert!(!m.check_password("u", "pw2"));
        assert!(!m.check_password("v", "pw"));
        let cache = m.verified.lock().unwrap();
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.cap().get(), VERIFIED_CACHE);
    }
}
