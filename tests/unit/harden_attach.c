/* harden_attach.c - test helper: attaches to a daemon socket through the
 * public consumer API and prints what identifies the job, one field a
 * line: job id, model, rank, world.  Exit 0, or the error's exit code
 * after printing why. */
#include <stdio.h>

#include "tpload.h"

int main(int argc, char **argv) {
  struct tpl_shard *s;
  char msg[512];
  int rc;
  if (argc != 2) {
    fprintf(stderr, "usage: harden_attach SOCKET\n");
    return 64;
  }
  rc = tpl_attach(argv[1], &s, msg, sizeof(msg));
  if (rc != 0) {
    fprintf(stderr, "harden_attach: %s\n", msg);
    return tpl_exit_code(rc);
  }
  printf("%s\n%s\n%u\n%u\n", tpl_shard_job_id(s), tpl_shard_model(s),
         tpl_shard_rank(s), tpl_shard_world(s));
  tpl_detach(s);
  return 0;
}
