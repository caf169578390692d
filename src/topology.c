/* topology.c - the grid of a world of N ranks as D replicas of a T x P
 * tensor-parallel x pipeline-parallel grid, its stable rank numbering,
 * and which pipeline stage holds which tensor, as MLC LLM assigns it.
 *
 * MLC LLM (mlc-ai/mlc-llm) decides stages in two places:
 *  - python/mlc_llm/model/llama/llama_model.py, LlamaForCausalLM.__init__,
 *    _set_pp(): decoder layer i gets pipeline_stages [i // (L // P)];
 *    model.norm.weight gets [P - 1]; model.embed_tokens.weight and, when
 *    the embeddings are not tied, lm_head.weight get list(range(P)) (every
 *    stage).  olmo, olmo2 and nemotron carry the same _set_pp.
 *    LlamaConfig.__post_init__ refuses P <= 0 or P > L.
 *  - python/mlc_llm/interface/compile.py,
 *    _apply_preproc_to_params_and_check_pipeline(): a param without
 *    pipeline_stages is an error when P != 1, and [0] when P == 1 (then
 *    deduplicated with list(set(...))); _get_param_metadata writes the list
 *    as "pipeline_stages" in the model metadata, which
 *    cpp/multi_gpu/multi_gpu_loader.cc reads to decide which worker group
 *    (= stage; worker = stage * T + shard) loads a param.
 * The compute graph (LlamaModel.__init__'s layer_partition) cuts layers
 * at multiples of ceil(L / P) instead.  The two agree only when P divides
 * L; otherwise the metadata names a stage P that does not exist for the
 * last L mod P layers, so such a split is refused here rather than
 * guessed. */
#include "topology.h"

#include "model.h"

#include <errno.h>
#include <string.h>

uint32_t tpl__grid_default_tp(uint32_t world, uint32_t pp) {
  return pp != 0 && world % pp == 0 ? world / pp : 1;
}

int tpl__grid_make(uint32_t world, uint32_t tp, uint32_t pp,
                   struct tpl__error *err, struct tpl__grid *out) {
  if (tp == 0 || pp == 0)
    return tpl__fail(err, TPL_EUSAGE, "--tp %u and --pp %u must both be >= 1",
                     tp, pp);
  uint64_t cell = (uint64_t)tp * pp;
  if (world == 0 || world % cell != 0)
    return tpl__fail(err, TPL_EUSAGE,
                     "-np %u is not a multiple of --tp %u x --pp %u = %llu",
                     world, tp, pp, (unsigned long long)cell);
  *out = (struct tpl__grid){
      .world = world, .tp = tp, .pp = pp, .dp = (uint32_t)(world / cell)};
  return 0;
}

struct tpl__pos tpl__grid_coord(const struct tpl__grid *g, uint32_t rank) {
  uint32_t group = rank / g->tp; /* d * pp + p */
  return (struct tpl__pos){
      .d = group / g->pp, .p = group % g->pp, .t = rank % g->tp};
}

/* The expert-parallel group is vLLM's: FusedMoEParallelConfig.make
 * (vllm-project/vllm vllm/model_executor/layers/fused_moe/config.py)
 * flattens TP across DP under --enable-expert-parallel, ep_size =
 * dp_size x tp_size and ep_rank = dp_rank x tp_size + tp_rank ("TP = 2,
 * DP = 2 and EP = True ... the experts are split between the 4
 * devices"); with DP = 1 that is the TP group.  tpload offers both: the
 * TP group of each replica (every replica holds every expert) or every
 * replica's TP group (each expert held once per stage). */
int tpl__grid_set_ep(struct tpl__grid *g, int ep, uint32_t size,
                     struct tpl__error *err) {
  uint64_t all = (uint64_t)g->tp * g->dp;
  if (!ep) size = 0;
  if (ep && size == 0) size = g->tp;
  if (size != 0 && size != g->tp && size != all)
    return g->dp > 1 ? tpl__fail(err, TPL_EUSAGE,
                                 "--ep-size %u: expected %u (--tp, the TP "
                                 "group) or %llu (--tp x %u replicas)",
                                 size, g->tp, (unsigned long long)all, g->dp)
                     : tpl__fail(err, TPL_EUSAGE,
                                 "--ep-size %u: expected %u (--tp, the TP "
                                 "group; the grid has one replica)",
                                 size, g->tp);
  g->ep = size;
  return 0;
}

uint32_t tpl__grid_ep_rank(const struct tpl__grid *g, uint32_t rank) {
  struct tpl__pos c = tpl__grid_coord(g, rank);
  return g->ep > g->tp ? c.d * g->tp + c.t : c.t;
}

const char *tpl__grid_ep_what(const struct tpl__grid *g) {
  return g->ep > g->tp ? "TP x DP" : "the TP group";
}

int tpl__stage_check(uint32_t layers, uint32_t pp, struct tpl__error *err) {
  if (layers == 0) /* never "expected 1..0" */
    return tpl__fail(err, TPL_EFORMAT,
                     "--pp %u: the model has no layers to split", pp);
  if (pp == 0 || pp > layers)
    return tpl__fail(err, TPL_EUSAGE,
                     "--pp %u: expected 1..%u (the model's layer count)", pp,
                     layers);
  if (layers % pp != 0)
    return tpl__fail(err, TPL_EUSAGE,
                     "--pp %u does not divide the %u layers: MLC's metadata "
                     "(layer // (%u // %u)) would put layers %u..%u on a "
                     "stage %u that does not exist",
                     pp, layers, layers, pp, layers - layers % pp, layers - 1,
                     pp);
  return 0;
}

int tpl__tensor_stages(const char *name, uint32_t layers, uint32_t mtp,
                       uint32_t pp, int tied, struct tpl__error *err,
                       struct tpl__stages *out) {
  struct tpl__stages all = {.first = 0, .count = pp};
  uint32_t layer;
  if (pp == 1) {
    *out = all;
  } else if (tpl__model_layer_of(name, &layer)) {
    if (layer >= layers && layer - layers < mtp) {
      *out = (struct tpl__stages){pp - 1, 1};
      return 0;
    }
    if (layer >= layers)
      return tpl__fail(err, TPL_EPLAN,
                       "%s: layer %u is outside the model's %u layers", name,
                       layer, layers);
    /* MLC's metadata: layer // (layers // pp). */
    *out = (struct tpl__stages){layer / (layers / pp), 1};
  } else if (strcmp(name, "model.norm.weight") == 0) {
    *out = (struct tpl__stages){pp - 1, 1};
  } else if (strcmp(name, "model.embed_tokens.weight") == 0 ||
             (!tied && strcmp(name, "lm_head.weight") == 0)) {
    *out = all;
  } else {
    return tpl__fail(err, TPL_EPLAN,
                     "%s: MLC assigns no pipeline stage to this tensor "
                     "(--pp %u, %s embeddings)",
                     name, pp, tied ? "tied" : "untied");
  }
  return 0;
}

/* --- the order of the chains --- */

/* Whether node[] names every rank's node by the node's first rank. */
static int first_ranks(const uint32_t *node, uint32_t world) {
  for (uint32_t r = 0; r < world; r++)
    if (node[r] > r || node[node[r]] != node[r]) return 0;
  return 1;
}

/* order[] = every rank in node order: a stable counting sort by node
 * label, the labels' counts kept in count[] (world entries). */
static void sort_by_node(const uint32_t *node, uint32_t world, uint32_t *count,
                         uint32_t *order) {
  uint32_t sum = 0;
  memset(count, 0, world * sizeof(*count));
  for (uint32_t r = 0; r < world; r++)
    count[node[r]]++;
  for (uint32_t l = 0; l < world; l++) {
    uint32_t c = count[l];
    count[l] = sum;
    sum += c;
  }
  for (uint32_t r = 0; r < world; r++)
    order[count[node[r]]++] = r;
}

int tpl__node_order(const uint32_t *node, uint32_t world, uint32_t stride,
                    uint32_t *order, uint32_t *place) {
  uint32_t at = 0;
  if (stride == 0 || world % stride != 0 || !first_ranks(node, world))
    return -EINVAL;
  sort_by_node(node, world, place, order);
  /* each group keeps the node order: place[] holds the result first */
  for (uint32_t g = 0; g < stride; g++)
    for (uint32_t k = 0; k < world; k++)
      if (order[k] % stride == g) place[at++] = order[k];
  memcpy(order, place, world * sizeof(*order));
  for (uint32_t k = 0; k < world; k++)
    place[order[k]] = k % (world / stride);
  return 0;
}
