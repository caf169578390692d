#!/bin/bash
# verify_md5.sh - --verify-md5 on a local MLC weight directory: the
# oracle's MLC writer records each params_shard file's md5sum as TVM's
# tensor-cache writer does (hashlib's hexdigest of the whole file).  A
# good directory passes at 2 ranks with the oracle's shards and a report
# naming every file; one byte changed in one file is 65 with one message
# naming the file, the md5sum recorded and the one found (coreutils'
# md5sum of the changed file, not tpload's), and nothing left behind by
# preshard (either layout) or serve (no ready file); a record without an
# md5sum, or with one that is no md5, is 65; another format is 64; without
# the flag the same directories load as before (nothing is checked).  A
# reload asked with --verify-md5 (or of a job served with it) is checked
# the same way and keeps the generation served; inspect --verify-md5 makes the same check in one
# process.  The HTTP case is http_md5.sh.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"

gen mlc --seed 3301 --layout mlc --big-mib 1
gen single --seed 3302 --layout single
gen index --seed 3303 --layout index
P=$M/mlc/plan.json


# cache_edit DIR PY: DIR/tensor-cache.json after PY (python, `c` the
# cache) has changed it.
cache_edit() {
  "$ORACLE" - "$1/tensor-cache.json" "$2" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(c, open(sys.argv[1], "w"))
EOF
}

# recorded DIR K: the md5sum file record K of DIR's cache carries.
recorded() {
  "$ORACLE" -c 'import json, sys
print(json.load(open(sys.argv[1]))["records"][int(sys.argv[2])]["md5sum"])' \
    "$1/tensor-cache.json" "$2"
}

# t_one_message NAME FILE TEXT: tpload printed one line in FILE (mpirun's
# stderr), and it is TEXT.
t_one_message() {
  local got
  got=$(messages "$2")
  if [ "$got" = "$3" ]; then t_ok "$1"
  else t_fail "$1" "expected: $3" "got: $(printf '%s' "$got" | head -c 1500)"; fi
}

# t_rc NAME WANT GOT: an exit code.
t_rc() {
  if [ "$3" -eq "$2" ]; then t_ok "$1"; else t_fail "$1" "expected exit $2, got $3"; fi
}

# t_nothing_in NAME DIR: DIR holds no file (it may exist, empty).
t_nothing_in() {
  local left
  left=$(ls -A "$2" 2>/dev/null)
  if [ -z "$left" ]; then t_ok "$1"; else t_fail "$1" "left: $left"; fi
}

# The oracle's directory records what TVM records.
if [ "$(recorded "$M/mlc" 1)" = "$(md5sum <"$M/mlc/params_shard_1.bin" |
  cut -d' ' -f1)" ]; then
  t_ok "the oracle's MLC writer records each file's md5sum"
else
  t_fail "the oracle's MLC writer records each file's md5sum"
fi

# Good: 2 ranks, the oracle's shards, the report lists both files.
out=$T_TMP/good
if mpi 2 preshard "$M/mlc" --plan "$P" --out "$out" --verify-md5 --json \
  >"$T_TMP/report.json" 2>"$T_TMP/mpi.err"; then
  t_oracle "good directory, 2 ranks: the oracle's shards" \
    check-preshard "$M/mlc" "$P" 2 "$out"
else
  t_fail "good directory, 2 ranks" "$(messages "$T_TMP/mpi.err")"
fi
sizes=$(($(stat -c %s "$M/mlc/params_shard_0.bin") +
  $(stat -c %s "$M/mlc/params_shard_1.bin")))
t_check "the report: md5 verified both files, every byte" "$ORACLE" -c '
import json, sys
m = json.load(open(sys.argv[1]))["md5"]
want = ["params_shard_0.bin", "params_shard_1.bin"]
if m["verified"] != want or m["bytes"] != int(sys.argv[2]):
    sys.exit("md5: %r, expected files %r and %s bytes" % (m, want, sys.argv[2]))
' "$T_TMP/report.json" "$sizes"
if messages "$T_TMP/mpi.err" | grep -q "md5sum as the cache records: 2 files"; then
  t_ok "the summary says how many files were checked"
else
  t_fail "the summary line" "$(messages "$T_TMP/mpi.err")"
fi
mpi 2 load "$M/mlc" --plan "$P" --json >"$T_TMP/plain.json" 2>/dev/null
t_check "without the flag the report has no md5" "$ORACLE" -c '
import json, sys
sys.exit("md5" in json.load(open(sys.argv[1])))' "$T_TMP/plain.json"
t_exit "--read local: the same check, then each rank reads" 0 \
  mpi 2 load "$M/mlc" --plan "$P" --read local --verify-md5 --quiet

# One byte of params_shard_1.bin changed: its md5sum no longer matches.
bad=$M/bad
cp -r "$M/mlc" "$bad"
flip_file_byte "$bad/params_shard_1.bin" 40
want=$(recorded "$bad" 1)
found=$(md5sum <"$bad/params_shard_1.bin" | cut -d' ' -f1)
msg="tpload: $bad/params_shard_1.bin: expected md5sum $want as the cache records, found $found"
mpi 2 preshard "$bad" --plan "$P" --out "$T_TMP/bad-out" --verify-md5 \
  2>"$T_TMP/mpi.err"
t_rc "mismatch: preshard exits 65" 65 $?
t_one_message "... one message: file, recorded md5sum, found md5sum" \
  "$T_TMP/mpi.err" "$msg"
t_nothing_in "... no rank file, no shard-info.json" "$T_TMP/bad-out"
# --layout mlc needs MLC's whole directory: tpload synth writes one (with
# the md5sums TVM's writer records; tests/cli/synth.sh checks them).
"$TPLOAD" synth --arch llama --format mlc --layers 1 --hidden 64 --heads 4 \
  --vocab 128 --out "$M/syn" --quiet >/dev/null 2>&1 ||
  { echo "Bail out! tpload synth --format mlc failed"; exit 99; }
flip_file_byte "$M/syn/params_shard_0.bin" 7
mpi 2 preshard "$M/syn" --plan llama --out "$T_TMP/bad-mlc" --layout mlc \
  --verify-md5 --quiet 2>"$T_TMP/mpi.err"
rc=$?
if [ $rc -eq 65 ] && [ -z "$(ls -A "$T_TMP/bad-mlc" 2>/dev/null)" ] &&
  messages "$T_TMP/mpi.err" | grep -q "params_shard_0.bin: expected md5sum"; then
  t_ok "mismatch: preshard --layout mlc is 65, no cache or file left"
else
  t_fail "mismatch, --layout mlc" "exit $rc" "$(messages "$T_TMP/mpi.err")" \
    "$(ls -A "$T_TMP/bad-mlc")"
fi
"$MPIRUN" --oversubscribe -np 2 "$TPLOAD" serve "$bad" --plan "$P" \
  --socket-dir "$T_TMP/bad-sock" --ready-file "$T_TMP/bad-ready" \
  --verify-md5 --quiet >/dev/null 2>"$T_TMP/serve.err"
rc=$?
if [ $rc -eq 65 ] && [ ! -e "$T_TMP/bad-ready" ]; then
  t_ok "mismatch: serve is 65 and writes no ready file"
else
  t_fail "mismatch: serve" "exit $rc" "$(messages "$T_TMP/serve.err")"
fi
t_one_message "... with the same one message" "$T_TMP/serve.err" "$msg"
t_exit "without the flag the changed directory loads (nothing checked)" 0 \
  mpi 2 load "$bad" --plan "$P" --quiet

# inspect --verify-md5: the same check in one process.
"$TPLOAD" inspect "$bad" --verify-md5 >"$T_TMP/out" 2>"$T_TMP/err"
rc=$?
if [ $rc -eq 65 ] && [ "$(cat "$T_TMP/err")" = "$msg" ] &&
  [ ! -s "$T_TMP/out" ]; then
  t_ok "inspect --verify-md5 of the changed directory: 65, the message, no listing"
else
  t_fail "inspect --verify-md5 of the changed directory" "exit $rc" \
    "$(cat "$T_TMP/err")"
fi
t_check "inspect --verify-md5 --json of the good one names both files" \
  sh -c '"$1" inspect "$2" --verify-md5 --json | "$3" -c "
import json, sys
m = json.load(sys.stdin)[\"md5\"]
sys.exit(m[\"verified\"] != [\"params_shard_0.bin\", \"params_shard_1.bin\"]
         or m[\"bytes\"] != int(sys.argv[1]))" "$4"' sh "$TPLOAD" "$M/mlc" \
  "$ORACLE" "$sizes"
t_exit "inspect --verify-md5 of a safetensors file: 64" 64 \
  "$TPLOAD" inspect "$M/single/model.safetensors" --verify-md5

# A record without md5sum, and one that is no md5: refused under the flag.
cp -r "$M/mlc" "$M/none"
cache_edit "$M/none" 'del c["records"][1]["md5sum"]'
mpi 2 load "$M/none" --plan "$P" --verify-md5 2>"$T_TMP/mpi.err"
t_rc "no md5sum recorded: 65" 65 $?
t_one_message "... naming the file" "$T_TMP/mpi.err" \
  "tpload: $M/none/params_shard_1.bin: --verify-md5: expected its file record to carry an \"md5sum\" of 32 hex digits (TVM's writer records one for every file), found none"
t_exit "... and loads without the flag" 0 \
  mpi 2 load "$M/none" --plan "$P" --quiet
cp -r "$M/mlc" "$M/odd"
cache_edit "$M/odd" 'c["records"][0]["md5sum"] = "not-an-md5"'
mpi 2 load "$M/odd" --plan "$P" --verify-md5 2>"$T_TMP/mpi.err"
rc=$?
if [ $rc -eq 65 ] && messages "$T_TMP/mpi.err" |
  grep -q "params_shard_0.bin: --verify-md5: .* found another value"; then
  t_ok "an md5sum that is not 32 hex digits: 65 naming the file"
else
  t_fail "md5sum not 32 hex digits" "exit $rc" "$(messages "$T_TMP/mpi.err")"
fi
cp -r "$M/mlc" "$M/upper"
cache_edit "$M/upper" 'for f in c["records"]: f["md5sum"] = f["md5sum"].upper()'
t_exit "an md5sum in upper case is the same sum" 0 \
  mpi 2 load "$M/upper" --plan "$P" --verify-md5 --quiet

# Another format records no md5sum: a usage error naming why.
for f in single index; do
  mpi 2 load "$M/$f" --plan "$M/$f/plan.json" --verify-md5 2>"$T_TMP/mpi.err"
  rc=$?
  if [ $rc -eq 64 ] && [ "$(messages "$T_TMP/mpi.err" | grep -c .)" = 1 ] &&
    messages "$T_TMP/mpi.err" | grep -q "^tpload: --verify-md5 checks .* records none$"; then
    t_ok "$f checkpoint with --verify-md5: 64, one message saying why"
  else
    t_fail "$f checkpoint with --verify-md5" "exit $rc" \
      "$(messages "$T_TMP/mpi.err")"
  fi
done

# t_status_lists_md5 NAME: the status report of the job on $SOCK lists
# both files as checked.
t_status_lists_md5() {
  "$TPLOAD" status "$SOCK/rank0.sock" --json >"$T_TMP/status.json" 2>/dev/null
  t_check "$1" "$ORACLE" -c '
import json, sys
m = json.load(open(sys.argv[1])).get("md5", {})
sys.exit(m.get("verified") != ["params_shard_0.bin", "params_shard_1.bin"])
' "$T_TMP/status.json"
}

# reload --verify-md5: the changed directory is refused and the job goes
# on serving; the good one is checked and switched to.
SOCK=$T_TMP/sock
serve_start "$T_TMP/serve" "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" serve \
  "$M/mlc" --plan "$P" --socket-dir "$SOCK" --ready-file "$T_TMP/ready" \
  --quiet
t_serve_ready "serve without the flag is ready" "$T_TMP/ready"
"$TPLOAD" reload "$SOCK/rank0.sock" "$bad" --verify-md5 >"$T_TMP/out" \
  2>"$T_TMP/err"
rc=$?
if [ $rc -eq 65 ] && grep -q "params_shard_1.bin: expected md5sum $want as the cache records, found $found" "$T_TMP/err"; then
  t_ok "reload --verify-md5 of the changed directory: 65 naming the file"
else
  t_fail "reload --verify-md5 of the changed directory" "exit $rc" \
    "$(cat "$T_TMP/err")"
fi
t_check "... generation 1 is still served" "$ORACLE" -c '
import json, subprocess, sys
st = json.loads(subprocess.run([sys.argv[1], "status", sys.argv[2], "--json",
                "--summary"], capture_output=True, check=True).stdout)
sys.exit(st["daemon"]["generation"] != 1)' "$TPLOAD" "$SOCK/rank0.sock"
t_exit "reload --verify-md5 of the good directory switches" 0 \
  "$TPLOAD" reload "$SOCK/rank0.sock" "$M/mlc" --verify-md5
t_status_lists_md5 "... and its report lists the files checked"
"$TPLOAD" status "$SOCK/rank0.sock" --shutdown >/dev/null 2>&1
serve_end
t_exit "serve ends with 0" 0 test "$SERVE_RC" = 0

# serve --verify-md5: its first load is checked, and so is every reload,
# asked with the flag or not.
SOCK=$T_TMP/sock2
serve_start "$T_TMP/serve2" "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" serve \
  "$M/mlc" --plan "$P" --socket-dir "$SOCK" --ready-file "$T_TMP/ready2" \
  --verify-md5 --quiet
t_serve_ready "serve --verify-md5 of the good directory is ready" \
  "$T_TMP/ready2"
t_status_lists_md5 "... its report lists the files checked"
"$TPLOAD" reload "$SOCK/rank0.sock" "$bad" >"$T_TMP/out" 2>"$T_TMP/err"
rc=$?
if [ $rc -eq 65 ] && grep -q "params_shard_1.bin: expected md5sum $want" "$T_TMP/err"; then
  t_ok "... a reload without the flag is checked too: 65"
else
  t_fail "a reload of a job served with --verify-md5" "exit $rc" \
    "$(cat "$T_TMP/err")"
fi
"$TPLOAD" status "$SOCK/rank0.sock" --shutdown >/dev/null 2>&1
serve_end
t_exit "... and the job ends with 0" 0 test "$SERVE_RC" = 0
t_done
