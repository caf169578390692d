#!/bin/bash
# http_md5.sh - --verify-md5 of an MLC directory at a URL, against nginx
# on loopback (tests/lib/http_lib.sh): rank 0 hashes every params_shard
# object through ranged GETs before the load, so nginx's access log shows
# each object's bytes once more than a load without the flag fetches, and
# without the flag nothing more than the load's own bytes (and the size
# probe) is fetched; the shards are the numpy oracle's with --read mpi
# and --read local; one byte changed in an object is 65 with one message
# naming its URL, the md5sum recorded and the one found (coreutils'), and
# preshard leaves nothing behind; inspect --verify-md5 of the URL the same.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/http_lib.sh"

gen mlc --seed 3401 --layout mlc --big-mib 3
P=$M/mlc/plan.json
cp -r "$M/mlc" "$M/bad"
flip_file_byte "$M/bad/params_shard_0.bin" 9
nginx_start nginx "$M" "" ""
U=$NGX_URL
LOG=$NGX_DIR/access.log

# fetched FILE: the body bytes nginx sent of /mlc/FILE since the log was
# emptied.
fetched() {
  awk -v u="/mlc/$1" '$2 == u && $3 ~ /^20/ { n += $5 } END { print n + 0 }' \
    "$LOG"
}

: >"$LOG"
t_exit "load of the URL without the flag" 0 \
  mpi 2 load "$U/mlc/" --plan "$P" --quiet
b0_0=$(fetched params_shard_0.bin)
b0_1=$(fetched params_shard_1.bin)
s0=$(stat -c %s "$M/mlc/params_shard_0.bin")
s1=$(stat -c %s "$M/mlc/params_shard_1.bin")
if [ "$b0_0" -le $((s0 + 1)) ] && [ "$b0_1" -le $((s1 + 1)) ]; then
  t_ok "... fetches each object's bytes at most once (nothing is hashed)"
else
  t_fail "without the flag" "fetched $b0_0 and $b0_1 of $s0 and $s1 bytes"
fi

: >"$LOG"
out=$T_TMP/good
if mpi 2 preshard "$U/mlc/" --plan "$P" --out "$out" --verify-md5 --json \
  --chunk-mib 1 >"$T_TMP/report.json" 2>"$T_TMP/mpi.err"; then
  t_oracle "--verify-md5 of the URL, 2 ranks: the oracle's shards" \
    check-preshard "$M/mlc" "$P" 2 "$out"
else
  t_fail "--verify-md5 of the URL, 2 ranks" "$(messages "$T_TMP/mpi.err")"
fi
b1_0=$(fetched params_shard_0.bin)
b1_1=$(fetched params_shard_1.bin)
if [ $((b1_0 - b0_0)) -eq "$s0" ] && [ $((b1_1 - b0_1)) -eq "$s1" ]; then
  t_ok "... rank 0 fetched each object whole once more, for its md5sum"
else
  t_fail "the md5 pass's GETs" "fetched $b1_0, $b1_1; without the flag" \
    "$b0_0, $b0_1; objects of $s0, $s1 bytes"
fi
t_check "... the report lists both objects" "$ORACLE" -c '
import json, sys
m = json.load(open(sys.argv[1]))["md5"]
sys.exit(m["verified"] != ["params_shard_0.bin", "params_shard_1.bin"] or
         m["bytes"] != int(sys.argv[2]))' "$T_TMP/report.json" $((s0 + s1))

out=$T_TMP/local
if mpi 2 preshard "$U/mlc/" --plan "$P" --out "$out" --verify-md5 \
  --read local --quiet 2>"$T_TMP/mpi.err"; then
  t_oracle "--verify-md5 with --read local: the oracle's shards" \
    check-preshard "$M/mlc" "$P" 2 "$out"
else
  t_fail "--verify-md5 with --read local" "$(messages "$T_TMP/mpi.err")"
fi

want=$("$ORACLE" -c 'import json, sys
print(json.load(open(sys.argv[1]))["records"][0]["md5sum"])' \
  "$M/bad/tensor-cache.json")
found=$(md5sum <"$M/bad/params_shard_0.bin" | cut -d' ' -f1)
mpi 2 preshard "$U/bad/" --plan "$P" --out "$T_TMP/bad" --verify-md5 \
  2>"$T_TMP/mpi.err"
rc=$?
got=$(messages "$T_TMP/mpi.err")
msg="tpload: $U/bad/params_shard_0.bin: expected md5sum $want as the cache records, found $found"
if [ $rc -eq 65 ] && [ "$got" = "$msg" ]; then
  t_ok "one byte changed in an object: 65, one message naming its URL"
else
  t_fail "one byte changed in an object" "exit $rc, expected 65" \
    "expected: $msg" "got: $got"
fi
"$TPLOAD" inspect "$U/bad/" --verify-md5 >/dev/null 2>"$T_TMP/err"
rc=$?
if [ $rc -eq 65 ] && [ "$(cat "$T_TMP/err")" = "$msg" ]; then
  t_ok "inspect --verify-md5 of the URL: 65, the same message"
else
  t_fail "inspect --verify-md5 of the URL" "exit $rc" "$(cat "$T_TMP/err")"
fi
t_exit "inspect --verify-md5 of the good URL" 0 \
  "$TPLOAD" inspect "$U/mlc/" --verify-md5
left=$(ls -A "$T_TMP/bad" 2>/dev/null)
if [ -z "$left" ]; then t_ok "... and no output left"
else t_fail "... no output left" "left: $left"; fi
t_done
