#!/usr/bin/env bash
# Builds every cargo-fuzz target of fuzz/ into $OUT, each with its libFuzzer
# dictionary (<target>.dict) and its committed seeds as a seed corpus (<target>_seed_corpus.zip):
# the layout ClusterFuzzLite (and OSS-Fuzz) run from.
#
# The same commands run in two places:
# - In the image (.clusterfuzzlite/Dockerfile, OSS-Fuzz's Rust builder): ClusterFuzzLite runs this
#   file with SANITIZER, RUSTFLAGS (--cfg fuzzing, -Zsanitizer=...) and a nightly toolchain set.
# - Outside it, on a stable toolchain (.ci/run does this on every CI run, so the script cannot
#   rot): no SANITIZER in the environment, so the targets are built with `--sanitizer none`,
#   exactly as `cargo fuzz run --sanitizer none` builds them (same flags, same target directory).
# SANITIZER is what tells the two apart: the image always sets it, a stable machine has no reason
# to. Run outside the image with SRC and OUT set by the caller, the repository at
# $SRC/protomcp-conform (a symlink is fine):
#
#   tmp=$(mktemp -d); mkdir "$tmp/src" "$tmp/out"; ln -s "$PWD" "$tmp/src/protomcp-conform"
#   SRC="$tmp/src" OUT="$tmp/out" .clusterfuzzlite/build.sh
#
# The targets are what `cargo fuzz list` says for each crate, so a target added to a Cargo.toml
# is built here without an edit; one without seeds/<target>/ fails the build. A target's
# dictionary is dict/<target>.dict of its crate, else the crate's dict/protomcp.dict.
# Not supported: SANITIZER=coverage (the image's cargo wrapper turns every `cargo fuzz` command
# into a plain `cargo build`, so `cargo fuzz list` prints nothing; this script then stops).
set -euo pipefail

: "${SRC:?SRC must name the directory holding protomcp-conform/}" "${OUT:?OUT must name the output directory}"
root="$SRC/protomcp-conform"
[ -f "$root/fuzz/Cargo.toml" ] || { echo "build.sh: no $root/fuzz/Cargo.toml" >&2; exit 1; }

case "${SANITIZER-}" in
  "") sanitizer=none ;;               # outside the image: stable toolchain, no sanitizer
  address | memory) sanitizer=$SANITIZER ;;
  *) sanitizer=none ;;                # e.g. undefined: the image passes no -Zsanitizer for it
esac
host=$(rustc -vV | sed -n 's/^host: //p')
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

for crate in fuzz; do
  dir="$root/$crate"
  targets=$(cd "$dir" && cargo fuzz list)
  [ -n "$targets" ] || { echo "build.sh: cargo fuzz list names no target in $crate/" >&2; exit 1; }
  (cd "$dir" && cargo fuzz build --sanitizer "$sanitizer")
  for t in $targets; do
    seeds="$dir/seeds/$t"
    if [ -z "$(ls -A "$seeds" 2>/dev/null)" ]; then
      echo "build.sh: $crate/seeds/$t/ is missing or empty: every target ships a seed corpus" >&2
      exit 1
    fi
    dict="$dir/dict/$t.dict"
    [ -f "$dict" ] || dict="$dir/dict/protomcp.dict"
    [ -f "$dict" ] || { echo "build.sh: neither $crate/dict/$t.dict nor $crate/dict/protomcp.dict exists" >&2; exit 1; }
    cp "$dir/target/$host/release/$t" "$OUT/$t"
    cp "$dict" "$OUT/$t.dict"
    rm -f "$OUT/${t}_seed_corpus.zip"
    (cd "$seeds" && zip -q -X -r "$OUT/${t}_seed_corpus.zip" .)
  done
done
