#!/bin/sh
# harden_ready.sh - every check before the first byte, and the ready
# file's lifecycle:
# - preshard refuses (73) a non-empty --out (even the model's own
#   directory) without --force, an output directory of another user and
#   one it cannot write (a read-only bind of it), before any byte moves
#   (no rank file appears, no "delivered" summary);
# - serve refuses (73) a ready file that is a symbolic link or a
#   directory, and one that names a live job; it removes a stale one (of
#   a dead pid) before loading, so waiting for the file never returns
#   early, writes it with the job id, and at exit removes only its own;
# - a rank that cannot listen after the load ends every rank with 73 and
#   its own message, told once, leaving no socket or ready file.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/harden_lib.sh"

NOBODY=65534

gen m --seed 7101 --layout single

# t_refused_early NAME CMD...: exit 73 and tpload never got to deliver.
t_refused_early() {
  local name=$1; shift
  t_exit "$name: 73" 73 "$@"
  if grep -q "delivered" "$T_TMP/err"; then
    t_fail "$name: refused before any byte moved" "$(cat "$T_TMP/err")"
  else t_ok "$name: refused before any byte moved"; fi
}
pre() { mpi 2 preshard "$M/m" --plan "$M/m/plan.json" "$@"; }

# --- preshard's output directory ---
mkdir "$T_TMP/used"
echo notes >"$T_TMP/used/README"
t_refused_early "preshard into a non-empty DIR" pre --out "$T_TMP/used"
t_refused_early "preshard into the model's own directory" pre --out "$M/m"
if [ "$(ls "$M/m" | grep -c rank)" -eq 0 ]; then
  t_ok "the model's directory got no rank file"
else t_fail "the model's directory got no rank file" "$(ls "$M/m")"; fi
mkdir -m 0755 "$T_TMP/foreign"
chown $NOBODY "$T_TMP/foreign"
t_refused_early "preshard into another user's DIR" pre --out "$T_TMP/foreign"
mkdir -m 0777 "$T_TMP/shared"
t_refused_early "preshard into a world-writable DIR" pre --out "$T_TMP/shared"
mkdir "$T_TMP/ro"
if mount --bind -o ro "$T_TMP/ro" "$T_TMP/ro" 2>/dev/null ||
   { mount --bind "$T_TMP/ro" "$T_TMP/ro" &&
     mount -o remount,bind,ro "$T_TMP/ro"; } 2>/dev/null; then
  t_refused_early "preshard into a read-only DIR" pre --out "$T_TMP/ro"
  umount "$T_TMP/ro"
else
  echo "# skipped the read-only mount case: cannot bind-mount here"
fi
t_exit "preshard into an empty DIR: 0" 0 pre --out "$T_TMP/fresh" --quiet

# --- the ready file ---
sd="$T_TMP/sock"
srv() {
  mpi 1 serve "$M/m" --plan "$M/m/plan.json" --socket-dir "$sd" --quiet "$@"
}
ln -s "$T_TMP/elsewhere" "$T_TMP/ready-link"
t_refused_early "a ready file that is a symbolic link" srv \
  --ready-file "$T_TMP/ready-link"
mkdir "$T_TMP/ready-dir"
t_refused_early "a ready file that is a directory" srv \
  --ready-file "$T_TMP/ready-dir"
# Job A serves; its ready file names its live rank 0.
RA="$T_TMP/ready-a"
"$MPIRUN" -np 1 "$TPLOAD" serve "$M/m" --plan "$M/m/plan.json" \
  --socket-dir "$sd" --ready-file "$RA" --quiet >"$T_TMP/serve.out" \
  2>"$T_TMP/serve.err" &
JOB=$!
PIDS="$PIDS $JOB"
wait_file "$RA"
if grep -q '"job_id": "[0-9a-f]\{32\}"' "$RA" 2>/dev/null; then
  t_ok "the ready file carries the job id"
else t_fail "the ready file carries the job id" \
  "$(cat "$RA" "$T_TMP/serve.err" 2>&1)"; fi
cp "$RA" "$T_TMP/ready-a.orig"
t_refused_early "a ready file of a live job" mpi 1 serve "$M/m" \
  --plan "$M/m/plan.json" --socket-dir "$T_TMP/sock2" --ready-file "$RA"
t_check "the live job's ready file is left alone" cmp "$RA" \
  "$T_TMP/ready-a.orig"

# A stale ready file (its pid is gone) is removed when a job starts, so
# a supervisor never takes it for the new job's: job B fails later (A
# holds the socket directory) and leaves no ready file at all.
sh -c 'exit 0' & DEAD=$!; wait $DEAD
RB="$T_TMP/ready-b"
echo "{\"socket_dir\": \"$sd\", \"world_size\": 1, \"pid\": $DEAD}" >"$RB"
t_exit "job B on A's live socket directory: 73" 73 srv --ready-file "$RB"
if [ ! -e "$RB" ]; then t_ok "the stale ready file was removed at start"
else t_fail "the stale ready file was removed at start" "$(cat "$RB")"; fi

# Another job's ready file took A's path: at exit A leaves it alone.
sed 's/"job_id": "[0-9a-f]*"/"job_id": "another"/' "$RA" >"$RA.new"
mv "$RA.new" "$RA"
t_exit "job A stops on --shutdown" 0 "$TPLOAD" status "$sd/rank0.sock" \
  --shutdown
wait "$JOB"
if grep -q another "$RA" 2>/dev/null; then
  t_ok "at exit a ready file that is not its own is left alone"
else t_fail "at exit a ready file that is not its own is left alone"; fi

# One rank cannot start after the load (rank 1's socket path is longer
# than sun_path takes; rank 0's is fine), under the watch's deadline:
# every rank ends at the start-up agreement, before the watch begins,
# with 73 and rank 1's message, told once (it was lost: a second
# agreement of the agreed failure moved it to rank 0, which had none);
# rank 0's socket and the ready file are gone.
long=$T_TMP/$(printf '%0100d' 0)
mkdir -m 0700 "$T_TMP/r0" "$long"
one() { echo -np 1 "$TPLOAD" serve "$M/m" --plan "$M/m/plan.json" \
  --ready-file "$T_TMP/r.ready" --stall-timeout 2 --socket-dir "$1"; }
timeout -s KILL 120 "$MPIRUN" --oversubscribe $(one "$T_TMP/r0") : \
  $(one "$long") >"$T_TMP/out" 2>"$T_TMP/err"
rc=$?
messages "$T_TMP/err" | grep '^tpload:' >"$T_TMP/said"
if [ $rc -eq 73 ] && [ "$(grep -c . "$T_TMP/said")" = 1 ] &&
  grep -q "^tpload: rank 1: $long/rank1.sock: socket path" "$T_TMP/said"
then t_ok "a rank that cannot listen: 73, its message once"
else t_fail "a rank that cannot listen: 73, its message once" "exit $rc" \
  "$(messages "$T_TMP/err" | head -c 1500)"; fi
if [ -z "$(ls -A "$T_TMP/r0")" ] && [ ! -e "$T_TMP/r.ready" ]; then
  t_ok "a rank that cannot listen: nothing left behind"
else t_fail "a rank that cannot listen: nothing left behind" \
  "$(ls -A "$T_TMP/r0" "$T_TMP/r.ready" 2>&1)"; fi
t_done
