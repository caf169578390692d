/* attach_bench.c - a benchmark helper for scripts/bench.sh and
 * scripts/bench-latency.sh (not a test): times attach + lookup of every
 * tensor + detach through the public consumer API, and a status
 * request's round trip (the summary `tpload status` asks for), against a
 * running `tpload serve` rank.
 * Usage: attach_bench SOCKET [ITERATIONS] [--all]
 * Prints "attach MS" and "status MS", the best of the iterations; with
 * --all also "first MS" (the process's first attach, on cold memory),
 * "attach_median MS", "cpu MS" / "cpu_median MS" (this process's CPU
 * time per attach + lookups: what other load on the machine changes
 * least), "status_median MS" and "full MS" / "full_median MS" (a status
 * with every tensor's ShardInfo, what `status --json` asks).
 * attach_bench SOCKET --loop STOP OUT (scripts/bench-reload.sh): attaches,
 * looks up every tensor and reads its first 4 KiB, detaches, 1 ms
 * apart, until the file STOP exists; OUT gets one line per attach:
 * "START_MS LATENCY_MS GENERATION" (CLOCK_REALTIME, for lining up with a
 * reload's start and end). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "tpload.h"

#define MAX_ITER 1000

static double clock_ms(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static double now_ms(void) {
  return clock_ms(CLOCK_MONOTONIC);
}

/* Wall milliseconds of one attach + lookups + detach; *cpu gets this
 * process's CPU milliseconds for it. */
static double time_attach(const char *sock, double *cpu) {
  struct tpl_shard *s;
  struct tpl_tensor_view v, w;
  char msg[256];
  double c = clock_ms(CLOCK_PROCESS_CPUTIME_ID), t = now_ms();
  if (tpl_attach(sock, &s, msg, sizeof(msg)) != 0) {
    fprintf(stderr, "attach_bench: %s\n", msg);
    exit(69);
  }
  for (size_t i = 0; i < tpl_shard_count(s); i++)
    if (tpl_shard_tensor(s, i, &v) != 0 || tpl_shard_find(s, v.name, &w) != 0)
      exit(70);
  tpl_detach(s);
  t = now_ms() - t;
  *cpu = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c;
  return t;
}

static double time_status(const char *sock, unsigned flags) {
  struct tpl__wire_response r;
  struct tpl__error err = {0};
  double t = now_ms();
  if (tpl__client_request_flags(sock, TPL_REQ_STATUS, flags, 10000, &r, &err) !=
      0) {
    fprintf(stderr, "attach_bench: %s\n", err.msg);
    exit(69);
  }
  t = now_ms() - t;
  tpl__wire_response_free(&r);
  return t;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts v[0..n) and prints its best and, with `all`, its median. */
static void print_figure(const char *name, double *v, int n, int all) {
  qsort(v, (size_t)n, sizeof(*v), by_value);
  printf("%s %.3f\n", name, v[0]);
  if (all) printf("%s_median %.3f\n", name, v[n / 2]);
}

/* One attach + lookups + a read of each tensor's first 4 KiB. */
static double read_some(const char *sock, uint64_t *gen, uint64_t *sum) {
  struct tpl_shard *s;
  struct tpl_tensor_view v, w;
  char msg[256];
  double t = now_ms();
  if (tpl_attach(sock, &s, msg, sizeof(msg)) != 0) {
    fprintf(stderr, "attach_bench: %s\n", msg);
    exit(69);
  }
  for (size_t i = 0; i < tpl_shard_count(s); i++) {
    if (tpl_shard_tensor(s, i, &v) != 0 || tpl_shard_find(s, v.name, &w) != 0)
      exit(70);
    for (uint64_t k = 0; k < v.nbytes && k < 4096; k += 64)
      *sum += ((const uint8_t *)v.data)[k];
  }
  *gen = tpl_shard_generation(s);
  tpl_detach(s);
  return now_ms() - t;
}

static int attach_loop(const char *sock, const char *stop, const char *out) {
  FILE *f = fopen(out, "w");
  uint64_t sum = 0, gen = 0;
  if (f == NULL) return 73;
  while (access(stop, F_OK) != 0) {
    double at = clock_ms(CLOCK_REALTIME), ms = read_some(sock, &gen, &sum);
    fprintf(f, "%.3f %.3f %llu\n", at, ms, (unsigned long long)gen);
    usleep(1000);
  }
  fclose(f);
  return sum == 1 ? 1 : 0; /* keeps the reads */
}

int main(int argc, char **argv) {
  static double att[MAX_ITER], cpu[MAX_ITER], st[MAX_ITER], full[MAX_ITER];
  int n = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 10;
  int all = argc > 3 && strcmp(argv[3], "--all") == 0;
  double first, first_cpu;
  if (argc == 5 && strcmp(argv[2], "--loop") == 0)
    return attach_loop(argv[1], argv[3], argv[4]);
  if (argc < 2) {
    fprintf(stderr, "usage: attach_bench SOCKET [ITERATIONS] [--all]\n");
    return 64;
  }
  n = n < 1 ? 1 : n > MAX_ITER ? MAX_ITER : n;
  first = time_attach(argv[1], &first_cpu);
  for (int i = 0; i < n; i++) {
    att[i] = time_attach(argv[1], &cpu[i]);
    st[i] = time_status(argv[1], TPL_REQ_F_SUMMARY);
  }
  /* Apart: megabytes of report per request would disturb the others. */
  for (int i = 0; all && i < n; i++)
    full[i] = time_status(argv[1], 0);
  if (all) printf("first %.3f\n", first);
  print_figure("attach", att, n, all);
  if (all) print_figure("cpu", cpu, n, all);
  print_figure("status", st, n, all);
  if (all) print_figure("full", full, n, all);
  return 0;
}
