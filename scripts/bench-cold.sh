# bench-cold.sh - `scripts/bench.sh --cold`, sourced by bench.sh (its
# helpers: synth_llama, files_of, bytes_of, calc, median, wall, field,
# serve_ready, record; its settings: T, PY, PEERS, MPIRUN, ranks, runs,
# cold_gib, baseline).  Not a test.
#
# Every timed run starts with the page cache dropped (sync; echo 3 >
# /proc/sys/vm/drop_caches) and the memory warmed (bench-peers.py warm:
# this VM hands freed memory back to its host, and dropping the cache
# frees a lot), so each contestant reads the checkpoint from the device.
# For each model size and rank count, alternated run by run:
#   fio seq     one sequential O_DIRECT stream, 4 MiB requests 64 deep
#               (io_uring), over the checkpoint's files
#   fio streams two streams per file, each over one half of it, 4 MiB
#               requests 16 deep each
#   load        `tpload load` (default: rank 0 reads, --io auto)
#   baseline    --baseline BIN's `load` (another build, e.g. main's)
#   local       `tpload load --read local`
#   rank-read   the rank-read peer (every rank maps the files and copies
#               its slices with numpy)
#   serve       `tpload serve` until its ready file exists
# The device reference is the faster fio configuration's time for the
# checkpoint's bytes (fio's own run time: its start-up left out).  Prints
# medians and the goals' ratios, then the table in Markdown (what
# docs/PERFORMANCE.md shows).

cold_drop() {
  sync
  echo 3 >/proc/sys/vm/drop_caches
  $PY "$PEERS" warm "$cold_warm_bytes"
}

# cold_fio_seconds JSON BYTES: the time fio's bandwidth takes for BYTES.
cold_fio_seconds() {
  echo "$1" | $PY -c '
import json, sys
j = json.load(sys.stdin)["jobs"]
bw = sum(x["read"]["io_bytes"] for x in j) / (max(x["job_runtime"] for x in j) / 1000)
print(int(sys.argv[1]) / bw)' "$2"
}

# cold_fio_seq MODEL: one sequential stream over every file.
cold_fio_seq() {
  local files
  files=$(files_of "$1" | tr '\n' ':' | sed 's/:$//')
  fio --readonly --name=seq --filename="$files" --rw=read --bs=4M \
    --iodepth=64 --direct=1 --ioengine=io_uring --output-format=json
}

# cold_fio_streams MODEL: two streams per file, each over one half (whole
# 4 MiB requests: the last few MiB of a file are left out, which the
# bandwidth figure does not notice).
cold_fio_streams() {
  local args=() f size half
  for f in $(files_of "$1"); do
    size=$(stat -c %s "$f")
    half=$((size / 2 / 4194304 * 4194304))
    args+=(--name="s-$(basename "$f")" --filename="$f" --numjobs=2
      --size="$half" --offset_increment="$half")
  done
  fio --readonly --rw=read --bs=4M --iodepth=16 --direct=1 \
    --ioengine=io_uring --group_reporting=0 --output-format=json "${args[@]}"
}

# cold_load BIN N MODEL ARGS...: "wall job" of a cold `load --json`.
cold_load() {
  local bin=$1 n=$2 m=$3 s e j
  shift 3
  cold_drop
  s=$(date +%s.%N)
  j=$($MPIRUN -np "$n" "$bin" load "$m" --json --quiet "$@")
  e=$(date +%s.%N)
  echo "$j" >"$cache/cold-last.json" # the modes (run in a subshell)
  echo "$(calc "$e - $s") $(echo "$j" | field 'r["seconds"]')"
}

cold_one() { # GIB N: the alternated runs of one model size and rank count
  local g=$1 n=$2 m plan bytes seq=() str=() lw=() lj=() bw=() bj=() ow=() \
    oj=() rw=() sv=() out
  m=$(synth_llama "$g")
  bytes=$(bytes_of "$m")
  plan="$cache/plan-$(basename "$m")-$n.json"
  "$T" plan "$m" --shards "$n" >"$plan"
  for _ in $(seq "$runs"); do
    cold_drop
    seq+=("$(cold_fio_seconds "$(cold_fio_seq "$m")" "$bytes")")
    cold_drop
    str+=("$(cold_fio_seconds "$(cold_fio_streams "$m")" "$bytes")")
    out=$(cold_load "$T" "$n" "$m")
    lw+=("${out% *}") lj+=("${out#* }")
    cold_modes=$(field <"$cache/cold-last.json" \
      '",".join(sorted(set("%s/%d" % (x["mode"], x.get("align", 0)) for x in r["ranks"][0]["reads"])))')
    if [ -n "$baseline" ]; then
      out=$(cold_load "$baseline" "$n" "$m")
      bw+=("${out% *}") bj+=("${out#* }")
    fi
    out=$(cold_load "$T" "$n" "$m" --read local)
    ow+=("${out% *}") oj+=("${out#* }")
    cold_drop
    rw+=("$(wall $MPIRUN -np "$n" $PY "$PEERS" read "$plan" "$m")")
    cold_drop
    sv+=("$(serve_ready "$n" "$m")")
  done
  local fseq fstr ref load job local_job local_wall read serve
  fseq=$(echo "${seq[*]}" | median) fstr=$(echo "${str[*]}" | median)
  ref=$(calc "if ($fseq < $fstr) $fseq else $fstr")
  load=$(echo "${lw[*]}" | median) job=$(echo "${lj[*]}" | median)
  local_wall=$(echo "${ow[*]}" | median) local_job=$(echo "${oj[*]}" | median)
  read=$(echo "${rw[*]}" | median) serve=$(echo "${sv[*]}" | median)
  echo "cold, ${g} GiB, $n ranks (rank 0 read: $cold_modes, mode/alignment):"
  record "cold_fio_seq_seconds_${g}g_np$n" "$fseq" s
  record "cold_fio_streams_seconds_${g}g_np$n" "$fstr" s
  record "cold_load_wall_seconds_${g}g_np$n" "$load" s
  record "cold_load_job_seconds_${g}g_np$n" "$job" s
  record "cold_local_job_seconds_${g}g_np$n" "$local_job" s
  record "cold_rank_read_seconds_${g}g_np$n" "$read" s
  record "cold_serve_to_ready_seconds_${g}g_np$n" "$serve" s
  record "cold_load_job_over_device_${g}g_np$n" "$(calc "$job / $ref")" x "[<=1.15]"
  record "cold_load_over_rank_read_${g}g_np$n" "$(calc "$load / $read")" x "[<=0.6]"
  record "cold_local_job_over_device_${g}g_np$n" "$(calc "$local_job / $ref")" x "[<=1.15]"
  record "cold_serve_over_load_${g}g_np$n" "$(calc "$serve / $load")" x "[<=1.2]"
  local base_cell="-"
  if [ -n "$baseline" ]; then
    local bwall bjob
    bwall=$(echo "${bw[*]}" | median) bjob=$(echo "${bj[*]}" | median)
    record "cold_baseline_load_job_seconds_${g}g_np$n" "$bjob" s
    record "cold_baseline_over_load_job_${g}g_np$n" "$(calc "$bjob / $job")" x
    base_cell=$(printf '%.2f / %.2f' "$bwall" "$bjob")
  fi
  cold_rows+=("$(printf '| %s GiB | %s | %.2f | %.2f | %.2f / %.2f | %s | %.2f / %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |' \
    "$g" "$n" "$fseq" "$fstr" "$load" "$job" "$base_cell" "$local_wall" \
    "$local_job" "$read" "$serve" "$(calc "$job / $ref")" \
    "$(calc "$load / $read")" "$(calc "$local_job / $ref")")")
  eval "cold_job_${g}_$n=$job"
}

cold_bench() {
  local g n prev
  cold_rows=()
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench.sh --cold: needs root (it drops the page cache)" >&2
    exit 1
  fi
  command -v fio >/dev/null ||
    { apt-get install -y -qq --no-install-recommends fio >/dev/null; }
  echo "cold: the page cache is dropped (sync; echo 3 >" \
    "/proc/sys/vm/drop_caches) before every timed run; $runs runs each," \
    "alternated, medians; page size $(getconf PAGESIZE) bytes;" \
    "$(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for g in $cold_gib; do
    cold_warm_bytes=$((2 * $(bytes_of "$(synth_llama "$g")")))
    for n in $ranks; do cold_one "$g" "$n"; done
  done
  for n in $ranks; do
    prev=
    for g in $cold_gib; do
      eval "t=\$cold_job_${g}_$n"
      # shellcheck disable=SC2154
      [ -n "$prev" ] && record "cold_doubling_to_${g}g_np$n" \
        "$(calc "$t / $prev")" x "[<=2.1 per doubling]"
      prev=$t
    done
  done
  echo
  echo "| model | ranks | fio seq | fio 4 streams | load wall / job | baseline wall / job | --read local wall / job | rank-read peer | serve to ready | job / device | load / rank-read | local job / device |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${cold_rows[@]}"
  echo "load average now $(cut -d' ' -f1-3 /proc/loadavg)"
}
