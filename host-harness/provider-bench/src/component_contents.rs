//! What the Kubernetes provider's component is made of: its code by the crate each function
//! comes from, its data, the rest of its core module, and what the component model adds.
//!
//! Terms:
//! - **shipped**: the component as the host loads it (profile `component`, symbols stripped).
//! - **named**: the same build with its functions' names kept (profile `component-names`, which
//!   strips only debug info). Names live in a custom section, so the code is the shipped code:
//!   the table is refused when the two code sections differ in size or function count.
//! - **a function's crate**: the first path segment of its demangled name (`serde_json` for
//!   `serde_json::de::from_str`); for a trait method `<T as Trait>::f`, the crate of the type
//!   `T`, or the trait's when `T` is a type parameter or a primitive. Generic code counts for
//!   the crate that defines it, whatever types it was made for (cargo-bloat counts the same way),
//!   so `core` holds the provider's sorting, formatting and `drop_in_place`s.
//!
//! Sizes are read with `wasmparser` (the parser wasmtime itself uses) and names demangled with
//! `rustc-demangle` (the one the Rust project publishes); both are already in the host's build.

use std::collections::BTreeMap;
use std::ops::Range;

use wasmparser::{Encoding, KnownCustom, Name, Parser, Payload, TypeRef};

use crate::stats::fmt_bytes;
use crate::table::Table;

/// Crates whose code is under this many bytes are summed in one row.
const OWN_ROW_BYTES: usize = 1024;

/// One core module of a component: where it is and what its code and data sections hold.
#[derive(Debug, Default)]
struct CoreModule {
    range: Range<usize>,
    imported_functions: u32,
    /// Each defined function's body size, in order.
    bodies: Vec<usize>,
    code_section: usize,
    data_section: usize,
    /// Function names by index (imports first), from the `name` section.
    names: BTreeMap<u32, String>,
}

/// The core modules of a component, in the order they appear.
fn core_modules(wasm: &[u8]) -> anyhow::Result<Vec<CoreModule>> {
    let mut done = Vec::new();
    let mut next_range = 0..wasm.len();
    let mut current: Option<CoreModule> = None;
    for payload in Parser::new(0).parse_all(wasm) {
        match payload? {
            Payload::ModuleSection { unchecked_range, .. } => next_range = unchecked_range,
            Payload::Version { encoding: Encoding::Module, .. } => {
                current = Some(CoreModule { range: next_range.clone(), ..CoreModule::default() });
            }
            Payload::End(_) => done.extend(current.take()),
            payload => {
                if let Some(module) = current.as_mut() {
                    read_section(module, payload)?;
                }
            }
        }
    }
    Ok(done)
}

fn read_section(module: &mut CoreModule, payload: Payload<'_>) -> anyhow::Result<()> {
    match payload {
        Payload::ImportSection(imports) => {
            for import in imports.into_imports() {
                if matches!(import?.ty, TypeRef::Func(_) | TypeRef::FuncExact(_)) {
                    module.imported_functions += 1;
                }
            }
        }
        Payload::CodeSectionStart { range, .. } => module.code_section = range.len(),
        Payload::CodeSectionEntry(body) => module.bodies.push(body.range().len()),
        Payload::DataSection(data) => module.data_section = data.range().len(),
        Payload::CustomSection(custom) => {
            if let KnownCustom::Name(names) = custom.as_known() {
                for name in names {
                    if let Name::Function(functions) = name? {
                        for naming in functions {
                            let naming = naming?;
                            module.names.insert(naming.index, naming.name.to_string());
                        }
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The module holding the provider's code: the largest (the others are the adapters
/// `wit-component` adds, a few hundred bytes each).
fn main_module(modules: Vec<CoreModule>) -> anyhow::Result<CoreModule> {
    modules.into_iter().max_by_key(|m| m.range.len()).ok_or_else(|| anyhow::anyhow!("the component has no core module"))
}

/// The crate a function is counted for (see the module docs); `None` for a name that is not a
/// mangled Rust path (the bindings' export symbols, the C ABI's helpers such as `memcmp`).
fn crate_of(symbol: &str) -> Option<String> {
    let demangled = format!("{:#}", rustc_demangle::try_demangle(symbol).ok()?);
    Some(path_crate(&demangled).to_string())
}

/// What a function's code is counted as: its crate, or `(exports)` for the component's export
/// entry points (`iface#func` and its post-return: the bindings, with what was inlined into
/// them), or `(C ABI)` for other unmangled names (`memcmp`, `cabi_realloc`, 128-bit arithmetic),
/// or `(no name)`.
fn part_of(name: Option<&str>) -> String {
    match name {
        None => "(no name)".into(),
        Some(name) => crate_of(name)
            .unwrap_or_else(|| if name.contains('#') && name.contains(':') { "(exports)" } else { "(C ABI)" }.into()),
    }
}

/// The crate of a demangled path: its first segment, or for a qualified path `<T as Trait>::f`
/// the crate of `T`, else of `Trait`, else `core` (an inherent method of a primitive type,
/// `<[T]>::sort_by` or `<str>::find`, which only the standard library may define).
fn path_crate(path: &str) -> &str {
    let Some(qualified) = path.strip_prefix('<') else {
        return crate_segment(path).unwrap_or(path);
    };
    let (self_type, trait_path) = split_qualified(qualified);
    let self_type = self_type.trim_start_matches(['&', '*', '[', '(']);
    let self_type = ["mut ", "const ", "dyn "].iter().fold(self_type, |t, p| t.strip_prefix(p).unwrap_or(t));
    crate_segment(self_type).or_else(|| trait_path.and_then(crate_segment)).unwrap_or("core")
}

/// `T as Trait>::f` split into `T` and `Trait>::f` at its top-level ` as `; `T>::f` (an inherent
/// method) into `T` and nothing.
fn split_qualified(qualified: &str) -> (&str, Option<&str>) {
    let mut depth = 0i32;
    for (i, c) in qualified.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if depth == 0 => return (&qualified[..i], None),
            '>' => depth -= 1,
            ' ' if depth == 0 && qualified[i..].starts_with(" as ") => {
                return (&qualified[..i], Some(&qualified[i + 4..]));
            }
            _ => {}
        }
    }
    (qualified, None)
}

/// A path's crate: `serde_json` of `serde_json::de::from_str`; `None` when it is no path (`T`,
/// `u8`, `[T]`).
fn crate_segment(path: &str) -> Option<&str> {
    let end = path.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    (end > 0 && path[end..].starts_with("::")).then(|| &path[..end])
}

/// What the provider component's bytes are.
#[derive(Debug)]
pub struct Contents {
    /// The shipped component's size.
    pub total: usize,
    /// Code bytes (function bodies) and functions, by crate or other part (see the table), largest
    /// first.
    pub code: Vec<(String, usize, usize)>,
    /// The code section's own bytes beyond its bodies (its count and each body's size).
    pub code_framing: usize,
    /// The data section: strings, tables and constants, one segment after linking.
    pub data: usize,
    /// The rest of the core module: types, imports, the function, table, memory, global,
    /// export and element sections, custom sections.
    pub module_rest: usize,
    /// Everything outside the provider's core module: the component's types, imports, exports,
    /// instances and names, and the adapter modules.
    pub component: usize,
}

/// Reads `shipped` and its `named` twin (see the module docs).
pub fn contents(shipped: &[u8], named: &[u8]) -> anyhow::Result<Contents> {
    let module = main_module(core_modules(shipped)?)?;
    let twin = main_module(core_modules(named)?)?;
    anyhow::ensure!(
        twin.code_section == module.code_section && twin.bodies.len() == module.bodies.len(),
        "the component built with names has other code ({} B in {} functions) than the shipped one ({} B in {}): \
         build both from the same tree (`make bench` does)",
        twin.code_section,
        twin.bodies.len(),
        module.code_section,
        module.bodies.len()
    );
    anyhow::ensure!(!twin.names.is_empty(), "the component built with names has no `name` section");
    let mut by_crate: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (i, size) in module.bodies.iter().enumerate() {
        let index = module.imported_functions + u32::try_from(i)?;
        let entry = by_crate.entry(part_of(twin.names.get(&index).map(String::as_str))).or_default();
        entry.0 += size;
        entry.1 += 1;
    }
    let mut code: Vec<(String, usize, usize)> = by_crate.into_iter().map(|(k, (b, n))| (k, b, n)).collect();
    code.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let bodies: usize = module.bodies.iter().sum();
    Ok(Contents {
        total: shipped.len(),
        code,
        code_framing: module.code_section.saturating_sub(bodies),
        data: module.data_section,
        module_rest: module.range.len().saturating_sub(module.code_section + module.data_section),
        component: shipped.len().saturating_sub(module.range.len()),
    })
}

/// The table of what the shipped provider component is made of.
pub fn measure() -> anyhow::Result<Table> {
    let shipped = std::fs::read(crate::world::provider_component()?)?;
    let named = std::fs::read(crate::world::built("provider.wasm", "component-names")?)?;
    Ok(table(&contents(&shipped, &named)?))
}

/// A crate's name as code; `(exports)` and the like as they are.
fn quoted(part: &str) -> String {
    if part.starts_with('(') { part.to_string() } else { format!("`{part}`") }
}

fn table(c: &Contents) -> Table {
    let mut table = Table::new(
        &format!("What the Kubernetes provider's {} are", fmt_bytes(c.total as u64)),
        &["part", "bytes", "share", "functions"],
    );
    let share = |bytes: usize| format!("{:.1} %", bytes as f64 * 100.0 / c.total as f64);
    let mut row = |part: String, bytes: usize, functions: String| {
        table.row([part, bytes.to_string(), share(bytes), functions]);
    };
    let (own, small): (Vec<_>, Vec<_>) = c.code.iter().partition(|(_, bytes, _)| *bytes >= OWN_ROW_BYTES);
    for (part, bytes, functions) in own {
        row(format!("code: {}", quoted(part)), *bytes, functions.to_string());
    }
    if !small.is_empty() {
        let names: Vec<String> = small.iter().map(|(part, _, _)| quoted(part)).collect();
        let bytes = small.iter().map(|(_, b, _)| b).sum();
        let functions: usize = small.iter().map(|(_, _, n)| n).sum();
        row(format!("code: {}", names.join(", ")), bytes, functions.to_string());
    }
    row("code section's framing (its count, each body's size)".into(), c.code_framing, String::new());
    row("data (strings, tables, constants)".into(), c.data, String::new());
    row("the core module's other sections".into(), c.module_rest, String::new());
    row("the component's own (types, imports, exports, adapters)".into(), c.component, String::new());
    table.note(
        "Code by the crate each function comes from: its demangled name's first path segment, or for a trait \
         method its self type's crate (the trait's for a type parameter or primitive). Generic code counts for \
         the crate that defines it, whatever types it was made for: `core` and `alloc` hold the provider's \
         formatting, sorting, collections and drops. Names come from the same build with its names kept (profile \
         `component-names`), whose code section is the shipped one's to the byte (checked). `(exports)`: the \
         component's export entry points, the bindings with the provider code the linker inlined into them; \
         `(C ABI)`: unmangled helpers (`memcmp`, `cabi_realloc`, 128-bit arithmetic).",
    );
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_counts_for_its_path_or_its_self_type() {
        let cases = [
            ("_ZN10serde_json2de10from_slice17h0123456789abcdefE", Some("serde_json")),
            (
                "_ZN74_$LT$provider..component..HostKube$u20$as$u20$provider..kube_api..Kube$GT$15served_versions17hd96250247aec576bE",
                Some("provider"),
            ),
            ("_ZN46_$LT$T$u20$as$u20$serde_core..de..Expected$GT$3fmt17hd100ecbe8393c520E", Some("serde_core")),
            (
                "_ZN71_$LT$provider..input_limits..TooLarge$u20$as$u20$core..fmt..Display$GT$3fmt17h553dac456929971fE",
                Some("provider"),
            ),
            ("_ZN4core5slice4sort6shared5pivot11median3_rec17h0af91e90a4a9a2ddE", Some("core")),
            ("memcpy", None),
            ("paperclip:sandbox-provider/provider@0.4.0#acquire", None),
        ];
        for (symbol, expected) in cases {
            assert_eq!(crate_of(symbol).as_deref(), expected, "{symbol}");
        }
    }

    /// A core module whose functions carry Rust names, with one import before them.
    fn module(serde_body: &str) -> Vec<u8> {
        let wat = format!(
            r#"(module
                 (import "env" "f" (func))
                 (memory 1)
                 (func $_ZN8provider5small17h0123456789abcdefE nop)
                 (func $_ZN10serde_json2de4read17h0123456789abcdefE {serde_body})
                 (func $_ZN10serde_json2de4peek17h0123456789abcdefE nop nop)
                 (func $memcpy)
                 (data (i32.const 0) "constant"))"#
        );
        wat::parse_str(wat).expect("the test's module parses")
    }

    #[test]
    fn code_is_counted_by_crate_past_the_imports_and_the_parts_add_up() {
        let wasm = module("i32.const 1 i32.const 2 i32.add drop");
        let c = contents(&wasm, &wasm).unwrap();
        let crates: Vec<(&str, usize)> = c.code.iter().map(|(k, _, n)| (k.as_str(), *n)).collect();
        assert_eq!(crates, [("serde_json", 2), ("provider", 1), ("(C ABI)", 1)]);
        let code: usize = c.code.iter().map(|(_, b, _)| b).sum();
        assert_eq!(code + c.code_framing + c.data + c.module_rest + c.component, wasm.len());
        assert_eq!(c.component, 0, "a bare module has no component around it");
        assert!(c.data >= "constant".len());
    }

    #[test]
    fn a_twin_with_other_code_or_no_names_is_refused() {
        let shipped = module("nop");
        let other = module("i32.const 1 drop");
        let err = contents(&shipped, &other).unwrap_err().to_string();
        assert!(err.contains("other code"), "{err}");
        let unnamed =
            wat::parse_str("(module (func) (func) (func) (func) (memory 1) (data (i32.const 0) \"constant\"))")
                .unwrap();
        let err = contents(&unnamed, &unnamed).unwrap_err().to_string();
        assert!(err.contains("no `name` section"), "{err}");
    }

    #[test]
    fn a_reference_self_type_counts_for_the_type_behind_it() {
        assert_eq!(
            split_qualified("&provider::X as core::fmt::Debug>::fmt"),
            ("&provider::X", Some("core::fmt::Debug>::fmt"))
        );
        // `<&mut serde_json::ser::Serializer<W,F> as serde_core::ser::Serializer>::serialize_str`
        let symbol = "_ZN100_$LT$$RF$mut$u20$serde_json..ser..Serializer$LT$W$C$F$GT$$u20$as$u20$serde_core..ser..\
                      Serializer$GT$13serialize_str17h15e528644410dba4E";
        assert_eq!(crate_of(symbol).as_deref(), Some("serde_json"));
        // `<&T as core::fmt::Debug>::fmt`: a type parameter behind the reference, so the trait's.
        let symbol = "_ZN42_$LT$$RF$T$u20$as$u20$core..fmt..Debug$GT$3fmt17hb2db3bec8b33592dE";
        assert_eq!(crate_of(symbol).as_deref(), Some("core"));
    }
}
