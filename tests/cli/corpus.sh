#!/bin/sh
# corpus.sh - every broken input the readers must refuse.  Runs each
# generator tests/corpus_*.py (`python3 GEN OUTDIR` writes cases and prints
# "CASE_PATH EXPECTED_EXIT" lines), then `tpload inspect` on every case:
# the exit code must be the expected one (never a crash, so < 128) and
# exactly one non-empty error line must reach stderr.
. "$TESTS_SRCDIR/lib/lib.sh"

# check_case GEN PATH WANT: one TAP line for one corpus case.
check_case() {
  gen=$1 path=$2 want=$3
  name="$gen: $(basename "$path") exits $want"
  "$TPLOAD" inspect "$path" </dev/null >"$T_TMP/out" 2>"$T_TMP/err"
  got=$?
  lines=$(grep -c . "$T_TMP/err")
  total=$(wc -l <"$T_TMP/err")
  if [ "$got" -ge 128 ]; then
    t_fail "$name" "crashed: exit $got" "$(head -c 2000 "$T_TMP/err")"
  elif [ "$got" -ne "$want" ]; then
    t_fail "$name" "expected exit $want, got $got" \
      "$(head -c 2000 "$T_TMP/err")"
  elif [ "$lines" -ne 1 ] || [ "$total" -ne 1 ]; then
    t_fail "$name" "expected exactly one error line, got $total" \
      "$(head -c 2000 "$T_TMP/err")"
  else
    t_ok "$name"
  fi
}

ngen=0
for gen in "$TESTS_SRCDIR"/oracle/corpus_*.py; do
  [ -f "$gen" ] || continue
  ngen=$((ngen + 1))
  base=$(basename "$gen" .py)
  out="$T_TMP/$base"
  mkdir -p "$out"
  if ! "$ORACLE" "$gen" "$out" >"$T_TMP/$base.list" 2>"$T_TMP/$base.err"
  then
    t_fail "$base: generator ran" "$(head -c 2000 "$T_TMP/$base.err")"
    continue
  fi
  n=$(grep -c . "$T_TMP/$base.list")
  if [ "$n" -gt 0 ]; then t_ok "$base: generator wrote $n cases"
  else t_fail "$base: generator wrote no cases"; fi
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    check_case "$base" "${line% *}" "${line##* }"
  done <"$T_TMP/$base.list"
done
[ "$ngen" -gt 0 ] && t_ok "found $ngen corpus generators" ||
  t_fail "found no tests/corpus_*.py"
t_done
