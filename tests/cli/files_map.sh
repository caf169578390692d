#!/bin/sh
# files_map.sh - docs/FILES.md matches the code (scripts/files-map.sh):
# its units are Makefile.am's and src/guard/'s, every file of src/ is in
# its table, and no #include points against the table's box order.  Then
# the script is shown to fail on each kind of violation, in a copy of the
# tree with one thing broken.
. "$TESTS_SRCDIR/lib/lib.sh"
top="$TESTS_SRCDIR/.."
check="$top/scripts/files-map.sh"

if out=$("$check" "$top" 2>&1); then
  t_ok "docs/FILES.md holds: units, guards, files, arrows"
else
  t_fail "docs/FILES.md holds: units, guards, files, arrows" "$out"
fi

# A fresh copy of what the script reads.
copy() {
  rm -rf "$T_TMP/top"
  mkdir -p "$T_TMP/top/docs" "$T_TMP/top/src/guard/mpi" \
    "$T_TMP/top/src/guard/uv"
  cp "$top"/src/*.c "$top"/src/*.h "$T_TMP/top/src/"
  cp "$top/src/guard/mpi/mpi.h" "$T_TMP/top/src/guard/mpi/"
  cp "$top/src/guard/uv/uv.h" "$T_TMP/top/src/guard/uv/"
  cp "$top/docs/FILES.md" "$T_TMP/top/docs/"
  cp "$top/Makefile.am" "$T_TMP/top/"
  chmod -R u+w "$T_TMP/top"
}

# broken NAME EXPECTED: the broken copy fails, with EXPECTED as a line.
broken() {
  if "$check" "$T_TMP/top" >"$T_TMP/out" 2>&1; then
    t_fail "$1" "expected exit 1, got 0: $(cat "$T_TMP/out")"
  elif grep -qxF "$2" "$T_TMP/out"; then
    t_ok "$1"
  else
    t_fail "$1" "expected '$2' in: $(cat "$T_TMP/out")"
  fi
}

copy
printf '#include "engine.h"\n' >>"$T_TMP/top/src/job.c"
broken "an include against the order is reported" \
  "src/job.c (job) includes engine.h (engine): a box to its right"

copy
: >"$T_TMP/top/src/orphan.c"
broken "a file missing from the table is reported" \
  "src/orphan.c: not in docs/FILES.md's table"

copy
sed 's/ src\/scope\.c / /' "$top/Makefile.am" >"$T_TMP/top/Makefile.am"
broken "a unit's file missing from Makefile.am is reported" \
  "libtplcore: src/scope.c is in docs/FILES.md's list, not in Makefile.am's"

copy
sed 's/src\/jsonu\.h src\/jsonu\.c src\/st_writer\.h src\/st_writer\.c/src\/st_writer.h src\/st_writer.c src\/jsonu.h src\/jsonu.c/' \
  "$top/Makefile.am" >"$T_TMP/top/Makefile.am"
broken "Makefile.am out of FILES.md's order is reported" \
  "libtplcore: Makefile.am lists src/st_writer.h where docs/FILES.md's order has src/jsonu.h"

copy
sed 's/, src\/log\.c//' "$top/src/guard/uv/uv.h" >"$T_TMP/top/src/guard/uv/uv.h"
broken "a guard header that disagrees with its unit is reported" \
  "src/guard/uv/uv.h names daemon.c; libtpldaemon (sees uv.h) is daemon.c log.c"

copy
printf '#include <mpi.h>\n' >>"$T_TMP/top/src/store.c"
broken "mpi.h outside the engine unit is reported" \
  "src/store.c includes <mpi.h>, which only libtplengine may"
t_done
