/* experts.c - expert parallelism: the map of experts to the ranks of the
 * expert-parallel group, as vLLM's determine_expert_map builds it
 * (vllm-project/vllm vllm/model_executor/layers/fused_moe/
 * expert_map_manager.py at 54f88b20, where it moved from layer.py:
 * "linear" placement, the default; layer.py at c439a139 still gave the
 * remainder to the last rank), and the rewrite of a plan's strategies so
 * that each rank of the group holds its experts whole.  vLLM's
 * FusedMoEParallelConfig sets the experts' tp_size to 1 under EP, so an
 * expert's weights, and their quantization scales, are never cut; every
 * other tensor keeps the plan's cut.  The group is the tensor-parallel
 * group (group rank = shard t) or, with --ep-size T x D, every replica's
 * (group rank d x T + t: tpl__grid_ep_rank, topology.c).  A MoE layer
 * must name every expert: one missing is refused before any byte
 * moves. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "experts.h"
#include "jsonu.h"

struct tpl__ep_range tpl__ep_range(uint32_t experts, uint32_t size,
                                   uint32_t rank) {
  uint32_t base = experts / size, rem = experts % size;
  struct tpl__ep_range r;
  r.count = base + (rank < rem);
  r.start = rank * base + (rank < rem ? rank : rem);
  return r;
}

uint32_t tpl__ep_owner(uint32_t experts, uint32_t size, uint32_t expert) {
  uint32_t base = experts / size, rem = experts % size;
  uint32_t big = rem * (base + 1); /* the experts of the first rem ranks */
  if (expert < big) return expert / (base + 1);
  return rem + (expert - big) / base;
}

/* Where the expert id of `name` is: 1 with the digits at
 * [*start, *end) of name, 0 when it names none. */
static int expert_span(const char *name, size_t *start, size_t *end) {
  static const char key[] = ".experts.";
  for (const char *p = strstr(name, key); p != NULL; p = strstr(p, key)) {
    const char *e;
    p += sizeof(key) - 1;
    e = p;
    while (*e >= '0' && *e <= '9')
      e++;
    if (e > p && *e == '.' && e - p < 9) {
      *start = (size_t)(p - name);
      *end = (size_t)(e - name);
      return 1;
    }
  }
  return 0;
}

long tpl__expert_of(const char *name) {
  size_t start, end;
  if (!expert_span(name, &start, &end)) return -1;
  return strtol(name + start, NULL, 10);
}

/* The stacked [E, ...] tensors of the presets (preset_tables.c): MLC's
 * mixtral e1_e3 / e2, minicpm's, the moe_gate_up_proj / moe_down_proj of
 * qwen2_moe, qwen3_moe and deepseek; llama4's and gpt-oss's experts
 * (their MXFP4 blocks, scales and biases included).  Quantized params
 * follow their weight's name. */
static const char *const stacked[] = {
    "*.moe.e1_e3.*",
    "*.moe.e2.*",
    "*.mlp.e1_e3.*",
    "*.mlp.e2.*",
    "*.mlp.moe_gate_up_proj.*",
    "*.mlp.moe_down_proj.*",
    "*.feed_forward.experts.gate_up_proj*",
    "*.feed_forward.experts.down_proj*",
    "*.mlp.experts.gate_up_proj*",
    "*.mlp.experts.down_proj*",
};

static int is_stacked(const char *name) {
  for (size_t k = 0; k < ARRAY_SIZE(stacked); k++)
    if (tpl__glob_match(stacked[k], name)) return 1;
  return 0;
}

int tpl__ep_is_expert(const char *name) {
  return tpl__expert_of(name) >= 0 || is_stacked(name);
}

/* E from the config: the first positive count among the keys MoE configs
 * use, at the top, under model_config (mlc-chat-config.json) or under
 * text_config of either (multimodal models).  0 when none says. */
static uint32_t config_experts(const json_t *config, const char **key) {
  static const char *const keys[] = {"n_routed_experts", "num_local_experts",
                                     "num_experts", NULL};
  const json_t *mc = json_object_get(config, "model_config");
  const json_t *objs[] = {config, json_object_get(config, "text_config"), mc,
                          json_object_get(mc, "text_config")};
  for (size_t o = 0; o < ARRAY_SIZE(objs); o++)
    for (const char *const *k = keys; objs[o] != NULL && *k != NULL; k++) {
      uint64_t n = 0;
      if (tpl__json_u64(json_object_get(objs[o], *k), &n) == 0 && n > 0 &&
          n <= UINT32_MAX) {
        *key = *k;
        return (uint32_t)n;
      }
    }
  return 0;
}

static const char *model_name(const struct tpl__model *m) {
  return m->shown ? m->shown : m->dir;
}

/* How many tensors are one expert's or stacked ones. */
static size_t count_expert_tensors(const struct tpl__model *m) {
  size_t n = 0;
  for (size_t i = 0; i < m->ntensors; i++)
    n += tpl__ep_is_expert(m->tensors[i].name);
  return n;
}

static int check_count(const struct tpl__model *m, const json_t *config,
                       uint32_t size, uint32_t *experts,
                       struct tpl__error *err) {
  const char *key = NULL;
  uint32_t e;
  if (count_expert_tensors(m) == 0)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: --ep: the model has no experts (no tensor named "
                     "'.experts.<e>.' and no stacked expert tensor)",
                     model_name(m));
  e = config_experts(config, &key);
  if (e == 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: --ep needs the number of experts: expected "
                     "n_routed_experts, num_local_experts or num_experts in "
                     "the model's config, found none",
                     model_name(m));
  if (e < size)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: --ep: %s = %u experts is fewer than the %u ranks "
                     "of the expert-parallel group (every rank needs one)",
                     model_name(m), key, e, size);
  *experts = e;
  return 0;
}

static void make_whole(struct tpl__strategy *s, uint32_t owner) {
  s->kind = TPL_RULE_REPLICATE;
  s->func_name = NULL;
  memset(&s->spec, 0, sizeof(s->spec));
  s->ep = TPL_EP_WHOLE;
  s->owner = owner;
}

static int make_stacked(const struct tpl__tensor *t, uint32_t experts,
                        const struct tpl__grid *g, struct tpl__strategy *s,
                        struct tpl__error *err) {
  uint32_t size = g->ep;
  /* Not built: a stacked tensor is cut by the layouts of T shards, and
   * a group of T x D would need one cut per replica. */
  if (size > g->tp)
    return tpl__fail(err, TPL_EPLAN,
                     "tensor '%s': stacked experts over a group spanning the "
                     "replicas (--ep-size %u = --tp %u x %u) are not built "
                     "yet: use --ep-size %u",
                     t->name, size, g->tp, g->dp, g->tp);
  if (t->ndim < 1 || t->shape[0] != experts)
    return tpl__fail(err, TPL_EFORMAT,
                     "tensor '%s': a stacked expert tensor: expected dim 0 "
                     "of %u experts, found %llu",
                     t->name, experts,
                     t->ndim < 1 ? 0ull : (unsigned long long)t->shape[0]);
  if (experts % size != 0)
    return tpl__fail(err, TPL_EPLAN,
                     "tensor '%s': --ep cuts stacked experts along dim 0, "
                     "and %u experts do not divide by the %u ranks of the "
                     "expert-parallel group",
                     t->name, experts, size);
  s->kind = TPL_RULE_SHARD;
  s->func_name = "_shard_experts";
  memset(&s->spec, 0, sizeof(s->spec));
  s->ep = TPL_EP_STACKED;
  s->owner = 0;
  return 0;
}

/* One expert's tensor for check_complete: its name and where the id is. */
struct one_expert {
  const char *name;
  size_t start, end; /* the id's digits */
  uint32_t id;
};

/* Orders one-expert tensors by their name without the id: what comes
 * before it, then what comes after it.  0: the same projection of the
 * same layer, another expert. */
static int cmp_run(const struct one_expert *a, const struct one_expert *b) {
  size_t n = a->start < b->start ? a->start : b->start;
  int c = memcmp(a->name, b->name, n);
  if (c == 0 && a->start != b->start) c = a->start < b->start ? -1 : 1;
  if (c == 0) c = strcmp(a->name + a->end, b->name + b->end);
  return c;
}

/* qsort's order: cmp_run, then the expert id. */
static int cmp_expert(const void *pa, const void *pb) {
  const struct one_expert *a = pa, *b = pb;
  int c = cmp_run(a, b);
  if (c == 0 && a->id != b->id) c = a->id < b->id ? -1 : 1;
  return c;
}

/* Checks one run of tensors of model `m` that differ only by expert id
 * (v[0..n), sorted): every expert 0..experts-1 once. */
static int check_run(const struct tpl__model *m, const struct one_expert *v,
                     size_t n, uint32_t experts, struct tpl__error *err) {
  uint32_t k = 0;
  while (k < n && k < experts && v[k].id == k)
    k++;
  if (k < n && v[k].id < k)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expert %u is named twice in its "
                     "layer (--ep needs each expert once)",
                     model_name(m), v[k].name, v[k].id);
  if (k == experts) return 0;
  return tpl__fail(err, TPL_EFORMAT,
                   "%s: --ep: expert %u is missing: no tensor '%.*s%u%s' "
                   "(its layer has it for %zu of the config's %u experts)",
                   model_name(m), k, (int)v[0].start, v[0].name, k,
                   v[0].name + v[0].end, n, experts);
}

/* Refuses a MoE layer that lacks an expert: each one-expert tensor name
 * (`...experts.<e>.w1.weight`) must exist for every e < experts.  A
 * layer with no expert tensor at all (a dense one) is not checked. */
static int check_complete(const struct tpl__model *m, uint32_t experts,
                          struct tpl__error *err) {
  struct one_expert *v = calloc(m->ntensors + 1, sizeof(*v));
  size_t n = 0, i = 0;
  int rc = 0;
  if (v == NULL) return tpl__fail(err, -ENOMEM, "--ep: out of memory");
  for (size_t t = 0; t < m->ntensors; t++) {
    struct one_expert *o = &v[n];
    o->name = m->tensors[t].name;
    if (!expert_span(o->name, &o->start, &o->end)) continue;
    o->id = (uint32_t)strtoul(o->name + o->start, NULL, 10);
    n++;
  }
  qsort(v, n, sizeof(*v), cmp_expert);
  while (rc == 0 && i < n) {
    size_t j = i + 1;
    while (j < n && cmp_run(&v[i], &v[j]) == 0)
      j++;
    rc = check_run(m, &v[i], j - i, experts, err);
    i = j;
  }
  free(v);
  return rc;
}

int tpl__ep_apply(const struct tpl__model *m, const json_t *config,
                  const struct tpl__grid *grid, struct tpl__strategy *s,
                  uint32_t *experts, struct tpl__error *err) {
  uint32_t e = 0, size = grid->ep;
  int rc = check_count(m, config, size, &e, err);
  for (size_t i = 0; rc == 0 && i < m->ntensors; i++) {
    const struct tpl__tensor *t = &m->tensors[i];
    long x = tpl__expert_of(t->name);
    if (x >= (long)e)
      rc = tpl__fail(err, TPL_EFORMAT,
                     "tensor '%s' is expert %ld: expected experts 0..%u of "
                     "the config's %u",
                     t->name, x, e - 1, e);
    else if (x >= 0)
      make_whole(&s[i], tpl__ep_owner(e, size, (uint32_t)x));
    else if (is_stacked(t->name))
      rc = make_stacked(t, e, grid, &s[i], err);
  }
  if (rc == 0) rc = check_complete(m, e, err);
  if (rc == 0) *experts = e;
  return rc;
}
