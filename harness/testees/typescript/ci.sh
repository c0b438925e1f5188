#!/usr/bin/env bash
# The TypeScript SDK leg of CI: Node 22 from the npm package `node` (the version
# tests/mcp-conformance/run.sh pins), then the SDK `protomcp` 0.3.0:
#   1. from the npm registry when it serves it: the testee's manifest here, built against the
#      installed package;
#   2. else from a checkout of the SDK that the user supplies, named by $PROTOMCP_TS_SDK (the
#      sdk/typescript directory of a protomcp repository checkout at tag v0.3.0, built by no script
#      of ours): the harness's `--sdk DIR` builds a copy of it (`npm ci`/`npm install` and tsc in its
#      cache) and its bundled TypeScript testee against that, with the bundled known failures.
# Nothing else: this repository keeps no upstream source and no script here builds it. Prints which
# source was used, then the harness's summary and unexpected cases; reports in
# target/conformance/typescript.{json,xml}.
#
# Exit status: the harness's (0 clean, 1 unexpected FAIL or stale XPASS, ...), or
#   3  NOT RUN: the registry does not serve the package and PROTOMCP_TS_SDK is not set.
# Idempotent: tracked files are never written; everything goes under target/conformance/typescript.
set -euo pipefail
exec </dev/null
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
NODE_VERSION=22.23.3
SDK_VERSION=0.3.0
# Only for an SDK installed from the registry (a checkout brings its own, from its lock file).
TYPESCRIPT_VERSION=5.9.3
TYPES_NODE_VERSION=20.19.37
out=$root/target/conformance
work=$out/typescript
npm_flags=(--no-audit --no-fund --no-update-notifier --loglevel=error)
# A checkout the user supplies (read before this script sets PROTOMCP_TS_SDK for the manifest).
user_checkout=${PROTOMCP_TS_SDK:-}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
mkdir -p "$work"

if ! command -v npm >/dev/null 2>&1; then
  echo "typescript-sdk: npm is not installed; the TypeScript SDK leg cannot run" >&2
  exit 1
fi

# 1. Node, pinned, in a directory of its own (re-running is a no-op apart from npm's check).
mkdir -p "$work/node"
cat >"$work/node/package.json" <<EOF
{ "name": "protomcp-conform-typescript-node", "private": true, "dependencies": { "node": "$NODE_VERSION" } }
EOF
if ! (cd "$work/node" && npm install "${npm_flags[@]}") >"$log" 2>&1; then
  cat "$log" >&2
  echo "typescript-sdk: installing node@$NODE_VERSION from the npm registry failed (see above)" >&2
  exit 1
fi
export PATH="$work/node/node_modules/.bin:$PATH"
node_version=$(node --version)
if [ "$node_version" != "v$NODE_VERSION" ]; then
  echo "typescript-sdk: expected Node v$NODE_VERSION first on PATH, found $node_version" >&2
  exit 1
fi

# 2. The SDK: the registry first.
if npm view "protomcp@$SDK_VERSION" version >"$log" 2>&1 && [ "$(cat "$log")" = "$SDK_VERSION" ]; then
  reg=$work/registry
  mkdir -p "$reg"
  cat >"$reg/package.json" <<EOF
{ "name": "protomcp-conform-typescript-sdk", "private": true, "dependencies": {
  "protomcp": "$SDK_VERSION", "typescript": "$TYPESCRIPT_VERSION", "@types/node": "$TYPES_NODE_VERSION" } }
EOF
  if ! (cd "$reg" && npm install "${npm_flags[@]}") >"$log" 2>&1; then
    cat "$log" >&2
    echo "typescript-sdk: installing protomcp@$SDK_VERSION from the npm registry failed (see above)" >&2
    exit 1
  fi
  sdk=$reg/node_modules/protomcp
  echo "typescript-sdk: source: npm registry (protomcp@$SDK_VERSION) on Node $node_version"
else
  if ! grep -qE 'E404|404 ' "$log"; then
    cat "$log" >&2
    echo "typescript-sdk: asking the npm registry for protomcp@$SDK_VERSION failed (see above)" >&2
    exit 1
  fi
  # Only the status, not the address it came from.
  refusal=$(grep -m1 -oE '404 Not Found' "$log" || grep -m1 -oE 'E404' "$log" || true)
  if [ -z "$user_checkout" ]; then
    echo "typescript-sdk: NOT RUN: the npm registry does not serve protomcp@$SDK_VERSION ($refusal); to run this leg, set PROTOMCP_TS_SDK to the sdk/typescript directory of a checkout of the SDK at v$SDK_VERSION"
    exit 3
  fi
  echo "typescript-sdk: source: the checkout PROTOMCP_TS_SDK=$user_checkout (the npm registry refused protomcp@$SDK_VERSION: $refusal) on Node $node_version"
fi

# 3. The catalogue: the manifest here, whose build step compiles the testee against
# $PROTOMCP_TS_SDK (the installed package), or --sdk on the user's checkout.
if [ -n "${sdk:-}" ]; then
  export PROTOMCP_TS_SDK=$sdk
  target=(--sdk "$here")
else
  target=(--sdk "$user_checkout")
fi
cd "$root"
cargo build -q
status=0
./target/debug/protomcp-conform "${target[@]}" --json "$out/typescript.json" --junit "$out/typescript.xml" \
  >"$log" 2>&1 || status=$?
grep -Ev '^(PASS|FAIL|WARN|SKIP|XFAIL|XPASS|ERROR) +[^ ]+ \([0-9]+ ms\)|^protomcp-conform: building the testee' "$log" |
  sed '/./,$!d' || true
exit "$status"
