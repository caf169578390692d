#!/bin/sh
# cli.sh - the command line itself: help, version, usage errors.
T_NO_NUMPY=1 # needs no oracle
. "$TESTS_SRCDIR/lib/lib.sh"

t_exit "--help exits 0" 0 "$TPLOAD" --help
grep -q "inspect" "$T_TMP/out" && t_ok "--help lists commands" || t_fail "--help lists commands"
t_exit "--version exits 0" 0 "$TPLOAD" --version
grep -q "^tpload [0-9]" "$T_TMP/out" && t_ok "--version prints version" || t_fail "--version prints version"
t_exit "no command is a usage error" 64 "$TPLOAD"
t_exit "unknown command is a usage error" 64 "$TPLOAD" frobnicate
t_exit "inspect --help" 0 "$TPLOAD" inspect --help
t_exit "inspect without MODEL" 64 "$TPLOAD" inspect
t_exit "inspect bad option" 64 "$TPLOAD" inspect --bogus x
t_exit "inspect missing model" 66 "$TPLOAD" inspect "$T_TMP/does-not-exist"
t_exit "serve --hugetlb takes auto, on or off" 64 "$TPLOAD" serve \
  "$T_TMP/m" --socket-dir "$T_TMP/s" --hugetlb bogus
t_exit "--hugetlb is for serve" 64 "$TPLOAD" load "$T_TMP/m" --hugetlb on
t_done
