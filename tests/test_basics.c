/* test_basics.c - error table, exit codes, dtype table, file helpers. */
#include <errno.h>

#include "common.h"
#include "dtype.h"
#include "tap.h"

static void test_exit_codes(void) {
  CHECK_EQ_INT(tpl_exit_code(0), 0);
  CHECK_EQ_INT(tpl_exit_code(TPL_EFORMAT), 65);
  CHECK_EQ_INT(tpl_exit_code(TPL_EUSAGE), 64);
  CHECK_EQ_INT(tpl_exit_code(-ENOENT), 66);
  CHECK_EQ_INT(tpl_exit_code(-ENOSPC), 74);
  CHECK_EQ_INT(tpl_exit_code(TPL_EPEER), 69);
  CHECK_EQ_INT(tpl_exit_code(TPL_EOUTPUT), 73);
}

static void test_strerror(void) {
  CHECK_STR_CONTAINS(tpl_strerror(TPL_EDTYPE), "dtype");
  CHECK_STR_CONTAINS(tpl_strerror(-ENOENT), "No such file");
}

static void test_dtype_table(void) {
  CHECK_EQ_INT(tpl__dtype_from_st("BF16", 4), TPL_DT_BF16);
  CHECK_EQ_INT(tpl__dtype_from_st("BF1", 3), -1);
  CHECK_EQ_INT(tpl__dtype_from_st("F8_E4M3", 7), TPL_DT_F8_E4M3);
  CHECK_EQ_U64(tpl__dtype_size(TPL_DT_F64), 8);
  CHECK_EQ_INT(tpl__dtype_from_mlc("float8_e4m3fn"), TPL_DT_F8_E4M3);
  CHECK(tpl__dtype_is_known_unsupported("F4"));
  CHECK(!tpl__dtype_is_known_unsupported("F16"));
}

static void test_overflow_helpers(void) {
  uint64_t r = 7;
  CHECK_EQ_INT(tpl__mul_u64(UINT64_MAX / 2, 3, &r), TPL_EOVERFLOW);
  CHECK_EQ_U64(r, 7);
  CHECK_EQ_INT(tpl__add_u64(UINT64_MAX, 1, &r), TPL_EOVERFLOW);
  CHECK_EQ_INT(tpl__mul_u64(1u << 20, 1u << 20, &r), 0);
  CHECK_EQ_U64(r, 1ull << 40);
}

int main(void) {
  RUN(test_exit_codes);
  RUN(test_strerror);
  RUN(test_dtype_table);
  RUN(test_overflow_helpers);
  return tap_done();
}
