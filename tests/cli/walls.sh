#!/bin/sh
# walls.sh - the compiler-checked walls (src/guard/, DESIGN.md section 4):
# each guard header stops a compile that includes mpi.h or uv.h, every
# unit but its own has the guard first on its include path, and the one
# unit that sees mpi.h (libtplengine) is exactly the engine's files.
T_NO_NUMPY=1
. "$TESTS_SRCDIR/lib/lib.sh"
top="$TESTS_SRCDIR/.."
am="$top/Makefile.am"

# guard_refuses NAME HEADER DIR WORDS: a file including HEADER does not
# preprocess with DIR first on the path, and says WORDS.
guard_refuses() {
  printf '#include <%s>\n' "$2" >"$T_TMP/use.c"
  if ${CC:-cc} -E -I"$top/src/guard/$3" "$T_TMP/use.c" >/dev/null \
    2>"$T_TMP/err"; then
    t_fail "$1" "the compile including $2 succeeded"
  elif grep -q "$4" "$T_TMP/err"; then
    t_ok "$1"
  else
    t_fail "$1" "$(head -c 600 "$T_TMP/err")"
  fi
}
guard_refuses "mpi.h refused outside the engine" mpi.h mpi \
  "mpi.h is reserved for the engine"
guard_refuses "uv.h refused outside the daemon" uv.h uv \
  "uv.h is reserved for the daemon"

# The value of a Makefile.am variable, continuation lines joined.
am_var() {
  awk -v v="$1" '
    $1 == v && ($2 == "=" || $2 == "+=") { on = 1; $1 = ""; $2 = "" }
    on { line = $0; more = sub(/\\$/, "", line); printf "%s ", line
         if (!more) on = 0 }' "$am"
}

# The engine's unit: its .c files are engine.c, engine_*.c and beat.c,
# every one of them in src/, and no other.
unit=$(am_var libtplengine_la_SOURCES | tr -s ' \t' '\n\n' | grep '\.c$' |
  sort)
want=$(cd "$top" && ls src/engine.c src/engine_*.c src/beat.c | sort)
if [ -n "$unit" ] && [ "$unit" = "$want" ]; then
  t_ok "libtplengine is the engine's files"
else
  t_fail "libtplengine is the engine's files" "unit: $unit" "want: $want"
fi

# Only the engine's unit drops GUARD_MPI, only the daemon's GUARD_UV:
# every unit with CPPFLAGS of its own names the other guard, or both.
bad=
units=$(awk '$1 ~ /_CPPFLAGS$/ && $1 != "BASE_CPPFLAGS" && $2 == "=" {
  print $1 }' "$am")
for v in $units; do
  flags=$(am_var "$v")
  case $v in
    AM_CPPFLAGS) need='$(GUARD_MPI) $(GUARD_UV)' ;;
    libtplengine_la_CPPFLAGS) need='$(GUARD_UV)' ;;
    libtpldaemon_la_CPPFLAGS) need='$(GUARD_MPI)' ;;
    *) need='$(GUARD_MPI) $(GUARD_UV)' ;;
  esac
  for g in $need; do
    case " $flags " in
      *" $g "* | *'$(AM_CPPFLAGS)'*) ;;
      *) bad="$bad $v lacks $g;" ;;
    esac
  done
done
if [ -z "$bad" ]; then
  t_ok "every other unit has the guards on its path"
else
  t_fail "every other unit has the guards on its path" "$bad"
fi
t_done
