#!/bin/bash
# cluster.sh - the tests' cluster (tests/lib/cluster_lib.sh), by hand:
#
#   scripts/cluster.sh up [K] [RATE] [STORE_DIR]   K nodes (3), links at
#       RATE (400mbit), and a store namespace serving STORE_DIR with nginx
#       at http://198.18.0.100:8080/ when given (its link 4 x RATE);
#       CL_DELAY / CL_LOSS add netem delay and loss where the kernel has it
#   scripts/cluster.sh exec NODE CMD...            CMD on NODE (0.., st)
#   scripts/cluster.sh mpirun NP ARGS...           tpload ARGS on NP ranks,
#       mpirun on node 0 (TPLOAD: the binary, ./build/tpload by default)
#   scripts/cluster.sh bytes                       each link's rx/tx bytes
#   scripts/cluster.sh cut|restore NODE            NODE's link (n1, st) down / up
#   scripts/cluster.sh down                        removes all of it
#
# Must run as root.  Its namespaces are tplc-hand-*, kept until `down`
# (never swept by the tests); its files are in CL_DIR
# (/tmp/tpload-cluster-hand).  Traffic stays inside them: 198.18.0.0/15
# only, no default route, nothing bridged to a real interface.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
CL_ID=hand
CL_DIR=${CL_DIR:-/tmp/tpload-cluster-hand}
MPIRUN=${MPIRUN:-mpirun}
TPLOAD=${TPLOAD:-$here/build/tpload}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T_TMP=""
# What cluster_lib.sh needs of tests/lib/lib.sh and http_lib.sh.
wait_until() {
  local i
  for i in $(seq 600); do "$@" && return 0; sleep 0.05; done
  return 1
}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
# shellcheck source=../tests/lib/cluster_lib.sh
. "$here/tests/lib/cluster_lib.sh"
# nginx_conf alone: sourcing http_lib.sh would set a test's traps.
eval "$(sed -n '/^nginx_conf() {/,/^CONF$/p' "$here/tests/lib/http_lib.sh"
  echo '}')"

# state: what `up` made, for the later commands (one line: K RATE STORE).
state() {
  [ -r "$CL_DIR/state" ] || { echo "cluster.sh: no cluster is up" >&2; exit 1; }
  read -r CL_K CL_RATE store <"$CL_DIR/state"
  CL_MADE="$(cl_ns br) $(seq -f "$(cl_ns n%g)" 0 $((CL_K - 1)))"
  [ "$store" = - ] || CL_MADE="$CL_MADE $(cl_ns st)"
  cl_mpi_opts
}

up() {
  local k=${1:-3} rate=${2:-400mbit} store=${3:--} why
  if why=$(cl_unable); then echo "cluster.sh: cannot: $why" >&2; exit 1; fi
  [ ! -e "$CL_DIR/state" ] ||
    { echo "cluster.sh: one is up already (down first)" >&2; exit 1; }
  cl_up "$k" "$rate" || { cl_down; exit 1; }
  if [ "$store" != - ]; then
    rate_n=${rate%%[a-z]*}
    cl_store_up "$(cd "$store" && pwd)" "$((rate_n * 4))${rate#"$rate_n"}" ||
      { cl_down; echo "cluster.sh: the store did not start" >&2; exit 1; }
    echo "store: $CL_URL/ (namespace $(cl_ns st))"
  fi
  echo "$k $rate $store" >"$CL_DIR/state"
  cl_links_line | sed 's/^# //'
  echo "nodes: $(seq -s ' ' -f "$(cl_host n%g)" 0 $((k - 1))) (hostfile $CL_DIR/hostfile)"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
up) up "$@" ;;
down)
  state
  cl_down
  rm -rf "$CL_DIR"
  ;;
exec) state; cl_exec "$@" ;;
mpirun) state; cl_mpi "$@" ;;
bytes) state; cl_bytes_all /dev/stdout ;;
cut) state; cl_cut "$1" ;;
restore) state; cl_restore "$1" ;;
*)
  sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 64
  ;;
esac
