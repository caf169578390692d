#!/bin/bash
# s3_mpi.sh - s3://bucket/prefix MODELs against a real S3 server: s3rver
# (npm, installed by scripts/install-s3rver.sh into the project's
# .local/) behind tests/oracle/s3_proxy.py, which verifies every
# request's AWS Signature V4 with an implementation of its own (s3rver
# checks none), itself checked first against AWS's published example and
# shown here to refuse an unsigned request and a wrong secret.  Preshard
# of a bare prefix holding one model.safetensors, of a sharded index and
# of an MLC directory at 2 ranks, --read mpi (credentials from the
# environment) and --read local (every rank signing with a profile's
# temporary key and session token, from ~/.aws/credentials and
# ~/.aws/config), and at 4 ranks, each rank's shards the numpy oracle's;
# a wrong secret is 77, a missing prefix or object 66, a wrong session
# token 77, an object replaced while the load is held mid-stream 74, a
# skewed clock a message saying so, an endpoint down 69 after the
# retries; the report and serve's status name s3://bucket/key and the
# region/endpoint; a reload to the next version at another prefix serves
# the oracle's shards of it on every rank; plan prints what it prints for
# the local copy, from header fetches only; no secret appears in any
# output.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/http_lib.sh"

S3RVER=${TPLOAD_S3RVER:-$TESTS_SRCDIR/../.local/s3rver/node_modules/.bin/s3rver}
if [ ! -x "$S3RVER" ]; then
  echo "1..0 # SKIP s3rver not found at $S3RVER" \
    "(scripts/install-deps.sh installs it with npm)"
  exit 0
fi
PROXY="$TESTS_SRCDIR/oracle/s3_proxy.py"
BUCKET=tpl-models
REGION=eu-central-2
KEY_ID=AKIDTPLOADTEST0001
SECRET='tpl/Secret+Key0fTheT3st'
TMP_ID=ASIATPLOADTEMP0002
TMP_SECRET='tmp/S3cretOfTheSessi0n'
TOKEN='FwoGZXIvYXdzEXAMPLEsessionTOKEN/+tpl=='

if "$ORACLE" "$PROXY" selftest >"$T_TMP/self.out" 2>&1; then
  t_ok "the verifier signs AWS's GET Object example as AWS documents"
else
  t_fail "the verifier against AWS's example" "$(cat "$T_TMP/self.out")"
fi

gen single --seed 3901 --layout single
gen index --seed 3902 --layout index --big-mib 2
gen mlc --seed 3903 --layout mlc --big-mib 2

# s3rver on a free port, its bucket made at start
s3rver_start() {
  local try pid
  for try in 1 2 3 4 5; do
    S3_PORT=$(free_port)
    "$S3RVER" -d "$T_TMP/s3data" -a 127.0.0.1 -p "$S3_PORT" -s \
      --configure-bucket "$BUCKET" >"$T_TMP/s3rver.log" 2>&1 &
    pid=$!
    wait_until up_or_gone "$S3_PORT" "$pid"
    if alive "$pid" && accepts "$S3_PORT"; then
      HTTP_PIDS="$HTTP_PIDS $pid"
      return 0
    fi
  done
  echo "Bail out! s3rver did not start: $(tail -n 3 "$T_TMP/s3rver.log")"
  exit 99
}

# proxy_start NAME SKEW: a verifier in front of s3rver; sets PROXY_URL.
proxy_start() {
  local pid
  "$ORACLE" "$PROXY" serve "$S3_PORT" "$T_TMP/keys.json" "$REGION" \
    "$T_TMP/$1.port" "$T_TMP/$1.log" "$2" 2>"$T_TMP/$1.err" &
  pid=$!
  HTTP_PIDS="$HTTP_PIDS $pid"
  wait_until test -s "$T_TMP/$1.port" ||
    { echo "Bail out! s3_proxy.py did not start: $(cat "$T_TMP/$1.err")"; exit 99; }
  PROXY_URL="http://127.0.0.1:$(cat "$T_TMP/$1.port")"
}

# upload DIR PREFIX: every file of DIR as PREFIX/NAME, straight to s3rver
upload() {
  "$ORACLE" - "$S3_PORT" "$BUCKET" "$@" <<'PY'
import http.client, os, sys
port, bucket, d, prefix = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", port)
for name in sorted(os.listdir(d)):
    with open(os.path.join(d, name), "rb") as f:
        c.request("PUT", "/%s/%s/%s" % (bucket, prefix, name), body=f.read())
    r = c.getresponse()
    r.read()
    assert r.status == 200, (name, r.status)
PY
}

s3rver_start
cat >"$T_TMP/keys.json" <<EOF
{"$KEY_ID": {"secret": "$SECRET", "token": null},
 "$TMP_ID": {"secret": "$TMP_SECRET", "token": "$TOKEN"}}
EOF
proxy_start proxy 0
upload "$M/single" ckpt/single || { echo "Bail out! upload failed"; exit 99; }
upload "$M/index" ckpt/index || { echo "Bail out! upload failed"; exit 99; }
upload "$M/mlc" ckpt/mlc || { echo "Bail out! upload failed"; exit 99; }
perturb_dir "$M/index" "$M/index-b" || { echo "Bail out! perturb"; exit 99; }
upload "$M/index-b" ckpt/index-b || { echo "Bail out! upload failed"; exit 99; }

# The verifier refuses an unsigned GET (s3rver alone would serve it)
"$ORACLE" - "${PROXY_URL##*:}" "$S3_PORT" "/$BUCKET/ckpt/single/model.safetensors" \
  <<'PY' >"$T_TMP/unsigned.out" 2>&1
import http.client, sys
proxy, direct, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def status(port):
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("GET", path)
    return c.getresponse().status
assert (status(direct), status(proxy)) == (200, 403), \
    (status(direct), status(proxy))
PY
if [ $? -eq 0 ]; then
  t_ok "an unsigned GET: 200 from s3rver, 403 from the verifier"
else
  t_fail "an unsigned GET" "$(cat "$T_TMP/unsigned.out")"
fi

# The environment's credentials (no profile files)
export HOME="$T_TMP/home"
mkdir -p "$HOME"
with_env() {
  AWS_ACCESS_KEY_ID=$KEY_ID AWS_SECRET_ACCESS_KEY=$SECRET AWS_REGION=$REGION \
    AWS_ENDPOINT_URL=$PROXY_URL "$@"
}
remote_shards "s3://$BUCKET/ckpt/single/" single mpi with_env
remote_shards "s3://$BUCKET/ckpt/index/" index mpi with_env
remote_shards "s3://$BUCKET/ckpt/mlc/" mlc mpi with_env
RS_NP=4 remote_shards "s3://$BUCKET/ckpt/index/" index mpi with_env
RS_NP=4 remote_shards "s3://$BUCKET/ckpt/mlc/" mlc local with_env

# A profile with a temporary key and its session token: the credentials
# file has the keys, the config file the region and endpoint; every rank
# (--read local) reads them and signs.
mkdir -p "$HOME/.aws"
cat >"$HOME/.aws/credentials" <<EOF
[default]
aws_access_key_id = AKIDNOTTHISONE
aws_secret_access_key = not-this-one

[tpl-test]
aws_access_key_id = $TMP_ID
aws_secret_access_key = $TMP_SECRET
aws_session_token = $TOKEN
EOF
cat >"$HOME/.aws/config" <<EOF
[profile tpl-test]
region = $REGION
endpoint_url = $PROXY_URL
EOF
with_profile() { AWS_PROFILE=tpl-test "$@"; }
: >"$T_TMP/proxy.log"
remote_shards "s3://$BUCKET/ckpt/single/" single local with_profile
remote_shards "s3://$BUCKET/ckpt/index/" index local with_profile
remote_shards "s3://$BUCKET/ckpt/mlc/" mlc local with_profile
if grep -q " 206 - " "$T_TMP/proxy.log" &&
  ! grep -q " 403 " "$T_TMP/proxy.log"; then
  t_ok "... every rank's GETs signed with the session token (no 403)"
else
  t_fail "... the profile's GETs" "$(head -c 1500 "$T_TMP/proxy.log")"
fi

# The load's report: s3://bucket/key, the region and the endpoint
if with_env mpi 2 load "s3://$BUCKET/ckpt/index/" --plan "$M/index/plan.json" \
    --json >"$T_TMP/report.json" 2>"$T_TMP/mpi.err"; then
  t_oracle "load s3:// index --json: the report's bytes" check-report \
    "$M/index" "$M/index/plan.json" 2 "$T_TMP/report.json"
  if grep -q "s3://$BUCKET/ckpt/index (region $REGION, endpoint $PROXY_URL)" \
      "$T_TMP/report.json" && grep -q "s3://$BUCKET/ckpt/index/model-" \
      "$T_TMP/report.json"; then
    t_ok "... it names s3://bucket/key, the region and the endpoint"
  else
    t_fail "... the report's names" "$(head -c 1500 "$T_TMP/report.json")"
  fi
else
  t_fail "load s3:// index --json" "$(messages "$T_TMP/mpi.err")"
fi
cat "$T_TMP/report.json" "$T_TMP/mpi.err" >>"$ALL"

# serve: status names the model as the report does, and no secret; a
# reload to the next version, at another prefix
t_serve_remote "serve of s3://: status names s3://bucket/prefix and the region" \
  "s3://$BUCKET/ckpt/index/" "s3://$BUCKET/ckpt/index (region $REGION" with_env
t_reload_to 2 index-b \
  "s3://$BUCKET/ckpt/index-b (region $REGION, endpoint $PROXY_URL)" \
  "s3://$BUCKET/ckpt/index-b/"
serve_remote_end

# plan: the header fetches of a local plan, through the verifier
t_plan_as_local "s3://$BUCKET/ckpt/index/" index "$T_TMP/proxy.log" -- with_env
t_plan_as_local "s3://$BUCKET/ckpt/mlc/" mlc "$T_TMP/proxy.log" -- with_env

with_wrong() { with_env env AWS_SECRET_ACCESS_KEY=wrong-secret "$@"; }
expect_fail "a wrong secret: 77, SignatureDoesNotMatch explained" 77 \
  "HTTP 403 SignatureDoesNotMatch: .*secret access key from the environment" \
  with_wrong "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" load "s3://$BUCKET/ckpt/index/" --plan "$M/index/plan.json" --quiet
grep -q "SignatureDoesNotMatch" "$T_TMP/proxy.log" &&
  t_ok "... the verifier refused the signature" ||
  t_fail "... the verifier's log" "$(tail -n 5 "$T_TMP/proxy.log")"
expect_fail "a missing prefix: 66" 66 "s3://$BUCKET/ckpt/none: expected" \
  with_env mpi 2 load "s3://$BUCKET/ckpt/none/" --quiet
expect_fail "a missing object: 66" 66 \
  "s3://$BUCKET/ckpt/none.safetensors: HTTP 404" \
  with_env "$TPLOAD" inspect "s3://$BUCKET/ckpt/none.safetensors"
expect_fail "a session token from the environment, a wrong one: 77" 77 \
  "InvalidToken: the session token from the environment" \
  env AWS_ACCESS_KEY_ID=$TMP_ID AWS_SECRET_ACCESS_KEY=$TMP_SECRET \
  AWS_SESSION_TOKEN=not-the-token AWS_REGION=$REGION \
  AWS_ENDPOINT_URL=$PROXY_URL "$TPLOAD" inspect "s3://$BUCKET/ckpt/single/"
if env AWS_ACCESS_KEY_ID=$TMP_ID AWS_SECRET_ACCESS_KEY=$TMP_SECRET \
    AWS_SESSION_TOKEN=$TOKEN AWS_REGION=$REGION AWS_ENDPOINT_URL=$PROXY_URL \
    "$TPLOAD" inspect "s3://$BUCKET/ckpt/single/model.safetensors" \
    >"$T_TMP/inspect.out" 2>"$T_TMP/inspect.err" &&
  grep -q "model.safetensors" "$T_TMP/inspect.out"; then
  t_ok "... the right one: inspect of the object"
else
  t_fail "inspect with AWS_SESSION_TOKEN" "$(cat "$T_TMP/inspect.err")"
fi
cat "$T_TMP/inspect.out" "$T_TMP/inspect.err" >>"$ALL"

# An object replaced mid-load: rank 1 stops itself before it receives
# (the test hook TPLOAD_TEST_SIGSTOP_AT=deliver), so rank 0, which reads
# for both, is held part way through the 16 MiB object (1 MiB chunks,
# one GET in flight); the object is PUT again with one data byte changed
# (s3rver's ETag is its MD5), then rank 1 resumes: rank 0's next GET
# meets another ETag, 74.
gen big --seed 3904 --layout single --big-mib 16
upload "$M/big" ckpt/big || { echo "Bail out! upload failed"; exit 99; }
env AWS_ACCESS_KEY_ID=$KEY_ID AWS_SECRET_ACCESS_KEY=$SECRET \
  AWS_REGION=$REGION AWS_ENDPOINT_URL=$PROXY_URL \
  TPLOAD_TEST_SIGSTOP_AT=deliver TPLOAD_TEST_SIGSTOP_RANK=1 \
  "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" load "s3://$BUCKET/ckpt/big/" \
  --plan "$M/big/plan.json" --chunk-mib 1 --http-connections 1 \
  --stall-timeout 0 --quiet >>"$ALL" 2>"$T_TMP/repl.err" &
job=$!
wait_until held_or_ended "$job"
ranks=$(pgrep -P "$job" -d ' ')
"$ORACLE" - "$S3_PORT" "/$BUCKET/ckpt/big/model.safetensors" \
  "$M/big/model.safetensors" <<'PY' || t_fail "the replacement's PUT"
import http.client, sys
data = bytearray(open(sys.argv[3], "rb").read())
data[-1] ^= 0xFF
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
c.request("PUT", sys.argv[2], body=bytes(data))
assert c.getresponse().status == 200
PY
kill -CONT $ranks 2>/dev/null
wait "$job"
rc=$?
cat "$T_TMP/repl.err" >>"$ALL"
if [ "$rc" -eq 74 ] && messages "$T_TMP/repl.err" | grep -qF \
    "s3://$BUCKET/ckpt/big/model.safetensors: changed while loading (its ETag"; then
  t_ok "an object replaced mid-load: 74, naming s3://bucket/key"
else
  t_fail "an object replaced mid-load" "exit $rc (ranks: $ranks)" \
    "$(messages "$T_TMP/repl.err" | head -c 1500)"
fi

# The endpoint down: retried, then 69
port=$(free_port)
expect_fail "the endpoint down: 69 after the retries" 69 "(after 1 retries)" \
  env AWS_ACCESS_KEY_ID=$KEY_ID AWS_SECRET_ACCESS_KEY=$SECRET \
  AWS_REGION=$REGION AWS_ENDPOINT_URL=http://127.0.0.1:$port \
  "$TPLOAD" inspect "s3://$BUCKET/ckpt/single/" --retries 1

# A clock an hour off (the verifier's, shifted): the message says so
proxy_start skewed 3600
expect_fail "a skewed clock: 77, RequestTimeTooSkewed explained" 77 \
  "RequestTimeTooSkewed: this machine's clock differs" \
  env AWS_ACCESS_KEY_ID=$KEY_ID AWS_SECRET_ACCESS_KEY=$SECRET \
  AWS_REGION=$REGION AWS_ENDPOINT_URL=$PROXY_URL \
  "$TPLOAD" inspect "s3://$BUCKET/ckpt/single/"

# No secret in anything tpload printed
no_secret_in_output "no secret key or session token in any output or report" \
  "$SECRET" "$TMP_SECRET" "$TOKEN" wrong-secret not-the-token
t_done
