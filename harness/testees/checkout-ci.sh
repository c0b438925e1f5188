#!/usr/bin/env bash
# CI step: `--sdk` on SDK *source checkouts* without a manifest. Unpacks the published sources
# (the Python sdist of protomcp 0.3.1, the Rust crate protomcp 0.3.1), lets the harness
# recognise them, build its bundled testee against them (PYTHONPATH / a cargo path dependency)
# and run the catalogue with the bundled known failures. The Go and TypeScript SDKs publish no
# source these machines can fetch: their `--sdk` routes run in go/ci.sh and typescript/ci.sh on a
# checkout the user supplies (PROTOMCP_GO_SDK, PROTOMCP_TS_SDK), and tests/testsuite/sdk_checkouts.rs
# runs them on stand-in checkouts of our own. Prints only the summaries and the unexpected cases.
# Run after python/ci.sh (its venv) and rust/ci.sh (protoc, the fetched crate).
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

exit "$status"
