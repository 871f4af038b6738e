"""A lean decoder for the three architectures (Llama, Mistral, Qwen2): the same config and the same weights
as the HF model, a static KV cache, fused projections, and nothing else per step. It is the next rung of
the ladder after HF eager / graph / compile (notebook 06): what a decode step costs when the Python around
the kernels is as thin as it can be.

Numerics follow the HF modules it replaces, so that its logits equal the HF model's within bf16 tolerance:
RMSNorm in fp32 then cast back before the weight; rotary cos/sin from the HF model's own `inv_freq` and
`attention_scaling` (so llama3 rope scaling comes for free), computed in fp32 and cast to the activation
dtype; SDPA with scale 1/sqrt(head_dim) and GQA; SiLU-gated MLP.

Fused projections: q, k and v are one matmul against their concatenated weights (with Qwen2's biases),
gate and up another. The fused weights are copies (the HF model's own tensors are left as they are), so a
lean decoder next to its HF model holds the attention and MLP input weights twice. Where those copies do not fit
the GPU beside the model (Qwen2.5-32B on 80 GB), the decoder shares storage instead (share_projection_storage):
each concatenated weight is made once, projection by projection, and the HF model's q/k/v (gate/up) weights become
views of it, so the model holds them once and every later lean decoder of it reads the same storage without a copy;
the checks in a run say so (shared_projection_storage). On a quantised model
(quant.quantise_model_, any path) the same holds for the quantised weights: q/k/v and gate/up become one
layer of that path each whose packed tensors are the parts' concatenated (quant.fuse.fuse_linears), o and down are
the HF model's own quantised layers, and every one runs its path's kernel (also with the custom kernels, whose
GEMV reads bf16 weights; attention still goes through the split-KV kernel). A model mixing layer types is
refused (LeanUnsupported). The LM head is bf16 (with the custom kernels it goes through the Triton GEMV), but in a
path that quantises it (quant.paths' int4-triton-head), where it is that path's layer and runs its kernel.

One code path serves prefill and decode: `forward(ids [B, T], start_pos [1])` writes the T new keys and
values of each of the B sequences (a batch decoded together, every sequence at the same positions; B is the
decoder's `batch`, 1 unless asked) at positions start_pos..start_pos+T-1 of the cache (one K and one V buffer per
layer, `k_cache_<i>` / `v_cache_<i>`, [B, kv_heads, max_len, D]) and attends over the whole preallocated cache
with the mask `key position <= query position`; shapes never depend on the position, so a decode step
can be captured in a CUDA graph and replayed with `start_pos` advanced in place. Under that mask it calls
SDPA as HF does, with K and V expanded to every query head (HF: with a mask, GQA would fall back to math), so
the lean levers time the same attention kernels as HF's and the split-KV kernel lever is what removes them.

The fused step (custom kernel "fused", bf16 models and int4-triton models): a decode step of seven kernels a layer
from decodegap.kernels.fused.launch, the norms, bias, rotary, cache write, residual adds and SiLU folded into the
products and the rotary kernel, the attention the split-KV kernel; the prefill keeps the path above. With "pdl" the
same kernels are launched with programmatic dependent launch (Hopper). On an int4-triton model the four decoder
products run the int4 GEMV with the same prologues and epilogues (decodegap.kernels.fused_int4; no rotary epilogue),
the LM head the bf16 kernel, or the int4 one with the final norm as its prologue where the head is quantised too.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers.integrations.sdpa_attention import repeat_kv

from decodegap.arms import BATCH_KERNELS
from decodegap.kernels.fused import launch as fused
from decodegap.kernels.next_token import next_token_, next_token_reference_
from decodegap.kernels.step import attention_blocks, decode_attention, gemv
from decodegap.quant import fuse as quant_fuse, layers as quant_layers

ARCHITECTURES = ("llama", "mistral", "qwen2")
PREFILL_SDPA_BACKENDS = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)
"""The SDPA backends a prefill (T > 1; never timed) may use: every one but cuDNN's. On the H200 PyTorch's default
choice for the lean prefill's masked call was cuDNN's attention, and with it every lean lever failed its check
at Llama-3.1-8B ctx 8192; without it they pass (verify.csv; bench/lean_8192_sides.py in git history at d764dd2; data/README.md). Whether
cuDNN's result was wrong is not known: the check then fed each side its own prefill's argmax, a near-tie of
random-weight logits that any rounding difference can flip (decode.teacher_token feeds one token to both sides
since), and a flip gives errors of that size. Kept so that the code is the one the lean rows were measured
with. Decode steps (T == 1) keep the default choice, as HF's do."""
CUSTOM_KERNELS = ("gemv", "attention", "fused", "pdl", "norm_epilogue", "rotary_epilogue", "early_trigger",
                  "early_products", "merged_attention", "silu_epilogue", "head_norm_epilogue", "input_norm_epilogue",
                  "next_token", "norm_scale", "kv_together", "rotary_attention", "attention_prefetch", "l2_prefetch")
"""What `custom_kernels` may name: decodegap.kernels.step.gemv and .decode_attention; "fused": the whole decode step
through decodegap.kernels.fused.launch's kernels (small ops fused into the products; its attention decode_attention, so it comes
with "attention" and replaces "gemv"); "pdl": those kernels launched with programmatic dependent launch;
"norm_epilogue": the post-attention norm made in the o product's epilogue (fused.FusedOps.norm_in_epilogue);
"rotary_epilogue": the rotary and the cache write made in the qkv product's epilogue (fused.FusedOps.rotary_in_qkv);
"early_trigger": with "pdl", each kernel lets the next launch as it starts (fused.FusedOps.early_trigger);
"early_products": only the products another product follows do (fused.FusedOps.early_products);
"merged_attention": the split-KV attention in one kernel, its last program a kv head merging the splits
(decodegap.kernels.step.decode_attention's `merged`); "silu_epilogue": the MLP's SiLU(gate) * up made in the gate_up
product's epilogue, down then taking it with the residual alone (fused.FusedOps.silu_in_down False);
"head_norm_epilogue": the final norm made in the last layer's down epilogue, the LM head then with no prologue
(fused.FusedOps.head_norm_in_epilogue); "input_norm_epilogue": each layer's input norm but the first's made in the
previous layer's down epilogue, its qkv product then with no prologue (fused.FusedOps.input_norm_in_epilogue);
"next_token": the step's greedy next token (argmax of the logits into the token, the position advanced) in one
kernel, decodegap.kernels.next_token, instead of torch's argmax, a copy and an add (one sequence); "norm_scale": each
norm the options above make in an epilogue left to the next product as a scale, which applies 1 / rms to its sums
(fused.FusedOps.norm_scale, kernels.fused.norm_scale.NormScale); "kv_together": the split-KV attention loading each
block's V beside its K, in blocks of KV_TOGETHER_BLOCK positions (decode_attention's `kv_together`; on sm_90 the
load order compiles as the default's, so the block is what it changes there); "rotary_attention": the rotary and
the cache write made in the attention's split kernel, which reads the qkv product's row, so no kernel of their own
is launched and qkv stays a plain product (fused.FusedOps.rotary_in_attention; not with "rotary_epilogue");
"attention_prefetch": with "rotary_attention", the attention reads the first block of each program's share before
it waits for qkv, which triggers it as qkv starts (fused.FusedOps.attention_prefetch); "l2_prefetch": with "pdl",
each product's programs ask the L2 for the first columns of their weight rows before they wait
(fused.FusedOps.l2_prefetch, decodegap.kernels.l2_prefetch)."""
UNFUSED_KERNELS = ("gemv", "attention")  # what custom_kernels=True names


def kernel_set(custom_kernels) -> frozenset:
    """The custom kernels a lean decoder's decode steps use: True for UNFUSED_KERNELS, False or () for none, or an
    iterable of names of CUSTOM_KERNELS ("fused" with "attention" and without "gemv"; "pdl" with "fused")."""
    if custom_kernels is True or custom_kernels is False:
        return frozenset(UNFUSED_KERNELS if custom_kernels else ())
    chosen = frozenset(custom_kernels)
    if not chosen <= set(CUSTOM_KERNELS):
        raise ValueError(f"unknown custom kernel(s) {sorted(chosen - set(CUSTOM_KERNELS))}; known: {CUSTOM_KERNELS}")
    if "fused" in chosen and ("attention" not in chosen or "gemv" in chosen):
        raise ValueError(f"the fused step attends with decode_attention and runs its own GEMV: 'fused' takes "
                         f"'attention' and not 'gemv', got {sorted(chosen)}")
    for option in ("norm_epilogue", "rotary_epilogue", "silu_epilogue", "head_norm_epilogue", "input_norm_epilogue",
                   "next_token", "norm_scale", "rotary_attention", "attention_prefetch", "l2_prefetch"):
        if option in chosen and "fused" not in chosen:
            raise ValueError(f"'{option}' is a fused step's option: it needs 'fused', got {sorted(chosen)}")
    if "fused" in chosen:  # the rules between the fused step's options: FusedOps' own
        try:
            fused.FusedOps.of_kernels(chosen)
        except ValueError as e:
            raise ValueError(f"{e}; got {sorted(chosen)}") from None
    if "pdl" in chosen and "fused" not in chosen:
        raise ValueError(f"'pdl' launches the fused kernels: it needs 'fused', got {sorted(chosen)}")
    for option in ("early_trigger", "early_products"):
        if option in chosen and "pdl" not in chosen:
            raise ValueError(f"'{option}' places PDL's trigger: it needs 'pdl', got {sorted(chosen)}")
    if "norm_scale" in chosen and not chosen & {"norm_epilogue", "head_norm_epilogue", "input_norm_epilogue"}:
        raise ValueError(f"'norm_scale' changes how a norm made in an epilogue reaches the next product: it needs "
                         f"'norm_epilogue', 'head_norm_epilogue' or 'input_norm_epilogue', got {sorted(chosen)}")
    for option, what in (("merged_attention", "the split-KV attention's one-kernel form"),
                         ("kv_together", "how the split-KV attention loads its blocks")):
        if option in chosen and "attention" not in chosen:
            raise ValueError(f"'{option}' is {what}: it needs 'attention', got {sorted(chosen)}")
    return chosen


class LeanUnsupported(ValueError):
    """The HF model is not one of the architectures (or its layers not one of the weight formats) the lean
    decoder implements."""


def _rms_norm(x, weight, eps: float):
    """HF's LlamaRMSNorm / Qwen2RMSNorm / MistralRMSNorm: normalise in fp32, cast back, then scale."""
    dtype = x.dtype
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(dtype)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LeanDecoder(nn.Module):
    """Decoder-only LM built from an HF Llama/Mistral/Qwen2 causal LM; see the module docstring."""

    def __init__(self, hf_model, max_cache_len: int, custom_kernels=False, batch: int = 1,
                 share_storage: bool | None = None):
        """`share_storage`: the HF model's q/k/v and gate/up weights become views of the concatenated ones
        (share_projection_storage) instead of being copied; None: only where the copies do not fit (_share_or_refuse)."""
        super().__init__()
        self.custom_kernels = kernel_set(custom_kernels)  # decode steps (T == 1) through decodegap.kernels.step (Triton)
        one_row = sorted(set(self.custom_kernels) - set(BATCH_KERNELS))
        if batch > 1 and one_row:  # the GEMV and the fused step take one row; the split-KV attention any batch
            raise LeanUnsupported(f"the custom kernels {one_row} take one sequence; a batch of {batch} runs the "
                                  f"lean decoder without them (arms.batch_fallback)")
        self.batch = int(batch)
        cfg = hf_model.config
        if cfg.model_type not in ARCHITECTURES:
            raise LeanUnsupported(f"lean decoder implements {ARCHITECTURES}, not model_type {cfg.model_type!r}")
        unsupported = "fused" in self.custom_kernels and fused.weights_unsupported(hf_model, self.custom_kernels)
        if unsupported:
            raise LeanUnsupported(unsupported)
        inner = hf_model.model
        first = inner.layers[0].self_attn
        self.n_heads, self.n_kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = first.head_dim
        self.n_layers, self.max_cache_len = cfg.num_hidden_layers, int(max_cache_len)
        self.eps = cfg.rms_norm_eps
        self.scale = self.head_dim ** -0.5
        self.embed = inner.embed_tokens.weight
        self.final_norm = inner.norm.weight
        head = hf_model.lm_head
        self.lm_head = head if isinstance(head, quant_layers.QuantLinear) else head.weight  # a quantised head: its layer
        dtype, device = self.embed.dtype, self.embed.device
        self.shares_storage = _share_or_refuse(inner.layers, usable_bytes(device), hf_model, share_storage)
        with torch.no_grad():
            self.layers = nn.ModuleList(LeanLayer(i, layer, self) for i, layer in enumerate(inner.layers))
            rotary = inner.rotary_emb
            positions = torch.arange(self.max_cache_len, device=device, dtype=torch.float32)
            freqs = positions[:, None] * rotary.inv_freq.float()[None, :]
            emb = torch.cat((freqs, freqs), dim=-1)
            scaling = float(getattr(rotary, "attention_scaling", 1.0))
        self.register_buffer("cos", (emb.cos() * scaling).to(dtype), persistent=False)  # [max_len, D]
        self.register_buffer("sin", (emb.sin() * scaling).to(dtype), persistent=False)
        # one K and one V tensor per layer, as HF's StaticCache keeps them: an in-place write into a slice of one
        # big cache tensor made inductor copy every layer's whole slice and write it back each step (CPU output
        # code), a cost that grows with the cache; a write into a whole buffer it does in place
        shape = (self.batch, self.n_kv_heads, self.max_cache_len, self.head_dim)
        for i in range(self.n_layers):
            self.register_buffer(f"k_cache_{i}", torch.zeros(shape, dtype=dtype, device=device), persistent=False)
            self.register_buffer(f"v_cache_{i}", torch.zeros(shape, dtype=dtype, device=device), persistent=False)
        self.register_buffer("key_pos", torch.arange(self.max_cache_len, device=device), persistent=False)
        # the decode step's fused.FusedOps when it runs the fused kernels (fused_step)
        chosen = self.custom_kernels
        self.fused = fused.FusedOps.of_kernels(chosen) if "fused" in chosen else None

    def forward(self, ids, start_pos):
        """ids [B, T] token ids at positions start_pos .. start_pos + T - 1 (start_pos a [1] long tensor; B the
        decoder's batch); returns logits [B, T, vocab] in the weights' dtype. With `custom_kernels`, a decode step (T == 1)
        runs its bf16 projections ("gemv") and/or its attention ("attention") through decodegap.kernels.step
        instead of cuBLAS and SDPA (int4 projections keep tinygemm's kernel); with "fused", through
        decodegap.kernels.fused.launch's kernels (fused_step; bf16 and int4-triton models)."""
        T = ids.shape[1]
        if T == 1 and self.fused is not None:
            return self.fused_step(ids, start_pos)
        kernels = T == 1 and "gemv" in self.custom_kernels
        split_kv = T == 1 and "attention" in self.custom_kernels
        pos = start_pos + torch.arange(T, device=ids.device)  # [T]
        x = F.embedding(ids, self.embed)  # [B, T, hidden]
        cos, sin = self.cos[pos][None, None], self.sin[pos][None, None]  # [1, 1, T, D]
        mask = None if split_kv else (self.key_pos[None, :] <= pos[:, None])[None, None]  # [1, 1, T, max_len]
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, mask, start_pos, pos, getattr(self, f"k_cache_{i}"), getattr(self, f"v_cache_{i}"))
        return _project(_rms_norm(x, self.final_norm, self.eps), self.lm_head, None, kernels)

    def fused_step(self, ids, start_pos):
        """One decode step (ids [1, 1]) through self.fused (decodegap.kernels.fused.launch.FusedOps): per layer seven
        kernels (LeanLayer.fused_step), then the LM head with the final norm as its prologue, or with
        FusedOps.head_norm_in_epilogue the final norm made in the last layer's down epilogue and the head plain
        (with FusedOps.input_norm_in_epilogue each down makes the next layer's input norm too, which that layer's qkv
        reads); logits [1, 1, vocab]. The residual stream is one flat [hidden] row; the attention reads
        `start_pos + 1` positions (one add a step)."""
        x = F.embedding(ids, self.embed).reshape(-1)
        length = start_pos + 1
        final = (self.final_norm, self.eps) if self.fused.head_norm_in_epilogue else None
        normed = None  # RMSNorm(x) of this layer's input, where the previous down made it
        for i, layer in enumerate(self.layers):
            last = i == len(self.layers) - 1
            out_norm = final  # the last down's output norm: the final norm's, or none
            if not last:  # another layer's down: the next layer's input norm, or none
                out_norm = (self.layers[i + 1].ln_attn, self.eps) if self.fused.input_norm_in_epilogue else None
            x = layer.fused_step(x, self.fused, self.cos, self.sin, start_pos, length, getattr(self, f"k_cache_{i}"),
                                 getattr(self, f"v_cache_{i}"), out_norm=out_norm, normed=normed)
            if out_norm is not None and not last:
                x, normed = x
        if final is not None:  # (x, RMSNorm(x)) from the last down
            return self.fused.gemv(x[1], self.lm_head).reshape(1, 1, -1)
        return self.fused.rmsnorm_gemv(x, self.final_norm, self.lm_head, None, self.eps).reshape(1, 1, -1)


class LeanLayer(nn.Module):
    """One decoder layer of a LeanDecoder: its norm weights, fused projections (bf16 tensors, or int4-tinygemm
    layers) and the layer step. A module of its own so that the compiled lean arms can mark its forward a nested
    compile region (decode.compiled with layers=...), as the HF compile arm does with HF's decoder layers: dynamo
    traces one layer and reuses it for the others. The bf16 weights are buffers (never saved: state_dict leaves
    them out) that share storage with the HF model's tensors or hold the fused copies."""

    def __init__(self, index: int, hf_layer, decoder: "LeanDecoder"):
        super().__init__()
        projections = _projections(hf_layer)
        kinds = {type(p).__name__ for _, parts in projections for p in parts}
        if len(kinds) > 1:  # one path per model: a layer mixing them is a model quantised twice, or by hand
            raise LeanUnsupported(f"lean decoder reads nn.Linear (bf16) or one quantisation path's layers; "
                                  f"layer {index} has {', '.join(sorted(kinds))}")
        self.n_heads, self.n_kv_heads, self.head_dim = decoder.n_heads, decoder.n_kv_heads, decoder.head_dim
        self.eps, self.scale, self.custom_kernels = decoder.eps, decoder.scale, decoder.custom_kernels
        self.register_buffer("ln_attn", hf_layer.input_layernorm.weight.detach(), persistent=False)
        self.register_buffer("ln_mlp", hf_layer.post_attention_layernorm.weight.detach(), persistent=False)
        for name, parts in projections:
            weight, bias = _projection(index, parts, share=decoder.shares_storage)
            if isinstance(weight, nn.Module):
                self.add_module(f"w_{name}", weight)
            else:
                self.register_buffer(f"w_{name}", weight.detach(), persistent=False)
            self.register_buffer(f"b_{name}", None if bias is None else bias.detach(), persistent=False)

    def forward(self, x, cos, sin, mask, start_pos, pos, k_cache, v_cache):
        """x [B, T, hidden] -> x after this layer; writes the T new keys and values at `pos` of k_cache and
        v_cache [B, kv_heads, max_len, D] (see LeanDecoder.forward; mask None: the split-KV Triton attention, T 1)."""
        B, T = x.shape[0], x.shape[1]
        kernels = T == 1 and "gemv" in self.custom_kernels
        H, Hkv, D = self.n_heads, self.n_kv_heads, self.head_dim
        h = _rms_norm(x, self.ln_attn, self.eps)
        qkv = _project(h, self.w_qkv, self.b_qkv, kernels)
        q, k, v = qkv.split([H * D, Hkv * D, Hkv * D], dim=-1)
        q = q.view(B, T, H, D).transpose(1, 2)
        k = k.view(B, T, Hkv, D).transpose(1, 2)
        v = v.view(B, T, Hkv, D).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        k_cache.index_copy_(2, pos, k)
        v_cache.index_copy_(2, pos, v)
        if mask is None:  # split-KV over the first start_pos + 1 positions, read on the device; the B sequences
            # (one position) as B x Hkv heads of one cache: query head b * H + h reads kv head b * Hkv + h // (H / Hkv)
            L = k_cache.shape[2]
            o = decode_attention(q[:, :, 0].reshape(B * H, D), k_cache.view(B * Hkv, L, D),
                                 v_cache.view(B * Hkv, L, D), start_pos + 1, self.scale,
                                 merged="merged_attention" in self.custom_kernels,
                                 **attention_blocks("kv_together" in self.custom_kernels))  # [B * H, D]
        else:  # as HF does under a mask: K/V expanded to every query head
            keys, values = repeat_kv(k_cache, H // Hkv), repeat_kv(v_cache, H // Hkv)
            o = _attention(q, keys, values, mask, self.scale, prefill=T > 1)
        x = x + _project(o.reshape(B, T, H * D), self.w_o, self.b_o, kernels)
        h = _rms_norm(x, self.ln_mlp, self.eps)
        gate, up = _project(h, self.w_gate_up, None, kernels).chunk(2, dim=-1)
        return x + _project(F.silu(gate) * up, self.w_down, None, kernels)

    def fused_step(self, x, ops, cos, sin, start_pos, length, k_cache, v_cache, out_norm=None, normed=None):
        """x [hidden] (one token at position start_pos) -> x after this layer, through `ops` (fused.FusedOps):
        qkv with the input norm (and Qwen2's bias); rotary q and k with the K/V cache write; the split-KV
        attention over `length` positions; o plus the residual and the MLP (ops.o_and_mlp: gate_up with the
        post-attention norm, SiLU(gate) * up, down plus the residual). cos, sin: the decoder's tables [max_len, D].
        `out_norm` (norm weight, eps): returns (x, RMSNorm(x)), the norm made in down's epilogue; `normed`: this
        layer's input norm RMSNorm(x), made so by the previous layer's down, which qkv then reads."""
        q = ops.qkv_rotary(x, self.ln_attn, self.w_qkv, self.b_qkv, self.eps, cos, sin, start_pos, k_cache, v_cache,
                           self.n_heads, self.n_kv_heads, normed=normed)
        o = ops.attention(q, k_cache[0], v_cache[0], length, self.scale, rotary=(cos, sin, self.n_heads))
        return ops.o_and_mlp(o.reshape(-1), self.w_o, x, self.ln_mlp, self.w_gate_up, self.w_down, self.eps,
                             out_norm=out_norm)


def _attention(q, keys, values, mask, scale: float, prefill: bool):
    """SDPA under the mask, [B, T, H, D]; a prefill without cuDNN's attention (PREFILL_SDPA_BACKENDS)."""
    with sdpa_kernel(list(PREFILL_SDPA_BACKENDS)) if prefill else contextlib.nullcontext():
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=scale).transpose(1, 2)


def _project(x, weight, bias, kernels: bool):
    """x @ weight^T + bias: F.linear, or decodegap.kernels.step.gemv for a decode step with the custom kernels;
    a quantised layer (weight a quant_layers.QuantLinear, its bias inside) runs its own kernel either way (the
    Triton GEMV reads bf16 weights only)."""
    if isinstance(weight, nn.Module):
        return weight(x)
    if not kernels:
        return F.linear(x, weight, bias)
    y = gemv(x, weight)
    return y if bias is None else y + bias


PROJECTIONS = (("qkv", "self_attn", ("q_proj", "k_proj", "v_proj")), ("o", "self_attn", ("o_proj",)),
               ("gate_up", "mlp", ("gate_proj", "up_proj")), ("down", "mlp", ("down_proj",)))
"""Each LeanLayer projection: its name, and the HF block and linears it stands for (_projection makes it)."""


def _projections(hf_layer) -> list[tuple[str, tuple]]:
    """(name, the HF linears it stands for) of each of PROJECTIONS in `hf_layer`."""
    return [(name, tuple(getattr(getattr(hf_layer, block), n) for n in linears))
            for name, block, linears in PROJECTIONS]


def _concatenated(parts) -> bool:
    """Whether _projection makes `parts` one new tensor: several bf16 nn.Linear (q/k/v, gate/up), a copy beside the
    model's own weights (a quantised path's layers are fused by quant.fuse instead)."""
    return len(parts) > 1 and all(type(p) is nn.Linear for p in parts)


def copied_bytes(hf_layers, largest: bool = False) -> int:
    """Bytes of the copies the lean decoder makes of `hf_layers` (HF decoder layers): the weights and biases of each
    projection _projection concatenates (_concatenated) whose weights are not one storage already (joined_view); a
    quantised path's fused layers are not counted. `largest`: the largest one projection's copy (what sharing the
    storage needs at once: share_projection_storage makes one at a time)."""
    sizes = _copy_sizes(hf_layers)
    return max(sizes, default=0) if largest else sum(sizes)


def _copy_sizes(hf_layers) -> list[int]:
    """copied_bytes' terms: the bytes of each projection's copy, one a projection."""
    return [sum(t.numel() * t.element_size() for p in parts for t in (p.weight, p.bias) if t is not None)
            for layer in hf_layers for _, parts in _projections(layer)
            if _concatenated(parts) and joined_view([p.weight for p in parts]) is None]


def joined_view(tensors) -> torch.Tensor | None:
    """The one tensor that `tensors` (row blocks of one width, dtype and device) already are, as consecutive
    contiguous views of one storage (the HF weights after share_projection_storage), as a view of that storage; None
    where they are not (separate tensors: the concatenation is a copy)."""
    first = tensors[0]
    if not all(t.is_contiguous() and t.dim() == 2 and t.shape[1] == first.shape[1] and t.dtype == first.dtype
               and t.device == first.device and t.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
               for t in tensors):
        return None
    offset = first.storage_offset()
    for t in tensors:
        if t.storage_offset() != offset:
            return None
        offset += t.numel()
    rows = sum(t.shape[0] for t in tensors)
    return first.detach().as_strided((rows, first.shape[1]), (first.shape[1], 1), first.storage_offset())


def share_projection_storage(parts) -> torch.Tensor:
    """The concatenated weight of `parts` (several bf16 nn.Linear: q/k/v or gate/up), with each part's weight made
    a view of it (`weight.data` rebound, so every holder of the parameter sees the view and the part's own storage is
    freed): the model then holds these weights once. Parts already joined (joined_view) are returned as they are."""
    weights = [p.weight for p in parts]
    joined = joined_view(weights)
    if joined is not None:
        return joined
    joined = torch.cat([w.detach() for w in weights])
    start = 0
    for p in parts:
        rows = p.weight.shape[0]
        p.weight.data = joined[start:start + rows]
        start += rows
    return joined


def shared_projection_storage(hf_model) -> bool:
    """Whether `hf_model`'s q/k/v weights of its first layer are views of one storage (share_projection_storage
    has run on it: its HF arms read the same weights at other addresses)."""
    try:
        parts = dict(_projections(hf_model.model.layers[0]))["qkv"]
    except (AttributeError, IndexError):  # not one of ARCHITECTURES' layouts: nothing the lean decoder shares
        return False
    return _concatenated(parts) and joined_view([p.weight for p in parts]) is not None


SHARED_STORAGE_NOTE = ("the model's q/k/v and gate/up weights are views of the lean decoder's concatenated ones "
                       "(lean.share_projection_storage: its copies did not fit beside the model)")
"""What a check's reason adds where the model's weights share the lean decoder's storage (harness.verification)."""


def _share_or_refuse(hf_layers, usable: int | None, hf_model, share: bool | None) -> bool:
    """Whether the lean decoder shares the HF model's storage (`share`, or where None: only if its copies,
    copied_bytes, do not fit in the `usable` bytes); where even sharing cannot fit (the largest one projection's copy
    at a time), or `share` is False and the copies do not fit, check_room_for_copies refuses it as out of memory."""
    sizes = _copy_sizes(hf_layers)
    need = sum(sizes)
    if share is None:
        share = usable is not None and need > usable
    check_room_for_copies(max(sizes, default=0) if share else need, usable, hf_model, bool(share))
    return bool(share)


def usable_bytes(device) -> int | None:
    """Bytes this process can still allocate on `device`: the driver's free memory plus what torch's allocator holds
    reserved and unused (None off CUDA: no check)."""
    if torch.device(device).type != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info(device)
    return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))


def check_room_for_copies(need: int, usable: int | None, hf_model, shared: bool = False) -> None:
    """Refuse, before any copy is made, a lean decoder whose copies (`need` bytes: copied_bytes; `shared`: the
    largest one, sharing the model's storage) cannot fit in the `usable` bytes left (usable_bytes; None: not
    checked), as torch's out-of-memory error (a sweep records the cell as `oom`) in one line naming the copies, the
    model's own weights, what is left and what would fit it."""
    if usable is None or need <= usable:
        return
    gib = 2 ** 30
    own = sum(p.numel() * p.element_size() for p in hf_model.parameters())
    what = ("the lean decoder's largest concatenated projection, made one at a time to share the model's storage, "
            "takes" if shared else "the lean decoder's concatenated q/k/v and gate/up weights take")
    raise torch.OutOfMemoryError(
        f"{what} {need / gib:.1f} GiB beside the model's {own / gib:.1f} GiB, with {usable / gib:.1f} GiB left on "
        f"this GPU: its lean arms need about {(need - usable) / gib:.1f} GiB more (the HF arms make no copy)")


def _projection(index: int, parts, share: bool = False):
    """(weight, bias) of the projection of layer `index` that stands for `parts` (q/k/v, o, gate/up or
    down): nn.Linear weights and biases concatenated (a copy; with `share`, or where the weights are one storage
    already, share_projection_storage's view), or one quantised layer of the model's path
    (quant.fuse.fuse_linears for several parts) with its bias inside and bias None. Other layer types are refused."""
    if all(type(p) is nn.Linear for p in parts):
        bias = None if parts[0].bias is None else torch.cat([p.bias for p in parts])
        if not _concatenated(parts):
            return parts[0].weight, bias
        if share:  # joined already, or joined now
            return share_projection_storage(parts), bias
        joined = joined_view([p.weight for p in parts])
        return (torch.cat([p.weight for p in parts]) if joined is None else joined), bias
    if all(isinstance(p, quant_layers.QuantLinear) for p in parts) and len({type(p) for p in parts}) == 1:
        return (quant_fuse.fuse_linears(parts) if len(parts) > 1 else parts[0]), None
    raise LeanUnsupported(f"lean decoder reads nn.Linear (bf16) or one quantisation path's layers "
                          f"(quant.layers.QuantLinear); layer {index} has {', '.join(sorted({type(p).__name__ for p in parts}))}")


class LeanStep:
    """Prefilled lean-decoder state with the interface of decode.StaticStep: `step()` decodes one token of each of
    its `batch` sequences and returns their logits [batch, 1, V]; `pos` advances in place (inside a captured graph
    too)."""

    def __init__(self, hf_model, ctx: int, cache_len: int, seed: int = 0, forward=None, feedback: bool = True,
                 custom_kernels=False, lean: LeanDecoder | None = None, batch: int = 1):
        """`lean`: a LeanDecoder of `hf_model` to prefill again instead of building one (decode.step_state's
        one compiled decoder per model and cache length); its cache must hold `cache_len` positions and its
        custom kernels be `custom_kernels`. The prefill overwrites positions 0..ctx-1; what an earlier, longer
        context left past them is never read (the mask, or the split-KV attention's live length)."""
        from decodegap.prompts import batch_prompt_ids

        device = next(hf_model.parameters()).device
        if lean is not None and (lean.max_cache_len < cache_len or lean.custom_kernels != kernel_set(custom_kernels)
                                 or lean.batch != batch):
            raise ValueError(f"a lean decoder of cache length {lean.max_cache_len} and kernels "
                             f"{sorted(lean.custom_kernels)} cannot serve cache length {cache_len} with kernels "
                             f"{sorted(kernel_set(custom_kernels))}")
        self.lean = lean if lean is not None else LeanDecoder(hf_model, cache_len, custom_kernels, batch)
        self.forward, self.feedback = forward or self.lean, feedback
        ids = batch_prompt_ids(hf_model.config.vocab_size, ctx, device, seed, batch)
        logits = self.lean(ids, torch.zeros(1, dtype=torch.long, device=device))
        self.tok = logits[:, -1:].argmax(-1)  # [batch, 1], static: updated in place
        self.pos = torch.full((1,), ctx, dtype=torch.long, device=device)
        self.next_token = "next_token" in self.lean.custom_kernels
        if self.next_token:
            check_next_token(logits[:, -1:])

    def step(self):
        logits = self.forward(self.tok, self.pos)
        if self.feedback and self.next_token:  # argmax into tok and pos + 1 in one kernel
            next_token_(logits, self.tok, self.pos)
            return logits
        if self.feedback:
            self.tok.copy_(logits[:, -1:].argmax(-1))
        self.pos.add_(1)
        return logits


def check_next_token(logits) -> None:
    """The next-token kernel on a step's own logits against torch.argmax (the token and the position it advances),
    before the step is timed: LeanUnsupported naming both tokens where they differ."""
    tok, pos = torch.zeros(1, 1, dtype=torch.long, device=logits.device), torch.zeros(1, dtype=torch.long,
                                                                                       device=logits.device)
    want_tok, want_pos = tok.clone(), pos.clone()
    next_token_(logits, tok, pos)
    next_token_reference_(logits, want_tok, want_pos)
    if int(tok) != int(want_tok) or int(pos) != int(want_pos):
        raise LeanUnsupported(f"the next-token kernel gave token {int(tok)} (position + {int(pos)}) where "
                              f"torch.argmax gives {int(want_tok)} (position + {int(want_pos)})")
