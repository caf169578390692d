#!/bin/bash
# http_mpi.sh - MODEL URLs with ranks, against nginx on loopback and the
# fault server (oracle/http_faults.py): preshard of a URL (single file,
# sharded index, MLC directory) at 2 and 4 ranks, --read mpi and --read
# local, gives every rank the numpy oracle's bytes; the ranged GETs of a
# rate-limited server (nginx limit_rate, per connection) run on several
# connections at once and fetch each byte once (nginx's access log, never
# a clock); an object replaced or a connection cut mid-load is 74 or
# retried, with no rank file left; a preshard output made from the local
# files verifies against the same files over HTTP (--layout mlc too: its
# output from a URL is the local one's), and verify notices a
# tampered output or an object replaced while it reads; a job served from
# a presigned-style URL reloads another (`tpload reload SOCK URL`), the
# same again without MODEL and by SIGHUP, every GET signed and the
# signature in no output, daemon log or status.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/http_lib.sh"

gen index --seed 3101 --layout index --big-mib 6
gen mlc --seed 3102 --layout mlc
gen single --seed 3103 --layout single --big-mib 2
gen big --seed 3104 --layout single --big-mib 24
nginx_start nginx "$M" "" '
    location /slow/ { limit_rate 8m; }
    location /auth/ {
      if ($http_authorization != "Bearer s3cret-Tok3n") { return 401; }
    }
    location /signed/ {
      if ($args !~ "X-Amz-Signature=5ig5ecret") { return 403; }
    }'
U=$NGX_URL
ln -s . "$M/slow"
ln -s . "$M/auth"
ln -s . "$M/signed"
# up_or_gone_file FILE PID: FILE exists, or PID has exited.
up_or_gone_file() { test -f "$1" || ! alive "$2"; }

# shards LAYOUT N READ: preshard of the URL, checked by the oracle
shards() {
  local l=$1 n=$2 read=$3 out="$T_TMP/s-$1-$2-$3"
  if mpi "$n" preshard "$U/$l/" --out "$out" --plan "$M/$l/plan.json" \
      --read "$read" --chunk-mib 1 --quiet 2>"$T_TMP/mpi.err"; then
    t_oracle "preshard $l URL, $n ranks, --read $read: the oracle's shards" \
      check-preshard "$M/$l" "$M/$l/plan.json" "$n" "$out"
  else
    t_fail "preshard $l URL, $n ranks, --read $read" \
      "$(messages "$T_TMP/mpi.err" | head -c 2000)"
  fi
}
for read in mpi local; do
  shards single 2 "$read"
  shards index 2 "$read"
  shards index 4 "$read"
  shards mlc 4 "$read"
done

# A token for every rank: --read local fetches on each rank, and each
# needs the token (--token-file, read by every rank)
printf 's3cret-Tok3n\n' >"$T_TMP/token"
: >"$NGX_DIR/access.log"
out="$T_TMP/s-auth"
if mpi 2 preshard "$U/auth/index/" --out "$out" --plan "$M/index/plan.json" \
    --read local --token-file "$T_TMP/token" --quiet 2>"$T_TMP/mpi.err"; then
  t_oracle "--read local with --token-file: the oracle's shards" \
    check-preshard "$M/index" "$M/index/plan.json" 2 "$out"
else
  t_fail "--read local with --token-file" "$(messages "$T_TMP/mpi.err")"
fi
# the status field ($3), not " 401 " anywhere: a connection's request
# count (field 7) reaches 401 when --read local fetches row pieces
if awk '$3 == 401 { n++ } END { exit n == 0 }' "$NGX_DIR/access.log"; then
  t_fail "... no GET went without the token" \
    "$(awk '$3 == 401' "$NGX_DIR/access.log" | head -n 5)"
else
  t_ok "... no GET went without the token"
fi
mpi 2 load "$U/auth/index/" --plan "$M/index/plan.json" --quiet \
  2>"$T_TMP/mpi.err"
rc=$?
if [ $rc -eq 77 ] && messages "$T_TMP/mpi.err" | grep -q "HTTP 401" &&
  ! grep -q Tok3n "$T_TMP/mpi.err"; then
  t_ok "load without the token: 77, one message"
else
  t_fail "load without the token" "exit $rc" "$(messages "$T_TMP/mpi.err")"
fi

# A load's report: every rank's bytes as the oracle counts them, and the
# file read over http.
if mpi 2 load "$U/index/" --plan "$M/index/plan.json" --json \
    >"$T_TMP/report.json" 2>"$T_TMP/mpi.err"; then
  t_oracle "load index URL --json: the report's bytes" check-report \
    "$M/index" "$M/index/plan.json" 2 "$T_TMP/report.json"
  grep -q '"mode": *"http"' "$T_TMP/report.json" &&
    t_ok "the report says the files were read over http" ||
    t_fail "mode http in the report" "$(head -c 1500 "$T_TMP/report.json")"
else
  t_fail "load index URL --json" "$(messages "$T_TMP/mpi.err")"
fi

# serve_url LABEL MODEL OPTS...: a 2-rank serve of MODEL in the
# background (sockets in $T_TMP/sock-LABEL, ready file $T_TMP/ready-LABEL,
# output in $T_TMP/LABEL.out and .err, its pid in serve_pid); 0 once it
# is ready, else one failed TAP line.
serve_url() {
  local label=$1 model=$2; shift 2
  "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" serve "$model" \
    --socket-dir "$T_TMP/sock-$label" --ready-file "$T_TMP/ready-$label" \
    "$@" >"$T_TMP/$label.out" 2>"$T_TMP/$label.err" &
  serve_pid=$!
  if wait_until up_or_gone_file "$T_TMP/ready-$label" "$serve_pid" &&
    [ -f "$T_TMP/ready-$label" ]; then
    return 0
  fi
  t_fail "serve $label: ready" "$(messages "$T_TMP/$label.err")"
  return 1
}

# serve_url_end NAME LABEL: --shutdown to the job; NAME passes when it
# ends with exit 0.
serve_url_end() {
  "$TPLOAD" status "$T_TMP/sock-$2/rank0.sock" --shutdown >/dev/null 2>&1
  wait_until gone "$serve_pid" || kill "$serve_pid"
  wait "$serve_pid"
  t_exit "$1" 0 test $? -eq 0
}

# serve of a URL: ready, healthy, ended by --shutdown
if serve_url plain "$U/index/" --plan "$M/index/plan.json" --quiet; then
  t_exit "serve of a URL: ready and healthy" 0 "$TPLOAD" status \
    "$T_TMP/sock-plain/rank1.sock" --health
fi
serve_url_end "... and ends with exit 0 after --shutdown" plain

# A presigned-style query (nginx answers 403 to a GET without it): served,
# reloaded with another presigned URL, reloaded without MODEL and by
# SIGHUP, every GET signed; the signature in no output, log or status.
SIG="X-Amz-Signature=5ig5ecret&X-Amz-Expires=600"
SK="$T_TMP/sock-signed"
: >"$NGX_DIR/access.log"
# generation_at N: the ready file names generation N, or a reload failed
generation_at() {
  grep -q "\"generation\": *$1\b" "$T_TMP/ready-signed" 2>/dev/null ||
    grep -q "reload failed" "$T_TMP/signed.err"
}
if serve_url signed "$U/signed/index/?$SIG" --plan "$M/index/plan.json"; then
  t_exit "reload SOCK with a presigned file URL" 0 "$TPLOAD" reload \
    "$SK/rank1.sock" "$U/signed/single/model.safetensors?$SIG" \
    --plan "$M/single/plan.json"
  cp "$T_TMP/out" "$T_TMP/signed-r1.out"; cp "$T_TMP/err" "$T_TMP/signed-r1.err"
  grep -q "^generation 2: $U/signed/single/model.safetensors?\.\.\.$" \
    "$T_TMP/signed-r1.out" && t_ok "... prints generation 2 and the URL masked" ||
    t_fail "reload's line" "$(cat "$T_TMP/signed-r1.out")"
  t_exit "reload SOCK without MODEL keeps the URL's query" 0 "$TPLOAD" reload \
    "$SK/rank0.sock"
  cp "$T_TMP/out" "$T_TMP/signed-r2.out"; cp "$T_TMP/err" "$T_TMP/signed-r2.err"
  "$TPLOAD" status "$SK/rank0.sock" --json --summary \
    >"$T_TMP/signed-st.json" 2>&1
  pid0=$("$ORACLE" -c 'import json, sys
print(json.load(open(sys.argv[1]))["ranks"][0]["pid"])' "$T_TMP/signed-st.json")
  kill -HUP "$pid0"
  wait_until generation_at 4
  if grep -q '"generation": *4\b' "$T_TMP/ready-signed"; then
    t_ok "SIGHUP of a job served from a presigned URL: generation 4"
  else
    t_fail "SIGHUP of a presigned URL" "$(cat "$T_TMP/ready-signed")" \
      "$(tail -n 5 "$T_TMP/signed.err")"
  fi
  t_exit "... and it is still healthy" 0 "$TPLOAD" status "$SK/rank1.sock" \
    --health
fi
serve_url_end "... ends with exit 0 after --shutdown" signed
# (a presigned file URL signs that file only: its config.json goes
# unsigned by design, url.h, and is refused)
n403=$(awk '$2 ~ /^\/signed\// && $2 !~ /config\.json$/ && $3 == 403' \
  "$NGX_DIR/access.log" | wc -l)
nget=$(awk '$2 ~ /^\/signed\/single\//' "$NGX_DIR/access.log" | wc -l)
if [ "$n403" -eq 0 ] && [ "$nget" -gt 0 ]; then
  t_ok "every GET of the job and its reloads was signed ($nget of the file)"
else
  t_fail "signed GETs" "$n403 refused" \
    "$(grep "^GET /signed/.* 403 " "$NGX_DIR/access.log" | head -n 5)"
fi
if grep -l 5ig5ecret "$T_TMP"/signed* >"$T_TMP/leak" 2>/dev/null; then
  t_fail "the signature is never printed" "in: $(cat "$T_TMP/leak")" \
    "$(grep -h 5ig5ecret "$T_TMP"/signed* | head -n 3)"
else
  t_ok "the signature is in no output, daemon log or status"
fi

# Rate-limited (8 MiB/s per connection): 24 MiB in ranged GETs of at most
# 4 MiB, several connections at once, every byte of the data once.
log="$NGX_DIR/access.log"
: >"$log"
if mpi 2 load "$U/slow/big/model.safetensors" --plan "$M/big/plan.json" \
    --http-connections 4 --quiet 2>"$T_TMP/mpi.err"; then
  t_ok "load through limit_rate"
else
  t_fail "load through limit_rate" "$(messages "$T_TMP/mpi.err")"
fi
size=$(stat -c %s "$M/big/model.safetensors")
"$ORACLE" - "$log" "$size" <<'PY' >"$T_TMP/rate.out" 2>&1
import sys
lines = [l.split() for l in open(sys.argv[1])]
size = int(sys.argv[2])
data = [l for l in lines if l[1] == "/slow/big/model.safetensors"
        and l[2] == "206"]
conns = {l[5] for l in data}
body = sum(int(l[4]) for l in data)
hdr = min(int(l[3].strip('"').split("=")[1].split("-")[1]) + 1
          for l in data if '"bytes=0-' in l[3])
assert len(data) >= 6, "expected at least 6 ranged GETs, found %d" % len(data)
assert len(conns) >= 3, "expected GETs on 3 connections or more, " \
    "found %s" % sorted(conns)
# each byte once, but for the first GET's (the header's) overlap
assert size <= body <= size + hdr, (size, body, hdr)
print("# %d GETs on %d connections, %d body bytes" % (len(data), len(conns),
                                                      body))
PY
if [ $? -eq 0 ]; then
  t_ok "limit_rate: concurrent ranged GETs on several connections, each byte once"
else
  t_fail "limit_rate: concurrency" "$(cat "$T_TMP/rate.out")" \
    "$(head -c 1500 "$log")"
fi

for l in index mlc; do
  mpi 2 preshard "$M/$l" --out "$T_TMP/out-$l" --plan "$M/$l/plan.json" \
    --quiet 2>"$T_TMP/mpi.err" ||
    { echo "Bail out! preshard $l: $(messages "$T_TMP/mpi.err")"; exit 99; }
  t_oracle "preshard of the local $l model matches the oracle" \
    check-preshard "$M/$l" "$M/$l/plan.json" 2 "$T_TMP/out-$l"
  t_exit "verify $l URL: the output matches" 0 "$TPLOAD" verify "$U/$l/" \
    "$T_TMP/out-$l" --plan "$M/$l/plan.json"
done

# --layout mlc of a URL: the writer takes MODEL's sidecar files through
# its origin (the tokenizer files the chat config names, as nothing
# lists a URL's directory), so the output is the local directory's, file
# for file; verify --layout mlc reads the URL too.
"$TPLOAD" synth --arch llama --format mlc --hidden 256 --intermediate 512 \
  --layers 2 --vocab 256 --out "$M/mlcw" --quiet
echo '{"tokenizer": "copied unchanged"}' >"$M/mlcw/tokenizer.json"
"$ORACLE" -c 'import json, sys
p = sys.argv[1] + "/mlc-chat-config.json"
c = json.load(open(p))
c["tokenizer_files"] = ["tokenizer.json"]
json.dump(c, open(p, "w"), indent=2)' "$M/mlcw"
for from in "$M/mlcw" "$U/mlcw/"; do
  tag=local
  [ "$from" = "$M/mlcw" ] || tag=url
  mpi 2 preshard "$from" --out "$T_TMP/mlcw-$tag" --layout mlc --quiet \
    2>"$T_TMP/mpi.err" ||
    t_fail "preshard --layout mlc ($tag)" "$(messages "$T_TMP/mpi.err")"
done
t_check "preshard --layout mlc of the URL: the local output, file for file" \
  diff -r "$T_TMP/mlcw-local" "$T_TMP/mlcw-url"
t_check "... tokenizer.json copied" test -f "$T_TMP/mlcw-url/tokenizer.json"
t_exit "verify --layout mlc of the URL: the output matches" 0 \
  "$TPLOAD" verify "$U/mlcw/" "$T_TMP/mlcw-url" --layout mlc --quiet
t_exit "preshard --layout mlc of an HF URL: 64" 64 \
  mpi 2 preshard "$U/index/" --out "$T_TMP/hf-mlc" --layout mlc \
  --plan "$M/index/plan.json" --quiet
grep -q "MLC weight directory" "$T_TMP/err" &&
  t_ok "... saying an MLC weight directory is needed" ||
  t_fail "... saying an MLC weight directory is needed" "$(cat "$T_TMP/err")"

rm -rf "$T_TMP/bad"
cp -r "$T_TMP/out-index" "$T_TMP/bad"
"$ORACLE" -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[-1]^=1; open(p,"wb").write(b)' "$T_TMP/bad/rank1.safetensors"
t_exit "verify URL: a flipped byte of the output (65)" 65 "$TPLOAD" verify \
  "$U/index/" "$T_TMP/bad" --plan "$M/index/plan.json"

faults_start "$M"
# mid-load faults: a data GET of the big tensor cut once (retried, the
# shards still the oracle's), an object replaced after validation (74, no
# rank file left)
out="$T_TMP/cut"
if mpi 2 preshard "$FLT_URL/drop/single/model.safetensors" --out "$out" \
    --plan "$M/single/plan.json" --quiet 2>"$T_TMP/mpi.err"; then
  t_oracle "a connection cut mid-load is retried: the oracle's shards" \
    check-preshard "$M/single" "$M/single/plan.json" 2 "$out"
else
  t_fail "a cut mid-load" "$(messages "$T_TMP/mpi.err")"
fi
grep -q "/drop/single/model.safetensors .* 206" "$FLT_LOG" &&
  [ "$(grep -c "/drop/single/" "$FLT_LOG")" -ge 3 ] &&
  t_ok "... with a further GET for the rest" ||
  t_fail "the retry's GET" "$(cat "$FLT_LOG")"
for read in mpi local; do
  tag=replace1
  [ "$read" = local ] && tag=replace2 # a fresh count of requests
  mpi 2 preshard "$FLT_URL/$tag/index/" --out "$T_TMP/repl-$read" \
    --plan "$M/index/plan.json" --read "$read" --quiet 2>"$T_TMP/mpi.err"
  rc=$?
  left=$(ls -A "$T_TMP/repl-$read" 2>/dev/null)
  if [ $rc -eq 74 ] && [ -z "$left" ] &&
    messages "$T_TMP/mpi.err" | grep -q "changed while loading"; then
    t_ok "--read $read: an object replaced mid-load is 74, no file left"
  else
    t_fail "--read $read: replaced mid-load" "exit $rc, left: $left" \
      "$(messages "$T_TMP/mpi.err" | head -c 1500)"
  fi
done
t_exit "verify through the fault server's plain answers" 0 "$TPLOAD" verify \
  "$FLT_URL/ok/index/" "$T_TMP/out-index" --plan "$M/index/plan.json"
t_exit "verify: the model replaced on the server while read (74)" 74 \
  "$TPLOAD" verify "$FLT_URL/replace9/index/" "$T_TMP/out-index" \
  --plan "$M/index/plan.json"
grep -q "changed while loading (its ETag changed" "$T_TMP/err" &&
  t_ok "... naming the object that changed" ||
  t_fail "names the change" "$(cat "$T_TMP/err")"
t_done
