/* plan.h - shard plans: rules from a plan file or a preset, resolved per
 * tensor into a strategy (shard along a dim, scale a bias, replicate).
 * DESIGN.md section 3. */
#ifndef TPL_PLAN_H
#define TPL_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "model.h"
#include "quant.h"
#include "quant_ct.h"
#include "scope.h"
#include "shard.h"

enum tpl__rule_kind {
  TPL_RULE_REPLICATE = 0,
  TPL_RULE_SHARD = 1,
  TPL_RULE_SCALE_BIAS = 2
};

/* What expert parallelism makes of a tensor (struct tpl__strategy's and
 * struct tpl__job_tensor's `ep`, a plan file rule's `expert`; experts.c). */
enum tpl__ep_kind {
  TPL_EP_NONE = 0,   /* not an expert's: cut as its plan rule says */
  TPL_EP_WHOLE = 1,  /* one expert's: whole on the shard `owner` only */
  TPL_EP_STACKED = 2 /* every expert's, [E, ...]: cut along dim 0 */
};

struct tpl__rule {
  char *match;                 /* owned glob: '*' any run (dots too), '?' */
  int kind;                    /* enum tpl__rule_kind */
  char *name;                  /* owned func_name for SHARD ("_shard_<dim>") */
  struct tpl__shard_spec spec; /* SHARD only; nsegs 0 = one segment */
  /* SHARD only: the rows along `dim` alternate between this many fused
   * parts (gpt-oss's gate_up: gate even, up odd), so a rank's slice must
   * be whole groups of them; 0 or 1 = not interleaved. */
  uint32_t interleave;
  /* SCALE_BIAS only (enum tpl__bias, scope.h): `bias` the policy a plan
   * file's "bias" fixes (DEFAULT: the load's family decides), `bias_vllm`
   * the one a preset gives under --bias-policy vllm (DEFAULT: whole). */
  int bias, bias_vllm;
  /* SHARD only, owned: the func_names MLC gives the quantized params
   * derived from this rule, name + tpl__quant_func_suffix(qp); NULL where
   * MLC has none. */
  char *qnames[TPL_QP_COUNT];
  /* A plan file's "expert" (enum tpl__ep_kind): under --ep
   * the tensors it matches are one expert's (TPL_EP_WHOLE: the id the
   * digits its match's last '*' stands for) or every expert's stacked
   * (TPL_EP_STACKED); TPL_EP_NONE (0) when absent: the built-in names
   * decide (experts.c).  Without --ep the rule cuts as its other keys
   * say (none: replicated). */
  int expert;
};

struct tpl__preset_def; /* preset_tables.h */

struct tpl__plan {
  char *source; /* owned: "file PATH", "preset llama", ... */
  struct tpl__rule *rules;
  size_t nrules;
  int from_file;                /* a user's plan file (not a preset) */
  struct tpl__quant_info quant; /* from the model's config, see quant.h */
  struct tpl__ct_scheme ct;     /* compressed-tensors' scheme, quant_ct.h */
  /* The preset the plan was built from (set by tpl__preset_from_config),
   * NULL for a plan file; preset_mlc 1 when it uses MLC's names. */
  const struct tpl__preset_def *preset;
  int preset_mlc;
  /* Routed experts per MoE layer under --ep (experts.c), else 0. */
  uint32_t experts;
  /* Under --ep: the tensors tpl__ep_apply gives whole or cuts by expert
   * (tpl__ep_is_expert), and those an "expert" rule matches;
   * tpl__plan_apply leaves them replicated and unchecked, their TP cut
   * never made.  NULL otherwise. */
  int (*ep_expert)(const char *name);
};

/* What one tensor gets. `rule` is the index of the matching rule or -1
 * (unmatched: replicated).  func_name borrows from the plan. */
struct tpl__strategy {
  int kind;
  int rule;
  const char *func_name;
  struct tpl__shard_spec spec;
  int bias, bias_vllm; /* SCALE_BIAS: the rule's (tpl__bias_resolve) */
  /* Under --ep (experts.c): enum tpl__ep_kind, and for TPL_EP_WHOLE the
   * shard that holds the tensor; 0 and 0 otherwise. */
  int ep;
  uint32_t owner;
};

/* Returns 1 when glob `pattern` matches all of `name`. */
int tpl__glob_match(const char *pattern, const char *name);

/* Parses a plan file's JSON (`buf`, `len`; `what` names it in messages).
 * Unknown keys, a rule without exactly one of dim / scale_bias (or
 * "bias": scale|rank0|whole) / replicate (at most one with "expert": true
 * or "stacked"; true needs a '*' in match for the expert id),
 * and contradictory rules are refused with the rule's index.  *out is
 * freed with tpl__plan_free. Returns 0 or TPL_EPLAN. */
int tpl__plan_parse(const char *buf, size_t len, const char *what,
                    struct tpl__plan **out, struct tpl__error *err);

/* Applies `p` to every tensor of `m`: out[i] for tensor i (caller allocates
 * m->ntensors entries).  Checks each SHARD spec against the tensor
 * (tpl__shard_check) and each SCALE_BIAS tensor's dtype (F16/BF16/F32/F64).
 * A quantized param (`<base>.q_weight`, `.q_scale`, `.weight_scale_inv`,
 * ... see quant.h) whose `<base>.weight` matches a rule takes its rule
 * from that one, as MLC derives it (tpl__quant_derive; func_name
 * `<name>_q_weight` etc.; rule = the base rule's index).  Refuses a
 * scale or zero-point tensor left replicated while its weight is sharded
 * (TPL_EPLAN naming both and the plan).  Tensors p->ep_expert names or
 * an "expert" rule matches (when p->ep_expert is set) are left replicated,
 * their rule recorded and nothing checked (--ep takes them whole).  Returns 0,
 * TPL_EPLAN, TPL_EINDIVISIBLE or TPL_EDTYPE. */
int tpl__plan_apply(const struct tpl__plan *p, const struct tpl__model *m,
                    uint32_t nshards, struct tpl__strategy *out,
                    struct tpl__error *err);

/* Frees a plan; NULL accepted. */
void tpl__plan_free(struct tpl__plan *p);

/* Allocates an empty plan whose source reads `source` (copied); free with
 * tpl__plan_free.  Returns NULL on ENOMEM. */
struct tpl__plan *tpl__plan_new(const char *source);

/* Appends a rule to `p`: `match` and `name` are copied; `name` NULL means
 * "_shard_<dim>"; `spec` is read for TPL_RULE_SHARD only (may be NULL
 * otherwise).  Returns 0 or -ENOMEM (p unchanged). */
int tpl__plan_add_rule(struct tpl__plan *p, const char *match, int kind,
                       const char *name, const struct tpl__shard_spec *spec);

/* What a rule of `kind` is called in tables and shard info: its
 * func_name for a shard rule, else "scale_bias" or "replicate".  Static
 * or `func_name`. */
const char *tpl__rule_name(int kind, const char *func_name);

#endif
