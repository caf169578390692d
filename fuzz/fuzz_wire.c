/* fuzz_wire.c - libFuzzer target for the daemon's wire code: the input
 * is a byte stream cut into pieces (sizes taken from the first byte) and
 * fed to the frame reader with the daemon's request cap; every complete
 * frame is decoded as a Request, as the daemon does, and as a Response,
 * as a client does; a decoded Response is re-encoded and decoded again
 * and must come back the same (its numbers, and its status report and job
 * table byte for byte). */
#include <stdlib.h>
#include <string.h>

#include "wire.h"

static int same_bytes(const uint8_t *a, size_t alen, const uint8_t *b,
                      size_t blen) {
  return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static void same_or_abort(const struct tpl__wire_response *a,
                          const struct tpl__wire_response *b) {
  if (a->ok != b->ok || a->rank != b->rank || a->world != b->world ||
      a->store_bytes != b->store_bytes || a->table_bytes != b->table_bytes ||
      a->generation != b->generation ||
      !same_bytes(a->status, a->status_len, b->status, b->status_len) ||
      !same_bytes(a->job, a->job_len, b->job, b->job_len))
    abort();
}

static void roundtrip(const struct tpl__wire_response *r) {
  struct tpl__wire_response again = {0};
  uint8_t *f;
  size_t len;
  if (tpl__wire_encode_response(r, &f, &len, NULL) != 0) return;
  if (tpl__wire_decode_response(f + TPL_WIRE_HEADER, len - TPL_WIRE_HEADER,
                                &again, NULL) != 0)
    abort();
  same_or_abort(r, &again);
  tpl__wire_response_free(&again);
  free(f);
}

static void handle(const uint8_t *body, size_t len) {
  struct tpl__wire_response r = {0};
  struct tpl__wire_request_args a;
  int kind;
  unsigned flags;
  (void)tpl__wire_decode_request(body, len, &kind, &flags, NULL);
  if (tpl__wire_decode_request_args(body, len, &a, NULL) == 0)
    tpl__wire_request_args_free(&a);
  if (tpl__wire_decode_response(body, len, &r, NULL) == 0) {
    roundtrip(&r);
    tpl__wire_response_free(&r);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct tpl__frame_reader fr;
  size_t step, pos = 1;
  if (size < 1) return 0;
  step = (size_t)(data[0] % 16) + 1;
  tpl__frame_reader_init(&fr, TPL_WIRE_MAX_REQUEST);
  while (pos < size) {
    size_t n = size - pos < step ? size - pos : step, used;
    int rc = tpl__frame_feed(&fr, data + pos, n, &used);
    if (used > n) abort();
    pos += used;
    if (rc < 0) break; /* the daemon replies with an error and hangs up */
    if (rc == 1) {
      handle(fr.body, fr.len);
      tpl__frame_reset(&fr);
    }
  }
  tpl__frame_reset(&fr);
  return 0;
}
