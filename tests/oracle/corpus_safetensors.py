#!/usr/bin/env python3
"""corpus_safetensors.py - writes a corpus of broken safetensors files, one
per rule the reader enforces, named after the rule.

usage: python3 tests/corpus_safetensors.py OUTDIR
Prints one line per case, "CASE_PATH EXPECTED_EXIT", where EXPECTED_EXIT is
what `tpload inspect CASE_PATH` must exit with (sysexits: 65 malformed or
unsupported, 66 missing, 74 I/O error).  Plain python3, stdlib only.
"""
import json
import os
import struct
import sys

MALFORMED, MISSING, IOERR = 65, 66, 74


def entry(dtype="U8", shape=(1,), offsets=(0, 1)):
    return {"dtype": dtype, "shape": list(shape),
            "data_offsets": list(offsets)}


def st_bytes(header, data_len=0, hlen=None, extra=b""):
    """8-byte length + header (dict, str or bytes) + data_len bytes."""
    if isinstance(header, dict):
        header = json.dumps(header, separators=(",", ":"))
    if isinstance(header, str):
        header = header.encode("utf-8")
    n = len(header) if hlen is None else hlen
    return (struct.pack("<Q", n) + header +
            bytes(i % 256 for i in range(data_len)) + extra)


def one(name, dtype="U8", shape=(1,), offsets=(0, 1), data_len=None):
    """A one-tensor file; data_len defaults to the end offset."""
    return st_bytes({name: entry(dtype, shape, offsets)},
                    offsets[1] if data_len is None else data_len)


def cases():
    """(rule name, file bytes, expected exit)."""
    dup = ('{"a":' + json.dumps(entry()) + ',"a":' + json.dumps(entry()) +
           '}')
    dup_diff = ('{"a":' + json.dumps(entry()) + ',"a":' +
                json.dumps(entry(offsets=(1, 2))) + '}')
    two = lambda a, b, n: st_bytes({"a": entry(*a), "b": entry(*b)}, n)
    yield "empty_file", b"", MALFORMED
    yield "short_file", b"\x02\x00\x00", MALFORMED
    yield "header_over_cap", struct.pack("<Q", 100000001) + b"{}", MALFORMED
    yield "header_len_u64_max", struct.pack("<Q", 2**64 - 1) + b"{}", \
        MALFORMED
    yield "header_past_eof", st_bytes("{}", hlen=3), MALFORMED
    yield "header_not_utf8", st_bytes(b'{"a\xff":{}}'), MALFORMED
    yield "header_not_json", st_bytes('{"a":'), MALFORMED
    yield "header_empty", st_bytes(""), MALFORMED
    yield "header_not_object", st_bytes("[]"), MALFORMED
    yield "header_junk_after_object", st_bytes("{} x"), MALFORMED
    yield "header_nul_padding", st_bytes(b"{}\x00\x00\x00\x00\x00\x00"), \
        MALFORMED
    yield "duplicate_name_identical", st_bytes(dup, 1), MALFORMED
    yield "duplicate_name", st_bytes(dup_diff, 2), MALFORMED
    yield "entry_not_object", st_bytes({"a": [0, 1]}), MALFORMED
    yield "entry_missing_key", \
        st_bytes({"a": {"dtype": "U8", "shape": [1]}}, 1), MALFORMED
    yield "entry_extra_key", \
        st_bytes({"a": dict(entry(), offset=0)}, 1), MALFORMED
    yield "dtype_unknown", one("a", "F7"), MALFORMED
    yield "dtype_not_string", \
        st_bytes({"a": dict(entry(), dtype=1)}, 1), MALFORMED
    yield "dtype_unsupported_f4", one("a", "F4", (2,)), MALFORMED
    yield "dtype_unsupported_f6_e2m3", one("a", "F6_E2M3"), MALFORMED
    yield "dtype_unsupported_c64", one("a", "C64", (1,), (0, 8)), MALFORMED
    yield "shape_negative", one("a", shape=(-1,)), MALFORMED
    yield "shape_fractional", \
        st_bytes('{"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}}',
                 1), MALFORMED
    yield "shape_oversized_int", \
        st_bytes('{"a":{"dtype":"U8","shape":[99999999999999999999],'
                 '"data_offsets":[0,1]}}', 1), MALFORMED
    yield "shape_not_array", \
        st_bytes({"a": dict(entry(), shape=1)}, 1), MALFORMED
    yield "shape_too_many_dims", one("a", shape=(1,) * 9), MALFORMED
    yield "offsets_negative", one("a", offsets=(-1, 0), data_len=1), \
        MALFORMED
    yield "offsets_fractional", \
        st_bytes('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1.0]}}',
                 1), MALFORMED
    yield "offsets_not_pair", \
        st_bytes({"a": dict(entry(), data_offsets=[0, 1, 2])}, 1), MALFORMED
    yield "name_empty", one(""), MALFORMED
    yield "name_with_nul", one("a\0b"), MALFORMED
    yield "name_over_1kib", one("n" * 1025), MALFORMED
    yield "tensor_named_metadata", one("__metadata__"), MALFORMED
    yield "metadata_not_object", st_bytes({"__metadata__": "pt"}), MALFORMED
    yield "metadata_non_string", \
        st_bytes({"__metadata__": {"step": 3}}), MALFORMED
    yield "size_overflow", one("a", shape=(2**32, 2**32), offsets=(0, 0)), \
        MALFORMED
    yield "size_mismatch", one("a", "F32", (2, 3), (0, 20)), MALFORMED
    yield "offsets_begin_after_end", \
        one("a", shape=(0,), offsets=(4, 0), data_len=4), MALFORMED
    yield "first_offset_not_zero", one("a", shape=(2,), offsets=(2, 4)), \
        MALFORMED
    yield "offsets_gap", two(("U8", (2,), (0, 2)), ("U8", (2,), (3, 5)), 5), \
        MALFORMED
    yield "offsets_overlap", \
        two(("U8", (4,), (0, 4)), ("U8", (4,), (2, 6)), 6), MALFORMED
    yield "trailing_bytes", one("a", shape=(2,), offsets=(0, 2), data_len=5), \
        MALFORMED
    yield "data_truncated", one("a", shape=(8,), offsets=(0, 8), data_len=5), \
        MALFORMED


def special_cases(outdir):
    """Cases that are not plain files: (rule name, path, expected exit)."""
    missing = os.path.join(outdir, "missing_file.safetensors")
    yield "missing_file", missing, MISSING
    fifo = os.path.join(outdir, "fifo.safetensors")
    os.mkfifo(fifo)
    yield "fifo", fifo, MALFORMED
    # A sysfs file claims 4096 bytes but reads fewer: the 8-byte read comes
    # up short, which must be an I/O error (a file that shrank), not a crash.
    sysfs = "/sys/devices/system/cpu/online"
    try:
        with open(sysfs, "rb") as f:
            real = len(f.read())
        if os.stat(sysfs).st_size >= 8 > real:
            link = os.path.join(outdir, "read_short_sysfs.safetensors")
            os.symlink(sysfs, link)
            yield "read_short_sysfs", link, IOERR
    except OSError:
        pass


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: corpus_safetensors.py OUTDIR\n")
        return 64
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    for name, blob, code in cases():
        path = os.path.join(outdir, name + ".safetensors")
        with open(path, "wb") as f:
            f.write(blob)
        print("%s %d" % (path, code))
    for name, path, code in special_cases(outdir):
        print("%s %d" % (path, code))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
