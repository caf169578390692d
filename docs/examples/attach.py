"""attach.py - a complete Python consumer of a running `tpload serve`:
attach to one rank, print what it holds and one tensor.  README's "Using
the shards" quotes this file and `make install` puts it in
$(docdir)/examples (/usr/local/share/doc/tpload/examples);
tests/mpi/install.sh runs that copy against a live job with the module
`make install` put on python3's path.  It prints what attach.c prints,
but numpy's dtype: bfloat16 is uint16 bits unless ml_dtypes is installed.

    python3 attach.py /run/tp/rank0.sock lm_head.weight
"""
import sys
import tpload

sock = sys.argv[1] if len(sys.argv) > 1 else "/run/tp/rank0.sock"
name = sys.argv[2] if len(sys.argv) > 2 else "lm_head.weight"
with tpload.attach(sock) as shard:  # a read-only Mapping: name -> array
    total = sum(a.nbytes for a in shard.values())  # checkpoint order
    print("rank %d of %d: %d tensors, %d bytes" % (shard.rank, shard.world,
                                                   len(shard), total))
    w = shard[name]  # a read-only numpy view of the daemon's memory, no copy
    print(name, w.dtype, w.shape, w.nbytes, "bytes")
