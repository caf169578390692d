#!/bin/sh
# multinode.sh - two "nodes" on one machine: mpirun --host
# 127.0.0.1:1,127.0.0.2:1 starts rank 1 under an Open MPI daemon launched
# through this test's own rsh agent (as ssh would on a real second node),
# and --mca btl tcp,self makes every byte cross TCP, as between nodes.
# Checked: the agent really launched the second node's daemon; `load`
# (report vs the numpy oracle) and `preshard` (files vs the oracle, with
# the default reading and with --read local, whose heartbeats cross TCP) over
# that path; `serve`: the ready file (on rank 0's node only), each node
# probing its own rank's socket (--health), the job's status asked through
# rank 1's socket, rank 1's dump = its preshard file, and --shutdown on
# rank 0 ending both nodes' ranks with exit 0 and no socket left.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"

AGENT=$T_TMP/rsh-agent
cat >"$AGENT" <<EOF
#!/bin/sh
# rsh agent: "agent [options] HOST COMMAND..." runs COMMAND here, as
# ssh HOST COMMAND would on the other node, and logs HOST.
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
echo "\$1" >>"$T_TMP/agent.log"
shift
exec /bin/sh -c "\$*"
EOF
chmod +x "$AGENT"

# mpirun's options for rank 0 on 127.0.0.1 and rank 1 on 127.0.0.2, over
# TCP (split into words on purpose; $T_TMP holds no blank).
TWO_NODES="--host 127.0.0.1:1,127.0.0.2:1 --mca plm_rsh_agent $AGENT
  --mca btl tcp,self -np 2"

gen m --seed 41 --layout index --big-mib 3
MODEL=$M/m
PLAN=$MODEL/plan.json

# shellcheck disable=SC2086
"$MPIRUN" $TWO_NODES "$TPLOAD" load "$MODEL" --plan "$PLAN" --json --quiet \
  >"$T_TMP/load.json" 2>"$T_TMP/load.err"
rc=$?
if [ "$rc" -eq 0 ]; then t_ok "load on two nodes over TCP exits 0"
else t_fail "load on two nodes exits 0" "exit $rc" \
  "$(messages "$T_TMP/load.err" | head -c 1500)"; fi
if grep -qx 127.0.0.2 "$T_TMP/agent.log" 2>/dev/null; then
  t_ok "the second node's daemon was started through the rsh agent"
else t_fail "the rsh agent started 127.0.0.2" "$(cat "$T_TMP/agent.log")"
fi
# t_oracle NAME ARGS...: tests/oracle.py ARGS succeeds.
t_oracle() {
  local name=$1; shift
  if "$ORACLE" "$O" "$@" >"$T_TMP/oout" 2>"$T_TMP/oerr"; then t_ok "$name"
  else t_fail "$name" "$(head -c 2000 "$T_TMP/oerr")"; fi
}
t_oracle "load's report = numpy oracle" check-report "$MODEL" "$PLAN" 2 \
  "$T_TMP/load.json"

# shellcheck disable=SC2086
t_exit "preshard on two nodes exits 0" 0 "$MPIRUN" $TWO_NODES "$TPLOAD" \
  preshard "$MODEL" --plan "$PLAN" --out "$T_TMP/ps" --quiet
t_oracle "preshard's files = numpy oracle" check-preshard "$MODEL" "$PLAN" 2 \
  "$T_TMP/ps"
# --read local over TCP: each node reads its own slices (the nodes share
# this machine's files); the heartbeats and the agreements cross TCP.
# shellcheck disable=SC2086
t_exit "preshard --read local on two nodes exits 0" 0 "$MPIRUN" $TWO_NODES \
  "$TPLOAD" preshard "$MODEL" --plan "$PLAN" --out "$T_TMP/psl" --read local \
  --quiet
t_oracle "preshard --read local's files = numpy oracle" check-preshard \
  "$MODEL" "$PLAN" 2 "$T_TMP/psl"

SOCK=$T_TMP/sock
READY=$T_TMP/ready
# shellcheck disable=SC2086
serve_start "$T_TMP/serve" "$MPIRUN" $TWO_NODES "$TPLOAD" serve "$MODEL" \
  --plan "$PLAN" --socket-dir "$SOCK" --ready-file "$READY" --quiet
t_serve_ready "serve on two nodes: the ready file appears on rank 0's node" \
  "$READY"
for r in 0 1; do
  t_exit "node of rank $r: status rank$r.sock --health exits 0" 0 \
    "$TPLOAD" status "$SOCK/rank$r.sock" --health
done
t_exit "status --json through rank 1's socket (answered by rank 0)" 0 \
  "$TPLOAD" status "$SOCK/rank1.sock" --json
cp "$T_TMP/out" "$T_TMP/status.json"
t_oracle "serve's status = numpy oracle" check-report "$MODEL" "$PLAN" 2 \
  "$T_TMP/status.json"
t_exit "dump of rank 1 exits 0" 0 "$TPLOAD" dump "$SOCK/rank1.sock" \
  --out "$T_TMP/rank1.safetensors"
t_check "rank 1's dump is byte for byte its preshard file" \
  cmp "$T_TMP/rank1.safetensors" "$T_TMP/ps/rank1.safetensors"
t_exit "status --shutdown on rank 0" 0 \
  "$TPLOAD" status "$SOCK/rank0.sock" --shutdown
serve_end
if [ "$SERVE_RC" = 0 ]; then t_ok "both nodes' ranks end, mpirun exits 0"
else t_fail "mpirun exits 0" "exit: $SERVE_RC" \
  "$(messages "$T_TMP/serve.err" | head -c 1500)"; fi
left=$(ls -d "$SOCK"/* "$READY" 2>/dev/null)
if [ -z "$left" ]; then t_ok "no socket and no ready file left"
else t_fail "no socket and no ready file left" "$left"; fi
t_done
