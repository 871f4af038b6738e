"""Weight-quantisation paths for batch-1 decode: one registry, availability with reasons, quantised layers
built from SYNTHESISED weights in each path's own format (no checkpoint needed), a correctness check
against each layer's dequantised weight, the swap into an HF model, the fusion of int4-tinygemm layers
that read one input into one layer (`fuse_linears`: the lean decoder's q/k/v and gate/up), and the byte model.

Paths (`PATHS`; the key is what the data's `quant` column holds):
  bf16            the baseline: torch F.linear on bf16 weights.
  bnb-nf4         bitsandbytes Linear4bit, quant_type nf4, blocksize 64, compute dtype bf16,
                  compress_statistics=False (HF BitsAndBytesConfig's default bnb_4bit_use_double_quant=False):
                  one fp32 absmax per 64-weight block. At batch 1 bitsandbytes runs its own 4-bit GEMV kernel.
                  bitsandbytes quantises the synthesised bf16 weights itself when they move to the GPU.
  awq-marlin      AutoAWQ's Marlin kernel (`marlin_cuda.mul`): symmetric int4, fp16 scales, no zeros.
  awq-triton      AutoAWQ's Triton GEMM (`awq_gemm_triton`, split-K 8): int4 with per-group zeros.
  awq             an alias, resolved where it runs (`resolve`) to awq-marlin where `marlin_cuda` is importable,
                  else awq-triton: the data always name the kernel that ran, never `awq` for a timed row.
  gptq-exllamav2  GPTQ tensors (no act-order, so no g_idx) through ExLlamaV2's `gemm_half_q_half`.
  int4-tinygemm   int4 weight-only through PyTorch's tinygemm ops (`aten._weight_int4pack_mm`, group size 128);
                  on a CPU the `_for_cpu` variants of the same ops.
The LM head stays bf16 in EVERY path (as HF's GPTQ, AWQ and bitsandbytes loaders leave it), as do the
embedding table and the norms; only the seven nn.Linear of each decoder layer are replaced.

Every quantised path but int4-tinygemm on a CPU needs a CUDA device and its package; a missing package,
a missing device or a refused shape raises `QuantUnavailable` with the reason (never a silent fallback).

Synthesised formats (weights of std ~ 0.02, like the models' initializer_range; codes uniform in 0..15):
  tinygemm  W = (q - 8) * s + z,        s, z bf16 [K/G, N] (stored as scales_and_zeros [K/G, N, 2])
  GPTQ      W = (q - (zq + 1)) * s,     zq the stored zero (ExLlamaV2 adds the 1), s fp16 [K/G, N]
  AWQ       W = (q - z) * s,            z int4 [K/G, N], s fp16 [K/G, N]; nibble order 0,2,4,6,1,3,5,7
  Marlin    W = (q - 8) * s,            s fp16 [K/G, N] (symmetric; packed by AutoAWQ's own from_linear)
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import torch
from torch import nn

from . import accounting, roofline

DEFAULT_GROUP_SIZE = 128
TINYGEMM_GROUP_SIZES = (32, 64, 128, 256)
AWQ_TRITON_GROUP_SIZES = (32, 64, 128)  # AutoAWQ's AWQ_TRITON_SUPPORTED_GROUP_SIZES (or G = K)
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # AWQ packing: nibble i of an int32 holds column 8c + AWQ_ORDER[i]
BNB_BLOCKSIZE = 64
QUANT_TOL = 2e-2
"""Largest max|y_layer - x W_deq^T| / max|x W_deq^T| accepted (fp32 reference from the dequantised weight).
Measured on this project's CPU: int4-tinygemm (`_for_cpu`) 0.2-0.6 %, bf16 < 0.5 %. The GPU kernels
(fp16 accumulation in ExLlamaV2/AWQ) are expected within it; their first GPU rows will say."""
WEIGHT_STD = 0.02


class QuantUnavailable(RuntimeError):
    """This path cannot run here (no CUDA device, package missing, shape refused); the message is the reason."""


# ----------------------------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class QuantPath:
    """A registered path. `build(K, N, device, seed, group_size, bias)` returns a QuantLinear (and raises
    QuantUnavailable for shapes it refuses); `layout` names its byte model (`byte_terms`)."""

    key: str
    label: str
    kernel: str
    family: str
    layout: str
    cuda_only: bool
    packages: tuple[tuple[str, str], ...]  # (import name, distribution name)
    build: Callable = field(repr=False)
    lm_head: str = "bf16 (not quantised)"


def _builder(name: str) -> Callable:
    """Late binding: the registry is defined before the layer classes."""
    def build(*args, **kwargs):
        return globals()[name](*args, **kwargs)
    return build


PATHS: dict[str, QuantPath] = {p.key: p for p in (
    QuantPath("bf16", "bf16 (baseline)", "torch F.linear on bf16 weights (cuBLAS GEMV on a GPU)", "bf16", "bf16",
              False, (), _builder("_build_bf16")),
    QuantPath("bnb-nf4", "bitsandbytes nf4 (Linear4bit)", "bitsandbytes 4-bit GEMV (nf4, blocksize 64, fp32 absmax)",
              "bnb-nf4", "nf4", True, (("bitsandbytes", "bitsandbytes"),), _builder("_build_bnb")),
    QuantPath("awq-marlin", "AutoAWQ + Marlin", "marlin_cuda.mul (Marlin, fp16, symmetric int4, G=128)", "awq",
              "marlin", True, (("awq", "autoawq"), ("marlin_cuda", "marlin_cuda")),
              _builder("_build_awq_marlin")),
    QuantPath("awq-triton", "AutoAWQ + Triton GEMM", "awq_gemm_triton (split-K 8; prefill: awq_dequantize_triton + matmul)",
              "awq", "awq_gemm", True, (("awq", "autoawq"), ("triton", "triton")), _builder("_build_awq_triton")),
    QuantPath("gptq-exllamav2", "GPTQ + ExLlamaV2", "exllamav2_ext.gemm_half_q_half (GPTQ, fp16, no act-order)",
              "gptq-exllamav2", "gptq", True, (("exllamav2", "exllamav2"),), _builder("_build_gptq_exllamav2")),
    QuantPath("int4-tinygemm", "int4 weight-only (PyTorch tinygemm)",
              "aten._weight_int4pack_mm (CUDA, sm80+) / aten._weight_int4pack_mm_for_cpu (CPU), bf16",
              "int4-tinygemm", "tinygemm", False, (), _builder("_build_tinygemm")),
)}

ALIASES = {"awq": ("awq-marlin", "awq-triton")}
"""An alias runs the first of its paths that is available here; its rows carry the concrete key."""

LAYOUT_OF = {**{k: p.layout for k, p in PATHS.items()}, "awq": "awq_gemm"}


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
            _awq_module("modules/linear/marlin.py")
        elif key == "awq-triton":
            importlib.import_module("triton")
            _awq_module("modules/triton/gemm.py")
        elif key == "gptq-exllamav2":
            _exllamav2()
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


# --------------------------------------------------------------------------------------- package loaders

def _awq_module(relpath: str):
    """A module of the AutoAWQ package. `import awq` pulls in `datasets` (absent on the GPU machine), so
    where the package import fails the file is loaded on its own (it imports only torch, triton/numpy)."""
    name = "awq." + relpath[:-3].replace("/", ".")
    try:
        return importlib.import_module(name)
    except Exception as first:  # noqa: BLE001 - any failure: try the file itself
        spec = importlib.util.find_spec("awq")
        if spec is None or not spec.submodule_search_locations:
            raise QuantUnavailable("package autoawq not installed (no module 'awq')") from first
        file = Path(list(spec.submodule_search_locations)[0]) / relpath
        if not file.exists():
            raise QuantUnavailable(f"autoawq has no {relpath} ({type(first).__name__}: {first})") from first
        import sys

        alias = "_decodegap_awq_" + relpath[:-3].replace("/", "_")
        if alias in sys.modules:
            return sys.modules[alias]
        fspec = importlib.util.spec_from_file_location(alias, file)
        mod = importlib.util.module_from_spec(fspec)
        fspec.loader.exec_module(mod)
        sys.modules[alias] = mod
        return mod


def _exllamav2():
    """(exllamav2_ext, none_tensor). The import JIT-builds the extension on a fresh machine (minutes)."""
    from exllamav2.ext import exllamav2_ext, none_tensor

    return exllamav2_ext, none_tensor


# ------------------------------------------------------------------------------------ synthesised weights

def _generator(device, seed: int):
    return torch.Generator(device=device).manual_seed(int(seed))


def _codes_and_scales(K: int, N: int, G: int, device, seed: int, scale_dtype):
    """Codes q [N, K] in 0..15 (int32) and positive scales s [N, K/G] (rounded to scale_dtype, kept fp32),
    sized so that W has std ~ WEIGHT_STD (uniform codes minus their centre have std ~ 4.6)."""
    gen = _generator(device, seed)
    q = torch.randint(0, 16, (N, K), generator=gen, device=device, dtype=torch.int32)
    s = (0.5 + torch.rand(N, K // G, generator=gen, device=device)) * (WEIGHT_STD / 4.6)
    return q, s.to(scale_dtype).float(), gen


def _grouped(t, G: int):
    """[N, K/G] per-group values broadcast to [N, K]."""
    return t.repeat_interleave(G, dim=1)


def _check_group(K: int, G: int, allowed=None) -> None:
    if K % G:
        raise QuantUnavailable(f"in_features {K} is not a multiple of group size {G}")
    if allowed is not None and G not in allowed and G != K:
        raise QuantUnavailable(f"group size {G} not supported (supported: {allowed})")


def _pack_int32(nibbles):
    """[..., 8] int values 0..15 -> [...] int32, nibble i = nibbles[..., i] (bits 4i..4i+3)."""
    shifts = torch.arange(0, 32, 4, device=nibbles.device, dtype=torch.int64)
    packed = (nibbles.to(torch.int64) << shifts).sum(dim=-1)
    packed = torch.where(packed >= 2**31, packed - 2**32, packed)  # two's complement into int32
    return packed.to(torch.int32)


def unpack_int32(packed):
    """Inverse of _pack_int32: [...] int32 -> [..., 8] int64 nibbles."""
    shifts = torch.arange(0, 32, 4, device=packed.device, dtype=torch.int64)
    return (packed.to(torch.int64)[..., None] >> shifts) & 0xF


# ---------------------------------------------------------------------------------------- layer modules

class QuantLinear(nn.Module):
    """A quantised replacement of nn.Linear(K, N): forward(x [..., K] bf16) -> [..., N] bf16;
    `dequantised_weight()` gives the weight the kernel should be applying, [N, K] (bf16 by default)."""

    path_key = "?"

    def __init__(self, in_features: int, out_features: int, group_size: int | None, bias=None):
        super().__init__()
        self.in_features, self.out_features, self.group_size = in_features, out_features, group_size
        if bias is not None:
            self.register_buffer("bias", bias.detach().to(torch.bfloat16).clone())
        else:
            self.bias = None

    def _finish(self, y, shape):
        y = y.to(torch.bfloat16)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], self.out_features)

    def dequantised_weight(self, dtype=None):
        return self._dequantised().to(dtype or torch.bfloat16)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, path={self.path_key}, "
                f"group_size={self.group_size}, bias={self.bias is not None}")


class BF16Linear(QuantLinear):
    path_key = "bf16"

    def __init__(self, K, N, device, seed, group_size=None, bias=None, weight=None):
        super().__init__(K, N, None, bias)
        if weight is None:
            weight = torch.empty(N, K, device=device, dtype=torch.bfloat16).normal_(
                0.0, WEIGHT_STD, generator=_generator(device, seed))
        self.register_buffer("weight", weight.detach().to(torch.bfloat16))

    def forward(self, x):
        import torch.nn.functional as F

        return F.linear(x.to(self.weight.dtype), self.weight, self.bias)

    def _dequantised(self):
        return self.weight.float()


class TinyGemmLinear(QuantLinear):
    """int4 weight-only, tinygemm layout: packed codes and scales_and_zeros bf16 [K/G, N, 2].

    Built from synthesised weights (`seed`), or from given `packed` and `scales_and_zeros` (seed None:
    `fuse_linears`), whose dequantised weight is then read back from the packed codes (`codes`)."""

    path_key = "int4-tinygemm"

    def __init__(self, K, N, device, seed, group_size=DEFAULT_GROUP_SIZE, bias=None, packed=None,
                 scales_and_zeros=None):
        G = group_size
        _check_group(K, G, TINYGEMM_GROUP_SIZES)
        cuda = _device_type(device) == "cuda"
        if cuda:
            if N % 8:
                raise QuantUnavailable(f"tinygemm (CUDA) needs out_features % 8 == 0, got {N}")
            inner = next((t for t in (8, 4, 2) if K % (t * 16) == 0), None)
            if inner is None:
                raise QuantUnavailable(f"tinygemm (CUDA) needs in_features % 32 == 0, got {K}")
        elif N % 16:
            raise QuantUnavailable(f"tinygemm (CPU) needs out_features % 16 == 0, got {N}")
        super().__init__(K, N, G, bias)
        self.seed, self.cuda = seed, cuda
        if packed is None:
            q, s, gen = _codes_and_scales(K, N, G, device, seed, torch.bfloat16)
            z = (torch.randn(N, K // G, generator=gen, device=device) * (WEIGHT_STD / 4.6)).to(torch.bfloat16)
            scales_and_zeros = torch.stack([s.t().to(torch.bfloat16), z.t()], dim=-1).contiguous()
            packed = _tinygemm_pack(q, cuda, inner if cuda else None)
        self.register_buffer("scales_and_zeros", scales_and_zeros)
        self.register_buffer("packed", packed)
        self._mm = torch.ops.aten._weight_int4pack_mm if cuda else torch.ops.aten._weight_int4pack_mm_for_cpu

    def forward(self, x):
        x2 = x.reshape(-1, self.in_features).to(torch.bfloat16).contiguous()
        return self._finish(self._mm(x2, self.packed, self.group_size, self.scales_and_zeros), x.shape)

    def codes(self, rows: int = 1024):
        """The int4 codes q [N, K] (int32, 0..15), read back through the layer's own kernel: with unit
        scales and zero zeros it computes I_K @ (q - 8)^T exactly (small integers in bf16), whatever the
        packed layout. `rows` rows of I_K per call bound the memory."""
        K = self.in_features
        unit = torch.zeros_like(self.scales_and_zeros)
        unit[..., 0] = 1.0
        eye = torch.eye(K, dtype=torch.bfloat16, device=self.packed.device)
        w = torch.cat([self._mm(eye[i:i + rows], self.packed, self.group_size, unit) for i in range(0, K, rows)])
        return (w.t().float() + 8).to(torch.int32).contiguous()

    def _dequantised(self):
        if self.seed is None:  # given tensors: the codes from the packed tensor
            q, s = self.codes(), self.scales_and_zeros[..., 0].t().float()
        else:
            q, s, _ = _codes_and_scales(self.in_features, self.out_features, self.group_size, self.packed.device,
                                        self.seed, torch.bfloat16)
        z = self.scales_and_zeros[..., 1].t().float()
        return (q.float() - 8) * _grouped(s, self.group_size) + _grouped(z, self.group_size)


def _tinygemm_pack(q, cuda: bool, inner: int | None = None):
    """Codes q [N, K] (int32, 0..15) in tinygemm's packed layout. CUDA: int32 [N/8, K/(16 inner), 32,
    inner/2] (tiles of 8 output rows; the op takes uint8 [N, K/2], even k in the high nibble). CPU
    (`_for_cpu`): uint8 [N, K/2], rows interleaved within blocks of 32 or 64 by the CPU's vector width."""
    if cuda:
        as_bytes = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
        return torch.ops.aten._convert_weight_to_int4pack(as_bytes.contiguous(), inner)
    return torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.contiguous(), 1)


def fuse_linears(parts) -> QuantLinear:
    """One int4-tinygemm layer for several that read the same input (q/k/v, gate/up): its output is
    torch.cat of theirs along the last dimension, and so is its `dequantised_weight()`. The parts' packed
    codes are joined along the output dimension (CUDA: the first dimension counts tiles of 8 output rows,
    so the packed tensors concatenate as they are; CPU: rows are interleaved within blocks whose size
    depends on the CPU, so the codes are read back (`codes`) and packed again), scales_and_zeros
    [K/G, N, 2] along dim 1, biases along dim 0 (zeros for a part without one, if another has one).
    Raises ValueError for other layer types or parts that differ in K, group size or device."""
    parts = list(parts)
    if not parts or not all(type(p) is TinyGemmLinear for p in parts):
        names = sorted({type(p).__name__ for p in parts})
        raise ValueError(f"fuse_linears fuses TinyGemmLinear (int4-tinygemm) layers, not {', '.join(names) or 'nothing'}")
    first = parts[0]
    K, G, device = first.in_features, first.group_size, first.packed.device
    if any((p.in_features, p.group_size, p.packed.device) != (K, G, device) for p in parts):
        raise ValueError("fuse_linears needs parts of one in_features, group size and device: "
                         + ", ".join(f"{p.in_features}/{p.group_size}/{p.packed.device}" for p in parts))
    if first.cuda:
        if any(p.packed.shape[1:] != first.packed.shape[1:] for p in parts):
            raise ValueError(f"fuse_linears: packed tiles differ: {[tuple(p.packed.shape) for p in parts]}")
        packed = torch.cat([p.packed for p in parts])
    else:
        packed = _tinygemm_pack(torch.cat([p.codes() for p in parts]), cuda=False)
    bias = None
    if any(p.bias is not None for p in parts):
        bias = torch.cat([p.bias if p.bias is not None else torch.zeros(p.out_features, dtype=torch.bfloat16,
                                                                        device=device) for p in parts])
    sz = torch.cat([p.scales_and_zeros for p in parts], dim=1).contiguous()
    return TinyGemmLinear(K, sum(p.out_features for p in parts), device, None, G, bias, packed=packed,
                          scales_and_zeros=sz)


def _gptq_tensors(K, N, G, device, seed):
    """GPTQ format: qweight int32 [K/8, N] (nibble i of row r = k 8r+i), qzeros int32 [K/G, N/8]
    (nibble i of column c = n 8c+i), scales fp16 [K/G, N]; plus the plain codes, zeros and scales."""
    q, s, gen = _codes_and_scales(K, N, G, device, seed, torch.float16)
    zq = torch.randint(0, 15, (K // G, N), generator=gen, device=device, dtype=torch.int32)  # kernel uses zq+1
    qweight = _pack_int32(q.t().reshape(K // 8, 8, N).transpose(1, 2))  # [K/8, N, 8] -> [K/8, N]
    qzeros = _pack_int32(zq.reshape(K // G, N // 8, 8))
    return qweight, qzeros, s.t().contiguous().half(), (q, zq, s)


class GPTQExllamaV2Linear(QuantLinear):
    path_key = "gptq-exllamav2"

    def __init__(self, K, N, device, seed, group_size=DEFAULT_GROUP_SIZE, bias=None, temp_dq=None):
        G = group_size
        _check_group(K, G)
        if N % 8:
            raise QuantUnavailable(f"GPTQ qzeros pack 8 columns per int32: out_features {N} % 8 != 0")
        super().__init__(K, N, G, bias)
        self.seed = seed
        ext, none = _exllamav2()
        qweight, qzeros, scales, _ = _gptq_tensors(K, N, G, device, seed)
        # make_q_matrix shuffles qweight in place and keeps raw pointers: these buffers must stay alive, unmoved
        self.register_buffer("qweight", qweight)
        self.register_buffer("qzeros", qzeros)
        self.register_buffer("scales", scales)
        if temp_dq is None:  # prefill (M > ExLlamaV2's q-gemm row limit) reconstructs the fp16 weight here
            temp_dq = torch.empty(K * N + 64, dtype=torch.float16, device=device)  # ExLlamaV2 sizes it K*N*2 bytes + 128
        self.temp_dq = temp_dq
        self._ext = ext
        self.handle = ext.make_q_matrix(qweight, none, none, none, none, none, none, qzeros, scales, none,
                                        none, temp_dq, 0)

    def forward(self, x):
        x2 = x.reshape(-1, self.in_features).to(torch.float16).contiguous()
        out = torch.empty(x2.shape[0], self.out_features, dtype=torch.float16, device=x2.device)
        self._ext.gemm_half_q_half(x2, self.handle, out, False)
        return self._finish(out, x.shape)

    def _dequantised(self):
        _, _, _, (q, zq, s) = _gptq_tensors(self.in_features, self.out_features, self.group_size,
                                            self.qweight.device, self.seed)
        return (q.float() - _grouped(zq.t().float() + 1, self.group_size)) * _grouped(s, self.group_size)

    def __del__(self):
        try:
            self._ext.free_q_matrix(self.handle)
        except Exception:  # noqa: BLE001 - best effort at teardown
            pass


def _awq_tensors(K, N, G, device, seed):
    """AWQ GEMM format: qweight int32 [K, N/8], qzeros int32 [K/G, N/8], both with nibble i holding
    column 8c + AWQ_ORDER[i]; scales fp16 [K/G, N]; plus the plain codes, zeros and scales."""
    q, s, gen = _codes_and_scales(K, N, G, device, seed, torch.float16)
    z = torch.randint(0, 16, (K // G, N), generator=gen, device=device, dtype=torch.int32)
    order = torch.tensor(AWQ_ORDER, device=device)
    qweight = _pack_int32(q.t().reshape(K, N // 8, 8)[..., order])
    qzeros = _pack_int32(z.reshape(K // G, N // 8, 8)[..., order])
    return qweight, qzeros, s.t().contiguous().half(), (q, z, s)


class AWQTritonLinear(QuantLinear):
    path_key = "awq-triton"
    PREFILL_ROWS = 1024  # from this many rows on: dequantise once (Triton) and use a dense matmul

    def __init__(self, K, N, device, seed, group_size=DEFAULT_GROUP_SIZE, bias=None):
        G = group_size
        _check_group(K, G, AWQ_TRITON_GROUP_SIZES)
        if N % 8:
            raise QuantUnavailable(f"AWQ packs 8 columns per int32: out_features {N} % 8 != 0")
        super().__init__(K, N, G, bias)
        self.seed = seed
        self._gemm = _awq_module("modules/triton/gemm.py")
        qweight, qzeros, scales, _ = _awq_tensors(K, N, G, device, seed)
        self.register_buffer("qweight", qweight)
        self.register_buffer("qzeros", qzeros)
        self.register_buffer("scales", scales)

    def forward(self, x):
        x2 = x.reshape(-1, self.in_features).to(torch.float16).contiguous()
        if x2.shape[0] >= self.PREFILL_ROWS:
            out = x2 @ self._gemm.awq_dequantize_triton(self.qweight, self.scales, self.qzeros)
        else:
            out = self._gemm.awq_gemm_triton(x2, self.qweight, self.scales, self.qzeros, 8)
        return self._finish(out, x.shape)

    def _dequantised(self):
        _, _, _, (q, z, s) = _awq_tensors(self.in_features, self.out_features, self.group_size,
                                          self.qweight.device, self.seed)
        return (q.float() - _grouped(z.t().float(), self.group_size)) * _grouped(s, self.group_size)


class AWQMarlinLinear(QuantLinear):
    """AutoAWQ's WQLinear_Marlin, packed by its own from_linear from a weight W = (q - 8) * s that it
    quantises back exactly (round(W / s) + 8 = q)."""

    path_key = "awq-marlin"

    def __init__(self, K, N, device, seed, group_size=DEFAULT_GROUP_SIZE, bias=None):
        G = group_size
        _check_group(K, G, (128,))
        if K % 128 or N % 64:
            raise QuantUnavailable(f"Marlin needs in_features % 128 == 0 and out_features % 64 == 0, got {K}x{N}")
        super().__init__(K, N, G, bias)
        self.seed = seed
        marlin = _awq_module("modules/linear/marlin.py")
        q, s, _ = _codes_and_scales(K, N, G, device, seed, torch.float16)
        plain = torch.nn.Linear(K, N, bias=False, device=device, dtype=torch.float32)
        with torch.no_grad():
            plain.weight.copy_((q.float() - 8) * _grouped(s, G))
        layer = marlin.WQLinear_Marlin.from_linear(plain, 4, G, scales=s.half())
        layer.post_init()
        del plain
        self.inner = layer

    def forward(self, x):
        return self._finish(self.inner(x.reshape(-1, self.in_features)), x.shape)

    def _dequantised(self):
        q, s, _ = _codes_and_scales(self.in_features, self.out_features, self.group_size,
                                    self.inner.qweight.device, self.seed, torch.float16)
        return (q.float() - 8) * _grouped(s, self.group_size)


class BnbNF4Linear(QuantLinear):
    """bitsandbytes Linear4bit (nf4, blocksize 64, compress_statistics=False) quantising synthesised
    bf16 weights (std WEIGHT_STD) itself on the GPU; dequantised through bitsandbytes' own dequantize_4bit."""

    path_key = "bnb-nf4"

    def __init__(self, K, N, device, seed, group_size=None, bias=None):
        import bitsandbytes as bnb
        super().__init__(K, N, BNB_BLOCKSIZE, bias)
        w = torch.empty(N, K, device=device, dtype=torch.bfloat16).normal_(0.0, WEIGHT_STD,
                                                                            generator=_generator(device, seed))
        layer = bnb.nn.Linear4bit(K, N, bias=False, compute_dtype=torch.bfloat16, compress_statistics=False,
                                  quant_type="nf4")
        layer.weight = bnb.nn.Params4bit(w, requires_grad=False, quant_type="nf4", blocksize=BNB_BLOCKSIZE,
                                         compress_statistics=False)
        self.inner = layer.to(device)  # bitsandbytes quantises here
        self._F = bnb.functional

    def forward(self, x):
        return self._finish(self.inner(x.to(torch.bfloat16)), x.shape)

    def _dequantised(self):
        return self._F.dequantize_4bit(self.inner.weight.data, self.inner.weight.quant_state).float()


def _build_bf16(K, N, device, seed, group_size=None, bias=None, **_):
    return BF16Linear(K, N, device, seed, None, bias)


def _build_tinygemm(K, N, device, seed, group_size=DEFAULT_GROUP_SIZE, bias=None, **_):
    return TinyGemmLinear(K, N, device, seed, group_size, bias)


def _build_gptq_exllamav2(K, N, device, seed, group_size=DEFAULT_GROUP_SIZE, bias=None, temp_dq=None, **_):
    return GPTQExllamaV2Linear(K, N, device, seed, group_size, bias, temp_dq)


def _build_awq_triton(K, N, device, seed, group_size=DEFAULT_GROUP_SIZE, bias=None, **_):
    return AWQTritonLinear(K, N, device, seed, group_size, bias)


def _build_awq_marlin(K, N, device, seed, group_size=DEFAULT_GROUP_SIZE, bias=None, **_):
    return AWQMarlinLinear(K, N, device, seed, group_size, bias)


def _build_bnb(K, N, device, seed, group_size=None, bias=None, **_):
    return BnbNF4Linear(K, N, device, seed, None, bias)


# -------------------------------------------------------------------------------- build, check, swap

def build_linear(path_key: str, in_features: int, out_features: int, device="cuda", seed: int = 0,
                 group_size: int = DEFAULT_GROUP_SIZE, bias=None, **kwargs) -> QuantLinear:
    """A quantised layer of path `path_key` for an nn.Linear(in_features, out_features), from synthesised
    weights in the path's own format. Raises QuantUnavailable with the reason when it cannot run here."""
    p = require(path_key, device)
    with torch.no_grad():
        return p.build(in_features, out_features, device, seed, group_size=group_size, bias=bias, **kwargs)


def check_linear(path_key: str, in_features: int, out_features: int, device="cuda", tol: float = QUANT_TOL,
                 seed: int = 0, group_size: int = DEFAULT_GROUP_SIZE) -> float:
    """Build one layer and compare its output on a random x [1, 1, K] (bf16, N(0, 1)) with
    x @ dequantised_weight().T computed in fp32: max|y - ref| / max|ref| (decode.max_relative_error).
    Returns the error; raises QuantUnavailable (cannot run here) or AssertionError (past `tol`)."""
    from .decode import max_relative_error

    layer = build_linear(path_key, in_features, out_features, device, seed, group_size)
    gen = _generator("cpu", seed + 1)
    x = torch.randn(1, 1, in_features, generator=gen).to(device=device, dtype=torch.bfloat16)
    with torch.no_grad():
        y = layer(x)
        ref = x.float() @ layer.dequantised_weight(torch.float32).t()
        if layer.bias is not None:
            ref = ref + layer.bias.float()
    if tuple(y.shape) != (1, 1, out_features) or y.dtype != torch.bfloat16:
        raise AssertionError(f"{path_key} {in_features}x{out_features}: output {tuple(y.shape)} {y.dtype}, "
                             f"expected (1, 1, {out_features}) bfloat16")
    err = max_relative_error(y.float(), ref)
    del layer
    if not err <= tol:  # NaN fails too
        raise AssertionError(f"{path_key} {in_features}x{out_features}: output differs from x @ W_deq.T by "
                             f"{err:.3g} (> {tol})")
    return err


def default_group_size(config: Mapping) -> int:
    """DEFAULT_GROUP_SIZE (128) where it divides every layer's in_features (all three 7-8B models); for
    the tiny CPU-test configs (dims 64/128) the largest of 64, 32 that does. Stated wherever it is used."""
    ks = {k for _, k, _, _ in decoder_linears(config)}
    for g in (DEFAULT_GROUP_SIZE, 64, 32):
        if all(k % g == 0 for k in ks):
            return g
    raise ValueError(f"no int4 group size divides every in_features {sorted(ks)}")


def decoder_linears(config: Mapping) -> list[tuple[str, int, int, bool]]:
    """(name, in_features K, out_features N, has_bias) of the seven nn.Linear of ONE decoder layer."""
    h, inter = config["hidden_size"], config["intermediate_size"]
    d = accounting.head_dim(config)
    q_out, kv_out = config["num_attention_heads"] * d, config["num_key_value_heads"] * d
    qkv_bias = config["model_type"] == "qwen2" or bool(config.get("attention_bias", False))
    o_bias = config["model_type"] != "qwen2" and bool(config.get("attention_bias", False))
    mlp_bias = bool(config.get("mlp_bias", False))
    return [("q_proj", h, q_out, qkv_bias), ("k_proj", h, kv_out, qkv_bias), ("v_proj", h, kv_out, qkv_bias),
            ("o_proj", q_out, h, o_bias), ("gate_proj", h, inter, mlp_bias), ("up_proj", h, inter, mlp_bias),
            ("down_proj", inter, h, mlp_bias)]


LAYERS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")
"""The linear layers of a decoder step, in order: the seven of each decoder layer, then the LM head."""


def layer_shapes(config: Mapping) -> dict[str, tuple[int, int]]:
    """layer name -> (K, N) for the seven decoder linears and the LM head."""
    out = {name: (k, n) for name, k, n, _ in decoder_linears(config)}
    out["lm_head"] = (config["hidden_size"], config["vocab_size"])
    return out


def quantise_model_(model, path_key: str, group_size: int | None = None, seed: int = 0) -> dict:
    """Replace every nn.Linear of the decoder layers (q/k/v/o_proj, gate/up/down_proj) of an HF causal LM
    by path `path_key`'s layer built from synthesised weights (the model's biases are kept); the LM head,
    embedding and norms stay bf16. `awq` resolves to the kernel available here. `group_size` None: 128,
    or for the tiny test configs the largest of 64/32 dividing their dims (`default_group_size`).
    Returns what was done: path (concrete key), kernel, layers replaced, group size, LM head dtype.
    Raises QuantUnavailable (before touching the model) when the path cannot run here."""
    first = next(model.parameters())
    device = first.device
    key = resolve(path_key, device)
    p = require(key, device)
    config = model.config.to_dict()
    G = group_size or default_group_size(config)
    info = dict(path=key, requested=path_key, kernel=p.kernel, group_size=G if key not in ("bf16", "bnb-nf4") else None,
                lm_head=p.lm_head, layers=0)
    if key == "bf16":
        return info
    extra = {}
    if key == "gptq-exllamav2":  # one reconstruction buffer shared by every layer, sized for the largest
        biggest = max(k * n for _, k, n, _ in decoder_linears(config))
        extra["temp_dq"] = torch.empty(biggest + 64, dtype=torch.float16, device=device)
    with torch.no_grad():
        for i, layer in enumerate(model.model.layers):
            targets = [(name, mod) for name, mod in layer.named_modules() if isinstance(mod, nn.Linear)]
            for j, (name, mod) in enumerate(targets):
                parent = layer.get_submodule(name.rsplit(".", 1)[0]) if "." in name else layer
                new = p.build(mod.in_features, mod.out_features, device, seed * 1_000_003 + i * 64 + j,
                              group_size=G, bias=mod.bias, **extra)
                setattr(parent, name.rsplit(".", 1)[-1], new)
                del mod
                info["layers"] += 1
    if device.type == "cuda":
        torch.cuda.empty_cache()
    model.decodegap_quant = info
    return info


# ------------------------------------------------------------------------------------------ byte model

def _linear_terms(layout: str, name: str, k: int, n: int, G: int, has_bias: bool) -> dict[str, int]:
    """The byte terms of one decoder linear (K in, N out) in `layout` (see byte_terms)."""
    if layout != "bf16" and layout != "nf4" and k % G:
        raise ValueError(f"{name}: in_features {k} is not a multiple of group size {G}")
    terms = {"linear_bias": 2 * n} if has_bias else {}
    if layout == "bf16":
        return {**terms, "linear_weight": 2 * k * n}
    terms["linear_packed"] = k * n // 2
    if layout == "tinygemm":
        terms["linear_scales"] = 2 * 2 * (k // G) * n
    elif layout in ("gptq", "awq_gemm"):
        terms["linear_zeros"] = 4 * (k // G) * (n // 8)
        terms["linear_scales"] = 2 * (k // G) * n
    elif layout == "marlin":
        terms["linear_scales"] = 2 * (k // G) * n
    elif layout == "nf4":
        terms["linear_absmax"] = 4 * -(-k * n // BNB_BLOCKSIZE)
        terms["linear_code"] = 4 * 16
    return terms


def byte_terms(config: Mapping, path_key: str, group_size: int = DEFAULT_GROUP_SIZE) -> dict[str, int]:
    """Bytes one decode step streams for path `path_key`, term by term (W_streamed convention).

    Per decoder linear (K in, N out, G the group size), by layout:
      bf16      linear_weight  2*K*N                       (bf16 [N, K])
      tinygemm  linear_packed  K*N/2                       (int4 codes, tinygemm-tiled int32)
                linear_scales  2*2*(K/G)*N                 (scales_and_zeros bf16 [K/G, N, 2]: scale AND zero)
      gptq      linear_packed  4*(K/8)*N = K*N/2           (qweight int32 [K/8, N])
                linear_zeros   4*(K/G)*(N/8) = K*N/(2G)    (qzeros int32 [K/G, N/8])
                linear_scales  2*(K/G)*N                   (scales fp16 [K/G, N]; no act-order: no g_idx)
      awq_gemm  same three terms (qweight int32 [K, N/8], qzeros int32 [K/G, N/8], scales fp16 [K/G, N])
      marlin    linear_packed  K*N/2 (qweight int32 [K/16, 2N]); linear_scales 2*(K/G)*N; no zeros
                (symmetric). Its lock workspace (N/128*8 int32) is not counted (< 0.001 %).
      nf4       linear_packed  K*N/2                       (uint8, two nf4 codes per byte)
                linear_absmax  4*K*N/64                    (one fp32 absmax per 64-weight block:
                                                            compress_statistics=False, HF's default. With
                                                            double quantisation it would be 1 byte per block
                                                            + fp32 per 256 blocks, but the fp32 absmax is then
                                                            rebuilt, written and read every step)
                linear_code    4*16 per linear             (the nf4 lookup table, 16 fp32, read per call)
    Every path, unquantised:
      linear_bias     2 bytes per bias element (Qwen2's q/k/v biases; bf16 or fp16 in the fp16 kernels)
      norms           2*H per RMSNorm: 2 per layer + the final one
      embedding_row   2*H (one looked-up row of the input embedding)
      lm_head         2*V*H (bf16 in every path; for tied embeddings the table, read once as the head)
    KV is not a weight term: see `step_bytes`. Activations and the new token's KV write are left out.
    For bf16 the total equals accounting.weight_bytes(config, "W_streamed").
    """
    layout = LAYOUT_OF.get(path_key)
    if layout is None:
        path(path_key)  # raises the unknown-key error
    h, v, layers = config["hidden_size"], config["vocab_size"], config["num_hidden_layers"]
    G = group_size
    terms = dict.fromkeys(("linear_weight", "linear_packed", "linear_scales", "linear_zeros", "linear_absmax",
                           "linear_code", "linear_bias"), 0)
    for name, k, n, has_bias in decoder_linears(config):
        for term, nbytes in _linear_terms(layout, name, k, n, G, has_bias).items():
            terms[term] += nbytes
    terms = {t: b * layers for t, b in terms.items()}
    terms["norms"] = 2 * h * (2 * layers + 1)
    terms["embedding_row"] = 2 * h
    terms["lm_head"] = 2 * v * h
    return terms


def projection_bytes(config: Mapping, path_key: str, layout: str = "hf",
                     group_size: int = DEFAULT_GROUP_SIZE) -> dict[str, int]:
    """Bytes one call of each matrix product of a decoder layer reads for path `path_key` (byte_terms' terms of
    its linears: packed codes, scales, zeros, bias), in accounting.PROJECTIONS[layout] order (`fused`: the lean
    decoder's qkv and gate_up, one layer each, as quant.fuse_linears builds them), and the LM head's (bf16 in every
    path, the vocab x hidden table, tied or not). Every layer's products, the head, the norms and one embedding row
    make up streamed_weight_bytes (for bf16: accounting's W_streamed)."""
    kind = LAYOUT_OF.get(path_key)
    if kind is None:
        path(path_key)  # raises the unknown-key error
    if layout not in accounting.PROJECTIONS:
        raise ValueError(f"unknown projection layout {layout!r}; use one of {tuple(accounting.PROJECTIONS)}")
    per = {name.removesuffix("_proj"): sum(_linear_terms(kind, name, k, n, group_size, bias).values())
           for name, k, n, bias in decoder_linears(config)}
    if layout == "fused":
        per = dict(qkv=per["q"] + per["k"] + per["v"], o=per["o"], gate_up=per["gate"] + per["up"], down=per["down"])
    per["lm_head"] = 2 * config["vocab_size"] * config["hidden_size"]
    return per


def streamed_weight_bytes(config: Mapping, path_key: str, group_size: int = DEFAULT_GROUP_SIZE, ctx: int = 0) -> int:
    """Bytes a decode step streams for path `path_key`: every weight term of `byte_terms` (packed int4
    weights, scales, zeros in each path's real dtype and layout, the unquantised LM head, norms, biases,
    one embedding row), plus the KV cache at `ctx` (accounting.kv_bytes, bf16; 0 by default)."""
    weights = sum(byte_terms(config, path_key, group_size).values())
    return weights + (accounting.kv_bytes(config, ctx) if ctx else 0)


def step_bytes(config: Mapping, path_key: str, ctx: int, group_size: int = DEFAULT_GROUP_SIZE) -> int:
    """W_path + K(ctx): what one decode step of path `path_key` must move at context `ctx`."""
    return streamed_weight_bytes(config, path_key, group_size, ctx=ctx)


def t_floor_ms(config: Mapping, path_key: str, ctx: int, bandwidth_gbps: float,
               group_size: int = DEFAULT_GROUP_SIZE) -> float:
    """The path's own memory floor (ms): its step bytes at `bandwidth_gbps` (roofline.t_floor_ms)."""
    return roofline.t_floor_ms(step_bytes(config, path_key, ctx, group_size), bandwidth_gbps)


def r_floor(config: Mapping, path_key: str, ctx: int, bandwidth_gbps: float, t_obs_ms: float,
            group_size: int = DEFAULT_GROUP_SIZE) -> float:
    """R_floor of a path: its own floor over the observed step time."""
    return roofline.r_floor(t_floor_ms(config, path_key, ctx, bandwidth_gbps, group_size), t_obs_ms)
