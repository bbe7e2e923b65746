//! Tessera's built-in modules, one per file or folder named after the module, each
//! behind a Cargo feature of the same name:
//!
//! | module | phases | mirrors |
//! |---|---|---|
//! | `static-file` | content | lighttpd mod_staticfile, nginx static, Cherokee `file` |
//! | `headers` | response | lighttpd `setenv.*-response-header`, nginx `add_header … always` |
//! | `expires` | response | lighttpd mod_expire, nginx `expires` |
//! | `access-log` | log | lighttpd mod_accesslog, nginx `access_log` |
//!
//! ```
//! let mut reg = tessera_core::Registry::new();
//! tessera_modules::register_all(&mut reg).unwrap();
//! assert!(reg.contains("static-file"));
//! ```

#[cfg(feature = "access-log")]
pub mod access_log;
#[cfg(feature = "expires")]
pub mod expires;
#[cfg(feature = "headers")]
pub mod headers;
pub mod skeleton;
#[cfg(feature = "static-file")]
pub mod static_file;

use tessera_core::registry::{Registry, RegistryError};

/// Registers every built-in module compiled in.
///
/// # Errors
/// [`RegistryError::Duplicate`] when a name is already taken in `reg`.
pub fn register_all(reg: &mut Registry) -> Result<(), RegistryError> {
    #[cfg(feature = "static-file")]
    reg.register::<static_file::StaticFile>()?;
    #[cfg(feature = "headers")]
    reg.register::<headers::Headers>()?;
    #[cfg(feature = "expires")]
    reg.register::<expires::Expires>()?;
    #[cfg(feature = "access-log")]
    reg.register::<access_log::AccessLog>()?;
    Ok(())
}
