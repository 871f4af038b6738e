"""Decode attention backends: one registry, availability probing, correctness against the math backend,
and the per-layer microbenchmark timed two ways.

A decode-attention call at batch 1 is one query token against the KV cache of one layer:
q [1, Hq, 1, D] and k, v [1, Hkv, L, D] (HF's layout), GQA with Hq = g * Hkv. Each backend adapts that
to its own layout outside the timed call. A backend that cannot run here (package missing, wrong
architecture or dtype, GQA shape refused) reports the reason and becomes an `unavailable` row.

Timings (microseconds per call):
  host  eager loop of calls, wall clock over the loop with one sync at the end: host dispatch included,
        what the paper's per-layer table measures;
  gpu   the same calls captured in one CUDA graph and replayed, CUDA events: the kernels alone.
"""

from __future__ import annotations

import contextlib
import importlib
import time
import warnings
from dataclasses import dataclass
from typing import Callable

REFERENCE = "sdpa_math"
FA2_MODULES = ("flash_attn",)  # the flash-attn package (bench/build_flash_attn.sh builds its extension trimmed)
FA3_MODULES = ("fa3_fwd_interface", "flash_attn_interface")  # the fa3-fwd wheel's module, FlashAttention-3's own
NO_KERNEL = "No available kernel"  # what SDPA raises when the forced backend refuses the call
NO_KERNEL_REASON = ("SDPA has no kernel of this backend for the HF model's call (torch 2.11: FLASH takes no "
                    "explicit attention mask, which HF passes with a static cache; EFFICIENT takes no GQA)")


@dataclass(frozen=True)
class Shape:
    """One model's decode-attention shape."""

    model: str
    q_heads: int
    kv_heads: int
    head_dim: int

    @classmethod
    def from_config(cls, model: str, config) -> "Shape":
        from decodegap import accounting

        return cls(model, config["num_attention_heads"], config["num_key_value_heads"], accounting.head_dim(config))


@dataclass(frozen=True)
class Backend:
    """A registered backend. `prepare(q, k, v)` returns a zero-argument callable that runs one decode
    attention call and returns the output as [1, Hq, 1, D]; it raises BackendUnavailable with the reason.
    `scope()` is the context a forced backend needs (SDPA's `sdpa_kernel`, torch's FA3 switch): entered
    once around preparing, checking and timing, never inside the timed call, so that the host-inclusive
    time is the kernel's dispatch and not the context switch's."""

    key: str
    label: str
    family: str
    prepare: Callable
    scope: Callable = contextlib.nullcontext


class BackendUnavailable(RuntimeError):
    """The backend cannot run here; the message is the reason recorded in the data."""


def _sdpa_scope(backend_name: str):
    def scope():
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel(getattr(SDPBackend, backend_name))

    return scope


def _sdpa(expand_kv: bool = False):
    """SDPA as called by HF (GQA through enable_gqa); the backend it runs is the Backend's scope."""
    def prepare(q, k, v):
        import torch.nn.functional as F

        if expand_kv:  # the efficient kernel has no GQA: K/V expanded once, outside the timed call
            g = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        gqa = not expand_kv

        def call():
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)

        _probe(call)
        return call

    return prepare


def _probe(call) -> None:
    """Run `call` once; turn a refusal into BackendUnavailable carrying PyTorch's own reason."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call()
        except (RuntimeError, NotImplementedError, ValueError, TypeError, AssertionError) as exc:
            why = "; ".join(str(w.message).splitlines()[0] for w in caught if "because" in str(w.message))
            raise BackendUnavailable(f"{type(exc).__name__}: {str(exc).splitlines()[0]}" + (f" ({why})" if why else "")) from exc


def _import(*names: str):
    """The first importable module of `names`, else BackendUnavailable naming the packages."""
    errors = []
    for name in names:
        try:
            return importlib.import_module(name)
        except Exception as exc:  # ImportError, or a broken binary extension
            errors.append(f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    raise BackendUnavailable("package not importable (" + "; ".join(errors) + ")")


def flashinfer_wrapper_class():
    """flashinfer.BatchDecodeWithPagedKVCacheWrapper, or BackendUnavailable naming why it cannot be imported."""
    return _import("flashinfer").BatchDecodeWithPagedKVCacheWrapper


def _need_cuda(q) -> None:
    if q.device.type != "cuda":
        raise BackendUnavailable("needs a CUDA device")


def _flex(q, k, v):
    _need_cuda(q)
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    compiled = torch.compile(flex_attention, fullgraph=True)

    def call():
        return compiled(q, k, v, enable_gqa=True)

    _probe(call)
    return call


def _bshd(q, k, v):
    """HF [B, H, S, D] to the [B, S, H, D] layout of the flash-attn family (contiguous copies)."""
    return q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()


def trimmed_build_refusal(head_dim: int, dtype_name: str) -> str | None:
    """Why this machine's flash-attn build cannot take the call, or None. bench/build_flash_attn.sh compiles only
    the kernels decode needs (its record, `.ext/flash_attn_build.json`, names the head dims and dtypes; a record
    without them is the first trimmed build: head dim 128, bf16). A call outside them is refused here, never sent
    to the extension: on the H200 a head-dim-64 call into the trimmed build crashed the process (segmentation
    fault) instead of raising the build's own check."""
    from decodegap import hardware

    record = hardware.kernel_builds().get("flash_attn")
    if not isinstance(record, dict) or "trimmed" not in str(record.get("kernel", "")):
        return None
    head_dims, dtypes = record.get("head_dims", [128]), record.get("dtypes", ["bfloat16"])
    if head_dim not in head_dims or dtype_name not in dtypes:
        return (f"this trimmed flash-attn build (bench/build_flash_attn.sh) has head dim "
                f"{'/'.join(map(str, head_dims))} only and {'/'.join(dtypes)} only, not head dim {head_dim} "
                f"in {dtype_name}")
    return None


def _with_kvcache(module_names: tuple[str, ...]):
    def prepare(q, k, v):
        _need_cuda(q)
        import torch

        mod = _import(*module_names)
        refusal = trimmed_build_refusal(q.shape[-1], str(q.dtype).removeprefix("torch.")) \
            if module_names == FA2_MODULES else None
        if refusal:
            raise BackendUnavailable(refusal)
        qb, kb, vb = _bshd(q, k, v)
        seqlens = torch.full((1,), k.shape[2], dtype=torch.int32, device=q.device)

        def call():
            out = mod.flash_attn_with_kvcache(qb, kb, vb, cache_seqlens=seqlens)
            out = out[0] if isinstance(out, tuple) else out
            return out.transpose(1, 2)

        _probe(call)
        return call

    return prepare


@contextlib.contextmanager
def _fa3_torch_scope():
    """torch 2.11's SDPA flash backend switched to FlashAttention-3 (where an implementation is
    registered) and to the FLASH backend, restored on exit."""
    from torch.nn import attention as nn_attention

    try:
        nn_attention.activate_flash_attention_impl("FA3")
    except Exception as exc:
        raise BackendUnavailable(f"activate_flash_attention_impl('FA3') failed: {str(exc).splitlines()[0]}") from exc
    try:
        with _sdpa_scope("FLASH_ATTENTION")():
            yield
    finally:
        nn_attention.restore_flash_attention_impl()


def _fa3_torch(q, k, v):
    _need_cuda(q)
    return _sdpa()(q, k, v)


def _flashinfer(q, k, v):
    _need_cuda(q)
    mod = _import("flashinfer")
    q1 = q[0, :, 0, :].contiguous()  # [Hq, D]
    k1, v1 = k[0].transpose(0, 1).contiguous(), v[0].transpose(0, 1).contiguous()  # [L, Hkv, D]

    def call():
        return mod.single_decode_with_kv_cache(q1, k1, v1, kv_layout="NHD")[None, :, None, :]

    _probe(call)
    return call


def _flashinfer_paged(q, k, v):
    """FlashInfer's batch decode wrapper over HF's cache read in place as pages (decodegap.harness.paged_kv), planned once
    outside the timed call: the call is one layer's `run`, as in a decode step where every layer runs one plan."""
    _need_cuda(q)
    from decodegap.harness.paged_kv import PagedDecode

    decode = PagedDecode(q.shape[1], k.shape[1], q.shape[3], k.shape[2], q.device, q.dtype, None,
                         flashinfer_wrapper_class())
    decode.plan(k.shape[2])

    def call():
        return decode.run(q, k, v)[:, :, None, :]

    _probe(call)
    return call


BACKENDS: dict[str, Backend] = {b.key: b for b in (
    Backend("sdpa", "SDPA, dispatcher default", "SDPA", _sdpa()),
    Backend("sdpa_flash", "SDPA forced FLASH (PyTorch's FlashAttention-2 kernels: a proxy for flash-attn)", "FA2",
            _sdpa(), _sdpa_scope("FLASH_ATTENTION")),
    Backend("sdpa_efficient", "SDPA forced EFFICIENT (K/V expanded: no GQA)", "mem-efficient", _sdpa(True),
            _sdpa_scope("EFFICIENT_ATTENTION")),
    Backend("sdpa_cudnn", "SDPA forced cuDNN", "cuDNN", _sdpa(), _sdpa_scope("CUDNN_ATTENTION")),
    Backend("sdpa_math", "SDPA forced MATH (the reference)", "math", _sdpa(), _sdpa_scope("MATH")),
    Backend("flex", "FlexAttention (torch.compile, decode kernel)", "Flex", _flex),
    Backend("fa2", "FlashAttention-2 (flash-attn package)", "FA2", _with_kvcache(FA2_MODULES)),
    Backend("fa3", "FlashAttention-3 (fa3_fwd_interface / flash_attn_interface)", "FA3", _with_kvcache(FA3_MODULES)),
    Backend("fa3_torch", "FlashAttention-3 via torch activate_flash_attention_impl", "FA3", _fa3_torch,
            _fa3_torch_scope),
    Backend("flashinfer", "FlashInfer single_decode_with_kv_cache", "FlashInfer", _flashinfer),
    Backend("flashinfer_paged", "FlashInfer BatchDecodeWithPagedKVCacheWrapper (tensor cores, HF's cache as pages)",
            "FlashInfer", _flashinfer_paged),
)}


def backend(key: str) -> Backend:
    try:
        return BACKENDS[key]
    except KeyError:
        raise KeyError(f"unknown attention backend {key!r}; known: {', '.join(BACKENDS)}") from None


def decode_inputs(shape: Shape, ctx: int, device: str = "cuda", dtype=None, seed: int = 0):
    """Random q [1,Hq,1,D], k and v [1,Hkv,ctx,D] in bf16 (N(0,1)), the same for a given seed."""
    import torch

    dtype = dtype or torch.bfloat16
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(1, shape.q_heads, 1, shape.head_dim, generator=gen)
    k = torch.randn(1, shape.kv_heads, ctx, shape.head_dim, generator=gen)
    v = torch.randn(1, shape.kv_heads, ctx, shape.head_dim, generator=gen)
    return tuple(t.to(device=device, dtype=dtype) for t in (q, k, v))


def check(key: str, shape: Shape, ctx: int, device: str = "cuda", tol: float = 2e-2) -> tuple[Callable, float]:
    """Prepare backend `key` on random inputs and compare its output with the math backend's.
    Returns (call, max relative error); raises BackendUnavailable, or AssertionError past `tol`.
    Time `call` inside `backend(key).scope()`: outside it a forced SDPA backend is not forced."""
    from decodegap.compare import max_relative_error

    q, k, v = decode_inputs(shape, ctx, device)
    with backend(REFERENCE).scope():
        ref = backend(REFERENCE).prepare(q, k, v)().float()
    with backend(key).scope():
        call = backend(key).prepare(q, k, v)
        err = max_relative_error(call().float().reshape(ref.shape), ref)
    if err > tol:
        raise AssertionError(f"{key} on {shape.model} ctx {ctx}: output differs from math by {err:.3g} (> {tol})")
    return call, err


def time_host_us(call: Callable, calls: int = 200, warmup: int = 20, cuda: bool = True) -> float:
    """Host-inclusive microseconds per call: wall clock over an eager loop, one sync at the end."""
    import torch

    for _ in range(warmup):
        call()
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def time_gpu_us(call: Callable, calls: int = 100, replays: int = 5) -> list[float]:
    """GPU-only microseconds per call: `calls` calls captured in one CUDA graph, each replay timed with
    CUDA events (timing.graph_replay_ms, three warm-up calls first); one value per replay."""
    from decodegap.timing import graph_replay_ms

    def many():
        for _ in range(calls):
            call()

    def three():
        for _ in range(3):
            call()

    return [ms * 1e3 / calls for ms in graph_replay_ms(many, replays, warm=three)]
