#!/usr/bin/env bash
# Profile the same workload in the base and head checkouts of a pull request and compare them.
#   scripts/audit-pr.sh BASE_DIR HEAD_DIR WORKLOAD OUT_DIR [extra `audit run` args...]
# Runs base and head AUDIT_REPEAT times each (default 3), interleaved A B A B ..., each run a
# fresh process, so the diff measures run-to-run variance and load drift hits both sides alike.
# Writes OUT_DIR/base/run*.json, OUT_DIR/head/run*.json, head.html, diff.json, diff.html, comment.md.
# AUDIT_FAIL_ON_SLOWDOWN is audit diff's --fail-on-slowdown (default 5%), AUDIT_STRICT=1 its --strict.
# Exit code: that of `audit diff`: 0 no regression (also "inconclusive", unless AUDIT_STRICT=1),
# 1 regression, 2 bad input, 4 internal error.
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 BASE_DIR HEAD_DIR WORKLOAD OUT_DIR [audit run args...]" >&2
  exit 2
fi
base_dir=$1 head_dir=$2 workload=$3 out=$4
shift 4
AUDIT=${AUDIT:-audit}
REPEAT=${AUDIT_REPEAT:-3}
mkdir -p "$out/base" "$out/head"
out=$(cd "$out" && pwd)
for i in $(seq 1 "$REPEAT"); do
  (cd "$base_dir" && "$AUDIT" run "$workload" --quiet --json "$out/base/run$i.json" "$@")
  html=()
  [ "$i" = 1 ] && html=(--html "$out/head.html")
  (cd "$head_dir" && "$AUDIT" run "$workload" --quiet --json "$out/head/run$i.json" "${html[@]}" "$@")
done
gate=()
slowdown=${AUDIT_FAIL_ON:-${AUDIT_FAIL_ON_SLOWDOWN:-}}  # AUDIT_FAIL_ON: the old name, given only on purpose
[ -n "$slowdown" ] && gate+=(--fail-on-slowdown "$slowdown")  # default: audit diff's documented 5%
[ "${AUDIT_STRICT:-0}" = 1 ] && gate+=(--strict)
status=0
"$AUDIT" diff "$out/base" "$out/head" "${gate[@]}" \
  --json "$out/diff.json" --html "$out/diff.html" --markdown "$out/comment.md" || status=$?
# Marker so a later run updates the same PR comment instead of adding another.
printf '\n<!-- audit-diff -->\n' >> "$out/comment.md"
exit "$status"
