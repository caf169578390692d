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
t_exit "--read-gap is for --read local" 64 "$TPLOAD" load "$T_TMP/m" \
  --read-gap 0
grep -q "read-gap is for --read local" "$T_TMP/err" &&
  t_ok "... and says so" || t_fail "... and says so" "$(cat "$T_TMP/err")"
t_exit "--read-gap takes bytes" 64 "$TPLOAD" load "$T_TMP/m" --read local \
  --read-gap 4k
t_exit "--read-gap at most 1 GiB" 64 "$TPLOAD" preshard "$T_TMP/m" \
  --out "$T_TMP/o" --read local --read-gap 1073741825
t_exit "load --help" 0 "$TPLOAD" load --help
grep -q -- "--read-gap B" "$T_TMP/out" && t_ok "load --help tells --read-gap" ||
  t_fail "load --help tells --read-gap" "$(head -c 300 "$T_TMP/out")"
t_done
