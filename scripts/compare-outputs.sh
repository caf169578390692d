#!/bin/bash
# compare-outputs.sh BASE_REV [NEW_TREE] - proves a refactor left every
# output of tpload unchanged byte for byte (issue 35's "Done when").
#
# Builds BASE_REV in a temporary detached git worktree and NEW_TREE
# (default: the tree this script lives in, uncommitted changes included)
# with scripts/build.sh plain, makes one corpus of models with the base
# binary's `tpload synth`, then runs the same commands with each binary:
# inspect, plan, load --json (mpi and local reads, buffered and direct,
# a grid, --ep, --verify-md5, a URL), preshard in both layouts and grids,
# verify, a serve job (status, dump, reload, shutdown) and failing
# invocations.  Every output file is compared with cmp, every stdout,
# stderr and exit code after the normalisations listed in norm() below.
# Prints "same  WHAT" or "DIFF  WHAT" (with a short diff) per comparison,
# then "N same, N differ"; exits 1 when any differ, 2 when it could not
# run (a build failed, a job hung).
#
# BASE_BIN=FILE or NEW_BIN=FILE in the environment skips that build and
# uses FILE (a tpload built from that tree: for re-running quickly);
# KEEP=1 keeps the temp dir (corpus, both runs' records and outputs).
#
# Both binaries run from the same path ($TMP/bin/tpload) in the same
# working directory ($TMP/run, moved aside after each run), so paths in
# messages and outputs agree without being rewritten.
# Functions run from traps and wait_for look unreachable to shellcheck.
# shellcheck disable=SC2317
set -u
usage() { echo "usage: $0 BASE_REV [NEW_TREE]" >&2; exit 64; }
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
BASE_REV=$1
NEW_TREE=$(cd "${2:-$(dirname "$0")/..}" && pwd) || usage
git -C "$NEW_TREE" rev-parse --verify -q "$BASE_REV^{commit}" >/dev/null ||
  { echo "$0: $BASE_REV: not a commit of $NEW_TREE" >&2; exit 64; }
MPIRUN=${MPIRUN:-mpirun}
PY=${PYTHON:-/usr/bin/python3}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
HANG_SECS=${HANG_SECS:-300}  # bounds a wait on a condition: catches hangs
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LC_ALL=C

TMP=$(mktemp -d "${TMPDIR:-/tmp}/tpload-compare.XXXXXX") || exit 2
BASE_SRC=$TMP/base-src
PIDS=""       # background jobs we started (builds, serve, nginx)

# ---- cleanup: the worktree, our background jobs, the temp dir ----
cleanup() {
  local p
  for p in $PIDS; do
    kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null
  done
  for p in $PIDS; do wait "$p" 2>/dev/null; done
  if [ -d "$BASE_SRC" ]; then
    git -C "$NEW_TREE" worktree remove --force --force "$BASE_SRC" \
      >/dev/null 2>&1
  fi
  git -C "$NEW_TREE" worktree prune >/dev/null 2>&1
  if [ -n "${KEEP:-}" ]; then echo "# kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

die() { echo "$0: $*" >&2; exit 2; }

# alive PID: the process exists and is not a zombie.
alive() {
  local st
  st=$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null)
  [ -n "$st" ] && [ "$st" != Z ]
}

# wait_for CMD...: until CMD succeeds (0) or HANG_SECS pass (1).
wait_for() {
  local end=$(($(date +%s) + HANG_SECS))
  until "$@"; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.05
  done
}

# build SRC LOG: scripts/build.sh plain in SRC, in its own process group
# (cleanup ends all of make on INT or TERM); BIN is the tpload built.
build() {
  local pid dir
  setsid "$1/scripts/build.sh" plain >"$2.out" 2>"$2.err" </dev/null &
  pid=$!
  PIDS="$PIDS $pid"
  if ! wait "$pid"; then
    tail -n 20 "$2.err" >&2
    die "scripts/build.sh plain failed in $1"
  fi
  PIDS=${PIDS% "$pid"}
  dir=$(tail -n 1 "$2.out")
  [ -x "$dir/tpload" ] || die "no tpload in $dir"
  BIN=$dir/tpload
}

# ---- the corpus: made once, with the base binary ----
C=$TMP/corpus
synth() {
  local name=$1; shift
  "$TMP/bin/tpload" synth --out "$C/$name" --layers 2 --quiet "$@" ||
    die "tpload synth $name $* failed"
}
make_corpus() {
  mkdir -p "$C"
  local small=(--hidden 64 --heads 4 --vocab 128)
  synth single --arch llama "${small[@]}"                 # one file
  synth index --arch llama "${small[@]}" --files 3        # sharded index
  synth tied --arch gemma "${small[@]}"                   # tied embeddings
  synth bias --arch qwen2 "${small[@]}"                   # q/k/v biases
  synth fused --arch phi3 "${small[@]}"                   # fused qkv, gate_up
  synth moe --arch mixtral "${small[@]}" --experts 4      # MoE
  synth mlc --arch llama "${small[@]}" --format mlc       # MLC weight cache
  synth q4 --arch llama "${small[@]}" --format mlc --quant q4f16_1
  # FP8 block-scaled (128-wide blocks: every cut a multiple of 128, as
  # vLLM requires); synth writes it as MLC.  fp8-misfit's k/v rows (128)
  # cut in 2 are not whole blocks: a failing plan.
  synth fp8 --arch llama --hidden 256 --heads 2 --kv-heads 2 \
    --intermediate 512 --vocab 256 --format mlc \
    --quant fp8_e4m3fn_bf16_block_scale
  synth fp8-misfit --arch llama --hidden 256 --heads 4 --vocab 256 \
    --format mlc --quant fp8_e4m3fn_bf16_block_scale
  printf '%s\n' '{"rules": [{"match": "*.q_proj.weight", "dim": 5}]}' \
    >"$C/bad-plan.json"
  printf '%s\n' '{"rules": [' >"$C/broken-plan.json"
  # A preshard output with one byte changed, for verify to reject.
  (cd "$TMP" && "$MPIRUN" -np 2 "$TMP/bin/tpload" preshard "$C/single" \
     --out "$C/doctored" --quiet) || die "preshard of the doctored output"
  printf '\377' | dd of="$C/doctored/rank1.safetensors" bs=1 seek=4000 \
    conv=notrunc status=none
}

# ---- nginx over the corpus, for the URL origin (one port for both runs) ----
URL=""
accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
up_or_gone() { accepts "$1" || ! alive "$2"; }
start_nginx() {
  local d=$TMP/nginx port pid user=""
  [ -x "$NGINX" ] || return 0
  mkdir -p "$d"
  [ "$(id -u)" -eq 0 ] && user="user root;"
  port=$("$PY" -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cat >"$d/nginx.conf" <<CONF
$user
daemon off;
worker_processes 1;
error_log $d/error.log;
pid $d/nginx.pid;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $d/tmp-body;
  proxy_temp_path $d/tmp-proxy;
  fastcgi_temp_path $d/tmp-fastcgi;
  uwsgi_temp_path $d/tmp-uwsgi;
  scgi_temp_path $d/tmp-scgi;
  default_type application/octet-stream;
  server { listen 127.0.0.1:$port; root $C; }
}
CONF
  "$NGINX" -e "$d/error.log" -p "$d" -c "$d/nginx.conf" 2>"$d/start.err" &
  pid=$!
  PIDS="$PIDS $pid"
  wait_for up_or_gone "$port" "$pid"
  if alive "$pid" && accepts "$port"; then URL="http://127.0.0.1:$port"; fi
}

# ---- one run: every command, with the binary at $TMP/bin/tpload ----
R=$TMP/run
N=0
# rec WHAT CMD...: runs CMD in $R (a hang ends after HANG_SECS with 124);
# CMD "tpl ARGS" is the binary, "mp N ARGS" the binary under mpirun -np N;
# its stdout, stderr and exit code are kept as $R/rec/NNN.{out,err,rc},
# WHAT in NNN.what.
rec() {
  local what=$1 f n
  shift
  N=$((N + 1))
  f=$(printf '%s/rec/%03d' "$R" "$N")
  printf '%s\n' "$what" >"$f.what"
  case $1 in
    tpl) shift; set -- "$TMP/bin/tpload" "$@" ;;
    mp) n=$2; shift 2
        set -- "$MPIRUN" --oversubscribe -np "$n" "$TMP/bin/tpload" "$@" ;;
  esac
  (cd "$R" && timeout --foreground -k 10 "$HANG_SECS" "$@") \
    >"$f.out" 2>"$f.err" </dev/null
  echo $? >"$f.rc"
}

HF="single index tied bias fused moe"
MLC="mlc q4 fp8"

static_commands() {
  local m
  rec "inspect single/model.safetensors --json" \
    tpl inspect "$C/single/model.safetensors" --json
  for m in $HF $MLC; do
    rec "inspect $m --json" tpl inspect "$C/$m" --json
    rec "inspect $m --tp 2 --pp 2" tpl inspect "$C/$m" --tp 2 --pp 2
    rec "plan $m --shards 2" tpl plan "$C/$m" --shards 2
    rec "plan $m --tp 2 --pp 2" tpl plan "$C/$m" --tp 2 --pp 2
    rec "plan $m --shards 4 --tp 2 (dp 2)" tpl plan "$C/$m" --shards 4 --tp 2
  done
  rec "plan bias --shards 2 --no-bias-scaling" \
    tpl plan "$C/bias" --shards 2 --no-bias-scaling
  rec "plan moe --shards 2 --ep" tpl plan "$C/moe" --shards 2 --ep
  rec "inspect moe --shards 2 --ep" tpl inspect "$C/moe" --shards 2 --ep
  rec "plan single --shards 2 --plan llama" \
    tpl plan "$C/single" --shards 2 --plan llama
  rec "inspect mlc --verify-md5 --json" \
    tpl inspect "$C/mlc" --verify-md5 --json
}

load_commands() {
  local m
  for m in $HF $MLC; do
    rec "load $m --json (np 2)" mp 2 load "$C/$m" --json
  done
  rec "load index --tp 2 --pp 2 --json (np 4)" \
    mp 4 load "$C/index" --tp 2 --pp 2 --json
  rec "load single --tp 2 --json (np 4, dp 2)" \
    mp 4 load "$C/single" --tp 2 --json
  rec "load index --read local --json (np 2)" \
    mp 2 load "$C/index" --read local --json
  rec "load index --io direct --json (np 2)" \
    mp 2 load "$C/index" --io direct --json
  rec "load bias --no-bias-scaling --json (np 2)" \
    mp 2 load "$C/bias" --no-bias-scaling --json
  rec "load moe --ep --json (np 2)" mp 2 load "$C/moe" --ep --json
  rec "load mlc --verify-md5 --json (np 2)" \
    mp 2 load "$C/mlc" --verify-md5 --json
  rec "load index (np 2, the text summary)" mp 2 load "$C/index"
}

# preshard_verify WHAT NP MODEL OUT LAYOUT ARGS...: preshard into
# out/OUT, then verify it.
preshard_verify() {
  local what=$1 np=$2 model=$3 out=$4 layout=$5
  shift 5
  rec "preshard $what (np $np)" mp "$np" preshard "$C/$model" \
    --out "$R/out/$out" --layout "$layout" "$@"
  rec "verify $what" tpl verify "$C/$model" "$R/out/$out" --layout "$layout"
}

preshard_commands() {
  local m
  for m in $HF; do
    preshard_verify "$m --layout rank --tp 2" 2 "$m" "$m-rank-tp2" rank
    preshard_verify "$m --layout rank --tp 2 --pp 2" 4 "$m" \
      "$m-rank-tp2pp2" rank --tp 2 --pp 2
  done
  for m in $MLC; do
    preshard_verify "$m --layout rank --tp 2" 2 "$m" "$m-rank-tp2" rank
    preshard_verify "$m --layout mlc --tp 2" 2 "$m" "$m-mlc-tp2" mlc
  done
  # (q4 has no pipeline grid: its quantized embedding has no stage, one of
  # the failing commands)
  for m in mlc fp8; do
    preshard_verify "$m --layout rank --tp 2 --pp 2" 4 "$m" \
      "$m-rank-tp2pp2" rank --tp 2 --pp 2
    preshard_verify "$m --layout mlc --tp 2 --pp 2" 4 "$m" \
      "$m-mlc-tp2pp2" mlc --tp 2 --pp 2
  done
  rec "preshard moe --ep (np 2)" mp 2 preshard "$C/moe" --ep \
    --out "$R/out/moe-ep"
  rec "verify moe --ep" tpl verify "$C/moe" "$R/out/moe-ep" --ep
  rec "preshard single (np 4, dp 2)" mp 4 preshard "$C/single" --tp 2 \
    --out "$R/out/single-dp2"
  rec "verify single (dp 2)" tpl verify "$C/single" "$R/out/single-dp2"
}

url_commands() {
  [ -n "$URL" ] || return 0
  rec "inspect URL/index --json" tpl inspect "$URL/index" --json
  rec "inspect URL/mlc --shards 2" tpl inspect "$URL/mlc" --shards 2
  rec "plan URL/bias --shards 2" tpl plan "$URL/bias" --shards 2
  rec "load URL/index --json (np 2)" mp 2 load "$URL/index" --json
  rec "load URL/single --read local --json (np 2)" \
    mp 2 load "$URL/single" --read local --json
  rec "preshard URL/index (np 2)" mp 2 preshard "$URL/index" \
    --out "$R/out/url-index"
  rec "verify URL/index" tpl verify "$URL/index" "$R/out/url-index"
  rec "load URL/missing (np 2)" mp 2 load "$URL/missing"
}

failing_commands() {
  rec "fail: plan with a rule's dim out of range" \
    tpl plan "$C/single" --shards 2 --plan "$C/bad-plan.json"
  rec "fail: plan file not JSON" \
    tpl plan "$C/single" --shards 2 --plan "$C/broken-plan.json"
  rec "fail: plan on 3 shards (heads do not divide)" \
    tpl plan "$C/single" --shards 3
  rec "fail: plan --tp 3 --shards 4" tpl plan "$C/single" --shards 4 --tp 3
  rec "fail: plan --pp 3 (2 layers)" tpl plan "$C/single" --tp 1 --pp 3
  rec "fail: unknown option" tpl plan "$C/single" --shards 2 --frobnicate
  rec "fail: inspect a missing model" tpl inspect "$C/missing"
  rec "fail: load a missing model (np 2)" mp 2 load "$C/missing"
  rec "fail: load with a bad plan (np 2)" mp 2 load "$C/single" \
    --plan "$C/bad-plan.json"
  rec "fail: plan of FP8 blocks that do not divide" \
    tpl plan "$C/fp8-misfit" --shards 2
  rec "fail: load --pp 2 of a q4 model (np 4)" \
    mp 4 load "$C/q4" --tp 2 --pp 2
  rec "fail: preshard --layout mlc of an HF model (np 2)" \
    mp 2 preshard "$C/single" --layout mlc --out "$R/out/fail-mlc"
  rec "fail: preshard into a non-empty dir (np 2)" \
    mp 2 preshard "$C/single" --out "$R/out/single-rank-tp2"
  rec "fail: verify a doctored output" tpl verify "$C/single" "$C/doctored"
  rec "fail: verify a missing output" tpl verify "$C/single" "$R/out/none"
  rec "fail: inspect a URL to a closed port" \
    tpl inspect http://127.0.0.1:9/m --retries 0
  rec "fail: load a URL to a closed port (np 2)" \
    mp 2 load http://127.0.0.1:9/m --retries 0
  rec "fail: status of a missing socket" tpl status "$R/nosock/rank0.sock"
  rec "fail: dump of a missing socket" \
    tpl dump "$R/nosock/rank0.sock" --out "$R/out/none.safetensors"
}

# serve_job NAME NP MODEL ARGS...: a serve job in the background; status in
# every form, dumps of every rank, a reload, status and dumps of the new
# generation, --shutdown; the job's own output and exit code last.
serve_job() {
  local name=$1 np=$2 model=$3 sock pid r rc grid
  shift 3
  sock=$R/sock-$name
  grid=("$@")
  (cd "$R" && exec "$MPIRUN" --oversubscribe -np "$np" "$TMP/bin/tpload" \
     serve "$C/$model" --socket-dir "$sock" --ready-file "$R/ready-$name" \
     "$@") >"$R/serve-$name.out" 2>"$R/serve-$name.err" </dev/null &
  pid=$!
  PIDS="$PIDS $pid"
  wait_for ready_or_ended "$R/ready-$name" "$pid"
  if [ ! -f "$R/ready-$name" ]; then
    die "serve $name never became ready: $(tail -n 5 "$R/serve-$name.err")"
  fi
  rec "serve $name: ready file" cat "$R/ready-$name"
  rec "serve $name: status" tpl status "$sock/rank1.sock"
  rec "serve $name: status --json" tpl status "$sock/rank0.sock" --json
  rec "serve $name: status --json --summary" \
    tpl status "$sock/rank1.sock" --json --summary
  rec "serve $name: status --tensors" tpl status "$sock/rank0.sock" --tensors
  rec "serve $name: status --health" tpl status "$sock/rank1.sock" --health
  mkdir -p "$R/out/dump-$name-gen1" "$R/out/dump-$name-gen2"
  for ((r = 1; r < np; r++)); do
    rec "serve $name: dump rank $r" tpl dump "$sock/rank$r.sock" \
      --out "$R/out/dump-$name-gen1/rank$r.safetensors" "${grid[@]}"
  done
  rec "serve $name: reload" tpl reload "$sock/rank1.sock"
  rec "serve $name: status --json --summary after the reload" \
    tpl status "$sock/rank0.sock" --json --summary
  for ((r = 0; r < np; r++)); do
    rec "serve $name: dump rank $r after the reload" \
      tpl dump "$sock/rank$r.sock" \
      --out "$R/out/dump-$name-gen2/rank$r.safetensors" "${grid[@]}"
  done
  rec "serve $name: dump onto an existing file" tpl dump "$sock/rank0.sock" \
    --out "$R/out/dump-$name-gen2/rank0.safetensors"
  rec "serve $name: a second serve on the live socket dir (np $np)" \
    mp "$np" serve "$C/$model" --socket-dir "$sock" "$@"
  rec "serve $name: status --shutdown" tpl status "$sock/rank0.sock" --shutdown
  wait_for ended "$pid" || die "serve $name did not end after --shutdown"
  wait "$pid"
  rc=$?
  N=$((N + 1))
  r=$(printf '%s/rec/%03d' "$R" "$N")
  echo "serve $name: the job (np $np, mpirun)" >"$r.what"
  echo "$rc" >"$r.rc"
  PIDS=${PIDS% "$pid"}
  mv "$R/serve-$name.out" "$r.out"
  mv "$R/serve-$name.err" "$r.err"
  rec "serve $name: what it leaves in the socket dir" ls -A "$sock"
}
ready_or_ended() { [ -f "$1" ] || ! alive "$2"; }
ended() { ! alive "$1"; }

# run_with BINARY LABEL: the whole suite with BINARY; results in $TMP/LABEL.
run_with() {
  cp "$1" "$TMP/bin/tpload"
  rm -rf "$R"
  mkdir -p "$R/rec" "$R/out"
  N=0
  static_commands
  load_commands
  preshard_commands
  url_commands
  failing_commands
  serve_job bias 2 bias
  serve_job grid 4 index --tp 2 --pp 2
  mv "$R" "$TMP/$2"
}

# ---- normalisation: only what varies from one run to the next ----
# norm FILE: FILE's text with, in order:
#  - times: JSON "seconds" and "uptime_seconds" (the report's, each
#    rank's, the md5 pass's, the daemon's uptime) and every value in a
#    "phases" object (read/pack/send/receive/scale/allocate/hash), the
#    summary's "in X s (Y GiB/s)", the md5 line's "checked in X s (Y
#    GiB/s)", status's "up X s" and "in X s, Y GiB/s", and the status
#    table's SECONDS and phase columns: wall-clock durations and the
#    throughputs computed from them differ on every run; so do CPU
#    times: "cpu_user_seconds", "cpu_sys_seconds" and the table's CPU
#    USER/SYS column;
#  - memory: "peak_rss_bytes", "peak memory N MiB" and the table's PEAK
#    MiB column: a process's peak RSS depends on allocator and page-fault
#    timing, not on what tpload outputs;
#  - pids: "pid": N (report, ready file), "pid N" (serve's log: the
#    clients attaching, the one asking for a reload), the table's PID
#    column: new processes every run;
#  - "job_id" (ready file): random per serve job;
#  - serve's log timestamps (2026-12-03T17:30:21.500Z): dates;
#  - curl's "after N ms" (connection refused): a duration;
#  - mpirun's boxed notices (between lines of dashes) are left out, as
#    the tests' messages() does: they are mpirun's, not tpload's; whether
#    mpirun prints its second box, and which rank it names as the first
#    to exit, races with how the ranks exit (mpirun's exit code, compared
#    exactly, carries the code);
#  - lines naming "rank K:" are grouped by K, each rank's own order kept:
#    ranks write through mpirun concurrently, so the lines of different
#    ranks interleave in any order.
# Paths need no rewriting: both runs use the same binary path, working
# directory and corpus; the host is the same machine.
norm() {
  sed -E \
    -e 's/"(seconds|uptime_seconds)": [-0-9.e+]+/"\1": T/g' \
    -e 's/"cpu_(user|sys)_seconds": [-0-9.e+]+/"cpu_\1_seconds": T/g' \
    -e '/"phases": \{/,/\}/ s/": [-0-9.e+]+/": T/' \
    -e 's/"peak_rss_bytes": [0-9]+/"peak_rss_bytes": M/g' \
    -e 's/"pid": [0-9]+/"pid": P/g' \
    -e 's/"job_id": "[0-9a-f]*"/"job_id": J/g' \
    -e 's/ in [0-9.]+ s \([0-9.]+ GiB\/s\)/ in T s (T GiB\/s)/g' \
    -e 's/peak memory [0-9]+ MiB/peak memory M MiB/g' \
    -e 's/^daemon: up [0-9.]+ s/daemon: up T s/' \
    -e 's/ in [0-9.]+ s, [0-9.]+ GiB\/s$/ in T s, T GiB\/s/' \
    -e 's/^( *[0-9]+  [^ ]+) +[0-9]+( +[0-9]+ +[0-9]+) +[0-9.]+ +[0-9.]+( +[0-9.]+\/[0-9.]+)?  +[0-9.\/]+$/\1 PID\2 T M T/' \
    -e 's/([( ])pid [0-9]+/\1pid P/g' \
    -e 's/^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z /DATE /' \
    -e 's/ after [0-9]+ ms:/ after T ms:/g' \
    "$1" |
  awk '/^------------------------------/ { box = !box; next }
       !box { k = "-"
              if (match($0, /rank [0-9]+: /)) k = substr($0, RSTART, RLENGTH)
              print k "\t" NR "\t" $0 }' |
  sort -t "$(printf '\t')" -k1,1 -k2,2n | cut -f3-
}

# ---- comparison ----
SAME=0
DIFFER=0
report() {  # report same|DIFF WHAT [DETAIL FILE]
  if [ "$1" = same ]; then
    SAME=$((SAME + 1)); echo "same  $2"
  else
    DIFFER=$((DIFFER + 1)); echo "DIFF  $2"
    [ -n "${3:-}" ] && head -n 12 "$3" | sed 's/^/      /'
  fi
}

compare_text() {  # compare_text WHAT A B
  norm "$2" >"$TMP/a.n"
  norm "$3" >"$TMP/b.n"
  if cmp -s "$TMP/a.n" "$TMP/b.n"; then report same "$1"
  else
    diff -u --label base --label new "$TMP/a.n" "$TMP/b.n" >"$TMP/d"
    report DIFF "$1" "$TMP/d"
  fi
}

compare_records() {
  local f k what a b
  for f in "$TMP/base/rec/"*.what; do
    k=$(basename "$f" .what)
    what=$(cat "$f")
    a=$TMP/base/rec/$k
    b=$TMP/new/rec/$k
    if [ ! -f "$b.what" ] || [ "$(cat "$b.what")" != "$what" ]; then
      report DIFF "$what: the new run did not run it"; continue
    fi
    if [ "$(cat "$a.rc")" = "$(cat "$b.rc")" ]; then
      report same "$what: exit code $(cat "$a.rc")"
    else
      printf 'base %s, new %s\n' "$(cat "$a.rc")" "$(cat "$b.rc")" >"$TMP/d"
      report DIFF "$what: exit code" "$TMP/d"
    fi
    compare_text "$what: stdout" "$a.out" "$b.out"
    compare_text "$what: stderr" "$a.err" "$b.err"
  done
}

# compare_outputs: every directory and file under out/, byte for byte.
compare_outputs() {
  local d n f
  for d in $(cd "$TMP/base/out" && find . -mindepth 1 -maxdepth 1 | sort) \
           $(cd "$TMP/new/out" && find . -mindepth 1 -maxdepth 1 | sort); do
    echo "${d#./}"
  done | sort -u >"$TMP/outs"
  while read -r d; do
    (cd "$TMP/base/out" && find "$d" -type f 2>/dev/null | sort) >"$TMP/fa"
    (cd "$TMP/new/out" && find "$d" -type f 2>/dev/null | sort) >"$TMP/fb"
    : >"$TMP/d"
    diff -u --label base --label new "$TMP/fa" "$TMP/fb" >>"$TMP/d"
    n=0
    while read -r f; do
      n=$((n + 1))
      [ -f "$TMP/new/out/$f" ] || continue
      (cd "$TMP" && cmp "base/out/$f" "new/out/$f") >>"$TMP/d" 2>&1
    done <"$TMP/fa"
    if [ -s "$TMP/d" ]; then report DIFF "files of $d ($n)" "$TMP/d"
    else report same "files of $d ($n, byte for byte)"; fi
  done <"$TMP/outs"
}

# ---- main ----
# One function, called on the file's last line: bash has read the whole
# script before it runs, so a tree changed meanwhile (a merge, an edit)
# cannot change the script under it.
main() {
  started=$(date +%s)
  mkdir -p "$TMP/bin"
  base_bin=${BASE_BIN:-}
  new_bin=${NEW_BIN:-}
  if [ -z "$base_bin" ]; then
    git -C "$NEW_TREE" worktree add --detach -q "$BASE_SRC" "$BASE_REV" \
      >/dev/null 2>&1 || die "git worktree add $BASE_REV failed"
    echo "# building $BASE_REV ($(git -C "$BASE_SRC" log -1 --format=%h))"
    build "$BASE_SRC" "$TMP/build-base"
    base_bin=$BIN
  fi
  if [ -z "$new_bin" ]; then
    echo "# building $NEW_TREE"
    build "$NEW_TREE" "$TMP/build-new"
    new_bin=$BIN
  fi
  cp "$base_bin" "$TMP/bin/tpload"
  make_corpus
  start_nginx
  [ -n "$URL" ] || echo "# nginx not found or did not start: no URL commands"
  echo "# running the commands with each binary"
  run_with "$base_bin" base
  run_with "$new_bin" new
  compare_records
  compare_outputs
  echo "$SAME same, $DIFFER differ ($(($(date +%s) - started)) s)"
  [ "$DIFFER" -eq 0 ]
}

main "$@"; exit
