#!/bin/sh
# install.sh - libtpload as a user gets it: `make install DESTDIR=...`,
# then a consumer program (tests/lib/consumer.c, calling every function
# tpload.h declares) compiled outside the build tree with `pkg-config
# --cflags --libs tpload` against the installed tree only, run against a
# live 2-rank `tpload serve`; what it reads from each rank is checked
# against the numpy oracle, and the installed Python module reads the
# same bytes with nothing set but PYTHONPATH (standing for the DESTDIR).
# README's two consumers (docs/examples/attach.c and attach.py, installed
# in DOCDIR/examples) run as they are written.  Also: the installed files
# (header, shared and static library, tpload.pc, man pages, examples,
# tpload.py where the system's python3 imports from for the prefix);
# every function tpload.h declares resolves
# (dlsym) in the installed libtpload.so, which exports nothing else, and
# is in libtpload(3); tpload(1) has a section per command and names every
# option of the command table where it describes the command, and none a
# command lacks; every `tpload CMD --help` too; both pages render and
# carry the version; an unreachable socket (exit 69 with a message); and
# `make uninstall` leaves no file.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"
. "$TESTS_SRCDIR/lib/install_lib.sh"

: "${TPL_BUILDDIR:?run via make check}"
DEST=$T_TMP/root
LIBDIR=$DEST$TPL_LIBDIR
PREFIX=${TPL_PREFIX:-${TPL_LIBDIR%/lib}}
PY=${PYTHON:-/usr/bin/python3}
EXAMPLES=$DEST${TPL_DOCDIR:-$PREFIX/share/doc/tpload}/examples  # as installed
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
    "$DEST$TPL_MANDIR/man3/libtpload.3" "$EXAMPLES/attach.c" \
    "$EXAMPLES/attach.py"; do
  [ -e "$f" ] || missing="$missing ${f#"$DEST"}"
done
if [ -z "$missing" ]; then t_ok "installed: header, libtpload (.so, .a), tpload.pc, tpload, man pages, examples"
else t_fail "installed files" "missing:$missing"; fi

want=$(sed -n 's/^#define TPL_VERSION_STRING "\(.*\)"$/\1/p' \
  "$DEST$TPL_INCLUDEDIR/tpload.h")
public_functions "$DEST$TPL_INCLUDEDIR/tpload.h" >"$T_TMP/api"
if [ "$(wc -l <"$T_TMP/api")" -ge 10 ]; then
  t_ok "tpload.h declares $(wc -l <"$T_TMP/api") functions"
else t_fail "tpload.h's functions" "found: $(cat "$T_TMP/api")"; fi

# tpload.py where the system's python3 imports from for this prefix (the
# entries of its sys.path under PREFIX/lib), or for a prefix it does not
# search, in PREFIX/lib/python3/dist-packages (libtpload.3 says so).
"$PY" -c 'import sys
p = sys.argv[1].rstrip("/") + "/lib/"
for d in sys.path:
    if d.startswith(p) and d.endswith("-packages"):
        print(d)' \
  "$PREFIX" >"$T_TMP/pydirs"
where="where $PY imports from for $PREFIX"
if [ ! -s "$T_TMP/pydirs" ]; then
  echo "$PREFIX/lib/python3/dist-packages" >"$T_TMP/pydirs"
  where="in PREFIX/lib/python3/dist-packages ($PY does not search $PREFIX)"
fi
PYDIR=""
while read -r d; do
  [ -z "$PYDIR" ] && [ -f "$DEST$d/tpload.py" ] && PYDIR=$DEST$d
done <"$T_TMP/pydirs"
if [ -n "$PYDIR" ]; then
  t_ok "tpload.py installed $where: ${PYDIR#"$DEST"}"
else
  t_fail "tpload.py installed $where" \
    "expected in one of: $(echo $(cat "$T_TMP/pydirs"))" \
    "installed: $(cd "$DEST" && find . -name 'tpload.py*')"
  PYDIR=$DEST/nowhere
fi

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

# tpload(1) names every option of the command table in its command's
# synopsis or section and no option a command lacks; so does every
# `tpload CMD --help` (the installed binary's).
MAN3=$DEST$TPL_MANDIR/man3/libtpload.3
"$TESTS_BUILDDIR/unit/cli_table" >"$T_TMP/table"
option_problems "$T_TMP/table" man <"$MAN1" >"$T_TMP/man1.bad"
if [ -s "$T_TMP/table" ] && [ ! -s "$T_TMP/man1.bad" ]; then
  t_ok "tpload.1 documents each command's options ($(tr ' ' '\n' \
    <"$T_TMP/table" | grep -c -- --) in all) and no other"
else t_fail "tpload.1 documents every option, and no other" \
  "$(head -n 40 "$T_TMP/man1.bad")"; fi
: >"$T_TMP/help.bad"
for c in $(cut -d' ' -f1 "$T_TMP/table"); do
  "$DEST$TPL_BINDIR/tpload" "$c" --help |
    option_problems "$T_TMP/table" help "$c" >>"$T_TMP/help.bad"
done
if [ ! -s "$T_TMP/help.bad" ]; then
  t_ok "every tpload CMD --help names its options and no other"
else t_fail "tpload CMD --help names its options" \
  "$(head -n 20 "$T_TMP/help.bad")"; fi
[ "$(cut -d' ' -f1 "$T_TMP/table" | sort)" = "$(echo "$cmds" | sort)" ] ||
  t_fail "cli_table prints the commands tpload --help lists" "$cmds"

# libtpload(3) lists and declares each function of tpload.h, and no other.
man_functions "$MAN3" >"$T_TMP/man3"
for part in name synopsis; do
  sed -n "s/^$part //p" "$T_TMP/man3" >"$T_TMP/man3.$part"
  if cmp -s "$T_TMP/api" "$T_TMP/man3.$part"; then
    t_ok "libtpload.3's ${part} section has every function of tpload.h, no other"
  else t_fail "libtpload.3's $part section = tpload.h's functions" \
    "$(diff "$T_TMP/api" "$T_TMP/man3.$part" | grep '^[<>]')"; fi
done

# Every function tpload.h declares resolves in the installed shared
# library (a declaration without TPL_API does not), and it exports only
# those (-fvisibility=hidden).
# shellcheck disable=SC2086
if ${CC:-cc} $SAN_CFLAGS -o "$T_TMP/dlsym_check" \
    "$TESTS_SRCDIR/lib/dlsym_check.c" >"$T_TMP/cc.log" 2>&1 &&
   "$T_TMP/dlsym_check" "$LIBDIR/libtpload.so.0" $(cat "$T_TMP/api") \
    >"$T_TMP/unresolved" 2>&1; then
  t_ok "dlsym finds each of tpload.h's $(wc -l <"$T_TMP/api") functions in the installed libtpload.so"
else t_fail "dlsym finds every function of tpload.h in libtpload.so" \
  "unresolved: $(echo $(cat "$T_TMP/unresolved" "$T_TMP/cc.log"))"; fi
nm -D --defined-only "$LIBDIR/libtpload.so.0" | awk '{ print $3 }' |
  sort >"$T_TMP/exports"
if [ -s "$T_TMP/exports" ] && ! grep -qv '^tpl_[a-z]' "$T_TMP/exports" &&
   grep -qx tpl_attach "$T_TMP/exports"; then
  t_ok "libtpload.so exports only tpl_* ($(wc -l <"$T_TMP/exports") symbols)"
else
  t_fail "libtpload.so exports only tpl_*" "$(grep -v '^tpl_[a-z]' \
    "$T_TMP/exports" | head -n 10)"
fi
if cmp -s "$T_TMP/api" "$T_TMP/exports"; then
  t_ok "libtpload.so exports exactly the functions tpload.h declares"
else t_fail "libtpload.so exports = tpload.h's functions" \
  "$(diff "$T_TMP/api" "$T_TMP/exports" | grep '^[<>]')"; fi

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
nm -u "$WORK/consumer" | awk '{ print $2 }' | sed 's/@.*//' |
  sort -u >"$T_TMP/calls"
if [ -n "$(comm -23 "$T_TMP/api" "$T_TMP/calls")" ]; then
  t_fail "consumer.c calls every function of tpload.h" \
    "it does not call: $(echo $(comm -23 "$T_TMP/api" "$T_TMP/calls"))"
else t_ok "consumer.c calls every function of tpload.h"; fi
# README's C consumer, built as its header comment says (an ASan-built
# library needs the sanitizer's flags too).
cp "$EXAMPLES/attach.c" "$WORK/"
ATTACH_CC=cc
[ -z "$SAN_CFLAGS" ] || ATTACH_CC="${CC:-cc} $SAN_CFLAGS"
# shellcheck disable=SC2046,SC2086
if (cd "$WORK" &&
    $ATTACH_CC attach.c -o attach $(pkg-config --cflags --libs tpload)) \
    >"$T_TMP/cc.log" 2>&1; then
  t_ok "the installed examples/attach.c builds with cc and pkg-config"
else t_fail "attach.c builds" "$(head -c 2000 "$T_TMP/cc.log")"; fi
export LD_LIBRARY_PATH="$LIBDIR"  # what ldconfig does for /usr/local
if ldd "$WORK/consumer" | grep -q "$LIBDIR/libtpload.so.0"; then
  t_ok "the consumer loads the installed libtpload.so.0"
else t_fail "the consumer loads the installed libtpload" \
  "$(ldd "$WORK/consumer" | grep tpload)"; fi

t_exit "no daemon: exit 69 and one message" 69 \
  "$WORK/consumer" "$T_TMP/none/rank0.sock" "$T_TMP/none.txt"

serve_two_ranks 11 single
job_id=$(sed -n 's/.*"job_id": *"\([0-9a-f]*\)".*/\1/p' "$T_TMP/ready")
for r in 0 1; do
  t_check "consumer reads rank $r" "$WORK/consumer" "$SOCK/rank$r.sock" \
    "$T_TMP/rank$r.txt"
  line="job $job_id, model $M/m"
  if [ -n "$job_id" ] && [ "$(sed 's/^rank [0-9]* of 2: [0-9]* bytes, //' \
      "$T_TMP/out")" = "$line" ]; then
    t_ok "rank $r: tpl_shard_job_id = the ready file's, tpl_shard_model = MODEL"
  else t_fail "rank $r: job id and model" "expected: $line" \
    "found:    $(cat "$T_TMP/out")"; fi
  t_check "rank $r as read through libtpload = numpy oracle" "$ORACLE" \
    "$TESTS_SRCDIR/oracle/consumer_check.py" "$M/m" "$M/m/plan.json" 2 "$r" \
    "$T_TMP/rank$r.txt"
done

# What README's consumers print for rank 1, from the oracle.
"$ORACLE" -c 'import json, sys
sys.path.insert(0, sys.argv[1])
import oracle
model, rank, name = sys.argv[2], int(sys.argv[3]), sys.argv[4]
rules = json.load(open(model + "/plan.json"))["rules"]
exp = oracle.expected_shards(oracle.read_model(model), rules, 2)
print("rank %d of 2: %d tensors, %d bytes" % (rank, len(exp),
      sum(len(e["ranks"][rank]) for e in exp)))
e = [e for e in exp if e["name"] == name][0]
print(name, oracle.MLC_NAME[e["dtype"]], "(%s)" % ", ".join(
      str(d) for d in e["rank_shape"]), len(e["ranks"][rank]), "bytes")' \
  "$TESTS_SRCDIR/oracle" "$M/m" 1 lm_head.weight >"$T_TMP/attach.want"
# t_prints NAME CMD...: CMD succeeds and prints attach.want.
t_prints() {
  local name=$1; shift
  if "$@" >"$T_TMP/attach.got" 2>"$T_TMP/err" &&
     cmp -s "$T_TMP/attach.want" "$T_TMP/attach.got"; then t_ok "$name"
  else t_fail "$name" "expected: $(cat "$T_TMP/attach.want")" \
    "found: $(cat "$T_TMP/attach.got" "$T_TMP/err")"; fi
}
t_prints "examples/attach.c on rank 1 = numpy oracle" \
  "$WORK/attach" "$SOCK/rank1.sock" lm_head.weight

# The installed Python module with only PYTHONPATH set (for the DESTDIR):
# it loads the libtpload.so installed with it, reads the bytes the
# consumer read (checked against the oracle above), and README's Python
# consumer runs as written.
INST_PY='
import sys, tpload
if tpload.library_path() != sys.argv[3]:
    sys.exit("loads %s, not the installed %s" % (tpload.library_path(),
             sys.argv[3]))
s = tpload.attach(sys.argv[1])
got = b"".join(s.tensor(i).tobytes() for i in range(len(s)))
if got != open(sys.argv[2], "rb").read():
    sys.exit("the arrays differ from what consumer.c read")
'
if [ -z "$SAN_CFLAGS" ]; then
  for r in 0 1; do
    t_check "installed tpload.py loads the installed libtpload.so, reads rank $r as consumer.c did" \
      env -u TPLOAD_LIBRARY -u LD_LIBRARY_PATH PYTHONPATH="$PYDIR" \
      "$PY" -c "$INST_PY" "$SOCK/rank$r.sock" "$T_TMP/rank$r.txt.bin" \
      "$LIBDIR/libtpload.so.0"
  done
  t_prints "examples/attach.py on rank 1 (installed tpload.py) = numpy oracle" \
    env -u TPLOAD_LIBRARY -u LD_LIBRARY_PATH PYTHONPATH="$PYDIR" \
    "$PY" "$EXAMPLES/attach.py" "$SOCK/rank1.sock" lm_head.weight
fi
t_check "tpload status --health (installed binary)" "$DEST$TPL_BINDIR/tpload" \
  status "$SOCK/rank0.sock" --health
t_exit "tpl_shutdown through rank 1 is refused (TPL_EPEER: 69)" 69 \
  "$WORK/consumer" "$SOCK/rank1.sock" "$T_TMP/again1.txt" --shutdown
if "$WORK/consumer" "$SOCK/rank0.sock" "$T_TMP/again0.txt" --shutdown \
    >"$T_TMP/out" 2>"$T_TMP/err"; then t_ok "tpl_shutdown through rank0.sock"
else
  t_fail "tpl_shutdown through rank0.sock" "$(head -c 2000 "$T_TMP/err")"
  "$DEST$TPL_BINDIR/tpload" status "$SOCK/rank0.sock" --shutdown  # end it
fi
serve_end
if [ "$SERVE_RC" = 0 ]; then t_ok "the job ends with exit 0"
else t_fail "the job ends with exit 0" "exit: $SERVE_RC" \
  "$(messages "$T_TMP/serve.err" | tail -c 1500)"; fi

if ${MAKE:-make} -C "$TPL_BUILDDIR" uninstall DESTDIR="$DEST" \
    >"$T_TMP/uninstall.log" 2>&1 &&
   [ -z "$(find "$DEST" -type f -o -type l)" ]; then
  t_ok "make uninstall removes every installed file"
else
  t_fail "make uninstall removes every file" "$(find "$DEST" -type f -o \
    -type l | head -n 10)" "$(tail -n 5 "$T_TMP/uninstall.log")"
fi
t_done
