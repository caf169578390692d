/* fuzz_report.c - libFuzzer target for the LoadReport readers a client
 * runs on what a daemon sends (`tpload status`): the input is a packed
 * LoadReport, decoded (tpl__report_decode), rendered as JSON and as the
 * grid line, and cut to its summary (tpl__report_summary).  It aborts
 * when an invariant breaks: a report that decodes has its grid's ranks,
 * per-tensor facts exactly when it has tensors, JSON whose
 * replicas_agree is the decoded verdict, a terminated grid line starting
 * "grid: tp " that says "NO" exactly when the replicas disagree; and its
 * summary decodes too, with the same ranks and no tensors. */
#include <stdlib.h>
#include <string.h>

#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_summary(const uint8_t *data, size_t size,
                          const struct tpl__report *full) {
  struct tpl__report *sum = NULL;
  uint8_t *b = NULL;
  size_t len = 0;
  if (tpl__report_summary(data, size, &b, &len) != 0) abort();
  if (tpl__report_decode(b, len, &sum, NULL) != 0) abort();
  if (sum->ntensors != 0 || sum->infos != NULL ||
      sum->grid.world != full->grid.world)
    abort();
  for (uint32_t k = 0; k < sum->grid.world; k++)
    if (sum->ranks[k].tensor_count != full->ranks[k].tensor_count) abort();
  tpl__report_free(sum);
  free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct tpl__report *r = NULL;
  char line[200];
  json_t *o;
  if (tpl__report_decode(data, size, &r, NULL) != 0) return 0;
  if (r->grid.world == 0 || (r->ntensors > 0) != (r->infos != NULL)) abort();
  o = tpl__report_json(r, NULL);
  if (o == NULL ||
      json_is_true(json_object_get(o, "replicas_agree")) != (r->agree == 0))
    abort();
  memset(line, 'x', sizeof(line));
  tpl__report_grid_line(r, line, sizeof(line));
  if (memchr(line, '\0', sizeof(line)) == NULL ||
      strncmp(line, "grid: tp ", 9) != 0 ||
      (strstr(line, "NO") != NULL) != (r->agree != 0 && r->grid.dp > 1))
    abort();
  check_summary(data, size, r);
  json_decref(o);
  tpl__report_free(r);
  return 0;
}
