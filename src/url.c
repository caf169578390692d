/* url.c - the URL forms a MODEL may take: which strings are URLs, the
 * parse of one into origin, directory, file name and query, and the URLs
 * of a directory's members (each name percent-encoded, the query carried
 * along), both as fetched and as shown (the query hidden: it may hold a
 * presigned URL's signature, which no message or report repeats). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "url.h"

static const char *const schemes[] = {"http://", "https://"};

/* The length of the scheme prefix `s` starts with ("http://": 7), 0 for
 * none. */
static size_t scheme_len(const char *s) {
  for (size_t i = 0; i < ARRAY_SIZE(schemes); i++)
    if (strncasecmp(s, schemes[i], strlen(schemes[i])) == 0)
      return strlen(schemes[i]);
  return 0;
}

int tpl__url_is_remote(const char *s) {
  return s != NULL && (scheme_len(s) != 0 || strncasecmp(s, "s3://", 5) == 0 ||
                       strncasecmp(s, "hf://", 5) == 0);
}

/* The first byte a URL may not hold, or NULL: spaces, controls, DEL and
 * non-ASCII bytes must come percent-encoded. */
static const char *bad_byte(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f) return s;
  return NULL;
}

static int refuse(struct tpl__error *err, const char *what) {
  return tpl__fail(err, TPL_EUSAGE, "MODEL URL: expected %s", what);
}

/* The checks on the whole string, before it is split. */
static int check_chars(const char *s, size_t len, struct tpl__error *err) {
  const char *bad;
  if (len > TPL_MAX_URL)
    return tpl__fail(err, TPL_EUSAGE,
                     "MODEL URL: expected at most %u bytes, found %zu",
                     TPL_MAX_URL, len);
  if ((bad = bad_byte(s)) != NULL)
    return tpl__fail(err, TPL_EUSAGE,
                     "MODEL URL: expected a percent-encoded URL, found byte "
                     "0x%02x at offset %zu (spaces and non-ASCII bytes are "
                     "written %%XX)",
                     (unsigned char)*bad, (size_t)(bad - s));
  if (strchr(s, '#') != NULL)
    return refuse(err, "no '#' fragment (a server never sees it), found one");
  return 0;
}

/* The host part [s, end): not empty, no user:password@. */
static int check_authority(const char *s, const char *end,
                           struct tpl__error *err) {
  if (end == s) return refuse(err, "a host after the scheme, found none");
  if (memchr(s, '@', (size_t)(end - s)) != NULL)
    return refuse(err, "no credentials in the URL (user:password@); pass a "
                       "bearer token in TPLOAD_HTTP_TOKEN or --token-file, "
                       "or a presigned URL");
  return 0;
}

static char *dup_range(const char *s, size_t len) {
  char *d = malloc(len + 1);
  if (d == NULL) return NULL;
  memcpy(d, s, len);
  d[len] = '\0';
  return d;
}

/* Fills u from the checked string: origin (scheme lowered), the path's
 * directory and last segment, the query. */
static int split(const char *s, size_t slen, const char *auth_end,
                 const char *path_end, struct tpl__url *u) {
  const char *last = path_end;
  size_t origin_len = (size_t)(auth_end - s);
  while (last > auth_end && last[-1] != '/')
    last--;
  u->origin = dup_range(s, origin_len);
  if (last == auth_end) /* no path at all: "/" */
    u->dir = strdup("/");
  else
    u->dir = dup_range(auth_end, (size_t)(last - auth_end));
  if (path_end - last > 12 && memcmp(path_end - 12, ".safetensors", 12) == 0)
    u->name = dup_range(last, (size_t)(path_end - last));
  else if (last != path_end && u->dir != NULL) { /* ".../dir": dir/ */
    free(u->dir);
    u->dir = malloc((size_t)(path_end - auth_end) + 2);
    if (u->dir != NULL)
      snprintf(u->dir, (size_t)(path_end - auth_end) + 2, "%.*s/",
               (int)(path_end - auth_end), auth_end);
  }
  if (*path_end == '?')
    u->query = dup_range(path_end + 1, slen - (size_t)(path_end + 1 - s));
  if (u->origin == NULL || u->dir == NULL) return -ENOMEM;
  for (char *p = u->origin; *p != ':'; p++)
    *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
  if (*path_end == '?' && u->query == NULL) return -ENOMEM;
  return 0;
}

int tpl__url_parse(const char *s, struct tpl__url *out,
                   struct tpl__error *err) {
  struct tpl__url u = {0};
  size_t slen = strlen(s), sl = scheme_len(s);
  const char *auth, *auth_end, *path_end;
  int rc;
  if (sl == 0) return refuse(err, "a URL starting with http:// or https://");
  rc = check_chars(s, slen, err);
  if (rc != 0) return rc;
  auth = s + sl;
  auth_end = auth + strcspn(auth, "/?");
  rc = check_authority(auth, auth_end, err);
  if (rc != 0) return rc;
  path_end = auth_end + strcspn(auth_end, "?");
  rc = split(s, slen, auth_end, path_end, &u);
  if (rc != 0) {
    tpl__url_clear(&u);
    return tpl__fail(err, rc, "out of memory");
  }
  *out = u;
  return 0;
}

void tpl__url_clear(struct tpl__url *u) {
  free(u->origin);
  free(u->dir);
  free(u->name);
  free(u->query);
  free(u->shown);
  memset(u, 0, sizeof(*u));
}

size_t tpl__url_encode_segment(const char *s, size_t len, char *out,
                               size_t cap) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                c == '~';
    char enc[3] = {'%', hex[c >> 4], hex[c & 15]};
    size_t k = plain ? 1 : 3;
    for (size_t j = 0; j < k; j++, n++)
      if (n + 1 < cap) out[n] = plain ? (char)c : enc[j];
  }
  if (cap > 0) out[n < cap ? n : cap - 1] = '\0';
  return n;
}

/* origin + dir + name (encoded unless it is the URL's own, already
 * encoded file name) + "?tail" (NULL for none). */
static char *member(const struct tpl__url *u, const char *name,
                    const char *tail) {
  int own = name == u->name;
  size_t nl = strlen(name),
         enc = own ? nl : tpl__url_encode_segment(name, nl, NULL, 0);
  size_t len = strlen(u->origin) + strlen(u->dir) + enc +
               (tail ? strlen(tail) + 1 : 0) + 1;
  char *s = malloc(len);
  size_t at;
  if (s == NULL) return NULL;
  at = (size_t)snprintf(s, len, "%s%s", u->origin, u->dir);
  if (own)
    at += (size_t)snprintf(s + at, len - at, "%s", name);
  else
    at += tpl__url_encode_segment(name, nl, s + at, len - at);
  if (tail != NULL) snprintf(s + at, len - at, "?%s", tail);
  return s;
}

/* A file URL's query is that file's (a presigned URL's signature); a
 * directory's is every member's. */
static const char *query_for(const struct tpl__url *u, const char *name) {
  return u->name == NULL || name == u->name ? u->query : NULL;
}

char *tpl__url_member(const struct tpl__url *u, const char *name) {
  return member(u, name, query_for(u, name));
}

/* An s3:// MODEL's member: the shown directory and the plain name. */
static char *member_under_shown(const struct tpl__url *u, const char *name) {
  size_t len = strlen(u->shown) + strlen(name) + 1;
  char *s = malloc(len);
  if (s != NULL) snprintf(s, len, "%s%s", u->shown, name);
  return s;
}

char *tpl__url_member_shown(const struct tpl__url *u, const char *name) {
  if (u->shown != NULL) return member_under_shown(u, name);
  return member(u, name, query_for(u, name) ? "..." : NULL);
}

char *tpl__url_dir_shown(const struct tpl__url *u) {
  size_t dl = strlen(u->dir);
  size_t len = strlen(u->origin) + dl + 1;
  char *s;
  if (u->shown != NULL) /* "s3://bucket/prefix/": without its last '/' */
    return strndup(u->shown, strlen(u->shown) - 1);
  if ((s = malloc(len)) == NULL) return NULL;
  /* "/" stays: "http://host/" is the shown form of the root */
  snprintf(s, len, "%s%.*s", u->origin, (int)(dl > 1 ? dl - 1 : dl), u->dir);
  return s;
}

char *tpl__url_shown(const char *model) {
  const char *q = tpl__url_is_remote(model) ? strchr(model, '?') : NULL;
  size_t keep = q ? (size_t)(q - model) : strlen(model);
  char *s = malloc(keep + (q ? 4 : 0) + 1);
  if (s == NULL) return NULL;
  snprintf(s, keep + (q ? 4 : 0) + 1, "%.*s%s", (int)keep, model,
           q ? "?..." : "");
  return s;
}
