# harden_lib.sh - what the harden_*.sh tests share, sourced after lib.sh
# and mpi_lib.sh: background processes ended at exit, waiting on a file
# or a stopped rank (never on a sleep), and checks written in Python.
# shellcheck shell=bash
WAIT_SECS=${WAIT_SECS:-120}   # generous: only catches hangs
PIDS=""                       # background processes to end at exit
harden_cleanup() {
  for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$T_TMP"
}
trap harden_cleanup EXIT

ms() { echo $(($(date +%s%N) / 1000000)); }

# wait_file FILE: 0 once FILE is non-empty, 1 after WAIT_SECS.
wait_file() {
  local end=$(($(ms) + WAIT_SECS * 1000))
  while [ ! -s "$1" ]; do
    [ "$(ms)" -lt "$end" ] || return 1
    sleep 0.05
  done
}

# stopped_pid RANK: the pid of job $JOB's rank RANK (a child of mpirun,
# $JOB) once it is stopped (state T); empty after WAIT_SECS.
stopped_pid() {
  local end=$(($(ms) + WAIT_SECS * 1000)) p r st
  while [ "$(ms)" -lt "$end" ]; do
    for p in $(pgrep -P "$JOB"); do
      r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
          sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
      st=$(sed 's/.*) //; s/ .*//' "/proc/$p/stat" 2>/dev/null)
      if [ "$r" = "$1" ] && [ "$st" = T ]; then echo "$p"; return; fi
    done
    sleep 0.05
  done
}

# t_py NAME SCRIPT ARGS...: a check in Python that exits non-zero (saying
# why on stderr) when it fails.
t_py() {
  local name=$1 script=$2; shift 2
  if "$ORACLE" -c "$script" "$@" >"$T_TMP/pout" 2>"$T_TMP/perr"; then
    t_ok "$name"
  else t_fail "$name" "$(head -c 2000 "$T_TMP/perr")"; fi
}
