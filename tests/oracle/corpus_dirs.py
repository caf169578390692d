#!/usr/bin/env python3
"""corpus_dirs.py - broken model directories, one per rule the sharded
index reader (model.safetensors.index.json) and the MLC weight-directory
reader (tensor-cache.json) enforce.

Usage: python3 tests/corpus_dirs.py OUTDIR

Writes one directory per case under OUTDIR and prints one line per case,
"CASE_PATH EXPECTED_EXIT" (65 malformed, 66 missing file); tests/corpus.sh
checks that `tpload inspect CASE_PATH` exits with that code and prints one
message.  Standard library only.
"""
import json
import os
import struct
import sys

FA = "model-00001-of-00002.safetensors"
FB = "model-00002-of-00002.safetensors"
S0 = "params_shard_0.bin"
S1 = "params_shard_1.bin"


def st_bytes(tensors):
    """A safetensors file: tensors is a list of (name, dtype, shape, nbytes)
    laid out in order; data bytes are 0, 1, 2, ..."""
    header, off = {}, 0
    for name, dtype, shape, nbytes in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [off, off + nbytes]}
        off += nbytes
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + bytes(i & 0xFF for i in range(off))


def write(path, data):
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# --- model.safetensors.index.json ---

FILE_A = [("z", "F16", [2, 2], 8), ("a", "F32", [2], 8)]
FILE_B = [("c", "BF16", [3], 6)]
MAP_OK = {"z": FA, "a": FA, "c": FB}


def index_case(out, name, index, extra=None):
    """A directory with the two standard files, `index` as the index (a
    dict dumped as JSON, or raw text), and `extra` files {name: bytes}."""
    d = os.path.join(out, name)
    os.makedirs(d)
    write(os.path.join(d, FA), st_bytes(FILE_A))
    write(os.path.join(d, FB), st_bytes(FILE_B))
    for fname, data in (extra or {}).items():
        write(os.path.join(d, fname), data)
    text = index if isinstance(index, str) else json.dumps(index)
    write(os.path.join(d, "model.safetensors.index.json"), text)
    return d


def index_cases(out):
    def wm(m, **kw):
        return dict({"weight_map": m}, **kw)

    cases = [
        ("idx_invalid_json", '{"weight_map": {', 65),
        ("idx_top_not_object", "[1, 2]", 65),
        ("idx_metadata_not_object", wm(MAP_OK, metadata=[1]), 65),
        ("idx_weight_map_missing", {"metadata": {}}, 65),
        ("idx_weight_map_not_object", {"weight_map": [FA]}, 65),
        ("idx_weight_map_empty", wm({}), 65),
        ("idx_value_not_string", wm({"z": 1}), 65),
        ("idx_name_empty", wm({"z": ""}), 65),
        ("idx_name_nul", wm({"z": "a\u0000b"}), 65),
        ("idx_name_absolute", wm({"z": "/etc/passwd"}), 65),
        ("idx_name_slash", wm({"z": "sub/" + FA}), 65),
        ("idx_name_dotdot", wm({"z": ".."}), 65),
        ("idx_missing_file",
         wm(dict(MAP_OK, q="model-00003-of-00003.safetensors")), 66),
        ("idx_tensor_absent", wm(dict(MAP_OK, ghost=FB)), 65),
        ("idx_tensor_unmapped", wm({"z": FA, "c": FB}), 65),
        ("idx_tensor_wrong_file", wm({"z": FA, "a": FB, "c": FB}), 65),
    ]
    res = [(index_case(out, n, i), code) for n, i, code in cases]
    dup = st_bytes([("a", "F32", [2], 8), ("extra", "U8", [1], 1)])
    res.append((index_case(out, "idx_tensor_in_two_files",
                           wm(dict(MAP_OK, extra="dup.safetensors")),
                           {"dup.safetensors": dup}), 65))
    outside = os.path.join(out, "_outside")
    os.makedirs(outside, exist_ok=True)
    target = os.path.abspath(os.path.join(outside, "x.safetensors"))
    write(target, st_bytes(FILE_B))
    d = index_case(out, "idx_symlink_outside",
                   wm({"c": "evil.safetensors"}))
    os.symlink(target, os.path.join(d, "evil.safetensors"))
    res.append((d, 65))
    return res


# --- MLC tensor-cache.json ---

def rec(name, shape, dtype="int8", fmt="raw", nbytes=4, off=0):
    return {"name": name, "shape": shape, "dtype": dtype, "format": fmt,
            "nbytes": nbytes, "byteOffset": off}


def file_rec(path=S0, nbytes=64, records=None, fmt="raw-shard"):
    r = {"dataPath": path, "format": fmt, "nbytes": nbytes}
    r["records"] = [rec("w", [4])] if records is None else records
    return r


def mlc_case(out, name, cache, setup=None):
    """A directory with S0 (64 bytes), S1 (24 bytes) and `cache` as
    tensor-cache.json (a dict, or raw text)."""
    d = os.path.join(out, name)
    os.makedirs(d)
    write(os.path.join(d, S0), bytes(range(64)))
    write(os.path.join(d, S1), bytes(range(24)))
    if setup:
        setup(d)
    text = cache if isinstance(cache, str) else json.dumps(cache)
    write(os.path.join(d, "tensor-cache.json"), text)
    return d


def one(*records):
    return {"metadata": {}, "records": [file_rec(records=list(records))]}


def files(*frecs):
    return {"records": list(frecs)}


def drop(key, r):
    r = dict(r)
    del r[key]
    return r


def mlc_cases(out):
    w = rec("w", [4])
    cases = [
        ("mlc_invalid_json", '{"records": [', 65),
        ("mlc_top_not_object", "[]", 65),
        ("mlc_metadata_not_object", {"metadata": 1, "records": []}, 65),
        ("mlc_records_missing", {"metadata": {}}, 65),
        ("mlc_no_tensors", {"records": []}, 65),
        ("mlc_file_record_not_object", files(S0), 65),
        ("mlc_data_path_missing", files(drop("dataPath", file_rec())), 65),
        ("mlc_data_path_empty", files(file_rec(path="")), 65),
        ("mlc_data_path_absolute", files(file_rec(path="/etc/hostname")),
         65),
        ("mlc_data_path_slash", files(file_rec(path="x/" + S0)), 65),
        ("mlc_data_path_dotdot", files(file_rec(path="..")), 65),
        ("mlc_data_path_missing_file",
         files(file_rec(path="params_shard_9.bin")), 66),
        ("mlc_data_path_twice",
         files(file_rec(S1, 24, []), file_rec(S1, 24, [])), 65),
        ("mlc_file_format_unknown", files(file_rec(fmt="zip")), 65),
        ("mlc_file_nbytes_mismatch", files(file_rec(nbytes=65)), 65),
        ("mlc_file_nbytes_missing", files(drop("nbytes", file_rec())), 65),
        ("mlc_file_records_not_array",
         files(dict(file_rec(), records={})), 65),
        ("mlc_record_not_object", one(1), 65),
        ("mlc_name_missing", one(drop("name", w)), 65),
        ("mlc_name_empty", one(rec("", [4])), 65),
        ("mlc_name_duplicate",
         files(file_rec(records=[w]), file_rec(S1, 24, [w])), 65),
        ("mlc_shape_not_array", one(rec("w", 4)), 65),
        ("mlc_shape_negative", one(rec("w", [2, -2])), 65),
        ("mlc_shape_fraction", one(rec("w", [2.5])), 65),
        ("mlc_shape_too_many_dims", one(rec("w", [1] * 8 + [4])), 65),
        ("mlc_dtype_missing", one(drop("dtype", w)), 65),
        ("mlc_dtype_unknown", one(rec("w", [4], dtype="int4", nbytes=2)),
         65),
        ("mlc_format_missing", one(drop("format", w)), 65),
        ("mlc_format_unknown", one(rec("w", [4], fmt="q4f16")), 65),
        # MLC stamps f32-to-bf16 on every record; only float32 is stored
        # as bf16, so a uint32 record is raw: 16 bytes, not 8.
        ("mlc_bf16_format_other_dtype_raw",
         one(rec("w", [4], "uint32", "f32-to-bf16", 8)), 65),
        # (a presharded cache, records "NAME_shard-K", is no broken input:
        # inspect lists it, and its refusal as a model to shard is
        # checked in mpi_mlc_layout.sh and test_mlc_layout)
        ("mlc_nbytes_raw_mismatch", one(rec("w", [4, 2], "float16",
                                            nbytes=8)), 65),
        ("mlc_nbytes_bf16_mismatch",
         one(rec("w", [4], "float32", "f32-to-bf16", 16)), 65),
        ("mlc_nbytes_missing", one(drop("nbytes", w)), 65),
        ("mlc_numel_overflow", one(rec("w", [2**32, 2**32], nbytes=0)), 65),
        ("mlc_bytes_overflow",
         one(rec("w", [2**62], "float64", nbytes=0)), 65),
        ("mlc_offset_missing", one(drop("byteOffset", w)), 65),
        ("mlc_offset_huge", one(rec("w", [4], off=2**63 - 1)), 65),
        ("mlc_range_past_end", one(rec("w", [8], "uint8", nbytes=8,
                                       off=60)), 65),
        ("mlc_overlap", one(rec("a", [8], "uint8", nbytes=8),
                            rec("b", [16], "uint8", nbytes=16, off=32),
                            rec("c", [4], "float32", nbytes=16, off=40)),
         65),
    ]
    res = [(mlc_case(out, n, c), code) for n, c, code in cases]
    res.append((mlc_case(out, "mlc_data_path_not_regular",
                         files(file_rec(path="shard_dir.bin", records=[])),
                         lambda d: os.mkdir(os.path.join(d,
                                                         "shard_dir.bin"))),
                65))
    outside = os.path.join(out, "_outside")
    os.makedirs(outside, exist_ok=True)
    target = os.path.abspath(os.path.join(outside, "secret.bin"))
    write(target, bytes(64))
    res.append((mlc_case(out, "mlc_data_path_symlink_outside",
                         files(file_rec(path="evil.bin", records=[])),
                         lambda d: os.symlink(
                             target, os.path.join(d, "evil.bin"))), 65))
    return res


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: corpus_dirs.py OUTDIR\n")
        return 64
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for path, code in index_cases(out) + mlc_cases(out):
        print("%s %d" % (path, code))
    return 0


if __name__ == "__main__":
    sys.exit(main())
