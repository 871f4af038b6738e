"""The one decode-timing harness. One cell = (model, ctx, arm, attention backend, quant path).

Arms (all time the same step: one token through the HF model, argmax fed back as the next token):
  eager       HF forward with a static KV cache (StaticCache), positions as static device tensors.
  hf_default  HF forward with the default DynamicCache, positions derived by the model: what a user
              of `model(...)`/`generate` gets without asking for a static cache.
  graph       the eager step captured once in a CUDA graph (after warm-up on a side stream), replayed.
  compile     torch.compile(mode="reduce-overhead", fullgraph=True, dynamic=True) of model.forward, each
              decoder layer a nested compile region (COMPILE_LAYER_REGIONS); the
              first calls, which compile, are warm-up rows whose time is the compile time. With dynamic
              shapes the cache length is a symbolic size, so one compile per model and process serves
              every context (later contexts only record their CUDA graph); compiled per context, every
              cell pays a cold compile (the first warm-up row of each compile cell holds its time).
  lean, lean_graph, lean_compile
              the same step through decodegap.harness.lean.LeanDecoder (same config and weights, static KV cache,
              fused projections): eager, captured in a CUDA graph, and torch.compile'd (reduce-overhead;
              each lean.LeanLayer a nested compile region, as the HF layers of the compile arm). With the
              Triton attention (lean_attn_compile) the step reads only the live length, so one decoder per
              model, compiled once with a cache for the session's longest context, serves every context
              (COMPILE_ONCE_ARMS); lean_compile attends over its whole cache and compiles once per cell. The
              first warm-up row of a compile holds its time.
  lean_kernels, lean_kernels_graph
              the lean step with its projections and attention in decodegap.kernels.step (Triton GEMV,
              split-KV decode attention), eager and graphed.
  lean_attn_graph, lean_attn_compile
              the lean step with only its attention in decodegap.kernels.step (projections on cuBLAS, which the
              profiled steps of notebook 06 found faster than the Triton GEMV), graphed and torch.compile'd.
  lean_fused_graph, lean_fused_pdl_graph, lean_fused_pdl_norm_graph, lean_fused_pdl_epilogues_graph,
  lean_fused_early_graph, lean_fused_early_products_graph, lean_fused_merged_graph, lean_fused_silu_epilogue_graph,
  lean_fused_all_epilogues_graph, lean_fused_epilogue_norms_graph, lean_fused_next_token_graph,
  lean_fused_norms_next_token_graph, lean_fused_all_next_token_graph
              the lean step (T == 1) entirely in decodegap.kernels.fused.launch's kernels (norms, bias, rotary, cache write,
              residual adds and SiLU fused into the products; the split-KV attention), graphed; the second
              launches them with programmatic dependent launch (Hopper), the third also makes the
              post-attention norm in the o product's epilogue, the fourth the rotary and the cache write in the
              qkv product's too, the fifth is the third with every kernel triggering its dependents as it
              starts, the sixth with only the products another product follows doing so, the seventh the sixth
              with the split-KV attention in one kernel (its last program a kv head merges), the eighth the sixth
              with the MLP's SiLU(gate) * up in the gate_up product's epilogue (down then takes it with the
              residual alone, no prologue), the ninth the eighth with the rotary and the cache write in the qkv
              product's epilogue too and the final norm in the last down's (the LM head with no prologue), the
              tenth the ninth with each layer's input norm made in the previous down's epilogue too (every qkv
              but the first layer's with no prologue: every norm in an epilogue), the eleventh and twelfth the
              sixth and the tenth with the greedy next token (argmax into the token, the position advanced) in
              one kernel of the package's (decodegap.kernels.next_token) instead of torch's argmax, a copy and an
              add, checked against torch.argmax on the prefill's logits first, the thirteenth the ninth with that
              kernel too. bf16 and int4-triton
              models (the fused int4 step, decodegap.kernels.fused_int4: its four decoder products the int4
              GEMV with the same prologues and epilogues); another quantised or a non-bf16 model, or a GPU without
              PDL for the PDL arms, is `unavailable` with the reason.

Batch: a cell decodes `batch` sequences together (B different prompts of ctx tokens each, prompts.batch_prompt_ids;
every sequence at the same position), and a timed step is one step of all of them. The HF arms and the lean decoder
without custom kernels take any batch, and so does the split-KV attention kernel (the B sequences read as B x
kv_heads heads, arms.BATCH_KERNELS); the GEMVs and the fused step take one row, so their arms at batch > 1 are
`unavailable`, the reason naming the arm of the same runner that keeps only the kernels taking a batch
(arms.batch_fallback), which a batch sweep measures instead.

Protocol: prefill ctx random tokens with logits_to_keep=1; `warmup` untimed-for-summary steps (kept as
`warmup` rows, wall-clock); `steps` steps each timed with CUDA events (perf_counter on a CPU).
StaticCache (transformers 5.x) advances its write slot by one on *every* forward call whatever the
positions say, and SDPA attends over the whole preallocated cache (masked). So each cell gets its own
cache sized max_cache_len = ctx + every forward call the arm makes, and `pos` advances in step with the
cache's slot inside the step itself (also inside the graph).
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field
from typing import Callable

from decodegap import arms as _arms
from decodegap.arms import ARM_KERNELS, ARMS, COMPILED_ARMS, GRAPHED_ARMS, is_lean
from decodegap.harness.hf_attention import attention_context, attention_unavailable
from decodegap.prompts import batch_prompt_ids, teacher_token
from decodegap.timing import event_times_ms
GRAPH_SIDE_STREAM_WARMUP = 3  # eager calls on a side stream before capture (PyTorch's advice)
COMPILE_MIN_WARMUP = 3  # reduce-overhead needs a few calls to compile, warm up and record its graph
COMPILE_OPTIONS = dict(mode="reduce-overhead", fullgraph=True, dynamic=True)  # see the module docstring
COMPILE_LAYER_REGIONS = True
"""Whether the compile arm marks the HF model's decoder-layer class a nested compile region
(torch.compiler.nested_compile_region): dynamo then traces one layer and stamps it out for the others, and
inductor compiles that layer's kernels once, still into one graph of the whole step (fullgraph; one CUDA graph).
The compile times with and without it (data/diagnostics/ for a CPU, ab.csv against ab_whole_model.csv on a GPU)
and the step times it gives (kernels do not fuse across a layer boundary) are compared by notebook 02
(`ab.compile_settings_compared`). Each run records the setting in env.json (`compile_settings`)."""

RECOMPILE_LIMIT = 64  # dynamo recompiles allowed per code object (its default, 8, is too few for the lean arms)
_REGION_CLASSES: set = set()


def compile_settings() -> dict:
    """The compile arm's settings as they apply in this process (recorded with every run in env.json)."""
    import torch

    regions = COMPILE_LAYER_REGIONS and hasattr(torch.compiler, "nested_compile_region")
    return dict(COMPILE_OPTIONS, specialize_float=True, layer_regions=regions)


def mark_layer_regions(layers) -> None:
    """Mark the forward of each class among `layers` a nested compile region (once per class and process;
    outside torch.compile a marked forward runs as before, through a thin wrapper).
    A torch without nested_compile_region leaves them unmarked (compile_settings says so)."""
    import torch

    if not compile_settings()["layer_regions"]:
        return
    for cls in dict.fromkeys(type(layer) for layer in layers):
        if cls not in _REGION_CLASSES:
            cls.forward = torch.compiler.nested_compile_region(cls.forward)
            _REGION_CLASSES.add(cls)


def compiled(fn, layers=(), **overrides):
    """`fn` under torch.compile with COMPILE_OPTIONS (the compile and lean_compile arms; `overrides` for
    the CPU tests' backends), the module classes of `layers` (the HF model's decoder layers) marked nested
    compile regions (COMPILE_LAYER_REGIONS). It also sets dynamo's process-wide `specialize_float`: with
    dynamic=True dynamo otherwise makes the step's Python floats (RMSNorm eps, rotary and attention scales:
    constants) symbolic, then throws that trace away and traces the whole model again with them specialized,
    which doubles the trace (measured on the CPU with a 32-layer Llama: the trace times with and without it, and
    with static shapes, are the rows of data/diagnostics/compile_trace_cpu.csv at commit 9e23713, made by
    bench/compile_trace_cpu.py, in git history at d764dd2)."""
    import torch

    torch._dynamo.config.specialize_float = True
    # Each lean decoder (one per cell) is a new module to dynamo, so a session of more compiled lean cells than
    # dynamo's default recompile limit fails (fullgraph); each is a compile anyway.
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    mark_layer_regions(layers)
    return torch.compile(fn, **{**COMPILE_OPTIONS, **overrides})


class ArmUnavailable(RuntimeError):
    """This arm cannot run here (no CUDA device, say); the reason becomes an `unavailable` row."""


@dataclass
class ArmTiming:
    """What one arm of one cell produced. Times in milliseconds, one entry per call (a step of all `batch`
    sequences)."""

    arm: str
    ctx: int
    max_cache_len: int
    batch: int = 1
    warmup_ms: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    logits: list = field(default_factory=list)  # per call, only when keep_logits=True


def forward_calls(arm: str, warmup: int, steps: int) -> int:
    """Forward calls an arm makes after prefill: each consumes one static-cache slot. The compile arm
    warms up at least COMPILE_MIN_WARMUP times; the graph arm adds its side-stream warm-up."""
    if arm in COMPILED_ARMS:
        warmup = max(warmup, COMPILE_MIN_WARMUP)
    extra = GRAPH_SIDE_STREAM_WARMUP if arm in GRAPHED_ARMS else 0
    return extra + warmup + steps


def max_cache_len(arm: str, ctx: int, warmup: int, steps: int) -> int:
    """Static-cache length of a cell: its context plus every forward call of the arm."""
    return ctx + forward_calls(arm, warmup, steps)


def _is_cuda(model) -> bool:
    return next(model.parameters()).device.type == "cuda"


def _sync(cuda: bool) -> None:
    if cuda:
        import torch

        torch.cuda.synchronize()


def wall_calls(fn: Callable[[], object], n: int, cuda: bool, keep: list | None = None) -> list[float]:
    """Warm-up calls, each timed by wall clock with a device sync (so compile time is seen whole)."""
    times = []
    for _ in range(n):
        _sync(cuda)
        t0 = time.perf_counter()
        out = fn()
        _sync(cuda)
        times.append((time.perf_counter() - t0) * 1e3)
        if keep is not None:
            keep.append(out.detach().float().clone())
    return times


class StaticStep:
    """Prefilled static-cache decode state of `batch` sequences; `step()` decodes one token of each and returns
    their logits [batch, 1, V]."""

    def __init__(self, model, ctx: int, cache_len: int, seed: int = 0, forward=None, feedback: bool = True,
                 batch: int = 1):
        import torch
        from transformers import StaticCache

        device = next(model.parameters()).device
        self.model, self.forward, self.feedback = model, forward or model.forward, feedback
        self.cache = StaticCache(config=model.config, max_cache_len=cache_len)  # its batch: the prefill's
        ids = batch_prompt_ids(model.config.vocab_size, ctx, device, seed, batch)
        out = model(ids, past_key_values=self.cache, use_cache=True, logits_to_keep=1)
        self.tok = out.logits[:, -1:].argmax(-1)  # [batch, 1], static: updated in place
        self.pos = torch.full((batch, 1), ctx, dtype=torch.long, device=device)

    def step(self):
        logits = self.forward(input_ids=self.tok, past_key_values=self.cache, position_ids=self.pos,
                              use_cache=True).logits
        if self.feedback:
            self.tok.copy_(logits[:, -1:].argmax(-1))
        self.pos.add_(1)  # the cache's write slot advanced by one in the forward: keep RoPE in step
        return logits


class DynamicStep:
    """HF's default: a DynamicCache that grows by concatenation, positions derived by the model."""

    def __init__(self, model, ctx: int, seed: int = 0, feedback: bool = True, batch: int = 1):
        from transformers import DynamicCache

        device = next(model.parameters()).device
        self.model, self.feedback = model, feedback
        self.cache = DynamicCache(config=model.config)
        ids = batch_prompt_ids(model.config.vocab_size, ctx, device, seed, batch)
        out = model(ids, past_key_values=self.cache, use_cache=True, logits_to_keep=1)
        self.tok = out.logits[:, -1:].argmax(-1)

    def step(self):
        logits = self.model(input_ids=self.tok, past_key_values=self.cache, use_cache=True).logits
        if self.feedback:
            self.tok.copy_(logits[:, -1:].argmax(-1))
        return logits


def step_state(model, arm: str, ctx: int, cache_len: int, seed: int = 0, feedback: bool = True, batch: int = 1,
               **compile_overrides):
    """The prefilled decode state whose `step()` an arm runs (a graphed arm captures this step later):
    DynamicStep for hf_default; LeanStep for the lean arms (with the Triton kernels of ARM_KERNELS, compiled
    for the compiled ones); StaticStep otherwise, its forward compiled for compile. `compile_overrides` go to
    torch.compile for a compiled arm (profile.kernel_profile: mode=None, the same kernels without the CUDA graph).
    `batch`: the sequences decoded together (the module docstring)."""
    if arm == "hf_default":
        return DynamicStep(model, ctx, seed, feedback, batch)
    if is_lean(arm):
        from decodegap.harness.lean import LeanStep

        kernels = ARM_KERNELS.get(arm, ())
        shared = arm in COMPILE_ONCE_ARMS and not compile_overrides and batch == 1
        entry = _COMPILED_ONCE.get((arm, cache_len)) if shared else None
        if entry is not None and entry[0]() is model:  # this model's compiled decoder: prefill it again
            state = LeanStep(model, ctx, cache_len, seed, feedback=feedback, custom_kernels=kernels, lean=entry[1])
            state.forward = entry[2]
            return state
        state = LeanStep(model, ctx, cache_len, seed, feedback=feedback, custom_kernels=kernels, batch=batch)
        if arm in COMPILED_ARMS:  # the Triton attention's grid and split come from the cache length in Python:
            from decodegap.kernels.step import prepare

            prepare(kernels)
            state.forward = compiled(state.lean, layers=state.lean.layers,  # static shapes for it
                                     **{"dynamic": not kernels, **compile_overrides})
            if shared:
                _COMPILED_ONCE[(arm, cache_len)] = (weakref.ref(model), state.lean, state.forward)
        return state
    forward = compiled(model.forward, layers=model.model.layers, **compile_overrides) if arm in COMPILED_ARMS else None
    return StaticStep(model, ctx, cache_len, seed, forward=forward, feedback=feedback, batch=batch)


COMPILE_ONCE_ARMS = tuple(k for k, a in _arms.REGISTRY.items()
                          if a.decoder == "lean" and a.runner == "compile" and "attention" in a.kernels)
"""Compiled arms whose step does not depend on the cache's length: the lean decoder with the split-KV attention,
which reads the live length (kernels.decode_attention). One compiled decoder per model, cache length and process
serves every context a session gives it that length for (shared_cache_lens); the first cell's first warm-up row
holds the compile time, later cells only prefill. The other compiled arms attend over the whole cache (SDPA under a
mask), so their cache is the context's own."""
_COMPILED_ONCE: dict = {}  # (arm, cache_len) -> (weakref to the HF model, its LeanDecoder, the compiled forward)


def shared_cache_lens(cells, warmup: int, steps: int) -> dict[str, int]:
    """{arm: cache length} for the COMPILE_ONCE_ARMS among `cells` ((arm, ctx) pairs of one model): the longest
    cache any of that arm's cells needs, so that one compile serves them all."""
    lens: dict[str, int] = {}
    for arm, ctx in cells:
        if arm in COMPILE_ONCE_ARMS:
            lens[arm] = max(lens.get(arm, 0), max_cache_len(arm, ctx, warmup, steps))
    return lens


def release_compiled() -> None:
    """Forget every compiled decoder kept for COMPILE_ONCE_ARMS (their weights and caches), e.g. before the next
    model is built."""
    _COMPILED_ONCE.clear()


def arm_available(arm: str, model, batch: int = 1) -> str | None:
    """None when `arm` can run on the model's device at `batch` sequences, else the reason it cannot (an arm whose
    custom kernels take one row, at batch > 1: the reason names the arm measured instead, arms.batch_fallback)."""
    if arm not in ARMS:
        return f"unknown arm {arm!r}; known arms: {ARMS}"
    if batch > 1 and not _arms.takes_batch(arm):
        return _arms.one_row_reason(arm, batch)
    if (arm in GRAPHED_ARMS or arm in COMPILED_ARMS) and not _is_cuda(model):
        return ("CUDA graphs need a CUDA device" if arm in GRAPHED_ARMS else
                "compile uses mode='reduce-overhead' (CUDA graphs); on a CPU it would time something else")
    kernels = ARM_KERNELS.get(arm, ())
    if kernels:
        from decodegap.kernels.step import available

        device = "cuda" if _is_cuda(model) else "cpu"
        reason = available(device)
        if reason or "fused" not in kernels:
            return reason
        from decodegap.kernels.fused import launch as fused

        return fused.weights_unsupported(model, kernels) or ("pdl" in kernels and fused.pdl_unavailable(device)) or None
    return None


def run_arm(model, arm: str, ctx: int, warmup: int = 5, steps: int = 30, seed: int = 0,
            keep_logits: bool = False, feedback: bool = True, attn: str = "sdpa",
            cache_len: int | None = None, batch: int = 1) -> ArmTiming:
    """Prefill ctx tokens, then warm up and time `steps` decode steps of `arm`. See the module docstring.
    `feedback=False` feeds the same token (teacher_token) every step instead of the argmax (teacher forcing,
    for comparing arms: with random weights the argmax is near a tie and one flip makes two runs diverge).
    `cache_len` overrides the static cache's length (at least ctx + the arm's forward calls): verification
    uses the timing run's length so that a compiled arm is not compiled again for another shape. `batch`: the
    sequences decoded together (the module docstring); every timed call is one step of all of them."""
    import torch

    reason = unavailable_reason(arm, model, batch, attn)
    if reason:
        raise ArmUnavailable(reason)
    cuda = _is_cuda(model)
    if arm in COMPILED_ARMS:
        warmup = max(warmup, COMPILE_MIN_WARMUP)
    needed = max_cache_len(arm, ctx, warmup, steps)
    if cache_len is not None and cache_len < needed:
        raise ValueError(f"cache_len {cache_len} < {needed}: the {arm} arm makes {needed - ctx} forward calls after ctx {ctx}")
    cache_len = cache_len or needed
    result = ArmTiming(arm=arm, ctx=ctx, max_cache_len=cache_len, batch=batch)
    keep = result.logits if keep_logits else None
    with torch.inference_mode(), attention_context(attn):
        if arm == "hf_default":
            result.max_cache_len = ctx + warmup + steps  # what the dynamic cache grows to
        state = step_state(model, arm, ctx, cache_len, seed, feedback, batch)
        if not feedback:  # teacher forcing: one token for every arm, whatever its prefill's argmax
            state.tok.fill_(teacher_token(model.config.vocab_size, seed))
        fn = state.step
        if arm in GRAPHED_ARMS:
            from decodegap.harness.hf_attention import replay_hooks

            fn = _capture(state.step, keep, replay_hooks(model))
        result.warmup_ms = wall_calls(fn, warmup, cuda, keep)
        result.step_ms = event_times_ms(fn, steps, cuda, keep=keep)  # no host sync between steps
    del state
    return result


def _capture(step: Callable, keep: list | None, before_replay: tuple[Callable, ...] = ()) -> Callable:
    """Warm `step` up on a side stream, capture one call in a CUDA graph; return a replaying callable
    that runs the host callables `before_replay` (a kernel's per-step plan: hf_attention.replay_hooks), then the
    graph, and returns the graph's (static) logits."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(GRAPH_SIDE_STREAM_WARMUP):
            out = step()
            if keep is not None:
                keep.append(out.detach().float().clone())
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_logits = step()

    def replay():
        for hook in before_replay:
            hook()
        graph.replay()
        return static_logits

    replay.graph = graph  # keep the graph alive as long as the callable
    return replay


def _batch_attention(attn: str, batch: int) -> str | None:
    """Why `attn` cannot decode `batch` sequences here: the batch axis runs SDPA's default only (the attention
    backends of notebook 03 and the kernels in the HF model are measured at batch 1)."""
    if batch > 1 and attn != "sdpa":
        return f"attention backend {attn!r} is measured at batch 1 only; a batch of {batch} runs with sdpa"
    return None


def unavailable_reason(arm: str, model, batch: int = 1, attn: str = "sdpa") -> str | None:
    """Why `arm` with the attention `attn` cannot run on the model at `batch` sequences (arm_available, the batch's
    attention, hf_attention.attention_unavailable), else None."""
    return arm_available(arm, model, batch) or _batch_attention(attn, batch) or attention_unavailable(attn, arm, model)
