#!/usr/bin/env bash
# The Go SDK leg of CI: obtains github.com/msilverblatt/protomcp/sdk/go through the Go toolchain
# (the module proxy, checksums from the checksum database), builds this testee against it and
# runs the catalogue with known-failures.yaml. Prints only the harness's summary and its
# unexpected cases; reports in target/conformance/go.json and go.xml.
#
# Exit status: the harness's (0 clean, 1 unexpected FAIL or stale XPASS, ...), or
#   3  the module is not served (the proxy refuses it): the Go SDK leg cannot run here.
# Idempotent: tracked files are never written (go.mod/go.sum are copied to target/ and used
# through -modfile), every run downloads and builds again as needed.
set -euo pipefail
exec </dev/null
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
module=github.com/msilverblatt/protomcp/sdk/go
version=$(awk -v m="$module" '$1 == m {print $2} $1 == "require" && $2 == m {print $3}' "$here/go.mod")
out="$root/target/conformance"
modfile_dir="$out/go-modfile"

if ! command -v go >/dev/null 2>&1; then
  echo "go-sdk: the Go toolchain is not installed; the Go SDK leg cannot run" >&2
  exit 1
fi

mkdir -p "$modfile_dir"
cp "$here/go.mod" "$modfile_dir/go.mod"
cp "$here/go.sum" "$modfile_dir/go.sum"
# -mod=mod: go.sum lines the committed file lacks (the SDK's, never obtainable here so far) are
# added to the copy, verified against the checksum database as usual.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-modfile=$modfile_dir/go.mod -mod=mod"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! (cd "$here" && go mod download "$module@$version" && go mod download) >"$log" 2>&1; then
  if grep -qE '(403|404|410) |not available|not found|unknown revision|no matching versions' "$log"; then
    reason=$(grep -m1 -oE '(403|404|410) [A-Za-z ]+' "$log" || true)
    echo "go-sdk: SKIPPED: $module@$version is not served by the Go module proxy${reason:+ ($reason)}; the Go SDK leg cannot run"
    exit 3
  fi
  cat "$log" >&2
  echo "go-sdk: obtaining $module@$version failed (see above)" >&2
  exit 1
fi

cd "$root"
cargo run -q -- --sdk "$here" --json "$out/go.json" --junit "$out/go.xml"
