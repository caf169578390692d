#!/bin/sh
# install.sh - libtpload as a user gets it: `make install DESTDIR=...`,
# then a consumer program (tests/consumer.c) compiled outside the build
# tree with `pkg-config --cflags --libs tpload` against the installed tree
# only, run against a live 2-rank `tpload serve`; what it reads from each
# rank is checked against the numpy oracle, and the installed Python
# module (over the installed .so) reads the same bytes.  Also: the
# installed files (header, shared and static library, tpload.pc, man
# pages), tpload(1) has a section per command and both pages render and
# carry the version, the shared library exports only the public tpl_ API,
# an unreachable socket (exit 69 with a message), and `make uninstall`
# leaves no file.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"

: "${TPL_BUILDDIR:?run via make check}"
DEST=$T_TMP/root
LIBDIR=$DEST$TPL_LIBDIR
unset MAKEFLAGS MFLAGS

if ${MAKE:-make} -C "$TPL_BUILDDIR" install DESTDIR="$DEST" \
    >"$T_TMP/install.log" 2>&1; then t_ok "make install DESTDIR"
else
  t_fail "make install DESTDIR" "$(tail -n 20 "$T_TMP/install.log")"
  t_done; exit
fi

missing=""
for f in "$DEST$TPL_INCLUDEDIR/tpload.h" "$LIBDIR/libtpload.so.0" \
    "$LIBDIR/libtpload.a" "$LIBDIR/pkgconfig/tpload.pc" \
    "$DEST$TPL_BINDIR/tpload" "$DEST$TPL_MANDIR/man1/tpload.1" \
    "$DEST$TPL_MANDIR/man3/libtpload.3"; do
  [ -e "$f" ] || missing="$missing ${f#"$DEST"}"
done
if [ -z "$missing" ]; then t_ok "installed: header, libtpload (.so, .a), tpload.pc, tpload, man pages"
else t_fail "installed files" "missing:$missing"; fi

want=$(sed -n 's/^#define TPL_VERSION_STRING "\(.*\)"$/\1/p' \
  "$DEST$TPL_INCLUDEDIR/tpload.h")

# tpload(1) has a section for every command `tpload --help` lists, and
# both pages render without warnings.
MAN1=$DEST$TPL_MANDIR/man1/tpload.1
cmds=$("$TPLOAD" --help | awk '/^commands:/ { on = 1; next }
  on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
nosec=""
for c in $cmds; do
  grep -Eq "^\.SS .*\b$c\b" "$MAN1" || nosec="$nosec $c"
done
if [ -n "$cmds" ] && [ -z "$nosec" ]; then
  t_ok "tpload.1 has a section for each command: $(echo $cmds)"
else t_fail "tpload.1 has a section per command" "none for:$nosec"; fi
if command -v groff >/dev/null 2>&1; then
  groff -man -Tutf8 -ww -z "$MAN1" "$DEST$TPL_MANDIR/man3/libtpload.3" \
    >"$T_TMP/groff.log" 2>&1
  if [ ! -s "$T_TMP/groff.log" ]; then t_ok "man pages render without warnings"
  else t_fail "man pages render without warnings" "$(head "$T_TMP/groff.log")"
  fi
fi

stale=""
for f in "$MAN1" "$DEST$TPL_MANDIR/man3/libtpload.3"; do
  grep -q "^\.TH .*\"tpload $want\"" "$f" || stale="$stale ${f##*/}"
done
if [ -z "$stale" ]; then t_ok "man pages carry TPL_VERSION_STRING ($want)"
else t_fail "man pages carry the version" "stale:$stale"; fi

# Only the public API leaves the shared library (-fvisibility=hidden).
nm -D --defined-only "$LIBDIR/libtpload.so.0" | awk '{ print $3 }' |
  sort >"$T_TMP/exports"
if [ -s "$T_TMP/exports" ] && ! grep -qv '^tpl_[a-z]' "$T_TMP/exports" &&
   grep -qx tpl_attach "$T_TMP/exports"; then
  t_ok "libtpload.so exports only tpl_* ($(wc -l <"$T_TMP/exports") symbols)"
else
  t_fail "libtpload.so exports only tpl_*" "$(grep -v '^tpl_[a-z]' \
    "$T_TMP/exports" | head -n 10)"
fi

# The consumer, built in a directory of its own from the installed tree.
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$DEST"
WORK=$T_TMP/consumer
mkdir -p "$WORK"
cp "$TESTS_SRCDIR/lib/consumer.c" "$WORK/"
ver=$(pkg-config --modversion tpload)
if [ -n "$ver" ] && [ "$ver" = "$want" ]; then
  t_ok "pkg-config --modversion tpload = TPL_VERSION_STRING ($ver)"
else t_fail "pkg-config version" "pkg-config '$ver', header '$want'"; fi
# shellcheck disable=SC2046,SC2086
if (cd "$WORK" && ${CC:-cc} $SAN_CFLAGS -o consumer consumer.c \
    $(pkg-config --cflags tpload) $(pkg-config --libs tpload)) \
    >"$T_TMP/cc.log" 2>&1; then
  t_ok "consumer.c compiles and links with pkg-config against the install"
else t_fail "consumer compiles" "$(head -c 2000 "$T_TMP/cc.log")"; fi
export LD_LIBRARY_PATH="$LIBDIR"
if ldd "$WORK/consumer" | grep -q "$LIBDIR/libtpload.so.0"; then
  t_ok "the consumer loads the installed libtpload.so.0"
else t_fail "the consumer loads the installed libtpload" \
  "$(ldd "$WORK/consumer" | grep tpload)"; fi

t_exit "no daemon: exit 69 and one message" 69 \
  "$WORK/consumer" "$T_TMP/none/rank0.sock" "$T_TMP/none.txt"

serve_two_ranks 11 single
for r in 0 1; do
  t_check "consumer reads rank $r" "$WORK/consumer" "$SOCK/rank$r.sock" \
    "$T_TMP/rank$r.txt"
  t_check "rank $r as read through libtpload = numpy oracle" "$ORACLE" \
    "$TESTS_SRCDIR/oracle/consumer_check.py" "$M/m" "$M/m/plan.json" 2 "$r" \
    "$T_TMP/rank$r.txt"
done
# The installed Python module over the installed libtpload.so: the same
# bytes as the consumer read (checked against the oracle above).
INST_PY='
import sys, tpload
s = tpload.attach(sys.argv[1])
got = b"".join(s.tensor(i).tobytes() for i in range(len(s)))
if got != open(sys.argv[2], "rb").read():
    sys.exit("the arrays differ from what consumer.c read")
'
if [ -z "$SAN_CFLAGS" ]; then
  for r in 0 1; do
    t_check "installed tpload.py + libtpload.so read rank $r as consumer.c did" \
      env PYTHONPATH="$DEST$TPL_PYTHONDIR" \
      TPLOAD_LIBRARY="$LIBDIR/libtpload.so.0" "$ORACLE" -c "$INST_PY" \
      "$SOCK/rank$r.sock" "$T_TMP/rank$r.txt.bin"
  done
fi
t_check "tpload status --shutdown (installed binary)" "$DEST$TPL_BINDIR/tpload" \
  status "$SOCK/rank0.sock" --shutdown
serve_end
if [ "$SERVE_RC" = 0 ]; then t_ok "the job ends with exit 0"
else t_fail "the job ends with exit 0" "exit: $SERVE_RC"; fi

if ${MAKE:-make} -C "$TPL_BUILDDIR" uninstall DESTDIR="$DEST" \
    >"$T_TMP/uninstall.log" 2>&1 &&
   [ -z "$(find "$DEST" -type f -o -type l)" ]; then
  t_ok "make uninstall removes every installed file"
else
  t_fail "make uninstall removes every file" "$(find "$DEST" -type f -o \
    -type l | head -n 10)" "$(tail -n 5 "$T_TMP/uninstall.log")"
fi
t_done
