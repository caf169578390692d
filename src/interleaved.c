/* interleaved.c - which fused tensors an architecture stores with the
 * rows of its parts alternating, and the check that no plan cuts them as
 * consecutive segments.  A segs rule assumes [gate; up]; gpt-oss stores
 * gate and up rows in turn, so segs would hand every rank the wrong
 * rows and still exit 0.  The right cut is contiguous, in whole groups
 * of the alternating rows (a plan file says `"interleave": K`). */
#include <stdio.h>
#include <string.h>

#include "interleaved.h"

struct interleaved {
  const char *arch;  /* config.json model_type */
  const char *match; /* glob over the tensor's name */
  uint32_t group;    /* rows per group a slice must keep whole; 0 unchecked */
  const char *why;
  const char *instead;
};

static const struct interleaved table[] = {
    /* transformers' GptOssExperts applies gate_up[..., ::2] and [1::2];
     * vLLM's gpt_oss.py slices rows [2 * start, 2 * end) per rank. */
    {"gpt_oss", "*.mlp.experts.gate_up_proj*", 2,
     "gpt-oss interleaves gate and up rows (gate even, up odd)",
     "\"interleave\": 2 without segs"},
    /* transformers' GPTNeoXAttention views query_key_value as
     * [heads, 3 * head_dim] (MLC's gpt_neox loader de-interleaves it into
     * [q; k; v], hence HF checkpoints only). */
    {"gpt_neox", "*.attention.query_key_value.*", 0,
     "GPT-NeoX fuses q, k and v per head ([heads, 3, head_dim])",
     "a cut along dim 0 without segs (whole heads per rank)"},
};

static const char *model_type(const json_t *config) {
  const json_t *v = json_object_get(config, "model_type");
  return json_is_string(v) ? json_string_value(v) : NULL;
}

static int check_one(const struct tpl__plan *p, const struct interleaved *e,
                     const struct tpl__tensor *t, const struct tpl__strategy *s,
                     uint32_t nshards, struct tpl__error *err) {
  uint64_t slice;
  if (s->spec.nsegs > 0)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: tensor '%s': expected no segs on it, found %zu "
                     "(rule %d): %s, so segs would give every rank the "
                     "wrong rows; write %s",
                     p->source, t->name, s->spec.nsegs, s->rule, e->why,
                     e->instead);
  slice = t->shape[s->spec.dim] / nshards;
  if (e->group == 0 || slice % e->group == 0) return 0;
  return tpl__fail(err, TPL_EINDIVISIBLE,
                   "%s: tensor '%s': expected each of the %u shards' %llu "
                   "rows along dim %d to be whole groups of %u (%s), found "
                   "%llu left over",
                   p->source, t->name, nshards, (unsigned long long)slice,
                   s->spec.dim, e->group, e->why,
                   (unsigned long long)(slice % e->group));
}

int tpl__interleaved_check(const struct tpl__plan *p,
                           const struct tpl__model *m,
                           const struct tpl__strategy *s, uint32_t nshards,
                           const json_t *config, int mlc,
                           struct tpl__error *err) {
  const char *arch = model_type(config);
  if (arch == NULL || mlc) return 0;
  for (size_t k = 0; k < ARRAY_SIZE(table); k++) {
    if (strcmp(table[k].arch, arch) != 0) continue;
    for (size_t i = 0; i < m->ntensors; i++) {
      int rc;
      if (s[i].kind != TPL_RULE_SHARD ||
          !tpl__glob_match(table[k].match, m->tensors[i].name))
        continue;
      rc = check_one(p, &table[k], &m->tensors[i], &s[i], nshards, err);
      if (rc != 0) return rc;
    }
  }
  return 0;
}
