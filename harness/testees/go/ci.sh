#!/usr/bin/env bash
# The Go SDK leg of CI: obtains github.com/msilverblatt/protomcp/sdk/go v0.3.0, builds this testee
# against it and runs the catalogue with known-failures.yaml. Prints which source was used, then
# only the harness's summary and its unexpected cases; reports in target/conformance/go.json and
# go.xml, the whole output in go.log. Arguments are passed on to the harness (e.g. --transcripts DIR).
#
# Where the SDK comes from, in this order:
#   1. the Go module proxy (checksums from the checksum database), as a user of the SDK gets it;
#   2. when the proxy refuses the module: the unmodified source snapshot of the tag at
#      $PROTOMCP_SRC (default: ../shared/third_party/protomcp-v0.3.0 beside the repository),
#      through `replace` directives for the SDK and for the root module it requires (whose gen/
#      package the SDK imports). Its dependencies still come from the proxy, with their checksums.
#
# Exit status: the harness's (0 clean, 1 unexpected FAIL or stale XPASS, ...; its 3, an ERROR, is
# turned into 1 here), or
#   3  NOT RUN: the proxy refuses the module and there is no source snapshot either.
# Idempotent, and never writes a tracked file: go.mod/go.sum are copied to target/ and used
# through -modfile (the harness's build step, `go build -o bin/testee .` in this directory,
# inherits GOFLAGS); the binary goes to bin/, which .gitignore here ignores. In a read-only
# checkout the testee's files are copied to target/conformance/go-testee and built there.
set -euo pipefail
exec </dev/null
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
module=github.com/msilverblatt/protomcp/sdk/go
root_module=github.com/msilverblatt/protomcp
version=$(awk -v m="$module" '$1 == m {print $2} $1 == "require" && $2 == m {print $3}' "$here/go.mod")
out="$root/target/conformance"
modfile_dir="$out/go-modfile"
src=${PROTOMCP_SRC:-$root/../shared/third_party/protomcp-$version}
# How the snapshot is named in the output: as given, or relative to the repository.
src_shown=${PROTOMCP_SRC:-../shared/third_party/protomcp-$version}

if ! command -v go >/dev/null 2>&1; then
  echo "go-sdk: the Go toolchain is not installed; the Go SDK leg cannot run" >&2
  exit 1
fi

fresh_modfile() {
  rm -rf "$modfile_dir"
  mkdir -p "$modfile_dir"
  cp "$here/go.mod" "$modfile_dir/go.mod"
  cp "$here/go.sum" "$modfile_dir/go.sum"
}
fresh_modfile
# -mod=mod: go.sum lines the committed file lacks (the SDK's, or those of the snapshot's
# dependencies) are added to the copy, verified against the checksum database as usual.
# -buildvcs=false: the testee directory is part of this repository's checkout, not the SDK's.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-modfile=$modfile_dir/go.mod -mod=mod -buildvcs=false"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
if (cd "$here" && go mod download "$module@$version" && go mod download) >"$log" 2>&1; then
  echo "go-sdk: source: module proxy ($module@$version)"
elif grep -qE '(403|404|410) |not available|not found|unknown revision|no matching versions' "$log"; then
  refusal=$(grep -m1 -oE '(403|404|410) [A-Za-z ]+' "$log" || true)
  refusal=${refusal:-$(grep -m1 -oE 'not available|not found|unknown revision|no matching versions' "$log")}
  if [ ! -f "$src/sdk/go/go.mod" ] || [ ! -f "$src/go.mod" ] ||
     ! grep -qx "module $module" "$src/sdk/go/go.mod" || ! grep -qx "module $root_module" "$src/go.mod"; then
    echo "go-sdk: NOT RUN: $module@$version is not served by the Go module proxy ($refusal) and there is no source snapshot at $src_shown (set PROTOMCP_SRC to a checkout of the tag); the Go SDK leg cannot run"
    exit 3
  fi
  src=$(cd "$src" && pwd)
  fresh_modfile
  # `go mod edit FILE` edits that file only; -modfile in GOFLAGS does not apply to it.
  GOFLAGS= go mod edit -replace="$module=$src/sdk/go" -replace="$root_module=$src" "$modfile_dir/go.mod"
  if ! (cd "$here" && go mod download && go list -deps . >/dev/null) >"$log" 2>&1; then
    cat "$log" >&2
    echo "go-sdk: resolving the testee against the source snapshot $src_shown failed (see above)" >&2
    exit 1
  fi
  echo "go-sdk: source: $src_shown (the proxy refused: $refusal)"
else
  cat "$log" >&2
  echo "go-sdk: obtaining $module@$version failed (see above)" >&2
  exit 1
fi

cd "$root"
testee=$here
if [ ! -w "$here" ]; then
  testee="$out/go-testee"
  rm -rf "$testee"
  mkdir -p "$testee"
  cp "$here"/*.go "$here/go.mod" "$here/protomcp-conform.toml" "$here/known-failures.yaml" "$testee/"
  echo "go-sdk: $here is read-only; building and running the copy in $testee"
fi
status=0
started=$SECONDS
cargo run -q -- --sdk "$testee" --json "$out/go.json" --junit "$out/go.xml" "$@" >"$out/go.log" 2>&1 || status=$?
# Drop the one line per scenario (all of them are in go.log); keep the build notice, the
# unexpected cases and the summary.
grep -Ev '^(PASS|FAIL|WARN|SKIP|XFAIL|XPASS|ERROR) +[^ ]+ \([0-9]+ ms\)' "$out/go.log" | sed '/./,$!d' || true
echo "go-sdk: the run took $((SECONDS - started)) s"
if [ "$status" -eq 3 ]; then
  # The harness's 3 is an ERROR (it could not judge a scenario), not this script's NOT RUN.
  echo "go-sdk: the harness reported an ERROR (its exit status 3)" >&2
  exit 1
fi
exit "$status"
