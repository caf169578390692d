#!/bin/sh
# shard_oracle.sh - the shard math against the independent numpy oracle:
# oracle.py checks itself on DESIGN.md's worked examples, then generates
# hundreds of random seeded cases (shapes up to 4 dims, every dim, random
# segs, N = 1..8, itemsizes 1/2/4/8, some refusals), tests/shard_exec runs
# them all in one process, and the oracle compares every rank's bytes.
. "$TESTS_SRCDIR/lib/lib.sh"
EXEC="$TESTS_BUILDDIR/unit/shard_exec"
ORACLE_PY="$TESTS_SRCDIR/oracle/oracle.py"

"$ORACLE" "$ORACLE_PY" selftest >"$T_TMP/self" 2>&1
self_rc=$?
while IFS= read -r line; do
  case $line in
    "ok - "*) t_ok "${line#ok - }" ;;
    "not ok - "*) t_fail "${line#not ok - }" ;;
    *) echo "$line" ;;
  esac
done <"$T_TMP/self"
[ "$self_rc" -eq 0 ] && t_ok "oracle selftest exits 0" ||
  t_fail "oracle selftest exits 0" "$(tail -n 5 "$T_TMP/self")"

for seed in 1 2 3; do
  d="$T_TMP/cases$seed"
  if ! "$ORACLE" "$ORACLE_PY" gen-shard "$d" --seed "$seed" --count 1000 \
      2>"$T_TMP/err"; then
    t_fail "seed $seed: oracle generates cases" "$(cat "$T_TMP/err")"
    continue
  fi
  t_check "seed $seed: shard_exec runs 1000 cases" \
    "$EXEC" "$d/cases.txt" "$d/input.bin" "$d/out.bin" "$d/status.txt"
  if "$ORACLE" "$ORACLE_PY" check-shard "$d" "$d/out.bin" "$d/status.txt" \
      >"$T_TMP/out" 2>&1; then
    t_ok "seed $seed: every rank's bytes match the oracle"
  else
    t_fail "seed $seed: every rank's bytes match the oracle" \
      "$(head -n 20 "$T_TMP/out")"
  fi
  refused=$(grep -c '^err' "$d/status.txt")
  [ "$refused" -gt 0 ] && t_ok "seed $seed: batch includes refusals" ||
    t_fail "seed $seed: batch includes refusals"
done
t_done
