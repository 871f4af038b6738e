"""Weight-quantisation paths for batch-1 decode: one registry, availability with reasons, the swap of an HF
model's decoder linears for a path's layers quantised from the model's OWN bf16 weights, and the checks that
can fail (each layer against its dequantised weight at the decode and the prefill row counts, and its weights
against half its format's rounding step; the model against the bf16 model it was quantised from, within
MODEL_K_PASS x the null of its own format's rounding: quant.power derives it).

Paths (`PATHS`; the key is what the data's `quant` column holds):
  bf16            the baseline: torch F.linear on bf16 weights.
  bnb-nf4         bitsandbytes Linear4bit, quant_type nf4, blocksize 64, compute dtype bf16,
                  compress_statistics=False (HF BitsAndBytesConfig's default bnb_4bit_use_double_quant=False):
                  one fp32 absmax per 64-weight block; bitsandbytes quantises the weight itself.
  awq-marlin      AutoAWQ's WQLinear_Marlin (`marlin_cuda.mul`, IST-DASLab/marlin built by bench/build_marlin.sh):
                  symmetric int4, fp16 scales, no zeros.
  awq-triton      AutoAWQ's Triton GEMM (`awq_gemm_triton`, split-K 8): int4 with per-group zeros.
  awq             an alias, resolved where it runs (`resolve`) to awq-marlin where `marlin_cuda` is importable,
                  else awq-triton: the data always name the kernel that ran, never `awq` for a timed row.
  gptq-exllamav2  GPTQ tensors (no act-order, so no g_idx) through ExLlamaV2's `gemm_half_q_half`.
  int4-tinygemm   int4 weight-only through PyTorch's tinygemm ops (`aten._weight_int4pack_mm`, group size 128);
                  on a CPU the `_for_cpu` variants of the same ops.
  int4-triton     the package's own Triton int4 GEMV (decodegap.kernels.int4_gemv).
  int4-triton-head  int4-triton with the LM head quantised too, in the same format (as gpt-fast's int4 quantises
                  every nn.Linear, its output layer included). A tied head is untied: the head becomes an int4
                  layer of its own, the embedding table stays bf16.
The LM head stays bf16 in every other path (as HF's GPTQ, AWQ and bitsandbytes loaders leave it), the embedding
table and the norms in every path; otherwise only the seven nn.Linear of each decoder layer are replaced
(`QuantPath.quantises_head`). The formats and
their round-to-nearest are in quant.formats, the layers in quant.layers, the bytes they stream in quant.bytes.

Every quantised path but int4-tinygemm on a CPU needs a CUDA device and its package; a missing package,
a missing device or a refused shape raises `QuantUnavailable` with the reason (never a silent fallback).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Mapping

import torch
from torch import nn

from decodegap.quant import layers, loaders, power
from decodegap.accounting import HEAD_QUANTISED
from decodegap.quant.bytes import DEFAULT_GROUP_SIZE, LAYOUT_OF, decoder_linears
from decodegap.quant.layers import QuantLinear
from decodegap.quant.loaders import QuantUnavailable

QUANT_TOL = 2e-2
"""Layer check: largest max|y_layer - x W_deq^T| / max|x W_deq^T| accepted (fp32 reference from the weight read
back from the layer's own tensors), at the decode's one row and at the prefill's row count."""
WEIGHT_STD = 0.02  # std of the stand-in bf16 weight of a layer check (the models' initializer_range)
MODEL_TOL_FACTOR = 6.0
"""Superseded (the rows before the null, kept with the tolerance they were judged by): tolerance = MODEL_TOL_FACTOR
x quant.formats.rounding_error_bound, the asymmetric format's per-product noise, for every path; raised from 4 to 6
after the first H200 rows failed at 4 (claims rules QT's history)."""


# ----------------------------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class QuantPath:
    """A registered path. `layer` is its quant_layers class, built from a weight (`layer(weight, bias,
    group_size)`, QuantUnavailable for shapes it refuses); `layout` names its byte model (quant_bytes)."""

    key: str
    label: str
    kernel: str
    family: str
    layout: str
    cuda_only: bool
    packages: tuple[tuple[str, str], ...]  # (import name, distribution name)
    layer: type = field(repr=False)
    lm_head: str = "bf16 (not quantised)"

    @property
    def quantises_head(self) -> bool:
        """Whether the LM head is quantised too, as one more layer of the path's format (accounting.HEAD_QUANTISED)."""
        return self.key in HEAD_QUANTISED


PATHS: dict[str, QuantPath] = {p.key: p for p in (
    QuantPath("bf16", "bf16 (baseline)", "torch F.linear on bf16 weights (cuBLAS GEMV on a GPU)", "bf16", "bf16",
              False, (), layers.BF16Linear),
    QuantPath("bnb-nf4", "bitsandbytes nf4 (Linear4bit)", "bitsandbytes 4-bit GEMV (nf4, blocksize 64, fp32 absmax)",
              "bnb-nf4", "nf4", True, (("bitsandbytes", "bitsandbytes"),), layers.BnbNF4Linear),
    QuantPath("awq-marlin", "AutoAWQ + Marlin", "marlin_cuda.mul (Marlin, fp16, symmetric int4, G=128) up to 16 rows; "
              "prefill (> 16 rows): marlin_dequantise + matmul (fp16)", "awq",
              "marlin", True, (("awq", "autoawq"), ("marlin_cuda", "marlin_cuda")),
              layers.AWQMarlinLinear),
    QuantPath("awq-triton", "AutoAWQ + Triton GEMM", "awq_gemm_triton (split-K 8; prefill: awq_dequantize_triton + matmul)",
              "awq", "awq_gemm", True, (("awq", "autoawq"), ("triton", "triton")), layers.AWQTritonLinear),
    QuantPath("gptq-exllamav2", "GPTQ + ExLlamaV2", "exllamav2_ext.gemm_half_q_half (GPTQ, fp16, no act-order)",
              "gptq-exllamav2", "gptq", True, (("exllamav2", "exllamav2"),), layers.GPTQExllamaV2Linear),
    QuantPath("int4-tinygemm", "int4 weight-only (PyTorch tinygemm)",
              "aten._weight_int4pack_mm (CUDA, sm80+) / aten._weight_int4pack_mm_for_cpu (CPU), bf16",
              "int4-tinygemm", "tinygemm", False, (), layers.TinyGemmLinear),
    QuantPath("int4-triton", "int4 weight-only (decodegap Triton GEMV)",
              "decodegap.kernels.int4_gemv (Triton int4 GEMV, bf16, G=128; prefill: dequantise + matmul)",
              "int4-triton", "triton_int4", True, (("triton", "triton"),), layers.Int4TritonLinear),
    QuantPath("int4-triton-head", "int4 weight-only (decodegap Triton GEMV), LM head int4 too",
              "decodegap.kernels.int4_gemv (Triton int4 GEMV, bf16, G=128; prefill: dequantise + matmul), the LM head "
              "included", "int4-triton", "triton_int4", True, (("triton", "triton"),), layers.Int4TritonLinear,
              lm_head="int4 (the path's format, G=128)"),
)}

ALIASES = {"awq": ("awq-marlin", "awq-triton")}
"""An alias runs the first of its paths that is available here; its rows carry the concrete key."""

assert all(LAYOUT_OF[k] == p.layout for k, p in PATHS.items()), "quant_bytes.LAYOUT_OF and PATHS disagree"


def path(key: str) -> QuantPath:
    try:
        return PATHS[key]
    except KeyError:
        raise KeyError(f"unknown quantisation path {key!r}; known: {', '.join([*PATHS, *ALIASES])}") from None


def _device_type(device) -> str:
    return str(device).split(":")[0]


def _missing_packages(p: QuantPath) -> list[str]:
    out = []
    for module, dist in p.packages:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(f"package {dist} not installed" + (f" (module {module})" if module != dist else ""))
    return out


def unavailable_reason(key: str, device="cuda") -> str | None:
    """None when path `key` can run on `device`, else the reason. Cheap: imports nothing heavy on a CPU."""
    if key in ALIASES:
        reasons = {k: unavailable_reason(k, device) for k in ALIASES[key]}
        if any(r is None for r in reasons.values()):
            return None
        return "; ".join(f"{k}: {r}" for k, r in reasons.items())
    p = path(key)
    kind = _device_type(device)
    reasons = []
    if kind not in ("cpu", "cuda"):
        reasons.append(f"device type {kind!r} is not supported (cpu or cuda)")
    if p.cuda_only and kind != "cuda":
        reasons.append("needs a CUDA device (CUDA-only kernel)")
    reasons += _missing_packages(p)
    if key == "int4-tinygemm":
        ops = ("_convert_weight_to_int4pack_for_cpu", "_weight_int4pack_mm_for_cpu") if kind == "cpu" else \
              ("_convert_weight_to_int4pack", "_weight_int4pack_mm")
        lacking = [op for op in ops if not hasattr(torch.ops.aten, op)]
        if lacking:
            reasons.append(f"torch {torch.__version__} has no aten.{' / aten.'.join(lacking)}")
    if reasons:
        return "; ".join(reasons)
    if kind == "cuda":
        return _cuda_probe(key, device)
    return None


def _cuda_probe(key: str, device) -> str | None:
    """Device and import checks that need the GPU machine (architecture, binary extensions, JIT builds)."""
    if not torch.cuda.is_available():
        return "needs a CUDA device (torch.cuda.is_available() is False)"
    major, minor = torch.cuda.get_device_capability(torch.device(device))
    if key in ("int4-tinygemm", "awq-marlin") and major < 8:
        return f"needs sm80 or newer; this GPU is sm{major}{minor}"
    try:
        if key == "bnb-nf4":
            import bitsandbytes  # noqa: F401
        elif key == "awq-marlin":
            importlib.import_module("marlin_cuda")
            loaders.awq_module("modules/linear/marlin.py")
        elif key == "awq-triton":
            importlib.import_module("triton")
            loaders.awq_module("modules/triton/gemm.py")
        elif LAYOUT_OF[key] == "triton_int4":  # int4-triton, and int4-triton-head: the same kernel
            from decodegap.kernels.int4_gemv import layer as int4_layer  # noqa: F401  (the layer imports here)
            importlib.import_module("triton")
        elif key == "gptq-exllamav2":
            loaders.exllamav2()
    except QuantUnavailable as exc:
        return str(exc)
    except Exception as exc:  # ImportError, a broken binary extension, a failed JIT build
        return f"import failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def resolve(key: str, device="cuda") -> str:
    """The concrete path an alias runs here (awq -> awq-marlin where marlin_cuda imports, else awq-triton);
    a concrete key is returned as is. An alias with no available path stays the alias (its rows are
    `unavailable` with every member's reason)."""
    if key not in ALIASES:
        path(key)
        return key
    for member in ALIASES[key]:
        if unavailable_reason(member, device) is None:
            return member
    return key


def require(key: str, device) -> QuantPath:
    """The registry entry of a concrete, available path; QuantUnavailable with the reason otherwise."""
    reason = unavailable_reason(key, device)
    if reason:
        raise QuantUnavailable(f"{key}: {reason}")
    if key in ALIASES:
        key = resolve(key, device)
    return path(key)


# -------------------------------------------------------------------------------- build, check, swap

def _reference_key(path_key: str) -> str:
    """The concrete path a reference (CPU stand-in) build of `path_key` uses: an alias's last member."""
    return ALIASES[path_key][-1] if path_key in ALIASES else path(path_key).key


def build_linear(path_key: str, in_features: int, out_features: int, device="cuda", seed: int = 0,
                 group_size: int = DEFAULT_GROUP_SIZE, bias=None, weight=None, reference: bool = False) -> QuantLinear:
    """A quantised layer of path `path_key` for an nn.Linear(in_features, out_features), quantised from `weight`
    [N, K] (by default a stand-in bf16 weight, N(0, WEIGHT_STD), seeded). `reference=True` builds the path's
    tensors with the reference product instead of its kernel (CPU tests; never timed). Raises QuantUnavailable
    with the reason when it cannot run here."""
    p = path(_reference_key(path_key)) if reference else require(path_key, device)
    if weight is None:
        gen = torch.Generator(device=device).manual_seed(int(seed))
        weight = torch.empty(out_features, in_features, device=device, dtype=torch.bfloat16).normal_(
            0.0, WEIGHT_STD, generator=gen)
    kwargs = dict(reference=True) if reference else {}
    with torch.no_grad():
        return p.layer.from_weight(weight, bias, group_size, **kwargs)


def check_linear(path_key: str, in_features: int, out_features: int, device="cuda", tol: float = QUANT_TOL,
                 seed: int = 0, group_size: int = DEFAULT_GROUP_SIZE, rows=(1,), reference: bool = False) -> dict:
    """Build one layer (build_linear) and compare its output on random x [M, K] (bf16, N(0, 1)) for each M in
    `rows` with x @ dequantised_weight().T computed in fp32: max|y - ref| / max|ref|. Returns {M: error}; the
    caller judges each against `tol` (a NaN or infinite error fails: `passes`). Raises QuantUnavailable."""
    from decodegap.compare import max_relative_error

    layer = build_linear(path_key, in_features, out_features, device, seed, group_size, reference=reference)
    gen = torch.Generator().manual_seed(seed + 1)
    w = layer.dequantised_weight(torch.float32)
    errors = {}
    with torch.no_grad():
        for m in rows:
            x = torch.randn(m, in_features, generator=gen).to(device=device, dtype=torch.bfloat16)
            y = layer(x)
            if tuple(y.shape) != (m, out_features) or y.dtype != torch.bfloat16:
                raise AssertionError(f"{path_key} {in_features}x{out_features}: output {tuple(y.shape)} {y.dtype}, "
                                     f"expected ({m}, {out_features}) bfloat16")
            ref = x.float() @ w.t()
            if layer.bias is not None:
                ref = ref + layer.bias.float()
            errors[int(m)] = max_relative_error(y.float(), ref)
    del layer, w
    return errors


def passes(err: float, tol: float) -> bool:
    """A check passes when its error is finite and within `tol` (NaN and inf fail)."""
    return bool(err == err and abs(err) != float("inf") and err <= tol)


def rounding_bound(model, path_key: str, group_size: int | None = None) -> float:
    """The largest per-product rounding noise eps of path `path_key`'s own format over the model's bf16 decoder
    linears (quant.power.predicted_eps: sqrt(mean D^2 / 12) / rms(W), D the format's step)."""
    G = group_size or default_group_size(model.config.to_dict())
    return max(power.predicted_eps(path_key, mod.weight, power.group_size_of(path_key, G))
               for layer in model.model.layers for mod in layer.modules() if isinstance(mod, nn.Linear))


def default_group_size(config: Mapping) -> int:
    """DEFAULT_GROUP_SIZE (128) where it divides every layer's in_features (all three 7-8B models); for
    the tiny CPU-test configs (dims 64/128) the largest of 64, 32 that does. Stated wherever it is used."""
    ks = {k for _, k, _, _ in decoder_linears(config)}
    for g in (DEFAULT_GROUP_SIZE, 64, 32):
        if all(k % g == 0 for k in ks):
            return g
    raise ValueError(f"no int4 group size divides every in_features {sorted(ks)}")


LAYERS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")
"""The linear layers of a decoder step, in order: the seven of each decoder layer, then the LM head."""


def layer_shapes(config: Mapping) -> dict[str, tuple[int, int]]:
    """layer name -> (K, N) for the seven decoder linears and the LM head."""
    out = {name: (k, n) for name, k, n, _ in decoder_linears(config)}
    out["lm_head"] = (config["hidden_size"], config["vocab_size"])
    return out


def quantise_model_(model, path_key: str, group_size: int | None = None, reference: bool = False,
                    checks: tuple[int, ...] | None = None, seed: int = 0) -> dict:
    """Replace every nn.Linear of the decoder layers (q/k/v/o_proj, gate/up/down_proj) of an HF causal LM by
    path `path_key`'s layer quantised from that linear's own weight (its bias kept), and the LM head too where the
    path quantises it (`QuantPath.quantises_head`: `_quantise_head`); the embedding and norms stay bf16. `awq` resolves to the kernel available here. `group_size` None: 128, or for the tiny test
    configs the largest of 64/32 dividing their dims (`default_group_size`). `reference=True`: the reference
    product instead of the kernel (CPU tests). Returns what was done: path (concrete key), kernel, layers
    replaced, group size, LM head dtype, weights. Raises QuantUnavailable (before touching the model) when the
    path cannot run here.

    `checks` (row counts, () for the format check alone; None: none) checks every layer as it is built, against
    the bf16 weight it replaces: the elementwise format check (quant.power.format_check: |W_deq - W| against half
    the format's step) and, for each M of `checks`, its output on x [M, K] (N(0, 1), bf16, seeded by `seed`, K
    and M) against x @ W_deq^T in fp32 (the layer check, QUANT_TOL). info["checks"] then holds, per linear name
    (q_proj ... down_proj, and lm_head where the head is quantised), the worst over the decoder layers: {"format": (ratio, share past FORMAT_TOL, layer),
    "rows": {M: (error, layer)}, "layers": how many}."""
    first = next(model.parameters())
    device = first.device
    if reference:
        key = _reference_key(path_key)
        p = path(key)
    else:
        key = resolve(path_key, device)
        p = require(key, device)
    config = model.config.to_dict()
    G = group_size or default_group_size(config)
    info = dict(path=key, requested=path_key, kernel="reference (x @ W_deq^T, not the kernel)" if reference else p.kernel,
                group_size=G if key not in ("bf16", "bnb-nf4") else None, lm_head=p.lm_head, layers=0,
                weights=WEIGHTS)
    if key == "bf16":
        return info
    if p.quantises_head and type(model.lm_head) is not nn.Linear:  # refused before any layer is replaced
        raise ValueError(f"{key} quantises the LM head, an nn.Linear; this model's is {type(model.lm_head).__name__}")
    extra = dict(reference=True) if reference else {}
    inputs: dict = {}
    if checks is not None:
        info["checks"] = {}
    with torch.no_grad():
        for index, layer in enumerate(model.model.layers):
            targets = [(name, mod) for name, mod in layer.named_modules() if isinstance(mod, nn.Linear)]
            for name, mod in targets:
                parent = layer.get_submodule(name.rsplit(".", 1)[0]) if "." in name else layer
                new = p.layer.from_weight(mod.weight, mod.bias, G, **extra)
                if checks is not None:
                    _check_layer(info["checks"], name.rsplit(".", 1)[-1], index, key, mod.weight, new, G, checks,
                                 inputs, seed)
                setattr(parent, name.rsplit(".", 1)[-1], new)
                del mod
                info["layers"] += 1
        if p.quantises_head:
            _quantise_head(model, p, key, G, extra, info, inputs, checks, seed)
    inputs.clear()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    model.decodegap_quant = info
    return info


def _quantise_head(model, p: QuantPath, key: str, G: int, extra: dict, info: dict, inputs: dict, checks,
                   seed: int) -> None:
    """quantise_model_'s LM head for a path that quantises it (`quantises_head`): model.lm_head replaced by the path's
    layer quantised from the head's own bf16 weight (for tied embeddings the shared table: the head is untied, the
    embedding keeps the bf16 table), checked as the decoder linears are (`checks`, under the name lm_head)."""
    head = model.lm_head
    new = p.layer.from_weight(head.weight, head.bias, G, **extra)
    if checks is not None:
        _check_layer(info["checks"], "lm_head", 0, key, head.weight, new, G, checks, inputs, seed)
    model.lm_head = new
    info["layers"] += 1
    info["head_untied"] = head.weight is model.get_input_embeddings().weight


def _check_layer(out: dict, name: str, index: int, key: str, weight, layer, G: int, rows, inputs: dict,
                 seed: int) -> None:
    """quantise_model_'s checks of one layer (its docstring), kept as the worst so far of `name` in `out`."""
    from decodegap.compare import max_relative_error

    deq = layer.dequantised_weight(torch.float32)
    fc = power.format_check(key, weight, deq, power.group_size_of(key, G))
    entry = out.setdefault(name, {"format": (-1.0, 0.0, -1), "rows": {}, "layers": 0})
    entry["layers"] += 1
    if entry["format"][0] == entry["format"][0] and not fc["ratio_max"] <= entry["format"][0]:  # a NaN stays
        entry["format"] = (fc["ratio_max"], fc["frac_past"], index)
    K = weight.shape[1]
    for m in rows:
        if (K, m) not in inputs:
            gen = torch.Generator(device=weight.device).manual_seed(int(seed) * 7919 + K + 1000003 * int(m))
            inputs[(K, m)] = torch.randn(int(m), K, generator=gen, device=weight.device).to(torch.bfloat16)
        x = inputs[(K, m)]
        ref = x.float() @ deq.t()
        if layer.bias is not None:
            ref = ref + layer.bias.float()
        err = max_relative_error(layer(x).float(), ref)
        best = entry["rows"].get(int(m), (-1.0, -1))
        if best[0] == best[0] and not err <= best[0]:  # a NaN stays the answer
            entry["rows"][int(m)] = (err, index)
        del ref
    del deq


WEIGHTS = "rtn from the model's bf16 weights"
"""What a quantised run's weights are (env.json `quant_weights`). Runs without that field drew codes, scales and
zeros of their own (superseded: their whole-model checks could not see a wrong format; records.SYNTHESISED)."""
