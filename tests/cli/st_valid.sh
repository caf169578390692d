#!/bin/sh
# st_valid.sh - valid safetensors files written by the numpy oracle
# (tests/npst.py): `tpload inspect --json` must report every tensor's name,
# dtype, shape, bytes and absolute offset as numpy wrote them, in data
# order, and the bytes at that offset must be the bytes numpy wrote.
. "$TESTS_SRCDIR/lib/lib.sh"

dir="$T_TMP/valid"
if ! "$ORACLE" "$TESTS_SRCDIR/oracle/npst.py" valid "$dir" >"$T_TMP/files" \
  2>"$T_TMP/gen.err"; then
  t_fail "npst.py valid" "$(head -c 2000 "$T_TMP/gen.err")"
  t_done
  exit 1
fi
# No file written would leave the loop below checking nothing.
written=$(grep -c . "$T_TMP/files")
if [ "$written" -ge 1 ]; then t_ok "npst.py valid wrote $written files"
else t_fail "npst.py valid wrote no file" "expected its valid corpus"; fi

while IFS= read -r f; do
  base=$(basename "$f" .safetensors)
  json="$T_TMP/$base.json"
  if ! "$TPLOAD" inspect --json "$f" </dev/null >"$json" 2>"$T_TMP/err"; then
    t_fail "$base: inspect --json" "$(head -c 2000 "$T_TMP/err")"
    continue
  fi
  t_ok "$base: inspect --json"
  t_check "$base: matches npst" "$ORACLE" - "$TESTS_SRCDIR/oracle" "$f" "$json" \
    "${f%.safetensors}.expect.json" <<'PY'
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
import npst
from oracle import MLC_NAME  # inspect --json names dtypes as MLC does
path, got_path, expect_path = sys.argv[2:5]
got = json.load(open(got_path, encoding="utf-8"))
expect = json.load(open(expect_path, encoding="utf-8"))
tensors, meta, order = npst.read(path)
start, spans = npst.layout(path)
blob = open(path, "rb").read()
fail = []
def check(what, a, b):
    if a != b:
        fail.append("%s: tpload %r, expected %r" % (what, a, b))
check("tensor_count", got["tensor_count"], len(expect))
check("order", [t["name"] for t in got["tensors"]], order)
check("order vs written", order, [e["name"] for e in expect])
check("total_bytes", got["total_bytes"], sum(e["nbytes"] for e in expect))
for t, e in zip(got["tensors"], expect):
    n = e["name"]
    check(n + " dtype", t["dtype"], MLC_NAME[e["dtype"]])
    check(n + " dtype (npst.read)", t["dtype"], MLC_NAME[tensors[n][0]])
    check(n + " shape", t["shape"], e["shape"])
    check(n + " shape (npst.read)", tuple(t["shape"]), tensors[n][1])
    check(n + " bytes", t["bytes"], e["nbytes"])
    check(n + " offset", t["offset"], start + spans[n][0])
    raw = blob[t["offset"]:t["offset"] + t["bytes"]]
    check(n + " sha256", hashlib.sha256(raw).hexdigest(), e["sha256"])
    check(n + " bytes (npst.read)", raw, tensors[n][2])
for line in fail[:20]:
    print(line, file=sys.stderr)
sys.exit(1 if fail else 0)
PY
done <"$T_TMP/files"
t_done
