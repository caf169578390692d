/* fuzz_topology.c - libFuzzer target for src/topology.c.  The input is
 * world, tp, pp and layers (one byte each, so every loop stays small), a
 * tied flag, then a tensor name (the rest, cut at TPL_MAX_NAME).  It
 * aborts when an invariant breaks: tpl__grid_make accepts exactly the
 * worlds tp * pp divides, every rank's coordinate lies inside the grid and
 * gives the rank back as (d * pp + p) * tp + t, tpl__stage_check accepts
 * exactly 1 <= pp <= layers with pp dividing layers, every decoder layer's
 * tensor is on the one stage layer / (layers / pp) (< pp), and
 * tpl__tensor_stages never overruns the name and returns a non-empty range
 * inside [0, pp) or TPL_EPLAN with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_grid(uint32_t world, uint32_t tp, uint32_t pp) {
  struct tpl__grid g;
  int want_ok = tp && pp && world && world % (tp * pp) == 0;
  int rc = tpl__grid_make(world, tp, pp, NULL, &g);
  if ((rc == 0) != want_ok || (rc != 0 && rc != TPL_EUSAGE)) abort();
  if (rc != 0) return;
  if (g.tp * g.pp * g.dp != world) abort();
  for (uint32_t r = 0; r < world; r++) {
    struct tpl__pos c = tpl__grid_coord(&g, r);
    if (c.d >= g.dp || c.p >= g.pp || c.t >= g.tp) abort();
    if ((c.d * g.pp + c.p) * g.tp + c.t != r) abort();
  }
}

static void check_layers(uint32_t layers, uint32_t pp) {
  int want_ok = pp >= 1 && pp <= layers && layers % pp == 0;
  /* no layers is the model's fault (65), a bad --pp the user's (64) */
  int want_rc = layers == 0 ? TPL_EFORMAT : TPL_EUSAGE;
  int rc = tpl__stage_check(layers, pp, NULL);
  if ((rc == 0) != want_ok || (rc != 0 && rc != want_rc)) abort();
  if (rc != 0) return;
  for (uint32_t i = 0; i < layers; i++) {
    char name[48];
    struct tpl__stages s = {0, 0};
    snprintf(name, sizeof(name), "model.layers.%u.mlp.down_proj.weight", i);
    if (tpl__tensor_stages(name, layers, 0, pp, 0, NULL, &s) != 0) abort();
    if (s.count != 1 || s.first >= pp || s.first != i / (layers / pp)) abort();
  }
}

static void check_name(const char *name, uint32_t layers, uint32_t pp,
                       int tied) {
  struct tpl__stages s = {0, 0};
  struct tpl__error err = {0};
  if (tpl__stage_check(layers, pp, NULL) != 0) return;
  int rc = tpl__tensor_stages(name, layers, 0, pp, tied, &err, &s);
  if (rc == TPL_EPLAN && err.msg[0] != '\0') return;
  if (rc != 0 || s.count == 0 || s.first + s.count > pp) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char name[TPL_MAX_NAME + 1];
  if (size < 5) return 0;
  uint32_t world = data[0], tp = data[1] % 17, pp = data[2] % 17;
  uint32_t layers = data[3];
  int tied = data[4] & 1;
  size_t len = size - 5 < TPL_MAX_NAME ? size - 5 : TPL_MAX_NAME;
  memcpy(name, data + 5, len);
  name[len] = '\0';
  check_grid(world, tp, pp);
  check_layers(layers, pp);
  check_name(name, layers, pp, tied);
  return 0;
}
