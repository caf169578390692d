#!/bin/bash
# http_local_bytes.sh - `--read local` from a URL fetches each rank's own
# bytes, not whole tensors: at 2 and 4 ranks, on a model with a dim-0 cut
# (big.rows: a shard is one range) and a dim-1 cut (big.cols: strided
# pieces of each row), the bytes nginx sent (its access log's
# $body_bytes_sent) are at most 1.05 x what the ranks hold (the oracle's
# shards, summed over ranks) + every rank's read of the files' headers.
# Printed: the GETs, their response headers, and each big tensor's GETs
# and bytes against its ranks'.  The shards are the oracle's.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/http_lib.sh"

gen m --seed 3801 --layout index --big-mib 2
nginx_start nginx "$M" "" ""
log="$NGX_DIR/access.log"

# fetched N: preshard of the URL at N ranks by --read local, its shards
# against the oracle, and nginx's bytes against the ranks' share.
fetched() {
  local n=$1 out="$T_TMP/s-$1"
  : >"$log"
  if mpi "$n" preshard "$NGX_URL/m/" --out "$out" --plan "$M/m/plan.json" \
    --read local --quiet 2>"$T_TMP/mpi.err"; then
    t_oracle "--read local, $n ranks: the oracle's shards" \
      check-preshard "$M/m" "$M/m/plan.json" "$n" "$out"
  else
    t_fail "--read local, $n ranks" \
      "$(messages "$T_TMP/mpi.err" | head -c 2000)"
    return
  fi
  if "$ORACLE" - "$TESTS_SRCDIR/oracle" "$M/m" "$n" "$log" \
    >"$T_TMP/bytes.out" 2>&1 <<'PY'
import json, os, struct, sys
sys.path.insert(0, sys.argv[1])
import oracle
model, n, log = sys.argv[2], int(sys.argv[3]), sys.argv[4]
with open(os.path.join(model, "plan.json")) as f:
    rules = json.load(f)["rules"]
exp = oracle.expected_shards(oracle.read_model(model), rules, n)
held = sum(len(e["ranks"][r]) for e in exp for r in range(n))
heads, spans = 0, {}  # the files' 8 + header bytes; where tensors lie
for f in os.listdir(model):
    p = os.path.join(model, f)
    if f.endswith(".index.json"):
        heads += os.path.getsize(p)
    if not f.endswith(".safetensors"):
        continue
    with open(p, "rb") as fh:
        hlen = struct.unpack("<Q", fh.read(8))[0]
        hdr = json.loads(fh.read(hlen))
    heads += 8 + hlen
    for name, t in hdr.items():
        if name != "__metadata__":
            spans[name] = (f, [8 + hlen + x for x in t["data_offsets"]])
gets = [l for l in (l.split() for l in open(log)) if l[0] == "GET"]
body = sum(int(l[4]) for l in gets)
sent = sum(int(l[8]) for l in gets)  # $bytes_sent: + the response headers
top = 1.05 * held + n * heads
print("# %d ranks: nginx sent %d body bytes in %d GETs (+ %.0f bytes of "
      "response headers each); the ranks hold %d (%.3f x), + %d of the "
      "files' headers" % (n, body, len(gets), (sent - body) / len(gets), held,
                          body / held, n * heads))
for e in exp:  # the two big ones: their GETs' bytes against their ranks'
    if not e["name"].startswith("big."):
        continue
    f, (a, b) = spans[e["name"]]
    rs = [[int(x) for x in l[3].strip('"')[6:].split("-")]
          for l in gets if l[1].endswith("/" + f) and l[3] != '"-"']
    rs = [(max(x, a), min(y + 1, b)) for x, y in rs if x < b and y >= a]
    print("# %d ranks: %s (dim %d): %d GETs, %.3f x its ranks' bytes"
          % (n, e["name"], e["rule"]["dim"], len(rs),
             sum(y - x for x, y in rs) / float(sum(map(len, e["ranks"])))))
assert body <= top, "%d > 1.05 x %d + %d" % (body, held, n * heads)
PY
  then t_ok "--read local, $n ranks: nginx sent <= 1.05 x the ranks' bytes"
  else
    t_fail "--read local, $n ranks: nginx's bytes" "$(cat "$T_TMP/bytes.out")"
  fi
  grep "^#" "$T_TMP/bytes.out"
}

fetched 2
fetched 4
t_done
