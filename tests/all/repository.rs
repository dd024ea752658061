//! What the repository ships beside the code: the license the crates and the plugin package
//! declare, with its text.

/// The repository's root.
fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

#[test]
fn the_declared_license_ships_with_its_text() {
    let license = read("LICENSE");
    assert!(license.contains("Apache License") && license.contains("Version 2.0, January 2004"), "LICENSE");
    assert!(read("Cargo.toml").contains("license = \"Apache-2.0\""), "the workspace declares Apache-2.0");
    let package: serde_json::Value = serde_json::from_str(&read("paperclip-plugin/package.json")).expect("JSON");
    assert_eq!(package["license"], "Apache-2.0");
    assert!(package["files"].as_array().expect("files").iter().any(|f| f == "LICENSE"), "the package lists it");
    assert!(read("paperclip-plugin/scripts/package.sh").contains("cp ../LICENSE"), "and the packager copies it");
}
