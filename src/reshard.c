/* reshard.c - a presharded directory as the checkpoint it was cut from
 * (reshard.h): the load (shard-info.json parsed, the rank files added
 * and held to it, the full tensors put in their place) and the gather
 * that rebuilds them, one tensor at a time, from their holders' bytes.
 * The load reads only headers; the gather reads each shard it needs once
 * per tensor, contiguously, and checks it against its XXH3 before its
 * bytes go anywhere. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dtype.h"
#include "fileio.h"
#include "fmt_safetensors.h"
#include "jsonu.h"
#include "origin.h"
#include "reshard.h"
#include "scope.h"

struct tpl__reshard {
  struct tpl__si *si;
  const struct tpl__origin *base; /* the origin the rank files are read by */
  uint32_t vfile;                 /* the virtual file: after the rank files */
  uint64_t *voff;  /* per param: its offset in the virtual file */
  uint64_t *bytes; /* per param: its full tensor's bytes */
  size_t *hbase;   /* per param: its first holder in hoff */
  uint64_t *hoff;  /* per holder: its tensor's rank-file offset */
  uint32_t *hfile; /* per holder: its file (an MLC cache's), NULL: rank */
  int unhashed;    /* no XXH3 recorded (an MLC cache): none checked */
  uint32_t approximate;
  size_t cached; /* param + 1 whose full tensor is in buf, 0 none */
  uint8_t *buf;
  uint64_t buf_cap;
  uint8_t *scratch; /* one shard of a cut tensor, or its run */
  uint64_t scratch_cap;
  /* The tensor read a run at a time, in order (rank 0's stream): its
   * param + 1 (0: none), its next byte, each shard's hash so far. */
  size_t run;
  uint64_t run_at;
  XXH3_state_t **states; /* si->tp of them, made at the first run */
  pthread_mutex_t lock;  /* the gather's: the model's reads and the bulk
                            source's thread may both read */
};

static void reshard_free(void *p) {
  struct tpl__reshard *rs = p;
  if (rs == NULL) return;
  free(rs->voff);
  free(rs->bytes);
  free(rs->hbase);
  free(rs->hoff);
  free(rs->hfile);
  free(rs->buf);
  free(rs->scratch);
  for (uint32_t s = 0; rs->states != NULL && s < rs->si->tp; s++)
    XXH3_freeState(rs->states[s]);
  free(rs->states);
  pthread_mutex_destroy(&rs->lock);
  tpl__si_free(rs->si);
  free(rs);
}

/* --- the load --- */

static struct tpl__reshard *reshard_new(void) {
  struct tpl__reshard *rs = calloc(1, sizeof(*rs));
  if (rs != NULL) pthread_mutex_init(&rs->lock, NULL);
  return rs;
}

static int get_info(struct tpl__model *m, struct tpl__reshard *rs,
                    const char *member, const char *what,
                    struct tpl__error *err) {
  char *buf = NULL;
  size_t len = 0;
  int rc = rs->base->get(m, member, TPL_MAX_JSON_FILE, &buf, &len, err);
  if (rc == 0) rc = tpl__si_parse(buf, len, what, &rs->si, err);
  free(buf);
  return rc;
}

/* rank{R}.safetensors for every rank of the grid, file R of m. */
static int add_rank_files(struct tpl__model *m, struct tpl__reshard *rs,
                          const char *what, struct tpl__error *err) {
  for (uint32_t r = 0; r < rs->si->world; r++) {
    char name[48], ctx[64];
    int rc;
    snprintf(name, sizeof(name), "rank%u.safetensors", r);
    snprintf(ctx, sizeof(ctx), "rank %u of %u", r, rs->si->world);
    rc = rs->base->st_member(m, name, what, ctx, err);
    if (rc == -ENOENT || rc == TPL_ENOMODEL)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s/%s: missing: %s lists %u ranks; every rank file "
                       "is needed",
                       m->dir, name, what, rs->si->world);
    if (rc != 0) return rc;
    if (m->nfiles != r + 1) return tpl__fail(err, TPL_EINTERNAL, "rank files");
  }
  return 0;
}

/* Rank file r's __metadata__ "fingerprint" (its header read again, a
 * few KiB) as a new string in *out, NULL when it records none. */
static int file_fingerprint(struct tpl__model *m, struct tpl__reshard *rs,
                            uint32_t r, char **out, struct tpl__error *err) {
  const struct tpl__file *f = &m->files[r];
  uint8_t pre[8];
  uint64_t hl = 0;
  char *hdr = NULL;
  json_t *root = NULL;
  const char *fp;
  int rc = rs->base->read(m, r, pre, sizeof(pre), 0, err);
  if (rc == 0)
    rc = tpl__st_header_len(pre, sizeof(pre), f->size, f->path, &hl, err);
  if (rc == 0 && (hdr = malloc((size_t)hl + 1)) == NULL) rc = tpl__oom(err);
  if (rc == 0) rc = rs->base->read(m, r, hdr, hl, sizeof(pre), err);
  if (rc == 0)
    rc = tpl__json_parse_object(hdr, (size_t)hl, f->path, &root, err);
  fp = json_string_value(
      json_object_get(json_object_get(root, "__metadata__"), "fingerprint"));
  *out = NULL;
  if (rc == 0 && fp != NULL && (*out = strdup(fp)) == NULL) rc = tpl__oom(err);
  json_decref(root);
  free(hdr);
  return rc;
}

/* Every rank file records the fingerprint shard-info.json records (an
 * output older than it: none in either, accepted), so files of two
 * jobs on the same grid and shapes are refused before a byte is read. */
static int same_job(struct tpl__model *m, struct tpl__reshard *rs,
                    const char *what, struct tpl__error *err) {
  const char *want = rs->si->fingerprint;
  int rc = 0;
  for (uint32_t r = 0; rc == 0 && r < rs->si->world; r++) {
    char *got = NULL;
    rc = file_fingerprint(m, rs, r, &got, err);
    if (rc == 0 && strcmp(got != NULL ? got : "", want) != 0)
      rc = tpl__fail(err, TPL_EFORMAT,
                     "%s: fingerprint %s, but %s records %s: a rank file "
                     "of another job (every file must come from one "
                     "preshard)",
                     m->files[r].path, got != NULL ? got : "none", what,
                     want[0] != '\0' ? want : "none");
    free(got);
  }
  return rc;
}

static int differs(const struct tpl__model *m, uint32_t r, const char *tensor,
                   const char *msg, struct tpl__error *err) {
  return tpl__fail(err, TPL_EFORMAT,
                   "%s: tensor '%s': %s (shard-info.json and the file's "
                   "header disagree)",
                   m->files[r].path, tensor, msg);
}

/* The rank file's next tensor (cursor `*k`, below `end`) is holder h's
 * of param p: its name, dtype, shape and bytes. */
static int match_one(const struct tpl__model *m, const struct tpl__si_param *p,
                     uint32_t r, size_t *k, size_t end,
                     struct tpl__error *err) {
  const struct tpl__tensor *t = &m->tensors[*k];
  if (*k >= end || strcmp(t->name, p->name) != 0)
    return differs(m, r, p->name, "not found in the file at its place", err);
  if (t->dtype != p->dtype || t->encoding != TPL_ENC_RAW)
    return differs(m, r, p->name, "another dtype", err);
  if (t->ndim != p->ndim ||
      memcmp(t->shape, p->rank_shape, (size_t)p->ndim * sizeof(uint64_t)))
    return differs(m, r, p->name, "another shape", err);
  (*k)++;
  return 0;
}

/* Where each file's tensors start in m->tensors (they were appended
 * file by file): first[r] .. first[r + 1]. */
static int file_starts(const struct tpl__model *m, uint32_t world, size_t **out,
                       struct tpl__error *err) {
  size_t *first = calloc((size_t)world + 1, sizeof(*first));
  if (first == NULL) return tpl__oom(err);
  for (size_t i = 0; i < m->ntensors; i++)
    first[m->tensors[i].file + 1] = i + 1;
  for (uint32_t r = 1; r <= world; r++)
    if (first[r] < first[r - 1]) first[r] = first[r - 1];
  *out = first;
  return 0;
}

/* Every holder's tensor is in its rank file, in order, and nothing else
 * is; records where each lies. */
static int match_files(struct tpl__model *m, struct tpl__reshard *rs,
                       struct tpl__error *err) {
  const struct tpl__si *si = rs->si;
  size_t *first = NULL, *k = NULL, h = 0, total = 0;
  int rc = file_starts(m, si->world, &first, err);
  for (size_t i = 0; i < si->nparams; i++)
    total += si->params[i].nholders;
  rs->hbase = calloc(si->nparams, sizeof(*rs->hbase));
  rs->hoff = calloc(total ? total : 1, sizeof(*rs->hoff));
  k = calloc(si->world, sizeof(*k));
  if (rc == 0 && (rs->hbase == NULL || rs->hoff == NULL || k == NULL))
    rc = tpl__oom(err);
  for (uint32_t r = 0; rc == 0 && r < si->world; r++)
    k[r] = first[r];
  for (size_t i = 0; rc == 0 && i < si->nparams; i++) {
    const struct tpl__si_param *p = &si->params[i];
    rs->hbase[i] = h;
    for (size_t j = 0; rc == 0 && j < p->nholders; j++, h++) {
      uint32_t r = p->holders[j].rank;
      rs->hoff[h] = k[r] < first[r + 1] ? m->tensors[k[r]].offset : 0;
      rc = match_one(m, p, r, &k[r], first[r + 1], err);
    }
  }
  for (uint32_t r = 0; rc == 0 && r < si->world; r++)
    if (k[r] < first[r + 1])
      rc = differs(m, r, m->tensors[k[r]].name, "not in shard-info.json", err);
  free(first);
  free(k);
  return rc;
}

static int is_pow2(uint32_t n) {
  return n != 0 && (n & (n - 1)) == 0;
}

/* The full tensors replace the rank files' in m, in checkpoint order,
 * back to back in the virtual file. */
static int full_tensors(struct tpl__model *m, struct tpl__reshard *rs,
                        const char *vname, const char *what,
                        struct tpl__error *err) {
  const struct tpl__si *si = rs->si;
  uint32_t vfile = (uint32_t)m->nfiles;
  uint64_t at = 0;
  char *path = tpl__path_join(m->dir, vname);
  int rc = path != NULL ? 0 : tpl__oom(err);
  rs->voff = calloc(si->nparams, sizeof(*rs->voff));
  rs->bytes = calloc(si->nparams, sizeof(*rs->bytes));
  if (rc == 0 && (rs->voff == NULL || rs->bytes == NULL)) rc = tpl__oom(err);
  for (size_t i = 0; i < m->ntensors; i++)
    free(m->tensors[i].name);
  m->ntensors = 0;
  m->name_bytes = 0;
  for (size_t i = 0; rc == 0 && i < si->nparams; i++) {
    const struct tpl__si_param *p = &si->params[i];
    struct tpl__tensor t = {
        .dtype = p->dtype, .ndim = p->ndim, .file = vfile, .offset = at};
    memcpy(t.shape, p->shape, sizeof(t.shape));
    t.nbytes = t.stored_bytes =
        tpl__tensor_numel(&t) * tpl__dtype_size(p->dtype);
    rs->voff[i] = at;
    rs->bytes[i] = t.nbytes;
    if (__builtin_add_overflow(at, t.nbytes, &at)) rc = TPL_EOVERFLOW;
    if (p->kind == TPL_SI_SCALED &&
        !(is_pow2(si->tp) &&
          (p->dtype == TPL_DT_F32 || p->dtype == TPL_DT_F64)))
      rs->approximate++;
    t.name = strdup(p->name);
    if (rc == 0)
      rc = t.name ? tpl__model_take_tensor(m, &t, what, err) : tpl__oom(err);
  }
  if (rc == 0) rc = tpl__model_add_file(m, path, vname, at, &rs->vfile);
  if (rc == TPL_EOVERFLOW || rc == -ENOMEM)
    rc = tpl__fail(err, rc, "%s: %s", what, tpl_strerror(rc));
  free(path);
  return rc;
}

/* Cut from an MLC directory when preshard copied its
 * mlc-chat-config.json and no config.json: that format's row. */
static int config_kind(struct tpl__model *m, struct tpl__reshard *rs,
                       struct tpl__error *err) {
  static const char *const names[] = {"config.json", "mlc-chat-config.json"};
  int there[2];
  for (int i = 0; i < 2; i++) {
    char *buf = NULL;
    size_t len = 0;
    int rc = rs->base->get(m, names[i], TPL_MAX_JSON_FILE, &buf, &len, err);
    free(buf);
    if (rc != 0 && rc != -ENOENT && rc != TPL_EDENIED) return rc;
    there[i] = rc == 0;
  }
  if (!there[0] && there[1]) m->format = TPL_FMT_PRESHARDED_MLC;
  return 0;
}

int tpl__reshard_load(struct tpl__model *m, const char *member,
                      struct tpl__error *err) {
  struct tpl__reshard *rs = reshard_new();
  const struct tpl__origin *base = tpl__model_origin(m);
  char *what = base->shown(m, member);
  int rc = rs != NULL && what != NULL ? 0 : tpl__oom(err);
  if (rs != NULL) {
    rs->base = base;
    m->priv = rs;
    m->priv_free = reshard_free;
  }
  if (rc == 0) rc = get_info(m, rs, member, what, err);
  if (rc == 0) rc = add_rank_files(m, rs, what, err);
  if (rc == 0) rc = same_job(m, rs, what, err);
  if (rc == 0) rc = match_files(m, rs, err);
  if (rc == 0) rc = full_tensors(m, rs, "rank*.safetensors", what, err);
  if (rc == 0) rc = config_kind(m, rs, err);
  if (rc == 0) m->origin = tpl__origin_presharded(base);
  if (rc == 0) m->approximate = rs->approximate;
  if (rc != 0 && m->priv == rs) {
    /* not a presharded directory (a URL's probe: no shard-info.json), or
     * a refused one: m is no re-shard for the format read next */
    reshard_free(rs);
    m->priv = NULL;
    m->priv_free = NULL;
  }
  free(what);
  return rc;
}

/* Holder h of the adopted si (all params' holders in order) lies in
 * record rec[h] of m: its file and offset; raw records only. */
static int adopt_holders(struct tpl__model *m, struct tpl__reshard *rs,
                         const size_t *rec, struct tpl__error *err) {
  size_t total = 0, h = 0;
  for (size_t i = 0; i < rs->si->nparams; i++)
    total += rs->si->params[i].nholders;
  rs->hbase = calloc(rs->si->nparams + 1, sizeof(*rs->hbase));
  rs->hoff = calloc(total + 1, sizeof(*rs->hoff));
  rs->hfile = calloc(total + 1, sizeof(*rs->hfile));
  if (rs->hbase == NULL || rs->hoff == NULL || rs->hfile == NULL)
    return tpl__oom(err);
  for (size_t i = 0; i < rs->si->nparams; i++) {
    rs->hbase[i] = h;
    for (size_t j = 0; j < rs->si->params[i].nholders; j++, h++) {
      const struct tpl__tensor *t = &m->tensors[rec[h]];
      if (t->encoding != TPL_ENC_RAW || t->stored_bytes != t->nbytes)
        return tpl__fail(err, TPL_EFORMAT,
                         "%s: tensor '%s': expected a raw record, found an "
                         "encoded one; a presharded cache is re-sharded "
                         "from raw records only",
                         m->files[t->file].path, t->name);
      rs->hoff[h] = t->offset;
      rs->hfile[h] = t->file;
    }
  }
  return 0;
}

int tpl__reshard_adopt(struct tpl__model *m, struct tpl__si *si,
                       const size_t *rec, const char *vname, const char *what,
                       struct tpl__error *err) {
  struct tpl__reshard *rs = reshard_new();
  int rc = rs != NULL ? 0 : tpl__oom(err);
  if (rs == NULL) {
    tpl__si_free(si);
    return rc;
  }
  rs->base = tpl__model_origin(m);
  rs->si = si;
  rs->unhashed = 1;
  if (m->priv_free != NULL) m->priv_free(m->priv);
  m->priv = rs;
  m->priv_free = reshard_free;
  rc = adopt_holders(m, rs, rec, err);
  if (rc == 0) rc = full_tensors(m, rs, vname, what, err);
  if (rc == 0) m->origin = tpl__origin_presharded(rs->base);
  return rc;
}

struct tpl__reshard *tpl__reshard_of(const struct tpl__model *m) {
  return m != NULL && m->priv_free == reshard_free ? m->priv : NULL;
}

uint32_t tpl__reshard_vfile(const struct tpl__reshard *rs) {
  return rs->vfile;
}

const struct tpl__si *tpl__reshard_info(const struct tpl__reshard *rs) {
  return rs->si;
}

const struct tpl__origin *tpl__reshard_base(const struct tpl__reshard *rs) {
  return rs->base;
}

uint32_t tpl__reshard_approximate(const struct tpl__reshard *rs) {
  return rs->approximate;
}

/* --- the gather --- */

struct gather {
  struct tpl__reshard *rs;
  const struct tpl__model *m;
  tpl__reshard_read_fn read;
  void *ctx;
  struct tpl__error *err;
};

/* The file holder h of param i reads from: its rank's, or its record's
 * in an MLC cache. */
static uint32_t holder_file(const struct tpl__reshard *rs, size_t i, size_t h) {
  if (rs->hfile != NULL) return rs->hfile[rs->hbase[i] + h];
  return rs->si->params[i].holders[h].rank;
}

/* Bytes [at, at + len) of holder h's (an index into param i's holders)
 * copy of param i into dst. */
static int read_part(struct gather *g, size_t i, size_t h, uint64_t at,
                     uint64_t len, uint8_t *dst) {
  return g->read(g->ctx, holder_file(g->rs, i, h), dst, len,
                 g->rs->hoff[g->rs->hbase[i] + h] + at, g->err);
}

/* Holder h's bytes of param i hash to `got`, as recorded, or
 * TPL_EMISMATCH naming its file and the tensor. */
static int check_hash(struct gather *g, size_t i, size_t h, uint64_t got) {
  const struct tpl__si_param *p = &g->rs->si->params[i];
  const struct tpl__si_holder *w = &p->holders[h];
  if (got != w->xxh3)
    return tpl__fail(g->err, TPL_EMISMATCH,
                     "%s: tensor '%s': its bytes hash to xxh3 %016llx, "
                     "shard-info.json records %016llx",
                     g->m->files[holder_file(g->rs, i, h)].path, p->name,
                     (unsigned long long)got, (unsigned long long)w->xxh3);
  return 0;
}

/* Holder h's copy of param i whole into dst, checked. */
static int read_holder(struct gather *g, size_t i, size_t h, uint8_t *dst) {
  uint64_t n = g->rs->si->params[i].holders[h].nbytes;
  int rc = read_part(g, i, h, 0, n, dst);
  if (rc != 0 || g->rs->unhashed) return rc;
  return check_hash(g, i, h, XXH3_64bits(dst, (size_t)n));
}

static int grow(uint8_t **buf, uint64_t *cap, uint64_t want,
                struct tpl__error *err) {
  uint8_t *p;
  if (*cap >= want) return 0;
  p = realloc(*buf, (size_t)want);
  if (p == NULL)
    return tpl__fail(err, -ENOMEM,
                     "cannot allocate %llu bytes to rebuild a "
                     "tensor",
                     (unsigned long long)want);
  *buf = p;
  *cap = want;
  return 0;
}

static size_t holder_index(const struct tpl__si_param *p, uint32_t shard) {
  return (size_t)(tpl__si_holder_of(p, shard) - p->holders);
}

/* Each shard read into scratch and scattered to its place in out; a
 * shard that is one contiguous run of the tensor (a dim-0 cut) is read
 * straight into its place. */
static int rebuild_cut(struct gather *g, size_t i, uint8_t *out) {
  const struct tpl__si *si = g->rs->si;
  const struct tpl__si_param *p = &si->params[i];
  int rc = 0;
  for (uint32_t s = 0; rc == 0 && s < si->tp; s++) {
    size_t h = holder_index(p, s);
    struct tpl__layout l;
    rc = tpl__shard_layout(p->shape, p->ndim, tpl__dtype_size(p->dtype),
                           &p->spec, si->tp, s, &l);
    if (rc == 0 && l.rows == 1 && l.npieces == 1) {
      rc = read_holder(g, i, h, out + l.pieces[0].offset);
      continue;
    }
    if (rc == 0)
      rc = grow(&g->rs->scratch, &g->rs->scratch_cap, p->holders[h].nbytes,
                g->err);
    if (rc == 0) rc = read_holder(g, i, h, g->rs->scratch);
    if (rc == 0) tpl__layout_scatter(&l, 0, UINT64_MAX, g->rs->scratch, out);
  }
  return rc;
}

/* Param i's full tensor into out (its bytes). */
static int rebuild(struct gather *g, size_t i, uint8_t *out) {
  const struct tpl__si_param *p = &g->rs->si->params[i];
  int rc;
  switch (p->kind) {
  case TPL_SI_CUT:
    return rebuild_cut(g, i, out);
  case TPL_SI_SCALED:
    rc = read_holder(g, i, holder_index(p, 0), out);
    if (rc == 0)
      rc = tpl__unscale_bias(out, g->rs->bytes[i], p->dtype, g->rs->si->tp);
    return rc;
  default:
    return read_holder(g, i, 0, out);
  }
}

/* The non-empty param whose bytes hold virtual offset `off`. */
static size_t param_at(const struct tpl__reshard *rs, uint64_t off) {
  size_t lo = 0, hi = rs->si->nparams;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (rs->voff[mid] <= off)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* Param i's tensor whole in rs->buf (kept for the next extent). */
static int cache(struct gather *g, size_t i) {
  struct tpl__reshard *rs = g->rs;
  int rc;
  if (rs->cached == i + 1) return 0;
  rs->cached = 0;
  rc = grow(&rs->buf, &rs->buf_cap, rs->bytes[i], g->err);
  if (rc == 0) rc = rebuild(g, i, rs->buf);
  if (rc == 0) rs->cached = i + 1;
  return rc;
}

/* The layout of source k of param i (shard k of a cut tensor, the one
 * holder of a whole one) and that holder's index. */
static int source_of(const struct tpl__reshard *rs, size_t i, uint32_t k,
                     struct tpl__layout *l, size_t *h) {
  const struct tpl__si_param *p = &rs->si->params[i];
  if (p->kind != TPL_SI_CUT) {
    tpl__layout_whole(rs->bytes[i], l);
    *h = 0;
    return 0;
  }
  *h = holder_index(p, k);
  return tpl__shard_layout(p->shape, p->ndim, tpl__dtype_size(p->dtype),
                           &p->spec, rs->si->tp, k, l);
}

/* Source k's bytes of the run [from, from + n) of param i: one read of
 * its holder's file (straight into place when they are one run of the
 * tensor, else into scratch and scattered), hashed on; checked once its
 * last byte is read. */
static int run_source(struct gather *g, size_t i, uint32_t k, uint64_t from,
                      uint64_t n, uint8_t *out) {
  struct tpl__reshard *rs = g->rs;
  struct tpl__layout l;
  uint64_t at, len, start;
  uint8_t *dst;
  size_t h;
  int rc = source_of(rs, i, k, &l, &h);
  if (rc != 0) return rc;
  at = tpl__layout_count(&l, 0, from);
  len = tpl__layout_count(&l, from, from + n);
  if (len == 0) return 0;
  if (tpl__layout_contiguous(&l, from, from + n, &start) == len)
    dst = out + (start - from);
  else if ((rc = grow(&rs->scratch, &rs->scratch_cap, len, g->err)) == 0)
    dst = rs->scratch;
  if (rc == 0) rc = read_part(g, i, h, at, len, dst);
  if (rc != 0) return rc;
  if (dst == rs->scratch) tpl__layout_scatter(&l, from, from + n, dst, out);
  if (rs->unhashed) return 0;
  XXH3_64bits_update(rs->states[k], dst, (size_t)len);
  if (at + len < rs->si->params[i].holders[h].nbytes) return 0;
  return check_hash(g, i, h, XXH3_64bits_digest(rs->states[k]));
}

/* Each source's bytes of the run [from, from + n) of param i, as
 * `hint` wants them (file, offset, length). */
static void hint_param(const struct tpl__reshard *rs, size_t i, uint64_t from,
                       uint64_t n, tpl__reshard_hint_fn hint, void *ctx) {
  const struct tpl__si_param *p = &rs->si->params[i];
  uint32_t nsrc = p->kind == TPL_SI_CUT ? rs->si->tp : 1;
  for (uint32_t k = 0; k < nsrc; k++) {
    struct tpl__layout l;
    uint64_t at, len;
    size_t h;
    if (source_of(rs, i, k, &l, &h) != 0) return;
    if (p->kind == TPL_SI_SCALED) h = holder_index(p, 0);
    at = tpl__layout_count(&l, 0, from);
    len = tpl__layout_count(&l, from, from + n);
    if (len > 0)
      hint(ctx, holder_file(rs, i, h), rs->hoff[rs->hbase[i] + h] + at, len);
  }
}

void tpl__reshard_hint(const struct tpl__reshard *rs, uint64_t off,
                       uint64_t len, tpl__reshard_hint_fn hint, void *ctx) {
  while (len > 0) {
    size_t i = param_at(rs, off);
    uint64_t from = off - rs->voff[i], n = rs->bytes[i] - from;
    if (off < rs->voff[i] || from >= rs->bytes[i]) return;
    if (n > len) n = len;
    hint_param(rs, i, from, n, hint, ctx);
    off += n;
    len -= n;
  }
}

/* The run [from, from + n) of param i into out, from its sources read a
 * run at a time, when the runs come in order from its start (the
 * stream's); 1 when they do not (or it is a scaled bias): the caller
 * rebuilds it whole instead. */
static int run(struct gather *g, size_t i, uint64_t from, uint64_t n,
               uint8_t *out) {
  struct tpl__reshard *rs = g->rs;
  const struct tpl__si_param *p = &rs->si->params[i];
  uint32_t nsrc = p->kind == TPL_SI_CUT ? rs->si->tp : 1;
  int rc = 0;
  if (p->kind == TPL_SI_SCALED ||
      (from != 0 && !(rs->run == i + 1 && rs->run_at == from)))
    return 1;
  if (rs->states == NULL) {
    rs->states = calloc(rs->si->tp, sizeof(*rs->states));
    for (uint32_t s = 0; rs->states != NULL && s < rs->si->tp; s++)
      if ((rs->states[s] = XXH3_createState()) == NULL) return tpl__oom(g->err);
    if (rs->states == NULL) return tpl__oom(g->err);
  }
  for (uint32_t k = 0; from == 0 && k < nsrc; k++)
    XXH3_64bits_reset(rs->states[k]);
  rs->run = 0;
  for (uint32_t k = 0; rc == 0 && k < nsrc; k++)
    rc = run_source(g, i, k, from, n, out);
  if (rc == 0 && from + n < rs->bytes[i]) {
    rs->run = i + 1;
    rs->run_at = from + n;
  }
  return rc;
}

static int gather_range(struct tpl__reshard *rs, const struct tpl__model *m,
                        tpl__reshard_read_fn read, void *ctx, void *dst,
                        uint64_t len, uint64_t off, struct tpl__error *err) {
  struct gather g = {rs, m, read, ctx, err};
  uint8_t *out = dst;
  int rc = 0;
  while (rc == 0 && len > 0) {
    size_t i = param_at(rs, off);
    uint64_t from = off - rs->voff[i], n = rs->bytes[i] - from;
    if (off < rs->voff[i] || from >= rs->bytes[i])
      return tpl__fail(err, -EIO, "%s: no tensor at offset %llu",
                       m->files[rs->vfile].path, (unsigned long long)off);
    if (n > len) n = len;
    if (from == 0 && n == rs->bytes[i])
      rc = rebuild(&g, i, out);
    else /* a run of the stream's in place, else via the whole tensor */
      rc = rs->cached == i + 1 ? 1 : run(&g, i, from, n, out);
    if (rc == 1 && (rc = cache(&g, i)) == 0)
      memcpy(out, rs->buf + from, (size_t)n);
    out += n;
    off += n;
    len -= n;
  }
  return rc;
}

int tpl__reshard_read(struct tpl__reshard *rs, const struct tpl__model *m,
                      tpl__reshard_read_fn read, void *ctx, void *dst,
                      uint64_t len, uint64_t off, struct tpl__error *err) {
  int rc;
  pthread_mutex_lock(&rs->lock);
  rc = gather_range(rs, m, read, ctx, dst, len, off, err);
  pthread_mutex_unlock(&rs->lock);
  return rc;
}
