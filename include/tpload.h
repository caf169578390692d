/* tpload.h - the public interface of libtpload.
 *
 * tpload is a tensor-parallel weight loader: rank 0 of an MPI job reads a
 * checkpoint once, cuts every tensor into per-rank shards exactly as MLC
 * LLM's ShardSingleDim does, and delivers each rank its slice.  This header
 * is the small, stable part other programs may use: error codes and their
 * text, and (for processes attaching to a running `tpload serve`) the
 * consumer API.  It includes no MPI, libuv or protobuf headers.
 *
 * Conventions: functions return 0 or a negative code.  Codes in the range
 * of errno values are -errno from a failing system call; the TPL_E* codes
 * below are the project's own.
 */
#ifndef TPLOAD_H
#define TPLOAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; tpl_version() returns the library's. */
#define TPL_VERSION_MAJOR 0
#define TPL_VERSION_MINOR 1
#define TPL_VERSION_PATCH 0
#define TPL_VERSION_STRING "0.1.0"

/* Marks the public API.  libtpload is built with -fvisibility=hidden, so
 * these declarations are the only symbols its shared library exports. */
#if defined(__GNUC__)
#define TPL_API __attribute__((visibility("default")))
#else
#define TPL_API
#endif

/* X-macro: name, value, message, sysexits exit code. */
#define TPL_ERRNO_MAP(XX)                                                      \
  XX(EFORMAT, -10001, "malformed input", 65)                                   \
  XX(EDTYPE, -10002, "unsupported dtype", 65)                                  \
  XX(EPLAN, -10003, "invalid plan", 65)                                        \
  XX(EINDIVISIBLE, -10004, "shape not divisible by shard count", 65)           \
  XX(EOVERFLOW, -10005, "size overflows 64 bits", 65)                          \
  XX(ELIMIT, -10006, "input exceeds a hard limit", 65)                         \
  XX(EUSAGE, -10007, "bad command line", 64)                                   \
  XX(ENOMODEL, -10008, "model not found", 66)                                  \
  XX(EPEER, -10009, "peer or MPI failure", 69)                                 \
  XX(EINTERNAL, -10010, "internal error", 70)                                  \
  XX(EOUTPUT, -10011, "cannot create output", 73)                              \
  XX(EMISMATCH, -10012, "verification mismatch", 65)                           \
  XX(EUNREACHABLE, -10013, "daemon unreachable", 69)                           \
  XX(EPROTO, -10014, "protocol error", 69)                                     \
  XX(ESHORT, -10015, "file ended early", 74)                                   \
  XX(EDENIED, -10016, "access denied", 77)                                     \
  XX(EREMOTE, -10017, "remote source unavailable", 69)

enum tpl_errno {
#define TPL_ERRNO_ENUM(name, val, msg, ex) TPL_##name = (val),
  TPL_ERRNO_MAP(TPL_ERRNO_ENUM)
#undef TPL_ERRNO_ENUM
      TPL_ERRNO_LAST_ = -10000
};

/* Returns a static string describing `code` (a TPL_E* code or -errno). */
TPL_API const char *tpl_strerror(int code);

/* Returns the sysexits-style process exit code for `code` (0 for 0). */
TPL_API int tpl_exit_code(int code);

/* Returns the library version string, e.g. "0.1.0". */
TPL_API const char *tpl_version(void);

/* ---- consumer API: attach to a running `tpload serve` ----
 *
 * Each rank of `mpirun -np N tpload serve MODEL --socket-dir DIR` serves
 * its shard on DIR/rank{R}.sock.  An inference process attaches to the
 * socket of the rank it pairs with and reads tensors in place: the daemon
 * passes a sealed, read-only memfd that the client maps, so no byte is
 * copied and the data cannot change under the reader.  Only processes of
 * the daemon's own user (or root) may connect; in turn a client trusts
 * only a daemon of its own effective uid (or of TPLOAD_DAEMON_UID), whose
 * socket directory is private to that uid and cannot be swapped.
 *
 *   struct tpl_shard *s;
 *   struct tpl_tensor_view v;
 *   char msg[256];
 *   if (tpl_attach("/run/tp/rank0.sock", &s, msg, sizeof msg) != 0) ...
 *   if (tpl_shard_find(s, "lm_head.weight", &v) == 0)
 *     use(v.data, v.nbytes);
 *   tpl_detach(s);   // every pointer obtained from s is now invalid
 *
 * An attachment is immutable: it may be read from many threads at once.
 * It outlives the daemon (the mapping stays valid after the daemon
 * exits) until tpl_detach. */
struct tpl_shard;

/* The element type of a tensor, as a number (tpl_tensor_view's
 * dtype_id).  The values are part of the ABI: they never change, and a
 * later version only adds new ones, so a consumer should refuse a value
 * it does not know.  Each comment gives the MLC name (the view's `dtype`
 * string), the safetensors name and the size of one element in bytes.
 * Every type is little-endian; bool is one byte, 0 or 1. */
enum tpl_dtype {
  TPL_DT_BOOL = 0,     /* "bool", BOOL, 1 */
  TPL_DT_U8 = 1,       /* "uint8", U8, 1 */
  TPL_DT_I8 = 2,       /* "int8", I8, 1 */
  TPL_DT_I16 = 3,      /* "int16", I16, 2 */
  TPL_DT_U16 = 4,      /* "uint16", U16, 2 */
  TPL_DT_F16 = 5,      /* "float16", F16, 2: IEEE 754 binary16 */
  TPL_DT_BF16 = 6,     /* "bfloat16", BF16, 2: the top half of a float32 */
  TPL_DT_I32 = 7,      /* "int32", I32, 4 */
  TPL_DT_U32 = 8,      /* "uint32", U32, 4 */
  TPL_DT_F32 = 9,      /* "float32", F32, 4 */
  TPL_DT_F64 = 10,     /* "float64", F64, 8 */
  TPL_DT_I64 = 11,     /* "int64", I64, 8 */
  TPL_DT_U64 = 12,     /* "uint64", U64, 8 */
  TPL_DT_F8_E4M3 = 13, /* "float8_e4m3fn", F8_E4M3, 1: OCP E4M3, no inf */
  TPL_DT_F8_E5M2 = 14  /* "float8_e5m2", F8_E5M2, 1: OCP E5M2 */
};

/* One tensor as the attached rank holds it.  Every pointer is borrowed
 * from the attachment and valid until tpl_detach.  Where the bytes are:
 * ask tpl_tensor_data (the `data` field holds the same address and stays
 * for the ABI: the struct's layout is part of it). */
struct tpl_tensor_view {
  const char *name;
  const char *dtype;       /* MLC name: "float16", "bfloat16", ... */
  enum tpl_dtype dtype_id; /* the same type as a number */
  int ndim;
  const uint64_t *shape; /* ndim entries */
  const void *data;      /* read-only; NULL only when nbytes is 0 */
  uint64_t nbytes;
  uint64_t xxh3; /* XXH3-64 of the bytes, as the daemon computed */
};

/* Connects to `socket_path` and, in one round trip, receives the rank's
 * store and its tensor table (two sealed memfds, mapped read-only; the
 * table is laid out by the daemon for reading in place), checks every
 * entry against the mapping once, and needs no memory per tensor.  Each
 * socket operation waits at most 10 s.  On success *out is a new
 * attachment (release with tpl_detach).  Returns 0, TPL_EUNREACHABLE
 * (no daemon answers), TPL_EPROTO (the daemon's replies are not valid)
 * or -errno; when `errbuf` is not NULL it receives one line saying why
 * (truncated to `errlen` bytes). */
TPL_API int tpl_attach(const char *socket_path, struct tpl_shard **out,
                       char *errbuf, size_t errlen);

/* Unmaps the shard and frees the attachment; NULL is accepted. */
TPL_API void tpl_detach(struct tpl_shard *s);

/* The attached rank and the job's world size. */
TPL_API uint32_t tpl_shard_rank(const struct tpl_shard *s);
TPL_API uint32_t tpl_shard_world(const struct tpl_shard *s);

/* Number of tensors, and the total size of the mapping in bytes. */
TPL_API size_t tpl_shard_count(const struct tpl_shard *s);
TPL_API uint64_t tpl_shard_bytes(const struct tpl_shard *s);

/* The serving job's identity: its random id (32 hex digits, drawn once
 * per `tpload serve` and the same on every rank, also in the ready file)
 * and the MODEL it loaded.  Borrowed until tpl_detach. */
TPL_API const char *tpl_shard_job_id(const struct tpl_shard *s);
TPL_API const char *tpl_shard_model(const struct tpl_shard *s);

/* The generation the attachment is to: 1 for the job's first load, one
 * more per `tpload reload` (or SIGHUP) that switched; 0 from a daemon
 * older than reloads.  An attachment never changes: after a switch it
 * still maps the bytes of its own generation until tpl_detach, and a
 * new tpl_attach gets the new one. */
TPL_API uint64_t tpl_shard_generation(const struct tpl_shard *s);

/* Where the bytes of `v` (filled by tpl_shard_tensor or tpl_shard_find)
 * are: read-only memory of this process mapped from the daemon's store,
 * in place, valid until tpl_detach; NULL only when v->nbytes is 0.
 * Today the same as v->data; the accessor, not the field, is what a
 * consumer should read, so that a later kind of store whose bytes live
 * elsewhere can say so here. */
TPL_API const void *tpl_tensor_data(const struct tpl_tensor_view *v);

/* Fills *out with tensor `index` (0 <= index < tpl_shard_count, in the
 * checkpoint's order).  Returns 0 or -ERANGE. */
TPL_API int tpl_shard_tensor(const struct tpl_shard *s, size_t index,
                             struct tpl_tensor_view *out);

/* Fills *out with the tensor called `name` (a hash lookup in the mapped
 * table, O(1) expected, no allocation).  Returns 0 or -ENOENT. */
TPL_API int tpl_shard_find(const struct tpl_shard *s, const char *name,
                           struct tpl_tensor_view *out);

/* ---- probing and stopping a running `tpload serve` ---- */

/* What one rank says about itself when probed. */
struct tpl_health {
  uint32_t rank;  /* the rank answering on this socket */
  uint32_t world; /* the job's world size */
  uint64_t bytes; /* the size of the rank's shard store */
};

/* Asks the rank serving `socket_path` whether it serves (what `tpload
 * status SOCKET --health` does; one request, at most 10 s).  Returns 0
 * and fills *out (when not NULL) if it does; TPL_EUNREACHABLE when
 * nothing answers or the rank refuses (as it does while it has heard no
 * heartbeat from another rank of the job for half --stall-timeout,
 * which errbuf names), TPL_EPROTO on an invalid reply.  `errbuf` as for
 * tpl_attach. */
TPL_API int tpl_health(const char *socket_path, struct tpl_health *out,
                       char *errbuf, size_t errlen);

/* Waits until the rank serving `socket_path` serves a generation after
 * `after_generation` (one request the daemon answers when its generation
 * changes: no polling), for at most `timeout_ms` (< 0: no limit).
 * Returns 0 with the new generation in *generation (when not NULL);
 * -ETIMEDOUT when the time was up first (*generation: the current one);
 * TPL_EUNREACHABLE (no daemon, or it stopped meanwhile), TPL_EPROTO or
 * TPL_EPEER as for tpl_health.  A loop: attach, serve, tpl_watch with
 * tpl_shard_generation, attach again, then detach the old attachment.
 * `errbuf` as for tpl_attach. */
TPL_API int tpl_watch(const char *socket_path, uint64_t after_generation,
                      int timeout_ms, uint64_t *generation, char *errbuf,
                      size_t errlen);

/* Asks the job to stop (what `tpload status SOCKET --shutdown` does).
 * Only rank 0 ends the job, so `socket_path` must be DIR/rank0.sock; any
 * other rank refuses and the call returns TPL_EPEER with the daemon's
 * reason in `errbuf`.  Returns 0 once rank 0 has accepted the request;
 * the ranks then exit within seconds and remove their sockets. */
TPL_API int tpl_shutdown(const char *socket_path, char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* TPLOAD_H */
