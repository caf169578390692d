/* attach.c - a complete C consumer of a running `tpload serve`: attach to
 * one rank, print what it holds and one tensor, detach.  README's "Using
 * the shards" quotes this file and `make install` puts it in
 * $(docdir)/examples (/usr/local/share/doc/tpload/examples);
 * tests/mpi/install.sh builds that copy as below against an installed
 * tree and runs it against a live job.  It prints what attach.py prints
 * (which names numpy's dtype: uint16 for bfloat16 without ml_dtypes).
 *
 *   cc attach.c -o attach $(pkg-config --cflags --libs tpload)
 *   ./attach /run/tp/rank0.sock lm_head.weight
 */
#include <stdio.h>
#include <tpload.h>

int main(int argc, char **argv) {
  const char *sock = argc > 1 ? argv[1] : "/run/tp/rank0.sock";
  const char *name = argc > 2 ? argv[2] : "lm_head.weight";
  struct tpl_shard *s;
  struct tpl_tensor_view v;
  unsigned long long total = 0;
  char msg[256];
  int rc = tpl_attach(sock, &s, msg, sizeof msg);
  if (rc != 0) {
    fprintf(stderr, "attach: %s\n", msg);
    return tpl_exit_code(rc);
  }
  for (size_t i = 0; i < tpl_shard_count(s); i++) /* checkpoint order */
    if (tpl_shard_tensor(s, i, &v) == 0) total += v.nbytes;
  printf("rank %u of %u: %zu tensors, %llu bytes\n", tpl_shard_rank(s),
         tpl_shard_world(s), tpl_shard_count(s), total);
  rc = tpl_shard_find(s, name, &v);
  if (rc == 0) {
    /* tpl_tensor_data(&v): read-only, in place, valid until tpl_detach;
     * v.dtype is MLC's name, v.dtype_id the same as an enum tpl_dtype */
    printf("%s %s (", v.name, v.dtype);
    for (int d = 0; d < v.ndim; d++)
      printf("%s%llu", d ? ", " : "", (unsigned long long)v.shape[d]);
    printf(") %llu bytes\n", (unsigned long long)v.nbytes);
  } else {
    fprintf(stderr, "%s: no such tensor\n", name);
  }
  tpl_detach(s);
  return tpl_exit_code(rc);
}
