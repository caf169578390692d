# reload_lib.sh - one `tpload serve` job to reload and what a test asks
# of it (reload.sh, reload_faults.sh): start it ready with its ranks'
# pids, the generation served, one store per rank, a clean end.  Sourced
# after lib.sh, mpi_lib.sh and serve_lib.sh.
# shellcheck shell=bash

# serve_job LABEL NP MODEL ARGS...: a serve of MODEL (plan: MODEL's)
# with tpload's ARGS (and mpirun's $MPI_ARGS) on $SOCK with ready file
# $READY, ready (one TAP line); rank pids in $PIDS (from status --json).
serve_job() {
  local label=$1 np=$2 model=$3; shift 3
  SOCK=$T_TMP/sock-$label READY=$T_TMP/ready-$label
  # shellcheck disable=SC2086
  serve_start "$T_TMP/serve-$label" "$MPIRUN" --oversubscribe -np "$np" \
    ${MPI_ARGS:-} "$TPLOAD" serve "$model" --plan "$model/plan.json" \
    --socket-dir "$SOCK" --ready-file "$READY" "$@"
  t_serve_ready "$label: serve -np $np is ready" "$READY"
  PIDS=$("$TPLOAD" status "$SOCK/rank0.sock" --json --summary |
    "$ORACLE" -c 'import json, sys
print(" ".join(str(r["pid"]) for r in json.load(sys.stdin)["ranks"]))')
}

# keep: copies what the last t_exit caught to $T_TMP/last.out, .err.
keep() {
  cp "$T_TMP/out" "$T_TMP/last.out"
  cp "$T_TMP/err" "$T_TMP/last.err"
}

# t_generation_is NAME G MODEL: status (JSON) names generation G of
# MODEL, the ready file G too.
t_generation_is() {
  t_check "$1" "$ORACLE" -c 'import json, subprocess, sys
st = json.loads(subprocess.run([sys.argv[1], "status", sys.argv[2], "--json",
                "--summary"], capture_output=True, check=True).stdout)
ready = json.load(open(sys.argv[3]))
g = int(sys.argv[4])
if st["daemon"]["generation"] != g or ready["generation"] != g:
    sys.exit("generation: status %r, ready file %r, expected %d"
             % (st["daemon"]["generation"], ready["generation"], g))
if st["model"] != sys.argv[5]:
    sys.exit("model %r, expected %r" % (st["model"], sys.argv[5]))' \
    "$TPLOAD" "$SOCK/rank0.sock" "$READY" "$2" "$3"
}

# t_one_store NAME: every rank's daemon holds one shard store (memfd),
# the generation it serves: nothing of another is left.
t_one_store() {
  local p n ok=1 why=""
  for p in $PIDS; do
    n=$(ls -l "/proc/$p/fd" 2>/dev/null | grep -c 'memfd:tpload-store')
    [ "$n" = 1 ] || { ok=0; why="$why pid $p holds $n stores;"; }
  done
  if [ $ok = 1 ]; then t_ok "$1"; else t_fail "$1" "$why"; fi
}

# stopped PID: the process is stopped (state T).
stopped() { [ "$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null)" = T ]; }

# t_job_ends NAME: shutdown, mpirun exits 0, nothing left behind.
t_job_ends() {
  "$TPLOAD" status "$SOCK/rank0.sock" --shutdown >/dev/null 2>&1
  serve_end
  if [ "$SERVE_RC" = 0 ] && ! ls "$SOCK"/rank*.sock >/dev/null 2>&1 &&
    [ ! -e "$READY" ]; then t_ok "$1"
  else t_fail "$1" "rc $SERVE_RC" "$(messages "$SERVE_LOG.err" | tail -5)"; fi
}
