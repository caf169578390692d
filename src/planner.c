/* planner.c - turns --plan into a plan for one model, on top of plan
 * files (plan.c) and presets (presets.c): "auto" detects the preset from
 * the model's config (config.json, or mlc-chat-config.json for an MLC
 * weight directory), a preset name builds that preset from the same
 * config, anything else is a plan file.  The config is read once and
 * also gives the plan its quantization facts (quant.c) and the preset
 * check the model's MoE layout.  This is the only place a plan's inputs
 * are read (from disk, or a MODEL URL's server: tpl__model_read_member);
 * plans, presets and quantization only parse. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "experts.h"
#include "fileio.h"
#include "format.h"
#include "interleaved.h"
#include "jsonu.h"
#include "origin.h"
#include "planner.h"
#include "presets.h"

/* The model's config file, read at most once. */
struct config {
  /* m->dir/config.json or mlc-chat-config.json; owned; NULL until
   * reading it was tried. */
  char *path;
  json_t *json; /* owned; NULL until read successfully */
  int mlc;      /* an MLC weight directory's mlc-chat-config.json */
};

static void config_clear(struct config *c) {
  free(c->path);
  json_decref(c->json);
}

/* Whether m's format keeps its config in MLC's mlc-chat-config.json
 * (its row's config_mlc; a model built by hand has an HF config). */
static int config_is_mlc(const struct tpl__model *m) {
  const struct tpl__format *f = tpl__format_of(m->format);
  return f != NULL && f->config_mlc;
}

/* Reads and parses the config; returns 0, -ENOENT when there is none, or
 * another code with err naming the file. */
static int config_read(const struct tpl__model *m, struct config *c,
                       struct tpl__error *err) {
  char *buf = NULL;
  size_t len = 0;
  int rc;
  const struct tpl__format *f = tpl__format_of(m->format);
  const char *name = f != NULL ? f->config : "config.json";
  c->mlc = config_is_mlc(m);
  c->path = tpl__path_join(m->dir, name);
  if (c->path == NULL) return tpl__oom(err);
  rc = tpl__model_read_member(m, name, TPL_MAX_JSON_FILE, &buf, &len, err);
  if (rc == 0) rc = tpl__json_parse_object(buf, len, c->path, &c->json, err);
  free(buf);
  return rc;
}

/* Preset `name`, or the one the config asks for when `name` is NULL.  A
 * preset needs the config for the model's sizes: `why` ("preset 'x'",
 * "--plan auto") says who in the message for a missing one. */
static int build_preset(const char *name, const struct tpl__model *m,
                        uint32_t nshards, int ep, struct config *c,
                        struct tpl__plan **out, struct tpl__error *err) {
  char why[128];
  int rc = config_read(m, c, err);
  if (name != NULL)
    snprintf(why, sizeof(why), "preset '%s'", name);
  else
    snprintf(why, sizeof(why), "--plan auto");
  if (rc == -ENOENT)
    return tpl__fail(err, rc,
                     "%s: not found; %s needs it for the model's sizes "
                     "(pass --plan FILE to use a plan file instead)",
                     c->path, why);
  if (rc == 0 && name == NULL)
    rc = tpl__preset_detect(c->json, c->mlc, c->path, &name, err);
  if (rc == 0)
    rc = tpl__preset_from_config(name, c->mlc, c->json, c->path, nshards, ep,
                                 out, err);
  return rc;
}

static int load_plan_file(const char *path, struct tpl__plan **out,
                          struct tpl__error *err) {
  char *buf = NULL;
  size_t len = 0;
  int rc = tpl__read_file(path, TPL_MAX_JSON_FILE, &buf, &len, err);
  if (rc == -ENOENT)
    return tpl__fail(err, rc,
                     "%s: plan file not found (expected a plan file, 'auto' "
                     "or a preset: %s)",
                     path, tpl__preset_names());
  if (rc != 0) return rc;
  rc = tpl__plan_parse(buf, len, path, out, err);
  free(buf);
  return rc;
}

/* The quantization facts of the config into the plan's `q` (which holds
 * the defaults).  A missing config, or any error in an HF config.json,
 * leaves the defaults: a plan file must not start
 * failing on a config it never needed (an HF config only refines fp8
 * block sizes).  MLC's scheme decides how quantized params are cut, so
 * the errors of its config stand. */
static int read_quant(const struct tpl__model *m, struct config *c,
                      struct tpl__quant_info *q, struct tpl__error *err) {
  int rc = c->path != NULL ? 0 : config_read(m, c, err);
  if (rc == 0) rc = tpl__quant_info_parse(c->json, c->mlc, c->path, q, err);
  if (rc == -ENOENT || !c->mlc) return 0;
  return rc;
}

/* ModelOpt's older exports keep their scheme in hf_quant_config.json
 * beside config.json ({"quantization": {"quant_algo": "NVFP4", ...}}).
 * Read where a missing member is told apart from a refused one (the
 * origin's `paths`): an object store may answer a missing key with 403.  Sets
 * the plan's method and scheme when the file is there. */
static int read_hf_quant_config(const struct tpl__model *m, struct tpl__plan *p,
                                struct tpl__error *err) {
  char *buf = NULL;
  size_t len = 0;
  json_t *j = NULL;
  int rc;
  if (!tpl__model_origin(m)->paths) return 0;
  rc = tpl__model_read_member(m, "hf_quant_config.json", TPL_MAX_JSON_FILE,
                              &buf, &len, err);
  if (rc == -ENOENT) return 0;
  if (rc == 0)
    rc = tpl__json_parse_object(buf, len, "hf_quant_config.json", &j, err);
  if (rc == 0) {
    snprintf(p->quant.method, sizeof(p->quant.method), "modelopt");
    tpl__ct_parse_modelopt(json_object_get(j, "quantization"), &p->ct);
  }
  json_decref(j);
  free(buf);
  return rc;
}

/* The per-param scheme of an HF checkpoint (quant_ct.h): compressed-
 * tensors' config_groups, or ModelOpt's quant_algo (in config.json, or
 * hf_quant_config.json for older exports). */
static int read_param_scheme(const struct tpl__model *m, const struct config *c,
                             struct tpl__plan *p, struct tpl__error *err) {
  const json_t *qc = json_object_get(c->json, "quantization_config");
  if (c->mlc) return 0;
  if (strcmp(p->quant.method, "compressed-tensors") == 0)
    tpl__ct_parse(qc, &p->ct);
  else if (strcmp(p->quant.method, "modelopt") == 0)
    tpl__ct_parse_modelopt(qc, &p->ct);
  else if (p->quant.method[0] == '\0')
    return read_hf_quant_config(m, p, err);
  return 0;
}

int tpl__plan_quant(const struct tpl__model *m, struct tpl__quant_info *out,
                    struct tpl__error *err) {
  struct config c = {0};
  struct tpl__plan *p = tpl__plan_new("quantization");
  int rc = p != NULL ? read_quant(m, &c, &p->quant, err) : tpl__oom(err);
  if (rc == 0) rc = read_param_scheme(m, &c, p, err);
  if (rc == 0) *out = p->quant;
  tpl__plan_free(p);
  config_clear(&c);
  return rc;
}

static int resolve(const char *arg, const struct tpl__model *m,
                   uint32_t nshards, int ep, struct config *c,
                   struct tpl__plan **out, struct tpl__error *err) {
  struct tpl__plan *p = NULL;
  int rc;
  if (arg == NULL || strcmp(arg, "auto") == 0)
    rc = build_preset(NULL, m, nshards, ep, c, &p, err);
  else if (tpl__preset_known(arg))
    rc = build_preset(arg, m, nshards, ep, c, &p, err);
  else
    rc = load_plan_file(arg, &p, err);
  if (rc == 0 && ep) p->ep_expert = tpl__ep_is_expert;
  if (rc == 0) rc = read_quant(m, c, &p->quant, err);
  if (rc == 0) rc = read_param_scheme(m, c, p, err);
  if (rc == 0) rc = tpl__quant_check_method(&p->quant, c->path, err);
  if (rc == 0) rc = tpl__ct_check(&p->ct, c->path, err);
  if (rc == 0) rc = tpl__quant_check_tp(&p->quant, nshards, m->dir, err);
  if (rc != 0) {
    tpl__plan_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

/* The layer count and tied flag MLC's stage assignment needs, from the
 * config already read: config.json has them at the top, MLC's
 * mlc-chat-config.json under "model_config" (gen_config.py writes the
 * model's config dataclass there, python/mlc_llm/interface/gen_config.py
 * in mlc-ai/mlc-llm). */
/* A num_hidden_layers that is there but is no layer count (negative, a
 * string, 0, 2^40): the model's bad data (65), named with its value. */
static int layers_invalid(const char *where, const char *key, const json_t *v,
                          struct tpl__error *err) {
  char *shown = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
  int rc = tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: invalid value %.64s (expected a whole number "
                     "of layers, 1 to %u)",
                     where, key, shown ? shown : "(unprintable)", UINT32_MAX);
  free(shown);
  return rc;
}

/* DeepSeek-V3's multi-token-prediction layers after the decoder's
 * (num_nextn_predict_layers, HF configs only; 0 when absent or bad: the
 * preset check names a bad value). */
static uint32_t read_mtp_layers(const json_t *cfg) {
  uint64_t n = 0;
  if (tpl__json_u64(json_object_get(cfg, "num_nextn_predict_layers"), &n) !=
          0 ||
      n > UINT32_MAX)
    return 0;
  return (uint32_t)n;
}

static int read_layers(const struct config *c, uint32_t pp, uint32_t *layers,
                       uint32_t *mtp, int *tied, struct tpl__error *err) {
  const json_t *cfg = c->json, *v = NULL;
  const char *where = c->path ? c->path : "the model's config";
  const char *key =
      c->mlc ? "model_config.num_hidden_layers" : "num_hidden_layers";
  uint64_t n = 0;
  if (cfg != NULL && c->mlc) cfg = json_object_get(cfg, "model_config");
  if (cfg != NULL) v = json_object_get(cfg, "num_hidden_layers");
  if (v == NULL)
    return tpl__fail(err, TPL_EUSAGE,
                     "--pp %u needs the model's layer count: %s has no %s", pp,
                     where, key);
  if (tpl__json_u64(v, &n) != 0 || n == 0 || n > UINT32_MAX)
    return layers_invalid(where, key, v, err);
  *layers = (uint32_t)n;
  *mtp = c->mlc ? 0 : read_mtp_layers(cfg);
  *tied = json_is_true(json_object_get(cfg, "tie_word_embeddings"));
  return 0;
}

/* Every tensor's stages (MLC's _set_pp, see topology.c). */
static int assign_stages(const struct tpl__model *m, const struct config *c,
                         uint32_t pp, struct tpl__stages *out,
                         struct tpl__error *err) {
  uint32_t layers = 1, mtp = 0;
  int tied = 0, rc = 0;
  if (pp > 1) rc = read_layers(c, pp, &layers, &mtp, &tied, err);
  if (rc == 0 && pp > 1) rc = tpl__stage_check(layers, pp, err);
  for (size_t i = 0; rc == 0 && i < m->ntensors; i++)
    rc = tpl__tensor_stages(m->tensors[i].name, layers, mtp, pp, tied, err,
                            &out[i]);
  return rc;
}

int tpl__plan_skip_mtp(struct tpl__model *m, struct tpl__error *err) {
  struct config c = {0};
  uint64_t layers = 0;
  int rc = 0;
  /* MTP layers are an HF config's (read_mtp_layers) */
  if (!config_is_mlc(m)) rc = config_read(m, &c, err);
  if (rc == -ENOENT) rc = 0;
  if (rc == 0 && c.json != NULL && read_mtp_layers(c.json) > 0 &&
      tpl__json_u64(json_object_get(c.json, "num_hidden_layers"), &layers) ==
          0 &&
      layers > 0 && layers <= UINT32_MAX)
    tpl__model_drop_layers(m, (uint32_t)layers);
  config_clear(&c);
  return rc;
}

int tpl__plan_resolve(const char *arg, const struct tpl__model *m,
                      uint32_t nshards, struct tpl__plan **out,
                      struct tpl__error *err) {
  struct config c = {0};
  int rc = resolve(arg, m, nshards, 0, &c, out, err);
  config_clear(&c);
  return rc;
}

int tpl__plan_for_grid(const char *arg, const struct tpl__model *m,
                       const struct tpl__grid *grid, struct tpl__plan **plan,
                       struct tpl__strategy **strategies,
                       struct tpl__stages **stages, struct tpl__error *err) {
  struct config c = {0};
  struct tpl__plan *p = NULL;
  struct tpl__strategy *s = NULL;
  struct tpl__stages *g = NULL;
  size_t n = m->ntensors ? m->ntensors : 1;
  int rc = resolve(arg, m, grid->tp, grid->ep > 0, &c, &p, err);
  if (rc == 0) {
    s = calloc(n, sizeof(*s));
    g = calloc(n, sizeof(*g));
    if (s == NULL || g == NULL) rc = tpl__oom(err);
  }
  if (rc == 0) rc = tpl__plan_apply(p, m, grid->tp, s, err);
  if (rc == 0) rc = tpl__preset_check(p, m, s, c.json, err);
  if (rc == 0)
    rc = tpl__interleaved_check(p, m, s, grid->tp, c.json, c.mlc, err);
  if (rc == 0 && grid->ep > 0)
    rc = tpl__ep_apply(p, m, c.json, grid, s, &p->experts, err);
  if (rc == 0) rc = assign_stages(m, &c, grid->pp, g, err);
  config_clear(&c);
  if (rc != 0) {
    free(s);
    free(g);
    tpl__plan_free(p);
    return rc;
  }
  *plan = p;
  *strategies = s;
  *stages = g;
  return 0;
}
