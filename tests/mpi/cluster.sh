#!/bin/bash
# cluster.sh - loads across real links: 3 nodes x 2 ranks, each node a
# network namespace with its own hostname and one 400 Mbit/s veth into a
# bridge, and a store namespace running nginx over the models
# (tests/lib/cluster_lib.sh).  mpirun runs on node 0 with a hostfile of
# the three nodes and an rsh agent that enters the target node, TCP bound
# to the veth: every byte between nodes crosses a shaped link.
# Checked: a namespace left by a killed run is swept; Open MPI sees three
# hosts, two ranks each, in block order; the links are shaped, no
# namespace has a default route or an address outside 198.18.0.0/15;
# `load` and `preshard` byte-exact against the numpy oracle for TP 6
# across the nodes (block and round-robin placement) and TP 2 x DP 3 (one
# replica a node), from rank 0's disk and from the store's URL, with
# --read mpi and --read local; `serve` answers --health on every node,
# its status asked on every node = the oracle, a dump on node 1 =
# preshard's file.
# Bytes per link come from each node's /sys/class/net counters and are
# printed beside the topology's (tests/oracle/cluster_bytes.py); asserted:
# with ranks in block order and round-robin (--map-by node) alike, every
# node takes in its distinct bytes once and node 0 sends what the others
# need once (a replicated tensor, or a replica, enters a node once and is
# relayed inside it: the chains run node by node); --read local from
# disks moves no shard over a link; the store sends the model once for
# --read mpi.  Each --json load's nodes[] (bytes in and out per host, the
# ranks' own counts) are the link counters' within 5 % (a doctored report
# fails) and the same minimum per node.  --read local from the URL with
# --read-gap 0 (each piece its own range, up to 128 to a multi-range GET;
# http_local_bytes.sh tests the default's bound): the store's GETs (its
# access log) ask for at most 1.05 x what the ranks hold, their
# multipart framing under 128 bytes a part, and its link carries those
# GETs and their framing.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/http_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"
. "$TESTS_SRCDIR/lib/cluster_lib.sh"

cl_test_begin
K=3
NP=6
# A namespace a killed run left (its id a pid that is gone): cl_up sweeps it.
sh -c 'exit 0' &
dead=$!
wait $dead
ip netns add "$CL_PREFIX-$dead-n0"
cl_up $K 400mbit >"$T_TMP/up.out" ||
  { echo "Bail out! the cluster did not come up"; exit 99; }
sed 's/^# //; s/^/# /' "$T_TMP/up.out"
if ip netns list | grep -q "^$CL_PREFIX-$dead-"; then
  t_fail "cl_up sweeps the namespaces of a killed run" "$(ip netns list)"
  ip netns delete "$CL_PREFIX-$dead-n0"
else t_ok "cl_up sweeps the namespaces of a killed run"; fi
cl_links_line
cl_store_up "$M" 1600mbit ||
  { echo "Bail out! the store did not come up"; exit 99; }
CB="$TESTS_SRCDIR/oracle/cluster_bytes.py"

# --- the cluster itself ----------------------------------------------------
# Each rank writes its own file (the nodes share this filesystem), so what
# is compared depends neither on mpirun's output forwarding nor on a
# warning Open MPI prints under load.
mkdir "$T_TMP/hosts"
cl_exec n0 "$MPIRUN" $CL_MPI -np $NP sh -c \
  'hostname >"$1/$OMPI_COMM_WORLD_RANK"' ranks "$T_TMP/hosts" \
  >"$T_TMP/hosts.out" 2>&1
rc=$?
want="" got=""
for r in $(seq 0 $((NP - 1))); do
  want="$want $r:$(cl_host "n$((r / 2))")"
  got="$got $r:$(cat "$T_TMP/hosts/$r" 2>/dev/null)"
done
if [ "$rc" -eq 0 ] && [ "$got" = "$want" ]; then
  t_ok "Open MPI sees $K hosts, 2 ranks each in block order"
else t_fail "Open MPI sees $K hosts, 2 ranks each" "mpirun exit $rc" \
  "want$want" "got $got" "$(head -c 2000 "$T_TMP/hosts.out")"
fi
bad=""
for n in br st $(seq -f 'n%g' 0 $((K - 1))); do
  [ -z "$(ip -n "$(cl_ns "$n")" route show default)" ] ||
    bad="$bad $n has a default route;"
  ip -n "$(cl_ns "$n")" -o -4 addr show | awk '{ print $4 }' |
    grep -v -e '^127\.' -e '^198\.1[89]\.' && bad="$bad $n: address outside"
done
if [ -z "$bad" ]; then
  t_ok "no namespace has a default route or an address outside 198.18/15"
else t_fail "containment" "$bad"; fi
if tc -n "$(cl_ns n1)" qdisc show dev "$CL_IF" | grep -q tbf &&
   tc -n "$(cl_ns br)" qdisc show dev n1 | grep -q tbf; then
  t_ok "node 1's link is shaped both ways (tbf)"
else t_fail "node 1's link is shaped" "$(tc -n "$(cl_ns br)" qdisc show)"; fi

# --- the model: sharded tensors, and one big replicated tensor -------------
gen m --seed 3801 --layout index --big-mib 2
MODEL=$M/m
PLAN=$MODEL/plan.json
# The same plan with big.cols (2 MiB) replicated: every rank holds it, so
# a node needs it once but today receives it once per rank.
REP=$T_TMP/plan-rep.json
cl_rep_plan "$PLAN" "$REP"
URL=$CL_URL/m

# job NAME ARGS...: tpload ARGS on the $NP ranks (cluster_lib.sh's cl_job).
job() { cl_job "$@"; }

# links NAME MODE PLAN TP [--map-by node]: the bytes each link carried
# during job NAME, printed beside the oracle's figures and checked for
# MODE by cluster_bytes.py check (its docstring says what each asserts);
# with LINKS_LOG set, against the store's access log lines of the job too.
links() {
  local name=$1 mode=$2 plan=$3 tp=$4; shift 4
  "$ORACLE" "$CB" "$MODEL" "$plan" $NP "$tp" $K "$@" >"$T_TMP/$name.want" ||
    { t_fail "$name: cluster_bytes.py" "$(cat "$T_TMP/$name.want")"; return; }
  if "$ORACLE" "$CB" check "$name" "$mode" "$T_TMP/$name".{b0,b1,want} \
    ${LINKS_LOG:+"$LINKS_LOG"} >"$T_TMP/$name.links" 2>&1
  then t_ok "$name: bytes per link ($mode)"
  else t_fail "$name: bytes per link ($mode)"; fi
  cat "$T_TMP/$name.links"
}

# nodes NAME: job NAME's report's bytes in and out per node (its ranks'
# own counts) against the link counters and the topology's minimum
# (cluster_bytes.py report --want, from links NAME); the nodes' host
# names in $hosts.
hosts=""
for k in $(seq 0 $((K - 1))); do hosts="$hosts $(cl_host "n$k")"; done
nodes() {
  # shellcheck disable=SC2086
  if "$ORACLE" "$CB" report "$1" "$T_TMP/$1".{out,b0,b1} \
    --want "$T_TMP/$1.want" $hosts >"$T_TMP/$1.nodes" 2>&1
  then t_ok "$1: the report's bytes per node = the links' (5 %), the least"
  else t_fail "$1: the report's bytes per node = the links', the least" \
    "$(grep -v '^#' "$T_TMP/$1.nodes")"; fi
  cat "$T_TMP/$1.nodes"
}

# --- TP 6 across the nodes ---------------------------------------------------
job disk-load load "$MODEL" --plan "$PLAN" --json --quiet
t_oracle "disk-load: report = numpy oracle" check-report "$MODEL" "$PLAN" \
  $NP "$T_TMP/disk-load.out"
links disk-load mpi "$PLAN" $NP
nodes disk-load
if [ "$(sort -u "$CL_DIR/agent.log" | wc -l)" -eq $((K - 1)) ]; then
  t_ok "the rsh agent started nodes 1 and 2's daemons"
else t_fail "the agent started the other nodes" "$(cat "$CL_DIR/agent.log")"
fi

job disk-rep load "$MODEL" --plan "$REP" --json --quiet
t_oracle "disk-rep: report = numpy oracle" check-report "$MODEL" "$REP" \
  $NP "$T_TMP/disk-rep.out"
links disk-rep mpi "$REP" $NP
nodes disk-rep
# doctor_in MIB OUT: disk-rep's report with node 1 taking in MIB more.
doctor_in() {
  "$ORACLE" - "$T_TMP/disk-rep.out" "$2" "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["nodes"][1]["bytes_in"] += int(sys.argv[3]) << 20
json.dump(r, open(sys.argv[2], "w"))
EOF
}
# The check can fail: a report saying node 1 took in 1 MiB more is refused.
doctor_in 1 "$T_TMP/doctored.json"
# shellcheck disable=SC2086
if "$ORACLE" "$CB" report doctored "$T_TMP/doctored.json" \
  "$T_TMP/disk-rep".{b0,b1} $hosts >"$T_TMP/doctored.out" 2>&1
then t_fail "a report claiming 1 MiB more for node 1 fails the check"
elif grep -q "node 1 in: the report says" "$T_TMP/doctored.out"
then t_ok "a report claiming 1 MiB more for node 1 fails the check"
else t_fail "a doctored report: the reason" "$(cat "$T_TMP/doctored.out")"; fi
# The check can fail: node 1's counters doctored to one copy per rank of
# the replicated tensor (what rank-order chains gave round-robin) are
# refused.
awk '$1 == "n1" { $2 += 2 * 1048576 } { print }' "$T_TMP/disk-rep.b1" \
  >"$T_TMP/doctored.b1"
if "$ORACLE" "$CB" check doctored mpi "$T_TMP/disk-rep.b0" \
  "$T_TMP/doctored.b1" "$T_TMP/disk-rep.want" >"$T_TMP/doctored.out" 2>&1
then t_fail "a node taking in a second copy fails the check" \
  "$(cat "$T_TMP/doctored.out")"
elif grep -q "node 1 took in .* its distinct bytes" "$T_TMP/doctored.out"
then t_ok "a node taking in a second copy fails the check"
else t_fail "a node taking in a second copy: the reason" \
  "$(cat "$T_TMP/doctored.out")"; fi
# ... and a report agreeing with those counters fails the least.
doctor_in 2 "$T_TMP/doctored2.json"
# shellcheck disable=SC2086
if "$ORACLE" "$CB" report doctored "$T_TMP/doctored2.json" \
  "$T_TMP/disk-rep.b0" "$T_TMP/doctored.b1" --want "$T_TMP/disk-rep.want" \
  $hosts >"$T_TMP/doctored.out" 2>&1
then t_fail "a report of a second copy for node 1 fails the least"
elif grep -q "node 1 reports taking in" "$T_TMP/doctored.out" &&
  ! grep -q "node 1 in: the report says" "$T_TMP/doctored.out"
then t_ok "a report of a second copy for node 1 fails the least"
else t_fail "a report of a second copy: the reason" \
  "$(cat "$T_TMP/doctored.out")"; fi

job url-load load "$URL" --plan "$PLAN" --json --quiet
t_oracle "url-load: report = numpy oracle" check-report "$MODEL" "$PLAN" \
  $NP "$T_TMP/url-load.out"
links url-load mpi "$PLAN" $NP
nodes url-load

job disk-local preshard "$MODEL" --plan "$PLAN" --out "$T_TMP/ps-local" \
  --read local --quiet
t_oracle "disk-local: preshard files = numpy oracle" check-preshard \
  "$MODEL" "$PLAN" $NP "$T_TMP/ps-local"
links disk-local local "$PLAN" $NP

# The store's GETs during the job: its access log's new lines.
slog=$CL_DIR/store/access.log
nlog=$(wc -l <"$slog")
job url-local preshard "$URL" --plan "$PLAN" --out "$T_TMP/ps-url" \
  --read local --read-gap 0 --quiet
tail -n +$((nlog + 1)) "$slog" >"$T_TMP/url-local.gets"
t_oracle "url-local: preshard files = numpy oracle" check-preshard \
  "$MODEL" "$PLAN" $NP "$T_TMP/ps-url"
LINKS_LOG=$T_TMP/url-local.gets links url-local url-local "$PLAN" $NP

# Round-robin placement: rank r on node r % 3.
CL_MPI_EXTRA="--map-by node" job rr-load load "$MODEL" --plan "$REP" \
  --json --quiet
t_oracle "rr-load (--map-by node): report = numpy oracle" check-report \
  "$MODEL" "$REP" $NP "$T_TMP/rr-load.out"
links rr-load mpi-rr "$REP" $NP --map-by node
nodes rr-load

# --- TP 2 x DP 3: one replica a node -----------------------------------------
job grid-disk preshard "$MODEL" --plan "$PLAN" --tp 2 --out "$T_TMP/g-disk"
if grep -q "preshard: 3 nodes, bytes in/out: $(cl_host n0) (2 ranks)" \
  "$T_TMP/grid-disk.err"
then t_ok "grid-disk: the summary's line of bytes per node"
else t_fail "grid-disk: the line of bytes per node" \
  "$(grep -v "^ *$" "$T_TMP/grid-disk.err" | head -c 1500)"; fi
t_oracle "grid-disk: every replica's files = numpy oracle" check-grid \
  "$MODEL" "$PLAN" $NP 2 1 1 "$T_TMP/g-disk"
links grid-disk mpi "$PLAN" 2

job url-grid preshard "$URL" --plan "$PLAN" --tp 2 --out "$T_TMP/g-urlm" \
  --quiet
t_oracle "url-grid: every replica's files = numpy oracle" check-grid \
  "$MODEL" "$PLAN" $NP 2 1 1 "$T_TMP/g-urlm"
links url-grid mpi "$PLAN" 2

job grid-url preshard "$URL" --plan "$PLAN" --tp 2 --out "$T_TMP/g-url" \
  --read local --read-gap 0 --quiet
t_oracle "grid-url --read local: every replica's files = numpy oracle" \
  check-grid "$MODEL" "$PLAN" $NP 2 1 1 "$T_TMP/g-url"
links grid-url url-local "$PLAN" 2

# --- serve: every node asks its own ranks ------------------------------------
SOCK=$T_TMP/sock
READY=$T_TMP/ready
serve_start "$T_TMP/serve" cl_mpi $NP serve "$URL" --plan "$PLAN" \
  --socket-dir "$SOCK" --ready-file "$READY" --quiet
t_serve_ready "serve from the store: ready" "$READY"
bad=""
for r in $(seq 0 $((NP - 1))); do
  cl_exec $((r / 2)) "$TPLOAD" status "$SOCK/rank$r.sock" --health \
    >/dev/null 2>"$T_TMP/h.err" || bad="$bad rank $r: $(cat "$T_TMP/h.err");"
done
if [ -z "$bad" ]; then t_ok "serve: --health of every rank, asked on its node"
else t_fail "serve: --health on every node" "$bad"; fi
for k in $(seq 0 $((K - 1))); do
  cl_exec "$k" "$TPLOAD" status "$SOCK/rank$((2 * k + 1)).sock" --json \
    >"$T_TMP/status$k.json" 2>"$T_TMP/err"
  t_oracle "serve: status asked on node $k = numpy oracle" check-report \
    "$MODEL" "$PLAN" $NP "$T_TMP/status$k.json"
done
cl_exec 1 "$TPLOAD" dump "$SOCK/rank3.sock" --out "$T_TMP/rank3.st" \
  >/dev/null 2>&1
t_check "serve: rank 3's dump, on node 1 = its preshard file" \
  cmp "$T_TMP/rank3.st" "$T_TMP/ps-local/rank3.safetensors"
t_exit "serve: --shutdown asked on node 0" 0 \
  cl_exec 0 "$TPLOAD" status "$SOCK/rank0.sock" --shutdown
serve_end
if [ "$SERVE_RC" = 0 ]; then t_ok "serve: every node's ranks end, exit 0"
else t_fail "serve: exit 0" "exit $SERVE_RC" \
  "$(messages "$T_TMP/serve.err" | head -c 1500)"; fi
left="$(ls -d "$SOCK"/* "$READY" 2>/dev/null) $(cl_left)"
if [ -z "${left// /}" ]; then t_ok "serve: no socket, ready file or process left"
else t_fail "serve: nothing left" "$left"; fi
t_done
