//! The module registry: module name -> factory (nginx's module list, lighttpd's
//! `server.modules`). Built-in modules register here by name; run-time plugins
//! register the same way, so the configuration treats both alike.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::module::{BuildContext, Module, ModuleDecl};

/// Builds module instances from configuration tables.
pub trait ModuleFactory: Send + Sync {
    /// The module name (kebab-case), as used in `modules = [...]`.
    fn name(&self) -> &str;
    /// Builds one instance from its table (a JSON value; `Null` when the module is
    /// named in `modules` without a table).
    ///
    /// # Errors
    /// [`BuildError`] with the key path inside the table (empty for the whole
    /// table) and the reason.
    fn build(
        &self,
        table: &serde_json::Value,
        cx: &BuildContext<'_>,
    ) -> Result<Arc<dyn Module>, BuildError>;
}

/// A module table that could not be turned into an instance.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct BuildError {
    /// Dotted key path inside the module's table, `""` for the table itself.
    pub key: String,
    /// What is wrong, in one line.
    pub reason: String,
}

struct DeclFactory<M>(std::marker::PhantomData<fn() -> M>);

impl<M: ModuleDecl> ModuleFactory for DeclFactory<M> {
    fn name(&self) -> &str {
        M::NAME
    }

    fn build(
        &self,
        table: &serde_json::Value,
        cx: &BuildContext<'_>,
    ) -> Result<Arc<dyn Module>, BuildError> {
        let cfg: M::Config = if table.is_null() {
            M::Config::default()
        } else {
            serde_path_to_error::deserialize(table).map_err(|e| {
                let path = e.path().to_string();
                BuildError {
                    key: if path == "." { String::new() } else { path },
                    reason: e.into_inner().to_string(),
                }
            })?
        };
        let m = M::build(cfg, cx).map_err(|reason| BuildError {
            key: String::new(),
            reason,
        })?;
        Ok(Arc::new(m))
    }
}

/// Error registering a module.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Two modules claim the same name.
    #[error("module name \"{0}\" is already registered")]
    Duplicate(String),
    /// A name that is not kebab-case ASCII (`[a-z0-9-]+`).
    #[error("module name \"{0}\" is not kebab-case ([a-z0-9-]+)")]
    BadName(String),
}

/// The table of known modules. Names are unique; lookups are by exact name.
#[derive(Default, Clone)]
pub struct Registry {
    factories: HashMap<String, Arc<dyn ModuleFactory>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a built-in module by its declaration.
    ///
    /// # Errors
    /// [`RegistryError::Duplicate`] when the name is taken.
    pub fn register<M: ModuleDecl>(&mut self) -> Result<(), RegistryError> {
        self.register_factory(Arc::new(DeclFactory::<M>(std::marker::PhantomData)))
    }

    /// Registers any factory (used by the plugin loader).
    ///
    /// # Errors
    /// [`RegistryError::Duplicate`] when the name is taken, [`RegistryError::BadName`]
    /// when it is not kebab-case.
    pub fn register_factory(&mut self, f: Arc<dyn ModuleFactory>) -> Result<(), RegistryError> {
        let name = f.name().to_owned();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(RegistryError::BadName(name));
        }
        if self.factories.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        self.factories.insert(name, f);
        Ok(())
    }

    /// True when a module of this name is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.factories.contains_key(name)
    }

    /// The factory for `name`, if registered.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn ModuleFactory>> {
        self.factories.get(name)
    }

    /// All registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.factories.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }
}

/// Per-configuration state that module factories share across instances, keyed by
/// type (for example the access-log writers, one per file). Used only while a
/// configuration is built and when it shuts down, never per request.
#[derive(Default)]
pub struct SharedState {
    map: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl SharedState {
    /// The value of type `T`, created with `init` on first use.
    pub fn get_or_init<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let v = map
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(init()) as Arc<dyn Any + Send + Sync>)
            .clone();
        drop(map);
        v.downcast::<T>().expect("keyed by TypeId")
    }
}
