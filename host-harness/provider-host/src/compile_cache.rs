//! The component, compiled once and kept precompiled (`.cwasm`) on disk.
//!
//! The file name is the cache key: the sha256 of the `.wasm` and a hash of the engine's
//! compilation settings (wasmtime's `precompile_compatibility_hash`, which covers the wasmtime
//! version, target, Cranelift flags, tunables and wasm features). Next to each `.cwasm` lies the
//! sha256 of its bytes. A file is used only if that digest matches, wasmtime recognises it as a
//! component and accepts it for this engine; anything else (truncated, flipped bits, another
//! wasmtime) is compiled again and replaced. Deserialising precompiled code is `unsafe` because
//! it is executed as-is: the digest is what keeps a damaged file from ever running.
//!
//! Files are written to a temporary name and renamed, so a concurrent host never reads half a
//! file; the cache directory is created owner-only. A directory keeps the [`KEEP`] components
//! used most recently (a load marks its file used): each new build of a provider, or each
//! wasmtime upgrade, adds a file of megabytes, and storing one removes the oldest beyond that.
//! wasmtime's own cache (`wasmtime-cache`) would evict too, but checks no digest before running
//! what it reads back.

use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Engine, Precompiled};

use crate::error::HostError;

/// How the component was obtained; reported so operators and tests can see the cache work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOutcome {
    /// No cache directory: compiled in memory.
    Compiled,
    /// Loaded from a valid cache file.
    Loaded,
    /// No cache file yet: compiled and stored.
    Stored,
    /// A cache file existed but was not usable (the reason says why): compiled and replaced.
    Rebuilt(String),
    /// Compiled, but the cache file could not be written (the reason says why).
    NotStored(String),
}

/// How many precompiled components a cache directory keeps: enough for the providers and the
/// wasmtime versions an installation runs side by side, few enough that old builds do not pile
/// up.
pub const KEEP: usize = 8;

/// The cache key of `wasm` for `engine`: `<sha256 of wasm>-<engine settings hash>`.
pub fn cache_key(engine: &Engine, wasm: &[u8]) -> String {
    let mut settings = Sha256Hasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut settings);
    let settings = hex(&settings.0.finalize());
    format!("{}-{}", hex(&Sha256::digest(wasm)), &settings[..32])
}

/// Where the precompiled file of a key lives.
pub fn cache_path(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.cwasm"))
}

fn digest_path(cwasm: &Path) -> PathBuf {
    cwasm.with_extension("cwasm.sha256")
}

/// Compiles `wasm`, or loads it from `cache_dir` when a valid precompiled copy is there.
/// Blocking (compilation takes seconds): call it off the async runtime.
pub fn load(engine: &Engine, wasm: &[u8], cache_dir: Option<&Path>) -> Result<(Component, CacheOutcome), HostError> {
    let Some(dir) = cache_dir else {
        return Ok((compile(engine, wasm)?, CacheOutcome::Compiled));
    };
    let path = cache_path(dir, &cache_key(engine, wasm));
    let rebuild_reason = match read_cached(engine, &path) {
        Ok(Some(component)) => {
            mark_used(&path);
            return Ok((component, CacheOutcome::Loaded));
        }
        Ok(None) => None,
        Err(reason) => Some(reason),
    };
    let component = compile(engine, wasm)?;
    let stored = store(dir, &path, &component);
    if stored.is_ok() {
        evict(dir, KEEP);
    }
    let outcome = match stored {
        Err(reason) => {
            tracing::warn!(target: "provider_host::cache", path = %path.display(), reason,
                "cannot write the precompiled component; continuing without a cache");
            CacheOutcome::NotStored(reason)
        }
        Ok(()) => match rebuild_reason {
            Some(reason) => {
                tracing::warn!(target: "provider_host::cache", path = %path.display(), reason,
                    "replaced an unusable precompiled component");
                CacheOutcome::Rebuilt(reason)
            }
            None => CacheOutcome::Stored,
        },
    };
    Ok((component, outcome))
}

fn compile(engine: &Engine, wasm: &[u8]) -> Result<Component, HostError> {
    Component::from_binary(engine, wasm).map_err(|e| HostError::Load(format!("{e:?}")))
}

/// `Ok(None)`: no cache file. `Err(reason)`: a file exists but must not be used.
fn read_cached(engine: &Engine, path: &Path) -> Result<Option<Component>, String> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    let expected =
        std::fs::read_to_string(digest_path(path)).map_err(|e| format!("its digest file is missing: {e}"))?;
    if expected.trim() != hex(&Sha256::digest(&bytes)) {
        return Err("its content does not match its recorded sha256 (damaged or modified)".to_string());
    }
    if Engine::detect_precompiled(&bytes) != Some(Precompiled::Component) {
        return Err("it is not a precompiled component".to_string());
    }
    // SAFETY: the bytes are exactly what this cache wrote from `Component::serialize` (their
    // sha256 matches the digest recorded beside them, in an owner-only directory), and wasmtime
    // itself refuses artifacts of another version or incompatible engine settings.
    let component = unsafe { Component::deserialize(engine, &bytes) };
    component.map(Some).map_err(|e| format!("wasmtime refused it: {e}"))
}

fn store(dir: &Path, path: &Path, component: &Component) -> Result<(), String> {
    create_private_dir(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let bytes = component.serialize().map_err(|e| format!("cannot serialize the component: {e}"))?;
    let digest = hex(&Sha256::digest(&bytes));
    write_atomically(&digest_path(path), digest.as_bytes())?;
    write_atomically(path, &bytes)
}

/// Marks a cache file used now (its modification time), so eviction keeps what runs.
fn mark_used(path: &Path) {
    if let Ok(file) = std::fs::File::options().write(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// Removes the precompiled components of `dir` beyond the `keep` used most recently, with their
/// digests; returns how many went. A host still loading one of them reads it again or compiles.
fn evict(dir: &Path, keep: usize) -> usize {
    let Ok(listing) = std::fs::read_dir(dir) else { return 0 };
    let mut files: Vec<(SystemTime, PathBuf)> = listing
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|x| x == "cwasm"))
        .filter_map(|path| Some((std::fs::metadata(&path).ok()?.modified().ok()?, path)))
        .collect();
    files.sort_by_key(|(used, _)| std::cmp::Reverse(*used));
    let mut removed = 0;
    for (_, path) in files.into_iter().skip(keep) {
        if std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
        let _ = std::fs::remove_file(digest_path(&path));
    }
    if removed > 0 {
        tracing::debug!(target: "provider_host::cache", dir = %dir.display(), removed, "evicted old precompiled components");
    }
    removed
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let unique = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_file_name(format!(".{file_name}.{}-{unique}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

/// Makes temporary names unique between threads of one process.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Lowercase hex of `bytes` (also the ownership signature's encoding).
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Feeds `Hash` output into sha256, so the engine hash is stable across processes (unlike
/// `DefaultHasher`, whose algorithm is unspecified).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(first)
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Writes a fake entry (a `.cwasm` and its digest) last used `age` ago.
    fn entry(dir: &Path, name: &str, age: Duration) -> PathBuf {
        let path = dir.join(format!("{name}.cwasm"));
        std::fs::write(&path, b"x").expect("write");
        std::fs::write(digest_path(&path), b"d").expect("write");
        let file = std::fs::File::options().write(true).open(&path).expect("open");
        file.set_modified(SystemTime::now() - age).expect("set mtime");
        path
    }

    #[test]
    fn eviction_keeps_the_most_recently_used_and_their_digests() {
        let dir = std::env::temp_dir().join(format!("compile-cache-evict-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let paths: Vec<PathBuf> =
            (0..5).map(|n| entry(&dir, &format!("k{n}"), Duration::from_secs(3600 * (n + 1)))).collect();
        std::fs::write(dir.join("unrelated.txt"), b"kept").expect("write");
        mark_used(&paths[4]);

        assert_eq!(evict(&dir, 3), 2);
        let left = |p: &PathBuf| p.exists() && digest_path(p).exists();
        assert!(left(&paths[0]) && left(&paths[1]) && left(&paths[4]), "the newest two and the one just used");
        for gone in [&paths[2], &paths[3]] {
            assert!(!gone.exists() && !digest_path(gone).exists(), "{} and its digest are gone", gone.display());
        }
        assert!(dir.join("unrelated.txt").exists());
        assert_eq!(evict(&dir, 3), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
