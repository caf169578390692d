/* layout.c - the table of output layouts (layout.h): rank (preshard.c's
 * rank{R}.safetensors + shard-info.json, checked by verify.c) and mlc
 * (mlc_writer.c's presharded MLC tensor cache, checked by verify_mlc.c),
 * and the one --layout parser `preshard` and `verify` share.  A new
 * layout is a sink (copy mlc_writer.c, over outdir.h), a verifier, one
 * row here and its name in TPL_LAYOUT_NAMES (test_layout holds the
 * two). */
#include <stdio.h>
#include <string.h>

#include "layout.h"
#include "mlc_writer.h"
#include "origin.h"
#include "preshard.h"
#include "scope.h"
#include "verify_mlc.h"

/* --- rank --- */

static int rank_accepts(const struct tpl__layout_use *u,
                        struct tpl__error *err) {
  return 0;
}

static void rank_wrote(char *buf, size_t len, const char *dir, uint32_t world) {
  snprintf(buf, len, "wrote %u rank files and shard-info.json to %s", world,
           dir);
}

/* --- mlc --- */

/* MLC's runtime cuts every expert itself, so an expert-parallel output
 * is none it loads.  The writer takes MODEL's sidecar files (its config,
 * the cache JSON's metadata, the tokenizer files) through its origin,
 * from an MLC weight directory: a local MODEL that is none is refused
 * here, before the job; one at a URL once it is open (mlc_writer.c). */
static int mlc_accepts(const struct tpl__layout_use *u,
                       struct tpl__error *err) {
  if (u->ep && u->verb == TPL_LAYOUT_WRITE)
    return tpl__fail(err, TPL_EUSAGE,
                     "%s: --layout mlc writes MLC's cache, whose runtime "
                     "cuts every expert; --ep is for --layout rank",
                     "preshard");
  if (u->ep)
    return tpl__fail(err, TPL_EUSAGE, "--ep checks --layout rank outputs");
  if (u->verb == TPL_LAYOUT_WRITE && tpl__origin_for(u->model)->paths &&
      !tpl__mlc_writer_is_mlc_dir(u->model))
    return tpl__fail(err, TPL_EUSAGE,
                     "--layout mlc writes MLC's presharded cache from an MLC "
                     "weight directory (tensor-cache.json or "
                     "ndarray-cache.json), and '%s' is none",
                     u->model);
  return 0;
}

static void mlc_wrote(char *buf, size_t len, const char *dir, uint32_t world) {
  snprintf(buf, len,
           "wrote MLC's presharded cache to %s (load it with "
           "MLC_INTERNAL_PRESHARD_NUM set)",
           dir);
}

/* --- the table --- */

static const struct tpl__output_layout layouts[] = {
    {
        .name = "rank",
        .sink = tpl__preshard_sink,
        .verify = tpl__verify,
        .accepts = rank_accepts,
        .wrote = rank_wrote,
        .members = "ranks",
        .checked = "tensor shards",
    },
    {
        .name = "mlc",
        .sink = tpl__mlc_writer_sink,
        .verify = tpl__verify_mlc,
        .accepts = mlc_accepts,
        .wrote = mlc_wrote,
        .unscaled_bias = 1, /* MLC's compiled model divides them itself */
        .members = "workers",
        .checked = "records and every md5sum",
    },
};

const struct tpl__output_layout *tpl__layout_at(size_t i) {
  return i < ARRAY_SIZE(layouts) ? &layouts[i] : NULL;
}

/* "rank or mlc" (", " between the others): the names a refusal lists. */
static void list_names(char *buf, size_t len) {
  size_t at = 0, n = ARRAY_SIZE(layouts);
  buf[0] = '\0';
  for (size_t i = 0; i < n && at < len; i++) {
    const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
    int w = snprintf(buf + at, len - at, "%s%s", sep, layouts[i].name);
    at += w > 0 ? (size_t)w : 0;
  }
}

/* 0 when layout l can hold u's bias family, else TPL_EUSAGE: one that
 * writes its biases unscaled for its engine holds them whole, which
 * --bias-policy mlc (that engine's family) and whole name, vllm not. */
static int bias_accepts(const struct tpl__output_layout *l,
                        const struct tpl__layout_use *u,
                        struct tpl__error *err) {
  if (!l->unscaled_bias || u->bias_family < 0 ||
      u->bias_family == TPL_BIASF_MLC || u->bias_family == TPL_BIASF_WHOLE)
    return 0;
  return tpl__fail(err, TPL_EUSAGE,
                   "--layout %s writes row-parallel biases whole (its "
                   "engine divides them): --bias-policy %s cannot hold; "
                   "use mlc or whole",
                   l->name, tpl__bias_family_name(u->bias_family));
}

int tpl__layout_parse(const char *name, const struct tpl__layout_use *u,
                      const struct tpl__output_layout **out,
                      struct tpl__error *err) {
  char names[128];
  int rc;
  for (size_t i = 0; i < ARRAY_SIZE(layouts); i++) {
    if (name != NULL && strcmp(name, layouts[i].name) != 0) continue;
    rc = layouts[i].accepts(u, err);
    if (rc == 0) rc = bias_accepts(&layouts[i], u, err);
    if (rc == 0) *out = &layouts[i];
    return rc;
  }
  list_names(names, sizeof(names));
  return tpl__fail(err, TPL_EUSAGE, "--layout expects %s, got '%s'", names,
                   name);
}
