//! Tessera's core: the [`Module`] trait and its phases, the module [`Registry`],
//! configuration loading ([`config`]), virtual hosts ([`vhost`]), rules
//! ([`rule`]), the per-vhost [`pipeline`], and the actix-web server assembly
//! ([`server`]). It names no specific module: built-in modules live in
//! `tessera-modules` and register themselves by name.
//!
//! A request goes through:
//! 1. protocol checks (Host, method, path: RFC 9110 / 9112),
//! 2. vhost selection by host ([`vhost::VhostTable::select`]),
//! 3. rule resolution into the active modules ([`pipeline::Pipeline::resolve`]),
//! 4. the request phase (a module may answer), the content phase (the first
//!    content handler that answers), the response phase (status and headers),
//! 5. the log phase, when the body was sent or the client went away.
//!
//! ```
//! let reg = tessera_core::Registry::new();
//! let dir = std::env::temp_dir().join("tessera-doc-example");
//! std::fs::create_dir_all(dir.join("www")).unwrap();
//! let file = dir.join("server.toml");
//! std::fs::write(&file, "[[vhost]]\nserver-names = [\"a.test\"]\ndocument-root = \"www\"\n").unwrap();
//! let cfg = tessera_core::config::load(&file, &reg).unwrap();
//! assert_eq!(cfg.vhosts.select(Some("A.test:80")).label, "a.test");
//! ```

pub mod body;
pub mod buffers;
pub mod config;
pub mod conn;
pub mod context;
pub mod explain;
#[doc(hidden)]
pub mod fuzzing;
pub mod h1;
pub mod health;
pub mod module;
pub mod path;
pub mod pipeline;
pub mod plugin_host;
pub mod realip;
pub mod registry;
pub mod request;
pub mod request_body;
pub mod residency;
pub mod response;
pub mod rule;
pub mod server;
pub mod stats;
pub mod supervisor;
pub mod timer_floor;
pub mod tls;
pub mod upgrade;
pub mod upstream;
pub mod vhost;

pub use config::{Config, ConfigError};
pub use context::{Ctx, LogRecord};
pub use module::{BuildContext, Hooks, Module, ModuleDecl, Outcome};
pub use registry::{BuildError, ModuleFactory, Registry, SharedState};

/// Re-exported so modules and plugins build against the same actix-web.
pub use actix_web;
