#!/bin/sh
# mpi_serve.sh - `mpirun -np N tpload serve` end to end, N = 2, 3 and 4, on
# random models from tests/oracle.py (single file, index, MLC directory):
# the ready file, `tpload status --json` (N ranks, bytes delivered = the
# numpy oracle's total, every tensor's xxh3 = shard-info.json's), --health,
# `tpload dump` of every rank (byte for byte a preshard of the same model,
# plan and N, and tensor by tensor what the oracle computes), and the ends
# of a job: --shutdown, SIGTERM to rank 0, to rank 1 and to mpirun, each
# checked for its exit code and what it leaves (no socket, no ready file,
# no process, no /dev/shm segment).  Every wait is for a condition (a file,
# a process that exited), bounded only to catch a hang (lib.sh); how fast a
# job ends is measured by scripts/bench-latency.sh, not asserted here.  A
# second serve on a live socket directory is refused and the first keeps
# serving; status and --health on a dead socket exit 69.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

# Every mpirun started in the background is remembered and, should the
# script stop early, ended by pid, then any of its ranks still running
# (their command lines name $T_TMP).
JOBS=""
end_jobs() {
  local p left=""
  for p in $JOBS; do
    ours "$p" && kill -TERM "$p" 2>/dev/null && left="$left $p"
  done
  for p in $left; do wait_for 5 gone "$p"; done
  for p in $left $(pgrep -f -- "$T_TMP"); do
    ours "$p" && kill -KILL "$p" 2>/dev/null
  done
  rm -rf "$T_TMP"
}
trap end_jobs EXIT

# ours PID: PID is alive and its command line names $T_TMP.
ours() { alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF "$T_TMP"; }

ms() { echo $(($(date +%s%N) / 1000000)); }

# t_oracle NAME ARGS...: one TAP line for an oracle check.
t_oracle() {
  local name=$1; shift
  if "$ORACLE" "$O" "$@" >"$T_TMP/oout" 2>"$T_TMP/oerr"; then t_ok "$name"
  else t_fail "$name" "oracle.py $*" "$(head -c 3000 "$T_TMP/oerr")"; fi
}

# t_py NAME SCRIPT ARGS...: a check written in Python; it prints why it
# failed on stderr and exits non-zero.
t_py() {
  local name=$1 script=$2; shift 2
  if "$ORACLE" -c "$script" "$@" >"$T_TMP/pout" 2>"$T_TMP/perr"; then
    t_ok "$name"
  else t_fail "$name" "$(head -c 2000 "$T_TMP/perr")"; fi
}

# same_report A B: two `status --json` outputs hold the same load report
# (the "daemon" counters, uptime included, differ from one ask to the next).
same_report() {
  "$ORACLE" -c 'import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
a.pop("daemon", None); b.pop("daemon", None)
sys.exit(a != b)' "$1" "$2"
}

# t_health NAME WANT SOCKET: `status --health` exits WANT, printing nothing.
t_health() {
  "$TPLOAD" status "$3" --health >"$T_TMP/hout" 2>&1
  local rc=$?
  if [ "$rc" -eq "$2" ] && [ ! -s "$T_TMP/hout" ]; then t_ok "$1"
  else t_fail "$1" "expected exit $2 and no output, got $rc:" \
    "$(head -c 500 "$T_TMP/hout")"; fi
}

# serve N MODEL DIR READY [LOG]: starts the job in the background; JOB is
# mpirun's pid.
serve() {
  local n=$1 model=$2 dir=$3 ready=$4 log=${5:-$T_TMP/serve}
  "$MPIRUN" --oversubscribe -np "$n" "$TPLOAD" serve "$model" \
    --plan "$model/plan.json" --socket-dir "$dir" --ready-file "$ready" \
    --quiet >"$log.out" 2>"$log.err" &
  JOB=$!
  JOBS="$JOBS $JOB"
}

# ready_or_ended READY: the ready file exists or job JOB has ended.
ready_or_ended() { [ -f "$1" ] || ! alive "$JOB"; }

# t_ready NAME READY: the ready file appears while the job runs; 1 (after
# a failed TAP line and ending the job) when the job ends or hangs first.
t_ready() {
  wait_until ready_or_ended "$2"
  if [ -f "$2" ]; then t_ok "$1"; return 0; fi
  alive "$JOB" && kill -TERM "$JOB"
  wait_for 10 gone "$JOB" || kill -KILL "$JOB"
  wait "$JOB"
  t_fail "$1" "no ready file (mpirun: exit $?)" \
    "$(messages "$T_TMP/serve.err" | head -c 1500)"
  return 1
}

# rank_pids: "RANK PID" for each rank of job JOB.
rank_pids() {
  local p r
  for p in $(pgrep -P "$JOB"); do
    r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
        sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ -n "$r" ] && echo "$r $p"
  done
}

# t_ended NAME WANT: job JOB, told to stop at STOP_T0, ends (a hang is a
# failure) with exit WANT.  How long it took is a comment, not a verdict.
t_ended() {
  local rc
  if wait_until gone "$JOB"; then
    wait "$JOB"; rc=$?
    echo "# $1: mpirun ended $(($(ms) - STOP_T0)) ms after the stop"
    t_ok "$1: mpirun ends"
    if [ "$rc" -eq "$2" ]; then t_ok "$1: mpirun exits $2"
    else t_fail "$1: mpirun exits $2" "it exited $rc" \
      "$(messages "$T_TMP/serve.err" | head -c 1500)"; fi
  else
    t_fail "$1: mpirun ends" "still running after $T_HANG_SECS s"
    kill -KILL "$JOB" $(rank_pids | awk '{ print $2 }') 2>/dev/null
    wait "$JOB" 2>/dev/null
    t_fail "$1: mpirun exits $2" "it had to be killed"
  fi
}

# t_left_nothing NAME DIR READY SHMLIST: after a job: no rank*.sock in DIR,
# no ready file, no process naming DIR, none of the /dev/shm files its
# ranks had mapped (listed in SHMLIST).
t_left_nothing() {
  local name=$1 dir=$2 ready=$3 shm=$4 left f
  left=""
  for f in "$dir"/rank*.sock; do [ -e "$f" ] && left="$left ${f##*/}"; done
  if [ -z "$left" ]; then t_ok "$name: no rank*.sock left"
  else t_fail "$name: no rank*.sock left" "left:$left"; fi
  if [ ! -e "$ready" ] && [ -z "$(ls "$ready".* 2>/dev/null)" ]; then
    t_ok "$name: no ready file (nor its temp file) left"
  else t_fail "$name: no ready file left" "$(ls "$ready"*)"; fi
  left=$(pgrep -a -f -- "$dir")
  if [ -z "$left" ]; then t_ok "$name: no process of the job left"
  else t_fail "$name: no process of the job left" "$left"; fi
  left=""
  for f in $(cat "$shm"); do [ -e "$f" ] && left="$left $f"; done
  if [ -z "$left" ]; then
    t_ok "$name: the ranks' /dev/shm files are gone ($(wc -w <"$shm") seen)"
  else
    t_fail "$name: the ranks' /dev/shm files are gone" "left:$left"
    rm -f $left
  fi
}

# t_memory NAME N SHMLIST: each of the N ranks holds its store in a memfd
# (tpload-store); the /dev/shm files they map are written to SHMLIST.
t_memory() {
  local n=0 r p f
  : >"$3"
  rank_pids >"$T_TMP/pids"
  while read -r r p; do
    for f in /proc/"$p"/fd/*; do
      case $(readlink "$f") in /memfd:tpload-store*) n=$((n + 1)); break ;;
      esac
    done
    awk '$6 ~ /^\/dev\/shm\// { print $6 }' "/proc/$p/maps" >>"$3"
  done <"$T_TMP/pids"
  sort -u -o "$3" "$3"
  if [ "$n" -eq "$2" ]; then t_ok "$1: each of the $2 ranks holds a memfd"
  else t_fail "$1: each of the $2 ranks holds a memfd" "found $n:" \
    "$(cat "$T_TMP/pids")"; fi
}

READY_PY='
import json, os, sys
path, sockdir, n, pids = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
r = json.load(open(path))
want = {"socket_dir": os.path.realpath(sockdir), "world_size": n}
got = {k: r.get(k) for k in want}
if got != want:
    sys.exit("ready file: expected %r, found %r" % (want, got))
rank0 = [p for l in pids.splitlines() for k, p in [l.split()] if k == "0"]
if not isinstance(r.get("pid"), int) or [str(r["pid"])] != rank0:
    sys.exit("ready file: pid: expected rank 0 %r, found %r"
             % (rank0, r.get("pid")))
'

XXH_PY='
import json, sys
st, info, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), \
    int(sys.argv[3])
params = info["params"]
if len(st["ranks"]) != n:
    sys.exit("status: expected %d ranks, found %d" % (n, len(st["ranks"])))
for r, rk in enumerate(st["ranks"]):
    held = sum(1 for p in params if any(h["rank"] == r for h in p["ranks"]))
    if rk.get("tensor_count") != held:
        sys.exit("rank %d: expected %d tensors, found %r"
                 % (r, held, rk.get("tensor_count")))
got = st.get("params") or []
if len(got) != len(params):
    sys.exit("status: expected %d params, found %d" % (len(params), len(got)))
# status prints reals with 15 significant digits (jsonu.h), shard-info.json
# exactly: bias_scale 1/3 is the one real of a param
for want, have in zip(params, got):
    if abs(have.get("bias_scale", 0) - want["bias_scale"]) < 1e-14:
        have["bias_scale"] = want["bias_scale"]
    if want != have:
        sys.exit("tensor %r: status says %r, shard-info.json %r"
                 % (want["name"], have, want))
print("# %d tensors x %d ranks" % (len(params), n))
'


# wider_serve DIR: a 3-rank serve on DIR, where a 2-rank job serves.
# Ranks 0 and 1 find live sockets; rank 2 binds rank2.sock.  The ranks
# agree on the outcome of listening, so all three give up with 73; were
# they to hang, the job is ended here after the hang bound and its stale
# rank2.sock and /dev/shm segments removed.
wider_serve() {
  local d=$1 p f wjob rc
  local name="a 3-rank serve over a live 2-rank job is refused (exit 73)"
  "$MPIRUN" --oversubscribe -np 3 "$TPLOAD" serve "$M/s" \
    --plan "$M/s/plan.json" --socket-dir "$d" \
    --ready-file "$T_TMP/ready-wider" --quiet >"$T_TMP/wider.out" \
    2>"$T_TMP/wider.err" &
  wjob=$!
  JOBS="$JOBS $wjob"
  if ! wait_until gone "$wjob"; then
    for p in $(pgrep -P "$wjob"); do
      awk '$6 ~ /^\/dev\/shm\// { print $6 }' "/proc/$p/maps"
    done | sort -u >"$T_TMP/shm-wider"
    kill -TERM "$wjob"
    wait_for 10 gone "$wjob" || kill -KILL "$wjob"
    wait "$wjob" 2>/dev/null
    for f in $(cat "$T_TMP/shm-wider"); do rm -f "$f"; done
    t_fail "$name" "still running after $T_HANG_SECS s" \
      "(the ranks did not agree on listening)"
  else
    wait "$wjob"; rc=$?
    if [ "$rc" -eq 73 ]; then t_ok "$name"
    else t_fail "$name" "exit $rc, expected 73"; fi
  fi
  p=$(pgrep -f -- "$T_TMP/ready-wider" | tr '\n' ' ')
  if [ -z "$p" ]; then t_ok "the 3-rank job is gone"
  else
    t_fail "the 3-rank job is gone" "left: $p"
    kill -KILL $p
  fi
  if [ -S "$d/rank2.sock" ]; then
    echo "# removing the stale $d/rank2.sock it left"
    rm -f "$d/rank2.sock"
  fi
}

# check_serving N MODEL DIR READY: the checks on a live job.
check_serving() {
  local n=$1 model=$2 dir=$3 ready=$4 r ps="$T_TMP/ps$1" dd="$T_TMP/dump$1"
  rank_pids >"$T_TMP/pids"
  t_py "N=$n: the ready file names DIR, N and rank 0's pid" "$READY_PY" \
    "$ready" "$dir" "$n" "$(cat "$T_TMP/pids")"
  t_memory "N=$n" "$n" "$T_TMP/shm$n"
  t_exit "N=$n: status --json exits 0" 0 \
    "$TPLOAD" status "$dir/rank0.sock" --json
  cp "$T_TMP/out" "$T_TMP/status$n.json"
  t_oracle "N=$n: status reports $n ranks, bytes_delivered = oracle total" \
    check-report "$model" "$model/plan.json" "$n" "$T_TMP/status$n.json"
  t_exit "N=$n: status --json through rank $((n - 1))'s socket" 0 \
    "$TPLOAD" status "$dir/rank$((n - 1)).sock" --json
  cp "$T_TMP/out" "$T_TMP/status-last.json"
  t_check "N=$n: ... is rank 0's report" same_report "$T_TMP/status-last.json" \
    "$T_TMP/status$n.json"
  for r in $(seq 0 $((n - 1))); do
    t_health "N=$n: --health on rank $r exits 0" 0 "$dir/rank$r.sock"
  done
  mkdir -p "$dd"
  for r in $(seq 0 $((n - 1))); do
    t_exit "N=$n: dump rank $r exits 0" 0 \
      "$TPLOAD" dump "$dir/rank$r.sock" --out "$dd/rank$r.safetensors"
    t_check "N=$n: rank $r's dump is byte for byte its preshard file" \
      cmp "$dd/rank$r.safetensors" "$ps/rank$r.safetensors"
  done
  cp "$ps/shard-info.json" "$dd/"
  t_oracle "N=$n: every dump holds what the oracle computes" \
    check-preshard "$model" "$model/plan.json" "$n" "$dd"
  t_py "N=$n: status --json params = shard-info.json's params" \
    "$XXH_PY" "$T_TMP/status$n.json" "$ps/shard-info.json" "$n"
}

# --- models, and their preshard outputs to compare the dumps with ----------
gen s --seed 4101 --layout single
gen idx --seed 4202 --layout index
gen mlc --seed 4303 --layout mlc
for n in 2 3 4; do
  case $n in 2) m=s ;; 3) m=idx ;; 4) m=mlc ;; esac
  t_exit "N=$n ($m): preshard for comparison exits 0" 0 \
    "$MPIRUN" --oversubscribe -np "$n" "$TPLOAD" preshard "$M/$m" \
    --plan "$M/$m/plan.json" --out "$T_TMP/ps$n" --quiet
done

# --- the checks written here can fail ---------------------------------------
# A status report that disagrees with shard-info.json in one checksum, and
# a ready file with the wrong world size.
"$ORACLE" - "$T_TMP/ps2/shard-info.json" "$T_TMP" <<'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
ranks = [{"tensor_count": len(info["params"])} for r in range(2)]
info["params"][3]["ranks"][1]["xxh3"] = "0" * 16
json.dump({"ranks": ranks, "params": info["params"]},
          open(sys.argv[2] + "/badx.json", "w"))
EOF
"$ORACLE" -c "$XXH_PY" "$T_TMP/badx.json" "$T_TMP/ps2/shard-info.json" 2 \
  >/dev/null 2>"$T_TMP/perr"
if [ $? -ne 0 ] && grep -q "status says" "$T_TMP/perr"; then
  t_ok "control: a wrong xxh3 in a status report is found"
else t_fail "control: a wrong xxh3 in a status report is found" \
  "$(cat "$T_TMP/perr")"; fi
echo '{"socket_dir": "/", "world_size": 3, "pid": 1}' >"$T_TMP/badready"
"$ORACLE" -c "$READY_PY" "$T_TMP/badready" / 2 "0 1" >/dev/null \
  2>"$T_TMP/perr"
if [ $? -ne 0 ] && grep -q "world_size" "$T_TMP/perr"; then
  t_ok "control: a wrong world_size in a ready file is found"
else t_fail "control: a wrong world_size in a ready file is found" \
  "$(cat "$T_TMP/perr")"; fi

# --- N = 2, 3, 4 -------------------------------------------------------------
# N=2 ends with --shutdown, N=3 with SIGTERM to rank 0, N=4 with SIGTERM
# to mpirun.  Open MPI's mpirun (4.1) answers SIGTERM by sending SIGCONT,
# then after 1 s SIGTERM, then after another second SIGKILL to every rank,
# and exits 1 (ORTE_ERROR_DEFAULT_EXIT_CODE) whatever the ranks return; the
# ranks stop cleanly on the SIGTERM (sockets, ready file and shared memory
# removed) and are then killed while Open MPI's MPI_Finalize waits for the
# runtime mpirun is tearing down.
if "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI"; then TERM_RC=1
else TERM_RC=""; fi

for n in 2 3 4; do
  case $n in 2) m=s ;; 3) m=idx ;; 4) m=mlc ;; esac
  D="$T_TMP/sock$n"
  R="$T_TMP/ready$n.json"
  serve "$n" "$M/$m" "$D" "$R"
  t_ready "N=$n ($m): the ready file appears" "$R" ||
    continue
  check_serving "$n" "$M/$m" "$D" "$R"

  if [ "$n" -eq 2 ]; then
    # A second job on the live directory: refused, the first unharmed.
    cp "$R" "$T_TMP/ready.before"
    t_exit "a second serve on a live socket dir exits 73" 73 \
      timeout -k 10 "$T_HANG_SECS" "$MPIRUN" --oversubscribe -np 2 \
      "$TPLOAD" serve "$M/s" --plan "$M/s/plan.json" --socket-dir "$D" \
      --ready-file "$T_TMP/ready-second" --quiet
    # Every rank of the second job fails on its own socket; today each
    # says so (the ranks do not agree on the outcome of listening, see
    # wider_serve), where one message is wanted.
    messages "$T_TMP/err" >"$T_TMP/msgs"
    DR=$(cd "$D" && pwd -P)
    refusal="^tpload: \(rank 1: \)\?$DR/rank[01]\.sock: another daemon is"
    if grep -q "^tpload: $DR/rank0\.sock: another daemon is serving" \
        "$T_TMP/msgs" && ! grep -v "$refusal" "$T_TMP/msgs" | grep -q .
    then t_ok "the second serve says another daemon serves rank0.sock"
    else t_fail "the second serve says another daemon serves rank0.sock" \
      "$(head -c 1500 "$T_TMP/msgs")"; fi
    k=$(grep -c . "$T_TMP/msgs")
    if [ "$k" -eq 1 ]; then t_ok "the second serve prints one message"
    else t_fail "the second serve prints one message" "$k messages"; fi
    if [ ! -e "$T_TMP/ready-second" ]; then
      t_ok "the second serve wrote no ready file"
    else t_fail "the second serve wrote no ready file"; fi
    for r in 0 1; do
      t_health "the first job still serves: --health on rank $r" 0 \
        "$D/rank$r.sock"
    done
    t_check "the first job's ready file is unchanged" cmp "$R" \
      "$T_TMP/ready.before"
    t_exit "the first job still answers status --json" 0 \
      "$TPLOAD" status "$D/rank0.sock" --json
    cp "$T_TMP/out" "$T_TMP/status-again.json"
    t_check "... with the same report" same_report "$T_TMP/status-again.json" \
      "$T_TMP/status2.json"
    wider_serve "$D"
    for r in 0 1; do
      t_health "after it, the first job still serves: rank $r" 0 \
        "$D/rank$r.sock"
    done

    STOP_T0=$(ms)
    t_exit "N=2: status --shutdown exits 0" 0 \
      "$TPLOAD" status "$D/rank0.sock" --shutdown
    t_ended "N=2 --shutdown" 0
    t_left_nothing "N=2 --shutdown" "$D" "$R" "$T_TMP/shm2"
    t_health "--health after shutdown exits 69" 69 "$D/rank0.sock"
    t_exit "status after shutdown exits 69" 69 \
      "$TPLOAD" status "$D/rank0.sock"
    if grep -q "rank0.sock" "$T_TMP/err"; then
      t_ok "... naming the socket"
    else t_fail "... naming the socket" "$(cat "$T_TMP/err")"; fi
  elif [ "$n" -eq 3 ]; then
    STOP_T0=$(ms)
    kill -TERM "$("$ORACLE" -c \
      'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$R")"
    t_ended "N=3 SIGTERM to rank 0" 0
    t_left_nothing "N=3 SIGTERM to rank 0" "$D" "$R" "$T_TMP/shm3"
  else
    STOP_T0=$(ms)
    kill -TERM "$JOB"
    if [ -n "$TERM_RC" ]; then
      t_ended "N=4 SIGTERM to mpirun (Open MPI)" "$TERM_RC"
    else
      if wait_until gone "$JOB"; then t_ok "N=4 SIGTERM to mpirun: it ends"
      else t_fail "N=4 SIGTERM to mpirun: it ends" "still running"; fi
      wait "$JOB"
    fi
    t_left_nothing "N=4 SIGTERM to mpirun" "$D" "$R" "$T_TMP/shm4"
  fi
done

# --- SIGTERM to a rank other than 0 -----------------------------------------
D="$T_TMP/sockt"
R="$T_TMP/readyt.json"
serve 3 "$M/idx" "$D" "$R"
if t_ready "N=3 again: the ready file appears" "$R"; then
  t_memory "N=3 again" 3 "$T_TMP/shmt"
  STOP_T0=$(ms)
  kill -TERM "$(rank_pids | awk '$1 == 1 { print $2 }')"
  t_ended "N=3 SIGTERM to rank 1 only" 0
  t_left_nothing "N=3 SIGTERM to rank 1 only" "$D" "$R" "$T_TMP/shmt"
fi

# --- a dead socket ------------------------------------------------------------
"$ORACLE" -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()' \
  "$T_TMP/dead.sock"
if [ -S "$T_TMP/dead.sock" ]; then t_ok "a socket file nobody listens on"
else t_fail "a socket file nobody listens on"; fi
t_exit "status on a dead socket exits 69" 69 \
  "$TPLOAD" status "$T_TMP/dead.sock"
t_exit "status --json on a dead socket exits 69" 69 \
  "$TPLOAD" status "$T_TMP/dead.sock" --json
t_health "--health on a dead socket exits 69" 69 "$T_TMP/dead.sock"

t_done
