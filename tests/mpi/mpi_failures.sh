#!/bin/sh
# mpi_failures.sh - DESIGN.md section 6 under mpirun: bad input is refused
# with one exit code on every rank and one message (not one per rank), a
# rank killed mid-load ends the job with a non-zero code, a full
# disk is exit 74, and no failure leaves rank*.safetensors, shard-info.json
# or a temp file behind.  Every broken input is built here from a valid
# model written by tests/oracle.py.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

# t_one_message NAME WORD [SKIP]: the last command's stderr holds exactly
# one message of tpload's, and it mentions WORD; lines matching the regex
# SKIP are not counted.
t_one_message() {
  messages "$T_TMP/err" | grep -v -e "${3:-^$}" >"$T_TMP/msgs"
  local n
  n=$(grep -c . "$T_TMP/msgs")
  if [ "$n" -eq 1 ] && grep -q "^tpload" "$T_TMP/msgs" &&
      grep -qF -- "$2" "$T_TMP/msgs"; then
    t_ok "$1"
  else
    t_fail "$1" "expected one 'tpload...' line naming '$2', got $n:" \
      "$(head -c 1500 "$T_TMP/msgs")"
  fi
}

# t_clean NAME DIR: DIR (if it exists) holds no output and no temp file.
t_clean() {
  local left=""
  [ -d "$2" ] && left=$(ls -A "$2")
  if [ -z "$left" ]; then t_ok "$1"
  else t_fail "$1" "left in $2: $(echo $left)"; fi
}

gen good --seed 808 --layout single
G="$M/good"

# --- a corrupt model --------------------------------------------------------
mkdir -p "$M/trunc"
cp "$G/plan.json" "$M/trunc/"
head -c -3 "$G/model.safetensors" >"$M/trunc/model.safetensors"
t_exit "truncated safetensors, N=3 preshard: exit 65" 65 \
  mpi 3 preshard "$M/trunc" --plan "$G/plan.json" --out "$T_TMP/o1" --quiet
t_one_message "truncated safetensors: one message, naming the file" \
  "model.safetensors"
t_clean "truncated safetensors: no output files" "$T_TMP/o1"

mkdir -p "$M/hdr"
"$ORACLE" - "$G/model.safetensors" "$M/hdr/model.safetensors" <<'EOF'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[8] = ord("[")  # the header must be a JSON object
open(sys.argv[2], "wb").write(data)
EOF
t_exit "safetensors header not an object, N=4 load: exit 65" 65 \
  mpi 4 load "$M/hdr" --plan "$G/plan.json" --quiet
t_one_message "bad header: one message, naming the file" "model.safetensors"

# --- a plan that does not fit N ---------------------------------------------
# t.u8.d0 is [36]: segments [16, 20] divide by 2 and 4, not by 3.
"$ORACLE" - "$G/plan.json" "$T_TMP/plan3.json" <<'EOF'
import json, sys
plan = json.load(open(sys.argv[1]))
rule = next(r for r in plan["rules"] if r["match"] == "t.u8.d0")
rule["segs"] = [16, 20]
json.dump(plan, open(sys.argv[2], "w"))
EOF
t_exit "indivisible segment for N=3: preshard exit 65" 65 \
  mpi 3 preshard "$G" --plan "$T_TMP/plan3.json" --out "$T_TMP/o2" --quiet
t_one_message "indivisible segment: one message, naming the tensor" "t.u8.d0"
if grep -q "16" "$T_TMP/msgs" && grep -Eq "by 3|N ?= ?3|3 shards" "$T_TMP/msgs"
then
  t_ok "indivisible segment: the message names the segment and N"
else t_fail "indivisible segment: the message names the segment and N" \
  "$(cat "$T_TMP/msgs")"; fi
t_clean "indivisible segment: no output files" "$T_TMP/o2"
t_exit "the same plan with N=2 works" 0 \
  mpi 2 preshard "$G" --plan "$T_TMP/plan3.json" --out "$T_TMP/o2b" --quiet
t_exit "the same plan with N=4 load works" 0 \
  mpi 4 load "$G" --plan "$T_TMP/plan3.json" --quiet

# scale_bias on an I32 tensor (first rule wins), and an unknown key.
"$ORACLE" - "$G/plan.json" "$T_TMP" <<'EOF'
import json, sys
plan = json.load(open(sys.argv[1]))
bad = dict(plan, rules=[{"match": "t.i32.d3", "scale_bias": True}]
           + plan["rules"])
json.dump(bad, open(sys.argv[2] + "/plan_i32.json", "w"))
bad = dict(plan, rules=plan["rules"] + [{"match": "x", "dim": 0,
                                         "sges": [12]}])
json.dump(bad, open(sys.argv[2] + "/plan_key.json", "w"))
EOF
t_exit "scale_bias on an I32 tensor, N=2: exit 65" 65 \
  mpi 2 preshard "$G" --plan "$T_TMP/plan_i32.json" --out "$T_TMP/o3" --quiet
t_one_message "scale_bias on I32: one message, naming the tensor" "t.i32.d3"
t_clean "scale_bias on I32: no output files" "$T_TMP/o3"
t_exit "a plan rule with an unknown key, N=3: exit 65" 65 \
  mpi 3 load "$G" --plan "$T_TMP/plan_key.json" --quiet
t_one_message "unknown plan key: one message, naming the key" "sges"

# --- missing model, output that cannot be created ---------------------------
t_exit "missing model: exit 66" 66 \
  mpi 2 load "$T_TMP/no-such-model" --plan "$G/plan.json" --quiet
t_one_message "missing model: one message" "no-such-model"
: >"$T_TMP/plainfile"
t_exit "--out under a regular file: exit 73" 73 \
  mpi 2 preshard "$G" --plan "$G/plan.json" --out "$T_TMP/plainfile/d" \
  --quiet
t_one_message "--out under a regular file: one message" "plainfile"

# --- a rank killed mid-load -------------------------------------------------
# Rank 1 stops itself as it starts receiving (the test-only
# TPLOAD_TEST_SIGSTOP_RANK): every rank is then inside the load, and the
# load cannot finish, whatever the machine's speed (rank 0 cannot push
# 100 MiB through a 1 MiB window to a stopped rank, nor rank 2 get what
# rank 1 forwards).  Rank 1 is killed with SIGKILL and the others run on;
# mpirun must end the job, non-zero (a hang is a failure; how fast is
# not asserted).
gen big --seed 909 --layout single --big-mib 100
K="$T_TMP/killed"
mkdir -p "$K"
TPLOAD_TEST_SIGSTOP_RANK=1 "$MPIRUN" --oversubscribe -np 3 \
  -x TPLOAD_TEST_SIGSTOP_RANK "$TPLOAD" preshard "$M/big" \
  --plan "$M/big/plan.json" --out "$K" --chunk-mib 1 --quiet \
  >"$T_TMP/kout" 2>"$T_TMP/kerr" &
MPID=$!

# rank_pids: "RANK PID" for each tpload process of this job.
rank_pids() {
  local p r
  for p in $(pgrep -f -- "$K"); do
    [ "$(cat /proc/"$p"/comm 2>/dev/null)" = tpload ] || continue
    r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
        sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ -n "$r" ] && echo "$r $p"
  done
}

# rank1_stopped_or_ended: rank 1 has stopped itself, or the job ended.
rank1_stopped_or_ended() {
  local v
  v=$(rank_pids | awk '$1 == 1 { print $2 }')
  [ -n "$v" ] && [ "$(sed 's/.*) //; s/ .*//' "/proc/$v/stat" 2>/dev/null)" = T ] &&
    return 0
  ! alive "$MPID"
}
wait_until rank1_stopped_or_ended
PIDS=$(rank_pids)
ALL=$(echo "$PIDS" | awk '{ print $2 }')
VICTIM=$(echo "$PIDS" | awk '$1 == 1 { print $2 }')
if ! alive "$MPID" || [ -z "$VICTIM" ] || [ "$(echo "$ALL" | wc -w)" -ne 3 ]
then
  [ -n "$ALL" ] && kill -KILL $ALL 2>/dev/null
  kill -0 $MPID 2>/dev/null && kill -KILL $MPID
  wait $MPID
  t_fail "found the 3 ranks' pids, rank 1 stopped mid-load" "found: $PIDS" \
    "$(messages "$T_TMP/kerr" | head -c 1000)"
else
  t_ok "found the 3 ranks' pids, rank 1 stopped mid-load (pid $VICTIM)"
  T0=$(date +%s)
  kill -KILL "$VICTIM"
  if ! wait_until gone "$MPID"; then
    t_fail "mpirun ends after a rank's death" \
      "still running after $T_HANG_SECS s"
    kill -KILL $ALL $MPID 2>/dev/null
    wait $MPID
  else
    wait $MPID
    RC=$?
    echo "# mpirun ended $(($(date +%s) - T0)) s after the rank's death"
    t_ok "mpirun ends after a rank's death"
    if [ "$RC" -ne 0 ]; then t_ok "a rank's death is a non-zero exit ($RC)"
    else t_fail "a rank's death is a non-zero exit" "mpirun exited 0"; fi
  fi
  # (a zombie waiting for its reaper has ended)
  if wait_until gone $ALL; then t_ok "no rank process outlives the job"
  else
    t_fail "no rank process outlives the job" "still running: $(rank_pids)"
    kill -KILL $ALL 2>/dev/null
  fi
fi
t_clean "killed rank: no rank*.safetensors, shard-info.json or temp file" "$K"

# --- disk full while writing ------------------------------------------------
# A small tmpfs mounted over DIR in a private mount namespace (root:
# unshare -m; otherwise an unprivileged user namespace, unshare -rm);
# DIR's listing is taken inside, before the namespace goes away.
cat >"$T_TMP/intmpfs.sh" <<'EOF'
size=$1 dir=$2 listing=$3; shift 3
mount -t tmpfs -o size="$size" tmpfs "$dir" || exit 125
"$@"
rc=$?
ls -A "$dir" >"$listing"
exit $rc
EOF
F="$T_TMP/full"
mkdir -p "$F"
NS=""
for try in "unshare -m" "unshare -rm"; do
  if $try sh -c 'mount -t tmpfs -o size=1m tmpfs "$1"' sh "$F" 2>/dev/null
  then NS=$try; break; fi
done

# full_case NAME SIZE MODEL WORD: preshard N=2 of MODEL onto a tmpfs of
# SIZE: exit 74, one message naming WORD, nothing left behind.
full_case() {
  local name=$1 size=$2 model=$3 word=$4 k
  if [ -z "$NS" ]; then
    for k in 1 2 3 4; do
      T_COUNT=$((T_COUNT + 1))
      echo "ok $T_COUNT # SKIP $name: cannot mount a tmpfs" \
        "(no root, no user namespaces)"
    done
    return
  fi
  rm -f "$T_TMP/full.ls"
  t_exit "$name: exit 74" 74 \
    $NS sh "$T_TMP/intmpfs.sh" "$size" "$F" "$T_TMP/full.ls" \
    "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" preshard "$model" \
    --plan "$model/plan.json" --out "$F" --quiet
  # Whichever rank finds the disk full first says why, in the one line
  # (which one it is depends on the scheduler).
  t_one_message "$name: one message" "$word"
  if grep -qi "space\|full" "$T_TMP/msgs"; then t_ok "$name: says so"
  else t_fail "$name: says so" "$(cat "$T_TMP/msgs")"; fi
  if [ -f "$T_TMP/full.ls" ] && [ ! -s "$T_TMP/full.ls" ]; then
    t_ok "$name: nothing left on the full filesystem"
  else t_fail "$name: nothing left on the full filesystem" \
    "$(cat "$T_TMP/full.ls" 2>/dev/null || echo no listing)"; fi
}

# Two ranks' files of about 1 MiB each on 1 MiB.
gen two --seed 1001 --layout single --big-mib 1
full_case "disk full writing rank files" 1m "$M/two" "rank"
# Rank files of 0.45 MiB each fit in 2 MiB, the 2.1 MiB shard-info.json
# does not: the published rank files must go again.
gen six --seed 1002 --layout single --tensors 6000
full_case "disk full writing shard-info.json" 2m "$M/six" "shard-info.json"

t_done
