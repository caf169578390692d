/* test_harden.c - unit cases for the hardening rules that need no MPI:
 * JSON string values with "\u0000" refused (65) wherever JSON is read
 * (a plain document, an index weight_map, an MLC record's format, a plan
 * file), names escaped for terminals, the stall deadline's decision, the
 * ready file's claim (stale removed, live refused, link refused), and the
 * private-directory check (mode, symlink). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "fmt_mlc_cache.h"
#include "fmt_safetensors.h"
#include "fmt_st_index.h"
#include "jsonu.h"
#include "model.h"
#include "plan.h"
#include "ready.h"
#include "stall.h"
#include "tap.h"
#include "tmpdir.h"
#include "trust.h"

static struct tpl__error err;

static int parse_json(const char *text) {
  json_t *o = NULL;
  int rc;
  memset(&err, 0, sizeof(err));
  rc = tpl__json_parse_object(text, strlen(text), "t.json", &o, &err);
  json_decref(o);
  return rc;
}

static void test_json_nul_in_value_refused(void) {
  CHECK_EQ_INT(parse_json("{\"a\": \"x\\u0000y\"}"), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "key 'a'");
  CHECK_STR_CONTAINS(err.msg, "\\u0000");
}

static void test_json_nul_deep_in_arrays_refused(void) {
  CHECK_EQ_INT(parse_json("{\"r\": [{\"f\": [\"ok\", \"\\u0000\"]}]}"),
               TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "key 'f'");
}

static void test_json_without_nul_accepted(void) {
  CHECK_EQ_INT(parse_json("{\"a\": [\"x\", {\"b\": \"\\u0001\"}], \"c\": 1}"),
               0);
}

static void test_index_weight_map_nul_refused(void) {
  static const char idx[] =
      "{\"weight_map\": {\"a\": \"model.safetensors\\u0000.evil\"}}";
  struct tpl__st_index *ix = NULL;
  memset(&err, 0, sizeof(err));
  CHECK_EQ_INT(tpl__st_index_parse(idx, strlen(idx),
                                   "model.safetensors.index.json", &ix, &err),
               TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "\\u0000");
  tpl__st_index_free(ix);
}

static void test_mlc_format_nul_refused(void) {
  static const char cache[] =
      "{\"metadata\": {}, \"records\": [{\"dataPath\": \"params_shard_0.bin\","
      " \"format\": \"raw-shard\\u0000x\", \"nbytes\": 0, \"records\": []}]}";
  struct tpl__model *m = tpl__model_new(TPL_FMT_MLC, "/nonexistent");
  memset(&err, 0, sizeof(err));
  CHECK_EQ_INT(tpl__mlc_parse_flags(cache, strlen(cache), "tensor-cache.json",
                                    0, m, &err),
               TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "key 'format'");
  tpl__model_free(m);
}

static void test_plan_nul_refused(void) {
  static const char plan[] =
      "{\"rules\": [{\"match\": \"*.weight\\u0000junk\", \"dim\": 0}]}";
  struct tpl__plan *p = NULL;
  memset(&err, 0, sizeof(err));
  /* Refused as invalid data (65), whichever check sees it first. */
  CHECK_EQ_INT(
      tpl_exit_code(tpl__plan_parse(plan, strlen(plan), "plan.json", &p, &err)),
      65);
  tpl__plan_free(p);
}

static void test_safe_escapes_controls(void) {
  char buf[64];
  CHECK(strcmp(tpl__cli_safe("a\x1b[31mb\n\x7f\xc3", buf, sizeof(buf)),
               "a\\x1b[31mb\\x0a\\x7f\\xc3") == 0);
  CHECK(strcmp(tpl__cli_safe("plain.name_0", buf, sizeof(buf)),
               "plain.name_0") == 0);
}

/* Valid UTF-8 reads as itself (issue 31: a name with an o-umlaut was
 * shown as \xc3\xb6); what is not valid, or steers the terminal or the
 * text's direction, is escaped byte by byte. */
static void test_safe_keeps_utf8(void) {
  char buf[128];
  CHECK(strcmp(tpl__cli_safe("w\xc3\xb6rter.\xe2\x82\xac.\xf0\x9f\x98\x80", buf,
                             sizeof(buf)),
               "w\xc3\xb6rter.\xe2\x82\xac.\xf0\x9f\x98\x80") == 0);
  /* A lone continuation byte, a truncated character, overlong forms. */
  CHECK(strcmp(tpl__cli_safe("a\xa9"
                             "b\xc3",
                             buf, sizeof(buf)),
               "a\\xa9b\\xc3") == 0);
  CHECK(strcmp(tpl__cli_safe("\xc0\xaf\xe0\x80\xaf", buf, sizeof(buf)),
               "\\xc0\\xaf\\xe0\\x80\\xaf") == 0);
  /* A surrogate (U+D800), above U+10FFFF (F4 90 ...). */
  CHECK(strcmp(tpl__cli_safe("\xed\xa0\x80", buf, sizeof(buf)),
               "\\xed\\xa0\\x80") == 0);
  CHECK(strcmp(tpl__cli_safe("\xf4\x90\x80\x80", buf, sizeof(buf)),
               "\\xf4\\x90\\x80\\x80") == 0);
  /* C1 control U+009B (CSI), RIGHT-TO-LEFT OVERRIDE U+202E, U+2028. */
  CHECK(strcmp(tpl__cli_safe("\xc2\x9b"
                             "1m",
                             buf, sizeof(buf)),
               "\\xc2\\x9b"
               "1m") == 0);
  CHECK(strcmp(tpl__cli_safe("x\xe2\x80\xae"
                             "y",
                             buf, sizeof(buf)),
               "x\\xe2\\x80\\xaey") == 0);
  CHECK(strcmp(tpl__cli_safe("\xe2\x80\xa8", buf, sizeof(buf)),
               "\\xe2\\x80\\xa8") == 0);
}

/* Cut before a character that does not fit, never inside it. */
static void test_safe_cuts_at_whole_character(void) {
  char buf[4];
  CHECK(strcmp(tpl__cli_safe("a\xe2\x82\xac", buf, sizeof(buf)), "a") == 0);
}

static void test_safe_cuts_at_whole_escape(void) {
  char buf[6];
  /* "ab" fits, "\x01" (4 bytes) would not: cut before it. */
  CHECK(strcmp(tpl__cli_safe("ab\x01z", buf, sizeof(buf)), "ab") == 0);
}

static void test_stall_never_with_zero(void) {
  struct tpl__stall s;
  int fired = 0;
  tpl__stall_start(&s, 0);
  for (int i = 0; i < 200; i++)
    fired |= tpl__stall_idle(&s);
  CHECK_EQ_INT(fired, 0);
}

static void test_stall_fires_past_deadline(void) {
  struct tpl__stall s;
  tpl__stall_start(&s, 1e-9);
  /* Any time at all has passed since the start by the first idle poll. */
  while (tpl__stall_quiet_for(&s) < 1e-9) {
  }
  CHECK_EQ_INT(tpl__stall_idle(&s), 1);
  tpl__stall_progress(&s);
  s.timeout = 3600;
  CHECK_EQ_INT(tpl__stall_idle(&s), 0);
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return;
  fputs(text, f);
  fclose(f);
}

static void test_ready_claim(void) {
  char *dir = make_dir("tpl-ready");
  char path[600], link[600], text[128];
  pid_t dead;
  REQUIRE(dir != NULL);
  snprintf(path, sizeof(path), "%s/ready", dir);
  snprintf(link, sizeof(link), "%s/link", dir);
  /* A stale file (a pid that has exited) is removed. */
  dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, NULL, 0);
  snprintf(text, sizeof(text), "{\"pid\": %d}", (int)dead);
  write_text(path, text);
  CHECK_EQ_INT(tpl__ready_claim(path, &err), 0);
  CHECK(access(path, F_OK) != 0);
  /* A live one (this process) is refused and left alone. */
  snprintf(text, sizeof(text), "{\"pid\": %d}", (int)getpid());
  write_text(path, text);
  CHECK_EQ_INT(tpl__ready_claim(path, &err), TPL_EOUTPUT);
  CHECK_STR_CONTAINS(err.msg, "live job");
  CHECK(access(path, F_OK) == 0);
  /* A symbolic link is refused. */
  CHECK_EQ_INT(symlink(path, link), 0);
  CHECK_EQ_INT(tpl__ready_claim(link, &err), TPL_EOUTPUT);
  CHECK_STR_CONTAINS(err.msg, "symbolic link");
  drop_dir(dir);
}

static void test_private_dir(void) {
  char *dir = make_dir("tpl-trust"), sub[600], link[600], *real = NULL;
  REQUIRE(dir != NULL);
  snprintf(sub, sizeof(sub), "%s/s", dir);
  snprintf(link, sizeof(link), "%s/l", dir);
  CHECK_EQ_INT(mkdir(sub, 0700), 0);
  CHECK_EQ_INT(tpl__check_private_dir(sub, geteuid(), &real, &err), 0);
  CHECK(real != NULL && strstr(real, "/s") != NULL);
  free(real);
  CHECK_EQ_INT(chmod(sub, 0750), 0);
  CHECK_EQ_INT(tpl__check_private_dir(sub, geteuid(), &real, &err),
               TPL_EOUTPUT);
  CHECK_STR_CONTAINS(err.msg, "expected mode 0700");
  CHECK_EQ_INT(chmod(sub, 0700), 0);
  CHECK_EQ_INT(symlink(sub, link), 0);
  CHECK_EQ_INT(tpl__check_private_dir(link, geteuid(), &real, &err),
               TPL_EOUTPUT);
  CHECK_STR_CONTAINS(err.msg, "symbolic link");
  CHECK_EQ_INT(tpl__check_private_dir(sub, geteuid() + 1, &real, &err),
               TPL_EOUTPUT);
  CHECK_STR_CONTAINS(err.msg, "expected owner uid");
  drop_dir(dir);
}

static void test_top_members_counted(void) {
  static const char doc[] =
      "{\"a\": 1, \"b\\\"x,{\": {\"c\": [1, {\"d\": \"}\"}]}, "
      "\"__metadata__\": {}}";
  size_t n = 0, kb = 0;
  tpl__json_top_members(doc, strlen(doc), &n, &kb);
  CHECK_EQ_U64(n, 3); /* a, b"x,{ and __metadata__; not c or d */
  CHECK(kb >= 1 + 6 + 12);
}

/* A header with more entries than TPL_MAX_TENSORS is refused before it
 * is parsed (65, naming the cap). */
static void test_tensor_count_cap(void) {
  size_t n = (size_t)TPL_MAX_TENSORS + 2, cap = n * 16 + 16, len = 8;
  char *buf = malloc(cap);
  struct tpl__model *m = tpl__model_new(TPL_FMT_SAFETENSORS, "/x");
  uint64_t hlen;
  REQUIRE(buf != NULL && m != NULL);
  len += (size_t)snprintf(buf + len, cap - len, "{");
  for (size_t i = 0; i < n; i++)
    len +=
        (size_t)snprintf(buf + len, cap - len, "%s\"t%zu\":0", i ? "," : "", i);
  len += (size_t)snprintf(buf + len, cap - len, "}");
  hlen = len - 8;
  for (int i = 0; i < 8; i++)
    buf[i] = (char)(hlen >> (8 * i));
  memset(&err, 0, sizeof(err));
  CHECK_EQ_INT(tpl__st_parse(buf, len, len, "big.safetensors", 0, m, &err),
               TPL_ELIMIT);
  CHECK_STR_CONTAINS(err.msg, "expected at most 1048576 tensors");
  tpl__model_free(m);
  free(buf);
}

static void test_name_bytes_cap(void) {
  struct tpl__model *m = tpl__model_new(TPL_FMT_SAFETENSORS, "/x");
  struct tpl__tensor t;
  memset(&t, 0, sizeof(t));
  t.name = "ab";
  REQUIRE(m != NULL);
  m->name_bytes = TPL_MAX_NAME_BYTES - 1;
  CHECK_EQ_INT(tpl__model_add_tensor(m, &t), TPL_ELIMIT);
  CHECK_EQ_U64(m->ntensors, 0);
  tpl__model_free(m);
}

int main(void) {
  RUN(test_json_nul_in_value_refused);
  RUN(test_json_nul_deep_in_arrays_refused);
  RUN(test_json_without_nul_accepted);
  RUN(test_index_weight_map_nul_refused);
  RUN(test_mlc_format_nul_refused);
  RUN(test_plan_nul_refused);
  RUN(test_safe_escapes_controls);
  RUN(test_safe_cuts_at_whole_escape);
  RUN(test_safe_keeps_utf8);
  RUN(test_safe_cuts_at_whole_character);
  RUN(test_stall_never_with_zero);
  RUN(test_stall_fires_past_deadline);
  RUN(test_ready_claim);
  RUN(test_private_dir);
  RUN(test_top_members_counted);
  RUN(test_tensor_count_cap);
  RUN(test_name_bytes_cap);
  return tap_done();
}
