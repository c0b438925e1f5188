#!/usr/bin/env bash
# The logic of the protomcp-conform GitHub Action (action.yml at the repository root); .ci/run and
# tests/action_script.rs run it locally with a fake GITHUB_STEP_SUMMARY and GITHUB_OUTPUT.
#
#   run.sh install   installs the binary: from INPUT_VERSION (a git tag or commit of
#                    INPUT_REPOSITORY) when set, else from the action's own checkout
#                    (GITHUB_ACTION_PATH); into CARGO_HOME/bin.
#   run.sh run       runs protomcp-conform against the target the inputs name, writes JSON, JUnit,
#                    HTML and the badge (SVG and shields.io endpoint JSON) into OUT_DIR, with
#                    INPUT_SARIF=true SARIF too, a job summary (counts, then the unexpected cases)
#                    to GITHUB_STEP_SUMMARY and outputs to GITHUB_OUTPUT; with INPUT_COMPARE_TO, the
#                    diff against that earlier report (markdown) after the summary and in
#                    OUT_DIR/diff.md; exits with the run's status (2 when INPUT_COMPARE_TO exists
#                    but is not a report).
#
# Inputs (environment): INPUT_SDK (a directory: a manifest or an SDK checkout), INPUT_TESTEE (a
# command line), INPUT_BRIDGE (a command line or a manifest directory), none of them: the default
# run (both sides, reference testee and reference bridge); INPUT_KNOWN_FAILURES (a file);
# INPUT_GOLDEN (a directory of golden transcripts: --golden; never written here, CI is set);
# INPUT_SARIF (true: --sarif OUT_DIR/report.sarif, which action.yml uploads for code scanning);
# INPUT_ARGS (more arguments, split on whitespace); INPUT_COMPARE_TO (a JSON report of an earlier
# run, e.g. the base branch's; missing: a note, no diff); PROTOMCP_CONFORM_BIN (the binary; default
# protomcp-conform on PATH); OUT_DIR (default RUNNER_TEMP/protomcp-conform).
set -euo pipefail

mode=${1:-run}

fail() {
  echo "protomcp-conform action: $*" >&2
  exit 2
}

install() {
  local repo=${INPUT_REPOSITORY:-}
  if [ -n "${INPUT_VERSION:-}" ]; then
    [ -n "$repo" ] || fail "version needs the repository to install from (input repository)"
    local rev=(--tag "$INPUT_VERSION")
    # A commit id is given as --rev.
    if [[ $INPUT_VERSION =~ ^[0-9a-f]{7,40}$ ]]; then rev=(--rev "$INPUT_VERSION"); fi
    cargo install --locked --git "$repo" "${rev[@]}" protomcp-conform
  else
    [ -n "${GITHUB_ACTION_PATH:-}" ] || fail "GITHUB_ACTION_PATH is unset: set INPUT_VERSION or run inside the action"
    cargo install --locked --path "$GITHUB_ACTION_PATH"
  fi
}

run() {
  local bin=${PROTOMCP_CONFORM_BIN:-protomcp-conform}
  command -v "$bin" >/dev/null || fail "no binary $bin (the install step installs it)"
  local out=${OUT_DIR:-${RUNNER_TEMP:-/tmp}/protomcp-conform}
  mkdir -p "$out"
  local json=$out/report.json junit=$out/report.xml html=$out/report.html sarif=$out/report.sarif
  local badge=$out/badge.svg badge_json=$out/badge.json
  local argv=()
  local targets=0
  if [ -n "${INPUT_SDK:-}" ]; then argv+=(--sdk "$INPUT_SDK"); targets=$((targets + 1)); fi
  if [ -n "${INPUT_TESTEE:-}" ]; then argv+=(--testee "$INPUT_TESTEE"); targets=$((targets + 1)); fi
  if [ -n "${INPUT_BRIDGE:-}" ]; then argv+=(--bridge "$INPUT_BRIDGE"); targets=$((targets + 1)); fi
  [ "$targets" -le 1 ] || fail "give at most one of sdk, testee, bridge"
  if [ -n "${INPUT_KNOWN_FAILURES:-}" ]; then argv+=(--known-failures "$INPUT_KNOWN_FAILURES"); fi
  if [ -n "${INPUT_GOLDEN:-}" ]; then argv+=(--golden "$INPUT_GOLDEN"); fi
  local reports=(--json "$json" --junit "$junit" --html "$html" --badge "$badge" --badge "$badge_json")
  case ${INPUT_SARIF:-false} in
    true) reports+=(--sarif "$sarif") ;;
    false | "") ;;
    *) fail "sarif must be true or false, not '$INPUT_SARIF'" ;;
  esac
  # shellcheck disable=SC2206 # split on whitespace, as documented
  if [ -n "${INPUT_ARGS:-}" ]; then argv+=($INPUT_ARGS); fi
  rm -f "$json" "$junit" "$html" "$sarif" "$badge" "$badge_json" "$out/diff.md"
  local status=0
  "$bin" "${argv[@]}" "${reports[@]}" || status=$?
  local cmd
  cmd=$(printf '%q ' protomcp-conform "${argv[@]}")
  summary "$json" "$status" "${cmd% }"
  diff_worse=""
  if [ -n "${INPUT_COMPARE_TO:-}" ] && [ -f "$json" ]; then
    if ! compare "$bin" "$INPUT_COMPARE_TO" "$json" "$out/diff.md" && [ "$status" -eq 0 ]; then status=2; fi
  fi
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    {
      echo "exit-code=$status"
      echo "dir=$out"
      if [ -f "$json" ]; then echo "json=$json"; fi
      if [ -f "$junit" ]; then echo "junit=$junit"; fi
      if [ -f "$html" ]; then echo "html=$html"; fi
      if [ -n "$diff_worse" ]; then echo "diff=$out/diff.md"; echo "diff-worse=$diff_worse"; fi
      if [ -f "$sarif" ]; then echo "sarif=$sarif"; fi
      if [ -f "$badge" ]; then echo "badge=$badge"; fi
      if [ -f "$badge_json" ]; then echo "badge-json=$badge_json"; fi
      if [ -f "$json" ]; then
        jq -r '.summary | to_entries[] | "\(.key)=\(.value)"' "$json"
      fi
    } >>"$GITHUB_OUTPUT"
  fi
  return "$status"
}

# The diff of the earlier report $2 against this run's $3, as markdown into $4 (for a pull
# request comment) and after the job summary; sets diff_worse to true or false. An earlier report
# that does not exist (no artifact on the base branch yet) is a note; one that is not a report
# fails (status 1 of this function).
compare() {
  local bin=$1 old=$2 new=$3 md=$4
  local dest=${GITHUB_STEP_SUMMARY:-/dev/stdout}
  rm -f "$md"
  if [ ! -f "$old" ]; then
    printf '\n## protomcp-conform diff\n\nNo report to compare to at `%s` (input compare-to): no diff.\n' "$old" >>"$dest"
    echo "protomcp-conform action: warning: compare-to $old: no such file, no diff" >&2
    return 0
  fi
  local st=0
  "$bin" diff "$old" "$new" --format markdown --out "$md" || st=$?
  case $st in
    0 | 1)
      if [ "$st" -eq 1 ]; then diff_worse=true; else diff_worse=false; fi
      { printf '\n'; cat "$md"; } >>"$dest"
      ;;
    *)
      rm -f "$md"
      printf '\n## protomcp-conform diff\n\n`%s` is not a report protomcp-conform can read: see the log.\n' "$old" >>"$dest"
      echo "protomcp-conform action: compare-to $old: not a report (diff exit status $st)" >&2
      return 1
      ;;
  esac
}

# The job summary: the result, counts per side, then each root cause once (a precondition that
# broke: the requirement, where, how many cases it blocked), then every unexpected case (FAIL,
# WARN, XPASS, ERROR, FLAKY, LEAK) with the requirements it broke, the check where (step N, rule
# NAME) and its first message line, then (with golden) every transcript new or changed against
# its golden file, with its diff.
summary() {
  local json=$1 status=$2 cmd=$3
  local dest=${GITHUB_STEP_SUMMARY:-/dev/stdout}
  if [ ! -f "$json" ]; then
    printf '## protomcp-conform: no report (exit status %s)\n\n`%s` wrote no JSON report: see the log.\n' \
      "$status" "$cmd" >>"$dest"
    return
  fi
  local word
  case $status in
    0) word="OK" ;;
    1) word="FAILED" ;;
    *) word="ERROR (exit status $status)" ;;
  esac
  {
    printf '## protomcp-conform: %s\n\n' "$word"
    printf '| target | pass | fail | warn | skip | xfail | xpass | error | flaky | leak | blocked |\n|---|---|---|---|---|---|---|---|---|---|---|\n'
    jq -r '
      def row(t; s): "| \(t) | \(s.pass) | \(s.fail) | \(s.warn) | \(s.skip) | \(s.xfail) | \(s.xpass) | \(s.error) | \(s.flaky) | \(s.leak // 0) | \(s.blocked // 0) |";
      if .sides then (.sides[] | row(.target; .summary)), row("**total**"; .summary)
      else row(.target; .summary) end' "$json"
    local causes
    causes=$(jq -r '
      [(.root_causes // []), (.sides // [] | map(.root_causes // []) | add // [])] | add as $c
      | if ($c | length) == 0 then empty else
          "\n### Root causes (\($c | length))\n",
          ($c[] | "- **ROOT CAUSE** \(.requirements | join(", ")) at `\(.precondition)`: blocked \(.cases | length) case(s), not reached: "
            + ((.message | split("\n")[0] | sub("^not reached: "; "")) | gsub("\\|"; "\\|")))
        end' "$json")
    if [ -n "$causes" ]; then
      printf '%s\n' "$causes"
    fi
    local unexpected
    unexpected=$(jq -r '
      [.cases[] | select(.verdict | IN("FAIL", "WARN", "XPASS", "ERROR", "FLAKY", "LEAK"))] as $u
      | if ($u | length) == 0 then empty else
          "\n### Unexpected (\($u | length))\n",
          ($u[] | "- **\(.verdict)** `\(.id)`"
            + (if (.broken | length) > 0 then " (broken: \(.broken | join(", "))\(if .check then " at \(.check)" else "" end))" else "" end)
            + ": " + ((.message | split("\n")[0]) | gsub("\\|"; "\\|")))
        end' "$json")
    if [ -n "$unexpected" ]; then
      printf '%s\n' "$unexpected"
    else
      printf '\nNo unexpected case.\n'
    fi
    local golden
    golden=$(jq -r '
      [.cases[] | select(.golden.status? | IN("changed", "new"))] as $g
      | if ($g | length) == 0 then empty else
          "\n### Golden transcripts new or changed (\($g | length))\n",
          ($g[] | "<details><summary><b>\(.golden.status | ascii_upcase)</b> <code>\(.id)</code> (verdict \(.verdict))</summary>\n\n```diff\n\(.golden.diff // "no golden file yet")\n```\n</details>")
        end' "$json")
    if [ -n "$golden" ]; then
      printf '%s\n' "$golden"
    fi
    printf '\nThe JSON, JUnit and HTML reports are in the artifact; re-run locally: `%s`\n' "$cmd"
  } >>"$dest"
}

case $mode in
  install) install ;;
  run) run ;;
  *) fail "unknown mode $mode (install, run)" ;;
esac
