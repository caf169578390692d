/* test_wire.c - the daemon's framing and message codec: frames built by
 * hand (4-byte big-endian length + protobuf bytes derived from the
 * protobuf encoding rules), the cap checked before allocation, input that
 * arrives in pieces, malformed protobuf, response round trips. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "tap.h"
#include "wire.h"

/* Feeds `n` bytes in pieces of `step`; returns the last feed result. */
static int feed_steps(struct tpl__frame_reader *r, const uint8_t *p, size_t n,
                      size_t step, size_t *total_used) {
  int rc = 0;
  *total_used = 0;
  while (*total_used < n && rc == 0) {
    size_t k = n - *total_used < step ? n - *total_used : step, used;
    rc = tpl__frame_feed(r, p + *total_used, k, &used);
    *total_used += used;
  }
  return rc;
}

static void test_encode_request_bytes(void) {
  /* kind STATUS = 1: field 1 varint -> tag 0x08, value 0x01. */
  static const uint8_t want_status[] = {0, 0, 0, 2, 0x08, 0x01};
  uint8_t *f = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__wire_encode_request_args(TPL_REQ_STATUS, 0, NULL, &f, &len),
               0);
  CHECK_EQ_U64(len, sizeof(want_status));
  CHECK(f != NULL && memcmp(f, want_status, sizeof(want_status)) == 0);
  free(f);
  /* HEALTH = 0 is proto3's default: an empty body. */
  CHECK_EQ_INT(tpl__wire_encode_request_args(TPL_REQ_HEALTH, 0, NULL, &f, &len),
               0);
  CHECK_EQ_U64(len, 4);
  CHECK(f != NULL && f[0] == 0 && f[1] == 0 && f[2] == 0 && f[3] == 0);
  free(f);
}

static void test_whole_frame(void) {
  static const uint8_t fr[] = {0, 0, 0, 2, 0x08, 0x03};
  struct tpl__frame_reader r;
  const uint8_t *body;
  size_t used, len;
  int kind = -1;
  unsigned flags = 0;
  tpl__frame_reader_init(&r, TPL_WIRE_MAX_REQUEST);
  CHECK_EQ_INT(tpl__frame_feed(&r, fr, sizeof(fr), &used), 1);
  CHECK_EQ_U64(used, 6);
  body = r.body;
  len = r.len;
  CHECK_EQ_U64(len, 2);
  CHECK_EQ_INT(tpl__wire_decode_request(body, len, &kind, &flags, NULL), 0);
  CHECK_EQ_INT(kind, TPL_REQ_ATTACH);
  tpl__frame_reset(&r);
  CHECK_EQ_INT(r.hdr_have > 0, 0);
}

static void test_one_byte_at_a_time(void) {
  static const uint8_t fr[] = {0, 0, 0, 2, 0x08, 0x04};
  struct tpl__frame_reader r;
  size_t used;
  tpl__frame_reader_init(&r, TPL_WIRE_MAX_REQUEST);
  for (size_t i = 0; i + 1 < sizeof(fr); i++) {
    CHECK_EQ_INT(tpl__frame_feed(&r, fr + i, 1, &used), 0);
    CHECK_EQ_U64(used, 1);
    CHECK_EQ_INT(r.hdr_have > 0, 1);
  }
  CHECK_EQ_INT(tpl__frame_feed(&r, fr + 5, 1, &used), 1);
  CHECK_EQ_U64(r.len, 2);
  CHECK_EQ_U64(r.body[1], 0x04);
  tpl__frame_reset(&r);
}

static void test_two_frames_in_one_buffer(void) {
  /* HEALTH (empty) then MANIFEST (08 02), back to back. */
  static const uint8_t buf[] = {0, 0, 0, 0, 0, 0, 0, 2, 0x08, 0x02};
  struct tpl__frame_reader r;
  size_t used, used2;
  const uint8_t *body;
  size_t len;
  int kind = -1;
  unsigned flags = 0;
  tpl__frame_reader_init(&r, TPL_WIRE_MAX_REQUEST);
  CHECK_EQ_INT(tpl__frame_feed(&r, buf, sizeof(buf), &used), 1);
  CHECK_EQ_U64(used, 4);
  body = r.body;
  len = r.len;
  CHECK_EQ_U64(len, 0);
  CHECK_EQ_INT(tpl__wire_decode_request(body, len, &kind, &flags, NULL), 0);
  CHECK_EQ_INT(kind, TPL_REQ_HEALTH);
  tpl__frame_reset(&r);
  CHECK_EQ_INT(tpl__frame_feed(&r, buf + used, sizeof(buf) - used, &used2), 1);
  CHECK_EQ_U64(used2, 6);
  body = r.body;
  len = r.len;
  CHECK_EQ_INT(tpl__wire_decode_request(body, len, &kind, &flags, NULL), 0);
  CHECK_EQ_INT(kind, 2); /* any kind decodes; the daemon refuses it */
  tpl__frame_reset(&r);
}

static void test_cap_exactly(void) {
  /* 65536 = 0x00010000 is allowed; the body is allocated. */
  static const uint8_t hdr[] = {0x00, 0x01, 0x00, 0x00};
  struct tpl__frame_reader r;
  size_t used;
  tpl__frame_reader_init(&r, TPL_WIRE_MAX_REQUEST);
  CHECK_EQ_INT(tpl__frame_feed(&r, hdr, 4, &used), 0);
  CHECK(r.body != NULL);
  CHECK_EQ_U64(r.len, 65536);
  tpl__frame_reset(&r);
}

static void test_cap_plus_one(void) {
  static const uint8_t hdr[] = {0x00, 0x01, 0x00, 0x01, 0x08};
  struct tpl__frame_reader r;
  size_t used;
  tpl__frame_reader_init(&r, TPL_WIRE_MAX_REQUEST);
  CHECK_EQ_INT(tpl__frame_feed(&r, hdr, sizeof(hdr), &used), TPL_ELIMIT);
  CHECK_EQ_U64(r.len, 65537);
  CHECK(r.body == NULL);
  tpl__frame_reset(&r);
}

static void test_four_gib_prefix(void) {
  static const uint8_t hdr[] = {0xff, 0xff, 0xff, 0xff};
  struct tpl__frame_reader r;
  size_t used;
  tpl__frame_reader_init(&r, TPL_WIRE_MAX_REQUEST);
  CHECK_EQ_INT(feed_steps(&r, hdr, 4, 1, &used), TPL_ELIMIT);
  CHECK_EQ_U64(r.len, 0xffffffffu);
  CHECK(r.body == NULL);
  tpl__frame_reset(&r);
}

static void test_partial_body_pieces(void) {
  /* A 300-byte body (protobuf: 300 bytes of an unknown field) in
   * pieces of 7: nothing completes early. */
  uint8_t fr[304];
  struct tpl__frame_reader r;
  size_t used;
  memset(fr, 0, sizeof(fr));
  fr[2] = 0x01;
  fr[3] = 0x2c; /* 0x012c = 300 */
  tpl__frame_reader_init(&r, TPL_WIRE_MAX_REQUEST);
  CHECK_EQ_INT(feed_steps(&r, fr, 303, 7, &used), 0);
  CHECK_EQ_U64(used, 303);
  CHECK_EQ_INT(tpl__frame_feed(&r, fr + 303, 1, &used), 1);
  CHECK_EQ_U64(r.have, 300);
  tpl__frame_reset(&r);
}

static void test_malformed_truncated_varint(void) {
  static const uint8_t body[] = {0x08}; /* tag, value missing */
  struct tpl__error err = {0};
  int kind = 7;
  unsigned flags = 0;
  CHECK_EQ_INT(tpl__wire_decode_request(body, 1, &kind, &flags, &err),
               TPL_EPROTO);
  CHECK_EQ_INT(kind, 7);
  CHECK_STR_CONTAINS(err.msg, "tpload.Request");
}

static void test_malformed_garbage(void) {
  static const uint8_t body[] = {0xff, 0xff, 0xff, 0xff, 0xff};
  int kind;
  unsigned flags = 0;
  CHECK_EQ_INT(
      tpl__wire_decode_request(body, sizeof(body), &kind, &flags, NULL),
      TPL_EPROTO);
}

static void test_malformed_overlong_length(void) {
  /* Field 2, length-delimited, announcing 100 bytes with 1 present. */
  static const uint8_t body[] = {0x12, 0x64, 0x00};
  int kind;
  unsigned flags = 0;
  CHECK_EQ_INT(
      tpl__wire_decode_request(body, sizeof(body), &kind, &flags, NULL),
      TPL_EPROTO);
}

static void test_unknown_kind_decodes(void) {
  static const uint8_t body[] = {0x08, 0x63}; /* kind 99 */
  int kind = -1;
  unsigned flags = 0;
  CHECK_EQ_INT(
      tpl__wire_decode_request(body, sizeof(body), &kind, &flags, NULL), 0);
  CHECK_EQ_INT(kind, 99);
}

/* LoadReport{model: "m", tensor_parallel_shards: 2}, by hand. */
static const uint8_t load_report[] = {0x0a, 0x01, 'm', 0x10, 0x02};

/* JobTable{model: "j"}, by hand. */
static const uint8_t job_table[] = {0x0a, 0x01, 'j'};

static void test_response_roundtrip(void) {
  struct tpl__wire_response in = {.ok = 1,
                                  .rank = 3,
                                  .world = 4,
                                  .tp = 2,
                                  .pp = 2,
                                  .status = load_report,
                                  .status_len = sizeof(load_report),
                                  .job = job_table,
                                  .job_len = sizeof(job_table),
                                  .store_bytes = 192,
                                  .table_bytes = 326},
                            out = {0};
  struct tpl__frame_reader r;
  uint8_t *f = NULL;
  size_t len = 0, used;
  const uint8_t *body;
  size_t blen;
  CHECK_EQ_INT(tpl__wire_encode_response(&in, &f, &len, NULL), 0);
  tpl__frame_reader_init(&r, TPL_WIRE_MAX_RESPONSE);
  CHECK_EQ_INT(tpl__frame_feed(&r, f, len, &used), 1);
  CHECK_EQ_U64(used, len);
  body = r.body;
  blen = r.len;
  CHECK_EQ_INT(tpl__wire_decode_response(body, blen, &out, NULL), 0);
  CHECK_EQ_INT(out.ok, 1);
  CHECK(out.error == NULL);
  CHECK_EQ_U64(out.rank, 3);
  CHECK_EQ_U64(out.world, 4);
  CHECK_EQ_U64(out.tp, 2);
  CHECK_EQ_U64(out.pp, 2);
  CHECK_EQ_U64(out.store_bytes, 192);
  CHECK_EQ_U64(out.table_bytes, 326);
  CHECK_EQ_U64(out.status_len, sizeof(load_report));
  CHECK(out.status != NULL &&
        memcmp(out.status, load_report, sizeof(load_report)) == 0);
  CHECK_EQ_U64(out.job_len, sizeof(job_table));
  CHECK(out.job != NULL && memcmp(out.job, job_table, sizeof(job_table)) == 0);
  tpl__wire_response_free(&out);
  tpl__frame_reset(&r);
  free(f);
}

static void test_error_response(void) {
  struct tpl__wire_response in = {.ok = 0, .error = "nope", .rank = 1},
                            out = {0};
  uint8_t *f = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__wire_encode_response(&in, &f, &len, NULL), 0);
  CHECK_EQ_INT(tpl__wire_decode_response(f + 4, len - 4, &out, NULL), 0);
  CHECK_EQ_INT(out.ok, 0);
  CHECK_STR_CONTAINS(out.error, "nope");
  CHECK_EQ_U64(out.rank, 1);
  tpl__wire_response_free(&out);
  free(f);
}

/* The status is carried as the bytes rank 0 packed, never re-encoded:
 * field 5 of the frame is exactly those bytes (the same encoding an
 * embedded LoadReport has). */
static void test_status_bytes_verbatim(void) {
  struct tpl__wire_response in = {
      .ok = 1, .status = load_report, .status_len = sizeof(load_report)};
  uint8_t *f = NULL;
  size_t len = 0;
  /* frame: length, ok = 1 (08 01), status = 2a 05 <load_report> */
  static const uint8_t want[] = {0,    0,    0,    9,   0x08, 0x01, 0x2a,
                                 0x05, 0x0a, 0x01, 'm', 0x10, 0x02};
  CHECK_EQ_INT(tpl__wire_encode_response(&in, &f, &len, NULL), 0);
  CHECK_EQ_U64(len, sizeof(want));
  CHECK(f != NULL && memcmp(f, want, sizeof(want)) == 0);
  free(f);
}

/* Bytes that are no LoadReport pass the wire untouched and are refused
 * where they are unpacked, once, by the client (tpl__report_decode). */
static void test_bad_status_refused_by_reader(void) {
  static const uint8_t junk[] = {0x0a, 0x05, 'm'}; /* string runs off */
  struct tpl__wire_response in = {.ok = 1,
                                  .status = junk,
                                  .status_len = sizeof(junk)},
                            out = {0};
  struct tpl__report *rep = NULL;
  uint8_t *f = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__wire_encode_response(&in, &f, &len, NULL), 0);
  CHECK(f != NULL && len > 4 &&
        tpl__wire_decode_response(f + 4, len - 4, &out, NULL) == 0);
  CHECK_EQ_U64(out.status_len, sizeof(junk));
  CHECK(out.status != NULL && memcmp(out.status, junk, sizeof(junk)) == 0);
  CHECK(out.status == NULL || tpl__report_decode(out.status, out.status_len,
                                                 &rep, NULL) == TPL_EPEER);
  tpl__wire_response_free(&out);
  free(f);
}

static void test_decode_response_garbage(void) {
  static const uint8_t body[] = {0x32, 0x7f, 0x00};
  struct tpl__wire_response out = {0};
  CHECK_EQ_INT(tpl__wire_decode_response(body, sizeof(body), &out, NULL),
               TPL_EPROTO);
}

/* The summary flag is Request field 2, a varint after the kind; a
 * request without it is the plain one, and field 3 (0.1.0's table_fd,
 * reserved) is ignored. */
static void test_request_flags_bytes(void) {
  static const uint8_t want[] = {0, 0, 0, 4, 0x08, 0x01, 0x10, 0x01};
  static const uint8_t old[] = {0x08, 0x03, 0x18, 0x01};
  uint8_t *f = NULL;
  size_t len = 0;
  int kind = -1;
  unsigned flags = 9;
  CHECK_EQ_INT(tpl__wire_encode_request_args(TPL_REQ_STATUS, TPL_REQ_F_SUMMARY,
                                             NULL, &f, &len),
               0);
  CHECK_EQ_U64(len, sizeof(want));
  CHECK(f != NULL && memcmp(f, want, sizeof(want)) == 0);
  CHECK_EQ_INT(tpl__wire_decode_request(want + 4, 4, &kind, &flags, NULL), 0);
  CHECK_EQ_INT(kind, TPL_REQ_STATUS);
  CHECK_EQ_U64(flags, TPL_REQ_F_SUMMARY);
  CHECK_EQ_INT(tpl__wire_decode_request(want + 4, 2, &kind, &flags, NULL), 0);
  CHECK_EQ_U64(flags, 0);
  CHECK_EQ_INT(tpl__wire_decode_request(old, sizeof(old), &kind, &flags, NULL),
               0);
  CHECK_EQ_INT(kind, TPL_REQ_ATTACH);
  CHECK_EQ_U64(flags, 0);
  free(f);
}

/* A reload request by the protobuf encoding rules: kind RELOAD = 5
 * (0x08 0x05), model "m" (field 4, bytes: 0x22 0x01 'm'), plan "p"
 * (0x2a 0x01 'p'), after_generation 3 (0x30 0x03), timeout_ms -1
 * (int64: 0x38, then ten bytes of varint). */
static void test_request_args_bytes(void) {
  static const uint8_t want[] = {0,    0,    0,    21,   0x08, 0x05, 0x22,
                                 0x01, 'm',  0x2a, 0x01, 'p',  0x30, 0x03,
                                 0x38, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                 0xff, 0xff, 0xff, 0x01};
  struct tpl__wire_request_args a = {"m", "p", 3, -1, 0}, back;
  uint8_t *f = NULL;
  size_t len = 0;
  int kind = -1;
  unsigned flags = 1;
  CHECK_EQ_INT(tpl__wire_encode_request_args(TPL_REQ_RELOAD, 0, &a, &f, &len),
               0);
  CHECK_EQ_U64(len, sizeof(want));
  CHECK(f != NULL && memcmp(f, want, sizeof(want)) == 0);
  CHECK_EQ_INT(tpl__wire_decode_request(want + 4, 21, &kind, &flags, NULL), 0);
  CHECK_EQ_INT(kind, TPL_REQ_RELOAD);
  CHECK_EQ_INT(flags, 0);
  CHECK_EQ_INT(tpl__wire_decode_request_args(want + 4, 21, &back, NULL), 0);
  CHECK(back.model != NULL && strcmp(back.model, "m") == 0);
  CHECK(back.plan != NULL && strcmp(back.plan, "p") == 0);
  CHECK_EQ_U64(back.after_generation, 3);
  CHECK(back.timeout_ms == -1);
  tpl__wire_request_args_free(&back);
  free(f);
}

/* reload --verify-md5: field 8, a bool (0x40 0x01), after the plan;
 * absent (0) decodes as 0, as above. */
static void test_request_verify_md5(void) {
  static const uint8_t want[] = {0,    0,    0,   7,    0x08, 0x05,
                                 0x2a, 0x01, 'p', 0x40, 0x01};
  struct tpl__wire_request_args a = {NULL, "p", 0, 0, 1}, back;
  uint8_t *f = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__wire_encode_request_args(TPL_REQ_RELOAD, 0, &a, &f, &len),
               0);
  CHECK_EQ_U64(len, sizeof(want));
  CHECK(f != NULL && memcmp(f, want, sizeof(want)) == 0);
  CHECK_EQ_INT(tpl__wire_decode_request_args(want + 4, 7, &back, NULL), 0);
  CHECK_EQ_INT(back.verify_md5, 1);
  CHECK(back.model == NULL);
  tpl__wire_request_args_free(&back);
  free(f);
}

/* A watch without strings: model and plan decode as NULL ("" is none). */
static void test_request_args_empty(void) {
  static const uint8_t body[] = {0x08, 0x06, 0x30, 0x02};
  struct tpl__wire_request_args a;
  CHECK_EQ_INT(tpl__wire_decode_request_args(body, sizeof(body), &a, NULL), 0);
  CHECK(a.model == NULL && a.plan == NULL);
  CHECK_EQ_U64(a.after_generation, 2);
  CHECK(a.timeout_ms == 0);
  tpl__wire_request_args_free(&a);
  CHECK_EQ_INT(
      tpl__wire_decode_request_args((const uint8_t *)"\xff", 1, &a, NULL),
      TPL_EPROTO);
}

static void test_generation_fields_roundtrip(void) {
  struct tpl__wire_response r = {.error = "no",
                                 .generation = 7,
                                 .plan = "auto",
                                 .error_code = TPL_EFORMAT,
                                 .reload_model = "/m/next",
                                 .reload_store_bytes = 9},
                            back = {0};
  uint8_t *f = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__wire_encode_response(&r, &f, &len, NULL) ||
                   tpl__wire_decode_response(
                       f + TPL_WIRE_HEADER, len - TPL_WIRE_HEADER, &back, NULL),
               0);
  CHECK_EQ_U64(back.generation, 7);
  CHECK(back.plan != NULL && strcmp(back.plan, "auto") == 0);
  CHECK_EQ_INT(back.error_code, TPL_EFORMAT);
  CHECK(back.reload_model != NULL && strcmp(back.reload_model, "/m/next") == 0);
  CHECK_EQ_U64(back.reload_store_bytes, 9);
  tpl__wire_response_free(&back);
  free(f);
}

/* Response{silent: [{rank: 2, host: "h", seconds: 0.5}]}, by hand: field
 * 24 length-delimited (tag 24 << 3 | 2 = 194: varint c2 01), 14 bytes of
 * SilentRank: rank (08 02), host (12 01 'h'), seconds as a little-endian
 * double (19, then 0.5 = 0x3fe0000000000000). */
static const uint8_t silent_body[] = {0xc2, 0x01, 0x0e, 0x08, 0x02, 0x12,
                                      0x01, 'h',  0x19, 0,    0,    0,
                                      0,    0,    0,    0xe0, 0x3f};

static void test_silent_bytes(void) {
  struct tpl__wire_silent one = {2, "h", 0.5};
  struct tpl__wire_response in = {.silent = &one, .nsilent = 1}, out = {0};
  uint8_t *f = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__wire_encode_response(&in, &f, &len, NULL), 0);
  CHECK_EQ_U64(len, TPL_WIRE_HEADER + sizeof(silent_body));
  CHECK(f != NULL &&
        memcmp(f + TPL_WIRE_HEADER, silent_body, sizeof(silent_body)) == 0);
  free(f);
  CHECK_EQ_INT(
      tpl__wire_decode_response(silent_body, sizeof(silent_body), &out, NULL),
      0);
  CHECK_EQ_U64(out.nsilent, 1);
  CHECK(out.silent != NULL && out.silent[0].rank == 2 &&
        out.silent[0].seconds == 0.5 && strcmp(out.silent[0].host, "h") == 0);
  CHECK(out.stall_timeout == 0);
  tpl__wire_response_free(&out);
}

/* Several silent ranks and the deadline survive the trip in order; a
 * response without them decodes none. */
static void test_silent_roundtrip(void) {
  struct tpl__wire_silent two[] = {{1, "node-a", 4.25}, {5, NULL, 7.5}};
  struct tpl__wire_response in = {.ok = 1,
                                  .silent = two,
                                  .nsilent = 2,
                                  .stall_timeout = 8},
                            out = {0};
  uint8_t *f = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__wire_encode_response(&in, &f, &len, NULL) ||
                   tpl__wire_decode_response(f + TPL_WIRE_HEADER,
                                             len - TPL_WIRE_HEADER, &out, NULL),
               0);
  CHECK_EQ_U64(out.nsilent, 2);
  CHECK(out.stall_timeout == 8);
  CHECK(out.silent != NULL && out.silent[0].rank == 1 &&
        strcmp(out.silent[0].host, "node-a") == 0 &&
        out.silent[0].seconds == 4.25);
  CHECK(out.silent != NULL && out.silent[1].rank == 5 &&
        strcmp(out.silent[1].host, "") == 0 && out.silent[1].seconds == 7.5);
  tpl__wire_response_free(&out);
  free(f);
  CHECK_EQ_INT(tpl__wire_decode_response(load_report, 0, &out, NULL), 0);
  CHECK(out.silent == NULL && out.nsilent == 0);
  tpl__wire_response_free(&out);
}

/* The sentence status prints and a refused health or reload carries. */
static void test_silent_str(void) {
  struct tpl__wire_silent p = {2, "n2", 4.3}, q = {7, NULL, 12};
  char buf[128], small[10];
  tpl__wire_silent_str(&p, 8, buf, sizeof(buf));
  CHECK_STR_EQ(buf,
               "rank 2 (host n2): no heartbeat for 4.3 s of the 8 s deadline");
  tpl__wire_silent_str(&q, 22.5, buf, sizeof(buf));
  CHECK_STR_EQ(
      buf, "rank 7 (host ?): no heartbeat for 12.0 s of the 22.5 s deadline");
  tpl__wire_silent_str(&p, 8, small, sizeof(small));
  CHECK_STR_EQ(small, "rank 2 (h");
}

int main(void) {
  RUN(test_encode_request_bytes);
  RUN(test_whole_frame);
  RUN(test_one_byte_at_a_time);
  RUN(test_two_frames_in_one_buffer);
  RUN(test_cap_exactly);
  RUN(test_cap_plus_one);
  RUN(test_four_gib_prefix);
  RUN(test_partial_body_pieces);
  RUN(test_malformed_truncated_varint);
  RUN(test_malformed_garbage);
  RUN(test_malformed_overlong_length);
  RUN(test_unknown_kind_decodes);
  RUN(test_response_roundtrip);
  RUN(test_error_response);
  RUN(test_status_bytes_verbatim);
  RUN(test_bad_status_refused_by_reader);
  RUN(test_decode_response_garbage);
  RUN(test_request_flags_bytes);
  RUN(test_request_args_bytes);
  RUN(test_request_args_empty);
  RUN(test_request_verify_md5);
  RUN(test_generation_fields_roundtrip);
  RUN(test_silent_bytes);
  RUN(test_silent_roundtrip);
  RUN(test_silent_str);
  return tap_done();
}
