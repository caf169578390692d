/* plan.c - shard plans (DESIGN.md section 3): the glob that matches rules
 * to tensor names, the strict plan-file parser, and the per-tensor
 * application of a plan that yields each tensor's strategy.  Resolving
 * --plan (file, preset name or "auto") is planner.c's; presets live in
 * presets.c; the shard math (what a dim/segs rule means) in shard.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "jsonu.h"
#include "plan.h"

#define MAX_RULES 65536   /* rules in one plan file */
#define MAX_FUNC_NAME 256 /* bytes in a rule's func_name */

/* --- glob --- */

/* Bytes in the UTF-8 character at s (1 for a byte that starts none, so
 * an invalid name still advances; never past the terminating NUL). */
static size_t utf8_char_len(const char *s) {
  unsigned char c = (unsigned char)*s;
  size_t want = c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 1;
  size_t n = 1;
  while (n < want && ((unsigned char)s[n] & 0xC0) == 0x80)
    n++;
  return n;
}

int tpl__glob_match(const char *pattern, const char *name) {
  const char *p = pattern, *n = name;
  const char *star = NULL, *resume = NULL;
  /* Greedy match with one backtrack point: on a mismatch, let the most
   * recent '*' swallow one more character.  Earlier stars never need to be
   * revisited, so this is O(len(pattern) * len(name)) at worst.  `?` and
   * the star's swallowing step by whole UTF-8 characters (names are
   * validated UTF-8), so `?` never takes half of an `é`. */
  while (*n != '\0') {
    if (*p == '*') {
      star = p++;
      resume = n;
    } else if (*p == '?') {
      p++;
      n += utf8_char_len(n);
    } else if (*p == *n) {
      p++;
      n++;
    } else if (star != NULL) {
      p = star + 1;
      resume += utf8_char_len(resume);
      n = resume;
    } else {
      return 0;
    }
  }
  while (*p == '*')
    p++;
  return *p == '\0';
}

/* --- building plans --- */

struct tpl__plan *tpl__plan_new(const char *source) {
  struct tpl__plan *p = calloc(1, sizeof(*p));
  if (p == NULL) return NULL;
  p->source = strdup(source);
  if (p->source == NULL) {
    free(p);
    return NULL;
  }
  tpl__quant_info_init(&p->quant);
  return p;
}

static char *default_name(int dim) {
  char buf[32];
  snprintf(buf, sizeof(buf), "_shard_%d", dim);
  return strdup(buf);
}

static void rule_clear(struct tpl__rule *r) {
  free(r->match);
  free(r->name);
  for (int q = 0; q < TPL_QP_COUNT; q++)
    free(r->qnames[q]);
}

/* name + each quantization suffix MLC uses (quant.h). */
static int make_qnames(struct tpl__rule *r) {
  for (int q = 0; q < TPL_QP_COUNT; q++) {
    const char *suffix = tpl__quant_func_suffix(q);
    size_t len;
    if (suffix == NULL) continue;
    len = strlen(r->name) + strlen(suffix) + 1;
    r->qnames[q] = malloc(len);
    if (r->qnames[q] == NULL) return -ENOMEM;
    snprintf(r->qnames[q], len, "%s%s", r->name, suffix);
  }
  return 0;
}

int tpl__plan_add_rule(struct tpl__plan *p, const char *match, int kind,
                       const char *name, const struct tpl__shard_spec *spec) {
  struct tpl__rule *r, *rules;
  rules = realloc(p->rules, (p->nrules + 1) * sizeof(*rules));
  if (rules == NULL) return -ENOMEM;
  p->rules = rules;
  r = &rules[p->nrules];
  memset(r, 0, sizeof(*r));
  r->kind = kind;
  r->match = strdup(match);
  if (kind == TPL_RULE_SHARD) {
    r->spec = *spec;
    r->name = name != NULL ? strdup(name) : default_name(spec->dim);
  }
  if (r->match == NULL || (kind == TPL_RULE_SHARD && r->name == NULL) ||
      (kind == TPL_RULE_SHARD && make_qnames(r) != 0)) {
    rule_clear(r);
    return -ENOMEM;
  }
  p->nrules++;
  return 0;
}

void tpl__plan_free(struct tpl__plan *p) {
  if (p == NULL) return;
  for (size_t i = 0; i < p->nrules; i++)
    rule_clear(&p->rules[i]);
  free(p->rules);
  free(p->source);
  free(p);
}

/* --- plan-file parser --- */

/* What one rule object says, before it becomes a struct tpl__rule. */
struct rule_fields {
  const char *match;
  const char *name;
  int has_dim, has_scale, has_replicate;
  struct tpl__shard_spec spec;
  uint32_t interleave;
  int bias;   /* enum tpl__bias: "bias", DEFAULT when absent */
  int expert; /* enum tpl__ep_kind: "expert", TPL_EP_NONE when absent */
};

static const char *json_kind(const json_t *v) {
  static const char *const kinds[] = {
      [JSON_OBJECT] = "an object", [JSON_ARRAY] = "an array",
      [JSON_STRING] = "a string",  [JSON_INTEGER] = "an integer",
      [JSON_REAL] = "a number",    [JSON_TRUE] = "true",
      [JSON_FALSE] = "false",      [JSON_NULL] = "null"};
  return kinds[json_typeof(v)];
}

static int parse_string(const json_t *v, const char *key, size_t cap,
                        const char *what, size_t idx, const char **out,
                        struct tpl__error *err) {
  size_t len;
  if (!json_is_string(v))
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected '%s' to be a string, found %s",
                     what, idx, key, json_kind(v));
  len = json_string_length(v);
  if (len == 0 || len > cap || tpl__has_nul(json_string_value(v), len))
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected '%s' to be a non-empty string "
                     "of at most %zu bytes without NUL, found %zu bytes",
                     what, idx, key, cap, len);
  *out = json_string_value(v);
  return 0;
}

static int parse_dim(const json_t *v, const char *what, size_t idx,
                     struct rule_fields *f, struct tpl__error *err) {
  uint64_t dim;
  if (tpl__json_u64(v, &dim) != 0)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected 'dim' to be a non-negative "
                     "integer, found %s",
                     what, idx, json_kind(v));
  if (dim >= TPL_MAX_DIMS)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected 'dim' below %d (the most dims a "
                     "tensor may have), found %llu",
                     what, idx, TPL_MAX_DIMS, (unsigned long long)dim);
  f->has_dim = 1;
  f->spec.dim = (int)dim;
  return 0;
}

static int parse_segs(const json_t *v, const char *what, size_t idx,
                      struct rule_fields *f, struct tpl__error *err) {
  size_t n = json_is_array(v) ? json_array_size(v) : 0;
  if (!json_is_array(v) || n == 0 || n > TPL_MAX_SEGS)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected 'segs' to be an array of 1 to "
                     "%d positive integers, found %s of %zu",
                     what, idx, TPL_MAX_SEGS, json_kind(v), n);
  for (size_t j = 0; j < n; j++) {
    uint64_t s;
    if (tpl__json_u64(json_array_get(v, j), &s) != 0 || s == 0)
      return tpl__fail(err, TPL_EPLAN,
                       "%s: rule %zu: expected segs[%zu] to be a positive "
                       "integer, found %s",
                       what, idx, j, json_kind(json_array_get(v, j)));
    f->spec.segs[j] = s;
  }
  f->spec.nsegs = n;
  return 0;
}

#define MAX_INTERLEAVE 64

static int parse_interleave(const json_t *v, const char *what, size_t idx,
                            struct rule_fields *f, struct tpl__error *err) {
  uint64_t k;
  if (tpl__json_u64(v, &k) != 0 || k < 2 || k > MAX_INTERLEAVE)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected 'interleave' to be the number "
                     "of parts whose rows alternate, 2 to %d, found %s",
                     what, idx, MAX_INTERLEAVE, json_kind(v));
  f->interleave = (uint32_t)k;
  return 0;
}

/* `scale_bias` and `replicate` only make sense as `true`: `false` would
 * mean "this rule does nothing", which is a mistake worth reporting. */
static int parse_true(const json_t *v, const char *key, const char *what,
                      size_t idx, int *flag, struct tpl__error *err) {
  if (json_is_false(v))
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected '%s': true, found false (a "
                     "rule must say what to do; drop the rule instead)",
                     what, idx, key);
  if (!json_is_true(v))
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected '%s': true, found %s", what, idx,
                     key, json_kind(v));
  *flag = 1;
  return 0;
}

/* "bias": a row-parallel bias's own policy (scope.h), whatever the
 * load's --bias-policy; a scale_bias rule of its own. */
static int parse_bias(const json_t *v, const char *what, size_t idx,
                      struct rule_fields *f, struct tpl__error *err) {
  const char *s = json_is_string(v) ? json_string_value(v) : NULL;
  int b = s != NULL ? tpl__bias_parse(s) : -1;
  if (b < 0)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected 'bias' to be \"scale\", "
                     "\"rank0\" or \"whole\", found %s%.64s%s",
                     what, idx, s ? "\"" : json_kind(v), s ? s : "",
                     s ? "\"" : "");
  f->bias = b;
  return 0;
}

/* "expert": true (one expert's tensor) or "stacked" (an [E, ...] stack
 * of every expert): what --ep does with the tensors the rule matches. */
static int parse_expert(const json_t *v, const char *what, size_t idx,
                        struct rule_fields *f, struct tpl__error *err) {
  const char *s = json_is_string(v) ? json_string_value(v) : NULL;
  if (json_is_true(v))
    f->expert = TPL_EP_WHOLE;
  else if (s != NULL && strcmp(s, "stacked") == 0)
    f->expert = TPL_EP_STACKED;
  else
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected 'expert' to be true (one "
                     "expert's tensor) or \"stacked\" (every expert's, "
                     "[E, ...]), found %s%.64s%s",
                     what, idx, s ? "\"" : json_kind(v), s ? s : "",
                     s ? "\"" : "");
  return 0;
}

static int parse_field(const char *key, const json_t *v, const char *what,
                       size_t idx, struct rule_fields *f,
                       struct tpl__error *err) {
  if (strcmp(key, "match") == 0)
    return parse_string(v, key, TPL_MAX_NAME, what, idx, &f->match, err);
  if (strcmp(key, "name") == 0)
    return parse_string(v, key, MAX_FUNC_NAME, what, idx, &f->name, err);
  if (strcmp(key, "dim") == 0) return parse_dim(v, what, idx, f, err);
  if (strcmp(key, "segs") == 0) return parse_segs(v, what, idx, f, err);
  if (strcmp(key, "interleave") == 0)
    return parse_interleave(v, what, idx, f, err);
  if (strcmp(key, "scale_bias") == 0)
    return parse_true(v, key, what, idx, &f->has_scale, err);
  if (strcmp(key, "replicate") == 0)
    return parse_true(v, key, what, idx, &f->has_replicate, err);
  if (strcmp(key, "bias") == 0) return parse_bias(v, what, idx, f, err);
  if (strcmp(key, "expert") == 0) return parse_expert(v, what, idx, f, err);
  return tpl__fail(err, TPL_EPLAN,
                   "%s: rule %zu: unknown key '%s' (expected match, dim, "
                   "name, segs, interleave, scale_bias, bias, replicate or "
                   "expert)",
                   what, idx, key);
}

/* An "expert" rule: its cut without --ep is optional (none: replicated),
 * and one expert's needs the '*' that stands for the expert id. */
static int check_expert(const struct rule_fields *f, int actions,
                        const char *what, size_t idx, struct tpl__error *err) {
  if (actions > 1)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected at most one of 'dim', "
                     "'scale_bias' (or 'bias'), 'replicate' with 'expert', "
                     "found %d",
                     what, idx, actions);
  if (f->expert == TPL_EP_WHOLE && strchr(f->match, '*') == NULL)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected a '*' in 'match' with 'expert': "
                     "true (its last '*' stands for the expert id), found "
                     "'%.64s'",
                     what, idx, f->match);
  return 0;
}

/* Checks the combination of keys: match required, exactly one action
 * (at most one with expert), name/segs only with dim. */
static int check_fields(const struct rule_fields *f, const char *what,
                        size_t idx, struct tpl__error *err) {
  int actions = f->has_dim + (f->has_scale || f->bias) + f->has_replicate;
  int rc;
  if (f->match == NULL)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected a 'match' glob, found none", what,
                     idx);
  if (f->expert != TPL_EP_NONE) {
    rc = check_expert(f, actions, what, idx, err);
    if (rc != 0) return rc;
  } else if (actions != 1) {
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected exactly one of 'dim', "
                     "'scale_bias' (or 'bias'), 'replicate', found %d",
                     what, idx, actions);
  }
  /* 'segs' always gives nsegs > 0: parse_segs refuses an empty array. */
  if (!f->has_dim && (f->name != NULL || f->spec.nsegs != 0))
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected 'dim' with '%s', found '%s' "
                     "without 'dim'",
                     what, idx, f->name != NULL ? "name" : "segs",
                     f->name != NULL ? "name" : "segs");
  if (f->interleave != 0 && !f->has_dim)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected 'dim' with 'interleave', found "
                     "'interleave' without 'dim'",
                     what, idx);
  /* Segments are consecutive runs; interleaved parts are not. */
  if (f->interleave != 0 && f->spec.nsegs != 0)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected 'segs' or 'interleave', found "
                     "both (segs cut consecutive parts, interleaved parts "
                     "alternate row by row: a contiguous cut of whole "
                     "groups keeps them together)",
                     what, idx);
  return 0;
}

static int parse_rule(const json_t *obj, const char *what, size_t idx,
                      struct tpl__plan *p, struct tpl__error *err) {
  struct rule_fields f;
  const char *key;
  json_t *v;
  int rc, kind;
  memset(&f, 0, sizeof(f));
  if (!json_is_object(obj))
    return tpl__fail(err, TPL_EPLAN,
                     "%s: rule %zu: expected an object, found %s", what, idx,
                     json_kind(obj));
  json_object_foreach((json_t *)obj, key, v) {
    rc = parse_field(key, v, what, idx, &f, err);
    if (rc != 0) return rc;
  }
  rc = check_fields(&f, what, idx, err);
  if (rc != 0) return rc;
  kind = f.has_dim               ? TPL_RULE_SHARD
         : f.has_scale || f.bias ? TPL_RULE_SCALE_BIAS
                                 : TPL_RULE_REPLICATE;
  if (tpl__plan_add_rule(p, f.match, kind, f.name, &f.spec) != 0)
    return tpl__fail(err, -ENOMEM, "%s: out of memory", what);
  p->rules[p->nrules - 1].interleave = f.interleave;
  p->rules[p->nrules - 1].bias = f.bias;
  p->rules[p->nrules - 1].expert = f.expert;
  return 0;
}

static int parse_rules(const json_t *root, const char *what,
                       struct tpl__plan *p, struct tpl__error *err) {
  const json_t *rules = json_object_get(root, "rules");
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)root, key, v) {
    if (strcmp(key, "rules") != 0)
      return tpl__fail(err, TPL_EPLAN,
                       "%s: expected only 'rules' at top level, found "
                       "unknown key '%s'",
                       what, key);
  }
  if (!json_is_array(rules))
    return tpl__fail(err, TPL_EPLAN,
                     "%s: expected a 'rules' array at top level, found %s",
                     what, rules == NULL ? "none" : json_kind(rules));
  if (json_array_size(rules) > MAX_RULES)
    return tpl__fail(err, TPL_ELIMIT,
                     "%s: expected at most %d rules, found %zu", what,
                     MAX_RULES, json_array_size(rules));
  for (size_t i = 0; i < json_array_size(rules); i++) {
    int rc = parse_rule(json_array_get(rules, i), what, i, p, err);
    if (rc != 0) return rc;
  }
  return 0;
}

int tpl__plan_parse(const char *buf, size_t len, const char *what,
                    struct tpl__plan **out, struct tpl__error *err) {
  struct tpl__plan *p = NULL;
  json_t *root = NULL;
  char source[64 + TPL_MAX_NAME];
  int rc = tpl__json_parse_object(buf, len, what, &root, err);
  if (rc != 0) {
    /* A plan that is not JSON is a bad plan, whatever jsonu calls it. */
    if (err != NULL) err->code = TPL_EPLAN;
    return TPL_EPLAN;
  }
  snprintf(source, sizeof(source), "file %s", what);
  p = tpl__plan_new(source);
  if (p == NULL)
    rc = tpl__fail(err, -ENOMEM, "%s: out of memory", what);
  else
    rc = parse_rules(root, what, p, err);
  json_decref(root);
  if (rc != 0) {
    tpl__plan_free(p);
    return rc;
  }
  p->from_file = 1;
  *out = p;
  return 0;
}

/* --- applying a plan --- */

static int find_rule(const struct tpl__plan *p, const char *name) {
  for (size_t i = 0; i < p->nrules; i++)
    if (tpl__glob_match(p->rules[i].match, name)) return (int)i;
  return -1;
}

static int is_float(int dtype) {
  return dtype == TPL_DT_F16 || dtype == TPL_DT_BF16 || dtype == TPL_DT_F32 ||
         dtype == TPL_DT_F64;
}

/* Prefixes err->msg with the plan and rule that asked for the failing
 * action, so a user knows which line of which plan to fix. */
static int blame_rule(const struct tpl__plan *p, int rule, int rc,
                      struct tpl__error *err) {
  char msg[sizeof(err->msg)];
  if (err == NULL) return rc;
  memcpy(msg, err->msg, sizeof(msg));
  return tpl__fail(err, rc, "%s, rule %d ('%s'): %s", p->source, rule,
                   p->rules[rule].match, msg);
}

/* An interleaved tensor is cut contiguously, so each rank's slice must
 * hold whole groups of the alternating rows: vLLM's gpt_oss.py slices
 * the interleaved gate_up rows [2 * start, 2 * end) per rank. */
static int check_interleave(const struct tpl__rule *r,
                            const struct tpl__tensor *t, uint32_t nshards,
                            struct tpl__error *err) {
  uint64_t slice = t->shape[r->spec.dim] / nshards;
  if (r->interleave < 2 || slice % r->interleave == 0) return 0;
  return tpl__fail(err, TPL_EINDIVISIBLE,
                   "tensor '%s': expected each of the %u shards' %llu rows "
                   "along dim %d to be whole groups of the %u interleaved "
                   "parts, found %llu left over",
                   t->name, nshards, (unsigned long long)slice, r->spec.dim,
                   r->interleave, (unsigned long long)(slice % r->interleave));
}

static int apply_rule(const struct tpl__plan *p, const struct tpl__tensor *t,
                      uint32_t nshards, struct tpl__strategy *s,
                      struct tpl__error *err) {
  const struct tpl__rule *r;
  int rc;
  s->kind = TPL_RULE_REPLICATE;
  if (s->rule < 0) return 0;
  r = &p->rules[s->rule];
  s->kind = r->kind;
  if (r->kind == TPL_RULE_SHARD) {
    rc = tpl__shard_check(t->shape, t->ndim, &r->spec, nshards, t->name, err);
    if (rc == 0) rc = check_interleave(r, t, nshards, err);
    if (rc != 0) return blame_rule(p, s->rule, rc, err);
    s->func_name = r->name;
    s->spec = r->spec;
  } else if (r->kind == TPL_RULE_SCALE_BIAS) {
    s->bias = r->bias;
    s->bias_vllm = r->bias_vllm;
  }
  if (r->kind == TPL_RULE_SCALE_BIAS && !is_float(t->dtype)) {
    return tpl__fail(err, TPL_EDTYPE,
                     "%s, rule %d ('%s'): tensor '%s': expected F16, BF16, "
                     "F32 or F64 for scale_bias, found %s",
                     p->source, s->rule, r->match, t->name,
                     tpl__dtype_st_name(t->dtype));
  }
  return 0;
}

/* Tensor names -> index in the model, for a quantized param's weight and
 * a scale's siblings. */
static json_t *name_index(const struct tpl__model *m) {
  json_t *idx = json_object();
  for (size_t i = 0; idx != NULL && i < m->ntensors; i++) {
    if (json_object_set_new_nocheck(idx, m->tensors[i].name,
                                    json_integer((json_int_t)i)) != 0) {
      json_decref(idx);
      return NULL;
    }
  }
  return idx;
}

/* Index of tensor `name` in the model, or -1. */
static long find_tensor(const json_t *idx, const char *name) {
  const json_t *v = json_object_get(idx, name);
  return v != NULL ? (long)json_integer_value(v) : -1;
}

/* A quantized param takes its base weight's rule, transformed as MLC
 * does (quant.h); a base that is not sharded leaves it replicated. */
static int apply_derived(const struct tpl__plan *p, const struct tpl__model *m,
                         const json_t *idx, const struct tpl__tensor *t, int qp,
                         const char *base, uint32_t nshards,
                         struct tpl__strategy *s, struct tpl__error *err) {
  const struct tpl__rule *r = &p->rules[s->rule];
  long w = find_tensor(idx, base);
  struct tpl__shard_spec spec;
  int replicate, rc;
  s->kind = TPL_RULE_REPLICATE;
  /* A KN layout is refused for N > 1 (tpl__quant_check_tp); at N = 1
   * every rank gets all of it anyway. */
  if (r->kind != TPL_RULE_SHARD ||
      (p->quant.scheme != NULL && p->quant.scheme->kn_layout))
    return 0;
  rc = tpl__quant_derive(qp, &p->quant, t, w >= 0 ? &m->tensors[w] : NULL,
                         &r->spec, nshards, &spec, &replicate, err);
  if (rc != 0) return blame_rule(p, s->rule, rc, err);
  if (replicate) return 0;
  s->kind = TPL_RULE_SHARD;
  s->spec = spec;
  s->func_name = r->qnames[qp] != NULL ? r->qnames[qp] : r->name;
  return 0;
}

/* The weight of a compressed-tensors param: `<base>.weight`, or its
 * packed form `<base>.weight_packed`; -1 when neither is there. */
static long find_ct_weight(const json_t *idx, const char *base) {
  char packed[TPL_MAX_NAME + 24];
  long w = find_tensor(idx, base);
  if (w >= 0) return w;
  snprintf(packed, sizeof(packed), "%s_packed", base);
  return find_tensor(idx, packed);
}

/* A compressed-tensors param takes its weight's rule, as vLLM's schemes
 * load it (quant_ct.h); a weight left whole leaves it whole. */
static int apply_ct(const struct tpl__plan *p, const struct tpl__model *m,
                    const json_t *idx, const struct tpl__tensor *t, int ct,
                    const char *base, uint32_t nshards, struct tpl__strategy *s,
                    struct tpl__error *err) {
  const struct tpl__rule *r = &p->rules[s->rule];
  long w = find_ct_weight(idx, base);
  struct tpl__shard_spec spec;
  int replicate, rc;
  s->kind = TPL_RULE_REPLICATE;
  if (r->kind != TPL_RULE_SHARD) return 0;
  rc = tpl__ct_derive(ct, &p->ct, t, w >= 0 ? &m->tensors[w] : NULL, &r->spec,
                      nshards, &spec, &replicate, err);
  if (rc != 0) return blame_rule(p, s->rule, rc, err);
  if (replicate) return 0;
  s->kind = TPL_RULE_SHARD;
  s->spec = spec;
  s->func_name = r->name;
  return 0;
}

/* 1 when --ep takes tensor `name` (its rule s->rule) from the plan:
 * the built-in names or an "expert" rule say it is an expert's. */
static int ep_whole(const struct tpl__plan *p, const struct tpl__strategy *s,
                    const char *name) {
  if (p->ep_expert == NULL) return 0;
  return p->ep_expert(name) ||
         (s->rule >= 0 && p->rules[s->rule].expert != TPL_EP_NONE);
}

static int apply_one(const struct tpl__plan *p, const struct tpl__model *m,
                     const json_t *idx, size_t i, uint32_t nshards,
                     struct tpl__strategy *s, struct tpl__error *err) {
  const struct tpl__tensor *t = &m->tensors[i];
  char base[TPL_MAX_NAME + 16];
  int qp = tpl__quant_param(t->name, base, sizeof(base));
  memset(s, 0, sizeof(*s));
  if (qp != TPL_QP_NONE && (s->rule = find_rule(p, base)) >= 0)
    return ep_whole(p, s, t->name)
               ? 0
               : apply_derived(p, m, idx, t, qp, base, nshards, s, err);
  if (p->ct.present && (qp = tpl__ct_param(t->name, base, sizeof(base))) != 0 &&
      (s->rule = find_rule(p, base)) >= 0)
    return ep_whole(p, s, t->name)
               ? 0
               : apply_ct(p, m, idx, t, qp, base, nshards, s, err);
  s->rule = find_rule(p, t->name);
  return ep_whole(p, s, t->name) ? 0 : apply_rule(p, t, nshards, s, err);
}

/* A compressed-tensors scale its weight's rule left whole on purpose
 * (per channel under an input cut, activation order: quant_ct.h). */
static int derived_whole(const struct tpl__plan *p,
                         const struct tpl__strategy *s,
                         const struct tpl__tensor *t) {
  char base[TPL_MAX_NAME + 16];
  return p->ct.present && s->rule >= 0 &&
         tpl__ct_param(t->name, base, sizeof(base)) != TPL_CT_NONE &&
         tpl__glob_match(p->rules[s->rule].match, base);
}

/* No silent mis-shard: a scale or zero-point of more than one element
 * (a per-tensor scale is the same for every slice) must not reach every
 * rank whole while its weight is cut. */
static int check_scales(const struct tpl__plan *p, const struct tpl__model *m,
                        const json_t *idx, const struct tpl__strategy *st,
                        struct tpl__error *err) {
  static const char *const weights[] = {"weight", "q_weight", "qweight"};
  char stem[TPL_MAX_NAME + 2], wname[TPL_MAX_NAME + 16];
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__tensor *t = &m->tensors[i];
    if (st[i].kind != TPL_RULE_REPLICATE || tpl__tensor_numel(t) <= 1 ||
        !tpl__quant_is_scale(t->name, stem, sizeof(stem)) ||
        derived_whole(p, &st[i], t))
      continue;
    for (size_t k = 0; k < ARRAY_SIZE(weights); k++) {
      long w;
      snprintf(wname, sizeof(wname), "%s%s", stem, weights[k]);
      w = find_tensor(idx, wname);
      if (w < 0 || st[w].kind != TPL_RULE_SHARD) continue;
      return tpl__fail(err, TPL_EPLAN,
                       "%s: tensor '%s': expected it sharded like its "
                       "weight '%s' (rule %d, '%s'), found it replicated: "
                       "every rank would get scales that do not match its "
                       "slice of the weight; add a rule for it",
                       p->source, t->name, wname, st[w].rule,
                       p->rules[st[w].rule].match);
    }
  }
  return 0;
}

int tpl__plan_apply(const struct tpl__plan *p, const struct tpl__model *m,
                    uint32_t nshards, struct tpl__strategy *out,
                    struct tpl__error *err) {
  json_t *idx;
  int rc = 0;
  if (nshards == 0)
    return tpl__fail(err, TPL_EPLAN, "%s: expected at least 1 shard, found 0",
                     p->source);
  idx = name_index(m);
  if (idx == NULL) return tpl__oom(err);
  for (size_t i = 0; rc == 0 && i < m->ntensors; i++)
    rc = apply_one(p, m, idx, i, nshards, &out[i], err);
  if (rc == 0) rc = check_scales(p, m, idx, out, err);
  json_decref(idx);
  return rc;
}

const char *tpl__rule_name(int kind, const char *func_name) {
  if (kind == TPL_RULE_SHARD) return func_name;
  if (kind == TPL_RULE_SCALE_BIAS) return "scale_bias";
  return "replicate";
}
