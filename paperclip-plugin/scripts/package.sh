#!/usr/bin/env bash
# Assembles the installable plugin package: the built worker, its production dependencies, the
# license, the provider component and the `sandbox-host` binary of this machine's platform, in one directory
# that `paperclipai plugin install <dir> --local` takes as it is, or `npm pack` turns into a
# publishable tarball. Run by `make paperclip-plugin`, which builds the Rust parts first.
#
# usage: package.sh OUT_DIR SANDBOX_HOST_BINARY COMPONENT_WASM [ID DRIVER_KEY DISPLAY_NAME]
# The last three name another provider's package (see `variant` in src/manifest.ts).
set -euo pipefail
out=$1 binary=$2 component=$3 id=${4:-} driver=${5:-} display=${6:-}
here=$(cd "$(dirname "$0")/.." && pwd)
for f in "$binary" "$component"; do
  [ -f "$f" ] || { echo "package.sh: $f is missing: build it first (make paperclip-plugin does)" >&2; exit 1; }
done
cd "$here"
npm ci --no-audit --no-fund --loglevel=error
npm run --silent build
rm -rf "$out"
mkdir -p "$out/bin" "$out/component" "$out/dist"
cp package.json package-lock.json README.md "$out/"
cp ../LICENSE "$out/"
cp -r dist/src "$out/dist/src"
cp "$binary" "$out/bin/sandbox-host"
cp "$component" "$out/component/provider.wasm"
cd "$out"
if [ -n "$id" ]; then
  node -e '
    const [file, id, driverKey, displayName] = process.argv.slice(1);
    const fs = require("node:fs");
    const pkg = JSON.parse(fs.readFileSync(file, "utf8"));
    pkg.name = `${pkg.name}-${driverKey}`;
    pkg.paperclipSandboxProvider = { id, driverKey, displayName };
    fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
  ' package.json "$id" "$driver" "$display"
fi
npm ci --omit=dev --no-audit --no-fund --loglevel=error
echo "paperclip plugin package: $out"
