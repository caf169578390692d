#!/bin/bash
# http_cli.sh - MODEL URLs in the one-process commands, against nginx on
# loopback and a fault server of our own (oracle/http_faults.py): inspect
# and plan of a single file, a sharded index and an MLC directory must say
# what the files themselves say (oracle/http_check.py); every fault exits
# with its documented code and one message naming the URL; a token is sent
# and never printed; https with a self-signed certificate needs --ca-cert
# (and only that failure suggests it: not an expired or wrong-name one);
# libcurl is opened on the first URL (curl_dl.c): one that cannot be
# loaded is 70 with one message naming it, and a local MODEL never needs
# it.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/http_lib.sh"
O="$TESTS_SRCDIR/oracle/oracle.py"
C="$TESTS_SRCDIR/oracle/http_check.py"
W="$T_TMP/www"
mkdir -p "$W"
for l in single index mlc; do
  "$ORACLE" "$O" gen-model "$W/$l" --seed 7 --layout "$l" ||
    { echo "Bail out! oracle.py gen-model $l failed"; exit 99; }
done
mkdir -p "$W/auth" "$W/empty" "$W/broken"
ln -s ../single "$W/auth/single"
ln -s . "$W/norange"
ln -s . "$W/denied"
cp "$W/index/model.safetensors.index.json" "$W/broken/"
cp "$W/index/model-00001-of-00003.safetensors" "$W/broken/"
nginx_start nginx "$W" "" '
    location /norange/ { max_ranges 0; }
    location /denied/ { return 403; }
    location /moved/ { return 302 /single/model.safetensors; }
    location /auth/ {
      if ($http_authorization != "Bearer s3cret-Tok3n") { return 401; }
    }'
U=$NGX_URL

# expect_inspect NAME MODEL_DIR URL [OPTS...]: inspect URL --json says
# what the files say.
expect_inspect() {
  local name=$1 dir=$2 url=$3; shift 3
  if "$TPLOAD" inspect "$url" --json "$@" >"$T_TMP/i.json" 2>"$T_TMP/i.err" &&
    "$ORACLE" "$C" inspect "$dir" "$T_TMP/i.json" >/dev/null 2>"$T_TMP/c.err"
  then
    t_ok "$name"
  else
    t_fail "$name" "$(cat "$T_TMP/i.err" "$T_TMP/c.err" | head -c 2000)"
  fi
}

expect_inspect "a .safetensors URL" "$W/single" \
  "$U/single/model.safetensors"
expect_inspect "a directory URL with model.safetensors" "$W/single" \
  "$U/single/"
expect_inspect "a sharded index, directory URL without the last /" \
  "$W/index" "$U/index"
expect_inspect "an MLC directory URL" "$W/mlc" "$U/mlc/"

for l in single index mlc; do
  if "$TPLOAD" plan "$U/$l/" --shards 2 --plan "$W/$l/plan.json" \
      >"$T_TMP/p.json" 2>"$T_TMP/p.err" &&
    "$ORACLE" "$C" plan "$W/$l" "$W/$l/plan.json" 2 "$T_TMP/p.json" \
      >/dev/null 2>"$T_TMP/c.err"; then
    t_ok "plan $l URL --shards 2: the oracle's per-rank shapes"
  else
    t_fail "plan $l URL" "$(cat "$T_TMP/p.err" "$T_TMP/c.err" | head -c 2000)"
  fi
done

# --plan auto reads config.json from the same server: synth's llama
# (hidden 256, intermediate 512) cut 2 ways as DESIGN.md section 3 says
# (q_proj dim 0, down_proj dim 1)
"$TPLOAD" synth --arch llama --out "$W/llama" --quiet >/dev/null 2>&1 ||
  { echo "Bail out! synth failed"; exit 99; }
if "$TPLOAD" plan "$U/llama/" --shards 2 >"$T_TMP/p.json" 2>"$T_TMP/p.err" &&
  "$ORACLE" - "$T_TMP/p.json" <<'PY'
import json, sys
p = {q["name"]: q["shape"] for q in json.load(open(sys.argv[1]))["params"]}
assert p["model.layers.0.self_attn.q_proj.weight"] == [128, 256], p
assert p["model.layers.0.mlp.down_proj.weight"] == [256, 256], p
PY
then
  t_ok "plan --plan auto of a URL reads its config.json"
else
  t_fail "plan auto over a URL" "$(head -c 2000 "$T_TMP/p.err")"
fi
# the index's files came over one kept-alive connection after the JSON
if awk '$2 ~ /^\/index\/model-0000[123]/ && $7 > 1 { n++ } END { exit n < 3 }' \
    "$NGX_DIR/access.log"; then
  t_ok "the index's files reuse the connection (keep-alive)"
else
  t_fail "keep-alive" "$(grep /index/ "$NGX_DIR/access.log")"
fi

# expect_fail NAME CODE PATTERN ARGS...: tpload ARGS exits CODE with one
# message matching PATTERN.
expect_fail() {
  local name=$1 code=$2 pat=$3; shift 3
  t_exit "$name" "$code" "$TPLOAD" "$@"
  if [ "$code" -ne 0 ] && ! grep -q -- "$pat" "$T_TMP/err"; then
    t_fail "$name: message" "expected '$pat', found: $(cat "$T_TMP/err")"
  fi
}

expect_fail "plan auto without config.json on the server (66)" 66 \
  "$U/single/config.json: not found" plan "$U/single/" --shards 2
expect_fail "404 names the URL (66)" 66 "$U/nope/model.safetensors: HTTP 404" \
  inspect "$U/nope/model.safetensors"
expect_fail "a directory URL with no model (66)" 66 "found none" \
  inspect "$U/empty/"
expect_fail "a member file missing from the index (66)" 66 \
  "model-00002-of-00003.safetensors: HTTP 404" inspect "$U/broken/"
expect_fail "403 says a token or presigned URL is needed (77)" 77 \
  "HTTP 403: access denied.*TPLOAD_HTTP_TOKEN.*presigned" \
  inspect "$U/denied/single/model.safetensors"
expect_fail "no Range support (200 to a Range) is refused (69)" 69 \
  "does not serve byte ranges" inspect "$U/norange/single/model.safetensors"
expect_fail "401 without a token (77)" 77 "HTTP 401" \
  inspect "$U/auth/single/model.safetensors"
env TPLOAD_HTTP_TOKEN=s3cret-Tok3n "$TPLOAD" inspect --json \
  "$U/auth/single/model.safetensors" >"$T_TMP/i.json" 2>"$T_TMP/i.err" &&
  "$ORACLE" "$C" inspect "$W/single" "$T_TMP/i.json" >/dev/null 2>&1
t_exit "a token from TPLOAD_HTTP_TOKEN is sent" 0 test $? -eq 0
printf 's3cret-Tok3n\n' >"$T_TMP/token"
expect_fail "a token from --token-file is sent" 0 "" \
  inspect "$U/auth/single/model.safetensors" --token-file "$T_TMP/token"
TPLOAD_HTTP_TOKEN=wrong-Tok3n expect_fail "a refused token (77)" 77 \
  "refused the bearer token" inspect "$U/auth/single/model.safetensors"
if grep -q "Tok3n" "$T_TMP/err"; then
  t_fail "the token never appears in a message" "$(cat "$T_TMP/err")"
else
  t_ok "the token never appears in a message"
fi
printf 'a\nb\n' >"$T_TMP/badtoken"
expect_fail "a token of two lines is refused (64)" 64 "one line" \
  inspect "$U/single/" --token-file "$T_TMP/badtoken"
expect_fail "credentials in the URL are refused (64)" 64 "no credentials" \
  inspect "http://me:pw@127.0.0.1:1/m.safetensors"
expect_fail "an unreachable server, after the retries (69)" 69 \
  "after 1 retries" inspect "http://127.0.0.1:1/m.safetensors" --retries 1
expect_fail "--retries takes a number" 64 "--retries expects" \
  inspect "$U/single/" --retries many

expect_inspect "a redirect is followed" "$W/single" \
  "$U/moved/model.safetensors"

# A presigned-style query: passed through, never shown.
expect_inspect "a query string is passed through" "$W/single" \
  "$U/single/model.safetensors?X-Amz-Signature=abc123"
expect_fail "a query string never appears in a message" 66 \
  "model.safetensors?\.\.\.: HTTP 404" \
  inspect "$U/nope/model.safetensors?X-Amz-Signature=abc123"
if grep -q abc123 "$T_TMP/err"; then
  t_fail "the signature is hidden" "$(cat "$T_TMP/err")"
fi

# --- faults nginx cannot make ---
# A header longer than the first ranged GET (64 KiB), so the header takes
# two GETs: a second answer can differ from the first.
"$ORACLE" - "$W/long" <<'PY' || { echo "Bail out! long header"; exit 99; }
import os, sys
sys.path.insert(0, os.environ["TESTS_SRCDIR"] + "/oracle")
import numpy as np, npst
os.makedirs(sys.argv[1], exist_ok=True)
npst.write(os.path.join(sys.argv[1], "model.safetensors"),
           {"w": np.arange(4096, dtype="<f4")}, metadata={"pad": "x" * 90000})
PY
faults_start "$W"
F=$FLT_URL
expect_inspect "the fault server's plain answers" "$W/long" \
  "$F/ok/long/model.safetensors"
expect_inspect "a connection cut mid-body is retried" "$W/long" \
  "$F/drophead/long/model.safetensors"
# half of the first 64 KiB came before the cut: the retry asks for the rest
if grep -q "/drophead/long/model.safetensors bytes=32768-65535 206" "$FLT_LOG"
then t_ok "... resuming from the bytes it already had"
else t_fail "the retry" "$(cat "$FLT_LOG")"; fi
expect_fail "a cut body without retries (74)" 74 "cut after" \
  inspect "$F/drophead/single/model.safetensors" --retries 0
expect_inspect "503 twice, then served: retried" "$W/long" \
  "$F/busy/long/model.safetensors"
expect_fail "503 after the retries (69)" 69 "HTTP 503.*after 1 retries" \
  inspect "$F/busy/index/" --retries 1
expect_fail "an object replaced between two GETs (74)" 74 \
  "changed while loading (its ETag changed" \
  inspect "$F/replace/long/model.safetensors"
expect_fail "an object that grew between two GETs (74)" 74 \
  "changed while loading (its size changed" \
  inspect "$F/grow/long/model.safetensors"
expect_fail "a stalled transfer ends (--http-timeout, 69)" 69 "stalled" \
  inspect "$F/stall/single/model.safetensors" --http-timeout 1 --retries 0
# A JSON document's body cut short is an I/O error as a data body's is
expect_fail "an index's JSON cut short, no retries (74)" 74 \
  "model.safetensors.index.json: the transfer was cut after" \
  inspect "$F/dropwhole/index/" --retries 0
expect_fail "a tensor-cache.json cut short, no retries (74)" 74 \
  "tensor-cache.json: the transfer was cut after" \
  inspect "$F/dropwhole/mlc/" --retries 0
expect_inspect "a JSON document cut once is fetched again" "$W/index" \
  "$F/dropwhole2/index/"
expect_fail "a 200 KB response header says so (69)" 69 \
  "model.safetensors: response header larger than libcurl accepts" \
  inspect "$F/bighead/single/model.safetensors"
expect_fail "an unasked-for gzip body of a JSON document (69)" 69 \
  "index.json: the server sent the body with Content-Encoding: gzip" \
  inspect "$F/gzip/index/"
expect_fail "... and of a ranged GET (69)" 69 \
  "model.safetensors: the server sent the body with Content-Encoding: gzip" \
  inspect "$F/gzip/single/model.safetensors"

# --- https with a certificate of the test's own ---
if openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$T_TMP/key.pem" \
    -out "$T_TMP/cert.pem" >/dev/null 2>&1; then
  nginx_start tls "$W" "ssl http2" "
    ssl_certificate $T_TMP/cert.pem;
    ssl_certificate_key $T_TMP/key.pem;
    location /down/ { return 302 $U/single/model.safetensors; }"
  expect_fail "https with an unknown CA (69) says --ca-cert" 69 "ca-cert" \
    inspect "$NGX_URL/single/model.safetensors"
  expect_inspect "https with --ca-cert" "$W/index" "$NGX_URL/index/" \
    --ca-cert "$T_TMP/cert.pem"
  if grep -q "HTTP/2.0" "$NGX_DIR/access.log"; then
    t_ok "https: HTTP/2 where the server offers it"
  else
    t_fail "HTTP/2" "$(cat "$NGX_DIR/access.log")"
  fi
  expect_fail "https: no redirect down to http (69)" 69 "from https to https only" \
    inspect "$NGX_URL/down/model.safetensors" --ca-cert "$T_TMP/cert.pem"
  expect_fail "--ca-cert of a missing file (64)" 64 "no such file" \
    inspect "$NGX_URL/single/" --ca-cert "$T_TMP/none.pem"
else
  t_fail "openssl makes a certificate" "openssl req failed"
fi

# A CA of the test's own, trusted with --ca-cert, signing an expired
# certificate and one for another name: TLS failures (69) whose message
# gives no --ca-cert hint (a CA is not what is missing).
# t_tls_cert NAME DAYS SAN: NAME.pem and NAME.key signed by the test's CA.
t_tls_cert() {
  openssl req -newkey rsa:2048 -nodes -subj /CN=tpload-test \
    -keyout "$T_TMP/$1.key" -out "$T_TMP/$1.csr" >/dev/null 2>&1 &&
    printf 'subjectAltName=%s\n' "$3" >"$T_TMP/$1.ext" &&
    openssl x509 -req -in "$T_TMP/$1.csr" -CA "$T_TMP/ca.pem" \
      -CAkey "$T_TMP/ca.key" -CAcreateserial -days "$2" \
      -extfile "$T_TMP/$1.ext" -out "$T_TMP/$1.pem" >/dev/null 2>&1
}
if openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=tpload-ca \
    -keyout "$T_TMP/ca.key" -out "$T_TMP/ca.pem" >/dev/null 2>&1 &&
  t_tls_cert expired -1 IP:127.0.0.1 &&
  t_tls_cert othername 2 DNS:other.example; then
  for c in expired othername; do
    nginx_start "tls-$c" "$W" ssl "
    ssl_certificate $T_TMP/$c.pem;
    ssl_certificate_key $T_TMP/$c.key;"
    expect_fail "https, $c certificate of a trusted CA (69)" 69 "TLS:" \
      inspect "$NGX_URL/single/model.safetensors" --ca-cert "$T_TMP/ca.pem"
    if grep -q "ca-cert" "$T_TMP/err"; then
      t_fail "... without the --ca-cert hint" "$(cat "$T_TMP/err")"
    else
      t_ok "... without the --ca-cert hint"
    fi
  done
else
  t_fail "openssl makes a CA and its certificates" "openssl failed"
fi
# A libcurl.so.4 that is not a library, found first by the loader.
mkdir -p "$T_TMP/nocurl"
: >"$T_TMP/nocurl/libcurl.so.4"
t_exit "a libcurl that cannot be loaded: 70" 70 \
  env LD_LIBRARY_PATH="$T_TMP/nocurl" "$TPLOAD" inspect "$NGX_URL/single/"
if grep -q "libcurl: cannot load: .*libcurl.so.4" "$T_TMP/err"; then
  t_ok "... its message names libcurl.so.4"
else
  t_fail "... its message names libcurl.so.4" "$(head -c 1000 "$T_TMP/err")"
fi
t_exit "... a local MODEL loads without it" 0 \
  env LD_LIBRARY_PATH="$T_TMP/nocurl" "$TPLOAD" inspect "$W/single"
t_done
