#!/bin/sh
# demo.sh - builds tpload and runs it end to end on a small synthetic
# Llama-shaped checkpoint (no download): inspect, plan, a 2-rank load,
# preshard + verify, then serve, status, dump and shutdown.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$("$top/scripts/build.sh" plain)
T="$dir/tpload"
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
MPIRUN="mpirun --oversubscribe -np 2"
work=$(mktemp -d "${TMPDIR:-/tmp}/tpload-demo.XXXXXX")
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
step() { printf '\n== %s\n' "$*"; }

step "tpload synth --arch llama --out MODEL"
"$T" synth --arch llama --out "$work/model" --layers 2
step "tpload inspect MODEL --shards 2 (first lines)"
"$T" inspect "$work/model" --shards 2 | head -n 8
step "mpirun -np 2 tpload load MODEL"
$MPIRUN "$T" load "$work/model"
step "mpirun -np 2 tpload preshard MODEL --out SHARDS; tpload verify"
$MPIRUN "$T" preshard "$work/model" --out "$work/shards"
ls -l "$work/shards"
"$T" verify "$work/model" "$work/shards"
step "mpirun -np 2 tpload serve MODEL --socket-dir SOCK (background)"
$MPIRUN "$T" serve "$work/model" --socket-dir "$work/sock" \
  --ready-file "$work/ready" --quiet &
server=$!
i=0
while [ ! -f "$work/ready" ]; do
  i=$((i + 1))
  [ "$i" -lt 300 ] || { echo "demo: serve did not become ready" >&2; exit 1; }
  sleep 0.1
done
step "tpload status SOCK/rank0.sock"
"$T" status "$work/sock/rank0.sock"
step "tpload dump SOCK/rank1.sock --out rank1.safetensors (same bytes as preshard)"
"$T" dump "$work/sock/rank1.sock" --out "$work/rank1.safetensors"
cmp "$work/rank1.safetensors" "$work/shards/rank1.safetensors" && echo identical
step "tpload status SOCK/rank0.sock --shutdown"
"$T" status "$work/sock/rank0.sock" --shutdown
wait "$server"
server=
echo
echo "demo: done"
