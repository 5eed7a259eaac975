#!/usr/bin/env bash
# THE test command of this workspace. On a fresh Debian machine it installs the system
# packages the tests need (real Prometheus with promtool, Chromium and ChromeDriver, Node.js
# with npm), the pinned OpenCode from npm into .tools/opencode, then runs formatting, lints,
# every test and the documentation build. Idempotent.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf '\n==> %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
dpkg -s ca-certificates >/dev/null 2>&1 || missing+=(ca-certificates)
command -v git >/dev/null 2>&1 || missing+=(git)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing system packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
else
  say "system packages present: prometheus, promtool, chromium, chromedriver, python3"
fi

# The real OpenCode the workspace tests run, pinned, project-local (gitignored). The tests
# read OPENCODE_BIN (default: .tools/opencode/node_modules/.bin/opencode) and fail, naming
# this install, when it is absent.
OPENCODE_VERSION=1.18.33
OPENCODE_DIR=.tools/opencode
if ! grep -qs "\"version\": \"$OPENCODE_VERSION\"" "$OPENCODE_DIR/node_modules/opencode-ai/package.json" \
  || [ ! -x "$OPENCODE_DIR/node_modules/.bin/opencode" ]; then
  say "installing opencode-ai@$OPENCODE_VERSION into $OPENCODE_DIR"
  mkdir -p "$OPENCODE_DIR"
  npm install --prefix "$OPENCODE_DIR" --save-exact --no-audit --no-fund --loglevel=error \
    "opencode-ai@$OPENCODE_VERSION"
else
  say "opencode-ai@$OPENCODE_VERSION present in $OPENCODE_DIR"
fi
export OPENCODE_BIN="$PWD/$OPENCODE_DIR/node_modules/.bin/opencode"

say "cargo fmt --all --check"
cargo fmt --all --check

say "cargo clippy --workspace --all-targets --locked -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

say "cargo test --workspace --locked"
cargo test --workspace --locked

say "cargo doc --workspace --no-deps --locked (warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

say "all checks passed"
