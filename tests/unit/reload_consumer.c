/* reload_consumer.c - a consumer of a `tpload serve` that reloads under
 * it, driven by tests/mpi/reload.sh.
 *
 *   reload_consumer loop SOCKET OUT STOP
 *     Attaches, reads and checksums every tensor, detaches, again, until
 *     the file STOP exists; keeps its first attachment open all along.
 *     Every attachment must be one generation's bytes whole: each
 *     tensor's bytes hash to the XXH3 its table gives, and all of its
 *     bytes equal those of the first attachment of the same generation,
 *     which it writes to OUT.gen{G} (and OUT.gen{G}.bin) as
 *     tests/oracle/consumer_check.py reads them; the held first
 *     attachment must read the same after every later one.  A daemon
 *     that does not answer in time (a rank the test stopped) is asked
 *     again.  Prints "attaches N generations G..." and exits 0, else one
 *     line on stderr and 1 (or the tpl_exit_code of a failed call).
 *
 *   reload_consumer watch SOCKET AFTER TIMEOUT_MS
 *     tpl_watch: prints the generation it returned; exits its code's
 *     tpl_exit_code (75 for a timeout). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tpload.h>
#include <unistd.h>
#include <xxhash.h>

#define MAX_GEN 64

struct seen {
  uint64_t digest[MAX_GEN]; /* of the first attachment of generation g */
  int have[MAX_GEN];
  unsigned long attaches;
};

static int fail(int rc, const char *what, const char *msg) {
  fprintf(stderr, "reload_consumer: %s: %s\n", what,
          msg[0] ? msg : tpl_strerror(rc));
  return tpl_exit_code(rc) ? tpl_exit_code(rc) : 1;
}

/* Every tensor's bytes against its checksum, all of them into one
 * digest (names, sizes and bytes).  1 on a mismatch, with its name. */
static int digest_of(const struct tpl_shard *s, uint64_t *out, char *why,
                     size_t len) {
  XXH3_state_t *st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (size_t i = 0; i < tpl_shard_count(s); i++) {
    struct tpl_tensor_view v;
    tpl_shard_tensor(s, i, &v);
    if (XXH3_64bits(v.data, (size_t)v.nbytes) != v.xxh3) {
      snprintf(why, len, "tensor '%s': bytes do not hash to its xxh3", v.name);
      XXH3_freeState(st);
      return 1;
    }
    XXH3_64bits_update(st, v.name, strlen(v.name) + 1);
    XXH3_64bits_update(st, &v.nbytes, sizeof(v.nbytes));
    if (v.nbytes) XXH3_64bits_update(st, v.data, (size_t)v.nbytes);
  }
  *out = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return 0;
}

/* OUT.gen{g} and its .bin, as tests/lib/consumer.c writes them. */
static int write_listing(const struct tpl_shard *s, const char *out,
                         uint64_t g) {
  char path[4096], bin[4200];
  FILE *list, *b;
  snprintf(path, sizeof(path), "%s.gen%llu.tmp", out, (unsigned long long)g);
  snprintf(bin, sizeof(bin), "%s.gen%llu.bin", out, (unsigned long long)g);
  list = fopen(path, "w");
  b = fopen(bin, "wb");
  if (list == NULL || b == NULL) return 1;
  for (size_t i = 0; i < tpl_shard_count(s); i++) {
    struct tpl_tensor_view v;
    tpl_shard_tensor(s, i, &v);
    fprintf(list, "%s\t%s\t%d\t", v.name, v.dtype, (int)v.dtype_id);
    if (v.ndim == 0) fputc('-', list);
    for (int d = 0; d < v.ndim; d++)
      fprintf(list, "%s%llu", d ? "," : "", (unsigned long long)v.shape[d]);
    fprintf(list, "\t%llu\t%016llx\n", (unsigned long long)v.nbytes,
            (unsigned long long)v.xxh3);
    if (v.nbytes) fwrite(v.data, 1, (size_t)v.nbytes, b);
  }
  fclose(b);
  if (fclose(list) != 0) return 1;
  /* the listing appears last, whole: the test waits for it */
  snprintf(bin, sizeof(bin), "%s.gen%llu", out, (unsigned long long)g);
  return rename(path, bin) != 0;
}

/* One attachment of generation g: its digest against the first one's. */
static int check(struct seen *sn, const struct tpl_shard *s, const char *out,
                 char *why, size_t len) {
  uint64_t g = tpl_shard_generation(s), d;
  if (g == 0 || g >= MAX_GEN) {
    snprintf(why, len, "generation %llu", (unsigned long long)g);
    return 1;
  }
  if (digest_of(s, &d, why, len)) return 1;
  if (!sn->have[g]) {
    sn->have[g] = 1;
    sn->digest[g] = d;
    if (write_listing(s, out, g)) {
      snprintf(why, len, "cannot write %s.gen%llu", out, (unsigned long long)g);
      return 1;
    }
  } else if (sn->digest[g] != d) {
    snprintf(why, len,
             "attachment %lu of generation %llu: its bytes differ from the "
             "first one's",
             sn->attaches, (unsigned long long)g);
    return 1;
  }
  return 0;
}

static int loop(const char *sock, const char *out, const char *stop) {
  struct seen sn = {0};
  struct tpl_shard *first, *s;
  char msg[512], why[512] = "";
  int rc = tpl_attach(sock, &first, msg, sizeof(msg));
  if (rc != 0) return fail(rc, sock, msg);
  if (check(&sn, first, out, why, sizeof(why))) return fail(1, "first", why);
  while (access(stop, F_OK) != 0) {
    rc = tpl_attach(sock, &s, msg, sizeof(msg));
    if (rc == TPL_EUNREACHABLE && access(sock, F_OK) == 0) continue;
    if (rc != 0) return fail(rc, sock, msg);
    sn.attaches++;
    if (check(&sn, s, out, why, sizeof(why))) return fail(1, sock, why);
    tpl_detach(s);
    if (check(&sn, first, out, why, sizeof(why)))
      return fail(1, "the first attachment", why);
    usleep(1000); /* leave the ranks some of the machine */
  }
  printf("attaches %lu generations", sn.attaches);
  for (int g = 0; g < MAX_GEN; g++)
    if (sn.have[g]) printf(" %d", g);
  printf("\n");
  tpl_detach(first);
  return 0;
}

static int watch(const char *sock, const char *after, const char *ms) {
  char msg[512];
  uint64_t g = 0;
  int rc = tpl_watch(sock, strtoull(after, NULL, 10), atoi(ms), &g, msg,
                     sizeof(msg));
  printf("%llu\n", (unsigned long long)g);
  if (rc != 0) fail(rc, sock, msg);
  return tpl_exit_code(rc);
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "loop") == 0)
    return loop(argv[2], argv[3], argv[4]);
  if (argc == 5 && strcmp(argv[1], "watch") == 0)
    return watch(argv[2], argv[3], argv[4]);
  fprintf(stderr, "usage: reload_consumer loop SOCKET OUT STOP | watch "
                  "SOCKET AFTER TIMEOUT_MS\n");
  return 64;
}
