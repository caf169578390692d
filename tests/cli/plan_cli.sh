#!/bin/sh
# plan_cli.sh - `tpload plan` and `tpload inspect --shards` on small real
# checkpoints written with numpy (tests/npst.py): the printed shard info
# is checked against shapes, segs and out_shapes derived by hand from
# DESIGN.md's rules (shard dim / N; segs per shard = full segs / N).
. "$TESTS_SRCDIR/lib/lib.sh"

# phi3: hidden 16, 4 heads (head dim 4), 2 kv heads, intermediate 24:
# qkv_proj rows 16 + 8 + 8 = 32, gate_up_proj rows 24 + 24 = 48.
# gpt2: n_embd 16, 4 heads, Conv1D [in, out], MLP 4 x 16 = 64.
cat >"$T_TMP/gen.py" <<'EOF'
import json, os, sys
import numpy as np
sys.path.insert(0, os.environ["TESTS_SRCDIR"] + "/oracle")
import npst

out = sys.argv[1]
f16 = lambda *s: np.zeros(s, np.float16)
f32 = lambda *s: np.zeros(s, np.float32)

def model(d, tensors, config):
    os.makedirs(d)
    npst.write(os.path.join(d, "model.safetensors"), tensors)
    if config is not None:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f)

model(os.path.join(out, "phi3"), {
    "model.embed_tokens.weight": f16(40, 16),
    "model.layers.0.input_layernorm.weight": f16(16),
    "model.layers.0.self_attn.qkv_proj.weight": f16(32, 16),
    "model.layers.0.self_attn.o_proj.weight": f16(16, 16),
    "model.layers.0.mlp.gate_up_proj.weight": f16(48, 16),
    "model.layers.0.mlp.down_proj.weight": f16(16, 24),
    "model.norm.weight": f16(16),
    "lm_head.weight": f16(40, 16),
}, {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3",
    "hidden_size": 16, "num_attention_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 24})

model(os.path.join(out, "gpt2"), {
    "wte.weight": f32(40, 16),
    "h.0.attn.c_attn.weight": f32(16, 48),
    "h.0.attn.c_attn.bias": f32(48),
    "h.0.attn.c_proj.weight": f32(16, 16),
    "h.0.attn.c_proj.bias": f32(16),
    "h.0.mlp.c_fc.weight": f32(16, 64),
    "h.0.mlp.c_fc.bias": f32(64),
    "h.0.mlp.c_proj.weight": f32(64, 16),
    "h.0.mlp.c_proj.bias": f32(16),
}, {"architectures": ["GPT2LMHeadModel"], "n_embd": 16, "n_head": 4,
    "n_inner": None})

model(os.path.join(out, "bare"), {"a.weight": f32(4, 6)}, None)
EOF

# check.py JSON: compares `tpload plan` output with the expectations in
# EXPECT (python literal: name -> (shape, func, in, out, dim, segs, scale)).
cat >"$T_TMP/check.py" <<'EOF'
import json, sys
got = json.load(open(sys.argv[1]))
n, scaling = int(sys.argv[2]), sys.argv[3] == "1"
exp = eval(open(sys.argv[4]).read())
order = [l.strip() for l in open(sys.argv[5]) if l.strip()]
errs = []
def want(what, a, b):
    if a != b:
        errs.append("%s: got %r, expected %r" % (what, a, b))
want("tensor_parallel_shards", got["tensor_parallel_shards"], n)
want("bias_scaling", got["bias_scaling"], scaling)
want("order", [p["name"] for p in got["params"]], order)
for p in got["params"]:
    name = p["name"]
    shape, func, ins, outs, dim, segs, scale, *kv = exp[name]
    want(name + " kv_replicas", p.get("kv_replicas"), kv[0] if kv else None)
    want(name + " shape", p["shape"], shape)
    want(name + " bias_scale", p["bias_scale"], scale)
    want(name + " pipeline_stages", p["pipeline_stages"], [0])
    if func is None:
        want(name + " preprocs", p["preprocs"], [])
        want(name + " dim", "dim" in p, False)
        continue
    if n == 1:  # MLC's compile.py: no shard preproc at N = 1
        want(name + " preprocs", p["preprocs"], [])
        want(name + " dim", p["dim"], dim)
        continue
    want(name + " preprocs", len(p["preprocs"]), 1)
    pre = p["preprocs"][0]
    want(name + " func_name", pre["func_name"], func)
    want(name + " in_shape", pre["in_shape"], ins)
    want(name + " out_shape", pre["out_shape"], outs)
    want(name + " out_dtype", pre["out_dtype"], p["dtype"])
    want(name + " dim", p["dim"], dim)
    want(name + " segs", p["segs"], segs)
    want(name + " ranks", "ranks" in p, False)
if errs:
    print("\n".join(errs))
    sys.exit(1)
EOF

if ! "$ORACLE" "$T_TMP/gen.py" "$T_TMP" 2>"$T_TMP/gen.err"; then
  t_fail "write test models" "$(head -c 2000 "$T_TMP/gen.err")"
  t_done
  exit 1
fi
# Checkpoint order = data order in the file, as npst wrote it.
for m in phi3 gpt2; do
  "$ORACLE" -c "import sys; sys.path.insert(0, '$TESTS_SRCDIR/oracle'); import npst
print('\n'.join(npst.read('$T_TMP/$m/model.safetensors')[2]))" \
    >"$T_TMP/$m.order"
done

# check_plan NAME MODEL N SCALING EXPECT [ARGS...]
check_plan() {
  name=$1 model=$2 n=$3 scaling=$4 expect=$5
  shift 5
  if ! "$TPLOAD" plan "$T_TMP/$model" --shards "$n" "$@" \
    >"$T_TMP/plan.json" 2>"$T_TMP/err"; then
    t_fail "$name" "tpload plan failed: $(head -c 2000 "$T_TMP/err")"
  elif "$ORACLE" "$T_TMP/check.py" "$T_TMP/plan.json" "$n" "$scaling" \
    "$expect" "$T_TMP/$model.order" >"$T_TMP/check.out" 2>&1; then
    t_ok "$name"
  else
    t_fail "$name" "$(head -c 3000 "$T_TMP/check.out")"
  fi
}

cat >"$T_TMP/phi3.2" <<'EOF'
{
 "model.embed_tokens.weight": ([40, 16], None, 0, 0, 0, 0, 1.0),
 "model.layers.0.input_layernorm.weight": ([16], None, 0, 0, 0, 0, 1.0),
 "model.layers.0.self_attn.qkv_proj.weight":
   ([16, 16], "_shard_qkv", [32, 16], [2, 16, 16], 0, [8, 4, 4], 1.0),
 "model.layers.0.self_attn.o_proj.weight":
   ([16, 8], "_shard_o", [16, 16], [2, 16, 8], 1, [8], 1.0),
 "model.layers.0.mlp.gate_up_proj.weight":
   ([24, 16], "_shard_mlp_up", [48, 16], [2, 24, 16], 0, [12, 12], 1.0),
 "model.layers.0.mlp.down_proj.weight":
   ([16, 12], "_shard_mlp_down", [16, 24], [2, 16, 12], 1, [12], 1.0),
 "model.norm.weight": ([16], None, 0, 0, 0, 0, 1.0),
 "lm_head.weight": ([40, 16], None, 0, 0, 0, 0, 1.0),
}
EOF
check_plan "plan phi3 auto, 2 shards" phi3 2 1 "$T_TMP/phi3.2"
check_plan "plan phi3 --plan phi3, 2 shards" phi3 2 1 "$T_TMP/phi3.2" \
  --plan phi3

cat >"$T_TMP/phi3.1" <<'EOF'
{
 "model.embed_tokens.weight": ([40, 16], None, 0, 0, 0, 0, 1.0),
 "model.layers.0.input_layernorm.weight": ([16], None, 0, 0, 0, 0, 1.0),
 "model.layers.0.self_attn.qkv_proj.weight":
   ([32, 16], "_shard_qkv", [32, 16], [1, 32, 16], 0, [16, 8, 8], 1.0),
 "model.layers.0.self_attn.o_proj.weight":
   ([16, 16], "_shard_o", [16, 16], [1, 16, 16], 1, [16], 1.0),
 "model.layers.0.mlp.gate_up_proj.weight":
   ([48, 16], "_shard_mlp_up", [48, 16], [1, 48, 16], 0, [24, 24], 1.0),
 "model.layers.0.mlp.down_proj.weight":
   ([16, 24], "_shard_mlp_down", [16, 24], [1, 16, 24], 1, [24], 1.0),
 "model.norm.weight": ([16], None, 0, 0, 0, 0, 1.0),
 "lm_head.weight": ([40, 16], None, 0, 0, 0, 0, 1.0),
}
EOF
check_plan "plan phi3, 1 shard" phi3 1 1 "$T_TMP/phi3.1"

# gpt2, 4 shards: c_attn [16, 48] cut along dim 1 in three 16-wide
# segments -> [16, 12] with segs [4, 4, 4]; row-parallel biases 1/4.
cat >"$T_TMP/gpt2.4" <<'EOF'
{
 "wte.weight": ([40, 16], None, 0, 0, 0, 0, 1.0),
 "h.0.attn.c_attn.weight":
   ([16, 12], "_shard_c_attn_weight", [16, 48], [4, 16, 12], 1, [4, 4, 4],
    1.0),
 "h.0.attn.c_attn.bias":
   ([12], "_shard_c_attn_bias", [48], [4, 12], 0, [4, 4, 4], 1.0),
 "h.0.attn.c_proj.weight":
   ([4, 16], "_shard_c_proj", [16, 16], [4, 4, 16], 0, [4], 1.0),
 "h.0.attn.c_proj.bias": ([16], None, 0, 0, 0, 0, SCALE),
 "h.0.mlp.c_fc.weight":
   ([16, 16], "_shard_mlp_c_fc_weight", [16, 64], [4, 16, 16], 1, [16], 1.0),
 "h.0.mlp.c_fc.bias":
   ([16], "_shard_mlp_c_fc_bias", [64], [4, 16], 0, [16], 1.0),
 "h.0.mlp.c_proj.weight":
   ([16, 16], "_shard_mlp_c_proj", [64, 16], [4, 16, 16], 0, [16], 1.0),
 "h.0.mlp.c_proj.bias": ([16], None, 0, 0, 0, 0, SCALE),
}
EOF
sed 's/SCALE/0.25/' "$T_TMP/gpt2.4" >"$T_TMP/gpt2.4s"
sed 's/SCALE/1.0/' "$T_TMP/gpt2.4" >"$T_TMP/gpt2.4n"
check_plan "plan gpt2, 4 shards, bias scaling" gpt2 4 1 "$T_TMP/gpt2.4s"
check_plan "plan gpt2, 4 shards, --no-bias-scaling" gpt2 4 0 \
  "$T_TMP/gpt2.4n" --no-bias-scaling

# A plan file: the first match wins, everything else replicated.
cat >"$T_TMP/p.json" <<'EOF'
{"rules": [
  {"match": "*.c_attn.weight", "name": "_mine", "dim": 1,
   "segs": [16, 16, 16]},
  {"match": "*.c_attn.*", "replicate": true},
  {"match": "*.c_proj.bias", "scale_bias": true}
]}
EOF
cat >"$T_TMP/gpt2.file" <<'EOF'
{
 "wte.weight": ([40, 16], None, 0, 0, 0, 0, 1.0),
 "h.0.attn.c_attn.weight":
   ([16, 24], "_mine", [16, 48], [2, 16, 24], 1, [8, 8, 8], 1.0),
 "h.0.attn.c_attn.bias": ([48], None, 0, 0, 0, 0, 1.0),
 "h.0.attn.c_proj.weight": ([16, 16], None, 0, 0, 0, 0, 1.0),
 "h.0.attn.c_proj.bias": ([16], None, 0, 0, 0, 0, 0.5),
 "h.0.mlp.c_fc.weight": ([16, 64], None, 0, 0, 0, 0, 1.0),
 "h.0.mlp.c_fc.bias": ([64], None, 0, 0, 0, 0, 1.0),
 "h.0.mlp.c_proj.weight": ([64, 16], None, 0, 0, 0, 0, 1.0),
 "h.0.mlp.c_proj.bias": ([16], None, 0, 0, 0, 0, 0.5),
}
EOF
check_plan "plan with a plan file" gpt2 2 1 "$T_TMP/gpt2.file" \
  --plan "$T_TMP/p.json"

"$ORACLE" -c "import json,sys; d=json.load(open('$T_TMP/plan.json'))
r=d['plan']['rules']
assert r[0]=={'match':'*.c_attn.weight','name':'_mine','dim':1,
              'segs':[16,16,16]}, r[0]
assert r[1]=={'match':'*.c_attn.*','replicate':True}, r[1]
assert r[2]=={'match':'*.c_proj.bias','scale_bias':True}, r[2]" \
  2>"$T_TMP/err" && t_ok "plan prints the resolved rules" ||
  t_fail "plan prints the resolved rules" "$(head -c 2000 "$T_TMP/err")"

# 4 shards, 2 kv heads: each kv head on 2 ranks (vLLM's
# num_kv_head_replicas = 4 / 2): qkv_proj's rows per rank are 16 / 4 q,
# then 8 / 2 k and 8 / 2 v (per-shard segs [4, 4, 4]), kv_replicas 2.
cat >"$T_TMP/phi3.4" <<'EOF'
{
 "model.embed_tokens.weight": ([40, 16], None, 0, 0, 0, 0, 1.0),
 "model.layers.0.input_layernorm.weight": ([16], None, 0, 0, 0, 0, 1.0),
 "model.layers.0.self_attn.qkv_proj.weight":
   ([12, 16], "_shard_qkv", [32, 16], [4, 12, 16], 0, [4, 4, 4], 1.0, 2),
 "model.layers.0.self_attn.o_proj.weight":
   ([16, 4], "_shard_o", [16, 16], [4, 16, 4], 1, [4], 1.0),
 "model.layers.0.mlp.gate_up_proj.weight":
   ([12, 16], "_shard_mlp_up", [48, 16], [4, 12, 16], 0, [6, 6], 1.0),
 "model.layers.0.mlp.down_proj.weight":
   ([16, 6], "_shard_mlp_down", [16, 24], [4, 16, 6], 1, [6], 1.0),
 "model.norm.weight": ([16], None, 0, 0, 0, 0, 1.0),
 "lm_head.weight": ([40, 16], None, 0, 0, 0, 0, 1.0),
}
EOF
check_plan "plan phi3, 4 shards: kv heads replicated" phi3 4 1 "$T_TMP/phi3.4"
"$TPLOAD" plan "$T_TMP/phi3" --shards 4 >"$T_TMP/plan.json" 2>"$T_TMP/err"
"$ORACLE" -c "import json, sys
r = json.load(open(sys.argv[1]))['plan']['rules'][0]
assert r['match'] == '*.self_attn.qkv_proj.weight' and \
    r['kv_replicas'] == 2, r" "$T_TMP/plan.json" 2>"$T_TMP/err" &&
  t_ok "plan's rules show kv_replicas" ||
  t_fail "plan's rules show kv_replicas" "$(head -c 2000 "$T_TMP/err")"
"$TPLOAD" inspect "$T_TMP/phi3" --shards 4 >"$T_TMP/insp" 2>"$T_TMP/err"
grep -q "qkv_proj.weight .*\[12, 16\] *_shard_qkv kv x2" "$T_TMP/insp" &&
  t_ok "inspect's table shows kv x2" ||
  t_fail "inspect's table shows kv x2" "$(cat "$T_TMP/insp" "$T_TMP/err")"

# Refusals.
printf '{"rules": [{"match": "x", "dims": 0}]}' >"$T_TMP/bad.json"
t_exit "broken plan file" 65 \
  "$TPLOAD" plan "$T_TMP/gpt2" --shards 2 --plan "$T_TMP/bad.json"
grep -q "bad.json: rule 0: unknown key 'dims'" "$T_TMP/err" &&
  t_ok "broken plan message" ||
  t_fail "broken plan message" "$(cat "$T_TMP/err")"
t_exit "plan file missing" 66 \
  "$TPLOAD" plan "$T_TMP/gpt2" --shards 2 --plan "$T_TMP/nope.json"
t_exit "auto without config.json" 66 "$TPLOAD" plan "$T_TMP/bare" --shards 2
grep -q -- "--plan" "$T_TMP/err" && t_ok "missing config says --plan" ||
  t_fail "missing config says --plan" "$(cat "$T_TMP/err")"
t_exit "model missing" 66 "$TPLOAD" plan "$T_TMP/nope" --shards 2

# A plan-file rule that matches nothing: a warning, exit 65 with --strict.
printf '{"rules": [{"match": "*.c_attn.weight", "dim": 1},
 {"match": "*.c_atn.bias", "dim": 0}]}' >"$T_TMP/typo.json"
t_exit "unused plan-file rule: a warning" 0 \
  "$TPLOAD" plan "$T_TMP/gpt2" --shards 2 --plan "$T_TMP/typo.json"
grep -q "warning: .*typo.json: rule 1 ('\*.c_atn.bias') matches no tensor" \
  "$T_TMP/err" && t_ok "the warning names the rule" ||
  t_fail "the warning names the rule" "$(cat "$T_TMP/err")"
t_exit "unused plan-file rule: --strict refuses" 65 \
  "$TPLOAD" plan "$T_TMP/gpt2" --shards 2 --plan "$T_TMP/typo.json" --strict

# MLC directories: quantization read from mlc-chat-config.json.
"$TPLOAD" synth --arch llama --format mlc --layers 1 --quant q4f16_0 \
  --out "$T_TMP/kn" --quiet
t_exit "KN layout (q4f16_0) refused for 2 shards" 65 \
  "$TPLOAD" plan "$T_TMP/kn" --shards 2
grep -q "quantization 'q4f16_0'.*KN weight layout" "$T_TMP/err" &&
  t_ok "the refusal names the scheme and why" ||
  t_fail "the refusal names the scheme and why" "$(cat "$T_TMP/err")"
t_exit "KN layout at 1 shard" 0 "$TPLOAD" plan "$T_TMP/kn" --shards 1
"$TPLOAD" synth --arch llama --format mlc --layers 1 --quant q4f16_1 \
  --out "$T_TMP/q4" --quiet
t_exit "q4f16_1 cache (tensor_parallel_shards 1) for 2 shards" 0 \
  "$TPLOAD" plan "$T_TMP/q4" --shards 2
grep -q "note: mlc-chat-config.json says tensor_parallel_shards 1, sharding 2" \
  "$T_TMP/err" && grep -q '"quantization": "q4f16_1"' "$T_TMP/out" &&
  grep -q '"func_name": "_shard_qkv_q_weight"' "$T_TMP/out" &&
  t_ok "plan notes the configured N, reports the scheme and func_names" ||
  t_fail "plan notes the configured N, reports the scheme and func_names" \
    "$(cat "$T_TMP/err")"

# Usage.
t_exit "plan --help" 0 "$TPLOAD" plan --help
grep -q "usage: tpload plan" "$T_TMP/out" && t_ok "plan --help text" ||
  t_fail "plan --help text"
t_exit "plan without MODEL" 64 "$TPLOAD" plan --shards 2
t_exit "plan without --shards" 64 "$TPLOAD" plan "$T_TMP/phi3"
t_exit "plan --shards 0" 64 "$TPLOAD" plan "$T_TMP/phi3" --shards 0
t_exit "plan --shards x" 64 "$TPLOAD" plan "$T_TMP/phi3" --shards x
t_exit "plan --shards without value" 64 "$TPLOAD" plan "$T_TMP/phi3" --shards
t_exit "plan unknown option" 64 "$TPLOAD" plan "$T_TMP/phi3" --bogus

# inspect --shards: the table and the JSON.
t_exit "inspect --shards 2" 0 "$TPLOAD" inspect "$T_TMP/phi3" --shards 2
qkv="^model.layers.0.self_attn.qkv_proj.weight +F16 +\[32, 16\]"
qkv="$qkv +\[16, 16\] +_shard_qkv "
head="^lm_head.weight +F16 +\[40, 16\] +\[40, 16\] +replicate "
grep -Eq "$qkv" "$T_TMP/out" && grep -Eq "$head" "$T_TMP/out" && t_ok "inspect table has shard shape and rule" ||
  t_fail "inspect table has shard shape and rule" "$(cat "$T_TMP/out")"
t_exit "inspect --json --shards 4 --plan gpt2" 0 \
  "$TPLOAD" inspect --json "$T_TMP/gpt2" --shards 4 --plan gpt2
"$ORACLE" -c "import json; d=json.load(open('$T_TMP/out'))
assert d['tensor_parallel_shards']==4
t={x['name']:x for x in d['tensors']}
a=t['h.0.attn.c_attn.weight']
assert a['shard_shape']==[16,12] and a['rule']=='_shard_c_attn_weight', a
assert a['dim']==1 and a['segs']==[4,4,4], a
b=t['h.0.attn.c_proj.bias']
assert b['shard_shape']==[16] and b['rule']=='scale_bias', b
assert b['bias_scale']==0.25, b
w=t['wte.weight']
assert w['shard_shape']==[40,16] and w['rule']=='replicate', w" \
  2>"$T_TMP/err" && t_ok "inspect --json shard fields" ||
  t_fail "inspect --json shard fields" "$(head -c 2000 "$T_TMP/err")"
t_exit "inspect --plan without --shards" 64 \
  "$TPLOAD" inspect "$T_TMP/gpt2" --plan gpt2
t_exit "inspect --shards 3 refused" 65 "$TPLOAD" inspect "$T_TMP/gpt2" \
  --shards 3
t_done
