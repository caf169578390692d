#!/bin/sh
# imports.sh - the module import graph of src/ has no circles
# (scripts/include-graph.sh: a module is a .c/.h pair and its private
# NAME_internal.h, an arrow an #include), and the script does report a
# circle where there is one.
. "$TESTS_SRCDIR/lib/lib.sh"
graph="$TESTS_SRCDIR/../scripts/include-graph.sh"

if out=$("$graph" "$TESTS_SRCDIR/../src" 2>&1); then
  t_ok "src/: no import circles"
else
  t_fail "src/: no import circles" "$out"
fi

# a.c includes b.h and b.c includes a.h: one circle; c only imports a.
mkdir "$T_TMP/src"
printf '#include "b.h"\n' >"$T_TMP/src/a.c"
printf '#include "a.h"\n' >"$T_TMP/src/b.c"
printf '#include "a.h"\n' >"$T_TMP/src/c.c"
: >"$T_TMP/src/a.h"
: >"$T_TMP/src/b.h"
if "$graph" "$T_TMP/src" >"$T_TMP/out" 2>&1; then
  t_fail "a <-> b reported" "expected exit 1, got 0: $(cat "$T_TMP/out")"
elif grep -qx "circle: a b" "$T_TMP/out" &&
  grep -qx "1 circles among 3 modules" "$T_TMP/out"; then
  t_ok "a <-> b reported"
else
  t_fail "a <-> b reported" "$(cat "$T_TMP/out")"
fi
# A private header belongs to its module (libuv's internal.h): x.c and
# y.c include x_internal.h, which includes x.h: no circle; but one through
# it is still one (x_internal.h includes z.h, z.c includes x.h).
mkdir "$T_TMP/priv"
printf '#include "x.h"\n' >"$T_TMP/priv/x_internal.h"
printf '#include "x_internal.h"\n' >"$T_TMP/priv/x.c"
printf '#include "x_internal.h"\n' >"$T_TMP/priv/y.c"
: >"$T_TMP/priv/x.h"
if "$graph" "$T_TMP/priv" >"$T_TMP/out" 2>&1 &&
  grep -qx "0 circles among 2 modules" "$T_TMP/out"; then
  t_ok "x_internal.h is module x's"
else
  t_fail "x_internal.h is module x's" "$(cat "$T_TMP/out")"
fi
printf '#include "x.h"\n#include "z.h"\n' >"$T_TMP/priv/x_internal.h"
printf '#include "x.h"\n' >"$T_TMP/priv/z.c"
: >"$T_TMP/priv/z.h"
if "$graph" "$T_TMP/priv" >"$T_TMP/out" 2>&1; then
  t_fail "x <-> z through x_internal.h reported" \
    "expected exit 1, got 0: $(cat "$T_TMP/out")"
elif grep -qx "circle: x z" "$T_TMP/out"; then
  t_ok "x <-> z through x_internal.h reported"
else
  t_fail "x <-> z through x_internal.h reported" "$(cat "$T_TMP/out")"
fi
t_done
