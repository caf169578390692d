#!/bin/bash
# http_mpi.sh - MODEL URLs with ranks: a preshard output made from the
# local files verifies against the same files over HTTP (nginx), and
# verify notices a tampered output or an object replaced on the server
# while it reads (the fault server, oracle/http_faults.py).
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/http_lib.sh"

gen index --seed 3101 --layout index --big-mib 6
gen mlc --seed 3102 --layout mlc
nginx_start nginx "$M" "" ""
U=$NGX_URL

for l in index mlc; do
  mpi 2 preshard "$M/$l" --out "$T_TMP/out-$l" --plan "$M/$l/plan.json" \
    --quiet 2>"$T_TMP/mpi.err" ||
    { echo "Bail out! preshard $l: $(messages "$T_TMP/mpi.err")"; exit 99; }
  t_oracle "preshard of the local $l model matches the oracle" \
    check-preshard "$M/$l" "$M/$l/plan.json" 2 "$T_TMP/out-$l"
  t_exit "verify $l URL: the output matches" 0 "$TPLOAD" verify "$U/$l/" \
    "$T_TMP/out-$l" --plan "$M/$l/plan.json"
done

rm -rf "$T_TMP/bad"
cp -r "$T_TMP/out-index" "$T_TMP/bad"
"$ORACLE" -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[-1]^=1; open(p,"wb").write(b)' "$T_TMP/bad/rank1.safetensors"
t_exit "verify URL: a flipped byte of the output (65)" 65 "$TPLOAD" verify \
  "$U/index/" "$T_TMP/bad" --plan "$M/index/plan.json"

faults_start "$M"
t_exit "verify through the fault server's plain answers" 0 "$TPLOAD" verify \
  "$FLT_URL/ok/index/" "$T_TMP/out-index" --plan "$M/index/plan.json"
t_exit "verify: the model replaced on the server while read (74)" 74 \
  "$TPLOAD" verify "$FLT_URL/replace/index/" "$T_TMP/out-index" \
  --plan "$M/index/plan.json"
grep -q "changed while loading (its ETag changed" "$T_TMP/err" &&
  t_ok "... naming the object that changed" ||
  t_fail "names the change" "$(cat "$T_TMP/err")"
t_done
