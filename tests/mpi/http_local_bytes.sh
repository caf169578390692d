#!/bin/bash
# http_local_bytes.sh - `--read local` from a URL fetches each rank's own
# bytes, not whole tensors, and joins pieces into GETs as --read-gap says:
# at 2 and 4 ranks, on a model with a dim-0 cut (big.rows: a shard is one
# range) and a dim-1 cut (big.cols: strided pieces of each row), fetched
# twice.  With --read-gap 0 the bytes nginx sent (its access log's
# $body_bytes_sent) are at most 1.05 x what the ranks hold (the oracle's
# shards, summed over ranks) + every rank's read of the files' headers.
# With the default gap (G = 8192 for http), each GET fewer than at gap 0
# is a join of two pieces at most G apart: GETs <= gap 0's, and bytes <=
# gap 0's + G x (gap 0's GETs - these).  Both: the report's per-rank
# `gets` add up to nginx's ranged GETs of tensor bytes (the rest are
# rank 0's validation).  Printed for each: the GETs,
# their response headers, the bytes against the ranks' (the store's
# ratio), and each big tensor's GETs and bytes.  The shards are the
# oracle's.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/http_lib.sh"

gen m --seed 3801 --layout index --big-mib 2
nginx_start nginx "$M" "" ""
log="$NGX_DIR/access.log"

GAP=8192 # local_read.h's TPL_READ_GAP_HTTP

# fetched N GAP: preshard of the URL at N ranks by --read local with
# --read-gap GAP (default: not given), its shards against the oracle, and
# nginx's bytes against the ranks' share (then against gap 0's log).
fetched() {
  local n=$1 gap=$2 out="$T_TMP/s-$1-$2" opt=()
  [ "$gap" = default ] || opt=(--read-gap "$gap")
  : >"$log"
  if mpi "$n" preshard "$NGX_URL/m/" --out "$out" --plan "$M/m/plan.json" \
    --read local "${opt[@]}" --quiet --json >"$T_TMP/rep.json" \
    2>"$T_TMP/mpi.err"; then
    t_oracle "--read local, $n ranks, gap $gap: the oracle's shards" \
      check-preshard "$M/m" "$M/m/plan.json" "$n" "$out"
  else
    t_fail "--read local, $n ranks, gap $gap" \
      "$(messages "$T_TMP/mpi.err" | head -c 2000)"
    return
  fi
  [ "$gap" = 0 ] && cp "$log" "$T_TMP/gap0.log"
  if "$ORACLE" - "$TESTS_SRCDIR/oracle" "$M/m" "$n" "$log" "$gap" \
    "$T_TMP/gap0.log" "$GAP" "$T_TMP/rep.json" >"$T_TMP/bytes.out" 2>&1 <<'PY'
import json, os, struct, sys
sys.path.insert(0, sys.argv[1])
import oracle
model, n, log, gap = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
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
def get_lines(path):
    return [l for l in (l.split() for l in open(path)) if l[0] == "GET"]
gets = get_lines(log)
body = sum(int(l[4]) for l in gets)
sent = sum(int(l[8]) for l in gets)  # $bytes_sent: + the response headers
# the report's GETs: every ranged GET of tensor bytes (the files'
# headers and JSONs are rank 0's validation's, before its source opened)
ranks = json.load(open(sys.argv[8]))["ranks"]
data = [l for l in gets if l[3] != '"-"' and
        int(l[3].strip('"')[6:].split("-")[0]) >= min(
            a for f, (a, b) in spans.values() if l[1].endswith("/" + f))]
for r in ranks:
    print("# %d ranks, gap %s: rank %d: %d GETs, bodies %d, holds %d (%.3f x)"
          % (n, gap, r["rank"], r["gets"], r["bytes_read"], r["bytes"],
             r["bytes_read"] / float(r["bytes"])))
assert sum(r["gets"] for r in ranks) == len(data), \
    "the ranks' gets %d, nginx's ranged GETs of tensor bytes %d" % (
        sum(r["gets"] for r in ranks), len(data))
print("# %d ranks, gap %s: nginx sent %d body bytes in %d GETs (+ %.0f bytes "
      "of response headers each); the ranks hold %d: store ratio %.3f, + %d "
      "of the files' headers" % (n, gap, body, len(gets),
                                 (sent - body) / len(gets), held, body / held,
                                 n * heads))
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
if gap == "0":
    top = 1.05 * held + n * heads
    assert body <= top, "%d > 1.05 x %d + %d" % (body, held, n * heads)
    sys.exit(0)
g0 = get_lines(sys.argv[6])
body0 = sum(int(l[4]) for l in g0)
top = body0 + int(sys.argv[7]) * (len(g0) - len(gets))
print("# %d ranks, gap %s: %d GETs against gap 0's %d; bytes bound %d "
      "(%.3f x held)" % (n, gap, len(gets), len(g0), top, top / held))
assert len(gets) <= len(g0), "%d GETs > gap 0's %d" % (len(gets), len(g0))
assert body <= top, "%d > %d + G x %d" % (body, body0, len(g0) - len(gets))
PY
  then t_ok "--read local, $n ranks, gap $gap: nginx's GETs and bytes bounded"
  else
    t_fail "--read local, $n ranks, gap $gap: nginx's GETs and bytes" \
      "$(cat "$T_TMP/bytes.out")"
  fi
  grep "^#" "$T_TMP/bytes.out"
}

for n in 2 4; do
  fetched "$n" 0
  fetched "$n" default
done
t_done
