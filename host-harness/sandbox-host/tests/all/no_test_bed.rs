//! The product links no test bed: `sandbox-host`'s dependency tree (what its binary is built
//! from, dev-dependencies aside) holds neither the embedded cluster nor the fault matrix nor
//! `sandbox-dev`, while `sandbox-dev`'s holds them, so the check can tell the two apart.

use std::process::Command;

/// The packages in `package`'s tree of normal and build dependencies, one name per line.
fn tree(package: &str) -> Vec<String> {
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let out = Command::new(cargo)
        .args([
            "tree",
            "--locked",
            "--offline",
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "-p",
            package,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "cargo tree -p {package}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect()
}

const TEST_BED: [&str; 3] = ["embedded-cluster", "fault-matrix", "sandbox-dev"];

#[test]
fn the_product_binary_links_no_simulator() {
    let product = tree("sandbox-host");
    assert!(product.iter().any(|p| p == "provider-host"), "the tree was read: {product:?}");
    assert!(product.iter().any(|p| p == "contract-suite"), "the suite runs on real clusters: {product:?}");
    let linked: Vec<&String> = product.iter().filter(|p| TEST_BED.contains(&p.as_str())).collect();
    assert!(linked.is_empty(), "sandbox-host links the test bed: {linked:?}");

    let dev = tree("sandbox-dev");
    for bed in ["embedded-cluster", "fault-matrix"] {
        assert!(dev.iter().any(|p| p == bed), "sandbox-dev links {bed}: {dev:?}");
    }
}
