#!/usr/bin/env bash
# The Go SDK leg of CI: obtains github.com/msilverblatt/protomcp/sdk/go v0.3.0, builds this testee
# against it and runs the catalogue with known-failures.yaml. Prints which source was used, then
# only the harness's summary and its unexpected cases; reports in target/conformance/go.json and
# go.xml, the whole output in go.log. Arguments are passed on to the harness (e.g. --transcripts DIR).
#
# Where the SDK comes from, in this order:
#   1. the Go module proxy (checksums from the checksum database), as a user of the SDK gets it;
#   2. when the proxy refuses the module: a checkout of the SDK that the user supplies, named by
#      $PROTOMCP_GO_SDK (the sdk/go directory of a protomcp repository checkout at tag v0.3.0, built
#      by no script of ours): the harness's `--sdk DIR` builds its bundled Go testee against it
#      (go.mod replace directives) with the bundled known failures.
# Nothing else: this repository keeps no upstream source and no script here builds it.
#
# Exit status: the harness's (0 clean, 1 unexpected FAIL or stale XPASS, ...; its 3, an ERROR, is
# turned into 1 here), or
#   3  NOT RUN: the proxy refuses the module and PROTOMCP_GO_SDK is not set.
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
# -mod=mod: go.sum lines the committed file lacks (the SDK's) are added to the copy, verified
# against the checksum database as usual.
# -buildvcs=false: the testee directory is part of this repository's checkout, not the SDK's.
user_goflags=${GOFLAGS:-}
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-modfile=$modfile_dir/go.mod -mod=mod -buildvcs=false"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
if (cd "$here" && go mod download "$module@$version" && go mod download) >"$log" 2>&1; then
  echo "go-sdk: source: module proxy ($module@$version)"
  sdk_args=()
elif grep -qE '(403|404|410) |not available|not found|unknown revision|no matching versions' "$log"; then
  refusal=$(grep -m1 -oE '(403|404|410) [A-Za-z ]+' "$log" || true)
  refusal=${refusal:-$(grep -m1 -oE 'not available|not found|unknown revision|no matching versions' "$log")}
  if [ -z "${PROTOMCP_GO_SDK:-}" ]; then
    echo "go-sdk: NOT RUN: $module@$version is not served by the Go module proxy ($refusal); to run this leg, set PROTOMCP_GO_SDK to the sdk/go directory of a checkout of the SDK at $version"
    exit 3
  fi
  echo "go-sdk: source: the checkout PROTOMCP_GO_SDK=$PROTOMCP_GO_SDK (the proxy refused: $refusal)"
  sdk_args=(--sdk "$PROTOMCP_GO_SDK")
else
  cat "$log" >&2
  echo "go-sdk: obtaining $module@$version failed (see above)" >&2
  exit 1
fi

cd "$root"
testee=$here
if [ ${#sdk_args[@]} -gt 0 ]; then
  # The harness writes its own copy of the testee for a checkout, with its own go.mod.
  export GOFLAGS=$user_goflags
elif [ ! -w "$here" ]; then
  testee="$out/go-testee"
  rm -rf "$testee"
  mkdir -p "$testee"
  cp "$here"/*.go "$here/go.mod" "$here/protomcp-conform.toml" "$here/known-failures.yaml" "$testee/"
  echo "go-sdk: $here is read-only; building and running the copy in $testee"
fi
status=0
started=$SECONDS
[ ${#sdk_args[@]} -gt 0 ] || sdk_args=(--sdk "$testee")
cargo run -q -- "${sdk_args[@]}" --json "$out/go.json" --junit "$out/go.xml" "$@" >"$out/go.log" 2>&1 || status=$?
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
