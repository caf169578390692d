/* format.c - the checkpoint formats (format.h): a single safetensors
 * file, a sharded index (model.safetensors.index.json and its files), an
 * MLC weight directory (tensor-cache.json or ndarray-cache.json and its
 * shard files).  Each load is written once, over the model's origin
 * (origin.h): the JSON from the origin's get, the member files through
 * its st_member or probe; the parsers (fmt_*.c) only parse.  A new
 * format is one load and one row here (a single-file one: its row's
 * file_suffix and load_file too, which tpl__format_for_file gives the
 * openers of a MODEL that is one file). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_files.h"
#include "fmt_mlc_cache.h"
#include "fmt_st_index.h"
#include "format.h"
#include "mlc_shards.h"
#include "origin.h"
#include "reshard.h"

/* The JSON member `member` of m's directory, whole, and its name as
 * messages give it (*what, malloc'd). */
static int get_json(struct tpl__model *m, const char *member, char **what,
                    char **buf, size_t *len, struct tpl__error *err) {
  const struct tpl__origin *o = tpl__model_origin(m);
  int rc;
  *what = o->shown(m, member);
  if (*what == NULL) return tpl__oom(err);
  rc = o->get(m, member, TPL_MAX_JSON_FILE, buf, len, err);
  if (rc == 0) return 0;
  free(*what);
  *what = NULL;
  return rc;
}

static int load_safetensors(struct tpl__model *m, const char *member,
                            int presharded, struct tpl__error *err) {
  return tpl__model_origin(m)->st_member(m, member, NULL, NULL, err);
}

/* Each member file once, in sorted name order, then the check that the
 * map and the files agree. */
static int load_index(struct tpl__model *m, const char *member, int presharded,
                      struct tpl__error *err) {
  const struct tpl__origin *o = tpl__model_origin(m);
  struct tpl__st_index *ix = NULL;
  char *what = NULL, *buf = NULL;
  size_t len = 0;
  int rc = get_json(m, member, &what, &buf, &len, err);
  if (rc == 0) rc = tpl__st_index_parse(buf, len, what, &ix, err);
  for (size_t i = 0; rc == 0 && i < tpl__st_index_nfiles(ix); i++) {
    const char *first, *fname = tpl__st_index_file(ix, i, &first);
    char ctx[TPL_MAX_NAME + 16];
    snprintf(ctx, sizeof(ctx), "tensor '%s'", first);
    rc = o->st_member(m, fname, what, ctx, err);
  }
  if (rc == 0) rc = tpl__st_index_check(ix, m, err);
  tpl__st_index_free(ix);
  free(buf);
  free(what);
  return rc;
}

/* A cache presharded by MLC (or tpload's `--layout mlc`), its
 * "X_shard-K" records read as they are (`as_is`), or else its format
 * the row below, its cut to come from the plan (mlc_cut.h). */
static void mark_sharded(struct tpl__model *m, int as_is) {
  for (size_t i = 0; !as_is && i < m->ntensors; i++) {
    size_t len;
    uint32_t k;
    if (tpl__mlc_shard_name(m->tensors[i].name, &len, &k)) {
      m->format = TPL_FMT_MLC_SHARDED;
      return;
    }
  }
}

/* Every record, then each shard file found with its "nbytes". */
static int load_mlc(struct tpl__model *m, const char *member, int presharded,
                    struct tpl__error *err) {
  char *what = NULL, *buf = NULL;
  size_t len = 0;
  int rc = get_json(m, member, &what, &buf, &len, err);
  if (rc == 0) rc = tpl__mlc_parse_flags(buf, len, what, 1, m, err);
  if (rc == 0) mark_sharded(m, presharded);
  if (rc == 0) rc = tpl__model_origin(m)->probe(m, 0, what, err);
  if (rc == 0) rc = tpl__mlc_check_nonempty(m, what, err);
  free(buf);
  free(what);
  return rc;
}

/* The rank files held to shard-info.json, the full tensors rebuilt from
 * them (reshard.h). */
static int load_presharded(struct tpl__model *m, const char *member,
                           int presharded, struct tpl__error *err) {
  return tpl__reshard_load(m, member, err);
}

/* "tpload rank layout, 4 ranks" */
static void presharded_detail(const struct tpl__model *m, char *buf,
                              size_t len) {
  const struct tpl__si *si = tpl__reshard_info(tpl__reshard_of(m));
  snprintf(buf, len, "tpload rank layout, %u rank%s", si->world,
           si->world == 1 ? "" : "s");
}

static const struct tpl__format presharded = {
    .id = TPL_FMT_PRESHARDED,
    .name = "presharded",
    .what = "a presharded directory (tpload's rank layout)",
    .probes = {"shard-info.json"},
    .config = "config.json",
    .load = load_presharded,
    .detail = presharded_detail,
};

/* The same, cut from an MLC weight directory: its config is the
 * mlc-chat-config.json preshard copied.  Never probed: the load chooses
 * it (reshard.c). */
static const struct tpl__format presharded_mlc = {
    .id = TPL_FMT_PRESHARDED_MLC,
    .name = "presharded",
    .what = "a presharded directory (tpload's rank layout) of an MLC model",
    .probes = {NULL},
    .config = "mlc-chat-config.json",
    .config_mlc = 1,
    .load = load_presharded,
    .detail = presharded_detail,
};

/* "MLC cache, 4 shards" (once its cut is made: mlc_cut.h). */
static void mlc_sharded_detail(const struct tpl__model *m, char *buf,
                               size_t len) {
  const struct tpl__reshard *rs = tpl__reshard_of(m);
  if (rs == NULL) {
    snprintf(buf, len, "MLC cache");
    return;
  }
  snprintf(buf, len, "MLC cache, %u shard%s", tpl__reshard_info(rs)->tp,
           tpl__reshard_info(rs)->tp == 1 ? "" : "s");
}

/* An MLC cache of "X_shard-K" records as the full tensors they were cut
 * from: load_mlc chooses it, the plan gives the cut (mlc_cut.h). */
static const struct tpl__format mlc_sharded = {
    .id = TPL_FMT_MLC_SHARDED,
    .name = "mlc-presharded",
    .what = "an MLC tensor cache presharded (X_shard-K records)",
    .probes = {NULL},
    .config = "mlc-chat-config.json",
    .config_mlc = 1,
    .md5 = 1, /* its file records', as an MLC directory's */
    .load = load_mlc,
    .detail = mlc_sharded_detail,
};

static const struct tpl__format st_index = {
    .id = TPL_FMT_ST_INDEX,
    .name = "safetensors-index",
    .what = "a sharded safetensors checkpoint (index JSON)",
    .probes = {"model.safetensors.index.json"},
    .config = "config.json",
    .load = load_index,
};

static const struct tpl__format mlc = {
    .id = TPL_FMT_MLC,
    .name = "mlc",
    .what = "an MLC weight directory",
    .probes = {"tensor-cache.json", "ndarray-cache.json"},
    .config = "mlc-chat-config.json",
    .config_mlc = 1,
    .md5 = 1,
    .load = load_mlc,
};

static const struct tpl__format safetensors = {
    .id = TPL_FMT_SAFETENSORS,
    .name = "safetensors",
    .what = "a safetensors file",
    .probes = {"model.safetensors"},
    .config = "config.json",
    .load = load_safetensors,
    .file_suffix = ".safetensors",
    .load_file = tpl__st_load,
};

const struct tpl__format *const tpl__formats[] = {
    &presharded, &st_index, &mlc, &safetensors, &presharded_mlc, &mlc_sharded};
const size_t tpl__nformats = ARRAY_SIZE(tpl__formats);

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

const struct tpl__format *tpl__format_for_file(const char *name) {
  const struct tpl__format *first = NULL;
  for (size_t i = 0; i < tpl__nformats; i++) {
    const char *suffix = tpl__formats[i]->file_suffix;
    if (suffix == NULL) continue;
    if (ends_with(name, suffix)) return tpl__formats[i];
    if (first == NULL) first = tpl__formats[i];
  }
  return first;
}

const struct tpl__format *tpl__format_of(int id) {
  for (size_t i = 0; i < tpl__nformats; i++)
    if (tpl__formats[i]->id == id) return tpl__formats[i];
  return NULL;
}
