# cluster_lib.sh - a small cluster built on this machine, for the tests
# that cross real links (tests/mpi/cluster*.sh) and for scripts/cluster.sh:
# K node network namespaces, each with its own TCP stack and, through the
# rsh agent, its own hostname (a UTS namespace) and a private /etc/hosts
# naming the K nodes, so Open MPI sees K distinct nodes and uses shared
# memory only inside one; one veth per node into a bridge namespace, shaped
# by tbf in both directions (netem delay/loss too where the kernel has
# it); optionally a store namespace running nginx over a directory.
#
# Containment: addresses only from 198.18.0.0/15 (RFC 2544's benchmarking
# range), assigned only inside namespaces made here; no default route;
# nothing bridged to a real interface.  Traffic never leaves them.
# tcp_retries2 and tcp_syn_retries are lowered inside them only, so a cut
# link fails in seconds instead of the default 15 minutes.
#
# Names are "$CL_PREFIX-$CL_ID-<node>": a test's CL_ID is its pid, and its
# namespaces (and every process in them) go at exit and on INT, TERM and
# HUP; cl_up first sweeps namespaces a killed earlier run left (numeric
# id, pid gone).  scripts/cluster.sh uses a non-numeric id, never swept.
#
# Sourced after lib.sh (tests) or on its own (scripts/cluster.sh) with
# CL_DIR set: the directory for the agent, hostfile, hosts and logs.
# shellcheck shell=bash

CL_PREFIX=${CL_PREFIX:-tplc}
CL_ID=${CL_ID:-$$}
CL_NET=198.18.0          # a /24 of 198.18.0.0/15
CL_IF=tpl0               # every node's interface into the bridge
CL_STORE_ADDR=$CL_NET.100
CL_STORE_PORT=8080
CL_RETRIES2=${CL_RETRIES2:-4}  # ~3 s of retransmissions, then the peer is gone
CL_K=0
CL_MADE=""               # namespaces made by this run

# cl_ns NODE: the namespace of NODE (n0.., br, st).
cl_ns() { echo "$CL_PREFIX-$CL_ID-$1"; }
# cl_host NODE: NODE's hostname inside its UTS namespace.
cl_host() { echo "$CL_PREFIX$CL_ID-$1"; }

# cl_unable: prints why no cluster can be made here (and returns 0), or
# returns 1 when one can.
cl_unable() {
  local t why
  if [ "$(id -u)" -ne 0 ]; then
    echo "not root: network namespaces need CAP_SYS_ADMIN"; return 0
  fi
  for t in ip tc unshare; do
    command -v "$t" >/dev/null 2>&1 || { echo "no $t on PATH"; return 0; }
  done
  t=$(cl_ns probe)
  if ! ip netns add "$t" 2>/dev/null; then
    echo "ip netns add fails here (no network namespaces)"; return 0
  fi
  why=$(cl_probe "$t")
  ip netns delete "$t"
  [ -n "$why" ] && { echo "$why"; return 0; }
  return 1
}

# cl_probe NS: prints what the cluster needs that namespace NS lacks:
# veth pairs, a bridge, tbf, a UTS namespace with a private bind mount.
cl_probe() {
  ip -n "$1" link add cla type veth peer name clb 2>/dev/null ||
    { echo "no veth pairs (CONFIG_VETH)"; return; }
  ip -n "$1" link add clbr type bridge 2>/dev/null ||
    { echo "no bridges (CONFIG_BRIDGE)"; return; }
  tc -n "$1" qdisc add dev cla root tbf rate 1mbit burst 32kb \
    latency 50ms 2>/dev/null || { echo "no tbf qdisc (CONFIG_NET_SCH_TBF)"; return; }
  ip netns exec "$1" unshare --uts /bin/sh -c \
    'hostname clprobe && mount --bind /etc/hosts /etc/hosts' 2>/dev/null ||
    echo "unshare --uts with a bind mount fails inside a namespace"
}

# cl_ns_remove NS: ends every process inside NS, then removes it.
cl_ns_remove() {
  local p
  for p in $(ip netns pids "$1" 2>/dev/null); do kill -KILL "$p" 2>/dev/null
  done
  ip netns delete "$1" 2>/dev/null
}

# cl_running PID: PID is a live process (not gone, not a zombie).
cl_running() {
  local st
  st=$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null)
  [ -n "$st" ] && [ "$st" != Z ]
}

# cl_sweep: removes the namespaces of earlier runs killed before their
# traps ran (a numeric id whose process is gone).
cl_sweep() {
  local ns id
  for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
    case $ns in "$CL_PREFIX"-*-*) ;; *) continue ;; esac
    id=${ns#"$CL_PREFIX"-}
    id=${id%%-*}
    case $id in '' | *[!0-9]*) continue ;; esac
    [ "$id" = "$CL_ID" ] && continue
    cl_running "$id" && continue
    cl_ns_remove "$ns"
    echo "# swept $ns (left by run $id, which is gone)"
  done
}

# cl_down: removes every namespace this run made, with its processes.
cl_down() {
  local ns
  for ns in $CL_MADE; do cl_ns_remove "$ns"; done
  CL_MADE=""
}

# cl_traps: cl_down (and the test's own cleanup: its background pids and
# $T_TMP) at exit and on INT, TERM and HUP.
cl_cleanup() {
  local p
  cl_down
  for p in ${PIDS:-} ${HTTP_PIDS:-}; do kill -KILL "$p" 2>/dev/null; done
  [ -n "${T_TMP:-}" ] && rm -rf "$T_TMP"
}
cl_traps() {
  trap cl_cleanup EXIT
  trap 'cl_cleanup; trap - EXIT; exit 130' INT
  trap 'cl_cleanup; trap - EXIT; exit 143' TERM
  trap 'cl_cleanup; trap - EXIT; exit 129' HUP
}

# cl_test_begin: what a test script does first: one SKIP line (and exit
# 0) where no cluster can be made, else CL_DIR in $T_TMP and the traps.
cl_test_begin() {
  local why
  if why=$(cl_unable); then echo "1..0 # SKIP no cluster: $why"; exit 0; fi
  CL_DIR=$T_TMP/cluster
  cl_traps
}

# cl_ns_add NODE: a new namespace for NODE, loopback up, TCP's retries low.
cl_ns_add() {
  local ns
  ns=$(cl_ns "$1")
  ip netns add "$ns" || return 1
  CL_MADE="$CL_MADE $ns"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2="$CL_RETRIES2" \
    net.ipv4.tcp_syn_retries=2
}

# cl_netem_probe: sets CL_NETEM=1 when this kernel has netem (tried on
# the bridge namespace's loopback), else 0.
cl_netem_probe() {
  local br
  br=$(cl_ns br)
  if tc -n "$br" qdisc add dev lo root netem delay 1ms 2>/dev/null; then
    tc -n "$br" qdisc del dev lo root
    CL_NETEM=1
  else
    CL_NETEM=0
  fi
}

# cl_shape NS DEV RATE: DEV's egress at RATE (tbf), behind netem's
# CL_DELAY / CL_LOSS where the kernel has netem and either is set.
cl_shape() {
  local parent="root"
  if [ "$CL_NETEM" = 1 ] && [ -n "${CL_DELAY:-}${CL_LOSS:-}" ]; then
    tc -n "$1" qdisc add dev "$2" root handle 1: netem \
      ${CL_DELAY:+delay "$CL_DELAY"} ${CL_LOSS:+loss "$CL_LOSS"} || return 1
    parent="parent 1: handle 2:"
  fi
  # shellcheck disable=SC2086
  tc -n "$1" qdisc add dev "$2" $parent tbf rate "$3" burst 256kb \
    latency 200ms
}

# cl_link NODE ADDR RATE: NODE's namespace with one veth (CL_IF, ADDR/24)
# into the bridge, both directions shaped to RATE; no default route.
cl_link() {
  local ns br
  ns=$(cl_ns "$1")
  br=$(cl_ns br)
  cl_ns_add "$1" || return 1
  ip -n "$br" link add "$1" type veth peer name "$CL_IF" netns "$ns" &&
    ip -n "$br" link set "$1" master br0 up &&
    ip -n "$ns" addr add "$2/24" dev "$CL_IF" &&
    ip -n "$ns" link set "$CL_IF" up &&
    cl_shape "$ns" "$CL_IF" "$3" && cl_shape "$br" "$1" "$3"
}

# cl_links_line: one comment line saying how the links are shaped.
cl_links_line() {
  local extra
  if [ "$CL_NETEM" = 1 ]; then
    extra="netem: ${CL_DELAY:+delay $CL_DELAY }${CL_LOSS:+loss $CL_LOSS}"
    [ -n "${CL_DELAY:-}${CL_LOSS:-}" ] || extra="netem available, unused"
  else
    extra="no delay or loss: this kernel has no netem (CONFIG_NET_SCH_NETEM unset)"
  fi
  echo "# cluster: $CL_K nodes, links tbf rate $CL_RATE each way; $extra"
}

# cl_up K RATE: the bridge and K nodes n0..n{K-1} at $CL_NET.10+i, each
# link at RATE (tc's units: 400mbit); CL_DIR gets hosts, hostfile (2 slots
# a node, CL_SLOTS to change), nodes and the rsh agent.  Returns non-zero
# when a step fails.
cl_up() {
  local k=$1 i br
  CL_K=$k
  CL_RATE=$2
  cl_sweep
  mkdir -p "$CL_DIR"
  br=$(cl_ns br)
  cl_ns_add br || return 1
  ip -n "$br" link add br0 type bridge && ip -n "$br" link set br0 up ||
    return 1
  cl_netem_probe
  echo "127.0.0.1 localhost" >"$CL_DIR/hosts"
  : >"$CL_DIR/hostfile"
  : >"$CL_DIR/nodes"
  for i in $(seq 0 $((k - 1))); do
    cl_link "n$i" "$CL_NET.$((10 + i))" "$2" || return 1
    echo "$CL_NET.$((10 + i)) $(cl_host "n$i")" >>"$CL_DIR/hosts"
    echo "$(cl_host "n$i") slots=${CL_SLOTS:-2}" >>"$CL_DIR/hostfile"
    echo "$(cl_host "n$i") $(cl_ns "n$i")" >>"$CL_DIR/nodes"
  done
  echo "$CL_STORE_ADDR $(cl_host st)" >>"$CL_DIR/hosts"
  cl_agent
  cl_mpi_opts
  wait_until cl_links_up
}

# cl_oper NS DEV: DEV's operational state in NS ("up" once the kernel has
# attached its qdisc; before that, a packet sent is dropped).
cl_oper() {
  ip netns exec "$1" cat "/sys/class/net/$2/operstate" 2>/dev/null
}

# cl_links_up: every node's link is operationally up at both ends, so the
# first connection (mpirun's daemons calling back) is not lost to a link
# still coming up.
cl_links_up() {
  local i br
  br=$(cl_ns br)
  [ "$(cl_oper "$br" br0)" = up ] || return 1
  for i in $(seq 0 $((CL_K - 1))); do
    [ "$(cl_oper "$br" "n$i")" = up ] &&
      [ "$(cl_oper "$(cl_ns "n$i")" "$CL_IF")" = up ] || return 1
  done
}

# cl_mpi_opts: CL_MPI, mpirun's options for the cluster: its hostfile and
# agent, every daemon started from mpirun (no tree), TCP between nodes
# and shared memory inside one, both bound to the node's link.
cl_mpi_opts() {
  CL_MPI="--hostfile $CL_DIR/hostfile --mca plm_rsh_agent $CL_DIR/agent
    --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self,vader
    --mca btl_tcp_if_include $CL_IF --mca oob_tcp_if_include $CL_IF"
}

# cl_enter NS HOST CMD...: CMD in namespace NS with hostname HOST and the
# cluster's /etc/hosts (ip netns exec's mount namespace keeps the bind
# private; it also shows NS's own /sys/class/net).
cl_enter() {
  local ns=$1 host=$2; shift 2
  ip netns exec "$ns" unshare --uts /bin/sh -c \
    'hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"' \
    cl-enter "$host" "$CL_DIR/hosts" "$@"
}

# cl_exec NODE CMD...: CMD on NODE (n0.., st, or a number for n<number>).
cl_exec() {
  local node=$1; shift
  case $node in *[!0-9]*) ;; *) node=n$node ;; esac
  cl_enter "$(cl_ns "$node")" "$(cl_host "$node")" "$@"
}

# cl_agent: $CL_DIR/agent, Open MPI's rsh agent: "agent [options] HOST
# COMMAND..." runs COMMAND on HOST's node, as ssh would, and logs HOST.
cl_agent() {
  cat >"$CL_DIR/agent" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
host=\$1; shift
echo "\$host" >>"$CL_DIR/agent.log"
ns=\$(awk -v h="\$host" '\$1 == h { print \$2 }' "$CL_DIR/nodes")
[ -n "\$ns" ] || { echo "agent: no node \$host" >&2; exit 255; }
exec ip netns exec "\$ns" unshare --uts /bin/sh -c \\
  'hostname "\$1" && mount --bind "\$2" /etc/hosts && shift 2 && exec /bin/sh -c "\$*"' \\
  agent "\$host" "$CL_DIR/hosts" "\$@"
EOF
  chmod +x "$CL_DIR/agent"
}

# cl_mpi NP ARGS...: tpload ARGS under mpirun on node 0 over the cluster,
# NP ranks placed in block order (slots) unless ARGS' mpirun options, in
# CL_MPI_EXTRA, say otherwise.
cl_mpi() {
  local np=$1; shift
  # shellcheck disable=SC2086
  cl_exec n0 "$MPIRUN" $CL_MPI ${CL_MPI_EXTRA:-} -np "$np" "$TPLOAD" "$@"
}

# cl_store_up ROOT RATE: the store namespace (st, $CL_STORE_ADDR) on its
# own link at RATE, nginx (tests/lib/http_lib.sh's config) serving ROOT on
# port CL_STORE_PORT; sets CL_URL.  Waits until node 0 can connect.
cl_store_up() {
  local dir=$CL_DIR/store
  cl_link st "$CL_STORE_ADDR" "$2" || return 1
  mkdir -p "$dir"
  NGX_HOST=$CL_STORE_ADDR nginx_conf "$dir" "$1" "$CL_STORE_PORT" "" "" \
    >"$dir/nginx.conf"
  cl_exec st "$NGINX" -e "$dir/error.log" -p "$dir" -c "$dir/nginx.conf" \
    >"$dir/start.out" 2>&1 &
  CL_URL="http://$CL_STORE_ADDR:$CL_STORE_PORT"
  wait_until cl_reaches n0 "$CL_STORE_ADDR" "$CL_STORE_PORT"
}

# cl_reaches NODE ADDR PORT: NODE can open a TCP connection to ADDR:PORT.
cl_reaches() {
  ip netns exec "$(cl_ns "$1")" bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null
}

# cl_bytes NODE: "RX TX", the bytes NODE's link interface has received and
# sent (/sys/class/net/CL_IF/statistics, read inside NODE's namespace).
cl_bytes() {
  ip netns exec "$(cl_ns "$1")" sh -c \
    'cat /sys/class/net/$1/statistics/rx_bytes \
         /sys/class/net/$1/statistics/tx_bytes' cl "$CL_IF" | paste -sd' '
}

# cl_bytes_all FILE: one line "NODE RX TX" per node (and the store when it
# is up) into FILE.
cl_bytes_all() {
  local i
  : >"$1"
  for i in $(seq 0 $((CL_K - 1))); do echo "n$i $(cl_bytes "n$i")" >>"$1"; done
  case " $CL_MADE " in
  *" $(cl_ns st) "*) echo "st $(cl_bytes st)" >>"$1" ;;
  esac
}

# cl_job NAME ARGS...: tpload ARGS on the cluster's $NP ranks (cl_mpi),
# stdout and stderr in $T_TMP/NAME.out and .err, the links' counters
# before and after in NAME.b0 / NAME.b1; one TAP line for exit 0 (a
# test's helper: lib.sh's t_ok, t_fail and messages).
cl_job() {
  local name=$1 rc; shift
  cl_bytes_all "$T_TMP/$name.b0"
  cl_mpi "$NP" "$@" >"$T_TMP/$name.out" 2>"$T_TMP/$name.err"
  rc=$?
  cl_bytes_all "$T_TMP/$name.b1"
  if [ $rc -eq 0 ]; then t_ok "$name: exits 0"
  else t_fail "$name: exits 0" "exit $rc" \
    "$(messages "$T_TMP/$name.err" | head -c 1500)"; fi
}

# cl_cut NODE / cl_restore NODE: NODE's link down / up at the bridge (the
# cable pulled at the switch; NODE's side loses its carrier).
cl_cut() { ip -n "$(cl_ns br)" link set "$1" down; }
cl_restore() { ip -n "$(cl_ns br)" link set "$1" up; }

# cl_rate NODE RATE: NODE's link into the node (the bridge's side) now
# shaped to RATE, as cl_shape made it (a link slowed mid-job).
cl_rate() {
  local parent="root"
  [ "$CL_NETEM" = 1 ] && [ -n "${CL_DELAY:-}${CL_LOSS:-}" ] &&
    parent="parent 1: handle 2:"
  # shellcheck disable=SC2086
  tc -n "$(cl_ns br)" qdisc change dev "$1" $parent tbf rate "$2" \
    burst 256kb latency 200ms
}

# cl_rep_plan PLAN OUT: PLAN with the oracle model's big.cols replicated
# (every rank holds it) into OUT, by the numpy oracle's Python.
cl_rep_plan() {
  "$ORACLE" - "$1" "$2" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["rules"] = [{"match": "big.cols", "replicate": True}] + \
    [r for r in p["rules"] if r["match"] != "big.cols"]
json.dump(p, open(sys.argv[2], "w"))
EOF
}

# cl_retrans: TCP segments retransmitted so far, every node together
# (each namespace has its own counters).
cl_retrans() {
  local i n=0
  for i in $(seq 0 $((CL_K - 1))); do
    n=$((n + $(ip netns exec "$(cl_ns "n$i")" awk '$1 == "Tcp:" && \
      $13 ~ /^[0-9]+$/ { print $13 }' /proc/net/snmp)))
  done
  echo "$n"
}

# cl_ranks NODE: the pids of NODE's tpload ranks (processes in its
# namespace with an Open MPI rank in their environment).
cl_ranks() {
  local p
  for p in $(ip netns pids "$(cl_ns "$1")" 2>/dev/null); do
    tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" |
      grep -q '^OMPI_COMM_WORLD_RANK=' && echo "$p"
  done
}

# cl_empty: no process is left inside any node's namespace.
cl_empty() { [ -z "$(cl_left)" ]; }

# cl_left: the processes still inside any node's namespace.
cl_left() {
  local i
  for i in $(seq 0 $((CL_K - 1))); do
    ip netns pids "$(cl_ns "n$i")" 2>/dev/null
  done
}
