/* layout.h - the output layouts of `preshard --layout L` and `verify
 * --layout L` (DESIGN.md sections 1 and 2a): one descriptor each (its
 * sink, its verifier, what it accepts), one table (layout.c), one
 * parser both commands call. */
#ifndef TPL_LAYOUT_H
#define TPL_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "coord.h"
#include "http.h"
#include "outdir.h"
#include "verify.h"

/* The table's names as the help texts list them, in the table's order
 * (test_layout holds the two equal). */
#define TPL_LAYOUT_NAMES "rank|mlc"

/* Which command asks whether a layout takes this use. */
enum tpl__layout_verb { TPL_LAYOUT_WRITE, TPL_LAYOUT_VERIFY };

/* What a command asks of a layout: its verb, its MODEL operand, --ep,
 * the bias family (--bias-policy, scope.h; -1: none asked, 0: mlc). */
struct tpl__layout_use {
  enum tpl__layout_verb verb;
  const char *model;
  int ep;
  int bias_family;
};

struct tpl__output_layout {
  const char *name; /* --layout's word */
  /* The sink that writes it (`preshard`); o must outlive the load. */
  struct tpl__sink (*sink)(struct tpl__outdir_opts *o);
  /* `verify MODEL DIR` of an output of it: 0, TPL_EMISMATCH or the code
   * of what could not be read (verify.h). */
  int (*verify)(const char *model, const char *dir, const char *plan,
                const struct tpl__verify_grid *want,
                const struct tpl__http_opts *http,
                struct tpl__verify_result *out, struct tpl__error *err);
  /* 0 when the layout takes `u`, else TPL_EUSAGE with the refusal in
   * err (the grids or models it cannot take). */
  int (*accepts)(const struct tpl__layout_use *u, struct tpl__error *err);
  /* Into buf (NUL-terminated, cut at len): preshard's closing line after
   * "tpload preshard: ", for `world` ranks writing DIR. */
  void (*wrote)(char *buf, size_t len, const char *dir, uint32_t world);
  int unscaled_bias;   /* writes row-parallel biases unscaled (the engine's
                        * own graph scales them) whatever --no-bias-scaling */
  const char *members; /* verify's summary: what the grid's members are */
  const char *checked; /* and what it checked of each */
};

/* The layout --layout `name` names (NULL: the default, rank), if `u` is
 * one it accepts, into *out (a static row).  Returns 0, or TPL_EUSAGE
 * with the message in err: an unknown name (the table's names listed),
 * the layout's refusal, or a bias family other than mlc and whole for a
 * layout that writes its biases unscaled (its engine's graph divides
 * them: the biases it holds are whole, what mlc and whole both mean
 * there, while vllm's rank0 biases would be lost). */
int tpl__layout_parse(const char *name, const struct tpl__layout_use *u,
                      const struct tpl__output_layout **out,
                      struct tpl__error *err);

/* The table, for tests and help: row i, NULL past the last. */
const struct tpl__output_layout *tpl__layout_at(size_t i);

#endif
