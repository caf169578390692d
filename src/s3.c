/* s3.c - s3://bucket/prefix MODELs.  Three jobs: the configuration a user
 * already has for the AWS tools (the variables and the two INI files of
 * a profile), the URL of the prefix on its endpoint (AWS: virtual-hosted,
 * https://BUCKET.s3.REGION.amazonaws.com/KEY, path-style for a bucket
 * with a dot, which its wildcard certificate does not cover; a custom
 * endpoint such as MinIO or Ceph: path-style, ENDPOINT/BUCKET/KEY), and
 * the signer http.c calls for every request, retries included: libcurl
 * signs (CURLOPT_AWS_SIGV4) with the payload hash we send ourselves in
 * x-amz-content-sha256 (UNSIGNED-PAYLOAD: libcurl 7.88 does not add the
 * header, which S3 requires, and signs the value given) and the session
 * token in x-amz-security-token.  S3's 403 answers name their cause in
 * the XML body (<Code>): the signer turns the ones users meet (a skewed
 * clock, a wrong secret, an unknown key, an expired token) into a message
 * saying what to do.  Secrets stay in the signer (zeroed when freed). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "curl_dl.h"
#include "fileio.h"
#include "s3.h"

#define AWS_FILE_MAX (1u << 20) /* bytes of a credentials or config file */
#define VALUE_MAX 4096          /* bytes of one setting */
#define DEFAULT_REGION "us-east-1"

/* What the chain resolved: the profile's settings and the credentials. */
struct s3_conf {
  char profile[256];
  char region[64];
  char endpoint[1024]; /* "" for AWS */
  char *akid, *secret, *token;
  char from[640]; /* where the credentials came from (no secret) */
};

struct s3_signer {
  char *akid, *secret, *token;
  char sigv4[96]; /* "aws:amz:REGION:s3" */
  char from[640];
  char region[64];
};

int tpl__s3_is_url(const char *s) {
  return s != NULL && strncasecmp(s, "s3://", 5) == 0;
}

static void free_secret(char *s) {
  if (s == NULL) return;
  memset(s, 0, strlen(s));
  free(s);
}

static void conf_clear(struct s3_conf *c) {
  free(c->akid);
  free_secret(c->secret);
  free_secret(c->token);
  c->akid = c->secret = c->token = NULL;
}

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? v : NULL;
}

/* --- the INI files of a profile --- */

static char *trim(char *s, char *end) {
  while (s < end && (*s == ' ' || *s == '\t'))
    s++;
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
    end--;
  *end = '\0';
  return s;
}

/* Whether the section header `h` (between the brackets) is the profile's:
 * "[name]" in the credentials file, "[profile name]" (or "[default]") in
 * the config file. */
static int is_section(const char *h, const char *profile, int config) {
  if (config && strcmp(profile, "default") != 0) {
    if (strncmp(h, "profile", 7) != 0 || (h[7] != ' ' && h[7] != '\t'))
      return 0;
    h += 8;
    while (*h == ' ' || *h == '\t')
      h++;
  }
  return strcmp(h, profile) == 0;
}

/* Copies setting `key` of the profile's section of buf into *out (a
 * malloc'd string; left alone when the section or key is absent).
 * Returns 0 or -ENOMEM.  buf is modified (lines are cut). */
static int ini_get(char *buf, const char *profile, int config, const char *key,
                   char **out) {
  int in = 0;
  for (char *line = buf, *next; line != NULL; line = next) {
    char *nl = strchr(line, '\n'), *eq, *s;
    next = nl ? nl + 1 : NULL;
    s = trim(line, nl ? nl : line + strlen(line));
    if (*s == '#' || *s == ';' || *s == '\0') continue;
    if (*s == '[') {
      char *close = strchr(s, ']');
      in = close != NULL && is_section(trim(s + 1, close), profile, config);
      continue;
    }
    if (!in || (eq = strchr(s, '=')) == NULL) continue;
    if (strcmp(trim(s, eq), key) != 0) continue;
    s = trim(eq + 1, eq + 1 + strlen(eq + 1));
    free_secret(*out);
    if ((*out = strdup(s)) == NULL) return -ENOMEM;
    return 0;
  }
  return 0;
}

/* The path of a profile file: the variable, else ~/.aws/NAME. */
static int aws_file(const char *var, const char *name, char *out, size_t cap) {
  const char *v = env(var), *home = env("HOME");
  int n;
  if (v != NULL)
    n = snprintf(out, cap, "%s", v);
  else if (home != NULL)
    n = snprintf(out, cap, "%s/.aws/%s", home, name);
  else
    return 0;
  return n > 0 && (size_t)n < cap;
}

/* The settings of c->profile in one file (`config`: the config file's
 * section names); a missing file has none.  Sets *found when the file
 * has the profile's section. */
static int read_profile_file(struct s3_conf *c, const char *path, int config,
                             int *found, struct tpl__error *err) {
  static const char *const keys[] = {
      "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
      "region", "endpoint_url"};
  char *vals[ARRAY_SIZE(keys)] = {0}, *buf = NULL;
  size_t len;
  int rc = tpl__read_file(path, AWS_FILE_MAX, &buf, &len, err);
  if (rc == -ENOENT) return 0;
  if (rc != 0)
    return tpl__fail(err, TPL_EUSAGE, "%s: cannot read: %s", path,
                     tpl_strerror(rc));
  for (size_t k = 0; rc == 0 && k < ARRAY_SIZE(keys); k++) {
    char *copy = strdup(buf);
    rc = copy ? ini_get(copy, c->profile, config, keys[k], &vals[k]) : -ENOMEM;
    free(copy);
  }
  free_secret(buf);
  if (rc == 0 && vals[0] && vals[1] && c->akid == NULL) {
    c->akid = vals[0];
    c->secret = vals[1];
    c->token = vals[2];
    vals[0] = vals[1] = vals[2] = NULL;
    snprintf(c->from, sizeof(c->from), "profile '%s' of %s%s", c->profile, path,
             c->token ? " (with aws_session_token)" : "");
  }
  if (vals[3] && !c->region[0])
    snprintf(c->region, sizeof(c->region), "%s", vals[3]);
  if (vals[4] && !c->endpoint[0])
    snprintf(c->endpoint, sizeof(c->endpoint), "%s", vals[4]);
  *found = *found || vals[0] || vals[3] || vals[4];
  for (size_t k = 0; k < ARRAY_SIZE(keys); k++)
    free_secret(vals[k]);
  return rc == -ENOMEM ? tpl__oom(err) : 0;
}

/* --- the chain --- */

static int conf_env_keys(struct s3_conf *c, struct tpl__error *err) {
  const char *id = env("AWS_ACCESS_KEY_ID"),
             *key = env("AWS_SECRET_ACCESS_KEY");
  const char *tok = env("AWS_SESSION_TOKEN");
  if (id == NULL && key == NULL) return 0;
  if (id == NULL || key == NULL)
    return tpl__fail(err, TPL_EUSAGE,
                     "AWS credentials: expected both AWS_ACCESS_KEY_ID and "
                     "AWS_SECRET_ACCESS_KEY, found only %s",
                     id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY");
  c->akid = strdup(id);
  c->secret = strdup(key);
  c->token = tok ? strdup(tok) : NULL;
  if (!c->akid || !c->secret || (tok && !c->token)) return tpl__oom(err);
  snprintf(c->from, sizeof(c->from), "the environment (AWS_ACCESS_KEY_ID%s)",
           tok ? ", AWS_SESSION_TOKEN" : "");
  return 0;
}

/* No control byte (a header would end) and no more than VALUE_MAX. */
static int check_value(const char *v, const char *what, const char *from,
                       struct tpl__error *err) {
  if (strlen(v) > VALUE_MAX || *v == '\0')
    return tpl__fail(err, TPL_EUSAGE,
                     "AWS credentials from %s: expected a %s of 1 to %d "
                     "bytes, found %zu",
                     from, what, VALUE_MAX, strlen(v));
  for (; *v; v++)
    if ((unsigned char)*v < 0x20 || *v == 0x7f)
      return tpl__fail(err, TPL_EUSAGE,
                       "AWS credentials from %s: expected a %s on one line, "
                       "found a control byte in it",
                       from, what);
  return 0;
}

static int conf_check(const struct s3_conf *c, struct tpl__error *err) {
  int rc = check_value(c->akid, "access key id", c->from, err);
  if (rc == 0) rc = check_value(c->secret, "secret access key", c->from, err);
  if (rc == 0 && c->token)
    rc = check_value(c->token, "session token", c->from, err);
  if (rc == 0 && strchr(c->akid, ':') != NULL)
    rc = tpl__fail(err, TPL_EUSAGE,
                   "AWS credentials from %s: expected an access key id "
                   "without ':', found one",
                   c->from);
  for (const char *p = c->region; rc == 0 && *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
      rc = tpl__fail(err, TPL_EUSAGE,
                     "AWS region '%s': expected lower-case letters, digits "
                     "and '-' (such as us-east-1)",
                     c->region);
  return rc;
}

/* The whole chain: credentials from the environment, else the profile's;
 * region and endpoint from the environment, else the profile's. */
static int conf_resolve(struct s3_conf *c, struct tpl__error *err) {
  const char *p = env("AWS_PROFILE"), *v;
  char path[1024];
  int found = 0, rc;
  memset(c, 0, sizeof(*c));
  snprintf(c->profile, sizeof(c->profile), "%s", p ? p : "default");
  if ((v = env("AWS_REGION")) || (v = env("AWS_DEFAULT_REGION")))
    snprintf(c->region, sizeof(c->region), "%s", v);
  if ((v = env("AWS_ENDPOINT_URL_S3")) || (v = env("AWS_ENDPOINT_URL")))
    snprintf(c->endpoint, sizeof(c->endpoint), "%s", v);
  rc = conf_env_keys(c, err);
  if (rc == 0 && aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials", path,
                          sizeof(path)))
    rc = read_profile_file(c, path, 0, &found, err);
  if (rc == 0 && aws_file("AWS_CONFIG_FILE", "config", path, sizeof(path)))
    rc = read_profile_file(c, path, 1, &found, err);
  if (rc == 0 && p != NULL && !found && c->akid == NULL)
    rc = tpl__fail(err, TPL_EUSAGE,
                   "AWS_PROFILE=%s: expected a profile of that name in the "
                   "credentials or config file (~/.aws/), found none",
                   c->profile);
  if (rc == 0 && c->akid == NULL)
    rc = tpl__fail(err, TPL_EDENIED,
                   "s3:// MODEL: no AWS credentials found: set "
                   "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
                   "AWS_SESSION_TOKEN), or AWS_PROFILE naming a profile of "
                   "~/.aws/credentials");
  if (rc == 0 && !c->region[0])
    snprintf(c->region, sizeof(c->region), "%s", DEFAULT_REGION);
  if (rc == 0) rc = conf_check(c, err);
  if (rc != 0) conf_clear(c);
  return rc;
}

/* --- the signer --- */

static int sign(void *ctx, void *easy, struct curl_slist **headers) {
  struct s3_signer *s = ctx;
  struct curl_slist *l;
  size_t tl = s->token ? strlen(s->token) + 32 : 0;
  char *th = tl ? malloc(tl) : NULL;
  if (tl && th == NULL) return -ENOMEM;
  l = curl_slist_append(*headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (l != NULL) *headers = l;
  if (l != NULL && th != NULL) {
    snprintf(th, tl, "x-amz-security-token: %s", s->token);
    l = curl_slist_append(*headers, th);
    if (l != NULL) *headers = l;
    free_secret(th);
  }
  if (l == NULL) return -ENOMEM;
  curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, s->sigv4);
  curl_easy_setopt(easy, CURLOPT_USERNAME, s->akid);
  curl_easy_setopt(easy, CURLOPT_PASSWORD, s->secret);
  return 0;
}

/* The text of <Code>...</Code> in an S3 error body, "" when none. */
static void error_code(const char *body, size_t len, char *out, size_t cap) {
  const char *open = memmem(body, len, "<Code>", 6), *close;
  out[0] = '\0';
  if (open == NULL) return;
  open += 6;
  close = memmem(open, len - (size_t)(open - body), "</Code>", 7);
  if (close != NULL && (size_t)(close - open) < cap)
    snprintf(out, cap, "%.*s", (int)(close - open), open);
  for (char *p = out; *p; p++)
    if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
}

/* What to do about S3's error `code`, into out. */
static void advice(const struct s3_signer *s, const char *code, char *out,
                   size_t cap) {
  if (strcmp(code, "RequestTimeTooSkewed") == 0)
    snprintf(out, cap,
             "this machine's clock differs from the store's by more than 15 "
             "minutes, and a signature holds the time it was made: set the "
             "clock (NTP) and load again");
  else if (strcmp(code, "SignatureDoesNotMatch") == 0)
    snprintf(out, cap,
             "the store refused the signature: the secret access key from "
             "%s does not belong to its access key id",
             s->from);
  else if (strcmp(code, "InvalidAccessKeyId") == 0)
    snprintf(out, cap, "the store does not know the access key id from %s",
             s->from);
  else if (strcmp(code, "InvalidToken") == 0 ||
           strcmp(code, "ExpiredToken") == 0)
    snprintf(out, cap,
             "the session token from %s is invalid or expired: renew the "
             "temporary credentials",
             s->from);
  else if (strcmp(code, "AuthorizationHeaderMalformed") == 0)
    snprintf(out, cap,
             "the region %s is not the bucket's: set AWS_REGION to it",
             s->region);
  else
    snprintf(out, cap,
             "access denied to the credentials from %s (region %s): the "
             "bucket's policy does not allow s3:GetObject, or the key is "
             "missing and they may not list the bucket",
             s->from, s->region);
}

static void explain(void *ctx, const char *shown, int status, const char *body,
                    size_t len, struct tpl__error *why) {
  char code[64];
  int n;
  if (status != 403 && status != 400) return;
  error_code(body, len, code, sizeof(code));
  n = snprintf(why->msg, sizeof(why->msg), "%s: HTTP %d%s%s: ", shown, status,
               code[0] ? " " : "", code);
  if (n > 0 && (size_t)n < sizeof(why->msg))
    advice(ctx, code, why->msg + n, sizeof(why->msg) - (size_t)n);
}

static void signer_free(void *ctx) {
  struct s3_signer *s = ctx;
  if (s == NULL) return;
  free(s->akid);
  free_secret(s->secret);
  free_secret(s->token);
  free(s);
}

/* A signer taking the credentials of c (c keeps none). */
static int make_signer(struct s3_conf *c, struct tpl__http_signer *out,
                       struct tpl__error *err) {
  struct s3_signer *s = calloc(1, sizeof(*s));
  if (s == NULL) {
    conf_clear(c);
    return tpl__oom(err);
  }
  s->akid = c->akid;
  s->secret = c->secret;
  s->token = c->token;
  c->akid = c->secret = c->token = NULL;
  snprintf(s->sigv4, sizeof(s->sigv4), "aws:amz:%s:s3", c->region);
  snprintf(s->from, sizeof(s->from), "%s", c->from);
  snprintf(s->region, sizeof(s->region), "%s", c->region);
  *out = (struct tpl__http_signer){sign, explain, signer_free, s};
  return 0;
}

/* --- the URL --- */

static int refuse(struct tpl__error *err, const char *what, const char *s) {
  return tpl__fail(err, TPL_EUSAGE, "MODEL %s: expected %s", s, what);
}

/* A bucket name as S3 names them: 3 to 63 of a-z 0-9 . - */
static int check_bucket(const char *b, size_t len, const char *s,
                        struct tpl__error *err) {
  if (len < 3 || len > 63)
    return refuse(err,
                  "s3://BUCKET/PREFIX with a bucket name of 3 to 63 "
                  "characters",
                  s);
  for (size_t i = 0; i < len; i++)
    if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') ||
          b[i] == '.' || b[i] == '-'))
      return refuse(err,
                    "a bucket name of lower-case letters, digits, '.' "
                    "and '-'",
                    s);
  return 0;
}

static int check_key(const char *k, const char *s, struct tpl__error *err) {
  if (strlen(s) > TPL_MAX_URL) return refuse(err, "at most 8192 bytes", s);
  for (; *k; k++)
    if ((unsigned char)*k < 0x20 || *k == 0x7f)
      return refuse(err, "a key without control bytes", s);
  return 0;
}

/* Appends the key [k, k + len) to out, each '/'-separated segment
 * percent-encoded; returns the length (as snprintf). */
static size_t encode_key(const char *k, size_t len, char *out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i <= len;) {
    size_t seg = 0, w;
    while (i + seg < len && k[i + seg] != '/')
      seg++;
    w = tpl__url_encode_segment(k + i, seg, n < cap ? out + n : NULL,
                                n < cap ? cap - n : 0);
    n += w;
    i += seg;
    if (i < len) {
      if (n + 1 < cap) out[n] = '/', out[n + 1] = '\0';
      n++;
    }
    i++;
  }
  return n;
}

static char *encoded(const char *k, size_t len) {
  size_t n = encode_key(k, len, NULL, 0);
  char *s = malloc(n + 1);
  if (s != NULL) encode_key(k, len, s, n + 1);
  return s;
}

/* origin and the directory before the key: the endpoint's path-style
 * ENDPOINT/BUCKET/, or AWS's virtual-hosted host. */
static int endpoint_base(const struct s3_conf *c, const char *bucket,
                         size_t blen, struct tpl__url *u,
                         struct tpl__error *err) {
  struct tpl__url e = {0};
  char url[1200];
  int rc;
  if (c->endpoint[0] == '\0' && memchr(bucket, '.', blen) == NULL)
    snprintf(url, sizeof(url), "https://%.*s.s3.%s.amazonaws.com/", (int)blen,
             bucket, c->region);
  else if (c->endpoint[0] == '\0')
    snprintf(url, sizeof(url), "https://s3.%s.amazonaws.com/%.*s/", c->region,
             (int)blen, bucket);
  else
    snprintf(url, sizeof(url), "%s", c->endpoint);
  rc = tpl__url_parse(url, &e, NULL);
  if (rc != 0)
    return tpl__fail(err, rc == -ENOMEM ? rc : TPL_EUSAGE,
                     "AWS endpoint %s: expected an http:// or https:// URL "
                     "without credentials (AWS_ENDPOINT_URL_S3, "
                     "AWS_ENDPOINT_URL or the profile's endpoint_url)",
                     c->endpoint);
  if (e.query != NULL || e.name != NULL) {
    tpl__url_clear(&e);
    return tpl__fail(err, TPL_EUSAGE,
                     "AWS endpoint %s: expected scheme://host[:port][/path] "
                     "without a query or file name",
                     c->endpoint);
  }
  u->origin = e.origin;
  e.origin = NULL;
  if (c->endpoint[0] != '\0') { /* path-style: the endpoint's path + bucket */
    size_t len = strlen(e.dir) + blen + 2;
    if ((u->dir = malloc(len)) != NULL)
      snprintf(u->dir, len, "%s%.*s/", e.dir, (int)blen, bucket);
  } else {
    u->dir = e.dir;
    e.dir = NULL;
  }
  tpl__url_clear(&e);
  return u->dir != NULL ? 0 : tpl__oom(err);
}

/* The key part of u: the directory after the base, the file name. */
static int key_parts(const char *key, const char *bucket, size_t blen,
                     struct tpl__url *u, struct tpl__error *err) {
  size_t kl = strlen(key), dl;
  const char *last = strrchr(key, '/');
  const char *name = last ? last + 1 : key;
  int file = strlen(name) > 12 &&
             strcmp(name + strlen(name) - 12, ".safetensors") == 0;
  size_t dirlen = file ? (size_t)(name - key) : kl;
  char *dk = encoded(key, dirlen), *d;
  int slash = dirlen > 0 && key[dirlen - 1] != '/';
  size_t len;
  if (dk == NULL) return tpl__oom(err);
  dl = strlen(u->dir);
  len = dl + strlen(dk) + 2;
  d = malloc(len);
  if (d != NULL) snprintf(d, len, "%s%s%s", u->dir, dk, slash ? "/" : "");
  free(dk);
  free(u->dir);
  u->dir = d;
  if (file) u->name = encoded(name, strlen(name));
  len = 5 + blen + 1 + dirlen + 2;
  if ((u->shown = malloc(len)) != NULL)
    snprintf(u->shown, len, "s3://%.*s/%.*s%s", (int)blen, bucket, (int)dirlen,
             key, slash ? "/" : "");
  if (u->dir == NULL || u->shown == NULL || (file && u->name == NULL))
    return tpl__oom(err);
  return 0;
}

static char *where_of(const struct s3_conf *c) {
  size_t len = strlen(c->region) + strlen(c->endpoint) + 40;
  char *w = malloc(len);
  if (w != NULL)
    snprintf(w, len, "region %s, endpoint %s", c->region,
             c->endpoint[0] ? c->endpoint : "AWS");
  return w;
}

int tpl__s3_parse(const char *s, struct tpl__url *out,
                  struct tpl__http_signer *signer, char **where,
                  struct tpl__error *err) {
  struct tpl__url u = {0};
  struct s3_conf c;
  const char *bucket = s + 5, *key = bucket + strcspn(bucket, "/");
  size_t blen = (size_t)(key - bucket);
  char *w = NULL;
  int rc = check_bucket(bucket, blen, s, err);
  if (rc == 0) rc = check_key(key, s, err);
  if (rc != 0) return rc;
  if (*key == '/') key++;
  rc = conf_resolve(&c, err);
  if (rc != 0) return rc;
  rc = endpoint_base(&c, bucket, blen, &u, err);
  if (rc == 0) rc = key_parts(key, bucket, blen, &u, err);
  if (rc == 0 && (w = where_of(&c)) == NULL) rc = tpl__oom(err);
  if (rc == 0) rc = make_signer(&c, signer, err);
  conf_clear(&c);
  if (rc != 0) {
    tpl__url_clear(&u);
    free(w);
    return rc;
  }
  *out = u;
  *where = w;
  return 0;
}

int tpl__s3_sign_client(struct tpl__http *h, const char *shown,
                        struct tpl__error *err) {
  struct tpl__http_signer signer;
  struct s3_conf c;
  int rc;
  if (!tpl__s3_is_url(shown)) return 0;
  rc = conf_resolve(&c, err);
  if (rc == 0) rc = make_signer(&c, &signer, err);
  conf_clear(&c);
  if (rc == 0) tpl__http_set_signer(h, &signer);
  return rc;
}
