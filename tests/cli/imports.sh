#!/bin/sh
# imports.sh - the module import graph of src/ has no circles
# (scripts/include-graph.sh: a module is a .c/.h pair, an arrow an
# #include), and the script does report a circle where there is one.
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
t_done
