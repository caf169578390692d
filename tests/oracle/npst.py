#!/usr/bin/python3
"""npst.py - a small numpy safetensors writer and reader, independent of the
C code, used as an oracle by the tests (tests/oracle.py imports it).

    write(path, tensors, metadata=None, order=None)
        tensors: dict name -> numpy array, or (dtype_name, shape, raw_bytes)
        for dtypes numpy lacks (BF16, F8_E4M3, F8_E5M2) or any raw data.
        Writes the file the way Hugging Face's Rust writer does: data laid
        out sorted by (dtype alignment descending, name) unless `order`
        (a list of every name) says otherwise; the header is compact JSON,
        "__metadata__" first, padded with spaces to a multiple of 8.
        `header_order` (optional list of names) lists the tensors in the
        JSON in another order than their data.
    read(path) -> (tensors, metadata, order_by_offset)
        tensors: dict name -> (dtype_str, shape tuple, bytes); metadata: a
        dict or None; order_by_offset: names sorted by (begin, end,
        position in the header): zero-size tensors at one offset keep the
        header's order.
    layout(path) -> (data_start, dict name -> (begin, end))
    to_numpy(dtype_str, shape, raw) -> numpy array (numpy dtypes only)

CLI:  npst.py valid DIR   writes a set of valid files (every dtype,
      zero-size, scalar, metadata, ...) and, next to each, NAME.expect.json
      listing what was written (name, dtype, shape, nbytes, sha256) in data
      order, computed from the numpy arrays before writing.
"""
import hashlib
import json
import os
import struct
import sys

import numpy as np

# safetensors name -> (numpy dtype or None, itemsize).  Little-endian.
DTYPES = {
    "BOOL": (np.dtype("bool"), 1),
    "U8": (np.dtype("<u1"), 1),
    "I8": (np.dtype("<i1"), 1),
    "I16": (np.dtype("<i2"), 2),
    "U16": (np.dtype("<u2"), 2),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (None, 2),
    "I32": (np.dtype("<i4"), 4),
    "U32": (np.dtype("<u4"), 4),
    "F32": (np.dtype("<f4"), 4),
    "F64": (np.dtype("<f8"), 8),
    "I64": (np.dtype("<i8"), 8),
    "U64": (np.dtype("<u8"), 8),
    "F8_E4M3": (None, 1),
    "F8_E5M2": (None, 1),
}

# The Rust crate's Dtype enum is declared in increasing alignment order and
# its writer sorts by that enum descending, then by name.
RUST_ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16",
              "BF16", "I32", "U32", "F32", "F64", "I64", "U64"]


def st_name(dt):
    """safetensors name of a numpy dtype."""
    dt = np.dtype(dt)
    for name, (npdt, _) in DTYPES.items():
        if npdt is not None and npdt.kind == dt.kind and \
                npdt.itemsize == dt.itemsize:
            return name
    raise ValueError("npst: no safetensors dtype for numpy %s" % dt)


def _entry(value):
    """(dtype_str, shape tuple, raw bytes) for an array or a raw tuple."""
    if isinstance(value, tuple):
        dtype, shape, raw = value
        shape = tuple(int(d) for d in shape)
        want = int(np.prod(shape, dtype=np.int64)) * DTYPES[dtype][1]
        if len(raw) != want:
            raise ValueError("npst: %s %s needs %d bytes, got %d"
                             % (dtype, shape, want, len(raw)))
        return dtype, shape, bytes(raw)
    arr = np.asarray(value)
    name = st_name(arr.dtype)
    arr = np.ascontiguousarray(arr, dtype=DTYPES[name][0])
    return name, tuple(int(d) for d in arr.shape), arr.tobytes()


def default_order(entries):
    """Names sorted like the Rust writer: alignment descending, name."""
    return sorted(entries,
                  key=lambda n: (-RUST_ORDER.index(entries[n][0]), n))


def write(path, tensors, metadata=None, order=None, header_order=None):
    """Writes `tensors` to `path` as safetensors (see the module doc)."""
    entries = {name: _entry(v) for name, v in tensors.items()}
    order = list(order) if order is not None else default_order(entries)
    if sorted(order) != sorted(entries):
        raise ValueError("npst: order must list every tensor once")
    spans, at = {}, 0
    for name in order:
        n = len(entries[name][2])
        spans[name] = (at, at + n)
        at += n
    header = {}
    if metadata is not None:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in (header_order if header_order is not None else order):
        dtype, shape, _ = entries[name]
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": list(spans[name])}
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False)
    raw = text.encode("utf-8")
    raw += b" " * ((8 - len(raw) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for name in order:
            f.write(entries[name][2])


def _no_dups(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("npst: duplicate key %r" % k)
        d[k] = v
    return d


def _header(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("npst: %s: shorter than 8 bytes" % path)
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise ValueError("npst: %s: header runs past the end" % path)
    hdr = json.loads(blob[8:8 + n].decode("utf-8"),
                     object_pairs_hook=_no_dups)
    return blob, 8 + n, hdr


def layout(path):
    """(data_start, dict name -> (begin, end)) of a safetensors file."""
    _, start, hdr = _header(path)
    spans = {k: tuple(v["data_offsets"]) for k, v in hdr.items()
             if k != "__metadata__"}
    return start, spans


def read(path):
    """(tensors, metadata, order_by_offset); see the module doc."""
    blob, start, hdr = _header(path)
    meta = hdr.pop("__metadata__", None)
    out, at = {}, 0
    pos = {k: i for i, k in enumerate(hdr)}
    order = sorted(hdr, key=lambda k: (hdr[k]["data_offsets"][0],
                                       hdr[k]["data_offsets"][1], pos[k]))
    for name in order:
        e = hdr[name]
        b, end = e["data_offsets"]
        shape = tuple(e["shape"])
        want = int(np.prod(shape, dtype=np.int64)) * DTYPES[e["dtype"]][1]
        if b != at or end - b != want:
            raise ValueError("npst: %s: bad offsets for %r" % (path, name))
        at = end
        out[name] = (e["dtype"], shape, blob[start + b:start + end])
    if start + at != len(blob):
        raise ValueError("npst: %s: data section size mismatch" % path)
    return out, meta, order


def to_numpy(dtype, shape, raw):
    """A numpy array view of raw bytes (numpy-supported dtypes only)."""
    npdt = DTYPES[dtype][0]
    if npdt is None:
        raise ValueError("npst: numpy has no %s" % dtype)
    return np.frombuffer(raw, dtype=npdt).reshape(shape)


# --- the valid corpus -------------------------------------------------------

def _sample(rng, dtype, shape):
    """A deterministic array (or raw tuple) of `dtype` and `shape`."""
    npdt, size = DTYPES[dtype]
    n = int(np.prod(shape, dtype=np.int64))
    if npdt is None:
        return (dtype, shape, rng.integers(0, 256, n * size,
                                           dtype=np.uint8).tobytes())
    if npdt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if npdt.kind == "f":
        return rng.standard_normal(shape).astype(npdt)
    info = np.iinfo(npdt)
    return rng.integers(info.min, info.max, shape, dtype=npdt,
                        endpoint=True)


def valid_sets(rng):
    """name -> (tensors, kwargs for write) of the valid corpus."""
    sets = {}
    sets["all_dtypes"] = ({"t.%s" % d.lower(): _sample(rng, d, (2, 3))
                           for d in DTYPES}, {})
    sets["zero_size"] = ({"a.empty": _sample(rng, "F32", (0, 4)),
                          "b.empty": _sample(rng, "BF16", (3, 0)),
                          "c.full": _sample(rng, "F16", (5,)),
                          "d.empty": _sample(rng, "U8", (0,))}, {})
    sets["scalar"] = ({"s.f64": _sample(rng, "F64", ()),
                       "s.i8": _sample(rng, "I8", ()),
                       "s.bf16": _sample(rng, "BF16", ()),
                       "v": _sample(rng, "F32", (3,))}, {})
    sets["metadata"] = ({"w": _sample(rng, "F32", (4, 4))},
                        {"metadata": {"format": "pt", "note": "npst"}})
    sets["empty"] = ({}, {"metadata": {"format": "pt"}})
    mixed = {"z.w": _sample(rng, "F32", (3, 2)),
             "a.w": _sample(rng, "U8", (7,)),
             "m.w": _sample(rng, "I64", (2,))}
    sets["custom_order"] = (mixed, {"order": ["a.w", "z.w", "m.w"],
                                    "header_order": ["m.w", "a.w", "z.w"]})
    sets["unicode_names"] = ({"модель.вес": _sample(rng, "F16", (2, 2)),
                              "层.0.偏置": _sample(rng, "F16", (2,))}, {})
    sets["dims8"] = ({"x": _sample(rng, "U16", (1, 2, 1, 2, 1, 2, 1, 2))},
                     {})
    sets["many"] = ({"layers.%d.w" % i: _sample(rng, "BF16", (i % 5, 2))
                     for i in range(500)}, {})
    return sets


def write_valid(outdir):
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(20240607)
    for name, (tensors, kw) in sorted(valid_sets(rng).items()):
        path = os.path.join(outdir, name + ".safetensors")
        write(path, tensors, **kw)
        entries = {k: _entry(v) for k, v in tensors.items()}
        order = kw.get("order") or default_order(entries)
        expect = [{"name": k, "dtype": entries[k][0],
                   "shape": list(entries[k][1]),
                   "nbytes": len(entries[k][2]),
                   "sha256": hashlib.sha256(entries[k][2]).hexdigest()}
                  for k in order]
        with open(path[:-len(".safetensors")] + ".expect.json", "w",
                  encoding="utf-8") as f:
            json.dump(expect, f, ensure_ascii=False)
        print(path)


def main(argv):
    if len(argv) == 3 and argv[1] == "valid":
        write_valid(argv[2])
        return 0
    sys.stderr.write("usage: npst.py valid DIR\n")
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
