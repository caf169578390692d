#!/bin/sh
# slurm.sh - tpload under a real Slurm (Debian's slurm-wlm): a one-node
# cluster on this machine, entirely inside the test's temp dir (its own
# slurm.conf, free ports, state, spool, pid and log files; auth/none, no
# munge, no systemd), then:
#   - `srun --mpi=pmix -n 2 tpload load --json`: the report agrees with
#     the numpy oracle; `preshard --read local` (each task reads its own
#     slices): every rank file agrees with it;
#   - `sbatch scripts/slurm-serve.sbatch` with an ENGINE: ready file and
#     health, each engine task (srun --overlap) reaches its own rank's
#     socket, then `tpload status --shutdown`: the job completes with exit
#     0, its sockets and ready file are gone;
#   - scripts/slurm-serve-multinode.sbatch (on this one node: it runs the
#     template above) ended by `scancel`: serve exits 0, nothing left.
# slurmctld and slurmd are stopped by the pids in their pid files however
# the test ends.  SKIPs only when slurm-wlm is not installed or the test
# cannot run as root (SlurmUser=root).
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"

for t in slurmctld slurmd srun sbatch scancel squeue scontrol; do
  command -v "$t" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin
  if ! command -v "$t" >/dev/null 2>&1; then
    echo "1..0 # SKIP $t not installed (scripts/install-deps.sh installs slurm-wlm)"
    exit 0
  fi
done
if [ "$(id -u)" -ne 0 ]; then
  echo "1..0 # SKIP the one-node Slurm cluster runs its daemons as root"
  exit 0
fi

S=$T_TMP/slurm
SCRIPTS=$(cd "$TESTS_SRCDIR/../scripts" && pwd)
mkdir -p "$S/state" "$S/spool" "$S/jobs"

# free_port FROM: the first TCP port from FROM on that no socket uses
# (listening or connected).
free_port() {
  local p=$1
  while ss -Htan "sport = :$p" | grep -q .; do p=$((p + 1)); done
  echo "$p"
}
# Below the kernel's ephemeral range: there, a port free now could become
# the local end of some other process's connection before slurmctld binds
# it (seen: "Address already in use" in a distcheck run).
PORT_BASE=$(($(cut -f1 /proc/sys/net/ipv4/ip_local_port_range) - 12000))
[ "$PORT_BASE" -ge 1024 ] || PORT_BASE=40000  # all ephemeral: no way out
CTLD_PORT=$(free_port $((PORT_BASE + $$ % 5000 * 2)))
SLURMD_PORT=$(free_port $((CTLD_PORT + 1)))
HOST=$(hostname)
MEM_MB=$(awk '/^MemTotal:/ { print int($2 / 1024 / 2) }' /proc/meminfo)

cat >"$S/slurm.conf" <<EOF
ClusterName=tpltest
SlurmctldHost=$HOST
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
PlugStackConfig=$S/plugstack.conf
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
KillWait=30
MinJobAge=600
NodeName=$HOST CPUs=$(nproc) RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES State=UP OverSubscribe=YES MaxTime=INFINITE
EOF
: >"$S/plugstack.conf"
export SLURM_CONF=$S/slurm.conf

# stop_daemon NAME: SIGTERM by the pid in its pid file, SIGKILL after 30 s.
stop_daemon() {
  local pid end
  pid=$(cat "$S/$1.pid" 2>/dev/null) || return 0
  alive "$pid" || return 0
  kill -TERM "$pid"
  end=$(($(date +%s) + 30))
  while alive "$pid" && [ "$(date +%s)" -lt "$end" ]; do sleep 0.1; done
  alive "$pid" && kill -KILL "$pid"
}
cleanup() {
  for j in $(squeue -h -o %i 2>/dev/null); do scancel "$j"; done
  stop_daemon slurmd
  stop_daemon slurmctld
  serve_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # so that the EXIT trap stops the daemons

# The daemons fork into the background; -c: a clean state, -i: ignore
# state it cannot recover.
if slurmctld -c -i >"$S/ctld.out" 2>&1 && slurmd -c >"$S/d.out" 2>&1; then
  t_ok "slurmctld (port $CTLD_PORT) and slurmd (port $SLURMD_PORT) start"
else
  t_fail "slurmctld and slurmd start" "$(tail -n 5 "$S"/*.log "$S"/*.out)"
  t_done; exit
fi
node_idle() { [ "$(sinfo -h -n "$HOST" -o %t 2>/dev/null)" = idle ]; }
if wait_for 120 node_idle; then t_ok "sinfo: node $HOST idle"
else
  t_fail "node idle" "$(sinfo 2>&1)" "$(tail -n 10 "$S/slurmctld.log")"
  t_done; exit
fi

gen m --seed 31 --layout single
MODEL=$M/m

# t_srun NAME OUT ARGS...: srun ARGS, stdout to OUT; passes on exit 0.
t_srun() {
  local name=$1 out=$2 rc
  shift 2
  srun "$@" >"$out" 2>"$T_TMP/srun.err"
  rc=$?
  if [ "$rc" -eq 0 ]; then t_ok "$name"
  else t_fail "$name" "exit $rc" "$(head -c 1500 "$T_TMP/srun.err")"; fi
}

# --- srun --mpi=pmix -n 2 tpload load ---
t_srun "srun --mpi=pmix -n 2 tpload load exits 0" "$T_TMP/load.json" \
  --mpi=pmix -n 2 "$TPLOAD" load "$MODEL" --plan "$MODEL/plan.json" \
  --json --quiet
t_check "srun load: the report agrees with the numpy oracle (2 ranks)" \
  "$ORACLE" "$O" check-report "$MODEL" "$MODEL/plan.json" 2 "$T_TMP/load.json"

# --- srun ... preshard --read local: each task reads its own slices ---
t_srun "srun -n 2 tpload preshard --read local exits 0" /dev/null \
  --mpi=pmix -n 2 "$TPLOAD" preshard "$MODEL" --plan "$MODEL/plan.json" \
  --read local --out "$T_TMP/local" --quiet
t_check "srun preshard --read local: every rank matches the numpy oracle" \
  "$ORACLE" "$O" check-preshard "$MODEL" "$MODEL/plan.json" 2 "$T_TMP/local"

# --- sbatch scripts/slurm-serve.sbatch ---
cat >"$S/engine.sh" <<EOF
#!/bin/sh
# An engine task: proves it reaches its own rank's socket on its node.
sock=\$TPLOAD_SOCKET_DIR/rank\$SLURM_PROCID.sock
"$TPLOAD" status "\$sock" --health && echo "\$SLURM_PROCID \$sock" \
  >"$S/engine.\$SLURM_PROCID"
EOF
chmod +x "$S/engine.sh"

# submit NAME SCRIPT ARGS: sbatch SCRIPT with 2 tasks; JOB is its id,
# SOCKDIR its socket directory, OUT its output file.
submit() {
  local name=$1 script=$2; shift 2
  SOCKDIR=$S/$name
  OUT=$S/jobs/$name.out
  JOB=$(TPLOAD_SCRIPTS=$SCRIPTS MODEL=$MODEL PLAN=$MODEL/plan.json \
    TPLOAD=$TPLOAD SOCKDIR=$SOCKDIR ENGINE=$S/engine.sh sbatch --parsable --ntasks-per-node=2 --mem=100M \
    --output="$OUT" "$@" "$script" 2>"$S/sbatch.err")
  if [ -n "$JOB" ]; then t_ok "$name: sbatch ${script##*/} (job $JOB)"
  else t_fail "$name: sbatch" "$(cat "$S/sbatch.err")"; fi
}
job_state() { scontrol show job "$JOB" 2>/dev/null |
  sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
job_ended() {
  case $(job_state) in PENDING|RUNNING|CONFIGURING|COMPLETING|"") return 1
  esac
}
job_exit() {
  scontrol show job "$JOB" | sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p'
}

ready_or_ended() { [ -f "$SOCKDIR.ready" ] || job_ended; }

# t_serving NAME: the job's ready file appears and rank 0 is healthy.
t_serving() {
  if wait_for 300 ready_or_ended && [ -f "$SOCKDIR.ready" ] && \
     "$TPLOAD" status "$SOCKDIR/rank0.sock" --health; then
    t_ok "$1: ready file and health within the job"
  else t_fail "$1: serving" "state $(job_state)" "$(tail -n 20 "$OUT")"; fi
}

# t_left_clean NAME: job ended; no socket, no ready file, no rank.
t_left_clean() {
  if wait_for 300 job_ended; then t_ok "$1: the job ends ($(job_state))"
  else t_fail "$1: the job ends" "state $(job_state)"; fi
  if grep -qx 'tpload serve: exit 0' "$OUT"; then t_ok "$1: serve exits 0"
  else t_fail "$1: serve exits 0" "$(tail -n 20 "$OUT")"; fi
  left=$(ls -d "$SOCKDIR"/* "$SOCKDIR.ready" 2>/dev/null)
  if [ -z "$left" ]; then t_ok "$1: no socket and no ready file left"
  else t_fail "$1: no socket and no ready file left" "$left"; fi
  left=$(pgrep -a -f -- "$SOCKDIR")
  if [ -z "$left" ]; then t_ok "$1: no process of the job left"
  else t_fail "$1: no process left" "$left"; fi
}

submit shutdown "$SCRIPTS/slurm-serve.sbatch"
t_serving shutdown
if wait_for 300 test -f "$S/engine.1" && wait_for 60 test -f "$S/engine.0" &&
   [ "$(cat "$S/engine.0" "$S/engine.1")" = "0 $SOCKDIR/rank0.sock
1 $SOCKDIR/rank1.sock" ]; then
  t_ok "shutdown: engine task r (srun --overlap) reaches rank r's socket"
else t_fail "shutdown: engine tasks" "$(cat "$S"/engine.* 2>&1)" \
  "$(tail -n 20 "$OUT")"; fi
t_check "shutdown: tpload status --shutdown" "$TPLOAD" status \
  "$SOCKDIR/rank0.sock" --shutdown
t_left_clean shutdown
if [ "$(job_state)" = COMPLETED ] && [ "$(job_exit)" = 0:0 ]; then
  t_ok "shutdown: Slurm records COMPLETED, ExitCode 0:0"
else t_fail "shutdown: COMPLETED 0:0" "$(job_state) $(job_exit)"; fi

submit scancel \
  "$SCRIPTS/slurm-serve-multinode.sbatch" --nodes=1
t_serving scancel
t_check "scancel: scancel $JOB" scancel "$JOB"
t_left_clean scancel
t_done
