#!/bin/sh
# python_client.sh - the Python bindings (python/tpload.py, ctypes over
# libtpload.so) against a live 2-rank `tpload serve` of an oracle model
# with every dtype: each rank's tensors as numpy arrays compared with the
# numpy oracle (names in order, dtype - bfloat16 as uint16 bits unless
# ml_dtypes is installed -, the dtype's number, shape, bytes), read-only
# and zero-copy (two reads share memory, an array outlives its Shard);
# no array any access path returns can be made writable (setflags raises,
# empty and scalar arrays included); Shard is a read-only
# collections.abc.Mapping (iteration, keys, values, items, in, len, get,
# in checkpoint order) with the job's id and model; health(), the error
# of an unreachable socket (exit_code 69), and shutdown() ending the job
# with exit 0.  Uses Debian's /usr/bin/python3 with python3-numpy.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"

if [ -n "$SAN_CFLAGS" ]; then
  # An ASan-built libtpload.so cannot be dlopen'ed by a plain python3.
  echo "1..0 # SKIP libtpload.so is built with sanitizers (python3 would need libasan preloaded)"
  exit 0
fi
export TPLOAD_LIBRARY="$TPL_BUILDDIR/.libs/libtpload.so.0"
export PYTHONPATH="$TESTS_SRCDIR/../python:$TESTS_SRCDIR/oracle"

serve_two_ranks 23 index

CHECK_PY='
import collections.abc, gc, json, sys
import numpy as np
import oracle, tpload
model, sock, rank = sys.argv[1], sys.argv[2], int(sys.argv[3])
# enum tpl_dtype as include/tpload.h documents it
DTYPE_ID = {"bool": 0, "uint8": 1, "int8": 2, "int16": 3, "uint16": 4,
            "float16": 5, "bfloat16": 6, "int32": 7, "uint32": 8,
            "float32": 9, "float64": 10, "int64": 11, "uint64": 12,
            "float8_e4m3fn": 13, "float8_e5m2": 14}
def stays_read_only(a, where):
    try:
        a.setflags(write=True)
    except ValueError:
        return
    sys.exit("%s: setflags(write=True) succeeded" % where)
rules = json.load(open(model + "/plan.json"))["rules"]
exp = oracle.expected_shards(oracle.read_model(model), rules, 2)
h = tpload.health(sock)
if (h["rank"], h["world"]) != (rank, 2):
    sys.exit("health: expected rank %d of 2, found %r" % (rank, h))
raw_of = {"bfloat16": np.uint16, "float8_e4m3fn": np.uint8,
          "float8_e5m2": np.uint8}
s = tpload.attach(sock)
if (s.rank, s.world, s.nbytes, len(s)) != (rank, 2, h["bytes"], len(exp)):
    sys.exit("attach: rank/world/bytes/count %r" % ((s.rank, s.world,
             s.nbytes, len(s)),))
names = [e["name"] for e in exp]
if s.names() != names or list(s) != names or list(s.keys()) != names:
    sys.exit("names (names(), iteration, keys()) differ from the checkpoint order")
if not isinstance(s, collections.abc.Mapping) or isinstance(
        s, collections.abc.MutableMapping):
    sys.exit("Shard is not a read-only Mapping")
if "no such tensor" in s or s.get("no such tensor", 7) != 7 or 5 in s:
    sys.exit("a missing name is found")
if [n for n, _ in s.items()] != names or len(s.values()) != len(exp):
    sys.exit("items() or values() differ from the checkpoint order")
ready = json.load(open(sys.argv[4]))
if (s.job_id, s.model) != (ready["job_id"], model):
    sys.exit("job_id/model %r, ready file %r" % ((s.job_id, s.model), ready))
for i, (n, a) in enumerate(s.items()):
    stays_read_only(a, "items() %s" % n)
    stays_read_only(s.tensor(i), "tensor(%d)" % i)
    stays_read_only(s.get(n), "get(%s)" % n)
    stays_read_only(a.reshape(-1)[:1], "a view of %s" % n)
for a in s.values():
    stays_read_only(a, "values()")
kept = []
for i, e in enumerate(exp):
    a, want = s[e["name"]], e["ranks"][rank]
    where = "rank %d: %s" % (rank, e["name"])
    stays_read_only(a, where)
    mlc = oracle.MLC_NAME[e["dtype"]]
    info = s.info(i)
    if info["dtype_id"] != DTYPE_ID[mlc] or info["dtype_id"].name != e["dtype"]:
        sys.exit("%s: dtype_id %r, expected %d" % (where, info["dtype_id"],
                 DTYPE_ID[mlc]))
    np_dtype = raw_of.get(mlc) if tpload._ml is None else None
    np_dtype = np.dtype(np_dtype or tpload._NUMPY[mlc])
    if a.dtype != np_dtype:
        sys.exit("%s: dtype: expected %s, found %s" % (where, np_dtype, a.dtype))
    if list(a.shape) != e["rank_shape"]:
        sys.exit("%s: shape: expected %r, found %r" % (where, e["rank_shape"],
                 list(a.shape)))
    if a.tobytes() != want:
        sys.exit("%s: bytes differ from the oracle" % where)
    if a.flags.writeable:
        sys.exit("%s: array is writeable" % where)
    if a.size and not np.shares_memory(a, s[e["name"]]):
        sys.exit("%s: two reads do not share memory (a copy)" % where)
    kept.append((a, want))
s.close()
del s
gc.collect()
if any(a.tobytes() != w for a, w in kept):
    sys.exit("arrays changed after the Shard was closed")
print(len(kept))
'
for r in 0 1; do
  t_check "rank $r through python/tpload.py = numpy oracle, a read-only Mapping of read-only arrays, zero-copy" \
    "$ORACLE" -c "$CHECK_PY" "$M/m" "$SOCK/rank$r.sock" "$r" "$T_TMP/ready"
done

ERR_PY='
import sys, tpload
try:
    tpload.attach(sys.argv[1])
except tpload.Error as e:
    sys.exit(0 if e.exit_code == 69 and str(e) else "bad error %r" % e)
sys.exit("attached to nothing")
'
t_check "attach to a missing socket raises tpload.Error (exit_code 69)" \
  "$ORACLE" -c "$ERR_PY" "$T_TMP/none/rank0.sock"
t_check "tpload.shutdown(rank0.sock)" "$ORACLE" -c \
  'import sys, tpload; tpload.shutdown(sys.argv[1])' "$SOCK/rank0.sock"
serve_end
if [ "$SERVE_RC" = 0 ]; then t_ok "the job ends with exit 0"
else t_fail "the job ends with exit 0" "exit: $SERVE_RC"; fi
t_done
