# http_lib.sh - serving test models over HTTP, sourced after lib.sh: nginx
# (Debian's) on a free loopback port with its own config, logs and temp
# paths in the test's temp dir, and the fault server of
# oracle/http_faults.py for what nginx cannot do.  Both are waited for
# until they accept, never by sleeping, and stopped when the test ends.
# shellcheck shell=bash
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
if [ ! -x "$NGINX" ]; then
  echo "1..0 # SKIP nginx not found (scripts/install-deps.sh installs it)"
  exit 0
fi
HTTP_PIDS=""
trap 'for p in $HTTP_PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$T_TMP"' EXIT

free_port() {
  "$ORACLE" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# accepts PORT: something accepts connections on 127.0.0.1:PORT.
accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# up_or_gone PORT PID: the port accepts, or the server has exited.
up_or_gone() { accepts "$1" || ! alive "$2"; }

# nginx_conf DIR ROOT PORT LISTEN_OPTS SERVER_EXTRA: the config file, listening
# on NGX_HOST (127.0.0.1 unless set: cluster_lib.sh's store namespace).
nginx_conf() {
  local user=""
  [ "$(id -u)" -eq 0 ] && user="user root;"
  cat <<CONF
$user
daemon off;
worker_processes 1;
error_log $1/error.log;
pid $1/nginx.pid;
events { worker_connections 256; }
http {
  log_format t '\$request_method \$uri \$status "\$http_range" \$body_bytes_sent \$connection \$connection_requests \$server_protocol \$bytes_sent';
  access_log $1/access.log t;
  client_body_temp_path $1/tmp-body;
  proxy_temp_path $1/tmp-proxy;
  fastcgi_temp_path $1/tmp-fastcgi;
  uwsgi_temp_path $1/tmp-uwsgi;
  scgi_temp_path $1/tmp-scgi;
  default_type application/octet-stream;
  keepalive_requests 10000;
  server {
    listen ${NGX_HOST:-127.0.0.1}:$3 $4;
    root $2;
    $5
  }
}
CONF
}

# nginx_start NAME ROOT LISTEN_OPTS SERVER_EXTRA: nginx in $T_TMP/NAME
# serving ROOT; sets NGX_PORT, NGX_DIR (access.log, error.log there) and
# NGX_URL.  A port taken between choosing and binding is chosen again.
nginx_start() {
  local name=$1 root=$2 opts=$3 extra=$4 try pid scheme=http
  NGX_DIR="$T_TMP/$name"
  mkdir -p "$NGX_DIR"
  case "$opts" in *ssl*) scheme=https ;; esac
  for try in 1 2 3 4 5; do
    NGX_PORT=$(free_port)
    nginx_conf "$NGX_DIR" "$root" "$NGX_PORT" "$opts" "$extra" \
      >"$NGX_DIR/nginx.conf"
    "$NGINX" -e "$NGX_DIR/error.log" -p "$NGX_DIR" -c "$NGX_DIR/nginx.conf" \
      2>>"$NGX_DIR/start.err" &
    pid=$!
    wait_until up_or_gone "$NGX_PORT" "$pid"
    if alive "$pid" && accepts "$NGX_PORT"; then
      HTTP_PIDS="$HTTP_PIDS $pid"
      NGX_URL="$scheme://127.0.0.1:$NGX_PORT"
      return 0
    fi
  done
  echo "Bail out! nginx did not start: $(tail -n 3 "$NGX_DIR/error.log")"
  exit 99
}

# faults_start ROOT: the fault server over ROOT; sets FLT_URL and FLT_LOG.
faults_start() {
  local pid
  FLT_LOG="$T_TMP/faults.log"
  : >"$FLT_LOG"
  "$ORACLE" "$TESTS_SRCDIR/oracle/http_faults.py" "$1" "$T_TMP/faults.port" \
    "$FLT_LOG" 2>"$T_TMP/faults.err" &
  pid=$!
  HTTP_PIDS="$HTTP_PIDS $pid"
  wait_until test -s "$T_TMP/faults.port" ||
    { echo "Bail out! the fault server did not start"; exit 99; }
  FLT_URL="http://127.0.0.1:$(cat "$T_TMP/faults.port")"
  wait_until accepts "${FLT_URL##*:}" ||
    { echo "Bail out! the fault server does not accept"; exit 99; }
}

# What the remote-origin scripts (s3_mpi.sh, hf_mpi.sh) share: every
# output of tpload goes to $ALL, which they check for secrets at the end.
ALL="$T_TMP/all-output"
: >"$ALL"

# remote_shards MODEL LAYOUT READ [WRAP...]: preshard of MODEL at $RS_NP
# ranks (default 2; WRAP... runs mpirun: a function setting credentials),
# checked by the oracle against $M/LAYOUT.
remote_shards() {
  local model=$1 l=$2 read=$3 np=${RS_NP:-2}
  local out="$T_TMP/s-$2-$3-$np"
  shift 3
  if "$@" mpi "$np" preshard "$model" --out "$out" --plan "$M/$l/plan.json" \
      --read "$read" --chunk-mib 1 --quiet >>"$ALL" 2>"$T_TMP/mpi.err"; then
    t_oracle "preshard $model, $np ranks, --read $read${1:+ ($1)}: the oracle's shards" \
      check-preshard "$M/$l" "$M/$l/plan.json" "$np" "$out"
  else
    t_fail "preshard $model, --read $read${1:+ ($1)}" \
      "$(messages "$T_TMP/mpi.err" | head -c 2000)"
  fi
  cat "$T_TMP/mpi.err" >>"$ALL"
}

# expect_fail NAME CODE PATTERN CMD...: CMD exits CODE with a message of
# tpload's matching PATTERN; its output goes to $ALL.
expect_fail() {
  local name=$1 want=$2 pat=$3 rc
  shift 3
  "$@" >"$T_TMP/f.out" 2>"$T_TMP/f.err"
  rc=$?
  cat "$T_TMP/f.out" "$T_TMP/f.err" >>"$ALL"
  if [ "$rc" -eq "$want" ] && messages "$T_TMP/f.err" | grep -q "$pat"; then
    t_ok "$name"
  else
    t_fail "$name" "expected exit $want and '$pat', got exit $rc:" \
      "$(messages "$T_TMP/f.err" | head -c 1500)"
  fi
}

# no_secret_in_output NAME SECRET...: none of them in $ALL (not empty).
no_secret_in_output() {
  local name=$1 s leaked=""
  shift
  for s in "$@"; do
    grep -qF -- "$s" "$ALL" && leaked="$leaked $s"
  done
  if [ -z "$leaked" ] && [ -s "$ALL" ]; then
    t_ok "$name"
  else
    t_fail "$name" "found:$leaked (or no output at all)"
  fi
}

# perturb_dir SRC DST: DST is SRC with every tensor byte of its
# .safetensors files changed (+1): the same names, shapes and sizes, other
# bytes (a model's next version, or another commit's).
perturb_dir() {
  "$ORACLE" - "$1" "$2" "$TESTS_SRCDIR/oracle" <<'PY'
import os, shutil, sys
sys.path.insert(0, sys.argv[3])
import npst
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst)
for name in os.listdir(src):
    shutil.copy(os.path.join(src, name), os.path.join(dst, name))
    if name.endswith(".safetensors"):
        start, _ = npst.layout(os.path.join(src, name))
        data = bytearray(open(os.path.join(src, name), "rb").read())
        for i in range(start, len(data)):
            data[i] = (data[i] + 1) & 0xFF
        open(os.path.join(dst, name), "wb").write(data)
PY
}

# held_or_ended JOB: a rank of mpirun JOB stopped itself (the stall test
# hook TPLOAD_TEST_SIGSTOP_AT), or JOB has ended.
held_or_ended() {
  local p
  for p in $(pgrep -P "$1"); do
    grep -q '^State:[[:space:]]*T' "/proc/$p/status" 2>/dev/null && return 0
  done
  ! alive "$1"
}

# t_plan_as_local MODEL LAYOUT LOG... [-- WRAP...]: `plan MODEL` prints
# what plan of the local $M/LAYOUT prints, and the servers' LOGs (their
# 5th field the body bytes sent, emptied first) show header fetches
# only: under a quarter of the model's bytes.
t_plan_as_local() {
  local model=$1 l=$2 logs=() sent size
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do logs+=("$1"); : >"$1"; shift; done
  [ $# -gt 0 ] && shift
  "$TPLOAD" plan "$M/$l" --shards 2 --plan "$M/$l/plan.json" \
    >"$T_TMP/plan-local.json" 2>>"$ALL"
  if "$@" "$TPLOAD" plan "$model" --shards 2 --plan "$M/$l/plan.json" \
      >"$T_TMP/plan-remote.json" 2>"$T_TMP/plan.err" &&
    cmp -s "$T_TMP/plan-local.json" "$T_TMP/plan-remote.json"; then
    t_ok "plan $model: what plan of the local copy prints"
  else
    t_fail "plan $model" "$(head -c 1000 "$T_TMP/plan.err")" \
      "$(diff "$T_TMP/plan-local.json" "$T_TMP/plan-remote.json" | head -20)"
  fi
  cat "$T_TMP/plan-remote.json" "$T_TMP/plan.err" >>"$ALL"
  sent=$(cat "${logs[@]}" | awk '{ s += $5 } END { print s + 0 }')
  size=$(cat "$M/$l"/* | wc -c)
  if [ "$sent" -gt 0 ] && [ $((sent * 4)) -lt "$size" ]; then
    t_ok "... header fetches only ($sent of $size bytes)"
  else
    t_fail "... header fetches only" "$sent of $size bytes sent"
  fi
}

# t_serve_remote NAME MODEL WANT [WRAP...]: a 2-rank `serve` of MODEL
# (plan: $M/index's) on $T_TMP/sock, waited for until ready, whose status
# names WANT; SERVE_PID.
t_serve_remote() {
  local name=$1 model=$2 want=$3
  shift 3
  rm -rf "$T_TMP/sock" "$T_TMP/ready" "$T_TMP/status.json"
  "$@" "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" serve "$model" \
    --plan "$M/index/plan.json" --socket-dir "$T_TMP/sock" \
    --ready-file "$T_TMP/ready" --quiet >>"$ALL" 2>"$T_TMP/serve.err" &
  SERVE_PID=$!
  if wait_until ready_or_gone && [ -f "$T_TMP/ready" ] &&
    "$TPLOAD" status "$T_TMP/sock/rank0.sock" --json \
      >"$T_TMP/status.json" 2>>"$ALL" &&
    grep -qF "$want" "$T_TMP/status.json"; then
    t_ok "$name"
  else
    t_fail "$name" "$(messages "$T_TMP/serve.err")" \
      "$(grep '"model"' "$T_TMP/status.json" 2>/dev/null)"
  fi
  cat "$T_TMP/status.json" >>"$ALL" 2>/dev/null
}
ready_or_gone() { test -f "$T_TMP/ready" || ! alive "$SERVE_PID"; }

# serve_remote_end: shutdown of the serve, waited for.
serve_remote_end() {
  "$TPLOAD" status "$T_TMP/sock/rank0.sock" --shutdown >/dev/null 2>&1
  wait_until gone "$SERVE_PID" || kill "$SERVE_PID"
  cat "$T_TMP/serve.err" >>"$ALL"
}

# t_reload_to G LAYOUT WANT [MODEL]: `reload` of the serve on $T_TMP/sock
# to MODEL (none: the one it serves, again) prints generation G of WANT,
# and every rank's dump holds the oracle's shards of $M/LAYOUT.
t_reload_to() {
  local g=$1 l=$2 want=$3 r
  shift 3
  if "$TPLOAD" reload "$T_TMP/sock/rank0.sock" "$@" \
      >"$T_TMP/reload.out" 2>"$T_TMP/reload.err" &&
    grep -qF "generation $g: $want" "$T_TMP/reload.out"; then
    t_ok "reload to ${1:-the same MODEL}: generation $g, $want"
  else
    t_fail "reload to ${1:-the same MODEL}" "$(cat "$T_TMP/reload.out")" \
      "$(head -c 1000 "$T_TMP/reload.err")"
  fi
  cat "$T_TMP/reload.out" "$T_TMP/reload.err" >>"$ALL"
  rm -rf "$T_TMP/dump"
  mkdir -p "$T_TMP/dump"
  for r in 0 1; do
    "$TPLOAD" dump "$T_TMP/sock/rank$r.sock" \
      --out "$T_TMP/dump/rank$r.safetensors" >>"$ALL" 2>&1
  done
  t_oracle "... every rank serves the oracle's shards of the new version" \
    check-grid "$M/$l" "$M/$l/plan.json" 2 2 1 1 "$T_TMP/dump"
}
