/* consumer.c - a consumer as a user writes it, against the installed
 * libtpload only (tests/mpi/install.sh builds it with `pkg-config --cflags
 * --libs tpload`, outside the build tree).
 *
 *   consumer SOCKET OUT [--shutdown]
 *
 * Calls every function of tpload.h (mpi/install.sh checks that it refers to
 * each).  Checks two error codes against the header's table, probes the
 * rank serving SOCKET (tpl_health), attaches, and writes what it holds:
 * OUT gets one line a tensor, "name<TAB>dtype<TAB>dtype_id<TAB>shape<TAB>
 * nbytes<TAB>xxh3" (shape as d0,d1,... or "-" for a scalar), OUT.bin the
 * tensors' bytes back to back, for tests/oracle/consumer_check.py to
 * compare with the numpy oracle (and the generation, 1, with a watch
 * that times out); stdout gets "rank R of W: B bytes, job
 * ID, model M" (B: the store's size).
 * With --shutdown it then asks the job to stop through SOCKET.  Exits
 * tpl_exit_code() of the first failure, with one line on stderr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tpload.h>

static int fail(int rc, const char *what, const char *msg) {
  fprintf(stderr, "consumer: %s: %s\n", what, msg[0] ? msg : tpl_strerror(rc));
  return tpl_exit_code(rc) ? tpl_exit_code(rc) : 1;
}

static void write_entry(FILE *list, FILE *bin,
                        const struct tpl_tensor_view *v) {
  fprintf(list, "%s\t%s\t%d\t", v->name, v->dtype, (int)v->dtype_id);
  if (v->ndim == 0) fputc('-', list);
  for (int d = 0; d < v->ndim; d++)
    fprintf(list, "%s%llu", d ? "," : "", (unsigned long long)v->shape[d]);
  fprintf(list, "\t%llu\t%016llx\n", (unsigned long long)v->nbytes,
          (unsigned long long)v->xxh3);
  if (v->nbytes > 0) fwrite(tpl_tensor_data(v), 1, (size_t)v->nbytes, bin);
}

/* Every tensor by index, and found again by name at the same address. */
static int write_all(const struct tpl_shard *s, FILE *list, FILE *bin) {
  struct tpl_tensor_view v, w;
  for (size_t i = 0; i < tpl_shard_count(s); i++) {
    if (tpl_shard_tensor(s, i, &v) != 0) return fail(-1, "tensor", "index");
    if (tpl_shard_find(s, v.name, &w) != 0 ||
        tpl_tensor_data(&w) != tpl_tensor_data(&v) || w.data != v.data)
      return fail(-1, v.name, "tpl_shard_find disagrees with the index");
    write_entry(list, bin, &v);
  }
  if (tpl_shard_tensor(s, tpl_shard_count(s), &v) == 0 ||
      tpl_shard_find(s, "no such tensor", &w) == 0)
    return fail(-1, "lookup", "a missing tensor was found");
  return 0;
}

/* The library's text and exit code of two codes, as the header's
 * TPL_ERRNO_MAP gives them. */
static int check_codes(void) {
  if (strcmp(tpl_version(), TPL_VERSION_STRING) != 0)
    return fail(-1, "version", "header and library disagree");
  if (tpl_exit_code(0) != 0 || tpl_exit_code(TPL_EUNREACHABLE) != 69 ||
      strcmp(tpl_strerror(TPL_EUNREACHABLE), "daemon unreachable") != 0 ||
      tpl_exit_code(TPL_EPROTO) != 69)
    return fail(-1, "codes", "tpl_strerror/tpl_exit_code differ from tpload.h");
  return 0;
}

static int stop_job(const char *socket_path) {
  char msg[512];
  int rc = tpl_shutdown(socket_path, msg, sizeof msg);
  return rc != 0 ? fail(rc, "shutdown", msg) : 0;
}

/* A job that has not reloaded: generation 1, and a watch for the next
 * one that may not wait times out at once, naming generation 1. */
static int check_generation(const char *sock, const struct tpl_shard *s) {
  uint64_t g = 0;
  char msg[512];
  int rc;
  if (tpl_shard_generation(s) != 1)
    return fail(-1, "generation", "expected 1 before any reload");
  rc = tpl_watch(sock, 1, 0, &g, msg, sizeof msg);
  if (rc != -ETIMEDOUT || g != 1)
    return fail(rc != 0 ? rc : -1, "watch",
                rc != 0 ? msg : "expected a timeout at generation 1");
  return 0;
}

int main(int argc, char **argv) {
  struct tpl_health h;
  struct tpl_shard *s;
  char msg[512], bin_path[4096];
  FILE *list, *bin;
  int rc;
  if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "--shutdown"))) {
    fprintf(stderr, "usage: consumer SOCKET OUT [--shutdown]\n");
    return 64;
  }
  if ((rc = check_codes()) != 0) return rc;
  if ((rc = tpl_health(argv[1], &h, msg, sizeof msg)) != 0)
    return fail(rc, "health", msg);
  if ((rc = tpl_attach(argv[1], &s, msg, sizeof msg)) != 0)
    return fail(rc, "attach", msg);
  if (tpl_shard_rank(s) != h.rank || tpl_shard_world(s) != h.world ||
      tpl_shard_bytes(s) != h.bytes)
    return fail(-1, "attach", "rank, world or bytes differ from health");
  if ((rc = check_generation(argv[1], s)) != 0) return rc;
  snprintf(bin_path, sizeof bin_path, "%s.bin", argv[2]);
  list = fopen(argv[2], "w");
  bin = fopen(bin_path, "wb");
  if (list == NULL || bin == NULL) return fail(-1, argv[2], "cannot write");
  rc = write_all(s, list, bin);
  printf("rank %u of %u: %zu bytes, job %s, model %s\n", h.rank, h.world,
         (size_t)h.bytes, tpl_shard_job_id(s), tpl_shard_model(s));
  tpl_detach(s);
  if (fclose(list) != 0 || fclose(bin) != 0)
    return fail(-1, argv[2], "cannot write");
  if (rc == 0 && argc == 4) rc = stop_job(argv[1]);
  return rc;
}
