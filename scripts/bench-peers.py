#!/usr/bin/python3
"""bench-peers.py - what scripts/bench.sh compares `tpload load` with.

Run under mpirun (mpi4py); every mode prints, on rank 0, the seconds from
a barrier after start-up to a barrier once every rank is done (whole
process wall time is measured outside).

  read PLAN MODEL     the rank-read peer: every rank memory-maps each
                      checkpoint file and copies out its own slices with
                      numpy (a copy of a slice of the view, contiguous or
                      not), what users of safetensors' get_slice do.  No
                      hashing.
  scatter PLAN MODEL  the scatter peer: rank 0 maps the files, packs every
                      rank's slices of a sharded tensor into one buffer and
                      Scatters it; replicated tensors are Bcast.  No hashing.
  floor BYTES         the memory floor: every rank takes fresh memory of
                      its shard size and writes it once, with the best page
                      size the kernel gives (hugetlb when the reserved pool
                      holds it, else MADV_HUGEPAGE on anonymous memory).
  pages MIB           fresh-memory write throughput (GiB/s) at 4 KiB and at
                      2 MiB pages, one process, each right after the same
                      amount was touched and freed (hot): "4k X 2m Y".
  cold MIB            the same at 2 MiB pages without warming first (run
                      it after the machine idled: see warm).
  warm BYTES          touches BYTES of fresh memory and frees it.  On a
                      virtual machine that reports free memory to its host
                      (virtio-balloon free page reporting, here in 2 MiB
                      blocks, seconds after they are freed), the first
                      touch of such memory costs a host fault: ~0.3 GiB/s
                      instead of several GiB/s.  bench.sh warms before
                      every timed run so each contestant gets memory of the
                      same temperature.
  hello               MPI start-up only (import numpy and mpi4py, barrier).

PLAN is the JSON of `tpload plan MODEL --shards N` (dim and per-shard segs
of each sharded tensor).  Only dtypes of 1, 2, 4 or 8 bytes are handled,
which is what bench.sh's synthetic checkpoints hold.
"""
import json
import mmap
import os
import struct
import sys
import time

import numpy as np
from mpi4py import MPI

HUGE = 2 << 20
ITEMSIZE = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I8": 1, "U8": 1,
            "I16": 2, "I32": 4, "I64": 8, "F8_E4M3": 1, "F8_E5M2": 1}


def headers(model):
    """name -> (path, data start, begin, end, dtype, shape) for every file."""
    out = {}
    for f in sorted(os.listdir(model)):
        if not f.endswith(".safetensors"):
            continue
        path = os.path.join(model, f)
        with open(path, "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            h = json.loads(fh.read(n))
        for name, t in h.items():
            if name != "__metadata__":
                b, e = t["data_offsets"]
                out[name] = (path, 8 + n, b, e, t["dtype"], t["shape"])
    return out


def view(maps, info):
    path, start, b, e, dtype, shape = info
    item = ITEMSIZE[dtype]
    a = np.frombuffer(maps[path], dtype="u%d" % item, count=(e - b) // item,
                      offset=start + b)
    return a.reshape(shape)


def rank_slice(arr, p, rank, n):
    """Rank `rank`'s part of `arr` under plan entry `p` (a view or copy)."""
    if "dim" not in p:
        return arr
    d, parts, off = p["dim"], [], 0
    for s in p["segs"]:
        idx = [slice(None)] * arr.ndim
        idx[d] = slice(off + rank * s, off + (rank + 1) * s)
        parts.append(arr[tuple(idx)])
        off += n * s
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=d)


def open_maps(hdr):
    maps = {}
    for path in {v[0] for v in hdr.values()}:
        with open(path, "rb") as fh:
            maps[path] = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
        maps[path].madvise(mmap.MADV_SEQUENTIAL)
    return maps


def peer_read(plan, model, comm):
    rank, n = comm.Get_rank(), comm.Get_size()
    hdr = headers(model)
    maps = open_maps(hdr)
    held = {}
    for p in plan["params"]:
        # A copy even when the slice is contiguous: the rank ends owning its
        # shard, as a tpload rank does (a view would keep the file mapped).
        held[p["name"]] = np.array(
            rank_slice(view(maps, hdr[p["name"]]), p, rank, n), copy=True)
    return held


def peer_scatter(plan, model, comm):
    rank, n = comm.Get_rank(), comm.Get_size()
    hdr = headers(model) if rank == 0 else None
    maps = open_maps(hdr) if rank == 0 else None
    held = {}
    for p in plan["params"]:
        item = ITEMSIZE[{"bfloat16": "BF16", "float16": "F16",
                         "float32": "F32"}.get(p["dtype"], "U8")]
        mine = np.empty(p["shape"], dtype="u%d" % item)
        if "dim" not in p:
            if rank == 0:
                mine[...] = view(maps, hdr[p["name"]])
            comm.Bcast(mine, root=0)
        else:
            send = None
            if rank == 0:
                full = view(maps, hdr[p["name"]])
                send = np.stack([rank_slice(full, p, r, n) for r in range(n)])
            comm.Scatter(send, mine, root=0)
        held[p["name"]] = mine
    return held


def hugetlb_free():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("HugePages_Free:"):
                return int(line.split()[1]) * HUGE
    return 0


def fresh(nbytes, huge):
    """Fresh anonymous memory of at least nbytes: hugetlb when asked, else
    advised (or not) for transparent huge pages."""
    size = (nbytes + HUGE - 1) // HUGE * HUGE
    if huge == "hugetlb":
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40000  # MAP_HUGETLB
        return mmap.mmap(-1, size, flags=flags)
    m = mmap.mmap(-1, size + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.madvise(mmap.MADV_HUGEPAGE if huge == "thp" else mmap.MADV_NOHUGEPAGE)
    return m


def write_once(m):
    np.frombuffer(m, dtype=np.uint8)[:] = 1


def floor(nbytes, comm):
    huge = "hugetlb" if hugetlb_free() >= nbytes * comm.Get_size() else "thp"
    m = fresh(nbytes, huge)
    write_once(m)
    return huge


def write_rate(mib, huge):
    """GiB/s of writing `mib` MiB of fresh memory once."""
    t = time.perf_counter()
    write_once(fresh(mib << 20, huge))
    return (mib / 1024) / (time.perf_counter() - t)


def pages(mib):
    out = []
    for huge in ("4k", "thp"):
        write_once(fresh(mib << 20, huge))
        out.append(write_rate(mib, huge))
    return "4k %.3f 2m %.3f" % tuple(out)


def main():
    comm = MPI.COMM_WORLD
    mode = sys.argv[1]
    if mode == "pages":
        print(pages(int(sys.argv[2])))
        return
    if mode == "cold":
        print("2m %.3f" % write_rate(int(sys.argv[2]), "thp"))
        return
    if mode == "warm":
        write_once(fresh(int(sys.argv[2]), "thp"))
        return
    plan = None
    if mode in ("read", "scatter"):
        with open(sys.argv[2]) as f:
            plan = json.load(f)
    comm.Barrier()
    t = time.perf_counter()
    if mode == "read":
        what = peer_read(plan, sys.argv[3], comm) and "ok"
    elif mode == "scatter":
        what = peer_scatter(plan, sys.argv[3], comm) and "ok"
    elif mode == "hello":
        what = "ok"
    else:
        what = floor(int(sys.argv[2]), comm)
    comm.Barrier()
    if comm.Get_rank() == 0:
        print("%.6f %s" % (time.perf_counter() - t, what))


if __name__ == "__main__":
    main()
