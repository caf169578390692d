#!/bin/bash
# http_local_bytes.sh - `--read local` from a URL fetches each rank's own
# bytes, not whole tensors, joins pieces into runs as --read-gap says and
# asks for up to 128 runs in one multi-range GET (http.h's
# TPL_HTTP_SPANS_MAX; answered multipart/byteranges): at 2 and 4 ranks,
# on a model with a dim-0 cut of segments (big.rows: a shard is 3 runs)
# and a dim-1 cut (big.cols: strided pieces of each row), fetched twice.
# The GETs are what the rule gives, computed here from the tensors'
# shapes and rules: per rank and tensor, its pieces' runs (pieces at most
# the gap apart joined), ceil(runs / 128) GETs; a tensor that is not cut
# once, not once a rank: every rank here is on one node, and one of them
# fetches what they hold alike and hands it to the others (DESIGN.md,
# --read local).  What nginx sent is
# counted from its access log: a GET's payload is the bytes its Range
# asked for (its body, for a single range), its framing the rest of its
# body (the multipart delimiters and part headers, asserted under 128
# bytes a part).  With --read-gap 0 the payloads are at most 1.05 x what
# the node needs (the oracle's shards, a tensor not cut once) + every rank's
# read of the files' headers.  With the default gap (G = 1024 for http
# while the store answers multi-range GETs, as nginx does), each run fewer than at gap 0 is a join of two pieces at most G apart:
# payloads <= gap 0's + G x (gap 0's runs - these).  Then at gap 0
# through a location of nginx with `max_ranges 1` (it answers a
# multi-range GET with the whole object, 200): the ranks fall back to one
# range a GET, as many as gap 0's runs, the same ranges, after one
# refused GET a rank a file at most (the first multi-range GET of a file
# is alone in flight until it is answered).  The refused GETs' bodies
# (the whole files, cut when the rank closes the connection) are not
# payload: they are printed apart.  Each time the report's per-rank `gets` add
# up to nginx's GETs of tensor bytes (the rest are rank 0's validation).
# Printed for each: the GETs, their response headers and framing, the
# payload against the ranks' bytes (the store's ratio, with and without
# the framing), and each big tensor's GETs and bytes.  The shards are the
# oracle's.  Then TP 2 x DP 2 at gap 0: every replica's files are the
# oracle's, and the ranks' bytes read add up to the tensors' bytes once,
# each rank's what the node's turns by bytes give; gpt2's shards so made
# compute the full checkpoint's logits; and a rank slow to finish what
# it was handed is waited for under a 2 s stall deadline.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/http_lib.sh"

gen m --seed 3801 --layout index --big-mib 2
nginx_start nginx "$M" "" '
    location /one/ { max_ranges 1; }'
ln -s . "$M/one"
log="$NGX_DIR/access.log"

GAP=1024 # local_read.h's TPL_READ_GAP_MULTI (nginx takes multi-range GETs)

# fetched N GAP [one]: preshard of the URL at N ranks by --read local with
# --read-gap GAP (default: not given; through /one/, max_ranges 1, with
# `one`), its shards against the oracle, and nginx's GETs and bytes
# against the rule and the ranks' share (then against gap 0's log).
fetched() {
  local n=$1 gap=$2 dir=${3:+one/} out="$T_TMP/s-$1-$2$3" opt=()
  [ "$gap" = default ] || opt=(--read-gap "$gap")
  : >"$log"
  if mpi "$n" preshard "$NGX_URL/${dir}m/" --out "$out" --plan "$M/m/plan.json" \
    --read local "${opt[@]}" --quiet --json >"$T_TMP/rep.json" \
    2>"$T_TMP/mpi.err"; then
    t_oracle "--read local, $n ranks, gap $gap$3: the oracle's shards" \
      check-preshard "$M/m" "$M/m/plan.json" "$n" "$out"
  else
    t_fail "--read local, $n ranks, gap $gap$3" \
      "$(messages "$T_TMP/mpi.err" | head -c 2000)"
    return
  fi
  [ "$gap$3" = 0 ] && cp "$log" "$T_TMP/gap0.log"
  if "$ORACLE" - "$TESTS_SRCDIR/oracle" "$M/m" "$n" "$log" "$gap" \
    "$T_TMP/gap0.log" "$GAP" "$T_TMP/rep.json" "$3" >"$T_TMP/bytes.out" 2>&1 <<'PY'
import json, math, os, struct, sys
sys.path.insert(0, sys.argv[1])
import oracle
model, n, log, gap = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
one = sys.argv[9] == "one"
G = int(sys.argv[7])
SPANS_MAX, PART = 128, 4 << 20  # http.h's TPL_HTTP_SPANS_MAX, http.c's
with open(os.path.join(model, "plan.json")) as f:
    rules = json.load(f)["rules"]
exp = oracle.expected_shards(oracle.read_model(model), rules, n)
def fetches(e, r):  # whether rank r's bytes of e come from the store
    return e["kind"] == "shard" or r == 0  # else one rank's, handed over
held = sum(len(e["ranks"][r]) for e in exp for r in range(n) if fetches(e, r))
heads, spans = 0, {}  # the files' 8 + header bytes; where tensors lie
for f in os.listdir(model):
    p = os.path.join(model, f)
    if f.endswith(".index.json"):
        heads += os.path.getsize(p)
    if not f.endswith(".safetensors") or os.path.islink(p):
        continue
    with open(p, "rb") as fh:
        hlen = struct.unpack("<Q", fh.read(8))[0]
        hdr = json.loads(fh.read(hlen))
    heads += 8 + hlen
    for name, t in hdr.items():
        if name != "__metadata__":
            spans[name] = (f, [8 + hlen + x for x in t["data_offsets"]])

def runs(e, r, join):
    """Rank r's byte ranges of tensor e (tensor-relative), pieces at most
    `join` bytes apart joined (a dim cut with its segments; else all)."""
    a, b = spans[e["name"]][1]
    rule, shape = e["rule"], e["shape"]
    if e["kind"] != "shard":
        return [(0, b - a)]
    d, item = rule["dim"], (b - a) // math.prod(shape)
    segs = rule.get("segs") or [shape[d]]
    outer, inner = math.prod(shape[:d]), math.prod(shape[d + 1:]) * item
    out = []
    for o in range(outer):
        at = 0
        for s in segs:
            x = (o * shape[d] + at + r * s // n) * inner
            y = (o * shape[d] + at + (r + 1) * s // n) * inner
            if y > x and out and x - out[-1][1] <= join:
                out[-1] = (out[-1][0], y)
            elif y > x:
                out.append((x, y))
            at += s
    return out

def ranges(l):
    return [tuple(int(x) for x in p.split("-"))
            for p in l[3].strip('"')[6:].split(",")]

def get_lines(path):
    return [l for l in (l.split() for l in open(path)) if l[0] == "GET"]

def payload(l):  # the bytes asked (a single range's: its body)
    rs = ranges(l) if l[3] != '"-"' else []
    if len(rs) > 1 and l[2] == "206":
        return sum(y - x + 1 for x, y in rs)
    if len(rs) > 1:
        return 0  # refused: the ranks closed it at its headers
    return int(l[4])

gets = get_lines(log)
body = sum(int(l[4]) for l in gets)
sent = sum(int(l[8]) for l in gets)  # $bytes_sent: + the response headers
pay = sum(payload(l) for l in gets)
multi = [l for l in gets if l[3] != '"-"' and len(ranges(l)) > 1]
served = [l for l in multi if l[2] == "206"]
parts = sum(len(ranges(l)) for l in served)
framing = sum(int(l[4]) - payload(l) for l in served)
# the report's GETs: every ranged GET of tensor bytes (the files'
# headers and JSONs are rank 0's validation's, before its source opened)
ranks = json.load(open(sys.argv[8]))["ranks"]
data = [l for l in gets if l[3] != '"-"' and ranges(l)[0][0] >= min(
    a for f, (a, b) in spans.values() if l[1].endswith("/" + f))]
for r in ranks:
    print("# %d ranks, gap %s: rank %d: %d GETs, bodies %d, holds %d (%.3f x)"
          % (n, gap, r["rank"], r["gets"], r["bytes_read"], r["bytes"],
             r["bytes_read"] / float(r["bytes"])))
assert sum(r["gets"] for r in ranks) == len(data), \
    "the ranks' gets %d, nginx's ranged GETs of tensor bytes %d" % (
        sum(r["gets"] for r in ranks), len(data))
print("# %d ranks, gap %s%s: nginx sent %d body bytes in %d GETs (+ %.0f bytes "
      "of response headers each), %d of them multipart (%d parts, %.1f bytes "
      "of framing a part); payload %d, the node needs %d: store ratio %.3f "
      "(%.3f with every body), + %d of the files' headers"
      % (n, gap, " max_ranges 1" if one else "", body, len(gets),
         (sent - body) / len(gets), len(served), parts,
         framing / max(parts, 1), pay, held, pay / held, body / held,
         n * heads))
assert framing <= 128 * parts, "framing %d > 128 x %d parts" % (framing,
                                                               parts)
# the rule: per rank and tensor, ceil(runs / 128) GETs (each tensor
# within one 8 MiB step and one 4 MiB part)
join = 0 if gap == "0" else G
nruns = [len(runs(e, r, join)) for e in exp for r in range(n)
         if spans[e["name"]][1][1] > spans[e["name"]][1][0] and fetches(e, r)]
assert all(b - a <= PART for f, (a, b) in spans.values())
want = sum(math.ceil(k / (1 if one else SPANS_MAX)) for k in nruns)
got = len(data) - (len(multi) if one else 0)
print("# %d ranks, gap %s: %d GETs of tensor bytes, the rule's %d (%d runs)%s"
      % (n, gap, got, want, sum(nruns),
         ", + %d multi-range ones refused" % len(multi) if one else ""))
assert got == want, "%d GETs, the rule gives %d" % (got, want)
if one:
    assert all(l[2] == "200" for l in multi)
    assert len(multi) <= n * len(set(f for f, _ in spans.values())), \
        "%d multi-range GETs refused" % len(multi)
    print("# %d ranks, gap 0 max_ranges 1: %d refused GETs (one a rank a "
          "file), %d bytes of their 200 bodies sent before the ranks closed "
          "them" % (n, len(multi), sum(int(l[4]) for l in multi)))
    g0 = get_lines(sys.argv[6])
    r0 = sorted(x for l in g0 if l[3] != '"-"' for x in ranges(l))
    r1 = sorted(x for l in gets if l[3] != '"-"' and l[2] == "206"
                for x in ranges(l))
    assert r0 == r1, "the ranges fetched differ from gap 0's multi-range ones"
for e in exp:  # the two big ones: their GETs' bytes against their ranks'
    if not e["name"].startswith("big."):
        continue
    f, (a, b) = spans[e["name"]]
    rs = [(x, y, len(ranges(l))) for l in gets
          if l[1].endswith("/" + f) and l[3] != '"-"' and l[2] == "206"
          for x, y in ranges(l)]
    rs = [(max(x, a), min(y + 1, b)) for x, y, k in rs if x < b and y >= a]
    print("# %d ranks: %s (dim %d): %d ranges, %.3f x its ranks' bytes"
          % (n, e["name"], e["rule"]["dim"], len(rs),
             sum(y - x for x, y in rs) / float(sum(map(len, e["ranks"])))))
if gap == "0":
    top = 1.05 * held + n * heads
    assert pay <= top, "%d > 1.05 x %d + %d" % (pay, held, n * heads)
    sys.exit(0)
g0 = get_lines(sys.argv[6])
pay0 = sum(payload(l) for l in g0)
runs0 = sum(len(ranges(l)) for l in g0 if l[3] != '"-"')
runs1 = sum(len(ranges(l)) for l in gets if l[3] != '"-"')
top = pay0 + G * (runs0 - runs1)
print("# %d ranks, gap %s: %d GETs against gap 0's %d; payload bound %d "
      "(%.3f x held)" % (n, gap, len(gets), len(g0), top, top / held))
assert len(gets) <= len(g0), "%d GETs > gap 0's %d" % (len(gets), len(g0))
assert pay <= top, "%d > %d + G x %d" % (pay, pay0, runs0 - runs1)
PY
  then t_ok "--read local, $n ranks, gap $gap$3: nginx's GETs the rule's, bytes bounded"
  else
    t_fail "--read local, $n ranks, gap $gap$3: nginx's GETs and bytes" \
      "$(cat "$T_TMP/bytes.out")"
  fi
  grep "^#" "$T_TMP/bytes.out"
}

# TP 2 x DP 2 on the one node, --read-gap 0: each shard is held by a rank
# of each replica, each tensor not cut by all four, and the node fetches
# each once: the ranks' bytes read add up to the files' tensor bytes
# (from the safetensors headers), each once.
grid_once() {
  local out="$T_TMP/g-local"
  if ! mpi 4 preshard "$NGX_URL/m/" --out "$out" --plan "$M/m/plan.json" \
    --tp 2 --read local --read-gap 0 --json --quiet >"$T_TMP/g.json" \
    2>"$T_TMP/mpi.err"; then
    t_fail "--read local, TP 2 x DP 2" "$(messages "$T_TMP/mpi.err" | head -c 2000)"
    return
  fi
  t_oracle "--read local, TP 2 x DP 2: every replica's files = numpy oracle" \
    check-grid "$M/m" "$M/m/plan.json" 4 2 1 1 "$out"
  if "$ORACLE" - "$M/m" "$T_TMP/g.json" "$TESTS_SRCDIR/oracle" \
    >"$T_TMP/g.out" 2>&1 <<'PY'
import json, os, struct, sys
tensors, where = 0, {}
for f in os.listdir(sys.argv[1]):
    p = os.path.join(sys.argv[1], f)
    if f.endswith(".safetensors") and not os.path.islink(p):
        with open(p, "rb") as fh:
            hdr = json.loads(fh.read(struct.unpack("<Q", fh.read(8))[0]))
        tensors += sum(t["data_offsets"][1] - t["data_offsets"][0]
                       for k, t in hdr.items() if k != "__metadata__")
        where.update((k, (f, t["data_offsets"][0]))
                     for k, t in hdr.items() if k != "__metadata__")
ranks = json.load(open(sys.argv[2]))["ranks"]
got = sum(r["bytes_read"] for r in ranks)
print("# TP 2 x DP 2: the ranks read %s = %d bytes, the tensors are %d"
      % (" + ".join(str(r["bytes_read"]) for r in ranks), got, tensors))
assert got == tensors
# Whose turn: in the files' order, each tensor to the holder of its bytes
# given the fewest bytes so far among the tensors the same holders share
# (the first of equals): shard t's holders are ranks t and t + 2, a
# tensor not cut (or a bias, fetched raw) is the four's.
sys.path.insert(0, sys.argv[3])
import oracle
with open(os.path.join(sys.argv[1], "plan.json")) as f:
    rules = json.load(f)["rules"]
exp = oracle.expected_shards(oracle.read_model(sys.argv[1]), rules, 2)
given, want = {}, [0, 0, 0, 0]
for e in sorted(exp, key=lambda e: where[e["name"]]):
    cut = e["kind"] == "shard"
    for g in ((0, 2), (1, 3)) if cut else ((0, 1, 2, 3),):
        load = given.setdefault(g, [0] * len(g))
        k = load.index(min(load))
        load[k] += len(e["ranks"][g[0] % 2])
        want[g[k]] += len(e["ranks"][g[0] % 2])
print("# the turns give %s" % " + ".join(map(str, want)))
assert [r["bytes_read"] for r in sorted(ranks, key=lambda r: r["rank"])] == want
PY
  then t_ok "--read local, TP 2 x DP 2: the node fetched every tensor byte once"
  else t_fail "--read local, TP 2 x DP 2: the bytes fetched" "$(cat "$T_TMP/g.out")"
  fi
  grep "^#" "$T_TMP/g.out"
}

# The forward pass over what the node's ranks handed each other: gpt2
# (embeddings and norms replicated, the row-parallel biases handed over
# raw and scaled by each holder for its shard) preshard from the URL at
# TP 2 x DP 2 by --read local; each replica's logits equal the full
# checkpoint's (oracle/forward.py, mpi4py all-reducing).
grid_forward() {
  local out="$T_TMP/g-fwd" fwd="$TESTS_SRCDIR/oracle/forward.py"
  if ! "$ORACLE" -c 'import mpi4py' 2>/dev/null; then
    t_ok "gpt2 TP 2 x DP 2 from the URL: logits # SKIP no mpi4py for $ORACLE"
    return
  fi
  if ! { "$TPLOAD" synth --out "$M/gpt2" --arch gpt2 --layers 2 --hidden 64 \
    --heads 8 --vocab 128 --dtype f32 --quiet &&
    "$ORACLE" "$fwd" ref "$M/gpt2" "$M/gpt2.ref.npy"; } >"$T_TMP/fwd.err" 2>&1
  then
    t_fail "gpt2: synth and its reference logits" "$(head -c 2000 "$T_TMP/fwd.err")"
    return
  fi
  t_exit "gpt2 TP 2 x DP 2 from the URL, --read local: preshard exits 0" 0 \
    mpi 4 preshard "$NGX_URL/gpt2/" --out "$out" --tp 2 --read local --quiet
  if "$MPIRUN" --oversubscribe -np 4 "$ORACLE" "$fwd" tp "$M/gpt2" "$out" \
    "$M/gpt2.ref.npy" --tp 2 --pp 1 >"$T_TMP/fwd.out" 2>"$T_TMP/fwd.err"; then
    t_ok "gpt2 TP 2 x DP 2 from the URL: every replica's logits = the checkpoint's"
  else
    t_fail "gpt2 TP 2 x DP 2 from the URL: logits" \
      "$(messages "$T_TMP/fwd.err" | head -c 2000)"
  fi
}

for n in 2 4; do
  fetched "$n" 0
  fetched "$n" default
done
fetched 4 0 one
# What a rank was handed it finishes beating: rank 1 finishes slowly
# (the test-only TPLOAD_TEST_SLOW_RANK at finish-shared: 50 ms a tensor;
# about 100 of gpt2's tensors not cut are handed to it or lent raw), so
# rank 0, done, waits past the 2 s stall deadline, on its beats.
slow_finisher() {
  if ! "$TPLOAD" synth --out "$M/gpt2s" --arch gpt2 --layers 24 --hidden 64 \
    --heads 8 --vocab 128 --dtype f32 --quiet >"$T_TMP/s.err" 2>&1; then
    t_fail "gpt2, 24 layers: synth" "$(head -c 2000 "$T_TMP/s.err")"
    return
  fi
  TPLOAD_TEST_SLOW_RANK=1 TPLOAD_TEST_SLOW_AT=finish-shared t_exit \
    "--read local: a rank slow to finish what it was handed is waited for" 0 \
    "$MPIRUN" --oversubscribe -np 2 -x TPLOAD_TEST_SLOW_RANK \
    -x TPLOAD_TEST_SLOW_AT "$TPLOAD" load "$NGX_URL/gpt2s/" --read local \
    --stall-timeout 2 --json --quiet
  if "$ORACLE" -c '
import json, sys
r = json.load(open(sys.argv[1]))["ranks"][1]
print("# rank 1 took %.2f s" % r["seconds"])
assert r["seconds"] > 3, "too fast to test the beats"
' "$T_TMP/out" >"$T_TMP/sf.out" 2>&1
  then t_ok "--read local: the slow finisher took longer than the stall deadline"
  else t_fail "--read local: the slow finisher's time" "$(cat "$T_TMP/sf.out")"
  fi
  grep "^#" "$T_TMP/sf.out"
}

grid_once
grid_forward
slow_finisher
t_done
