"""The flash-attn family and FlashInfer inside the whole HF decode step: transformers attention functions for the
backend keys fa2, fa3 and flashinfer_paged, registered with transformers' AttentionInterface, so that
`models.build_model(spec, attn=hf_implementation(key))` and `python -m decodegap measure --attn KEY` run the
HF decode step with them, each checked against eager SDPA like every arm (checks.verify_arm).

The call. transformers 5.x's attention layers call
    fn(module, query, key, value, attention_mask, dropout=..., scaling=..., [sliding_window=...], **kwargs)
with query [1, Hq, S, D], key and value the layer's cache after this step's update ([1, Hkv, L, D]: the whole
static cache of L = max_cache_len positions, or all a dynamic cache holds) and kwargs holding position_ids [1, S];
it wants [1, S, Hq, D] back, and None for the weights (integrations/sdpa_attention.py).

The mask. A name registered only with AttentionInterface has no mask function (AttentionMaskInterface), so HF's
create_causal_mask returns None ("custom attention without equivalent mask creation", masking_utils): the step
builds no mask. The valid length comes from the positions: the query at position p attends to cache positions
0..p (decode.StaticStep keeps the positions in step with the cache's write slot).

The names. HF takes any implementation name containing "flash" for one of its own FlashAttention variants
(utils/generic.py is_flash_attention_requested: `"flash" in name`, then imports and checks of its own), so the
registered names (IN_MODEL) avoid the word.

FA2 and FA3: flash_attn_with_kvcache. The flash-attn family wants the cache as [B, L, Hkv, D]. `key.transpose(1, 2)`
is HF's cache in that shape as a view, strides (Hkv*L*D, D, L*D, 1): flash_attn_with_kvcache needs only the last
dimension contiguous and takes the row and head strides from the tensor (csrc/flash_attn/flash_api.cpp:
params.k_row_stride = k.stride(-3), params.k_head_stride = k.stride(-2); FA3's hopper/flash_api.cpp alike), so it
reads the cache in place: no copy, no extra bytes, each head's positions contiguous as HF stores them. The query's
transpose is a view as well, and the output comes back as [1, S, Hq, D], HF's layout. What the layout costs: nothing
beyond the views; what the call adds per layer is two tiny device ops turning the positions into int32 lengths
(cache_seqlens = position_ids[:, -1] + 1), with no host sync, so the step can be captured in a CUDA graph and each
replay attends over the length its positions have then. A prefill (S > 1) is the same call: flash-attn aligns the
causal mask to the bottom right, which for a prefill from an empty cache is the plain causal mask.

FlashInfer (decodegap.harness.paged_kv): its plan is host work that needs the length on the host, once per step for all
layers. The host keeps the length itself (no device read in a step): a prefill sets it from its positions (one
sync, untimed) and runs SDPA (causal, from an empty cache); each decode step adds one. In an eager step the first
layer plans; in a captured step the plan runs before each replay, outside the graph (`model.decodegap_before_replay`,
which decode's graph arms call), what FlashInfer's CUDA-graph users do; its host time is then part of the step.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Callable

from decodegap.arms import REGISTRY
from decodegap.harness import attention

STATE_ATTR = "decodegap_paged_step"  # on each attention module of a model that runs FlashInfer
REPLAY_HOOKS_ATTR = "decodegap_before_replay"  # on the model: host callables decode runs before each graph replay


@dataclass(frozen=True)
class InModel:
    """A backend that runs inside the HF model. `unavailable(device_type)` gives the reason it cannot run, or
    None; `paged`: it keeps a per-model PagedStep (prepare)."""

    key: str
    hf_name: str
    forward: Callable
    unavailable: Callable[[str], str | None]
    paged: bool = False


def _refuse_extras(dropout: float, sliding_window, softcap) -> None:
    if dropout or sliding_window is not None or softcap is not None:
        raise NotImplementedError(f"decode attention without dropout, sliding window or soft-cap only (got dropout "
                                  f"{dropout}, sliding_window {sliding_window}, softcap {softcap})")


def _positions(kwargs: dict):
    position_ids = kwargs.get("position_ids")
    if position_ids is None:
        raise ValueError("this attention function takes the valid cache length from position_ids, which HF passes "
                         "to every attention layer; none was given")
    return position_ids


def cache_seqlens(position_ids):
    """flash-attn's cache_seqlens of a batch-1 query ending at position p: p + 1, int32 on the device."""
    import torch

    return (position_ids[:, -1] + 1).to(torch.int32)


def kvcache_attention(kernel_of: Callable[[], Callable]) -> Callable:
    """An HF attention function calling `kernel_of()` as flash_attn_with_kvcache(q, k_cache, v_cache,
    cache_seqlens=, softmax_scale=, causal=True) on views of HF's tensors (module docstring)."""
    def forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, sliding_window=None,
                softcap=None, **kwargs):
        _refuse_extras(dropout, sliding_window, softcap)
        lens = cache_seqlens(_positions(kwargs))
        out = kernel_of()(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), cache_seqlens=lens,
                          softmax_scale=scaling, causal=True)
        return out, None

    return forward


@functools.cache
def _with_kvcache(modules: tuple[str, ...]) -> Callable:
    return attention._import(*modules).flash_attn_with_kvcache


def _needs(modules: tuple[str, ...]) -> Callable[[str], str | None]:
    def unavailable(device_type: str) -> str | None:
        if device_type != "cuda":
            return "needs a CUDA device"
        try:
            attention._import(*modules)
        except attention.BackendUnavailable as exc:
            return str(exc)
        return None

    return unavailable


def _capturing(query) -> bool:
    import torch

    return query.is_cuda and torch.cuda.is_current_stream_capturing()


class PagedStep:
    """FlashInfer's state for one model: the host-side cache length and one paged_kv.PagedDecode, shared by
    every layer. `wrapper_cls` stands in for FlashInfer's wrapper class (CPU tests)."""

    def __init__(self, config, wrapper_cls=None):
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.heads = (config.num_attention_heads, config.num_key_value_heads, head_dim)
        self.wrapper_cls, self.decode, self.kv_len = wrapper_cls, None, 0

    def _ensure(self, query, key, scaling) -> None:
        """A PagedDecode for HF's cache `key` ([1, Hkv, L, D]); a new one, of twice the capacity, when L outgrows it."""
        from decodegap.harness.paged_kv import PagedDecode

        d = self.decode
        if d is None or key.shape[2] > d.capacity or d.dtype != query.dtype or d.device != query.device:
            capacity = max(key.shape[2], 2 * d.capacity if d is not None else 0)
            self.decode = PagedDecode(*self.heads, capacity, query.device, query.dtype, scaling,
                                      self.wrapper_cls or attention.flashinfer_wrapper_class())

    def advance(self) -> None:
        """One more token in the cache: plan the next step (host work; a graph arm calls it before each replay)."""
        if self.decode is None:
            raise RuntimeError("FlashInfer's step was never prepared: no prefill ran through this model")
        self.decode.plan(self.kv_len + 1)
        self.kv_len += 1

    def forward(self, module, query, key, value, scaling, position_ids):
        import torch.nn.functional as F

        first = module.layer_idx == 0
        if query.shape[2] > 1:  # a prefill, from an empty cache as every decodegap cell starts: SDPA, untimed
            n = query.shape[2]
            if first:
                start, last = (int(p) for p in position_ids[0, [0, -1]].tolist())
                if start != 0 or last != n - 1:
                    raise NotImplementedError(f"a prefill must start an empty cache (positions {start}..{last})")
                self._ensure(query, key, scaling)
                self.kv_len = n
            out = F.scaled_dot_product_attention(query, key[:, :, :n], value[:, :, :n], is_causal=True,
                                                 scale=scaling, enable_gqa=True)
            return out.transpose(1, 2)
        if first and not _capturing(query):
            self._ensure(query, key, scaling)
            self.advance()
        if self.decode is None:
            raise RuntimeError("FlashInfer's decode step ran before any plan (capture it after an eager step)")
        return self.decode.run(query, key, value).unsqueeze(1)


def paged_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, sliding_window=None,
                    softcap=None, **kwargs):
    """The HF attention function of flashinfer_paged: the model's PagedStep (prepare) does the work."""
    _refuse_extras(dropout, sliding_window, softcap)
    state = getattr(module, STATE_ATTR, None)
    if state is None:
        raise RuntimeError("FlashInfer's attention needs its per-model state: build the model with "
                           "models.build_model, or call decodegap.harness.hf_attention.prepare(model)")
    return state.forward(module, query, key, value, scaling, _positions(kwargs)), None


def _flashinfer_unavailable(device_type: str) -> str | None:
    if device_type != "cuda":
        return "needs a CUDA device"
    try:
        attention.flashinfer_wrapper_class()
    except attention.BackendUnavailable as exc:
        return str(exc)
    return None


IN_MODEL: dict[str, InModel] = {e.key: e for e in (
    InModel("fa2", "decodegap_fa2_kvcache", kvcache_attention(lambda: _with_kvcache(attention.FA2_MODULES)),
            _needs(attention.FA2_MODULES)),
    InModel("fa3", "decodegap_fa3_kvcache", kvcache_attention(lambda: _with_kvcache(attention.FA3_MODULES)),
            _needs(attention.FA3_MODULES)),
    InModel("flashinfer_paged", "decodegap_fi_paged", paged_attention, _flashinfer_unavailable, paged=True),
)}
"""Backend key (decodegap.harness.attention.BACKENDS) -> how it runs inside the HF model."""


def by_hf_name(name: str) -> InModel | None:
    return next((e for e in IN_MODEL.values() if e.hf_name == name), None)


def register() -> None:
    """Register every IN_MODEL function under its name with transformers (idempotent; before building a model
    with one of the names, which HF checks against its registry)."""
    from transformers import AttentionInterface

    for entry in IN_MODEL.values():
        AttentionInterface.register(entry.hf_name, entry.forward)


def prepare(model, wrapper_cls=None) -> None:
    """Give a model built with a paged entry's name its PagedStep (each attention module, one shared state) and
    the hook decode's graph arms run before each replay. A no-op for the other implementations."""
    entry = by_hf_name(model.config._attn_implementation)
    if entry is None or not entry.paged:
        return
    state = PagedStep(model.config, wrapper_cls)
    for layer in model.model.layers:
        setattr(layer.self_attn, STATE_ATTR, state)
    setattr(model, REPLAY_HOOKS_ATTR, (state.advance,))


def replay_hooks(model) -> tuple[Callable, ...]:
    """What decode runs on the host before each replay of a graph of `model`'s step."""
    return tuple(getattr(model, REPLAY_HOOKS_ATTR, ()))


# ------------------------------------------------------------------ which attention runs inside the HF step

HF_IMPLEMENTATION = {"flex": "flex_attention"}
"""attn key -> HF attn_implementation, beside the kernels decodegap registers with HF (hf_attention.IN_MODEL: fa2,
fa3, flashinfer_paged: IN_MODEL); every other key (sdpa, sdpa_flash, ...) runs HF's "sdpa" path, with the forced SDPA backend
(if any) switched on around each step (and around the graph capture)."""

NOT_IN_MODEL = {
    "flashinfer": "single_decode_with_kv_cache attends one request's contiguous KV per call; inside the HF step "
                  "FlashInfer runs as flashinfer_paged (its batch decode wrapper over HF's cache)",
    "fa3_torch": "a per-layer backend only: torch's FA3 switch serves SDPA's FLASH backend, which takes no explicit "
                 "mask (see sdpa_flash); inside the HF step FlashAttention-3 runs as fa3",
}
"""Backend keys with no whole-step path, and why: their decode rows are `unavailable` instead of SDPA's."""

IN_MODEL_ARMS = tuple(k for k, a in REGISTRY.items() if a.decoder == "hf" and a.runner != "compile")
"""The arms that run hf_attention's kernels: the HF decoder, eager or graphed (the lean decoder runs its own
attention; a compiled arm would trace the kernels' Python calls, and FlashInfer's plan before each replay has no place
in torch.compile's CUDA graphs)."""


def hf_implementation(attn: str) -> str:
    """The `attn_implementation` an HF model is built with for attention backend key `attn`."""
    return IN_MODEL[attn].hf_name if attn in IN_MODEL else HF_IMPLEMENTATION.get(attn, "sdpa")


def attention_unavailable(attn: str, arm: str, model) -> str | None:
    """None when `arm` of `model` can run attention backend `attn` inside the HF step, else the reason: a key with
    no whole-step path, a model built for another backend, an arm that does not run the backend, or its package or
    device missing."""
    if attn in NOT_IN_MODEL:
        return NOT_IN_MODEL[attn]
    built, wanted = model.config._attn_implementation, hf_implementation(attn)
    if built != wanted:
        return f"the model was built with attn_implementation {built!r}; attention backend {attn!r} needs {wanted!r}"
    if attn in IN_MODEL:
        if arm not in IN_MODEL_ARMS:
            return f"{attn} runs inside the HF step in the arms {', '.join(IN_MODEL_ARMS)} only, not {arm}"
        return IN_MODEL[attn].unavailable("cuda" if next(model.parameters()).device.type == "cuda" else "cpu")
    return None


def attention_context(attn: str):
    """Context manager forcing the SDPA backend of keys like `sdpa_flash`; a no-op for the others."""
    forced = {"sdpa_flash": "FLASH_ATTENTION", "sdpa_efficient": "EFFICIENT_ATTENTION",
              "sdpa_cudnn": "CUDNN_ATTENTION", "sdpa_math": "MATH"}.get(attn)
    if forced is None:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(getattr(SDPBackend, forced))
