#!/bin/bash
# cluster4.sh - 4 nodes x 2 ranks over 400 Mbit/s links (the cluster of
# tests/lib/cluster_lib.sh, no store): `preshard` from rank 0's disk of a
# 4-layer synth llama (~20 MiB) at TP 8 across the nodes and at TP 2
# inside a node x PP 4 across the nodes (--tp 2 --pp 4: node k holds
# stage k, docs/TOPOLOGY.md) and TP 2 x DP 4 (a replica a node, each
# relayed to the next), every rank file byte-exact against the
# numpy oracle (oracle.py check-preshard / check-grid), and each node's
# link counters (/sys/class/net) against the least bytes of the
# topology in block order (tests/oracle/cluster_grid_bytes.py, checked by
# cluster_bytes.py's `mpi` mode: every node takes in its distinct bytes,
# at most 1.03 x them + 256 KiB, node 0 sends at least what the others
# need).  The grid oracle agrees with cluster_bytes.py where both apply
# (PP 1), and a node 2 taking in half its stage again fails the check.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/cluster_lib.sh"

cl_test_begin
K=4
NP=8
cl_up $K 400mbit >"$T_TMP/up.out" ||
  { echo "Bail out! the cluster did not come up"; exit 99; }
cl_links_line
CB="$TESTS_SRCDIR/oracle/cluster_bytes.py"
CG="$TESTS_SRCDIR/oracle/cluster_grid_bytes.py"

MODEL=$M/l4
PLAN=$T_TMP/plan.json
llama_grid_plan "$PLAN"
"$TPLOAD" synth --arch llama --out "$MODEL" --layers 4 --hidden 512 \
  --heads 8 --vocab 1024 --seed 3804 >/dev/null 2>&1 ||
  { echo "Bail out! tpload synth failed"; exit 99; }

# The two oracles agree at PP 1 (TP 8 in block order), so the grid's
# figures mean what cluster_bytes.py's do.
"$ORACLE" "$CB" "$MODEL" "$PLAN" $NP $NP $K >"$T_TMP/tp8.cb"
"$ORACLE" "$CG" "$MODEL" "$PLAN" $NP $NP 1 4 $K >"$T_TMP/tp8.want"
t_check "cluster_grid_bytes.py at PP 1 = cluster_bytes.py" \
  cmp "$T_TMP/tp8.cb" "$T_TMP/tp8.want"
"$ORACLE" "$CG" "$MODEL" "$PLAN" $NP 2 4 4 $K >"$T_TMP/pp4.want"
"$ORACLE" "$CG" "$MODEL" "$PLAN" $NP 2 1 4 $K >"$T_TMP/dp4.want"

# links NAME: job NAME's link counters against NAME.want (mode mpi).
links() {
  if "$ORACLE" "$CB" check "$1" mpi "$T_TMP/$1".{b0,b1,want} \
    >"$T_TMP/$1.links" 2>&1
  then t_ok "$1: bytes per link = the topology's least (block order)"
  else t_fail "$1: bytes per link = the topology's least"; fi
  cat "$T_TMP/$1.links"
}

cl_job tp8 preshard "$MODEL" --plan "$PLAN" --out "$T_TMP/tp8"
if grep -q "preshard: 4 nodes, bytes in/out: $(cl_host n0) (2 ranks)" \
  "$T_TMP/tp8.err"
then t_ok "tp8: 4 nodes of 2 ranks"
else t_fail "tp8: 4 nodes of 2 ranks" "$(head -c 1500 "$T_TMP/tp8.err")"; fi
t_oracle "tp8: preshard files = numpy oracle" check-preshard \
  "$MODEL" "$PLAN" $NP "$T_TMP/tp8"
links tp8

cl_job pp4 preshard "$MODEL" --plan "$PLAN" --tp 2 --pp 4 --out "$T_TMP/pp4"
t_oracle "pp4 (TP 2 x PP 4): every rank file = numpy oracle" check-grid \
  "$MODEL" "$PLAN" $NP 2 4 4 "$T_TMP/pp4"
links pp4

cl_job dp4 preshard "$MODEL" --plan "$PLAN" --tp 2 --out "$T_TMP/dp4"
t_oracle "dp4 (TP 2 x DP 4): every replica's files = numpy oracle" \
  check-grid "$MODEL" "$PLAN" $NP 2 1 4 "$T_TMP/dp4"
links dp4

# The check can fail: node 2 taking in half its stage a second time.
extra=$("$ORACLE" -c 'import json, sys
print(json.load(open(sys.argv[1]))["unique"][2] // 2)' "$T_TMP/pp4.want")
awk -v x="$extra" '$1 == "n2" { $2 += x } { print }' "$T_TMP/pp4.b1" \
  >"$T_TMP/doctored.b1"
if "$ORACLE" "$CB" check doctored mpi "$T_TMP/pp4.b0" "$T_TMP/doctored.b1" \
  "$T_TMP/pp4.want" >"$T_TMP/doctored.out" 2>&1
then t_fail "a node taking in half its stage again fails the check" \
  "$(cat "$T_TMP/doctored.out")"
elif grep -q "node 2 took in .* its distinct bytes" "$T_TMP/doctored.out"
then t_ok "a node taking in half its stage again fails the check"
else t_fail "a doctored node 2: the reason" "$(cat "$T_TMP/doctored.out")"
fi
t_done
