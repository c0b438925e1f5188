#!/usr/bin/env bash
# The TypeScript SDK leg of CI: Node 22 from the npm package `node` (the version
# tests/mcp-conformance/run.sh pins), the SDK `protomcp` 0.3.0 from the npm registry when it serves
# it, else built from the unmodified source snapshot of the tag ($PROTOMCP_SRC, default
# ../shared/third_party/protomcp-v0.3.0 beside the repository) in a writable copy under target/
# (`npm ci && tsc`, dependencies from the npm registry). Prints which source was used, then runs the
# catalogue against this directory's manifest with known-failures.yaml and prints the harness's
# summary and unexpected cases; reports in target/conformance/typescript.{json,xml}.
#
# Exit status: the harness's (0 clean, 1 unexpected FAIL or stale XPASS, ...), or
#   3  NOT RUN: the registry does not serve the package and there is no source snapshot either.
# Idempotent: tracked files are never written; everything goes under target/conformance/typescript.
set -euo pipefail
exec </dev/null
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
NODE_VERSION=22.23.3
SDK_VERSION=0.3.0
# Only for an SDK installed from the registry (a source build brings its own, from its lock file).
TYPESCRIPT_VERSION=5.9.3
TYPES_NODE_VERSION=20.19.37
out=$root/target/conformance
work=$out/typescript
npm_flags=(--no-audit --no-fund --no-update-notifier --loglevel=error)
src=${PROTOMCP_SRC:-$root/../shared/third_party/protomcp-v$SDK_VERSION}
# How the snapshot is named in the output: as given, or relative to the repository.
src_shown=${PROTOMCP_SRC:-../shared/third_party/protomcp-v$SDK_VERSION}
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
  pkg=$src/sdk/typescript
  if [ ! -f "$pkg/package.json" ] || [ ! -f "$src/proto/protomcp.proto" ] ||
     [ "$(node -p 'const p = require(process.argv[1]); p.name + "@" + p.version' "$pkg/package.json")" != "protomcp@$SDK_VERSION" ]; then
    echo "typescript-sdk: NOT RUN: the npm registry does not serve protomcp@$SDK_VERSION ($refusal) and there is no source snapshot at $src_shown (set PROTOMCP_SRC to a checkout of the tag); the TypeScript SDK leg cannot run"
    exit 3
  fi
  # The snapshot may be read-only and npm/tsc write beside the sources: build a copy. The copy
  # keeps the repository's layout, since the SDK loads ../../proto/protomcp.proto from its dist/.
  build=$work/source
  rm -rf "$build"
  mkdir -p "$build/sdk" "$build/proto"
  (cd "$src/sdk" && tar -cf - --exclude=typescript/node_modules --exclude=typescript/dist typescript) |
    (cd "$build/sdk" && tar -xf -)
  cp "$src/proto/protomcp.proto" "$build/proto/"
  chmod -R u+w "$build"
  if ! (cd "$build/sdk/typescript" && npm ci "${npm_flags[@]}" && node node_modules/typescript/bin/tsc) >"$log" 2>&1; then
    cat "$log" >&2
    echo "typescript-sdk: building the SDK from $src_shown/sdk/typescript failed (see above)" >&2
    exit 1
  fi
  sdk=$build/sdk/typescript
  echo "typescript-sdk: source: $src_shown/sdk/typescript, built in target/conformance/typescript/source (the npm registry refused protomcp@$SDK_VERSION: $refusal) on Node $node_version"
fi
export PROTOMCP_TS_SDK=$sdk

# 3. The catalogue; the manifest's build step compiles the testee against $PROTOMCP_TS_SDK.
cd "$root"
cargo build -q
status=0
./target/debug/protomcp-conform --sdk "$here" --json "$out/typescript.json" --junit "$out/typescript.xml" \
  >"$log" 2>&1 || status=$?
grep -Ev '^(PASS|FAIL|WARN|SKIP|XFAIL|XPASS|ERROR) +[^ ]+ \([0-9]+ ms\)|^protomcp-conform: building the testee' "$log" |
  sed '/./,$!d' || true
exit "$status"
