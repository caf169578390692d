/* wire.h - the daemon's wire format (DESIGN.md section 5): frames of a
 * 4-byte big-endian length then one protobuf message, an incremental frame
 * reader for bytes that arrive in pieces, and plain-C views of the Request
 * and Response messages so the daemon and the client never see protobuf.
 * Pure buffer functions: no sockets, no libuv, safe to fuzz. */
#ifndef TPL_WIRE_H
#define TPL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#define TPL_WIRE_HEADER 4                  /* big-endian body length */
#define TPL_WIRE_MAX_REQUEST (64u << 10)   /* daemon refuses longer */
#define TPL_WIRE_MAX_RESPONSE (256u << 20) /* client refuses longer */

/* Request kinds; the same numbers as tpload.Request.Kind. */
enum tpl__req_kind {
  TPL_REQ_HEALTH = 0,
  TPL_REQ_STATUS = 1,
  TPL_REQ_ATTACH = 3, /* 2 was 0.1.0's manifest */
  TPL_REQ_SHUTDOWN = 4,
  TPL_REQ_RELOAD = 5, /* rank 0: load the next generation (serve) */
  TPL_REQ_WATCH = 6   /* answered when the generation changes */
};

/* Assembles one frame at a time from input that arrives in pieces.  The
 * body is allocated only once the length is known and within `cap`.  Part
 * of a frame has been received when hdr_have > 0; a complete frame is
 * body (NULL when empty), len bytes, until tpl__frame_reset. */
struct tpl__frame_reader {
  uint32_t cap;
  uint8_t hdr[TPL_WIRE_HEADER];
  uint32_t hdr_have;
  uint32_t len;  /* body length, valid once hdr_have == 4 */
  uint32_t have; /* body bytes received */
  uint8_t *body; /* owned */
};

/* Prepares an empty reader accepting bodies of at most `cap` bytes. */
void tpl__frame_reader_init(struct tpl__frame_reader *r, uint32_t cap);

/* Consumes bytes from `data` (n of them) up to the end of the current
 * frame and stores how many it took in *used.  Returns 1 when a frame is
 * complete (read its body, then tpl__frame_reset), 0 when
 * every byte was taken and more are needed, TPL_ELIMIT when the announced
 * length exceeds the cap (r->len holds it; nothing was allocated), or
 * -ENOMEM.  After an error the reader must be reset before reuse. */
int tpl__frame_feed(struct tpl__frame_reader *r, const uint8_t *data, size_t n,
                    size_t *used);

/* Drops the current frame (and its buffer); the reader starts over. */
void tpl__frame_reset(struct tpl__frame_reader *r);

/* Request flags (fields of tpload.Request beside its kind); a daemon
 * that does not know one ignores it and answers the plain request. */
#define TPL_REQ_F_SUMMARY 1u /* status without per-tensor facts */

/* Decodes a request body into its kind (any value protobuf carries, the
 * caller refuses kinds it does not know) and its TPL_REQ_F_* flags.
 * Returns 0 or TPL_EPROTO. */
int tpl__wire_decode_request(const uint8_t *body, size_t len, int *kind,
                             unsigned *flags, struct tpl__error *err);

/* What a reload or a watch request carries beside its kind and flags.
 * Decoding: the strings are malloc'd (tpl__wire_request_args_free). */
struct tpl__wire_request_args {
  char *model;               /* reload: "" or NULL for the current path */
  char *plan;                /* reload: "" or NULL for the current plan */
  uint64_t after_generation; /* watch */
  int64_t timeout_ms;        /* watch: < 0 waits until the change */
  int verify_md5;            /* reload: --verify-md5 for this one */
};

/* Decodes the arguments of a request body (tpl__wire_decode_request
 * decoded its kind).  Returns 0, TPL_EPROTO or -ENOMEM. */
int tpl__wire_decode_request_args(const uint8_t *body, size_t len,
                                  struct tpl__wire_request_args *out,
                                  struct tpl__error *err);

void tpl__wire_request_args_free(struct tpl__wire_request_args *a);

/* Encodes a request of `kind` with TPL_REQ_F_* `flags` and arguments `a`
 * (NULL: none) as a whole frame; *frame is malloc'd (caller frees).
 * Returns 0 or -ENOMEM. */
int tpl__wire_encode_request_args(int kind, unsigned flags,
                                  const struct tpl__wire_request_args *a,
                                  uint8_t **frame, size_t *len);

/* A rank serve's watch has not heard from for more than two of its beat
 * intervals, half the deadline (tpload.SilentRank). */
struct tpl__wire_silent {
  uint32_t rank;
  const char *host; /* the host it runs on, or NULL */
  double seconds;   /* since its last heartbeat arrived */
};

/* Writes "rank R (host H): no heartbeat for S s of the T s deadline" for
 * `p` under the deadline `deadline` (seconds) into buf, `len` bytes
 * (cut short if need be, always terminated): status's line, and what a
 * refused health or reload says. */
void tpl__wire_silent_str(const struct tpl__wire_silent *p, double deadline,
                          char *buf, size_t len);

/* A Response as plain C.  When encoding, every pointer is borrowed from
 * the caller; when decoding, the response owns them all
 * (tpl__wire_response_free): strings and bytes point into the unpacked
 * message it keeps. */
struct tpl__wire_response {
  int ok;
  const char *error; /* NULL or "" when none */
  uint32_t rank, world;
  uint32_t tp, pp;       /* the serving job's grid */
  const uint8_t *status; /* packed tpload.LoadReport, or NULL: carried
                            as is, unpacked only by whoever reads it */
  size_t status_len;
  const uint8_t *job; /* status with tensors: the packed tpload.JobTable */
  size_t job_len;
  uint64_t store_bytes;
  void *msg;                   /* decoded: the unpacked tpload.Response */
  const char *job_id;          /* the serving job's random id, or NULL */
  const char *model;           /* the model it loaded, or NULL */
  double uptime_seconds;       /* status: seconds since the rank serves */
  uint32_t clients;            /* status: other connections open now */
  uint64_t attaches;           /* status: attach requests served */
  uint64_t table_bytes;        /* attach: size of the TPLM table memfd */
  uint64_t generation;         /* the version served (1: the first load) */
  const char *plan;            /* the --plan of that generation, or NULL */
  const char *fingerprint;     /* its job fingerprint (shardinfo.h), or
                                  NULL; decoded: "" from an older daemon */
  int error_code;              /* with `error`: the failure's code, or 0 */
  const char *reload_model;    /* status during a reload, or NULL */
  uint64_t reload_store_bytes; /* ... its new store (0: not yet known) */
  /* status, a refused health or reload: the silent ranks, by rank
   * (decoded: an array the response owns) */
  const struct tpl__wire_silent *silent;
  size_t nsilent;
  double stall_timeout; /* status: the watch's deadline (0: no watch) */
};

/* Encodes `r` as a whole frame; *frame is malloc'd (caller frees).
 * Returns 0, -ENOMEM, or TPL_ELIMIT when the frame would exceed
 * TPL_WIRE_MAX_RESPONSE. */
int tpl__wire_encode_response(const struct tpl__wire_response *r,
                              uint8_t **frame, size_t *len,
                              struct tpl__error *err);

/* Decodes a response body into *out (owned, tpl__wire_response_free);
 * refuses malformed protobuf.  Returns 0, TPL_EPROTO or -ENOMEM; *out is
 * untouched on failure. */
int tpl__wire_decode_response(const uint8_t *body, size_t len,
                              struct tpl__wire_response *out,
                              struct tpl__error *err);

/* Frees what a decoded response owns and zeroes it; NULL is accepted. */
void tpl__wire_response_free(struct tpl__wire_response *r);

#endif
