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

/* X-macro: name, value, message, sysexits exit code. */
#define TPL_ERRNO_MAP(XX)                                                   \
  XX(EFORMAT, -10001, "malformed input", 65)                                \
  XX(EDTYPE, -10002, "unsupported dtype", 65)                               \
  XX(EPLAN, -10003, "invalid plan", 65)                                     \
  XX(EINDIVISIBLE, -10004, "shape not divisible by shard count", 65)        \
  XX(EOVERFLOW, -10005, "size overflows 64 bits", 65)                       \
  XX(ELIMIT, -10006, "input exceeds a hard limit", 65)                      \
  XX(EUSAGE, -10007, "bad command line", 64)                                \
  XX(ENOMODEL, -10008, "model not found", 66)                               \
  XX(EPEER, -10009, "peer or MPI failure", 69)                              \
  XX(EINTERNAL, -10010, "internal error", 70)                               \
  XX(EOUTPUT, -10011, "cannot create output", 73)                           \
  XX(EMISMATCH, -10012, "verification mismatch", 65)                        \
  XX(EUNREACHABLE, -10013, "daemon unreachable", 69)                        \
  XX(EPROTO, -10014, "protocol error", 69)

enum tpl_errno {
#define TPL_ERRNO_ENUM(name, val, msg, ex) TPL_##name = (val),
  TPL_ERRNO_MAP(TPL_ERRNO_ENUM)
#undef TPL_ERRNO_ENUM
  TPL_ERRNO_LAST_ = -10000
};

/* Returns a static string describing `code` (a TPL_E* code or -errno). */
const char *tpl_strerror(int code);

/* Returns the sysexits-style process exit code for `code` (0 for 0). */
int tpl_exit_code(int code);

/* Returns the library version string, e.g. "0.1.0". */
const char *tpl_version(void);

#ifdef __cplusplus
}
#endif
#endif /* TPLOAD_H */
