/* jsonu.c - strict JSON helpers over jansson.  Strings may carry
 * "\u0000" through jansson (JSON_ALLOW_NUL, so that a key with a NUL is
 * seen whole and refused by its reader with its own message), but no
 * string value with a NUL reaches a reader: C code would see it cut at
 * the NUL (a weight_map file "a.safetensors\u0000x" read as
 * "a.safetensors"), so such a document is refused here. */
#include <string.h>

#include "jsonu.h"

/* The first string value (at any depth) holding a NUL byte; its key, or
 * the enclosing key for array items, in *key.  NULL when none. */
static const json_t *find_nul_value(const json_t *v, const char *in_key,
                                    const char **key) {
  const char *k;
  const json_t *item, *hit;
  size_t i;
  if (json_is_string(v) &&
      tpl__has_nul(json_string_value(v), json_string_length(v))) {
    *key = in_key;
    return v;
  }
  /* The foreach macros visit nothing of a value of another type. */
  json_array_foreach(v, i, item) {
    hit = find_nul_value(item, in_key, key);
    if (hit != NULL) return hit;
  }
  json_object_foreach((json_t *)v, k, item) {
    hit = find_nul_value(item, k, key);
    if (hit != NULL) return hit;
  }
  return NULL;
}

int tpl__json_parse_object(const char *buf, size_t len, const char *what,
                           json_t **out, struct tpl__error *err) {
  json_error_t je;
  const char *key;
  json_t *root =
      json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
  if (root == NULL)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected valid JSON, found an error at line %d "
                     "column %d: %s",
                     what, je.line, je.column, je.text);
  if (!json_is_object(root)) {
    json_decref(root);
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected a JSON object at top level, found another "
                     "JSON value",
                     what);
  }
  if (find_nul_value(root, "", &key) != NULL) {
    int rc = tpl__fail(err, TPL_EFORMAT,
                       "%s: key '%s': expected a string without NUL bytes, "
                       "found \\u0000 in its value",
                       what, key);
    json_decref(root);
    return rc;
  }
  *out = root;
  return 0;
}

void tpl__json_top_members(const char *buf, size_t len, size_t *members,
                           size_t *key_bytes) {
  size_t depth = 0, n = 0, kb = 0;
  int in_str = 0, esc = 0, want_key = 0, in_key = 0;
  for (size_t i = 0; i < len; i++) {
    char c = buf[i];
    if (in_str) {
      if (in_key) kb++;
      if (esc)
        esc = 0;
      else if (c == '\\')
        esc = 1;
      else if (c == '"')
        in_str = in_key = 0;
      continue;
    }
    if (c == '"') {
      in_str = 1;
      in_key = depth == 1 && want_key;
      n += (size_t)in_key;
      want_key = 0;
    } else if (c == '{' || c == '[') {
      want_key = depth++ == 0 && c == '{';
    } else if (c == '}' || c == ']') {
      depth -= depth > 0;
    } else if (c == ',' && depth == 1) {
      want_key = 1;
    }
  }
  *members = n;
  *key_bytes = kb;
}

int tpl__json_u64(const json_t *v, uint64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return TPL_EFORMAT;
  *out = (uint64_t)json_integer_value(v);
  return 0;
}

json_t *tpl__json_u64_array(const uint64_t *v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; a != NULL && i < n; i++)
    if (json_array_append_new(a, json_integer((json_int_t)v[i])) != 0) {
      json_decref(a);
      return NULL;
    }
  return a;
}

int tpl__json_utf8(const char *s) {
  json_t *j = json_string(s);
  json_decref(j);
  return j != NULL;
}

int tpl__has_nul(const char *s, size_t len) {
  return memchr(s, '\0', len) != NULL;
}
