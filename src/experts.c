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

static int check_count(const struct tpl__model *m, const json_t *config,
                       size_t nexpert, uint32_t size, uint32_t *experts,
                       struct tpl__error *err) {
  const char *key = NULL;
  uint32_t e;
  if (nexpert == 0)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: --ep: the model has no experts (no tensor named "
                     "'.experts.<e>.', no stacked expert tensor and no "
                     "plan rule with \"expert\")",
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

/* What --ep makes of one tensor: its kind (enum tpl__ep_kind) and, for
 * one expert's, its name, where the id is and the id. */
struct one_expert {
  const char *name;
  size_t start, end; /* the id's digits */
  uint32_t id;
  int kind;
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
 * (`...experts.<e>.w1.weight`, or what an "expert" rule matches) must
 * exist for every e < experts.  A layer with no expert tensor at all (a
 * dense one) is not checked.  Sorts a copy of the one-expert entries of
 * `c` (one per tensor). */
static int check_complete(const struct tpl__model *m,
                          const struct one_expert *c, uint32_t experts,
                          struct tpl__error *err) {
  struct one_expert *v = calloc(m->ntensors + 1, sizeof(*v));
  size_t n = 0, i = 0;
  int rc = 0;
  if (v == NULL) return tpl__fail(err, -ENOMEM, "--ep: out of memory");
  for (size_t t = 0; t < m->ntensors; t++)
    if (c[t].kind == TPL_EP_WHOLE) v[n++] = c[t];
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

/* Where the digits are that the last '*' of glob `pattern` stands for
 * in `name` (which the pattern matches): 1 with them at [*start, *end),
 * the longest such run of at most 9 digits; 0 when that star cannot
 * stand for digits alone. */
static int star_digits(const char *pattern, const char *name, size_t *start,
                       size_t *end) {
  const char *star = strrchr(pattern, '*');
  size_t hlen = star ? (size_t)(star - pattern) : 0, len = strlen(name);
  char head[TPL_MAX_NAME + 1], pre[TPL_MAX_NAME + 1];
  if (star == NULL || hlen >= sizeof(head) || len >= sizeof(pre)) return 0;
  memcpy(head, pattern, hlen);
  head[hlen] = '\0';
  for (size_t k = len + 1; k-- > 1;) {
    size_t j = k;
    if (!tpl__glob_match(star + 1, name + k)) continue;
    while (j > 0 && k - j < 9 && name[j - 1] >= '0' && name[j - 1] <= '9')
      j--;
    for (; j < k; j++) {
      memcpy(pre, name, j);
      pre[j] = '\0';
      if (!tpl__glob_match(head, pre)) continue;
      *start = j;
      *end = k;
      return 1;
    }
  }
  return 0;
}

/* The name rule `r` matched for tensor `name`: itself, or the weight a
 * quantized param takes its rule from (plan.c's apply_one); NULL when
 * none.  `buf` holds a derived one. */
static const char *matched_name(const struct tpl__rule *r, const char *name,
                                char *buf, size_t cap) {
  if (tpl__glob_match(r->match, name)) return name;
  if (tpl__quant_param(name, buf, cap) != TPL_QP_NONE &&
      tpl__glob_match(r->match, buf))
    return buf;
  if (tpl__ct_param(name, buf, cap) != TPL_CT_NONE &&
      tpl__glob_match(r->match, buf))
    return buf;
  return NULL;
}

/* One expert's tensor `o->name` by plan rule `rule`: its id is the
 * digits the rule's last '*' stands for, in the tensor's own name. */
static int rule_expert(const struct tpl__plan *p, int rule,
                       struct one_expert *o, struct tpl__error *err) {
  const struct tpl__rule *r = &p->rules[rule];
  char buf[TPL_MAX_NAME + 16];
  const char *n = matched_name(r, o->name, buf, sizeof(buf));
  if (n == NULL || !star_digits(r->match, n, &o->start, &o->end) ||
      strncmp(n, o->name, o->end) != 0)
    return tpl__fail(err, TPL_EPLAN,
                     "%s, rule %d ('%s'): tensor '%s': expected the last "
                     "'*' of an \"expert\": true rule to stand for the "
                     "expert id (digits), found none",
                     p->source, rule, r->match, o->name);
  o->kind = TPL_EP_WHOLE;
  return 0;
}

/* What --ep makes of tensor `name` whose plan rule is `rule` (-1: none):
 * the rule's "expert" when it has one, else the built-in names. */
static int classify(const struct tpl__plan *p, int rule, const char *name,
                    struct one_expert *o, struct tpl__error *err) {
  int expert = rule >= 0 && (size_t)rule < p->nrules ? p->rules[rule].expert
                                                     : TPL_EP_NONE;
  int rc = 0;
  o->name = name;
  if (expert == TPL_EP_WHOLE)
    rc = rule_expert(p, rule, o, err);
  else if (expert == TPL_EP_STACKED)
    o->kind = TPL_EP_STACKED;
  else if (expert_span(name, &o->start, &o->end))
    o->kind = TPL_EP_WHOLE;
  else if (is_stacked(name))
    o->kind = TPL_EP_STACKED;
  for (size_t k = o->start; rc == 0 && o->kind == TPL_EP_WHOLE && k < o->end;
       k++)
    o->id = o->id * 10 + (uint32_t)(name[k] - '0');
  return rc;
}

/* Classifies every tensor of `m` into c[0..ntensors); *nexpert the
 * expert ones. */
static int classify_all(const struct tpl__plan *p, const struct tpl__model *m,
                        const struct tpl__strategy *s, struct one_expert *c,
                        size_t *nexpert, struct tpl__error *err) {
  int rc = 0;
  *nexpert = 0;
  for (size_t i = 0; rc == 0 && i < m->ntensors; i++) {
    rc = classify(p, s[i].rule, m->tensors[i].name, &c[i], err);
    *nexpert += c[i].kind != TPL_EP_NONE;
  }
  return rc;
}

/* Rewrites s[i] as c[i] says over E = `e` experts. */
static int rewrite(const struct tpl__model *m, const struct one_expert *c,
                   uint32_t e, const struct tpl__grid *grid,
                   struct tpl__strategy *s, struct tpl__error *err) {
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < m->ntensors; i++) {
    const struct tpl__tensor *t = &m->tensors[i];
    if (c[i].kind == TPL_EP_WHOLE && c[i].id >= e)
      rc = tpl__fail(err, TPL_EFORMAT,
                     "tensor '%s' is expert %u: expected experts 0..%u of "
                     "the config's %u",
                     t->name, c[i].id, e - 1, e);
    else if (c[i].kind == TPL_EP_WHOLE)
      make_whole(&s[i], tpl__ep_owner(e, grid->ep, c[i].id));
    else if (c[i].kind == TPL_EP_STACKED)
      rc = make_stacked(t, e, grid, &s[i], err);
  }
  return rc;
}

int tpl__ep_apply(const struct tpl__plan *p, const struct tpl__model *m,
                  const json_t *config, const struct tpl__grid *grid,
                  struct tpl__strategy *s, uint32_t *experts,
                  struct tpl__error *err) {
  struct one_expert *c = calloc(m->ntensors + 1, sizeof(*c));
  uint32_t e = 0;
  size_t nexpert = 0;
  int rc = c == NULL ? tpl__fail(err, -ENOMEM, "--ep: out of memory") : 0;
  if (rc == 0) rc = classify_all(p, m, s, c, &nexpert, err);
  if (rc == 0) rc = check_count(m, config, nexpert, grid->ep, &e, err);
  if (rc == 0) rc = rewrite(m, c, e, grid, s, err);
  if (rc == 0) rc = check_complete(m, c, e, err);
  if (rc == 0) *experts = e;
  free(c);
  return rc;
}
