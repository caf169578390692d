/* fuzz_report.c - libFuzzer target for the LoadReport readers a client
 * runs on what a daemon sends (`tpload status`): the input is a packed
 * LoadReport, rendered as JSON (tpl__report_json, with tensors) and as
 * the grid line (tpl__report_grid_line, from that JSON, whose
 * replicas_agree checks the report's grid and its replicas' checksums).  It
 * aborts when an invariant breaks: the grid line is written only on success,
 * always terminated, and starts "grid: tp "; the JSON has "replicas_agree"
 * exactly when the grid line could be made, with the same verdict. */
#include <stdlib.h>
#include <string.h>

#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char line[200];
  json_t *o = tpl__report_json(data, size, 1);
  json_t *agree = json_object_get(o, "replicas_agree");
  int rc;
  memset(line, 'x', sizeof(line));
  rc = tpl__report_grid_line(o, line, sizeof(line));
  if (rc != 0 && line[0] != 'x') abort();
  if (rc == 0 && (memchr(line, '\0', sizeof(line)) == NULL ||
                  strncmp(line, "grid: tp ", 9) != 0))
    abort();
  if ((rc == 0) != (agree != NULL)) abort();
  if (rc == 0 && json_is_true(agree) != (strstr(line, "NO") == NULL)) abort();
  json_decref(o);
  return 0;
}
