"""The decode arms as a registry: each arm is a decoder (the HF model or decodegap.harness.lean's), a runner (eager
calls, one CUDA graph replayed, or torch.compile) and the decodegap.kernels.step its step runs. Everything that asks
what an arm is (decode's harness, the byte layouts of a profile, notebook 06's plan, the figures) reads it here,
never from the arm's name."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Arm:
    """`decoder`: "hf" (the HF model's own forward) or "lean" (decodegap.harness.lean.LeanDecoder on the same weights);
    `runner`: "eager", "graph" (captured once with torch.cuda.graph after a side-stream warm-up, replayed) or
    "compile" (torch.compile, mode reduce-overhead); `kernels`: the decodegap.kernels.step the step runs
    (lean.CUSTOM_KERNELS); `cache`: "static" (StaticCache / the lean decoder's buffers) or "dynamic" (HF's
    default DynamicCache, positions derived by the model)."""

    key: str
    decoder: str
    runner: str
    kernels: tuple[str, ...] = ()
    cache: str = "static"

    @property
    def projection_layout(self) -> str:
        """The matrix products of one decoder layer (accounting.PROJECTIONS): the lean decoder fuses q/k/v and
        gate/up ("fused", four products), the HF model keeps seven ("hf")."""
        return "fused" if self.decoder == "lean" else "hf"


_BASE = (
    Arm("eager", "hf", "eager"),
    Arm("hf_default", "hf", "eager", cache="dynamic"),
    Arm("graph", "hf", "graph"),
    Arm("compile", "hf", "compile"),
    Arm("lean", "lean", "eager"),
    Arm("lean_graph", "lean", "graph"),
    Arm("lean_compile", "lean", "compile"),
    Arm("lean_kernels", "lean", "eager", ("gemv", "attention")),
    Arm("lean_kernels_graph", "lean", "graph", ("gemv", "attention")),
    Arm("lean_attn_graph", "lean", "graph", ("attention",)),
    Arm("lean_attn_compile", "lean", "compile", ("attention",)),
    Arm("lean_fused_graph", "lean", "graph", ("fused", "attention")),
)

FUSED_LEVERS = (
    # (key, parent, kernels added, kernels dropped): each fused-step lever is its parent with what it changes
    ("lean_fused_pdl_graph", "lean_fused_graph", ("pdl",), ()),
    ("lean_fused_pdl_norm_graph", "lean_fused_pdl_graph", ("norm_epilogue",), ()),
    ("lean_fused_pdl_epilogues_graph", "lean_fused_pdl_norm_graph", ("rotary_epilogue",), ()),
    ("lean_fused_early_graph", "lean_fused_pdl_norm_graph", ("early_trigger",), ()),
    ("lean_fused_early_products_graph", "lean_fused_pdl_norm_graph", ("early_products",), ()),
    ("lean_fused_merged_graph", "lean_fused_early_products_graph", ("merged_attention",), ()),
    ("lean_fused_silu_epilogue_graph", "lean_fused_early_products_graph", ("silu_epilogue",), ()),
    ("lean_fused_all_epilogues_graph", "lean_fused_silu_epilogue_graph", ("rotary_epilogue", "head_norm_epilogue"), ()),
    ("lean_fused_epilogue_norms_graph", "lean_fused_all_epilogues_graph", ("input_norm_epilogue",), ()),
    ("lean_fused_next_token_graph", "lean_fused_early_products_graph", ("next_token",), ()),
    ("lean_fused_norm_scale_graph", "lean_fused_early_products_graph",
     ("head_norm_epilogue", "input_norm_epilogue", "next_token", "norm_scale"), ()),
    ("lean_fused_kv_together_graph", "lean_fused_norm_scale_graph", ("kv_together",), ()),
    ("lean_fused_kv_together_merged_graph", "lean_fused_kv_together_graph", ("merged_attention",), ()),
    ("lean_fused_all_kv_together_graph", "lean_fused_epilogue_norms_graph", ("next_token", "norm_scale", "kv_together"),
     ()),
    ("lean_fused_rotary_attention_graph", "lean_fused_kv_together_graph", ("rotary_attention",), ()),
    ("lean_fused_all_rotary_attention_graph", "lean_fused_all_kv_together_graph", ("rotary_attention",),
     ("rotary_epilogue",)),
    ("lean_fused_rotary_prefetch_graph", "lean_fused_rotary_attention_graph", ("attention_prefetch",), ()),
    ("lean_fused_all_rotary_prefetch_graph", "lean_fused_all_rotary_attention_graph", ("attention_prefetch",), ()),
    ("lean_fused_l2_prefetch_graph", "lean_fused_kv_together_graph", ("l2_prefetch",), ()),
    ("lean_fused_all_l2_prefetch_graph", "lean_fused_all_kv_together_graph", ("l2_prefetch",), ()),
    ("lean_fused_all_norm_scale_graph", "lean_fused_epilogue_norms_graph", ("next_token", "norm_scale"), ()),
    ("lean_fused_all_next_token_graph", "lean_fused_all_epilogues_graph", ("next_token",), ()),
    ("lean_fused_norms_next_token_graph", "lean_fused_epilogue_norms_graph", ("next_token",), ()),
)
"""The fused step's levers (lean decoder, CUDA graph), each as its parent arm with kernels added and dropped
(lean.CUSTOM_KERNELS' names), in the order they were added to the package; a lever's kernels are its parent's
without the dropped ones, then the added ones (a set to the lean decoder: harness.lean.kernel_set)."""


def _levers(base, levers) -> dict[str, "Arm"]:
    """The registry: `base`, then each lever of `levers` (FUSED_LEVERS' form) from its parent, already registered."""
    registry = {a.key: a for a in base}
    for key, parent, add, drop in levers:
        kernels = registry[parent].kernels
        if key in registry or not set(drop) <= set(kernels) or set(add) & (set(kernels) - set(drop)):
            raise ValueError(f"lever {key}: registered twice, or drops {drop} / adds {add} against {parent}'s "
                             f"kernels {kernels}")
        registry[key] = Arm(key, "lean", "graph", tuple(k for k in kernels if k not in drop) + tuple(add))
    return registry


REGISTRY: dict[str, Arm] = _levers(_BASE, FUSED_LEVERS)

ARMS = tuple(REGISTRY)
GRAPHED_ARMS = tuple(k for k, a in REGISTRY.items() if a.runner == "graph")
COMPILED_ARMS = tuple(k for k, a in REGISTRY.items() if a.runner == "compile")
HF_ARMS = tuple(k for k, a in REGISTRY.items() if a.decoder == "hf")
LEAN_ARMS = tuple(k for k, a in REGISTRY.items() if a.decoder == "lean")
ARM_KERNELS = {k: a.kernels for k, a in REGISTRY.items() if a.kernels}


def projection_layout(arm: str) -> str:
    """Arm.projection_layout of a registered arm; an arm key this registry does not know (rows of an older
    package) is read by its decoder's prefix, `lean...` being the lean decoder."""
    known = REGISTRY.get(str(arm))
    if known is not None:
        return known.projection_layout
    return "fused" if str(arm).startswith("lean") else "hf"


def is_lean(arm: str) -> bool:
    """Whether the arm runs the lean decoder (projection_layout "fused")."""
    return projection_layout(arm) == "fused"


BATCH_KERNELS = ("attention",)
"""The custom kernels that take a batch: the split-KV attention reads B sequences decoded at the same positions as
B x kv_heads heads of one cache (decodegap.kernels.step.decode_attention on the flattened [B * Hkv, L, D] cache).
The GEMVs and the fused step take one row."""


def takes_batch(arm: str) -> bool:
    """Whether `arm` decodes several sequences together with its own kernels: it has none, or only BATCH_KERNELS."""
    return all(k in BATCH_KERNELS for k in REGISTRY[arm].kernels)


def batch_fallback(arm: str) -> str | None:
    """The arm a batch of several sequences measures in place of `arm` when some of its custom kernels take one row
    (the GEMVs and the fused step): the same decoder, runner and cache keeping those of its kernels that take a
    batch (BATCH_KERNELS), with cuBLAS products; where no arm keeps exactly those, the one without custom kernels.
    None for an arm that takes any batch itself (takes_batch)."""
    known = REGISTRY[arm]
    if takes_batch(arm):
        return None
    same = [a for a in REGISTRY.values()
            if a.decoder == known.decoder and a.runner == known.runner and a.cache == known.cache]
    keep = tuple(k for k in known.kernels if k in BATCH_KERNELS)
    return next(a.key for kernels in (keep, ()) for a in same if a.kernels == kernels)


def one_row_reason(arm: str, batch: int) -> str:
    """The `unavailable` reason of `arm` at `batch` sequences: some of its kernels take one row, and which arm is
    measured instead (batch_fallback)."""
    one_row = [k for k in REGISTRY[arm].kernels if k not in BATCH_KERNELS]
    fallback = batch_fallback(arm)
    kept = REGISTRY[fallback].kernels
    return (f"{arm}'s kernels ({', '.join(one_row)}) take one row; at batch {batch} its step is measured as "
            f"{fallback} (the same {REGISTRY[arm].runner} runner with cuBLAS products and "
            + (f"the {', '.join(kept)} kernel" if kept else "SDPA attention") + ")")
