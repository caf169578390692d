"""tpload - Python bindings for libtpload, the consumer API of `tpload serve`.

Each rank of `mpirun -np N tpload serve MODEL --socket-dir DIR` keeps its
shard in a sealed, read-only memfd and serves it on DIR/rank{R}.sock.  This
module attaches to one rank through libtpload.so (ctypes, no compiled code
of its own) and hands out every tensor as a read-only numpy array over the
shared mapping: no byte is copied.

    import tpload
    with tpload.attach("/run/tp/rank0.sock") as shard:
        print(shard.rank, shard.world, len(shard))
        w = shard["model.layers.0.self_attn.q_proj.weight"]  # numpy array
        for name, arr in shard.items():
            ...

A Shard is a read-only mapping (collections.abc.Mapping) from tensor name
to array: `for name in shard`, keys(), values(), items() (all in
checkpoint order), `name in shard`, len(shard), shard.get(name).

dtypes: float16/32/64, (u)int8..64 and bool map to numpy's.  bfloat16 and
the float8 types map to ml_dtypes' types when the `ml_dtypes` package is
importable, else to raw views of the same width (uint16 for bfloat16, uint8
for float8): the bits are exact, the arithmetic is the caller's business.
DType gives the C header's enum tpl_dtype (info()["dtype_id"]).

Arrays cannot be made writable: each is built on a read-only buffer, so
arr.setflags(write=True) raises ValueError (the pages are mapped
read-only; a write would kill the process).  Copy (arr.copy()) to modify.

Lifetime: an array keeps the attachment alive, so arrays stay valid after
the Shard is closed or collected (and after the daemon exits); the mapping
is released when the Shard and every array from it are gone.

The library is found through $TPLOAD_LIBRARY (a path to libtpload.so),
else where `make install` put it (the installed module knows its libdir,
also relative to itself for a DESTDIR or moved prefix), else the system's
linker search (ctypes.util.find_library), else libtpload.so.0 on the
default path.
"""
import collections.abc
import ctypes
import ctypes.util
import enum
import errno
import os

import numpy as np

__all__ = ["attach", "health", "shutdown", "Shard", "DType", "Error",
           "version", "library_path", "watch"]

# Where `make install` put libtpload.so: Makefile.am writes both lines
# into the installed copy of this file (None in the source tree).
_INSTALLED_LIBDIR = None  # absolute: $(libdir)
_LIBDIR_FROM_MODULE = None  # $(libdir) relative to this file's directory

try:  # optional: real bfloat16 / float8 dtypes
    import ml_dtypes as _ml
except ImportError:  # Debian 12 does not package it
    _ml = None


class DType(enum.IntEnum):
    """enum tpl_dtype of tpload.h: the element type as a number (values
    never change; the MLC name is the view's "dtype" string)."""
    BOOL = 0
    U8 = 1
    I8 = 2
    I16 = 3
    U16 = 4
    F16 = 5
    BF16 = 6
    I32 = 7
    U32 = 8
    F32 = 9
    F64 = 10
    I64 = 11
    U64 = 12
    F8_E4M3 = 13
    F8_E5M2 = 14


_NUMPY = {
    "float16": np.float16, "float32": np.float32, "float64": np.float64,
    "int8": np.int8, "uint8": np.uint8, "int16": np.int16,
    "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32,
    "int64": np.int64, "uint64": np.uint64, "bool": np.bool_,
    "bfloat16": _ml.bfloat16 if _ml else np.uint16,
    "float8_e4m3fn": _ml.float8_e4m3fn if _ml else np.uint8,
    "float8_e5m2": _ml.float8_e5m2 if _ml else np.uint8,
}


class Error(OSError):
    """A libtpload call failed: `code` is its (negative) return value,
    `exit_code` the sysexits code tpload would exit with."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.exit_code = _lib().tpl_exit_code(code)


class _View(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p),
                ("dtype_id", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_uint64)),
                ("data", ctypes.c_void_p), ("nbytes", ctypes.c_uint64),
                ("xxh3", ctypes.c_uint64)]


class _Health(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_uint32), ("world", ctypes.c_uint32),
                ("bytes", ctypes.c_uint64)]


_LIB = None
_ERRLEN = 1024


def _declare(lib):
    p, c = ctypes.POINTER, ctypes
    sigs = {
        "tpl_version": (c.c_char_p, []),
        "tpl_strerror": (c.c_char_p, [c.c_int]),
        "tpl_exit_code": (c.c_int, [c.c_int]),
        "tpl_attach": (c.c_int, [c.c_char_p, p(c.c_void_p), c.c_char_p,
                                 c.c_size_t]),
        "tpl_detach": (None, [c.c_void_p]),
        "tpl_shard_rank": (c.c_uint32, [c.c_void_p]),
        "tpl_shard_world": (c.c_uint32, [c.c_void_p]),
        "tpl_shard_count": (c.c_size_t, [c.c_void_p]),
        "tpl_shard_bytes": (c.c_uint64, [c.c_void_p]),
        "tpl_shard_job_id": (c.c_char_p, [c.c_void_p]),
        "tpl_shard_model": (c.c_char_p, [c.c_void_p]),
        "tpl_shard_tensor": (c.c_int, [c.c_void_p, c.c_size_t, p(_View)]),
        "tpl_shard_find": (c.c_int, [c.c_void_p, c.c_char_p, p(_View)]),
        "tpl_tensor_data": (c.c_void_p, [p(_View)]),
        "tpl_health": (c.c_int, [c.c_char_p, p(_Health), c.c_char_p,
                                 c.c_size_t]),
        "tpl_shutdown": (c.c_int, [c.c_char_p, c.c_char_p, c.c_size_t]),
        "tpl_shard_generation": (c.c_uint64, [c.c_void_p]),
        "tpl_watch": (c.c_int, [c.c_char_p, c.c_uint64, c.c_int,
                                p(c.c_uint64), c.c_char_p, c.c_size_t]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def _installed_library():
    """The libtpload.so.0 `make install` put beside this module: first
    relative to this file (right in a DESTDIR or a moved prefix), then at
    the configured libdir; None when neither exists (the source tree)."""
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = []
    if _LIBDIR_FROM_MODULE is not None:
        dirs.append(os.path.join(here, _LIBDIR_FROM_MODULE))
    if _INSTALLED_LIBDIR is not None:
        dirs.append(_INSTALLED_LIBDIR)
    for d in dirs:
        path = os.path.join(d, "libtpload.so.0")
        if os.path.exists(path):
            return os.path.normpath(path)
    return None


def library_path():
    """The libtpload.so this module loads (see the module's help)."""
    return (os.environ.get("TPLOAD_LIBRARY") or _installed_library()
            or ctypes.util.find_library("tpload") or "libtpload.so.0")


def _lib():
    global _LIB
    if _LIB is None:
        _LIB = _declare(ctypes.CDLL(library_path()))
    return _LIB


def _check(rc, errbuf):
    if rc != 0:
        text = errbuf.value.decode(errors="replace") if errbuf else ""
        raise Error(rc, text or _lib().tpl_strerror(rc).decode())


def version():
    """The library's version string, e.g. "0.1.0"."""
    return _lib().tpl_version().decode()


def health(socket_path):
    """Probes the rank serving `socket_path`; returns a dict with rank,
    world and bytes (its shard's size).  Raises Error when it does not
    serve, or hears no heartbeat from another rank of the job for half
    --stall-timeout (exit_code 69; the message names that rank)."""
    h, err = _Health(), ctypes.create_string_buffer(_ERRLEN)
    _check(_lib().tpl_health(os.fsencode(socket_path), ctypes.byref(h), err,
                             _ERRLEN), err)
    return {"rank": h.rank, "world": h.world, "bytes": h.bytes}


def shutdown(socket_path):
    """Asks the job to stop; `socket_path` must be DIR/rank0.sock."""
    err = ctypes.create_string_buffer(_ERRLEN)
    _check(_lib().tpl_shutdown(os.fsencode(socket_path), err, _ERRLEN), err)


class _Attachment:
    """Owns one tpl_shard handle; detached when the last reference (the
    Shard or any array over its mapping) goes away."""

    def __init__(self, handle):
        self.handle = handle

    def __del__(self):
        if self.handle:
            _lib().tpl_detach(self.handle)
            self.handle = None


class Shard(collections.abc.Mapping):
    """One rank's shard, attached: a read-only mapping from tensor name to
    a read-only numpy array over the daemon's memory.

    Iteration, keys(), values() and items() follow the checkpoint's
    order; `name in shard` and shard.get(name) look up without copying;
    shard.tensor(i) and shard.info(i) go by index.  rank, world, nbytes
    (the store's size), job_id and model describe the serving job.  Two
    Shards are equal only when they are the same object."""

    def __init__(self, socket_path):
        handle, err = ctypes.c_void_p(), ctypes.create_string_buffer(_ERRLEN)
        _check(_lib().tpl_attach(os.fsencode(socket_path),
                                 ctypes.byref(handle), err, _ERRLEN), err)
        self._att = _Attachment(handle.value)
        lib = _lib()
        self.rank = lib.tpl_shard_rank(handle)
        self.world = lib.tpl_shard_world(handle)
        self.nbytes = lib.tpl_shard_bytes(handle)
        self.job_id = lib.tpl_shard_job_id(handle).decode()
        self.model = os.fsdecode(lib.tpl_shard_model(handle))
        self._count = lib.tpl_shard_count(handle)
        self.generation = lib.tpl_shard_generation(handle)  # see watch()

    __eq__ = object.__eq__  # Mapping's would compare arrays elementwise
    __hash__ = object.__hash__

    def _handle(self):
        if self._att is None:
            raise ValueError("shard is closed")
        return self._att.handle

    def _view(self, i):
        v = _View()
        if _lib().tpl_shard_tensor(self._handle(), i, ctypes.byref(v)) != 0:
            raise IndexError("tensor index %d out of range" % i)
        return v

    def _find(self, name):
        """The view of tensor `name`, or None."""
        if not isinstance(name, str):
            return None
        v = _View()
        rc = _lib().tpl_shard_find(self._handle(), name.encode(),
                                   ctypes.byref(v))
        return v if rc == 0 else None

    def _array(self, v):
        """A read-only array over view v: its buffer is a read-only
        memoryview, so numpy refuses setflags(write=True) on it and on
        every view of it."""
        dtype = np.dtype(_NUMPY[v.dtype.decode()])
        shape = tuple(v.shape[i] for i in range(v.ndim))
        if v.nbytes == 0:
            return np.frombuffer(b"", dtype).reshape(shape)
        data = _lib().tpl_tensor_data(ctypes.byref(v))  # where the bytes are
        buf = (ctypes.c_uint8 * v.nbytes).from_address(data)
        buf._attachment = self._att  # the array keeps the mapping
        ro = memoryview(buf).toreadonly()
        return np.frombuffer(ro, dtype).reshape(shape)

    def __len__(self):
        """The number of tensors this rank holds."""
        return self._count

    def __iter__(self):
        """Every tensor name, in checkpoint order."""
        for i in range(self._count):
            yield self._view(i).name.decode()

    def __getitem__(self, name):
        """Tensor `name` as a read-only numpy array; KeyError if absent."""
        v = self._find(name)
        if v is None:
            raise KeyError(name)
        return self._array(v)

    def __contains__(self, name):
        """Whether this rank holds tensor `name` (no array is made)."""
        return self._find(name) is not None

    def info(self, i):
        """Tensor i's name, MLC dtype name, dtype_id (a DType), shape,
        nbytes and xxh3 (int)."""
        v = self._view(i)
        return {"name": v.name.decode(), "dtype": v.dtype.decode(),
                "dtype_id": DType(v.dtype_id),
                "shape": [v.shape[k] for k in range(v.ndim)],
                "nbytes": v.nbytes, "xxh3": v.xxh3}

    def tensor(self, i):
        """Tensor i (checkpoint order) as a read-only numpy array."""
        return self._array(self._view(i))

    def names(self):
        """Every tensor name, in checkpoint order (list(shard))."""
        return list(self)

    def close(self):
        """Drops this Shard's hold on the mapping (arrays keep theirs)."""
        self._att = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def attach(socket_path):
    """Attaches to the rank serving `socket_path` (DIR/rank{R}.sock)."""
    return Shard(socket_path)


def watch(socket_path, after_generation, timeout_ms=-1):
    """Waits until the rank serving `socket_path` serves a generation
    after `after_generation` (the daemon answers when it switches: no
    polling) and returns it, or None when `timeout_ms` (-1: no limit)
    passed first.  An engine's loop: attach, serve from shard, then
    watch(sock, shard.generation), attach again, close the old one."""
    gen, err = ctypes.c_uint64(), ctypes.create_string_buffer(_ERRLEN)
    rc = _lib().tpl_watch(os.fsencode(socket_path), after_generation,
                          timeout_ms, ctypes.byref(gen), err, _ERRLEN)
    if rc == -errno.ETIMEDOUT:
        return None
    _check(rc, err)
    return gen.value
