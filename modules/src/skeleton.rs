//! A template module to copy (lighttpd's `mod_skeleton.c`): the uniform
//! declaration every module gives, in order: name, configuration, build, hooks.
//! It is not registered.

use serde::Deserialize;
use tessera_core::actix_web::HttpResponse;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};

/// Options of `[vhost.skeleton]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SkeletonConfig {
    /// An example option; default `false`.
    #[serde(default)]
    pub enabled: bool,
}

/// The template module.
pub struct Skeleton {
    enabled: bool,
}

impl ModuleDecl for Skeleton {
    const NAME: &'static str = "skeleton";
    type Config = SkeletonConfig;
    fn build(cfg: SkeletonConfig, _cx: &BuildContext<'_>) -> Result<Self, String> {
        Ok(Skeleton {
            enabled: cfg.enabled,
        })
    }
}

impl Module for Skeleton {
    fn hooks(&self) -> Hooks {
        Hooks::RESPONSE
    }
    fn on_response(&self, _cx: &mut Ctx<'_>, res: &mut HttpResponse) {
        if self.enabled {
            res.headers_mut().insert(
                tessera_core::actix_web::http::header::HeaderName::from_static("x-skeleton"),
                tessera_core::actix_web::http::header::HeaderValue::from_static("1"),
            );
        }
    }
}
