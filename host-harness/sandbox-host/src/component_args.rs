//! The component a command runs and where its compiled form is cached: `--component FILE`, or
//! the Kubernetes provider built into this binary (see `build.rs`); `--cache-dir DIR`, or
//! `sandbox-host` in the user's cache directory. Neither default depends on the directory a
//! command runs in, so an installed binary works from anywhere.

use std::path::PathBuf;

use clap::Args;
use provider_host::runner::ComponentSource;

/// The Kubernetes provider component, built with this binary.
pub static BUILT_IN_PROVIDER: &[u8] = include_bytes!(env!("SANDBOX_HOST_PROVIDER_COMPONENT"));

/// Which component, and where its compiled form is kept.
#[derive(Args, Clone, Default)]
pub struct ComponentArgs {
    /// The provider component (.wasm). Default: the Kubernetes provider built into this binary.
    #[arg(long, value_name = "FILE")]
    pub component: Option<PathBuf>,
    /// Where compiled components are cached (native code this host runs: keep it private).
    /// Default: `sandbox-host` in the user's cache directory (`$XDG_CACHE_HOME` or `~/.cache`).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

impl ComponentArgs {
    /// The component's bytes or file; a named file must exist.
    pub fn source(&self) -> anyhow::Result<ComponentSource> {
        match &self.component {
            None => Ok(ComponentSource::Bytes(BUILT_IN_PROVIDER.to_vec())),
            Some(path) if path.exists() => Ok(ComponentSource::File(path.clone())),
            Some(path) => anyhow::bail!(
                "no provider component at {}: name a built .wasm file, or leave --component out for the built-in \
                 Kubernetes provider",
                path.display()
            ),
        }
    }

    /// The compile cache's directory; none when the user has no cache directory either (every
    /// load then compiles the component).
    pub fn cache_dir(&self) -> Option<PathBuf> {
        self.cache_dir.clone().or_else(|| dirs::cache_dir().map(|dir| dir.join("sandbox-host")))
    }

    /// The component, as a person reads it in output.
    pub fn shown(&self) -> String {
        match &self.component {
            None => "the built-in Kubernetes provider".to_string(),
            Some(path) => path.display().to_string(),
        }
    }
}
