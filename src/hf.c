/* hf.c - hf://org/name[@revision] MODELs: a Hugging Face hub repository
 * read as the hub's own clients read it (huggingface_hub's hf_hub_url:
 * {endpoint}/{repo}/resolve/{revision}/{file}, answered with the file or
 * a redirect to a content server, which libcurl follows).  The revision
 * is pinned first: one GET of the hub's revision API
 * ({endpoint}/api/models/{repo}/revision/{revision}, its "sha") turns a
 * branch or tag into the commit every member URL then names, so every
 * file of the load, on every rank, comes from one commit even when the
 * branch moves meanwhile.  The ETag pinned per file is the final answer's
 * (the content server's for a redirected file, which is the object's own
 * and stable; the hub's for a small file it serves itself).  The token
 * (HF_TOKEN, else the token file huggingface-cli login writes) is the
 * signer's: a bearer token for libcurl, which sends it to the hub's host
 * only and never on to a redirect's other host.  A 401 or 403 is
 * explained (a gated model wants its licence accepted and a token). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "curl_dl.h"
#include "fileio.h"
#include "hf.h"
#include "jsonu.h"

#define DEFAULT_ENDPOINT "https://huggingface.co"
#define TOKEN_MAX 4096
#define NAME_MAX_LEN 96 /* the hub's cap on an org or a repository name */
#define REVISION_MAX 256
#define API_MAX (1u << 20) /* bytes of the revision API's answer */

struct hf_signer {
  char *token;     /* NULL: none */
  char from[1024]; /* HF_TOKEN or the token file's path */
};

int tpl__hf_is_url(const char *s) {
  return s != NULL && strncasecmp(s, "hf://", 5) == 0;
}

/* --- the token --- */

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? v : NULL;
}

/* The token file's path, as huggingface_hub's constants put it. */
static int token_path(char *out, size_t cap) {
  const char *p = env("HF_TOKEN_PATH"), *home = env("HF_HOME");
  const char *cache = env("XDG_CACHE_HOME"), *user = env("HOME");
  int n;
  if (p != NULL)
    n = snprintf(out, cap, "%s", p);
  else if (home != NULL)
    n = snprintf(out, cap, "%s/token", home);
  else if (cache != NULL)
    n = snprintf(out, cap, "%s/huggingface/token", cache);
  else if (user != NULL)
    n = snprintf(out, cap, "%s/.cache/huggingface/token", user);
  else
    return 0;
  return n > 0 && (size_t)n < cap;
}

static void free_token(char *t) {
  if (t == NULL) return;
  memset(t, 0, strlen(t));
  free(t);
}

static int check_token(const char *t, const char *from,
                       struct tpl__error *err) {
  if (*t == '\0' || strlen(t) > TOKEN_MAX)
    return tpl__fail(err, TPL_EUSAGE,
                     "%s: expected a hub token of 1 to %d bytes, found %zu",
                     from, TOKEN_MAX, strlen(t));
  for (; *t; t++)
    if ((unsigned char)*t <= 0x20 || *t == 0x7f)
      return tpl__fail(err, TPL_EUSAGE,
                       "%s: expected a hub token on one line without "
                       "spaces, found a space or control byte",
                       from);
  return 0;
}

/* HF_TOKEN, else the token file (none: no token). */
static int read_token(struct hf_signer *s, struct tpl__error *err) {
  const char *e = env("HF_TOKEN");
  char path[1024], *t = NULL;
  size_t len = 0;
  int rc;
  if (e != NULL) {
    snprintf(s->from, sizeof(s->from), "HF_TOKEN");
    if ((s->token = strdup(e)) == NULL) return tpl__oom(err);
    return check_token(s->token, s->from, err);
  }
  if (!token_path(path, sizeof(path))) return 0;
  rc = tpl__read_file(path, TOKEN_MAX + 2, &t, &len, err);
  if (rc == -ENOENT) return 0;
  if (rc != 0)
    return tpl__fail(err, rc == TPL_ELIMIT ? TPL_EUSAGE : rc,
                     "%s: cannot read the hub token: %s", path,
                     tpl_strerror(rc));
  while (len > 0 && (t[len - 1] == '\n' || t[len - 1] == '\r'))
    t[--len] = '\0';
  s->token = t;
  snprintf(s->from, sizeof(s->from), "%s", path);
  return check_token(t, path, err);
}

/* --- the signer --- */

static int sign(void *ctx, void *easy, struct curl_slist **headers) {
  struct hf_signer *s = ctx;
  (void)headers;
  if (s->token == NULL) return 0;
  curl_easy_setopt(easy, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
  curl_easy_setopt(easy, CURLOPT_XOAUTH2_BEARER, s->token);
  return 0;
}

static void explain(void *ctx, const char *shown, int status, const char *body,
                    size_t len, struct tpl__error *why) {
  const struct hf_signer *s = ctx;
  (void)body;
  (void)len;
  if (status != 401 && status != 403) return;
  if (s->token != NULL)
    snprintf(why->msg, sizeof(why->msg),
             "%s: HTTP %d: the hub refused the token from %s: a gated "
             "model needs its licence accepted on its page by that "
             "account, a private one a token that may read it",
             shown, status, s->from);
  else
    snprintf(why->msg, sizeof(why->msg),
             "%s: HTTP %d: gated or private model: accept its licence on "
             "the hub and set HF_TOKEN (or log in: huggingface-cli login)",
             shown, status);
}

static void signer_free(void *ctx) {
  struct hf_signer *s = ctx;
  if (s == NULL) return;
  free_token(s->token);
  free(s);
}

static int make_signer(struct tpl__http_signer *out, struct tpl__error *err) {
  struct hf_signer *s = calloc(1, sizeof(*s));
  int rc = s ? read_token(s, err) : tpl__oom(err);
  if (rc != 0) {
    signer_free(s);
    return rc;
  }
  *out = (struct tpl__http_signer){sign, explain, signer_free, s};
  return 0;
}

/* --- the name --- */

struct hf_name {
  char repo[2 * NAME_MAX_LEN + 2]; /* "org/name" or "name" */
  char revision[REVISION_MAX + 1];
};

static int name_ok(const char *s, size_t len) {
  if (len == 0 || len > NAME_MAX_LEN || s[0] == '.' || s[0] == '-') return 0;
  for (size_t i = 0; i < len; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '-' ||
          s[i] == '_'))
      return 0;
  return 1;
}

static int parse_name(const char *s, struct hf_name *n,
                      struct tpl__error *err) {
  const char *repo = s + 5, *at = strchr(repo, '@');
  const char *end = at ? at : repo + strlen(repo);
  const char *slash = memchr(repo, '/', (size_t)(end - repo));
  size_t rl = (size_t)(end - repo);
  if (rl > 0 && repo[rl - 1] == '/') rl--; /* hf://org/name/ */
  if (slash != NULL && slash >= repo + rl) slash = NULL;
  if (!(slash ? name_ok(repo, (size_t)(slash - repo)) &&
                    name_ok(slash + 1, rl - (size_t)(slash + 1 - repo))
              : name_ok(repo, rl)))
    return tpl__fail(err, TPL_EUSAGE,
                     "MODEL %s: expected hf://ORG/NAME[@REVISION], each name "
                     "of 1 to %d letters, digits, '.', '-' and '_'",
                     s, NAME_MAX_LEN);
  snprintf(n->repo, sizeof(n->repo), "%.*s", (int)rl, repo);
  snprintf(n->revision, sizeof(n->revision), "%s", at ? at + 1 : "main");
  if (at && (at[1] == '\0' || strlen(at + 1) > REVISION_MAX))
    return tpl__fail(err, TPL_EUSAGE,
                     "MODEL %s: expected a revision of 1 to %d bytes after "
                     "'@'",
                     s, REVISION_MAX);
  for (const char *p = n->revision; *p; p++)
    if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
      return tpl__fail(err, TPL_EUSAGE,
                       "MODEL %s: expected a revision of printable ASCII "
                       "without spaces",
                       s);
  return 0;
}

static int is_commit(const char *r) {
  size_t i = 0;
  for (; r[i]; i++)
    if (!((r[i] >= '0' && r[i] <= '9') || (r[i] >= 'a' && r[i] <= 'f')))
      return 0;
  return i == 40;
}

/* --- the revision --- */

/* The commit of the revision API's answer. */
static int commit_of(const char *buf, size_t len, const char *what,
                     char *commit, struct tpl__error *err) {
  json_t *root = NULL, *sha;
  int rc = tpl__json_parse_object(buf, len, what, &root, err);
  if (rc != 0) return rc;
  sha = json_object_get(root, "sha");
  if (!json_is_string(sha) || !is_commit(json_string_value(sha)))
    rc = tpl__fail(err, TPL_EFORMAT,
                   "%s: expected \"sha\" with the revision's 40-digit "
                   "commit, found %s",
                   what, sha == NULL ? "none" : "another value");
  else
    memcpy(commit, json_string_value(sha), 41);
  json_decref(root);
  return rc;
}

/* GETs the revision API with a client of its own (the model's is made
 * later, from the parsed URL). */
static int pin_revision(const char *origin, const char *base,
                        const struct hf_name *n, const struct tpl__http_opts *o,
                        struct tpl__http_signer *signer, char *commit,
                        struct tpl__error *err) {
  struct tpl__http *h = NULL;
  struct tpl__http_signer borrowed = *signer;
  size_t rl = strlen(n->revision);
  size_t el = tpl__url_encode_segment(n->revision, rl, NULL, 0);
  size_t len = strlen(origin) + strlen(base) + strlen(n->repo) + el + 32;
  char *url = malloc(len), *shown = malloc(len), *buf = NULL;
  size_t at, blen;
  int rc = url && shown ? tpl__http_open(o, &h, err) : tpl__oom(err);
  if (rc == 0) {
    at = (size_t)snprintf(url, len, "%s%sapi/models/%s/revision/", origin, base,
                          n->repo);
    tpl__url_encode_segment(n->revision, rl, url + at, len - at);
    snprintf(shown, len, "hf://%s@%s (the hub's revision API)", n->repo,
             n->revision);
    borrowed.free = NULL; /* the caller keeps the signer */
    tpl__http_set_signer(h, &borrowed);
    rc = tpl__http_get(h, url, shown, API_MAX, &buf, &blen, err);
  }
  if (rc == 0) rc = commit_of(buf, blen, shown, commit, err);
  tpl__http_close(h);
  free(buf);
  free(url);
  free(shown);
  return rc;
}

/* --- the URL --- */

static int endpoint(struct tpl__url *e, struct tpl__error *err) {
  const char *v = env("HF_ENDPOINT");
  char url[1100];
  int rc;
  snprintf(url, sizeof(url), "%s", v ? v : DEFAULT_ENDPOINT);
  rc = tpl__url_parse(url, e, NULL);
  if (rc == 0 && (e->query != NULL || e->name != NULL)) {
    tpl__url_clear(e);
    rc = TPL_EUSAGE;
  }
  if (rc != 0)
    return tpl__fail(err, rc == -ENOMEM ? rc : TPL_EUSAGE,
                     "HF_ENDPOINT %s: expected an http:// or https:// URL "
                     "without credentials, query or file name",
                     url);
  return 0;
}

/* u's directory, shown form and *where, for commit `commit`. */
static int fill_url(struct tpl__url *e, const struct hf_name *n,
                    const char *commit, struct tpl__url *u, char **where) {
  size_t dl = strlen(e->dir) + strlen(n->repo) + 64;
  size_t wl = strlen(n->revision) + strlen(e->origin) + strlen(e->dir) + 40;
  u->origin = e->origin;
  e->origin = NULL;
  if ((u->dir = malloc(dl)) != NULL)
    snprintf(u->dir, dl, "%s%s/resolve/%s/", e->dir, n->repo, commit);
  if ((u->shown = malloc(dl)) != NULL)
    snprintf(u->shown, dl, "hf://%s@%s/", n->repo, commit);
  if ((*where = malloc(wl)) != NULL)
    snprintf(*where, wl, "revision %s, endpoint %s%.*s", n->revision, u->origin,
             (int)(strlen(e->dir) > 1 ? strlen(e->dir) - 1 : 0), e->dir);
  return u->dir && u->shown && *where ? 0 : -ENOMEM;
}

int tpl__hf_parse(const char *s, const struct tpl__http_opts *o,
                  struct tpl__url *out, struct tpl__http_signer *signer,
                  char **where, struct tpl__error *err) {
  struct hf_name n;
  struct tpl__url e = {0}, u = {0};
  struct tpl__http_signer sg = {0};
  char commit[41], *w = NULL;
  int rc = parse_name(s, &n, err);
  if (rc == 0) rc = endpoint(&e, err);
  if (rc == 0) rc = make_signer(&sg, err);
  if (rc == 0 && is_commit(n.revision))
    memcpy(commit, n.revision, sizeof(commit));
  else if (rc == 0)
    rc = pin_revision(e.origin, e.dir, &n, o, &sg, commit, err);
  if (rc == 0 && fill_url(&e, &n, commit, &u, &w) != 0) rc = tpl__oom(err);
  tpl__url_clear(&e);
  if (rc != 0) {
    if (sg.free != NULL) sg.free(sg.ctx);
    tpl__url_clear(&u);
    free(w);
    return rc;
  }
  *out = u;
  *signer = sg;
  *where = w;
  return 0;
}

int tpl__hf_sign_client(struct tpl__http *h, const char *shown,
                        struct tpl__error *err) {
  struct tpl__http_signer signer;
  int rc;
  if (!tpl__hf_is_url(shown)) return 0;
  rc = make_signer(&signer, err);
  if (rc == 0) tpl__http_set_signer(h, &signer);
  return rc;
}
