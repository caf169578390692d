/* test_store.c - the shard store (store.c): a memfd store is prepared in
 * steps that the writer and the prefault thread share, and whoever
 * prepares, every byte the writer puts in must read back the same
 * through the sealed read-only mapping; a store's kind says whether it
 * can be sealed and exported, and a memfd counts its exports.  Sizes are not
 * multiples of the 32 MiB step or of 2 MiB, so the last step is a partial one.
 * A range populated ahead of its write is resident before it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store.h"
#include "tap.h"

#define MIB ((uint64_t)1 << 20)
#define SIZE (100 * MIB + 4099)

static uint8_t pattern(uint64_t off) {
  return (uint8_t)(off * 2654435761u >> 13);
}

/* Prepares and writes [0, size) in uneven pieces, as the engine does
 * tensor by tensor. */
static int write_in_pieces(struct tpl__store *s) {
  uint64_t off = 0, piece = 3 * MIB + 17;
  while (off < s->size) {
    uint64_t end = s->size - off > piece ? off + piece : s->size;
    if (tpl__store_prepare(s, end, NULL) != 0) return -1;
    for (uint64_t i = off; i < end; i++)
      s->base[i] = pattern(i);
    off = end;
    piece = piece * 3 / 2;
  }
  return 0;
}

static int reads_back(const struct tpl__store *s) {
  for (uint64_t i = 0; i < s->size; i++)
    if (s->base[i] != pattern(i)) return 0;
  return 1;
}

static void check_memfd_store(int with_thread) {
  struct tpl__store s;
  REQUIRE(tpl__store_create_huge(&s, SIZE, 1, TPL_HUGE_OFF, NULL) == 0);
  if (with_thread) tpl__store_prefault(&s);
  CHECK_EQ_INT(write_in_pieces(&s), 0);
  /* Beyond the end and again from the start: nothing left to prepare. */
  CHECK_EQ_INT(tpl__store_prepare(&s, SIZE + 5 * MIB, NULL), 0);
  CHECK_EQ_INT(tpl__store_prepare(&s, 1, NULL), 0);
  CHECK_EQ_INT(tpl__store_seal(&s, NULL), 0);
  CHECK(reads_back(&s));
  CHECK_EQ_INT(fcntl(s.fd, F_GET_SEALS) & F_SEAL_WRITE, F_SEAL_WRITE);
  CHECK_EQ_INT(tpl__store_prepare(&s, SIZE, NULL), 0); /* sealed: no-op */
  tpl__store_free(&s);
}

static void test_memfd_prepared_by_writer_alone(void) {
  check_memfd_store(0);
}

static void test_memfd_prepared_with_thread(void) {
  check_memfd_store(1);
}

/* The thread may be anywhere when the writer jumps to the end at once. */
static void test_memfd_writer_jumps_to_end(void) {
  struct tpl__store s;
  REQUIRE(tpl__store_create_huge(&s, SIZE, 1, TPL_HUGE_OFF, NULL) == 0);
  tpl__store_prefault(&s);
  CHECK_EQ_INT(tpl__store_prepare(&s, SIZE, NULL), 0);
  for (uint64_t i = 0; i < s.size; i++)
    s.base[i] = pattern(i);
  CHECK_EQ_INT(tpl__store_seal(&s, NULL), 0);
  CHECK(reads_back(&s));
  tpl__store_free(&s);
}

/* Freed while the thread still works: joined, nothing leaks. */
static void test_memfd_freed_while_prefaulting(void) {
  struct tpl__store s;
  REQUIRE(tpl__store_create_huge(&s, SIZE, 1, TPL_HUGE_OFF, NULL) == 0);
  tpl__store_prefault(&s);
  tpl__store_free(&s);
  CHECK_EQ_INT(s.fd, -1);
}

/* A private store's writer never waits for the thread. */
static void test_private_store(void) {
  struct tpl__store s;
  REQUIRE(tpl__store_create_private(&s, SIZE, 1, NULL) == 0);
  tpl__store_prefault(&s);
  CHECK_EQ_INT(write_in_pieces(&s), 0);
  CHECK(reads_back(&s));
  tpl__store_free(&s);
}

/* How many of the pages of [from, to) of s are resident (mincore). */
static size_t resident_pages(const struct tpl__store *s, uint64_t from,
                             uint64_t to) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 0, k;
  uint8_t *at = s->base + (from & ~(uint64_t)(page - 1));
  size_t pages = (size_t)((s->base + to - at + page - 1) / page);
  unsigned char *vec = calloc(pages, 1);
  if (vec != NULL && mincore(at, (size_t)(s->base + to - at), vec) == 0)
    for (k = 0; k < pages; k++)
      n += vec[k] & 1;
  free(vec);
  return n;
}

/* Populating a range of a private store, the place of a tensor another
 * rank hands over: its pages are resident before it is written, the
 * store's last page too; beyond the end is clamped; then it reads back
 * what is written.  A memfd store is prepared up to the range's end. */
static void test_populate(void) {
  struct tpl__store s;
  uint64_t from = 7 * MIB + 123, to = SIZE;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t want =
      (size_t)((to - (from & ~(uint64_t)(page - 1)) + page - 1) / page);
  REQUIRE(tpl__store_create_private(&s, SIZE, 1, NULL) == 0);
  CHECK_EQ_INT(tpl__store_populate(&s, from, to + 5 * MIB, NULL), 0);
  CHECK_EQ_INT((int)resident_pages(&s, from, to), (int)want);
  CHECK_EQ_INT(write_in_pieces(&s), 0);
  CHECK(reads_back(&s));
  tpl__store_free(&s);
  REQUIRE(tpl__store_create_huge(&s, SIZE, 1, TPL_HUGE_OFF, NULL) == 0);
  CHECK_EQ_INT(tpl__store_populate(&s, from, 9 * MIB, NULL), 0);
  CHECK(resident_pages(&s, from, 9 * MIB) > 0);
  CHECK_EQ_INT(write_in_pieces(&s), 0);
  CHECK_EQ_INT(tpl__store_seal(&s, NULL), 0);
  CHECK(reads_back(&s));
  tpl__store_free(&s);
}

/* The room for a reload's second store: none needed fits; more than
 * any machine has (2^62 bytes) does not, named; the test hook gives one
 * rank a number of bytes, the others their real room. */
static void test_room(void) {
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__store_room(0, TPL_HUGE_OFF, 0, NULL), 0);
  CHECK_EQ_INT(tpl__store_room((uint64_t)1 << 62, TPL_HUGE_OFF, 0, &err),
               -ENOMEM);
  CHECK(strstr(err.msg, "rank 0: no room for a second store") != NULL);
  setenv("TPLOAD_TEST_MEM_AVAILABLE", "3:100", 1);
  CHECK_EQ_INT(tpl__store_room(100, TPL_HUGE_OFF, 3, NULL), 0);
  CHECK_EQ_INT(tpl__store_room(101, TPL_HUGE_OFF, 3, &err), -ENOMEM);
  CHECK(strstr(err.msg, "100 available (TPLOAD_TEST_MEM_AVAILABLE)") != NULL);
  CHECK_EQ_INT(tpl__store_room(101, TPL_HUGE_OFF, 2, NULL), 0);
  unsetenv("TPLOAD_TEST_MEM_AVAILABLE");
}

/* A memfd store is exported only once sealed, as its own descriptor,
 * and counts its exports until each is ended; a consumer's copy of the
 * descriptor (what SCM_RIGHTS hands it) still reads the bytes after the
 * store is retired (freed at 0 exports). */
static void test_memfd_export_count(void) {
  struct tpl__store s;
  struct tpl__store_export ex = {{-1}, 0};
  struct tpl__error err = {0};
  uint8_t *p;
  int copy;
  REQUIRE(tpl__store_create(&s, TPL_STORE_MEMFD, 4 * MIB + 3, 1, TPL_HUGE_OFF,
                            NULL) == 0);
  CHECK_EQ_INT(s.kind, TPL_STORE_MEMFD);
  for (uint64_t i = 0; i < s.size; i++)
    s.base[i] = pattern(i);
  CHECK_EQ_INT(tpl__store_export(&s, &ex, &err), -EBUSY);
  CHECK_STR_CONTAINS(err.msg, "not sealed yet");
  CHECK_EQ_INT((int)tpl__store_exports(&s), 0);
  REQUIRE(tpl__store_seal(&s, NULL) == 0);
  CHECK_EQ_INT(tpl__store_export(&s, &ex, NULL), 0);
  CHECK_EQ_INT((int)ex.nfds, 1);
  CHECK_EQ_INT(ex.fds[0], s.fd);
  CHECK_EQ_INT(tpl__store_export(&s, &ex, NULL), 0);
  CHECK_EQ_INT((int)tpl__store_exports(&s), 2);
  copy = dup(ex.fds[0]);
  REQUIRE(copy >= 0);
  CHECK_EQ_INT((int)tpl__store_unexport(&s), 1);
  CHECK_EQ_INT((int)tpl__store_unexport(&s), 0);
  CHECK_EQ_INT((int)tpl__store_unexport(&s), 0); /* none left: ignored */
  tpl__store_free(&s);
  p = mmap(NULL, 4 * MIB + 3, PROT_READ, MAP_SHARED, copy, 0);
  REQUIRE(p != MAP_FAILED);
  CHECK(p[0] == pattern(0) && p[4 * MIB + 2] == pattern(4 * MIB + 2));
  munmap(p, 4 * MIB + 3);
  close(copy);
}

/* A private store is neither sealed nor exported: nobody else maps it. */
static void test_private_not_exported(void) {
  struct tpl__store s;
  struct tpl__store_export ex;
  struct tpl__error err = {0};
  REQUIRE(tpl__store_create(&s, TPL_STORE_PRIVATE, MIB, 1, TPL_HUGE_OFF,
                            NULL) == 0);
  CHECK_EQ_INT(s.kind, TPL_STORE_PRIVATE);
  CHECK_EQ_INT(s.fd, -1);
  CHECK_EQ_INT(tpl__store_export(&s, &ex, &err), -ENOTSUP);
  CHECK_STR_CONTAINS(err.msg, "a private shard store cannot be exported");
  CHECK_EQ_INT(tpl__store_seal(&s, &err), -ENOTSUP);
  CHECK_EQ_INT((int)tpl__store_exports(&s), 0);
  tpl__store_free(&s);
}

/* HugePages_Free in bytes (2 MiB pages), read here on its own. */
static uint64_t pool_free(void) {
  char line[128];
  unsigned long long n = 0;
  FILE *f = fopen("/proc/meminfo", "r");
  while (f != NULL && fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "HugePages_Free: %llu", &n) == 1) break;
  if (f != NULL) fclose(f);
  return (uint64_t)n * 2 * MIB;
}

/* --hugetlb on: the room is the pool's free pages, whole ones. */
static void test_room_hugetlb(void) {
  struct tpl__error err = {0};
  uint64_t pool = pool_free();
  if (pool > 0)
    CHECK_EQ_INT(tpl__store_room(pool, TPL_HUGE_HUGETLB, 0, NULL), 0);
  CHECK_EQ_INT(tpl__store_room(pool + 1, TPL_HUGE_HUGETLB, 0, &err), -ENOMEM);
  CHECK(strstr(err.msg, "hugetlb pool") != NULL);
}

int main(void) {
  RUN(test_memfd_prepared_by_writer_alone);
  RUN(test_memfd_prepared_with_thread);
  RUN(test_memfd_writer_jumps_to_end);
  RUN(test_memfd_freed_while_prefaulting);
  RUN(test_private_store);
  RUN(test_populate);
  RUN(test_memfd_export_count);
  RUN(test_private_not_exported);
  RUN(test_room);
  RUN(test_room_hugetlb);
  return tap_done();
}
