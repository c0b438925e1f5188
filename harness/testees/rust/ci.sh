#!/usr/bin/env bash
# The Rust SDK leg of CI: builds this testee against the published crate protomcp =0.3.1 (pinned by
# Cargo.lock, fetched by cargo), runs the catalogue against it with known-failures.yaml and
# writes target/conformance/rust.{json,xml}. Prints only the harness's summary and its
# unexpected cases (FAIL, WARN, XPASS, ERROR with their details).
# Exit status: the harness's (0 = no unexpected FAIL and no stale XPASS), 1 when the testee
# cannot be built.
# Idempotent: installs protoc (Debian protobuf-compiler, which the SDK's build script needs)
# every time (apt-get keeps an installed package); the testee's build output stays in harness/testees/rust/target/.
set -euo pipefail
exec </dev/null
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out="$root/target/conformance"
mkdir -p "$out"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Every time (a no-op when it is installed already).
sudo=()
if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
if ! { "${sudo[@]}" apt-get install -y -q protobuf-compiler ||
       { "${sudo[@]}" apt-get update -q && "${sudo[@]}" apt-get install -y -q protobuf-compiler; }; } >"$log" 2>&1; then
  cat "$log"
  echo "rust-sdk: installing protobuf-compiler (protoc) failed"
  exit 1
fi

if ! (cd "$here" && cargo build --release -q --locked) >"$log" 2>&1; then
  cat "$log"
  echo "rust-sdk: building the testee against protomcp =0.3.1 failed"
  exit 1
fi

status=0
cargo run -q --manifest-path "$root/Cargo.toml" -- --sdk "$here" \
  --json "$out/rust.json" --junit "$out/rust.xml" >"$log" 2>&1 || status=$?

# Drop the one line per scenario and the build notice; keep the unexpected cases and the summary.
grep -Ev '^(PASS|FAIL|WARN|SKIP|XFAIL|XPASS|ERROR) +[^ ]+ \([0-9]+ ms\)|^protomcp-conform: building the testee' "$log" |
  sed '/./,$!d' || true
exit "$status"
