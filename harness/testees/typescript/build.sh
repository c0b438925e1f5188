#!/bin/sh
# Builds the TypeScript SDK testee into target/ beside this script (the manifest's build step).
#
# The SDK is $PROTOMCP_TS_SDK: the directory of a built `protomcp` package (dist/index.js), either
# a source build (`npm ci && npx tsc` in a writable copy of sdk/typescript) or an installed one
# (.../node_modules/protomcp). Its dependencies resolve from there, as Node resolves them: zod is
# the SDK's own copy (one zod instance for the schemas and the SDK), TypeScript and @types/node
# come from the SDK's development dependencies or from beside an installed package
# ($PROTOMCP_TS_TSC names another tsc). Nothing is fetched here.
#
# target/ gets copies of testee.ts, tsconfig.json and package.json, node_modules/ with symlinks
# to protomcp, zod and @types/node, and the compiled testee.js (run with `node target/testee.js`).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$here/target

fail() {
  echo "typescript testee: $*" >&2
  exit 1
}

[ -n "${PROTOMCP_TS_SDK:-}" ] ||
  fail "PROTOMCP_TS_SDK is not set: point it at a built protomcp package (ci.sh does; see README.md)"
[ -d "$PROTOMCP_TS_SDK" ] || fail "PROTOMCP_TS_SDK=$PROTOMCP_TS_SDK is not a directory"
sdk=$(cd "$PROTOMCP_TS_SDK" && pwd -P)
[ -f "$sdk/dist/index.js" ] || fail "$sdk has no dist/index.js: not a built protomcp package (npm ci && npx tsc)"
name=$(node -p 'require(process.argv[1]).name' "$sdk/package.json")
[ "$name" = protomcp ] || fail "$sdk/package.json names package '$name', not protomcp"

# The directory of package $1 as Node would find it from inside the SDK.
find_pkg() {
  d=$sdk
  while :; do
    if [ -d "$d/node_modules/$1" ]; then
      (cd "$d/node_modules/$1" && pwd -P)
      return 0
    fi
    [ "$d" = / ] && return 1
    d=$(dirname "$d")
  done
}

zod=$(find_pkg zod) || fail "zod is not installed beside $sdk (npm ci in the SDK installs it)"
types=$(find_pkg @types/node) || fail "@types/node is not installed beside $sdk"
if [ -n "${PROTOMCP_TS_TSC:-}" ]; then
  tsc=$PROTOMCP_TS_TSC
elif ts=$(find_pkg typescript); then
  tsc=$ts/bin/tsc
else
  fail "TypeScript is not installed beside $sdk (its devDependencies) and PROTOMCP_TS_TSC is not set"
fi

rm -rf "$out"
mkdir -p "$out/node_modules/@types"
cp "$here/testee.ts" "$here/tsconfig.json" "$here/package.json" "$out/"
ln -s "$sdk" "$out/node_modules/protomcp"
ln -s "$zod" "$out/node_modules/zod"
ln -s "$types" "$out/node_modules/@types/node"
node "$tsc" -p "$out/tsconfig.json"
[ -f "$out/testee.js" ] || fail "tsc wrote no $out/testee.js"
