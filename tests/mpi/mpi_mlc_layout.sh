#!/bin/sh
# mpi_mlc_layout.sh - `preshard --layout mlc` end to end: every
# architecture `tpload synth --format mlc` writes, plain, q4f16_1 and
# e4m3_e4m3_f16, at N = 2 and 4 (alternating, so every architecture and
# every scheme meets both), and --pp 2 (with tp 2 and tp 1) and two
# replicas once each.  tests/mlc_preshard.py
# reads each output as MLC's LoadMultiGPUPresharded does and compares
# every worker's params with its numpy transcription of MLC's gen_tir on
# the source, checks the md5 sums, that no worker loads a file twice and
# that no file a worker loads holds another worker's shard records; then
# `tpload verify --layout mlc` must agree, and find a flipped byte.  The
# command-line rules of --layout come last.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

P="$TESTS_SRCDIR/oracle/mlc_preshard.py"
SIZES="--hidden 256 --intermediate 512 --layers 2 --vocab 256"

# layout_case NAME N ARCH QUANT [PRESHARD-ARGS...]
layout_case() {
  local name=$1 n=$2 arch=$3 quant=$4
  shift 4
  local src="$M/$name" out="$T_TMP/$name.out" q=""
  [ "$quant" = plain ] || q="--quant $quant"
  # shellcheck disable=SC2086
  if ! "$TPLOAD" synth --arch "$arch" --format mlc $SIZES $q --out "$src" \
    --quiet >"$T_TMP/err" 2>&1; then
    t_fail "$name: synth" "$(head -c 2000 "$T_TMP/err")"
    return
  fi
  echo '{"tokenizer": "copied unchanged"}' >"$src/tokenizer.json"
  if ! mpi "$n" preshard "$src" --out "$out" --layout mlc --quiet "$@" \
    >"$T_TMP/err" 2>&1; then
    t_fail "$name: preshard --layout mlc N=$n" "$(head -c 2000 "$T_TMP/err")"
    return
  fi
  "$TPLOAD" plan "$src" --shards "$n" "$@" >"$src.plan.json" 2>/dev/null
  if "$ORACLE" "$P" check "$src" "$out" "$src.plan.json" \
    >"$T_TMP/pout" 2>&1 && grep -qx ok "$T_TMP/pout"; then
    t_ok "$name: every worker loads gen_tir's bytes, from its own files"
  else
    t_fail "$name: every worker loads gen_tir's bytes, from its own files" \
      "$(grep -v '^bytes' "$T_TMP/pout" | head -c 3000)"
  fi
  grep '^bytes' "$T_TMP/pout" | sed "s/^/# $name: /"
  t_exit "$name: verify --layout mlc" 0 \
    "$TPLOAD" verify "$src" "$out" --layout mlc --quiet
}

# Every architecture and scheme; N alternates so each meets 2 and 4.
i=0
for arch in llama mistral qwen2 gemma phi3; do
  for quant in plain q4f16_1 e4m3_e4m3_f16; do
    n=$((2 + 2 * (i % 2)))
    i=$((i + 1))
    layout_case "$arch-$quant-$n" "$n" "$arch" "$quant"
  done
done
layout_case "llama-plain-tp2-pp2" 4 llama plain --tp 2 --pp 2
# Stages alone (the embedding and lm_head are on both: stored once, in
# files of their own), and two replicas (replica 1 writes nothing).
layout_case "qwen2-plain-tp1-pp2" 2 qwen2 plain --tp 1 --pp 2
layout_case "gemma-q4f16_1-tp2-dp2" 4 gemma q4f16_1 --tp 2

# The output of the first case, doctored and otherwise.
src="$M/llama-plain-2" out="$T_TMP/llama-plain-2.out"
t_check "the copied files: tokenizer.json unchanged" \
  cmp "$src/tokenizer.json" "$out/tokenizer.json"
t_check "mlc-chat-config.json says tensor_parallel_shards 2" \
  grep -q '"tensor_parallel_shards": 2' "$out/mlc-chat-config.json"
t_exit "inspect lists the presharded cache" 0 "$TPLOAD" inspect "$out"
# A presharded cache is a model to shard (issue 40): its full tensors,
# planned at 2 (tests/mpi/reshard_mlc.sh checks their bytes).
t_exit "a presharded cache is sharded as its full tensors" 0 \
  "$TPLOAD" inspect "$out" --shards 2
if grep -q "_shard-" "$T_TMP/out"; then
  t_fail "... its records' names gone" "$(head -c 1500 "$T_TMP/out")"
else
  t_ok "... its records' names gone"
fi
t_exit "verify of the wrong grid is refused" 65 \
  "$TPLOAD" verify "$src" "$out" --layout mlc --tp 4
cp -r "$out" "$T_TMP/flipped"
printf '\001' | dd of="$T_TMP/flipped/params_shard_1.bin" bs=1 seek=7 \
  conv=notrunc 2>/dev/null
t_exit "verify finds a flipped byte" 65 \
  "$TPLOAD" verify "$src" "$T_TMP/flipped" --layout mlc
if grep -q "params_shard_1.bin: expected md5sum" "$T_TMP/err"; then
  t_ok "... naming the file and its md5sum"
else
  t_fail "... naming the file and its md5sum" "$(cat "$T_TMP/err")"
fi
t_exit "an existing output is refused without --force" 73 \
  mpi 2 preshard "$src" --out "$out" --layout mlc --quiet
t_exit "--force replaces it" 0 \
  mpi 2 preshard "$src" --out "$out" --layout mlc --quiet --force
t_exit "... and it verifies" 0 \
  "$TPLOAD" verify "$src" "$out" --layout mlc --quiet

# --layout's rules.
"$TPLOAD" synth --arch llama --out "$M/hf" --layers 1 --quiet
t_exit "--layout mlc on an HF checkpoint: 64" 64 \
  mpi 2 preshard "$M/hf" --out "$T_TMP/hf.out" --layout mlc
if grep -q "MLC weight directory" "$T_TMP/err"; then
  t_ok "... saying an MLC weight directory is needed"
else
  t_fail "... saying an MLC weight directory is needed" "$(cat "$T_TMP/err")"
fi
t_exit "--layout bogus: 64" 64 \
  mpi 2 preshard "$src" --out "$T_TMP/b.out" --layout bogus
t_exit "--layout rank is the default layout" 0 \
  mpi 2 preshard "$src" --out "$T_TMP/rank.out" --layout rank --quiet
t_check "... rank files and shard-info.json" \
  test -f "$T_TMP/rank.out/rank1.safetensors" -a \
  -f "$T_TMP/rank.out/shard-info.json"
t_exit "--layout is for preshard only" 64 \
  mpi 2 load "$src" --layout mlc
t_exit "verify --layout bogus: 64" 64 \
  "$TPLOAD" verify "$src" "$out" --layout bogus
t_done
