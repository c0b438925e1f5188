#!/usr/bin/env bash
# CI step: `--sdk` on SDK *source checkouts* without a manifest. Unpacks the published sources
# (the Python sdist of protomcp 0.3.1, the Rust crate protomcp 0.3.1), lets the harness
# recognise them, build its bundled testee against them (PYTHONPATH / a cargo path dependency)
# and run the catalogue with the bundled known failures. The Go SDK's source is not obtainable
# here (its module is not served), so it is left out; `cargo test` covers its detection. The
# TypeScript SDK's source snapshot (../shared/third_party, read-only) is used as it is.
# Prints only the summaries and the unexpected cases. Run after python/ci.sh (its venv),
# rust/ci.sh (protoc, the fetched crate) and typescript/ci.sh (Node 22).
set -euo pipefail
exec </dev/null
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=target/conformance
src=$out/checkouts
venv=${PROTOMCP_CONFORM_PYVENV:-$out/pyvenv}
export PROTOMCP_CONFORM_CACHE=${PROTOMCP_CONFORM_CACHE:-$root/$out/cache}
rm -rf "$src"
mkdir -p "$src/dl"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

quiet() {
  grep -Ev '^(PASS|FAIL|WARN|SKIP|XFAIL|XPASS|ERROR) +[^ ]+ \([0-9]+ ms\)|^protomcp-conform: building the testee' "$1" |
    sed '/./,$!d' || true
}

status=0
# Python: the sdist as published.
if ! "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
     'protomcp==0.3.1' -d "$src/dl" >"$log" 2>&1; then
  cat "$log"; echo "checkout: downloading the protomcp 0.3.1 sdist failed"; exit 1
fi
mkdir -p "$src/python" "$src/rust"
tar -xzf "$src"/dl/protomcp-0.3.1.tar.gz -C "$src/python"
echo "python sdist checkout: $src/python/protomcp-0.3.1"
s=0
PATH="$(cd "$venv/bin" && pwd):$PATH" cargo run -q -- --sdk "$src/python/protomcp-0.3.1" \
  --json "$out/python-checkout.json" >"$log" 2>&1 || s=$?
quiet "$log"
grep -q 'python testee on the checkout' "$log" || { echo "checkout: the Python checkout was not recognised"; s=1; }
[ "$s" -eq 0 ] || status=$s

# Rust: the crate as published (cargo fetched it for rust/ci.sh).
(cd harness/testees/rust && cargo fetch -q --locked)
crate=$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/protomcp-0.3.1.crate | head -n1)
tar -xzf "$crate" -C "$src/rust"
echo "rust crate checkout: $src/rust/protomcp-0.3.1 (from $(basename "$crate"))"
s=0
cargo run -q -- --sdk "$src/rust/protomcp-0.3.1" --json "$out/rust-checkout.json" >"$log" 2>&1 || s=$?
quiet "$log"
grep -q 'rust testee on the checkout' "$log" || { echo "checkout: the Rust checkout was not recognised"; s=1; }
[ "$s" -eq 0 ] || status=$s

# TypeScript: the source snapshot of the tag as it is (read-only here; not on the npm registry),
# built by the harness in its cache. Node 22 is the one typescript/ci.sh installed.
ts=${PROTOMCP_SRC:-$root/../shared/third_party/protomcp-v0.3.0}/sdk/typescript
if [ -f "$ts/package.json" ] && [ -x target/conformance/typescript/node/node_modules/.bin/node ]; then
  echo "typescript checkout: $ts"
  s=0
  PATH="$root/target/conformance/typescript/node/node_modules/.bin:$PATH" cargo run -q -- --sdk "$ts" \
    --json "$out/typescript-checkout.json" >"$log" 2>&1 || s=$?
  quiet "$log"
  grep -q 'typescript testee on the checkout' "$log" || { echo "checkout: the TypeScript checkout was not recognised"; s=1; }
  [ "$s" -eq 0 ] || status=$s
else
  echo "typescript checkout: NOT RUN: no source snapshot at $ts or no Node from typescript/ci.sh"
fi
exit "$status"
