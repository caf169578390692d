/* jsonu.h - strict JSON helpers over jansson for every JSON input
 * (safetensors headers, indexes, MLC caches, config.json, plan files). */
#ifndef TPL_JSONU_H
#define TPL_JSONU_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* How load and status print their reports: reals with 15 significant
 * digits, so a rounded duration prints as 0.123456, not 17 digits of
 * binary noise (shard-info.json and plan keep jansson's exact default). */
#define TPL_JSON_REPORT                                                        \
  (JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))

/* Parses `len` bytes of `buf` as one JSON value that must be an object,
 * rejecting duplicate keys, invalid UTF-8, anything but whitespace after
 * the value and a "\u0000" in any string value (TPL_EFORMAT, naming the
 * key); keys may hold "\u0000" (callers check them with their own
 * messages, using json_object_iter_key_len or tpl__has_nul).  `what` names the
 * input in messages. On success *out is a new reference the caller
 * json_decref's. */
int tpl__json_parse_object(const char *buf, size_t len, const char *what,
                           json_t **out, struct tpl__error *err);

/* Counts the members of the top-level object in `len` bytes of `buf`
 * and the raw bytes of their keys without building anything (a linear
 * scan that follows strings, escapes and nesting), so that a reader can
 * hold them against its caps before the parser allocates a node per
 * value.  Malformed text gives some counts; the parser refuses it
 * afterwards. */
void tpl__json_top_members(const char *buf, size_t len, size_t *members,
                           size_t *key_bytes);

/* Stores a JSON integer that is >= 0 in *out; returns 0, or TPL_EFORMAT
 * for a negative, fractional, non-numeric value. */
int tpl__json_u64(const json_t *v, uint64_t *out);

/* A new JSON array of the `n` integers at `v` (shapes, segs, offsets), or
 * NULL on ENOMEM. */
json_t *tpl__json_u64_array(const uint64_t *v, size_t n);

/* Returns 1 when the string `s` is valid UTF-8, as every JSON string must
 * be (jansson's own check; 0 also when memory runs out). */
int tpl__json_utf8(const char *s);

/* Returns 1 when `s` (len bytes) contains a NUL byte. */
int tpl__has_nul(const char *s, size_t len);

#endif
