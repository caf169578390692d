#!/usr/bin/python3
"""forward.py - do tpload's shards compute the right answer?

A small numpy forward pass of each architecture's decoder, written from its
Hugging Face definition (transformers' modeling_<arch>.py; MLC's
<arch>_model.py for MLC's fused names): embeddings, norms, attention with
grouped kv heads and rotary embeddings, the MLP, gated MLP or mixture of
experts, the LM head.  It shares no code or formula with tpload: the
reference reads the full checkpoint, the tensor-parallel run takes each
rank's tensors as tpload delivered them and does what an all-reducing
engine does: column-parallel projections give a rank its own heads and
intermediate features (sizes from the config divided by the shard count),
row-parallel ones give partial sums that are all-reduced (MPI_SUM over
the rank's TP group), biases of row-parallel layers are added before the
all-reduce (the bias-scaling scope made them bias / N; --bias-policy rank0
leaves the whole bias on rank 0 and zeros elsewhere); with --bias-once
only TP rank 0 adds them, as vLLM's RowParallelLinear.forward does with
the whole bias every rank holds (model_executor/layers/linear.py: "Only
fuse bias add into GEMM for rank 0").  With --pp, each
stage runs the layers its ranks hold and sends the hidden state to the
next stage.

    forward.py ref MODEL OUT.npy
        the logits of the full checkpoint (one process).
    forward.py write ARCH DIR
        a hand-made checkpoint of an architecture `tpload synth` cannot
        write, float32, 2 layers, hidden 64, 8 heads, 4 kv heads: three
        with q/k norms of another shape: cohere (use_qk_norm, Command R+:
        per-head q_norm [heads, head_dim], k_norm [kv heads, head_dim],
        cut with the heads), qwen3 ([head_dim], shared by every head) and
        olmo2 ([heads x head_dim], one norm over all heads' q, which the
        ranks all-gather first); qwen2_moe (4 experts, top 2, a shared
        expert and its gate), qwen3_moe (6 experts, top 2, renormalised,
        no shared expert), deepseek_v2 / deepseek_v3 (latent attention,
        layer 0 dense, layer 1 MoE: 8 experts, top 2, a shared expert;
        v3's sigmoid router with its correction bias and 2 groups) and
        internlm2 (wqkv grouped per kv head).
    mpirun -np W forward.py tp MODEL SRC REF.npy --tp T [--pp P]
        [--bias-once]
                            [--mismatch]
        every rank takes its shard from SRC (a preshard directory,
        SRC/rank{R}.safetensors, or serve:SOCKDIR through python/tpload.py,
        SOCKDIR/rank{R}.sock), runs its part and the last stage's ranks
        compare their logits with REF.npy: relative error (max |a - b| /
        max |b|) below 1e-5.  --mismatch inverts it: the error must exceed
        1e-3 (a negative control that proves the comparison can fail).
        Exits 0 on every rank when the check holds, 1 otherwise; the
        verdict and the error are printed by rank 0.
    mpirun -np W forward.py tp ... --ep [--ep-shift K]
        expert parallelism (a `preshard --ep` SRC): each rank computes
        the routed contributions of its experts only (vLLM's
        determine_expert_map over its TP group, oracle.vllm_expert_map;
        top-k over the replicated router), whole, which its shard must
        hold, and no other, which it must not; plus its TP share of
        everything else; one all-reduce per MoE layer.  --ep-shift K
        moves rank 0's range by K experts (computing those of them it
        holds): a wrong map, for the negative control with --mismatch.
    mpirun -np W forward.py tp ... --ep --ep-size G
        the group spans the W / (T x P) replicas (G = T x D, a
        `preshard --ep-size G` SRC): vLLM's ep_rank = dp_rank x tp_size
        + tp_rank (FusedMoEParallelConfig.make), each replica computes
        every token, the routed sums are all-reduced over the G ranks of
        the stage and added once per TP group (by its shard 0) before the
        TP all-reduce: two all-reduces per MoE layer.
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npst  # noqa: E402
import oracle  # noqa: E402  (its checkpoint readers only)

TOKENS = [3, 17, 42, 5, 99, 7, 64, 1]
MATCH_TOL = 1e-5
MISMATCH_MIN = 1e-3
Q4_GROUP, Q4_PER_WORD, Q4_MAX = 32, 8, 7  # MLC q4f16_1


class ForwardError(Exception):
    """A shard an engine could not use (wrong shape, missing tensor)."""


# --- tensors as float32 ---------------------------------------------------

def _to_f32(dtype, shape, raw):
    if dtype == "BF16":
        u = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
        return u.view(np.float32).reshape(shape)
    arr = npst.to_numpy(dtype, shape, raw)
    return arr if dtype == "U32" else arr.astype(np.float32)


class Tensors:
    """name -> array; float tensors as float32, packed words as uint32."""

    def __init__(self, arrays):
        self.arrays = arrays

    @classmethod
    def checkpoint(cls, path):
        return cls({n: _to_f32(dt, tuple(shape), raw)
                    for n, dt, shape, raw, _ in oracle.read_model(path)})

    @classmethod
    def rank_file(cls, path):
        tensors, _, _ = npst.read(path)
        return cls({n: _to_f32(*v) for n, v in tensors.items()})

    @classmethod
    def served(cls, sock):
        import tpload
        shard = tpload.attach(sock)
        arrays = {}
        for i in range(len(shard)):
            info, arr = shard.info(i), shard.tensor(i)
            if info["dtype"] == "bfloat16":
                arr = (np.asarray(arr).view(np.uint16).astype(np.uint32)
                       << 16).view(np.float32)
            elif arr.dtype != np.uint32:
                arr = arr.astype(np.float32)
            arrays[info["name"]] = np.array(arr)
        shard.close()
        return cls(arrays)

    def has(self, name):
        return name in self.arrays

    def get(self, name, shape=None):
        if name not in self.arrays:
            raise ForwardError("tensor '%s': not in this rank's shard" % name)
        arr = self.arrays[name]
        if shape is not None and tuple(arr.shape) != tuple(shape):
            raise ForwardError("tensor '%s': shape %s, the rank's heads / "
                               "features need %s" % (name, list(arr.shape),
                                                     list(shape)))
        return arr

    def linear(self, prefix, shape):
        """prefix.weight, or MLC q4f16_1's q_weight / q_scale dequantized:
        value = (4-bit field - 7) * the scale of its group of 32."""
        if self.has(prefix + ".weight") or not self.has(prefix + ".q_weight"):
            return self.get(prefix + ".weight", shape)
        words = self.get(prefix + ".q_weight")
        scale = self.get(prefix + ".q_scale")
        shifts = np.arange(Q4_PER_WORD, dtype=np.uint32) * 4
        nib = (words[:, :, None] >> shifts) & 0xF
        q = nib.reshape(words.shape[0], -1).astype(np.float32) - Q4_MAX
        w = q * np.repeat(scale, Q4_GROUP, axis=1)[:, :q.shape[1]]
        if tuple(w.shape) != tuple(shape):
            raise ForwardError("tensor '%s.q_weight': dequantized %s, "
                               "expected %s" % (prefix, list(w.shape),
                                                list(shape)))
        return w

    def bias(self, name, n):
        return self.get(name, (n,)) if self.has(name) else 0.0

    def layers(self):
        out = set()
        for name in self.arrays:
            m = re.search(r"\.(\d+)\.", name)
            if m and ("layers." in name or ".h." in name):
                out.add(int(m.group(1)))
        return sorted(out)


# --- building blocks (transformers' definitions) ----------------------------

def rms_norm(x, w, eps, plus_one=False):
    x = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * ((1.0 + w) if plus_one else w)


def layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) *
                                    (x + 0.044715 * x ** 3)))


_ERF = np.vectorize(math.erf, otypes=[np.float64])


def gelu_erf(x):
    return (0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)))).astype(np.float32)


def rope(x, pos, theta, rot, interleaved=False):
    """Rotary embedding over the first `rot` features of x [T, H, D]:
    rotate_half (llama, neox) or pairs (cohere's interleaved form)."""
    inv = 1.0 / theta ** (np.arange(0, rot, 2, dtype=np.float64) / rot)
    ang = pos[:, None] * inv[None, :]
    if interleaved:
        ang = np.repeat(ang, 2, axis=1)
    else:
        ang = np.concatenate([ang, ang], axis=1)
    cos = np.cos(ang)[:, None, :].astype(np.float32)
    sin = np.sin(ang)[:, None, :].astype(np.float32)
    xr, rest = x[..., :rot], x[..., rot:]
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        half = np.stack([-x2, x1], axis=-1).reshape(xr.shape)
    else:
        x1, x2 = xr[..., :rot // 2], xr[..., rot // 2:]
        half = np.concatenate([-x2, x1], axis=-1)
    return np.concatenate([xr * cos + half * sin, rest], axis=-1)


def attention(q, k, v):
    """Causal attention of q [T, H, D] over k, v [T, KV, D]; each group of
    H / KV query heads reads one kv head.  Returns [T, H * D]."""
    t, h, d = q.shape
    group = h // k.shape[1]
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    s = np.einsum("thd,shd->hts", q, k) / np.float32(math.sqrt(d))
    s = s + np.triu(np.full((t, t), -np.inf, np.float32), 1)[None]
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    p = s / s.sum(axis=-1, keepdims=True)
    return np.einsum("hts,shd->thd", p, v).reshape(t, h * d)


# --- the architectures ------------------------------------------------------

class Arch:
    """One decoder: sizes from the config, local ones for `n` shards."""

    def __init__(self, cfg, mlc, n, allreduce, allgather=None):
        self.cfg, self.mlc, self.n, self.allreduce = cfg, mlc, n, allreduce
        self.allgather = allgather or (lambda y: [y])
        self.t = 0  # this rank's place in its TP group
        self.bias_once = False  # only t == 0 adds row-parallel biases
        # --ep: the experts this rank holds whole (None: every expert, cut
        # n ways), and whether a range moved on purpose may miss some.
        self.ep_ids, self.ep_lenient = None, False
        # --ep-size T x D: the routed sums' all-reduce over the group (and
        # whether this rank adds them to its TP group's), else None.
        self.ep_reduce, self.ep_adds = None, True
        g = lambda *ks, d=None: next((cfg[k] for k in ks if k in cfg), d)
        self.E = g("hidden_size", "n_embd")
        self.H = g("num_attention_heads", "n_head")
        self.KV = g("num_key_value_heads", d=self.H)
        self.D = g("head_dim", d=self.E // self.H)
        self.I = g("intermediate_size", "n_inner", d=4 * self.E)
        self.eps = g("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon",
                     d=1e-5)
        self.theta = g("rope_theta", "rotary_emb_base", d=10000.0)
        # vLLM's QKVParallelLinear (model_executor/layers/linear.py): at
        # tp_size >= total_num_kv_heads a rank holds one kv head,
        # replicated on tp_size / total_num_kv_heads ranks.
        self.h, self.kv = self.H // n, max(1, self.KV // n)
        self.i = self.I // n
        self.pos = np.arange(len(TOKENS), dtype=np.float64)

    def proj(self, x, w, b=0.0):
        return x @ w.T + b

    def rp_bias(self, b):
        """A row-parallel layer's bias as this rank adds it before the
        all-reduce."""
        return 0.0 if self.bias_once and self.t != 0 else b

    def attend(self, q, k, v, rot=None, interleaved=False):
        t = q.shape[0]
        q = q.reshape(t, -1, self.D)
        k = k.reshape(t, -1, self.D)
        v = v.reshape(t, -1, self.D)
        rot = self.D if rot is None else rot
        q = rope(q, self.pos, self.theta, rot, interleaved)
        k = rope(k, self.pos, self.theta, rot, interleaved)
        return attention(q, k, v)


class Llama(Arch):
    """LlamaDecoderLayer and its kin: mistral, qwen2 (q/k/v biases), gemma
    ((1 + w) norms, gelu, scaled embeddings, tied head), phi3 (fused
    qkv_proj, gate_up_proj), mixtral (experts), cohere (one layernorm,
    parallel attention and MLP, per-head q/k norms), qwen3 (q/k norms over
    each head's features, one weight for all heads), olmo2 (q/k norms over
    all heads' q / k, norms after attention and MLP), qwen2_moe (experts,
    a shared expert behind a sigmoid gate), internlm2 (wqkv grouped per kv
    head: each group's q heads, its k, its v)."""

    def __init__(self, cfg, mlc, n, allreduce, kind, allgather=None):
        super().__init__(cfg, mlc, n, allreduce, allgather)
        self.kind = kind
        self.base = "transformer.h" if kind == "phi3" and mlc \
            else "model.layers"

    def names(self, i):
        b = "%s.%d" % (self.base, i)
        if self.kind == "phi3" and self.mlc:
            return b, b + ".mixer", b + ".ln", b + ".mixer.out_proj"
        if self.kind == "internlm2":
            return b, b + ".attention", b + ".attention_norm", \
                b + ".attention.wo"
        return (b, b + ".self_attn", b + ".input_layernorm",
                b + ".self_attn.o_proj")

    def norm(self, x, w):
        if self.kind == "cohere":
            return layer_norm(x, w, 0.0, self.eps)
        return rms_norm(x, w, self.eps, plus_one=self.kind == "gemma")

    def act(self, x):
        return gelu_tanh(x) if self.kind == "gemma" else silu(x)

    def embed(self, w):
        name = "transformer.embd" if self.base == "transformer.h" \
            else "model.tok_embeddings" if self.kind == "internlm2" \
            else "model.embed_tokens"
        x = w.linear(name, (self.cfg_vocab(), self.E))[TOKENS]
        return x * np.float32(math.sqrt(self.E)) if self.kind == "gemma" \
            else x

    def cfg_vocab(self):
        return self.cfg["vocab_size"]

    def head(self, w, x):
        root = "transformer" if self.base == "transformer.h" else "model"
        x = self.norm(x, w.get(root + ".norm.weight", (self.E,)))
        name = "lm_head" if w.has("lm_head.weight") or \
            w.has("lm_head.q_weight") else "output" if w.has("output.weight") \
            else root + ".embed_tokens"
        logits = x @ w.linear(name, (self.cfg_vocab(), self.E)).T
        return logits * np.float32(self.cfg.get("logit_scale", 1.0))

    def grouped_qkv(self, w, a, h):
        """InternLM2Attention: wqkv's rows are kv groups, each [its q heads,
        k, v] x head_dim; a rank holds whole groups."""
        per = self.H // self.KV + 2
        out = self.proj(h, w.get(a + ".wqkv.weight",
                                 (self.kv * per * self.D, self.E)))
        out = out.reshape(h.shape[0], self.kv, per, self.D)
        return (out[:, :, :-2].reshape(h.shape[0], -1),
                out[:, :, -2].reshape(h.shape[0], -1),
                out[:, :, -1].reshape(h.shape[0], -1))

    def qkv(self, w, a, h):
        q_n, kv_n = self.h * self.D, self.kv * self.D
        if self.kind == "internlm2":
            return self.grouped_qkv(w, a, h)
        fused = "qkv_proj" if self.kind != "qwen2" else "c_attn"
        if w.has(a + "." + fused + ".weight") or \
                w.has(a + "." + fused + ".q_weight"):
            out = self.proj(h, w.linear(a + "." + fused, (q_n + 2 * kv_n,
                                                          self.E)),
                            w.bias(a + "." + fused + ".bias", q_n + 2 * kv_n))
            return out[:, :q_n], out[:, q_n:q_n + kv_n], out[:, q_n + kv_n:]
        return tuple(self.proj(h, w.linear(a + "." + p, (m, self.E)),
                               w.bias(a + "." + p + ".bias", m))
                     for p, m in (("q_proj", q_n), ("k_proj", kv_n),
                                  ("v_proj", kv_n)))

    def qk_norm(self, w, a, q, k):
        """Cohere's use_qk_norm: a layernorm over each head's features with
        that head's own weight row ([heads, head_dim])."""
        t = q.shape[0]
        q = layer_norm(q.reshape(t, self.h, self.D),
                       w.get(a + ".q_norm.weight", (self.h, self.D)), 0.0,
                       self.eps)
        k = layer_norm(k.reshape(t, self.kv, self.D),
                       w.get(a + ".k_norm.weight", (self.kv, self.D)), 0.0,
                       self.eps)
        return q.reshape(t, -1), k.reshape(t, -1)

    def shared_qk_norm(self, w, a, q, k):
        """Qwen3Attention: RMSNorm over each head's features, [head_dim]."""
        t = q.shape[0]
        q = rms_norm(q.reshape(t, self.h, self.D),
                     w.get(a + ".q_norm.weight", (self.D,)), self.eps)
        k = rms_norm(k.reshape(t, self.kv, self.D),
                     w.get(a + ".k_norm.weight", (self.D,)), self.eps)
        return q.reshape(t, -1), k.reshape(t, -1)

    def whole_qk_norm(self, w, a, q, k):
        """Olmo2Attention: RMSNorm over all heads' q (k), [heads x
        head_dim]; a rank all-gathers q, norms it, keeps its heads."""
        out = []
        for x, name, full in ((q, ".q_norm.weight", self.H * self.D),
                              (k, ".k_norm.weight", self.KV * self.D)):
            whole = np.concatenate(self.allgather(x), axis=1)
            normed = rms_norm(whole, w.get(a + name, (full,)), self.eps)
            part = x.shape[1]
            out.append(normed[:, self.t * part:(self.t + 1) * part])
        return out

    def attn(self, w, i, h):
        _, a, _, o = self.names(i)
        q, k, v = self.qkv(w, a, h)
        if self.kind == "cohere" and self.cfg.get("use_qk_norm"):
            q, k = self.qk_norm(w, a, q, k)
        elif self.kind in ("qwen3", "qwen3_moe"):
            q, k = self.shared_qk_norm(w, a, q, k)
        elif self.kind == "olmo2":
            q, k = self.whole_qk_norm(w, a, q, k)
        out = self.attend(q, k, v, interleaved=self.kind == "cohere")
        out = self.proj(out, w.linear(o, (self.E, self.h * self.D)),
                        self.rp_bias(w.bias(o + ".bias", self.E)))
        return self.allreduce(out)

    def gated(self, w, b, h, i_n, names=("gate_proj", "up_proj",
                                          "down_proj")):
        if w.has(b + ".gate_up_proj.weight") or \
                w.has(b + ".gate_up_proj.q_weight"):
            gu = self.proj(h, w.linear(b + ".gate_up_proj", (2 * i_n, self.E)))
            g, u = gu[:, :i_n], gu[:, i_n:]
        else:
            g = self.proj(h, w.linear(b + "." + names[0], (i_n, self.E)))
            u = self.proj(h, w.linear(b + "." + names[1], (i_n, self.E)))
        return self.proj(self.act(g) * u,
                         w.linear(b + "." + names[2], (self.E, i_n)))

    def routed(self, w, pe, probe, e):
        """Whether this rank computes expert e (tensor `probe` under
        prefix `pe`): every expert without --ep; under --ep those of its
        range, which it must hold, and no other, which it must not."""
        if self.ep_ids is None:
            return True
        held = w.has(pe + probe)
        if e not in self.ep_ids:
            if held and not self.ep_lenient:
                raise ForwardError("%s: expert %d is not this rank's, yet "
                                   "its shard holds it" % (pe, e))
            return False
        if not held and not self.ep_lenient:
            raise ForwardError("%s: expert %d is this rank's, and its "
                               "shard lacks it" % (pe, e))
        return held

    def routed_sum(self, w, b, h, weight, mi):
        """The sum over the experts this rank computes (routed) of
        weight[:, e] times expert e's gated MLP (`b`.experts.e.*)."""
        out = np.zeros((h.shape[0], self.E), np.float32)
        for e in range(weight.shape[1]):
            pe = "%s.experts.%d" % (b, e)
            if self.routed(w, pe, ".gate_proj.weight", e):
                out += weight[:, e:e + 1] * self.gated(w, pe, h, mi)
        return self.routed_done(out)

    def routed_done(self, out):
        """This rank's routed sum as its TP all-reduce must see it: as
        it is, or under a group spanning the replicas the sum over the
        group, from one rank of each TP group."""
        if self.ep_reduce is None:
            return out
        out = self.ep_reduce(out)
        return out if self.ep_adds else np.zeros_like(out)

    def expert_i(self, full):
        """An expert's intermediate size here: whole under --ep (vLLM's
        FusedMoEParallelConfig sets the experts' tp_size to 1), / n
        otherwise."""
        return full if self.ep_ids is not None else full // self.n

    def qwen2_moe(self, w, b, h):
        """Qwen2MoeSparseMoeBlock: softmax router, top-k (renormalised only
        with norm_topk_prob), plus the shared expert times
        sigmoid(shared_expert_gate); Qwen3MoeSparseMoeBlock has no shared
        expert."""
        x_n, k = self.cfg["num_experts"], self.cfg["num_experts_per_tok"]
        mi = self.expert_i(self.cfg["moe_intermediate_size"])
        logits = h @ w.get(b + ".gate.weight", (x_n, self.E)).T
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
        weight = np.zeros_like(p)
        for t in range(h.shape[0]):
            top = np.argsort(-p[t], kind="stable")[:k]
            weight[t, top] = p[t, top]
            if self.cfg.get("norm_topk_prob"):
                weight[t, top] /= p[t, top].sum()
        out = self.routed_sum(w, b, h, weight, mi)
        if self.kind == "qwen3_moe":
            return out
        si = self.cfg["shared_expert_intermediate_size"] // self.n
        gate = h @ w.get(b + ".shared_expert_gate.weight", (1, self.E)).T
        return out + self.gated(w, b + ".shared_expert", h, si) / \
            (1.0 + np.exp(-gate))

    def experts(self, w, b, h):
        """MixtralSparseMoeBlock: softmax router, top-k, renormalised."""
        x_n = self.cfg["num_local_experts"]
        k = self.cfg["num_experts_per_tok"]
        logits = h @ w.get(b + ".gate.weight", (x_n, self.E)).T
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
        out = np.zeros((h.shape[0], self.E), np.float32)
        i = self.expert_i(self.I)
        mine = [e for e in range(x_n)
                if self.routed(w, "%s.experts.%d" % (b, e), ".w1.weight", e)]
        for t in range(h.shape[0]):
            top = np.argsort(-p[t], kind="stable")[:k]
            wt = p[t, top] / p[t, top].sum()
            for e, g in zip(top, wt):
                if e not in mine:
                    continue
                pe = "%s.experts.%d" % (b, e)
                x1 = w.get(pe + ".w1.weight", (i, self.E)) @ h[t]
                x3 = w.get(pe + ".w3.weight", (i, self.E)) @ h[t]
                out[t] += g * (w.get(pe + ".w2.weight", (self.E, i)) @
                               (silu(x1) * x3))
        return self.routed_done(out)

    def mlp(self, w, i, h):
        b, _, _, _ = self.names(i)
        if self.kind == "mixtral":
            return self.allreduce(self.experts(w, b + ".block_sparse_moe", h))
        if self.kind in ("qwen2_moe", "qwen3_moe"):
            return self.allreduce(self.qwen2_moe(w, b + ".mlp", h))
        if self.kind == "internlm2":
            return self.allreduce(self.gated(w, b + ".feed_forward", h,
                                             self.i, ("w1", "w3", "w2")))
        return self.allreduce(self.gated(w, b + ".mlp", h, self.i))

    def layer(self, w, i, x):
        b, _, ln, _ = self.names(i)
        if self.kind == "olmo2":
            post = lambda n: w.get(b + n + ".weight", (self.E,))
            x = x + self.norm(self.attn(w, i, x),
                              post(".post_attention_layernorm"))
            return x + self.norm(self.mlp(w, i, x),
                                 post(".post_feedforward_layernorm"))
        h = self.norm(x, w.get(ln + ".weight", (self.E,)))
        if self.kind == "cohere":
            return x + self.attn(w, i, h) + self.mlp(w, i, h)
        x = x + self.attn(w, i, h)
        post = ".ffn_norm" if self.kind == "internlm2" \
            else ".post_attention_layernorm"
        h = self.norm(x, w.get(b + post + ".weight", (self.E,)))
        return x + self.mlp(w, i, h)


class DeepSeek(Llama):
    """DeepseekV2DecoderLayer / DeepseekV3DecoderLayer (transformers'
    modeling_deepseek_v2.py / _v3.py): multi-head latent attention (q
    through q_a_proj, q_a_layernorm, q_b_proj; k and v through
    kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj; the rope part of k one
    head shared by all, rotated after de-interleaving), dense MLPs below
    first_k_dense_replace, MoE layers after: routed experts (v2: softmax,
    greedy top-k; v3: sigmoid plus e_score_correction_bias, the best
    topk_group of n_group groups, renormalised) times
    routed_scaling_factor, plus the shared experts."""

    def __init__(self, cfg, mlc, n, allreduce, kind, allgather=None):
        super().__init__(cfg, mlc, n, allreduce, kind, allgather)
        self.nope, self.rot = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"]
        self.vd, self.kvl = cfg["v_head_dim"], cfg["kv_lora_rank"]
        self.qd = self.nope + self.rot

    def rope_mla(self, x):
        x = np.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)
        return rope(x, self.pos, self.theta, self.rot)

    def mla_q(self, w, a, h):
        if self.cfg.get("q_lora_rank") is None:
            return self.proj(h, w.get(a + ".q_proj.weight",
                                      (self.h * self.qd, self.E)))
        ql = self.cfg["q_lora_rank"]
        c = self.proj(h, w.get(a + ".q_a_proj.weight", (ql, self.E)))
        c = rms_norm(c, w.get(a + ".q_a_layernorm.weight", (ql,)), self.eps)
        return self.proj(c, w.get(a + ".q_b_proj.weight",
                                  (self.h * self.qd, ql)))

    def attn(self, w, i, h):
        _, a, _, o = self.names(i)
        t = h.shape[0]
        q = self.mla_q(w, a, h).reshape(t, self.h, self.qd)
        ckv = self.proj(h, w.get(a + ".kv_a_proj_with_mqa.weight",
                                 (self.kvl + self.rot, self.E)))
        c = rms_norm(ckv[:, :self.kvl],
                     w.get(a + ".kv_a_layernorm.weight", (self.kvl,)),
                     self.eps)
        kv = self.proj(c, w.get(a + ".kv_b_proj.weight",
                                (self.h * (self.nope + self.vd), self.kvl)))
        kv = kv.reshape(t, self.h, self.nope + self.vd)
        k_pe = self.rope_mla(ckv[:, None, self.kvl:])
        q = np.concatenate([q[..., :self.nope],
                            self.rope_mla(q[..., self.nope:])], axis=-1)
        k = np.concatenate([kv[..., :self.nope],
                            np.repeat(k_pe, self.h, axis=1)], axis=-1)
        sc = np.einsum("thd,shd->hts", q, k) / np.float32(math.sqrt(self.qd))
        sc = sc + np.triu(np.full((t, t), -np.inf, np.float32), 1)[None]
        sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
        p = sc / sc.sum(axis=-1, keepdims=True)
        out = np.einsum("hts,shd->thd", p, kv[..., self.nope:])
        out = self.proj(out.reshape(t, self.h * self.vd),
                        w.get(o + ".weight", (self.E, self.h * self.vd)))
        return self.allreduce(out)

    def route(self, w, b, h):
        """[tokens, experts] routing weights, zero off each token's top-k."""
        c = self.cfg
        x_n, k = c["n_routed_experts"], c["num_experts_per_tok"]
        logits = h @ w.get(b + ".gate.weight", (x_n, self.E)).T
        v3 = c.get("scoring_func", "softmax") == "sigmoid"
        if v3:
            p = 1.0 / (1.0 + np.exp(-logits))
            choice = p + w.get(b + ".gate.e_score_correction_bias", (x_n,))
        else:
            p = np.exp(logits - logits.max(axis=-1, keepdims=True))
            p = choice = p / p.sum(axis=-1, keepdims=True)
        weight = np.zeros_like(p)
        for t in range(h.shape[0]):
            ch = choice[t].copy()
            if v3 and c.get("n_group", 1) > 1:
                g = ch.reshape(c["n_group"], -1)
                best = np.sort(g, axis=-1)[:, -2:].sum(axis=-1)
                keep = np.argsort(-best, kind="stable")[:c["topk_group"]]
                drop = np.setdiff1d(np.arange(c["n_group"]), keep)
                g[drop] = 0.0
                ch = g.reshape(-1)
            top = np.argsort(-ch, kind="stable")[:k]
            weight[t, top] = p[t, top]
            if k > 1 and c.get("norm_topk_prob"):
                weight[t, top] /= p[t, top].sum() + 1e-20
            if v3 or not (k > 1 and c.get("norm_topk_prob")):
                weight[t, top] *= c.get("routed_scaling_factor", 1.0)
        return weight

    def mlp(self, w, i, h):
        b = self.names(i)[0] + ".mlp"
        c = self.cfg
        if i < c.get("first_k_dense_replace", 0) or \
                i % c.get("moe_layer_freq", 1) != 0:
            return self.allreduce(self.gated(w, b, h, self.i))
        mi = c["moe_intermediate_size"]
        out = self.routed_sum(w, b, h, self.route(w, b, h),
                              self.expert_i(mi))
        si = mi * c.get("n_shared_experts", 0) // self.n
        if si:
            out = out + self.gated(w, b + ".shared_experts", h, si)
        return self.allreduce(out)


class GPT2(Arch):
    """GPT2Block: Conv1D weights [in, out], c_attn [q; k; v] along its
    outputs, learned positions, gelu_new, tied head."""

    def embed(self, w):
        return w.get("transformer.wte.weight")[TOKENS] + \
            w.get("transformer.wpe.weight")[:len(TOKENS)]

    def layer(self, w, i, x):
        b = "transformer.h.%d" % i
        e, hd = self.E, self.h * self.D
        ln = lambda y, n: layer_norm(y, w.get(b + n + ".weight"),
                                     w.get(b + n + ".bias"), self.eps)
        qkv = ln(x, ".ln_1") @ w.get(b + ".attn.c_attn.weight",
                                     (e, 3 * hd)) + \
            w.get(b + ".attn.c_attn.bias", (3 * hd,))
        t = len(TOKENS)
        q, k, v = (qkv[:, j * hd:(j + 1) * hd].reshape(t, self.h, self.D)
                   for j in range(3))
        a = attention(q, k, v) @ w.get(b + ".attn.c_proj.weight", (hd, e)) + \
            self.rp_bias(w.get(b + ".attn.c_proj.bias", (e,)))
        x = x + self.allreduce(a)
        m = gelu_tanh(ln(x, ".ln_2") @ w.get(b + ".mlp.c_fc.weight",
                                             (e, self.i)) +
                      w.get(b + ".mlp.c_fc.bias", (self.i,)))
        m = m @ w.get(b + ".mlp.c_proj.weight", (self.i, e)) + \
            self.rp_bias(w.get(b + ".mlp.c_proj.bias", (e,)))
        return x + self.allreduce(m)

    def head(self, w, x):
        x = layer_norm(x, w.get("transformer.ln_f.weight"),
                       w.get("transformer.ln_f.bias"), self.eps)
        name = "lm_head.weight" if w.has("lm_head.weight") \
            else "transformer.wte.weight"
        return x @ w.get(name).T


class NeoX(Arch):
    """GPTNeoXLayer: query_key_value interleaved per head ([heads, 3, hd]
    along its outputs), partial rotary, parallel residual, exact gelu."""

    def embed(self, w):
        return w.get("gpt_neox.embed_in.weight")[TOKENS]

    def layer(self, w, i, x):
        b = "gpt_neox.layers.%d" % i
        e, t = self.E, len(TOKENS)
        ln = lambda y, n: layer_norm(y, w.get(b + n + ".weight"),
                                     w.get(b + n + ".bias"), self.eps)
        qkv = self.proj(ln(x, ".input_layernorm"),
                        w.get(b + ".attention.query_key_value.weight",
                              (3 * self.h * self.D, e)),
                        w.get(b + ".attention.query_key_value.bias",
                              (3 * self.h * self.D,)))
        qkv = qkv.reshape(t, self.h, 3 * self.D)
        q, k, v = (qkv[..., j * self.D:(j + 1) * self.D].reshape(t, -1)
                   for j in range(3))
        rot = int(self.D * self.cfg.get("rotary_pct", 1.0))
        a = self.proj(self.attend(q, k, v, rot=rot),
                      w.get(b + ".attention.dense.weight",
                            (e, self.h * self.D)),
                      self.rp_bias(w.get(b + ".attention.dense.bias", (e,))))
        h = ln(x, ".post_attention_layernorm")
        m = gelu_erf(self.proj(h, w.get(b + ".mlp.dense_h_to_4h.weight",
                                        (self.i, e)),
                               w.get(b + ".mlp.dense_h_to_4h.bias",
                                     (self.i,))))
        m = self.proj(m, w.get(b + ".mlp.dense_4h_to_h.weight", (e, self.i)),
                      self.rp_bias(w.get(b + ".mlp.dense_4h_to_h.bias",
                                         (e,))))
        return x + self.allreduce(a) + self.allreduce(m)

    def head(self, w, x):
        x = layer_norm(x, w.get("gpt_neox.final_layer_norm.weight"),
                       w.get("gpt_neox.final_layer_norm.bias"), self.eps)
        return x @ w.get("embed_out.weight").T


LLAMA_KINDS = ("llama", "mistral", "qwen2", "gemma", "mixtral", "phi3",
               "cohere", "qwen3", "olmo2", "qwen2_moe", "qwen3_moe",
               "internlm2")


def load_config(model):
    """(sizes dict, mlc?, kind) from config.json or mlc-chat-config.json."""
    mlc_path = os.path.join(model, "mlc-chat-config.json")
    if os.path.exists(mlc_path):
        with open(mlc_path, encoding="utf-8") as f:
            root = json.load(f)
        return root["model_config"], True, root["model_type"]
    with open(os.path.join(model, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    return cfg, False, cfg["model_type"]


def make_arch(model, n, allreduce, allgather=None):
    cfg, mlc, kind = load_config(model)
    if kind in ("deepseek_v2", "deepseek_v3"):
        return DeepSeek(cfg, mlc, n, allreduce, kind, allgather)
    if kind in LLAMA_KINDS:
        return Llama(cfg, mlc, n, allreduce, kind, allgather)
    if kind == "gpt2":
        return GPT2(cfg, mlc, n, allreduce)
    if kind == "gpt_neox":
        return NeoX(cfg, mlc, n, allreduce)
    raise ValueError("%s: model_type '%s' has no forward here" % (model, kind))


def run_layers(arch, w, layers, x):
    for i in layers:
        x = arch.layer(w, i, x).astype(np.float32)
    return x


def reference(model, out):
    arch = make_arch(model, 1, lambda y: y)
    w = Tensors.checkpoint(model)
    x = run_layers(arch, w, range(arch.cfg.get("num_hidden_layers",
                                               arch.cfg.get("n_layer"))),
                   arch.embed(w))
    np.save(out, arch.head(w, x).astype(np.float32))
    return 0


# --- the tensor-parallel run ------------------------------------------------

def _shard_source(src, rank):
    if src.startswith("serve:"):
        return Tensors.served(os.path.join(src[6:], "rank%d.sock" % rank))
    return Tensors.rank_file(os.path.join(src, "rank%d.safetensors" % rank))


def _stage_layers(comm, tp_size, pp_size, mine, nlayers):
    """Every stage's layers (from rank 0 of each TP group): consecutive,
    disjoint, together 0..L-1 in order.  Returns None or why not."""
    got = comm.allgather(mine)
    stages = [got[p * tp_size] for p in range(pp_size)]
    for p in range(pp_size):
        for t in range(tp_size):
            if got[p * tp_size + t] != stages[p]:
                return "stage %d: rank %d holds layers %s, rank %d %s" % (
                    p, p * tp_size + t, got[p * tp_size + t],
                    p * tp_size, stages[p])
    flat = [i for s in stages for i in s]
    if flat != list(range(nlayers)):
        return "the stages hold layers %s, expected 0..%d once each, in " \
            "stage order" % (stages, nlayers - 1)
    return None


def _run_stage(arch, w, comm, r, tp_size, stage, pp_size, ref_path):
    """This rank's part of the forward: embeddings on the first stage,
    its layers, the hidden state on to the next stage or, on the last,
    the logits' relative error against the reference (else None)."""
    x = arch.embed(w) if stage == 0 else comm.recv(source=r - tp_size)
    x = run_layers(arch, w, w.layers(), x)
    if stage < pp_size - 1:
        comm.send(x, dest=r + tp_size)
        return None
    ref = np.load(ref_path)
    logits = arch.head(w, x)
    return float(np.abs(logits - ref).max() / np.abs(ref).max())


def _verdict(err, mismatch):
    if err is None:
        return False
    return err > MISMATCH_MIN if mismatch else err < MATCH_TOL


def tensor_parallel(a):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    r = comm.Get_rank()
    tp_size, pp_size = a.tp, a.pp
    t, stage = r % tp_size, (r // tp_size) % pp_size
    group = comm.Split(r // tp_size, t)
    allreduce = lambda y: group.allreduce(np.ascontiguousarray(y,
                                                               np.float32),
                                          op=MPI.SUM)
    arch = make_arch(a.model, tp_size, allreduce,
                     lambda y: group.allgather(np.ascontiguousarray(y)))
    arch.t, arch.bias_once = t, a.bias_once
    if a.ep:
        experts = oracle.config_experts(a.model)
        size = a.ep_size or tp_size
        er = (r // (tp_size * pp_size)) * tp_size + t if size > tp_size else t
        if size > tp_size:
            eg = comm.Split(stage, r)
            arch.ep_reduce = lambda y: eg.allreduce(
                np.ascontiguousarray(y, np.float32), op=MPI.SUM)
            arch.ep_adds = t == 0
        ids = np.nonzero(oracle.vllm_expert_map(size, er, experts) >= 0)[0]
        if er == 0 and a.ep_shift:
            ids = (ids + a.ep_shift) % experts
        arch.ep_ids, arch.ep_lenient = set(int(e) for e in ids), \
            bool(a.ep_shift)
    nlayers = arch.cfg.get("num_hidden_layers", arch.cfg.get("n_layer"))
    err = None
    w = _shard_source(a.src, r)
    # Collective: every rank gets the same verdict, so all report it.
    why = _stage_layers(comm, tp_size, pp_size, w.layers(), nlayers)
    try:
        if why is None:
            err = _run_stage(arch, w, comm, r, tp_size, stage, pp_size, a.ref)
    except (ForwardError, KeyError) as e:
        # One rank may fail while the others wait in a collective: end
        # the job rather than hang it.
        print("# rank %d: %s" % (r, e), file=sys.stderr, flush=True)
        comm.Abort(1)
    report = comm.gather((stage == pp_size - 1, err, why), root=0)
    ok = True
    if r == 0:
        for rank, (last, e, msg) in enumerate(report):
            if msg is not None:  # the same on every rank: said once
                if rank == 0:
                    print("# %s" % msg, file=sys.stderr)
                ok = False
            elif last:
                print("# rank %d: relative error %.3g" % (rank, e),
                      file=sys.stderr)
                ok = ok and _verdict(e, a.mismatch)
    return 0 if comm.bcast(ok, root=0) else 1


BASE = {"hidden_size": 64, "num_attention_heads": 8,
        "num_key_value_heads": 4, "intermediate_size": 128,
        "num_hidden_layers": 2, "vocab_size": 128, "rope_theta": 10000.0,
        "torch_dtype": "float32"}
# MLA (8 heads, q / kv latents of 16, q head 8 + 4 rope, v head 8),
# layer 0 dense, layer 1 MoE: 8 routed experts, top 2, 1 shared expert.
DEEPSEEK = dict(BASE, num_key_value_heads=8, rms_norm_eps=1e-6,
                q_lora_rank=16, kv_lora_rank=16, qk_nope_head_dim=8,
                qk_rope_head_dim=4, v_head_dim=8, n_routed_experts=8,
                num_experts_per_tok=2, n_shared_experts=1,
                moe_intermediate_size=16, first_k_dense_replace=1,
                moe_layer_freq=1, tie_word_embeddings=False)
HAND_MADE = {
    "cohere": dict(BASE, architectures=["CohereForCausalLM"],
                   model_type="cohere", layer_norm_eps=1e-5,
                   logit_scale=0.0625, use_qk_norm=True,
                   tie_word_embeddings=True),
    "qwen3": dict(BASE, architectures=["Qwen3ForCausalLM"],
                  model_type="qwen3", head_dim=8, rms_norm_eps=1e-6,
                  tie_word_embeddings=False),
    "olmo2": dict(BASE, architectures=["Olmo2ForCausalLM"],
                  model_type="olmo2", rms_norm_eps=1e-6,
                  tie_word_embeddings=False),
    "qwen2_moe": dict(BASE, architectures=["Qwen2MoeForCausalLM"],
                      model_type="qwen2_moe", rms_norm_eps=1e-6,
                      num_experts=4, num_experts_per_tok=2,
                      moe_intermediate_size=32,
                      shared_expert_intermediate_size=64,
                      norm_topk_prob=False, tie_word_embeddings=False),
    "qwen3_moe": dict(BASE, architectures=["Qwen3MoeForCausalLM"],
                      model_type="qwen3_moe", head_dim=8, rms_norm_eps=1e-6,
                      num_experts=6, num_experts_per_tok=2,
                      moe_intermediate_size=32, norm_topk_prob=True,
                      decoder_sparse_step=1, mlp_only_layers=[],
                      tie_word_embeddings=False),
    "deepseek_v2": dict(DEEPSEEK, architectures=["DeepseekV2ForCausalLM"],
                        model_type="deepseek_v2", topk_method="greedy",
                        scoring_func="softmax", norm_topk_prob=False,
                        routed_scaling_factor=1.0),
    "deepseek_v3": dict(DEEPSEEK, architectures=["DeepseekV3ForCausalLM"],
                        model_type="deepseek_v3", topk_method="noaux_tc",
                        scoring_func="sigmoid", n_group=2, topk_group=1,
                        norm_topk_prob=True, routed_scaling_factor=2.5),
    "internlm2": dict(BASE, architectures=["InternLM2ForCausalLM"],
                      model_type="internlm2", rms_norm_eps=1e-6, bias=False,
                      tie_word_embeddings=False),
}


def _qk_norms(kind, h, kv, d, near1):
    """The q_norm / k_norm of transformers' modeling_<kind>.py."""
    shapes = {"cohere": ((h, d), (kv, d)), "qwen3": ((d,), (d,)),
              "qwen3_moe": ((d,), (d,)),
              "olmo2": ((h * d,), (kv * d,))}.get(kind)
    if shapes is None:
        return {}
    return {"self_attn.q_norm.weight": near1(*shapes[0]),
            "self_attn.k_norm.weight": near1(*shapes[1])}


def _mla(cfg, e, h, mat, near1):
    """DeepseekV2Attention's projections, with q_lora_rank."""
    ql, kvl, rot = cfg["q_lora_rank"], cfg["kv_lora_rank"], \
        cfg["qk_rope_head_dim"]
    nope, vd = cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    a = "self_attn."
    return {a + "q_a_proj.weight": mat(ql, e),
            a + "q_a_layernorm.weight": near1(ql),
            a + "q_b_proj.weight": mat(h * (nope + rot), ql),
            a + "kv_a_proj_with_mqa.weight": mat(kvl + rot, e),
            a + "kv_a_layernorm.weight": near1(kvl),
            a + "kv_b_proj.weight": mat(h * (nope + vd), kvl),
            a + "o_proj.weight": mat(e, h * vd)}


def _attention(kind, e, h, kv, d, mat, near1):
    if kind == "internlm2":  # [groups, q heads of a group + k + v, d, e]
        return {"attention.wqkv.weight": mat((h + 2 * kv) * d, e),
                "attention.wo.weight": mat(e, h * d)}
    out = {"self_attn.q_proj.weight": mat(h * d, e),
           "self_attn.k_proj.weight": mat(kv * d, e),
           "self_attn.v_proj.weight": mat(kv * d, e),
           "self_attn.o_proj.weight": mat(e, h * d)}
    if kind == "qwen2_moe":
        out.update({"self_attn.q_proj.bias": mat(h * d),
                    "self_attn.k_proj.bias": mat(kv * d),
                    "self_attn.v_proj.bias": mat(kv * d)})
    out.update(_qk_norms(kind, h, kv, d, near1))
    return out


def _gated(prefix, e, i, mat, names=("gate_proj", "up_proj", "down_proj")):
    return {prefix + names[0] + ".weight": mat(i, e),
            prefix + names[1] + ".weight": mat(i, e),
            prefix + names[2] + ".weight": mat(e, i)}


def _deepseek_moe(cfg, e, mat):
    x_n, mi = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
    out = {"mlp.gate.weight": mat(x_n, e)}
    if cfg["scoring_func"] == "sigmoid":
        out["mlp.gate.e_score_correction_bias"] = mat(x_n)
    for x in range(x_n):
        out.update(_gated("mlp.experts.%d." % x, e, mi, mat))
    out.update(_gated("mlp.shared_experts.", e,
                      mi * cfg["n_shared_experts"], mat))
    return out


def _mlp(kind, cfg, e, mat, layer):
    if kind == "internlm2":
        return _gated("feed_forward.", e, cfg["intermediate_size"], mat,
                      ("w1", "w3", "w2"))
    if kind.startswith("deepseek") and layer >= cfg["first_k_dense_replace"]:
        return _deepseek_moe(cfg, e, mat)
    if kind not in ("qwen2_moe", "qwen3_moe"):
        return _gated("mlp.", e, cfg["intermediate_size"], mat)
    out = {"mlp.gate.weight": mat(cfg["num_experts"], e)}
    for x in range(cfg["num_experts"]):
        out.update(_gated("mlp.experts.%d." % x, e,
                          cfg["moe_intermediate_size"], mat))
    if kind == "qwen2_moe":
        out["mlp.shared_expert_gate.weight"] = mat(1, e)
        out.update(_gated("mlp.shared_expert.", e,
                          cfg["shared_expert_intermediate_size"], mat))
    return out


LAYER_NORMS = {"cohere": ["input_layernorm"],
               "olmo2": ["post_attention_layernorm",
                         "post_feedforward_layernorm"],
               "internlm2": ["attention_norm", "ffn_norm"]}


def hand_made_tensors(kind, cfg, rng):
    """Random float32 tensors named as transformers names them; norms near
    1 so that every row of a per-head norm differs."""
    e, h, kv = cfg["hidden_size"], cfg["num_attention_heads"], \
        cfg["num_key_value_heads"]
    d, v = cfg.get("head_dim", e // h), cfg["vocab_size"]
    mat = lambda *s: (rng.standard_normal(s) * 0.125).astype(np.float32)
    near1 = lambda *s: (1.0 + rng.standard_normal(s) * 0.25).astype(
        np.float32)
    embed = "model.tok_embeddings.weight" if kind == "internlm2" \
        else "model.embed_tokens.weight"
    out = {embed: mat(v, e), "model.norm.weight": near1(e)}
    if not cfg["tie_word_embeddings"]:
        out["output.weight" if kind == "internlm2" else "lm_head.weight"] = \
            mat(v, e)
    norms = LAYER_NORMS.get(kind, ["input_layernorm",
                                   "post_attention_layernorm"])
    for n in range(cfg["num_hidden_layers"]):
        b = "model.layers.%d." % n
        layer = {x + ".weight": near1(e) for x in norms}
        if kind.startswith("deepseek"):
            layer.update(_mla(cfg, e, h, mat, near1))
        else:
            layer.update(_attention(kind, e, h, kv, d, mat, near1))
        layer.update(_mlp(kind, cfg, e, mat, n))
        out.update({b + k: t for k, t in layer.items()})
    return out


def write_hand_made(kind, d):
    cfg = HAND_MADE[kind]
    os.makedirs(d)
    npst.write(os.path.join(d, "model.safetensors"),
               hand_made_tensors(kind, cfg, np.random.default_rng(25)))
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1)
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    ref = sub.add_parser("ref")
    ref.add_argument("model")
    ref.add_argument("out")
    wr = sub.add_parser("write")
    wr.add_argument("arch", choices=sorted(HAND_MADE))
    wr.add_argument("dir")
    tp = sub.add_parser("tp")
    tp.add_argument("model")
    tp.add_argument("src")
    tp.add_argument("ref")
    tp.add_argument("--tp", type=int, required=True)
    tp.add_argument("--pp", type=int, default=1)
    tp.add_argument("--mismatch", action="store_true")
    tp.add_argument("--ep", action="store_true")
    tp.add_argument("--ep-shift", type=int, default=0)
    tp.add_argument("--bias-once", action="store_true")
    tp.add_argument("--ep-size", type=int, default=0)
    a = p.parse_args(argv)
    if a.cmd == "ref":
        return reference(a.model, a.out)
    if a.cmd == "write":
        return write_hand_made(a.arch, a.dir)
    return tensor_parallel(a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
