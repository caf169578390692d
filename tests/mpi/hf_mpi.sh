#!/bin/bash
# hf_mpi.sh - hf://org/name[@revision] MODELs against nginx laid out as
# the Hugging Face hub answers (huggingface_hub's hf_hub_url and its
# revision API): a hub server whose /api/models/ORG/NAME/revision/REV
# gives the commit ("sha") and whose /ORG/NAME/resolve/COMMIT/FILE
# answers 302 to a second nginx, the content server, which serves the
# bytes with ETags and answers 418 to any request carrying an
# Authorization header.  A public model at main (--read mpi) and at a tag
# (--read local, every rank) gives the oracle's shards; only commit URLs
# are ever resolved (main is pinned before any file is read); a commit
# given is used without the API; a gated model without a token is 77
# with the advice, with HF_TOKEN or the token file a load whose token
# never reached the content server; main moved to another commit while
# the load is held mid-stream: the load finishes with every file of the
# commit main had at its start; plan prints what it prints for the local
# copy, from header fetches only; a serve at a commit reloaded to main
# serves main's commit, and once main moves again a reload without MODEL
# (SIGHUP's) serves the new one; no token in any output.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/http_lib.sh"

C1=0123456789abcdef0123456789abcdef01234567
C2=fedcba9876543210fedcba9876543210fedcba98
TOKEN=hf_TplTestTokenNotARealOne42

gen index --seed 3911 --layout index --big-mib 2
gen single --seed 3912 --layout single --big-mib 2

# The content server: ORG/NAME/COMMIT/FILE
mkdir -p "$T_TMP/cdn/org/pub" "$T_TMP/cdn/org/gated"
ln -s "$M/index" "$T_TMP/cdn/org/pub/$C1"
ln -s "$M/single" "$T_TMP/cdn/org/gated/$C2"
nginx_start cdn "$T_TMP/cdn" "" '
    if ($http_authorization != "") { return 418; }'
CDN_PORT=$NGX_PORT
CDN_LOG="$NGX_DIR/access.log"

# The hub: the revision API as files, resolve/COMMIT as redirects
api="$T_TMP/hub/api/models/org"
mkdir -p "$api/pub/revision" "$api/gated/revision"
printf '{"id": "org/pub", "sha": "%s"}\n' "$C1" >"$api/pub/revision/main"
printf '{"id": "org/pub", "sha": "%s"}\n' "$C1" >"$api/pub/revision/v1.0"
printf '{"id": "org/gated", "sha": "%s"}\n' "$C2" >"$api/gated/revision/main"
nginx_start hub "$T_TMP/hub" "" "
    location /api/ { default_type application/json; }
    location ~ \"^/org/gated/resolve/([0-9a-f]{40})/(.+)\$\" {
      if (\$http_authorization != \"Bearer $TOKEN\") { return 401; }
      return 302 http://127.0.0.1:$CDN_PORT/org/gated/\$1/\$2;
    }
    location ~ \"^/([^/]+)/([^/]+)/resolve/([0-9a-f]{40})/(.+)\$\" {
      return 302 http://127.0.0.1:$CDN_PORT/\$1/\$2/\$3/\$4;
    }"
HUB_LOG="$NGX_DIR/access.log"
export HF_ENDPOINT=$NGX_URL
export HOME="$T_TMP/home"
mkdir -p "$HOME"

remote_shards hf://org/pub index mpi
remote_shards hf://org/pub@v1.0 index local
if grep -q "/resolve/$C1/model.safetensors.index.json 302" "$HUB_LOG" &&
  ! grep "/resolve/" "$HUB_LOG" | grep -qv "/resolve/$C1/"; then
  t_ok "every file resolved at the pinned commit, never at main or v1.0"
else
  t_fail "resolved revisions" "$(head -c 1500 "$HUB_LOG")"
fi
if [ "$(grep -c "GET /api/models/org/pub/revision/" "$HUB_LOG")" -eq 2 ]; then
  t_ok "... one revision lookup per load (rank 0's)"
else
  t_fail "... revision lookups" "$(grep /api/ "$HUB_LOG")"
fi

# The report names the repository, its commit, the revision and the hub
if mpi 2 load hf://org/pub --plan "$M/index/plan.json" --json \
    >"$T_TMP/report.json" 2>"$T_TMP/mpi.err" &&
  grep -qF "hf://org/pub@$C1 (revision main, endpoint $NGX_URL)" \
    "$T_TMP/report.json"; then
  t_ok "the report: hf://org/pub@COMMIT (revision main, endpoint E)"
else
  t_fail "the report's model" "$(messages "$T_TMP/mpi.err")" \
    "$(grep '"model"' "$T_TMP/report.json")"
fi
cat "$T_TMP/report.json" "$T_TMP/mpi.err" >>"$ALL"

: >"$HUB_LOG"
if "$TPLOAD" inspect "hf://org/pub@$C1" >"$T_TMP/i.out" 2>"$T_TMP/i.err" &&
  grep -q "model-00001-of" "$T_TMP/i.out" && ! grep -q /api/ "$HUB_LOG"; then
  t_ok "a commit as the revision: used as it is, no revision lookup"
else
  t_fail "inspect at a commit" "$(cat "$T_TMP/i.err")" "$(cat "$HUB_LOG")"
fi
cat "$T_TMP/i.out" "$T_TMP/i.err" >>"$ALL"

expect_fail "a gated model without a token: 77, the advice" 77 \
  "HTTP 401: gated or private model: accept its licence on the hub and set HF_TOKEN" \
  mpi 2 load hf://org/gated --plan "$M/single/plan.json" --quiet
expect_fail "a missing revision: 66" 66 "hf://org/pub@nope .*HTTP 404" \
  "$TPLOAD" inspect hf://org/pub@nope
expect_fail "a wrong token: 77, the token refused" 77 \
  "HTTP 401: the hub refused the token from HF_TOKEN" \
  env HF_TOKEN=hf_wrong "$TPLOAD" inspect hf://org/gated

# With the token: HF_TOKEN (every rank, --read local), then the file
: >"$CDN_LOG"
with_token() { HF_TOKEN=$TOKEN "$@"; }
remote_shards hf://org/gated single local with_token
mkdir -p "$HOME/.cache/huggingface"
printf '%s\n' "$TOKEN" >"$HOME/.cache/huggingface/token"
remote_shards hf://org/gated single mpi
if grep -q "/org/gated/$C2/model.safetensors 206" "$CDN_LOG" &&
  ! grep -q " 418 " "$CDN_LOG"; then
  t_ok "the token went to the hub only, never to the content server"
else
  t_fail "the content server's log" "$(head -c 1500 "$CDN_LOG")"
fi

# main moved mid-load: org/moving's main is commit C1 (model A) when the
# load starts; --read local, rank 1 stops itself once its files are open
# and before it reads a byte (TPLOAD_TEST_SIGSTOP_AT=deliver); the hub's
# revision file is then swapped so that main is C3 (model B: A with every
# data byte changed, same names and sizes), and rank 1 resumes.  Every
# rank's shards are A's, the report names C1, and rank 1's reads after
# the move went to C1's objects, never C3's.
C3=5c3a1f0e9d8b7a6c5d4e3f2a1b0c9d8e7f6a5b4c
perturb_dir "$M/index" "$M/index-b" || { echo "Bail out! perturb"; exit 99; }
mkdir -p "$T_TMP/cdn/org/moving" "$api/moving/revision"
ln -s "$M/index" "$T_TMP/cdn/org/moving/$C1"
ln -s "$M/index-b" "$T_TMP/cdn/org/moving/$C3"
printf '{"id": "org/moving", "sha": "%s"}\n' "$C1" >"$api/moving/revision/main"
TPLOAD_TEST_SIGSTOP_AT=deliver TPLOAD_TEST_SIGSTOP_RANK=1 \
  "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" preshard hf://org/moving \
  --out "$T_TMP/moved" --plan "$M/index/plan.json" --read local \
  --chunk-mib 1 --stall-timeout 0 --json >"$T_TMP/moved.json" \
  2>"$T_TMP/moved.err" &
job=$!
wait_until held_or_ended "$job"
ranks=$(pgrep -P "$job" -d ' ')
: >"$HUB_LOG"
: >"$CDN_LOG"
printf '{"id": "org/moving", "sha": "%s"}\n' "$C3" >"$api/moving/revision/new"
mv "$api/moving/revision/new" "$api/moving/revision/main"
"$ORACLE" -c 'import json, sys, urllib.request
sha = json.load(urllib.request.urlopen(sys.argv[1]))["sha"]
assert sha == sys.argv[2], sha' \
  "$HF_ENDPOINT/api/models/org/moving/revision/main" "$C3" ||
  t_fail "the hub answers main = C3 once moved"
kill -CONT $ranks 2>/dev/null
wait "$job"
rc=$?
cat "$T_TMP/moved.json" "$T_TMP/moved.err" >>"$ALL"
if [ "$rc" -eq 0 ]; then
  t_oracle "main moved mid-load: every rank's shards are commit C1's" \
    check-preshard "$M/index" "$M/index/plan.json" 2 "$T_TMP/moved"
else
  t_fail "main moved mid-load: the load" "exit $rc (ranks: $ranks)" \
    "$(messages "$T_TMP/moved.err" | head -c 1500)"
fi
if grep -qF "hf://org/moving@$C1 (revision main" "$T_TMP/moved.json"; then
  t_ok "... the report names C1"
else
  t_fail "... the report names C1" "$(grep '"model"' "$T_TMP/moved.json")"
fi
if grep -q "GET /org/moving/$C1/model-.* 206 " "$CDN_LOG" &&
  ! grep -q "$C3" "$HUB_LOG" "$CDN_LOG"; then
  t_ok "... rank 1 read C1's objects after the move, nothing of C3"
else
  t_fail "... the reads after the move" "$(head -c 1000 "$HUB_LOG")" \
    "$(head -c 1000 "$CDN_LOG")"
fi

# plan: the header fetches of a local plan, through the hub's redirects
t_plan_as_local hf://org/pub index "$HUB_LOG" "$CDN_LOG"
t_plan_as_local hf://org/gated single "$HUB_LOG" "$CDN_LOG" -- with_token

# serve at commit C1, then reload of main, which is now C3 (model B);
# main moved back to C1, a reload without MODEL (what SIGHUP does)
# resolves main again
t_serve_remote "serve of hf://org/name@COMMIT: status names the commit" \
  "hf://org/moving@$C1" "hf://org/moving@$C1 (revision $C1"
t_reload_to 2 index-b \
  "hf://org/moving@$C3 (revision main, endpoint $HF_ENDPOINT)" hf://org/moving
printf '{"id": "org/moving", "sha": "%s"}\n' "$C1" >"$api/moving/revision/new"
mv "$api/moving/revision/new" "$api/moving/revision/main"
t_reload_to 3 index "hf://org/moving@$C1 (revision main, endpoint $HF_ENDPOINT)"
serve_remote_end

no_secret_in_output "no token in any output or report" "$TOKEN" hf_wrong
t_done
