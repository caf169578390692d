/* test_local_read.c - `--read local` on one rank (local_read.c): each
 * rank's slices of a hand-written file land in its store as the tables
 * below say, whatever the read step (straight reads, reads piece by piece
 * and window gathers alike), final tensors are hashed as they land and the
 * others handed to `finish`; and the refusals: a missing file or a directory
 * (66), another size or modification time (65), a job without files, a file
 * that shrinks under the read (-EIO naming file and tensor) or changes before
 * the read ends (-EIO, 74, as in the default path).  Reads go through a
 * source (source.h), buffered and direct; --io's names parse.  From a URL
 * (a fake ranged source recording its GETs): a GET per piece of a dim-1
 * cut, more than are kept in flight, finished oldest first; pieces a
 * short gap apart joined; no byte of another rank's pieces whatever the
 * step; a failed GET named with its tensor, every GET finished. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "dtype.h"
#include "local_read.h"
#include "origin.h"
#include "source.h"
#include "store.h"
#include "tap.h"
#include "tmpdir.h"

/* The file: 8 bytes of header, then
 *   A  u8 [2, 6] = 0..11 at 8, cut along dim 1 (2 shards);
 *   B  u8 [4, 2] = 100..107 at 20, cut along dim 0;
 *   C  f32 [2] = {2, 4} at 28, a scale_bias bias (not final: finish). */
#define FILE_BYTES 36
static const uint8_t want_a[2][6] = {{0, 1, 2, 6, 7, 8}, {3, 4, 5, 9, 10, 11}};
static const uint8_t want_b[2][4] = {{100, 101, 102, 103},
                                     {104, 105, 106, 107}};

static char *dir;
static char path[1024];
static struct tpl__job_tensor tensors[3];
static struct tpl__job_file files[1];
static struct tpl__job job;

static void write_model(void) {
  uint8_t buf[FILE_BYTES] = {0};
  float c[2] = {2.0f, 4.0f};
  for (int k = 0; k < 12; k++)
    buf[8 + k] = (uint8_t)k;
  for (int k = 0; k < 8; k++)
    buf[20 + k] = (uint8_t)(100 + k);
  memcpy(buf + 28, c, sizeof(c));
  write_bytes(dir, "w.bin", buf, sizeof(buf));
}

static void set_tensor(int i, const char *name, int dtype, uint64_t r,
                       uint64_t c, int kind, uint64_t off) {
  struct tpl__job_tensor *t = &tensors[i];
  memset(t, 0, sizeof(*t));
  t->name = (char *)name;
  t->dtype = dtype;
  t->ndim = c ? 2 : 1;
  t->shape[0] = r;
  t->shape[1] = c;
  t->kind = kind;
  t->func_name = kind == TPL_RULE_SHARD ? "_shard" : NULL;
  t->spec.dim = i == 0 ? 1 : 0;
  t->file_offset = off;
}

/* The job on a world of 2 ranks, 2 shards, with the file as validated. */
static void make_job(void) {
  struct stat st;
  write_model();
  stat(path, &st);
  files[0] = (struct tpl__job_file){
      .path = path,
      .size = (uint64_t)st.st_size,
      .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec};
  set_tensor(0, "A", TPL_DT_U8, 2, 6, TPL_RULE_SHARD, 8);
  set_tensor(1, "B", TPL_DT_U8, 4, 2, TPL_RULE_SHARD, 20);
  set_tensor(2, "C", TPL_DT_F32, 2, 0, TPL_RULE_SCALE_BIAS, 28);
  tensors[2].bias = TPL_BIAS_SCALE;
  memset(&job, 0, sizeof(job));
  job.grid = (struct tpl__grid){2, 2, 1, 1, 0};
  job.bias_family = TPL_BIASF_MLC;
  job.tensors = tensors;
  job.ntensors = 3;
  job.files = files;
  job.nfiles = 1;
  if (tpl__job_finish(&job, NULL) != 0) abort();
}

struct finished {
  int calls, index;
};

static int record_finish(void *ctx, size_t i, struct tpl__error *err) {
  struct finished *f = ctx;
  (void)err;
  f->calls++;
  f->index = (int)i;
  return 0;
}

/* The read window: room for a direct step and the source's slack (two
 * alignments), aligned as O_DIRECT buffers must be. */
static uint8_t window[4 * 4096] __attribute__((aligned(4096)));

/* A source over the one file (source.h) reading as `mode` says. */
static struct tpl__source *open_source(struct tpl__fdcache *held, int mode) {
  static const char *paths[1] = {path};
  struct tpl__source *src = NULL;
  struct tpl__error err = {0};
  if (tpl__source_files_open(&src, held, paths, 1, mode, &err) != 0) abort();
  return src;
}

/* Rank `rank` reads with read steps of `step` bytes, strided slices of
 * pieces of piece_min bytes or more piece by piece (buffered) or every
 * step through the window (direct); its store is checked against the
 * tables. */
static void check_rank(uint32_t rank, uint64_t step, uint64_t piece_min,
                       int mode) {
  struct tpl__store s = {.fd = -1};
  struct finished fin = {0, -1};
  struct tpl__fdcache *held = NULL;
  struct tpl__local_read lr = {.job = &job,
                               .rank = rank,
                               .store = &s,
                               .window = window,
                               .window_len = step,
                               .direct_len = step,
                               .piece_min = piece_min,
                               .finish = record_finish,
                               .ctx = &fin};
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__store_create_private(&s, job.store_size, 3, &err), 0);
  CHECK_EQ_INT(tpl__local_open(&job, &held, &err), 0);
  lr.files = held;
  lr.src = open_source(held, mode);
  CHECK(step + tpl__source_slack(lr.src) <= sizeof(window));
  if (mode == TPL_IO_DIRECT && lr.src->note[0] == '\0')
    CHECK(tpl__source_direct(lr.src, 0)); /* else refused, and it says so */
  CHECK_EQ_INT(tpl__local_read_all(&lr, &err), 0);
  CHECK(memcmp(s.base + tensors[0].store_offset, want_a[rank], 6) == 0);
  CHECK(memcmp(s.base + tensors[1].store_offset, want_b[rank], 4) == 0);
  CHECK_EQ_U64(s.xxh3[0], XXH3_64bits(want_a[rank], 6));
  CHECK_EQ_U64(s.xxh3[1], XXH3_64bits(want_b[rank], 4));
  CHECK_EQ_INT(fin.calls, 1); /* C only: its bytes need scaling */
  CHECK_EQ_INT(fin.index, 2);
  CHECK(memcmp(s.base + tensors[2].store_offset, "\0\0\0\x40\0\0\x80\x40", 8) ==
        0); /* read as stored: 2.0f, 4.0f */
  CHECK(lr.bytes_read >= 6 + 4 + 8);
  if (tap_case_failed)
    printf("# rank %u, step %llu, --io %d\n", rank, (unsigned long long)step,
           mode);
  tpl__source_close(lr.src);
  tpl__fdcache_free(held);
  tpl__store_free(&s);
}

/* Steps of 1 .. 13 bytes: slices straddle, fill and skip windows, read
 * straight or gathered (a step of 12 holds both rows of A); A's 3-byte
 * pieces read one by one (piece_min 1 and 3) or through the window (4);
 * each buffered and direct (O_DIRECT where the file system takes it:
 * every tensor starts at an unaligned offset, and the file ends at one). */
static void test_slices_land_as_the_tables_say(void) {
  static const uint64_t piece_mins[] = {1, 3, 4};
  static const int modes[] = {TPL_IO_BUFFERED, TPL_IO_DIRECT};
  make_job();
  for (size_t m = 0; m < ARRAY_SIZE(modes); m++)
    for (uint64_t step = 1; step <= 13; step++)
      for (size_t k = 0; k < ARRAY_SIZE(piece_mins); k++)
        for (uint32_t rank = 0; rank < 2; rank++)
          check_rank(rank, step, piece_mins[k], modes[m]);
}

static void test_io_modes_parse(void) {
  int mode = -1;
  CHECK_EQ_INT(tpl__io_mode_parse("auto", &mode), 0);
  CHECK_EQ_INT(mode, TPL_IO_AUTO);
  CHECK_EQ_INT(tpl__io_mode_parse("direct", &mode), 0);
  CHECK_EQ_INT(mode, TPL_IO_DIRECT);
  CHECK_EQ_INT(tpl__io_mode_parse("buffered", &mode), 0);
  CHECK_EQ_INT(mode, TPL_IO_BUFFERED);
  CHECK_EQ_INT(tpl__io_mode_parse("Direct", &mode), -1);
  CHECK_EQ_INT(tpl__io_mode_parse("", &mode), -1);
}

static void test_missing_file_is_66(void) {
  struct tpl__error err = {0};
  struct tpl__fdcache *held = NULL;
  make_job();
  unlink(path);
  CHECK_EQ_INT(tpl__local_open(&job, &held, &err), TPL_ENOMODEL);
  CHECK_STR_CONTAINS(err.msg, path);
  CHECK_STR_CONTAINS(err.msg, "cannot open");
  CHECK_STR_CONTAINS(err.msg, "--read local");
  CHECK(held == NULL);
}

static void test_directory_is_66(void) {
  struct tpl__error err = {0};
  struct tpl__fdcache *held = NULL;
  make_job();
  unlink(path);
  mkdir(path, 0700);
  CHECK_EQ_INT(tpl__local_open(&job, &held, &err), TPL_ENOMODEL);
  CHECK_STR_CONTAINS(err.msg, path);
  rmdir(path);
}

static void test_other_size_is_65(void) {
  struct tpl__error err = {0};
  struct tpl__fdcache *held = NULL;
  make_job();
  files[0].size = FILE_BYTES + 1;
  CHECK_EQ_INT(tpl__local_open(&job, &held, &err), TPL_EMISMATCH);
  CHECK_STR_CONTAINS(err.msg, "36 bytes here, 37 on rank 0");
  tpl__fdcache_free(held);
}

static void test_other_time_is_65(void) {
  struct tpl__error err = {0};
  struct tpl__fdcache *held = NULL;
  make_job();
  files[0].mtime_ns += 1;
  CHECK_EQ_INT(tpl__local_open(&job, &held, &err), TPL_EMISMATCH);
  CHECK_STR_CONTAINS(err.msg, "modified at another time");
  tpl__fdcache_free(held);
}

static void test_job_without_files_is_internal(void) {
  struct tpl__error err = {0};
  struct tpl__fdcache *held = NULL;
  make_job();
  job.nfiles = 0;
  CHECK_EQ_INT(tpl__local_open(&job, &held, &err), TPL_EINTERNAL);
  CHECK_STR_CONTAINS(err.msg, "no files");
}

/* run_after_open: opens, lets `change` alter the file, then reads as rank
 * 1 and returns the read's result with its message in err. */
static int read_after(void (*change)(void), int mode, struct tpl__error *err) {
  struct tpl__store s = {.fd = -1};
  struct finished fin = {0, -1};
  struct tpl__fdcache *held = NULL;
  int rc;
  struct tpl__local_read lr = {.job = &job,
                               .rank = 1,
                               .store = &s,
                               .window = window,
                               .window_len = 64,
                               .direct_len = 64,
                               .finish = record_finish,
                               .ctx = &fin};
  make_job();
  if (tpl__store_create_private(&s, job.store_size, 3, err) != 0 ||
      tpl__local_open(&job, &held, err) != 0)
    return 1;
  lr.files = held;
  lr.src = open_source(held, mode);
  change();
  rc = tpl__local_read_all(&lr, err);
  tpl__source_close(lr.src);
  tpl__fdcache_free(held);
  tpl__store_free(&s);
  return rc;
}

static void shrink(void) {
  if (truncate(path, 12) != 0) abort();
}

static void touch(void) {
  struct timespec t[2] = {{0, UTIME_OMIT}, {12345, 0}};
  if (utimensat(AT_FDCWD, path, t, 0) != 0) abort();
}

/* Cut inside A: a buffered pread and a direct read of A's aligned
 * superset both come short of what A needs: the file ending early is its
 * own code (exit 74, as an I/O error), told apart from the device's EIO. */
static void test_file_that_shrinks_is_short(void) {
  static const int modes[] = {TPL_IO_BUFFERED, TPL_IO_DIRECT};
  for (size_t m = 0; m < ARRAY_SIZE(modes); m++) {
    struct tpl__error err = {0};
    CHECK_EQ_INT(read_after(shrink, modes[m], &err), TPL_ESHORT);
    CHECK_STR_CONTAINS(err.msg, path);
    CHECK_STR_CONTAINS(err.msg, "tensor 'A'");
    CHECK_STR_CONTAINS(err.msg, "shrank");
  }
  CHECK_EQ_INT(tpl_exit_code(TPL_ESHORT), 74);
}

static void test_file_changed_during_the_read_is_74(void) {
  struct tpl__error err = {0};
  CHECK_EQ_INT(read_after(touch, TPL_IO_BUFFERED, &err), -EIO);
  CHECK_STR_CONTAINS(err.msg, path);
  CHECK_STR_CONTAINS(err.msg, "changed while loading (modified at another");
}

/* --- from a URL: a fake ranged source (source.h) over bytes in memory
 * that records every GET, finishes them only when asked (as the HTTP
 * client does: several in flight) and can fail the n-th --- */

#define D_ROWS 80 /* more GETs than local_read.c keeps in flight (64) */
#define E_AT (8 + D_ROWS * 2048)
#define URL_BYTES (E_AT + 2 * 16)
#define MAX_GETS 256

struct fake_gets {
  struct tpl__source base;
  uint8_t used[1];
  uint64_t align[1];
  uint8_t bytes[URL_BYTES];
  uint64_t off[MAX_GETS], len[MAX_GETS];
  int started, finished, fail_at; /* fail_at: the GET that fails, or -1 */
  int out_of_order;               /* GETs finished before an older one */
};

static uint8_t *fake_place(struct tpl__source *s, uint32_t file, uint8_t *buf,
                           uint64_t off) {
  return buf;
}

static int fake_start(struct tpl__source *s, struct tpl__read *r,
                      struct tpl__error *err) {
  struct fake_gets *g = (struct fake_gets *)s;
  int n = g->started++;
  if (n >= MAX_GETS || r->off + r->len > URL_BYTES) abort();
  g->off[n] = r->off;
  g->len[n] = r->len;
  memcpy(r->priv, &n, sizeof(n));
  return 0;
}

static int fake_finish(struct tpl__source *s, struct tpl__read *r,
                       struct tpl__error *err) {
  struct fake_gets *g = (struct fake_gets *)s;
  int n;
  memcpy(&n, r->priv, sizeof(n));
  if (n != g->finished) g->out_of_order++;
  g->finished++;
  if (n == g->fail_at)
    return tpl__fail(err, -EIO, "http://store/w.bin: cut at %llu",
                     (unsigned long long)r->off);
  memcpy(r->dst, g->bytes + r->off, r->len);
  return 0;
}

static void fake_close(struct tpl__source *s) {}

static void fake_hint(struct tpl__source *s, uint32_t file, uint64_t off,
                      uint64_t len) {}

static struct fake_gets fake;
static size_t fake_file_spans; /* what fake_spans says of the file */

static size_t fake_spans(struct tpl__source *s, uint32_t file) {
  return fake_file_spans;
}

static const struct tpl__source_ops fake_ops = {
    fake_place, fake_start, fake_finish, fake_close,
    fake_hint,  NULL,       fake_spans,  NULL};

/* The object: 8 bytes of header, then
 *   D  u8 [D_ROWS, 2048] at 8, cut along dim 1: pieces of 1024 bytes,
 *      1024 apart (a GET each);
 *   E  u8 [2, 16] at E_AT, cut along dim 1: pieces of 8 bytes, 8 apart
 *      (joined: one GET a rank).
 * Byte k of the object is k mod 251. */
static void make_url_job(int fail_at) {
  memset(&fake, 0, sizeof(fake));
  fake.base.ops = &fake_ops;
  fake.base.nfiles = 1;
  fake.base.used = fake.used;
  fake.base.align = fake.align;
  fake.used[0] = TPL_IO_USED_HTTP;
  fake.fail_at = fail_at;
  fake_file_spans = 1;
  for (int k = 0; k < URL_BYTES; k++)
    fake.bytes[k] = (uint8_t)(k % 251);
  files[0] = (struct tpl__job_file){.path = "http://store/w.bin",
                                    .url = "http://store/w.bin",
                                    .size = URL_BYTES};
  set_tensor(0, "D", TPL_DT_U8, D_ROWS, 2048, TPL_RULE_SHARD, 8);
  set_tensor(1, "E", TPL_DT_U8, 2, 16, TPL_RULE_SHARD, E_AT);
  tensors[1].spec.dim = 1;
  memset(&job, 0, sizeof(job));
  job.grid = (struct tpl__grid){2, 2, 1, 1, 0};
  job.bias_family = TPL_BIASF_MLC;
  job.origin = &tpl__origin_http;
  job.tensors = tensors;
  job.ntensors = 2;
  job.files = files;
  job.nfiles = 1;
  if (tpl__job_finish(&job, NULL) != 0) abort();
}

static uint8_t url_window[URL_BYTES];

/* Rank `rank` reads the URL job in steps of `step` bytes, pieces at
 * most `gap` apart one GET (512: E's, 8 apart, joined; D's, 1024, not),
 * `gap_multi` apart while the source says the file's runs go to
 * multi-range GETs. */
static int read_url_gaps(uint32_t rank, uint64_t step, uint64_t gap,
                         uint64_t gap_multi, struct tpl__store *s,
                         uint64_t *bytes_read, struct tpl__error *err) {
  struct finished fin = {0, -1};
  struct tpl__local_read lr = {.job = &job,
                               .rank = rank,
                               .src = &fake.base,
                               .store = s,
                               .window = url_window,
                               .window_len = step,
                               .direct_len = step,
                               .piece_min = 1024,
                               .run_gap = gap,
                               .run_gap_multi = gap_multi,
                               .finish = record_finish,
                               .ctx = &fin};
  int rc;
  if (tpl__store_create_private(s, job.store_size, 2, err) != 0) abort();
  rc = tpl__local_read_all(&lr, err);
  *bytes_read = lr.bytes_read;
  return rc;
}

static int read_url(uint32_t rank, uint64_t step, uint64_t gap,
                    struct tpl__store *s, uint64_t *bytes_read,
                    struct tpl__error *err) {
  return read_url_gaps(rank, step, gap, gap, s, bytes_read, err);
}

/* What rank r holds of D and E, from the object's bytes by hand. */
static void want_url(uint32_t r, uint8_t *d, uint8_t *e) {
  for (int row = 0; row < D_ROWS; row++)
    for (int c = 0; c < 1024; c++)
      d[row * 1024 + c] = (uint8_t)((8 + row * 2048 + r * 1024 + c) % 251);
  for (int row = 0; row < 2; row++)
    for (int c = 0; c < 8; c++)
      e[row * 8 + c] = (uint8_t)((E_AT + row * 16 + r * 8 + c) % 251);
}

/* Rank r reads a fresh URL job in steps of `step` with gap `gap` into s:
 * it succeeds and lands the rank's bytes of D and E; *n is its
 * bytes_read. */
static void check_url_read(uint32_t r, uint64_t step, uint64_t gap,
                           struct tpl__store *s, uint64_t *n) {
  struct tpl__error err = {0};
  uint8_t d[D_ROWS * 1024], e[16];
  make_url_job(-1);
  CHECK_EQ_INT(read_url(r, step, gap, s, n, &err), 0);
  want_url(r, d, e);
  CHECK(memcmp(s->base + tensors[0].store_offset, d, sizeof(d)) == 0);
  CHECK(memcmp(s->base + tensors[1].store_offset, e, sizeof(e)) == 0);
}

/* One step holds every tensor: a GET per piece of D (each exactly the
 * piece), one for E's pieces and the 8-byte gap between them, finished
 * oldest first (more than are kept in flight); the bytes are the rank's,
 * and bytes_read counts what the GETs asked. */
static void test_url_gets_only_the_ranks_pieces(void) {
  for (uint32_t r = 0; r < 2; r++) {
    struct tpl__store s = {.fd = -1};
    uint64_t n = 0;
    check_url_read(r, URL_BYTES, 512, &s, &n);
    CHECK_EQ_INT(fake.started, D_ROWS + 1);
    CHECK_EQ_INT(fake.finished, D_ROWS + 1);
    CHECK_EQ_INT(fake.out_of_order, 0);
    for (int k = 0; k < D_ROWS; k++) {
      CHECK_EQ_U64(fake.off[k], 8 + k * 2048 + r * 1024);
      CHECK_EQ_U64(fake.len[k], 1024);
    }
    CHECK_EQ_U64(fake.off[D_ROWS], E_AT + r * 8);
    CHECK_EQ_U64(fake.len[D_ROWS], 24);
    CHECK_EQ_U64(n, D_ROWS * 1024 + 24);
    tpl__store_free(&s);
  }
}

/* Steps that cut pieces and rows: the same bytes, never a byte of D
 * outside the rank's pieces. */
static void test_url_steps_cut_pieces(void) {
  static const uint64_t steps[] = {1000, 1024, 3000, 4096, 5000};
  for (size_t k = 0; k < ARRAY_SIZE(steps); k++)
    for (uint32_t r = 0; r < 2; r++) {
      struct tpl__store s = {.fd = -1};
      uint64_t n = 0, in_d = 0;
      check_url_read(r, steps[k], 512, &s, &n);
      for (int g = 0; g < fake.started; g++)
        if (fake.off[g] < E_AT) in_d += fake.len[g];
      CHECK_EQ_U64(in_d, D_ROWS * 1024);
      if (tap_case_failed)
        printf("# rank %u, step %llu\n", r, (unsigned long long)steps[k]);
      tpl__store_free(&s);
    }
}

/* The joining rule: pieces at most `gap` bytes apart are one GET, gap
 * bytes included; farther ones are GETs of their own.  D's pieces are
 * 1024 apart, E's 8: gap 0 fetches every piece alone (D_ROWS + 2 GETs,
 * the rank's bytes only), 8 and 1023 join E's, 1024 joins D's too (one
 * GET from the rank's first piece to its last); the bytes are the rank's
 * whatever the gap. */
static void test_url_gap_joins_pieces_at_most_that_far(void) {
  static const struct {
    uint64_t gap;
    int gets;
    uint64_t bytes;
  } cases[] = {
      {0, D_ROWS + 2, D_ROWS * 1024 + 16},
      {7, D_ROWS + 2, D_ROWS * 1024 + 16},
      {8, D_ROWS + 1, D_ROWS * 1024 + 24},
      {1023, D_ROWS + 1, D_ROWS * 1024 + 24},
      {1024, 2, (D_ROWS - 1) * 2048 + 1024 + 24},
      {TPL_READ_GAP_PRICED, 2, (D_ROWS - 1) * 2048 + 1024 + 24},
  };
  for (size_t k = 0; k < ARRAY_SIZE(cases); k++)
    for (uint32_t r = 0; r < 2; r++) {
      struct tpl__store s = {.fd = -1};
      uint64_t n = 0;
      check_url_read(r, URL_BYTES, cases[k].gap, &s, &n);
      CHECK_EQ_INT(fake.started, cases[k].gets);
      CHECK_EQ_U64(fake.off[0], 8 + r * 1024);
      CHECK_EQ_U64(n, cases[k].bytes);
      if (tap_case_failed)
        printf("# rank %u, gap %llu\n", r, (unsigned long long)cases[k].gap);
      tpl__store_free(&s);
    }
}

/* The gap in effect follows the file's source: run_gap_multi while its
 * runs go to multi-range GETs (spans over 1: D's pieces, 1024 apart,
 * joined at 1024), run_gap once its server refused one (spans 1: 512
 * joins only E's). */
static void test_url_gap_follows_the_files_spans(void) {
  static const struct {
    size_t spans;
    int gets;
  } cases[] = {{128, 2}, {1, D_ROWS + 1}};
  for (size_t k = 0; k < ARRAY_SIZE(cases); k++) {
    struct tpl__store s = {.fd = -1};
    struct tpl__error err = {0};
    uint64_t n = 0;
    make_url_job(-1);
    fake_file_spans = cases[k].spans;
    CHECK_EQ_INT(read_url_gaps(0, URL_BYTES, 512, 1024, &s, &n, &err), 0);
    CHECK_EQ_INT(fake.started, cases[k].gets);
    if (tap_case_failed) printf("# spans %zu\n", cases[k].spans);
    tpl__store_free(&s);
  }
}

/* The default gap follows the MODEL's scheme. */
static void test_gap_default_by_origin(void) {
  CHECK_EQ_U64(tpl__read_gap_default("http://store/m/"), TPL_READ_GAP_HTTP);
  CHECK_EQ_U64(tpl__read_gap_default("https://store/m/"), TPL_READ_GAP_HTTP);
  CHECK_EQ_U64(tpl__read_gap_default("/models/m"), TPL_READ_GAP_HTTP);
  CHECK_EQ_U64(tpl__read_gap_default("s3://b/m/"), TPL_READ_GAP_PRICED);
  CHECK_EQ_U64(tpl__read_gap_default("S3://b/m/"), TPL_READ_GAP_PRICED);
  CHECK_EQ_U64(tpl__read_gap_default("hf://org/m"), TPL_READ_GAP_PRICED);
}

/* GET 1 fails (finished to make room for GET 65) or GET 70 (finished
 * after the last is started): the read is that failure, naming the
 * object's offset and the tensor, and every GET started was finished
 * (their buffers are the reader's). */
static void test_url_failed_get_names_the_tensor(void) {
  static const int fail[] = {1, 70};
  for (size_t k = 0; k < ARRAY_SIZE(fail); k++) {
    struct tpl__store s = {.fd = -1};
    struct tpl__error err = {0};
    char want[64];
    uint64_t n = 0;
    make_url_job(fail[k]);
    CHECK_EQ_INT(read_url(0, URL_BYTES, 512, &s, &n, &err), -EIO);
    snprintf(want, sizeof(want), "http://store/w.bin: cut at %d",
             8 + fail[k] * 2048);
    CHECK_STR_CONTAINS(err.msg, want);
    CHECK_STR_CONTAINS(err.msg, "tensor 'D'");
    CHECK_EQ_INT(fake.finished, fake.started);
    tpl__store_free(&s);
  }
}

int main(void) {
  dir = make_dir("tpl-local");
  if (dir == NULL) return 99;
  snprintf(path, sizeof(path), "%s/w.bin", dir);
  RUN(test_slices_land_as_the_tables_say);
  RUN(test_io_modes_parse);
  RUN(test_missing_file_is_66);
  RUN(test_directory_is_66);
  RUN(test_other_size_is_65);
  RUN(test_other_time_is_65);
  RUN(test_job_without_files_is_internal);
  RUN(test_file_that_shrinks_is_short);
  RUN(test_file_changed_during_the_read_is_74);
  RUN(test_url_gets_only_the_ranks_pieces);
  RUN(test_url_steps_cut_pieces);
  RUN(test_url_failed_get_names_the_tensor);
  RUN(test_url_gap_joins_pieces_at_most_that_far);
  RUN(test_url_gap_follows_the_files_spans);
  RUN(test_gap_default_by_origin);
  drop_dir(dir);
  return tap_done();
}
