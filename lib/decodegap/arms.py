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


REGISTRY: dict[str, Arm] = {a.key: a for a in (
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
    Arm("lean_fused_pdl_graph", "lean", "graph", ("fused", "attention", "pdl")),
    Arm("lean_fused_pdl_norm_graph", "lean", "graph", ("fused", "attention", "pdl", "norm_epilogue")),
    Arm("lean_fused_pdl_epilogues_graph", "lean", "graph",
        ("fused", "attention", "pdl", "norm_epilogue", "rotary_epilogue")),
    Arm("lean_fused_early_graph", "lean", "graph", ("fused", "attention", "pdl", "norm_epilogue", "early_trigger")),
    Arm("lean_fused_early_products_graph", "lean", "graph",
        ("fused", "attention", "pdl", "norm_epilogue", "early_products")),
)}

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
