/* jsonu.c - strict JSON helpers over jansson. */
#include <string.h>

#include "jsonu.h"

int tpl__json_parse_object(const char *buf, size_t len, const char *what,
                           json_t **out, struct tpl_error *err) {
  json_error_t je;
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
  *out = root;
  return 0;
}

int tpl__json_u64(const json_t *v, uint64_t *out) {
  json_int_t i;
  if (!json_is_integer(v)) return TPL_EFORMAT;
  i = json_integer_value(v);
  if (i < 0) return TPL_EFORMAT;
  *out = (uint64_t)i;
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

int tpl__has_nul(const char *s, size_t len) {
  return memchr(s, '\0', len) != NULL;
}
