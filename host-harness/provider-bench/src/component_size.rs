//! The component row of the report: each `.wasm`'s size, its cold compile time, and the time
//! to load it precompiled from the host's cache (what every CLI call and host start pays).

use std::time::{Duration, Instant};

use provider_host::compile_cache;
use provider_host::{HostEngine, Limits};

use crate::stats::{Samples, fmt_bytes, fmt_duration};
use crate::table::Table;

/// The components `make bench` builds, with the file names they are built as.
pub const COMPONENTS: [(&str, &str); 3] = [
    ("kubernetes provider", "provider.wasm"),
    ("reference provider", "reference_provider.wasm"),
    ("hostile fixture", "hostile_provider.wasm"),
];

/// The limit each component is held to.
pub const SIZE_TARGET_BYTES: u64 = 1 << 20;

/// Sizes, compile and cache-load times of the built components.
pub fn measure(rounds: usize) -> anyhow::Result<Table> {
    let engine = HostEngine::new(&Limits::default())?;
    let mut table = Table::new(
        "Components",
        &["component", "size", "under 1 MiB", "cold compile p50", "cached load p50", "cached load p99"],
    );
    let cache = tempdir()?;
    for (name, file) in COMPONENTS {
        let path = crate::world::component(file)?;
        let wasm = std::fs::read(&path)?;
        let compile = Samples::new(
            (0..rounds.clamp(1, 3))
                .map(|_| time(|| compile_cache::load(engine.engine(), &wasm, None).map(drop)))
                .collect::<Result<_, _>>()?,
        );
        compile_cache::load(engine.engine(), &wasm, Some(&cache))?;
        let cached = Samples::new(
            (0..rounds)
                .map(|_| time(|| compile_cache::load(engine.engine(), &wasm, Some(&cache)).map(drop)))
                .collect::<Result<_, _>>()?,
        );
        let size = wasm.len() as u64;
        table.row([
            name.to_string(),
            format!("{} ({size} B)", fmt_bytes(size)),
            if size < SIZE_TARGET_BYTES { "yes".into() } else { "no".into() },
            fmt_duration(compile.p50()),
            fmt_duration(cached.p50()),
            fmt_duration(cached.p99()),
        ]);
    }
    let _ = std::fs::remove_dir_all(&cache);
    table.note(
        "Cold compile: Cranelift, parallel compilation on all cores. Cached load: the host's on-disk cache of \
         precompiled components (`--cache-dir`), validated by key and deserialized.",
    );
    Ok(table)
}

fn time<E>(f: impl FnOnce() -> Result<(), E>) -> Result<Duration, E> {
    let started = Instant::now();
    f()?;
    Ok(started.elapsed())
}

fn tempdir() -> anyhow::Result<std::path::PathBuf> {
    let dir = crate::world::workspace_root().join("target/bench-compile-cache");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
