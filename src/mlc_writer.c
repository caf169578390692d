/* mlc_writer.c - the sink of `preshard --layout mlc`.  Every rank knows
 * every rank's files (mlc_layout.h: the layout is computed from the job),
 * so the only thing rank 0 must be told is each file's md5 sum, gathered
 * once the files are written.  The order keeps the cache JSON the mark of
 * a complete directory: the .bin files are written under temporary names
 * (.params_shard_<i>.bin.tmp) and fsynced, renamed into place only when
 * every rank has written all of its own, and the JSON comes last, written
 * atomically by rank 0.  A failure anywhere removes what every rank
 * wrote; SIGTERM, SIGINT or SIGHUP during the writes removes the rank's
 * temps (tmpguard.h), and from the first rename to the cache JSON they
 * wait.  Only a rank killed outright (SIGKILL) may leave a .tmp file,
 * which no reader takes for output and --force removes. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "fileio.h"
#include "format.h"
#include "jsonu.h"
#include "md5sum.h"
#include "mlc_layout.h"
#include "mlc_writer.h"
#include "origin.h"
#include "outdir.h"
#include "stall.h"
#include "store.h"
#include "tmpguard.h"

/* The source's cache JSON: the name the output takes too. */
static const char *const cache_names[] = {"tensor-cache.json",
                                          "ndarray-cache.json"};

struct writer {
  const struct tpl__outdir_opts *o;
  const struct tpl__loaded *l;
  const struct tpl__coord *c;
  struct tpl__mlc_layout layout;
  uint8_t *mine; /* max_owned x 16: md5 of each file this rank owns */
  uint8_t *all;  /* rank 0: world x max_owned x 16 */
  struct tpl__outdir_file *files; /* max_owned: this rank's, written */
  size_t max_owned;
  int published;   /* this rank's files are in place */
  int wrote_cache; /* rank 0: the cache JSON is in place */
};

int tpl__mlc_writer_is_mlc_dir(const char *dir) {
  for (size_t i = 0; i < ARRAY_SIZE(cache_names); i++) {
    char *p = tpl__path_join(dir, cache_names[i]);
    int yes = p != NULL && tpl__exists(p);
    free(p);
    if (yes) return 1;
  }
  return 0;
}

/* "params_shard_<digits>.bin", or its temp ".params_shard_<d>.bin.tmp". */
static int is_cache_file(const char *name) {
  const char *p;
  if (name[0] == '.') name++;
  if (strncmp(name, "params_shard_", 13) != 0) return 0;
  p = name + 13;
  if (*p < '0' || *p > '9') return 0;
  while (*p >= '0' && *p <= '9')
    p++;
  return strcmp(p, ".bin") == 0 || strcmp(p, ".bin.tmp") == 0;
}

/* --force: the cache JSON goes first (a half-replaced directory never
 * looks complete), then every .bin file and temp of an earlier cache. */
static int remove_old_cache(const char *dir, struct tpl__error *err) {
  return tpl__outdir_remove_old(dir, cache_names, ARRAY_SIZE(cache_names),
                                is_cache_file, err);
}

/* --- rank 0, at prepare: what the output takes of MODEL --- */

/* The members of MODEL the output takes, in the order taken. */
enum { CHAT_CONFIG, CACHE_JSON, FIRST_COPY };

/* Files of MODEL that the output does not take as they are. */
static int is_own_name(const struct tpl__model *m, const char *name) {
  if (name[0] == '.' || is_cache_file(name) ||
      strcmp(name, "mlc-chat-config.json") == 0 ||
      strcmp(name, "tensor-cache-b16.json") == 0 ||
      strcmp(name, "ndarray-cache-b16.json") == 0)
    return 1;
  for (size_t i = 0; i < ARRAY_SIZE(cache_names); i++)
    if (strcmp(name, cache_names[i]) == 0) return 1;
  for (size_t i = 0; i < m->nfiles; i++)
    if (strcmp(m->files[i].name, name) == 0) return 1;
  return 0;
}

/* A taken member parsed as a JSON object (a new reference in *out). */
static int parse_taken(const struct tpl__outdir_opts *o, size_t i, json_t **out,
                       struct tpl__error *err) {
  const struct tpl__outdir_member *mb = &o->members[i];
  return tpl__json_parse_object(mb->buf, mb->len, mb->name, out, err);
}

/* MODEL's mlc-chat-config.json, which MLC's runtime reads
 * tensor_parallel_shards from: taken and parsed (into *cfg). */
static int take_chat_config(struct tpl__outdir_opts *o,
                            const struct tpl__model *m, json_t **cfg,
                            struct tpl__error *err) {
  static const char name[] = "mlc-chat-config.json";
  int rc = tpl__outdir_take(o, m, name, TPL_MAX_JSON_FILE, err);
  char *shown = tpl__model_origin(m)->shown(m, name);
  const char *what = shown ? shown : name;
  const struct tpl__outdir_member *mb;
  if (rc == -ENOENT)
    rc = tpl__fail(err, TPL_ENOMODEL,
                   "%s: expected beside the cache (MLC's runtime reads "
                   "tensor_parallel_shards from it), found none",
                   what);
  mb = rc == 0 ? &o->members[CHAT_CONFIG] : NULL;
  if (rc == 0) rc = tpl__json_parse_object(mb->buf, mb->len, what, cfg, err);
  free(shown);
  return rc;
}

/* The cache JSON the model was read from (the first of cache_names its
 * origin has, as the format's probes found it), for its metadata and
 * its name. */
static int take_cache_json(struct tpl__outdir_opts *o,
                           const struct tpl__model *m, struct tpl__error *err) {
  int rc = tpl__outdir_take(o, m, cache_names[0], TPL_MAX_JSON_FILE, err);
  if (rc == -ENOENT || rc == TPL_EDENIED)
    rc = tpl__outdir_take(o, m, cache_names[1], TPL_MAX_JSON_FILE, err);
  return rc;
}

/* Member `name` of m, unless the output writes its own. */
static int take_copy(struct tpl__outdir_opts *o, const struct tpl__model *m,
                     const char *name, struct tpl__error *err) {
  if (is_own_name(m, name)) return 0;
  return tpl__outdir_take(o, m, name, TPL_MAX_JSON_FILE, err);
}

/* Where MODEL's members are paths on this host (origin.h): every regular
 * file of its directory that is not part of its cache (tokenizer files
 * and the like), unchanged. */
static int take_listed(struct tpl__outdir_opts *o, const struct tpl__model *m,
                       struct tpl__error *err) {
  DIR *d = opendir(m->dir);
  struct dirent *e;
  int rc = 0;
  if (d == NULL)
    return tpl__fail(err, -errno, "%s: cannot list: %s", m->dir,
                     strerror(errno));
  while (rc == 0 && (e = readdir(d)) != NULL) {
    char *p = tpl__path_join(m->dir, e->d_name);
    int regular = p != NULL && !tpl__is_dir(p) && tpl__exists(p);
    free(p);
    if (regular) rc = take_copy(o, m, e->d_name, err);
  }
  closedir(d);
  return rc;
}

/* Where they are not (a URL: nothing lists them), the files the chat
 * config's "tokenizer_files" names: MLC's gen_config records there
 * every tokenizer file it copied beside the cache, and its runtime reads
 * those (mlc-llm python/mlc_llm/interface/gen_config.py, gen_config). */
static int take_named(struct tpl__outdir_opts *o, const struct tpl__model *m,
                      const json_t *cfg, struct tpl__error *err) {
  const json_t *files = json_object_get(cfg, "tokenizer_files"), *v;
  size_t i;
  int rc = 0;
  json_array_foreach(files, i, v) {
    const char *name = json_string_value(v);
    if (name == NULL)
      return tpl__fail(err, TPL_EFORMAT,
                       "mlc-chat-config.json: tokenizer_files[%zu]: expected "
                       "a file name, found another JSON type",
                       i);
    rc = tpl__model_check_file_name(name, json_string_length(v),
                                    "mlc-chat-config.json", "tokenizer_files",
                                    err);
    if (rc == 0) rc = take_copy(o, m, name, err);
    if (rc != 0) return rc;
  }
  return 0;
}

/* MODEL must be an MLC weight directory (its format's config is MLC's):
 * a local one is refused before the job (layout.c), a URL here. */
static int check_mlc_model(const struct tpl__outdir_opts *o,
                           const struct tpl__model *m, struct tpl__error *err) {
  const struct tpl__format *f = tpl__format_of(m->format);
  if (f != NULL && f->config_mlc) return 0;
  return tpl__fail(err, TPL_EUSAGE,
                   "--layout mlc writes MLC's presharded cache from an MLC "
                   "weight directory (tensor-cache.json or "
                   "ndarray-cache.json), and '%s' is none",
                   o->model);
}

/* Everything rank 0 writes besides the .bin files, read now, while the
 * model is open: at the sink's run it is closed. */
static int take_members(struct tpl__outdir_opts *o, const struct tpl__model *m,
                        struct tpl__error *err) {
  json_t *cfg = NULL;
  int rc = check_mlc_model(o, m, err);
  if (rc == 0) rc = take_chat_config(o, m, &cfg, err);
  if (rc == 0) rc = take_cache_json(o, m, err);
  if (rc == 0 && tpl__model_origin(m)->paths) rc = take_listed(o, m, err);
  if (rc == 0 && !tpl__model_origin(m)->paths) rc = take_named(o, m, cfg, err);
  json_decref(cfg);
  return rc;
}

static int writer_prepare(void *ctx, const struct tpl__model *m,
                          struct tpl__error *err) {
  struct tpl__outdir_opts *o = ctx;
  int rc = take_members(o, m, err);
  if (rc == 0) rc = tpl__outdir_check(o->dir, 0, err);
  if (rc == 0 && !o->force) rc = tpl__outdir_require_empty(o->dir, err);
  if (rc == 0 && o->force) rc = remove_old_cache(o->dir, err);
  return rc;
}

static int writer_check(void *ctx, uint32_t rank, struct tpl__error *err) {
  return tpl__outdir_check(((const struct tpl__outdir_opts *)ctx)->dir, rank,
                           err);
}

/* --- this rank's files --- */

static void temp_name(char *buf, size_t len, size_t f) {
  snprintf(buf, len, ".params_shard_%zu.bin.tmp", f);
}

static char *temp_path(const char *dir, size_t f) {
  char name[80];
  temp_name(name, sizeof(name), f);
  return tpl__path_join(dir, name);
}

static char *final_path(const char *dir, size_t f) {
  char name[64];
  tpl__mlc_file_name(f, name, sizeof(name));
  return tpl__path_join(dir, name);
}

/* The records of file f from this rank's store, to fd and into md5. */
static int write_records(struct writer *w, size_t f, int fd,
                         struct tpl__md5 *md5) {
  const struct tpl__mlc_file *fi = &w->layout.files[f];
  const struct tpl__job *job = w->l->job;
  for (size_t r = fi->first; r < fi->first + fi->count; r++) {
    const struct tpl__job_tensor *t = &job->tensors[w->layout.recs[r].tensor];
    const uint8_t *p = w->l->store->base + t->store_offset;
    int rc = tpl__outdir_write_beating(fd, p, (size_t)t->rank_bytes, w->c);
    if (rc != 0) return rc;
    tpl__md5_update(md5, p, (size_t)t->rank_bytes);
  }
  return 0;
}

/* File f under its temp name (guarded against signals until published
 * or removed, outdir.h), fsynced and closed into *out; its md5 into
 * `sum`.  `last`: the rank's last file, where the test hook
 * TPLOAD_TEST_PAUSE_AT=written pauses before the fsync (every temp of
 * the rank in place, one still open).  On failure the temp file is
 * gone. */
static int write_file(struct writer *w, size_t f, int last,
                      struct tpl__outdir_file *out, uint8_t sum[16],
                      struct tpl__error *err) {
  char *tmp = temp_path(w->o->dir, f), name[80];
  struct tpl__md5 md5;
  int rc, closed;
  if (tmp == NULL) return tpl__oom(err);
  tpl__md5_init(&md5);
  temp_name(name, sizeof(name), f);
  rc = tpl__outdir_create(w->o->dir, name, 0, out);
  if (rc == 0) rc = write_records(w, f, out->fd, &md5);
  if (rc == 0 && last) tpl__stall_test_pause("written", w->c->rank);
  if (rc == 0) rc = tpl__outdir_fsync_beating(out->fd, w->c);
  closed = tpl__outdir_close(out);
  if (rc == 0) rc = closed;
  if (rc != 0) {
    tpl__outdir_discard(w->o->dir, out);
    tpl__fail(err, rc == -ENOSPC ? -ENOSPC : rc, "%s: cannot write: %s", tmp,
              strerror(-rc));
  }
  tpl__md5_digest(&md5, sum);
  free(tmp);
  return rc;
}

/* Removes this rank's files: temps, and the published ones when asked. */
static void remove_own(struct writer *w, int published) {
  for (size_t f = 0; f < w->layout.nfiles; f++) {
    char *p;
    if (w->layout.files[f].owner != w->c->rank) continue;
    p = published ? final_path(w->o->dir, f) : temp_path(w->o->dir, f);
    if (p != NULL) unlink(p);
    if (p != NULL && !published) tpl__tmpguard_remove(p);
    free(p);
  }
}

static int write_own(struct writer *w, struct tpl__error *err) {
  size_t k = 0, last = SIZE_MAX;
  int rc = 0;
  for (size_t f = 0; f < w->layout.nfiles; f++)
    if (w->layout.files[f].owner == w->c->rank) last = f;
  for (size_t f = 0; rc == 0 && f < w->layout.nfiles; f++) {
    if (w->layout.files[f].owner != w->c->rank) continue;
    rc = write_file(w, f, f == last, &w->files[k], w->mine + 16 * k, err);
    k++;
  }
  if (rc != 0) remove_own(w, 0);
  return rc;
}

/* Renames this rank's temps into place (tpl__outdir_publish) and fsyncs
 * DIR. */
static int publish_own(struct writer *w, struct tpl__error *err) {
  size_t k = 0;
  int rc = 0;
  for (size_t f = 0; rc == 0 && f < w->layout.nfiles; f++) {
    char name[64], *fin;
    if (w->layout.files[f].owner != w->c->rank) continue;
    tpl__mlc_file_name(f, name, sizeof(name));
    fin = final_path(w->o->dir, f);
    if (fin == NULL)
      rc = tpl__oom(err);
    else if ((rc = tpl__outdir_publish(w->o->dir, &w->files[k], name)) != 0)
      tpl__fail(err, rc, "%s: cannot publish: %s", fin, strerror(-rc));
    k++;
    free(fin);
  }
  w->published = 1;
  if (rc == 0 && (rc = tpl__fsync_dir(w->o->dir)) != 0)
    tpl__fail(err, rc, "%s: cannot sync directory: %s", w->o->dir,
              strerror(-rc));
  return rc;
}

/* --- rank 0: the directory's other files and the cache JSON --- */

/* The members taken to be copied, unchanged. */
static int copy_others(const struct writer *w, struct tpl__error *err) {
  int rc = 0;
  for (size_t i = FIRST_COPY; rc == 0 && i < w->o->nmembers; i++) {
    const struct tpl__outdir_member *mb = &w->o->members[i];
    rc = tpl__write_file_atomic(w->o->dir, mb->name, mb->buf, mb->len, err);
  }
  return rc;
}

static int write_json(const char *dir, const char *name, json_t *v,
                      size_t indent, struct tpl__error *err) {
  char *text =
      v ? json_dumps(v, JSON_INDENT(indent) | JSON_PRESERVE_ORDER) : NULL;
  int rc = text ? tpl__write_file_atomic(dir, name, text, strlen(text), err)
                : tpl__oom(err);
  free(text);
  return rc;
}

/* Sets the grid's two counts in `o`; nonzero on ENOMEM. */
static int set_grid(json_t *o, const struct tpl__grid *g) {
  return json_object_set_new(o, "tensor_parallel_shards",
                             json_integer(g->tp)) != 0 ||
         json_object_set_new(o, "pipeline_parallel_stages",
                             json_integer(g->pp)) != 0;
}

/* mlc-chat-config.json with the job's grid, at the top level (what the
 * runtime reads) and in "model_config" where that holds the counts too
 * (as MLC's gen_config writes it). */
static int write_chat_config(const struct writer *w, struct tpl__error *err) {
  const struct tpl__grid *g = &w->l->job->grid;
  json_t *cfg = NULL, *mc;
  int rc = parse_taken(w->o, CHAT_CONFIG, &cfg, err);
  mc = json_object_get(cfg, "model_config");
  if (rc == 0 &&
      (set_grid(cfg, g) != 0 ||
       (json_object_get(mc, "tensor_parallel_shards") && set_grid(mc, g))))
    rc = tpl__oom(err);
  if (rc == 0) rc = write_json(w->o->dir, "mlc-chat-config.json", cfg, 2, err);
  json_decref(cfg);
  return rc;
}

/* The source cache's "metadata" (a new reference, or NULL). */
static json_t *source_metadata(const struct tpl__outdir_opts *o) {
  json_t *root = NULL, *meta = NULL;
  struct tpl__error ignored = {0};
  if (parse_taken(o, CACHE_JSON, &root, &ignored) == 0)
    meta = json_incref(json_object_get(root, "metadata"));
  json_decref(root);
  return meta;
}

/* Each file's md5 in hex, from what the owners reported. */
static char *md5_table(const struct writer *w) {
  char *hex = malloc(w->layout.nfiles * TPL_MD5_HEX + 1);
  size_t *next = calloc(w->c->world, sizeof(size_t));
  if (hex == NULL || next == NULL) {
    free(hex);
    free(next);
    return NULL;
  }
  for (size_t f = 0; f < w->layout.nfiles; f++) {
    uint32_t owner = w->layout.files[f].owner;
    const uint8_t *sum =
        w->all + ((size_t)owner * w->max_owned + next[owner]++) * 16;
    tpl__md5_hex(sum, hex + f * TPL_MD5_HEX);
  }
  free(next);
  return hex;
}

static int write_cache_json(struct writer *w, struct tpl__error *err) {
  char *md5 = md5_table(w);
  json_t *meta = source_metadata(w->o), *cache = NULL;
  int rc;
  if (md5 != NULL)
    cache = tpl__mlc_layout_json(w->l->job, &w->layout, md5, meta);
  rc = write_json(w->o->dir, w->o->members[CACHE_JSON].name, cache, 4, err);
  w->wrote_cache = rc == 0;
  json_decref(cache);
  json_decref(meta);
  free(md5);
  return rc;
}

static int finish_dir(struct writer *w, struct tpl__error *err) {
  int rc = copy_others(w, err);
  if (rc == 0) rc = write_chat_config(w, err);
  if (rc == 0) rc = write_cache_json(w, err);
  return rc;
}

static void unpublish_cache(const struct writer *w) {
  char *p = tpl__path_join(w->o->dir, w->o->members[CACHE_JSON].name);
  if (p != NULL) unlink(p);
  free(p);
}

/* --- the sequence --- */

static int alloc_sums(struct writer *w, struct tpl__error *err) {
  w->max_owned = tpl__mlc_max_owned(&w->layout, w->c->world);
  w->mine = calloc(w->max_owned + 1, 16);
  w->files = calloc(w->max_owned + 1, sizeof(*w->files));
  if (w->c->rank == 0)
    w->all = calloc((size_t)w->c->world * w->max_owned + 1, 16);
  if (w->mine == NULL || w->files == NULL ||
      (w->c->rank == 0 && w->all == NULL))
    return tpl__oom(err);
  return 0;
}

/* Write, agree, gather the sums: the long step, beating. */
static int write_step(struct writer *w, struct tpl__error *err) {
  const struct tpl__coord *c = w->c;
  int rc = tpl__mlc_layout_build(w->l->job, &w->layout);
  if (rc != 0) rc = tpl__fail(err, rc, "out of memory");
  if (rc == 0) rc = alloc_sums(w, err);
  if (c->beats_begin != NULL) c->beats_begin(c->ctx);
  tpl__stall_test_stop("write", c->rank);
  if (rc == 0) rc = write_own(w, err);
  rc = c->agree_after_beats != NULL ? c->agree_after_beats(c->ctx, rc, err)
                                    : c->agree(c->ctx, rc, err);
  if (rc == 0 && c->gather == NULL)
    rc = tpl__fail(err, TPL_EINTERNAL, "the md5 sums need a gather");
  else if (rc == 0)
    rc = c->gather(c->ctx, w->mine, w->max_owned * 16, w->all, err);
  return rc;
}

static int writer_run(void *ctx, const struct tpl__loaded *l,
                      const struct tpl__coord *c, struct tpl__error *err) {
  struct writer w = {.o = ctx, .l = l, .c = c};
  int rc, all = write_step(&w, err);
  all = c->agree(c->ctx, all, err);
  /* From the first rename to the cache JSON, SIGTERM, SIGINT and SIGHUP
   * wait (for the renames, the small files' copies and the JSON) so that
   * they never leave .bin files that no cache JSON vouches for.  Held,
   * not blocked: the kernel may give one to any thread (MPI's, the
   * fsync's), as in preshard.c. */
  tpl__tmpguard_hold();
  if (all == 0) all = c->agree(c->ctx, publish_own(&w, err), err);
  rc = all == 0 && c->rank == 0 ? finish_dir(&w, err) : 0;
  if (all == 0) all = c->agree(c->ctx, rc, err);
  if (all != 0) {
    if (w.wrote_cache) unpublish_cache(&w);
    remove_own(&w, w.published);
    remove_own(&w, 0);
  }
  tpl__tmpguard_release();
  tpl__mlc_layout_free(&w.layout);
  free(w.mine);
  free(w.all);
  free(w.files);
  return all;
}

struct tpl__sink tpl__mlc_writer_sink(struct tpl__outdir_opts *o) {
  struct tpl__sink s = {.prepare = writer_prepare,
                        .check = writer_check,
                        .run = writer_run,
                        .ctx = o};
  return s;
}
