# bench_lib.sh - what every bench script sets up once it has read its
# options, sourced with `top` set to the source tree: the plain build
# (build, T), Debian's python3 with numpy (PY), the model cache (cache:
# TPLOAD_BENCH_DIR, default /tmp/tpload-bench), as root Open MPI's consent
# to run as root, --read's default (mpi), synth_llama for the Llama-shaped checkpoints and
# bench_nginx to serve one.  Not a test.
build=$("$top/scripts/build.sh" plain) || exit 1
T="$build/tpload"
PY=/usr/bin/python3
cache=${TPLOAD_BENCH_DIR:-/tmp/tpload-bench}
mkdir -p "$cache"
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# A bench measures rank 0's stream unless a contestant names --read: a
# bench's model sits warm in the one page cache, where the default
# (--read auto) would have every rank read its own slices (and on the
# tests' cluster, every namespace "node" shares that cache).
export TPLOAD_READ=${TPLOAD_READ-mpi}

# synth_llama GIB: the directory of the Llama-shaped bf16 checkpoint of
# GIB in 2 files in the cache, synthesized the first time.
synth_llama() {
  local d="$cache/llama-${1}g"
  [ -f "$d/config.json" ] || "$T" synth --arch llama --out "$d" \
    --hidden 2048 --heads 16 --kv-heads 8 --intermediate 5632 --vocab 32000 \
    --gib "$1" --files 2 --force --quiet
  echo "$d"
}

# bench_nginx SERVER...: Debian's nginx (2 workers, sendfile, no access
# log) on a free loopback port, its config, logs and temp files in a dir
# of its own ($ngx), the lines SERVER... inside its server block (@PORT@
# in them: the port); waited for until it accepts; sets url
# (http://127.0.0.1:PORT) and stops it on exit.
bench_nginx() {
  ngx=$(mktemp -d /tmp/tpload-bench-nginx.XXXXXX)
  port=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local user="" server
  [ "$(id -u)" -eq 0 ] && user="user root;"
  server=$(printf '    %s\n' "$@")
  cat >"$ngx/nginx.conf" <<CONF
$user
daemon off;
worker_processes 2;
error_log $ngx/error.log;
pid $ngx/nginx.pid;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $ngx/tmp-body;
  proxy_temp_path $ngx/tmp-proxy;
  fastcgi_temp_path $ngx/tmp-fastcgi;
  uwsgi_temp_path $ngx/tmp-uwsgi;
  scgi_temp_path $ngx/tmp-scgi;
  default_type application/octet-stream;
  sendfile on;
  keepalive_requests 100000;
  server {
    listen 127.0.0.1:$port;
${server//@PORT@/$port}
  }
}
CONF
  nginx -e "$ngx/error.log" -p "$ngx" -c "$ngx/nginx.conf" &
  npid=$!
  trap 'kill $npid 2>/dev/null; wait $npid 2>/dev/null; rm -rf "$ngx"' EXIT
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    kill -0 $npid 2>/dev/null || { cat "$ngx/error.log" >&2; exit 1; }
    sleep 0.05
  done
  url="http://127.0.0.1:$port"
}
