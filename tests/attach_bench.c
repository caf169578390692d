/* attach_bench.c - a benchmark helper for scripts/bench.sh (not a test):
 * times attach + lookup of every tensor + detach through the public
 * consumer API, and a status request's round trip, against a running
 * `tpload serve` rank.  Usage: attach_bench SOCKET [ITERATIONS].
 * Prints "attach MS" and "status MS" (best of the iterations). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "client.h"
#include "tpload.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static double time_attach(const char *sock) {
  struct tpl_shard *s;
  struct tpl_tensor_view v, w;
  char msg[256];
  double t = now_ms();
  if (tpl_attach(sock, &s, msg, sizeof(msg)) != 0) {
    fprintf(stderr, "attach_bench: %s\n", msg);
    exit(69);
  }
  for (size_t i = 0; i < tpl_shard_count(s); i++)
    if (tpl_shard_tensor(s, i, &v) != 0 || tpl_shard_find(s, v.name, &w) != 0)
      exit(70);
  tpl_detach(s);
  return now_ms() - t;
}

static double time_status(const char *sock) {
  struct tpl__wire_response r;
  struct tpl_error err = {0};
  double t = now_ms();
  if (tpl__client_request(sock, TPL_REQ_STATUS, 10000, &r, &err) != 0) {
    fprintf(stderr, "attach_bench: %s\n", err.msg);
    exit(69);
  }
  t = now_ms() - t;
  tpl__wire_response_free(&r);
  return t;
}

int main(int argc, char **argv) {
  int n = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 10;
  double best_a = 1e30, best_s = 1e30;
  if (argc < 2) {
    fprintf(stderr, "usage: attach_bench SOCKET [ITERATIONS]\n");
    return 64;
  }
  for (int i = 0; i < (n > 0 ? n : 1); i++) {
    double a = time_attach(argv[1]), s = time_status(argv[1]);
    if (a < best_a) best_a = a;
    if (s < best_s) best_s = s;
  }
  printf("attach %.3f\nstatus %.3f\n", best_a, best_s);
  return 0;
}
