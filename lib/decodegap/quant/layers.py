"""The quantised replacements of nn.Linear, one class per path, each built from a model's own weight
(`from_weight`: per-group round-to-nearest in the path's format, quant_formats) and calling its package's kernel
as that package's own library calls it (the packages loaded by quant.loaders; several layers of one path fused
into one by quant.fuse).

Every layer has `dequantised_weight()`, the weight [N, K] read back from the tensors the kernel reads (the
reference of the layer check), and the same forward contract: x [..., K] (bf16) -> [..., N] bf16. The kernels
that take fp16 activations (ExLlamaV2, AutoAWQ's Triton GEMM and Marlin) get x cast to fp16 on entry and their
fp16 output cast back to bf16: two elementwise kernels per product (`FP16_CASTS_PER_PRODUCT`).

`reference=True` builds the same tensors without the package and computes x @ W_deq^T (fp32) instead of the
kernel: a labelled stand-in that lets the CPU tests check formats, packing and the checks themselves; never timed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from decodegap.quant import formats as fmt
from decodegap.quant import ops as quant_ops
from decodegap.quant.loaders import awq_module, exllamav2, EXLLAMAV2_MAX_DQ_SIZE, exllamav2_temp_dq, QuantUnavailable

BNB_BLOCKSIZE = 64
TINYGEMM_GROUP_SIZES = (32, 64, 128, 256)
AWQ_TRITON_GROUP_SIZES = (32, 64, 128)  # AutoAWQ's AWQ_TRITON_SUPPORTED_GROUP_SIZES (or G = K)
AWQ_TRITON_SPLIT_K = 8
FP16_CASTS_PER_PRODUCT = {"gptq-exllamav2": 2, "awq-triton": 2, "awq-marlin": 2}


def _check_group(K: int, G: int, allowed=None) -> None:
    if K % G:
        raise QuantUnavailable(f"in_features {K} is not a multiple of group size {G}")
    if allowed is not None and G not in allowed and G != K:
        raise QuantUnavailable(f"group size {G} not supported (supported: {allowed})")


class QuantLinear(nn.Module):
    """A quantised replacement of nn.Linear(K, N): forward(x [..., K] bf16) -> [..., N] bf16;
    `dequantised_weight()` gives the weight the kernel should be applying, [N, K] (bf16 by default)."""

    path_key = "?"

    def __init__(self, in_features: int, out_features: int, group_size: int | None, bias=None,
                 reference: bool = False):
        super().__init__()
        self.in_features, self.out_features, self.group_size = in_features, out_features, group_size
        self.reference = reference
        if bias is not None:
            self.register_buffer("bias", bias.detach().to(torch.bfloat16).clone())
        else:
            self.bias = None

    def _finish(self, y, shape):
        y = y.to(torch.bfloat16)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], self.out_features)

    @classmethod
    def from_weight(cls, weight, bias=None, group_size=128, reference=False):
        """The path's layer quantised from `weight` [N, K] (any float dtype, any device)."""
        return cls(weight, bias, group_size, reference)

    def _reference_forward(self, x):
        """x @ W_deq^T in fp32 (the `reference` stand-in; also the CPU tests' kernel for CUDA-only formats). W_deq is
        read back once and kept (a reference layer's tensors never change after it is built)."""
        x2 = x.reshape(-1, self.in_features).float()
        w = getattr(self, "_w_ref", None)
        if w is None:
            w = self._w_ref = self._dequantised()
        return self._finish(x2 @ w.t(), x.shape)

    def dequantised_weight(self, dtype=None):
        return self._dequantised().to(dtype or torch.bfloat16)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, path={self.path_key}, "
                f"group_size={self.group_size}, bias={self.bias is not None}"
                + (", reference (not the kernel)" if self.reference else ""))


class BF16Linear(QuantLinear):
    path_key = "bf16"

    def __init__(self, weight, bias=None, group_size=None, reference=False):
        N, K = weight.shape
        super().__init__(K, N, None, bias)
        self.register_buffer("weight", weight.detach().to(torch.bfloat16).clone())

    def forward(self, x):
        return F.linear(x.to(self.weight.dtype), self.weight, self.bias)

    def _dequantised(self):
        return self.weight.float()


class TinyGemmLinear(QuantLinear):
    """int4 weight-only, tinygemm layout: packed codes and scales_and_zeros bf16 [K/G, N, 2]
    (W = (q - 8) * s + m). Given `packed` and `scales_and_zeros` (fuse_linears), it takes them as they are."""

    path_key = "int4-tinygemm"

    def __init__(self, weight=None, bias=None, group_size=128, reference=False, packed=None,
                 scales_and_zeros=None, shape=None, device=None):
        N, K = weight.shape if weight is not None else shape
        device = weight.device if weight is not None else device
        G = group_size
        _check_group(K, G, TINYGEMM_GROUP_SIZES)
        cuda = device.type == "cuda"
        inner = None
        if cuda:
            if N % 8:
                raise QuantUnavailable(f"tinygemm (CUDA) needs out_features % 8 == 0, got {N}")
            inner = next((t for t in (8, 4, 2) if K % (t * 16) == 0), None)
            if inner is None:
                raise QuantUnavailable(f"tinygemm (CUDA) needs in_features % 32 == 0, got {K}")
        elif N % 16:
            raise QuantUnavailable(f"tinygemm (CPU) needs out_features % 16 == 0, got {N}")
        super().__init__(K, N, G, bias)
        self.cuda = cuda
        if packed is None:
            q, s, m = fmt.rtn_float_zero(weight, G)
            scales_and_zeros = torch.stack([s.t(), m.t()], dim=-1).to(torch.bfloat16).contiguous()
            packed = tinygemm_pack(q, cuda, inner)
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
        s, m = (self.scales_and_zeros[..., i].t().float() for i in (0, 1))
        return (self.codes().float() - 8) * fmt.grouped(s, self.group_size) + fmt.grouped(m, self.group_size)


def tinygemm_pack(q, cuda: bool, inner: int | None = None):
    """Codes q [N, K] (int32, 0..15) in tinygemm's packed layout. CUDA: int32 [N/8, K/(16 inner), 32,
    inner/2] (tiles of 8 output rows; the op takes uint8 [N, K/2], even k in the high nibble). CPU
    (`_for_cpu`): uint8 [N, K/2], rows interleaved within blocks of 32 or 64 by the CPU's vector width."""
    if cuda:
        as_bytes = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
        return torch.ops.aten._convert_weight_to_int4pack(as_bytes.contiguous(), inner)
    return torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.contiguous(), 1)


class PackedLinear(QuantLinear):
    """A layer whose state is a few packed tensors (`TENSORS`), each [..., N-like] along dim 1, so that layers
    of one input fuse by concatenating every tensor along dim 1 (`fuse_linears`). `from_weight` quantises a
    weight into them; `__init__` takes them as they are and sets the kernel up (`_setup`)."""

    TENSORS: tuple[str, ...] = ()

    def __init__(self, in_features, out_features, group_size, bias=None, reference=False, **tensors):
        super().__init__(in_features, out_features, group_size, bias, reference)
        for name in self.TENSORS:
            self.register_buffer(name, tensors[name])
        if not reference:
            self._setup()

    def _setup(self):
        pass

    @classmethod
    def _tensors(cls, weight, group_size) -> dict:
        raise NotImplementedError

    @classmethod
    def from_weight(cls, weight, bias=None, group_size=128, reference=False):
        N, K = weight.shape
        cls._refuse(K, N, group_size)
        return cls(K, N, group_size, bias, reference, **cls._tensors(weight, group_size))

    @classmethod
    def _refuse(cls, K, N, G) -> None:
        """QuantUnavailable for a shape or group size the kernel does not take."""


class GPTQExllamaV2Linear(PackedLinear):
    """GPTQ tensors (no act-order) through ExLlamaV2's gemm_half_q_half, set up as exllamav2's own
    ExLlamaV2Linear does (make_q_matrix with max_dq_rows = EXLLAMAV2_MAX_DQ_SIZE // N and a shared temp_dq
    buffer): decode rows on the quantised GEMM, a prefill on reconstruct + cuBLAS. make_q_matrix shuffles the
    qweight it is given in place and keeps raw pointers, so it gets a copy (`qweight`, alive and unmoved) and
    `qweight_unshuffled` keeps the GPTQ layout (the reference and the fusion read it)."""

    path_key = "gptq-exllamav2"
    TENSORS = ("qweight_unshuffled", "qzeros", "scales")

    @classmethod
    def _refuse(cls, K, N, G):
        _check_group(K, G)
        if N % 8 or K % 8:
            raise QuantUnavailable(f"GPTQ packs 8 values per int32: {K}x{N} must be multiples of 8")

    @classmethod
    def _tensors(cls, weight, G):
        q, z, s = fmt.rtn_asymmetric(weight, G, torch.float16, zero_min=fmt.GPTQ_ZERO_OFFSET)
        return dict(zip(cls.TENSORS, fmt.gptq_pack(q, z, s, G)))

    def _setup(self):
        ext, none = exllamav2()
        self._ext = ext
        self.register_buffer("qweight", self.qweight_unshuffled.clone())
        self.temp_dq = exllamav2_temp_dq(self.qweight.device)
        self.handle = ext.make_q_matrix(self.qweight, none, none, none, none, none, none, self.qzeros, self.scales,
                                        none, none, self.temp_dq, EXLLAMAV2_MAX_DQ_SIZE // self.out_features)
        self.op_key = quant_ops.register_exllamav2(ext, self.handle)

    def forward(self, x):
        if self.reference:
            return self._reference_forward(x)
        x2 = x.reshape(-1, self.in_features).to(torch.float16).contiguous()
        return self._finish(quant_ops.exllamav2_gemm(x2, self.op_key, self.out_features), x.shape)

    def _dequantised(self):
        return fmt.gptq_dequantise(self.qweight_unshuffled, self.qzeros, self.scales, self.group_size)

    def __del__(self):
        try:
            quant_ops.forget_exllamav2(self.op_key)
            self._ext.free_q_matrix(self.handle)
        except Exception:  # noqa: BLE001 - best effort at teardown (and reference layers have no handle)
            pass


class AWQTritonLinear(PackedLinear):
    """AutoAWQ's Triton GEMM (awq_gemm_triton, split-K 8): its accumulator and its split-K atomic adds are fp16
    (the output's dtype), so the order in which the splits land, which varies between launches, moves the result
    by fp16 roundings. A prefill (>= PREFILL_ROWS rows) dequantises once (awq_dequantize_triton) and multiplies."""

    path_key = "awq-triton"
    PREFILL_ROWS = 1024
    TENSORS = ("qweight", "qzeros", "scales")

    @classmethod
    def _refuse(cls, K, N, G):
        _check_group(K, G, AWQ_TRITON_GROUP_SIZES)
        if N % 8:
            raise QuantUnavailable(f"AWQ packs 8 columns per int32: out_features {N} % 8 != 0")

    @classmethod
    def _tensors(cls, weight, G):
        q, z, s = fmt.rtn_asymmetric(weight, G, torch.float16)
        return dict(zip(cls.TENSORS, fmt.awq_pack(q, z, s)))

    def _setup(self):
        self._gemm = awq_module("modules/triton/gemm.py")

    def forward(self, x):
        if self.reference:
            return self._reference_forward(x)
        x2 = x.reshape(-1, self.in_features).to(torch.float16).contiguous()
        if x2.shape[0] >= self.PREFILL_ROWS:
            out = x2 @ self._gemm.awq_dequantize_triton(self.qweight, self.scales, self.qzeros)
        else:
            out = self._gemm.awq_gemm_triton(x2, self.qweight, self.scales, self.qzeros, AWQ_TRITON_SPLIT_K)
        return self._finish(out, x.shape)

    def _dequantised(self):
        return fmt.awq_dequantise(self.qweight, self.qzeros, self.scales, self.group_size)


def marlin_tables(reference: bool = False):
    """Marlin's (perm, scale_perm): AutoAWQ's own; for a reference build where AutoAWQ does not import, the same
    tables recomputed (quant_formats.marlin_perms_reference)."""
    try:
        return fmt.marlin_perms(awq_module("modules/linear/marlin.py"))
    except QuantUnavailable:
        if not reference:
            raise
        return fmt.marlin_perms_reference()


class AWQMarlinLinear(PackedLinear):
    """AutoAWQ's WQLinear_Marlin (marlin_cuda.mul): symmetric int4, fp16 scales, G = 128, packed by
    quant_formats.marlin_pack (AutoAWQ's from_linear layout, with AutoAWQ's own permutation tables). Its layout
    permutes within chunks of 64 output columns, so layers fuse along dim 1 of qweight and scales.

    Products of more than KERNEL_MAX_ROWS rows (a prefill) dequantise the layer's own tensors
    (quant_formats.marlin_dequantise, fp16) and multiply (cuBLAS), as ExLlamaV2 does above 32 rows and AutoAWQ's
    Triton path above 1024. marlin_cuda.mul (IST-DASLab 2f6d7c1) is nondeterministic on the H200 from 64 rows up:
    ten bit-identical calls give up to ten different outputs, 0.0004-0.077 off the layer's own W_deq, with any
    max_par (1, 8, 16) and 66 or 1 multiprocessors, its locks always released; up to 17 rows, and at one row on
    the multi-row tile shape (thread_k 64, thread_n 256), it is repeatable within 0.002
    (data/diagnostics/marlin_prefill_gpu.csv). The decode step's one row stays on the kernel."""

    path_key = "awq-marlin"
    TENSORS = ("qweight", "scales")
    KERNEL_MAX_ROWS = 16

    @classmethod
    def _refuse(cls, K, N, G):
        _check_group(K, G, (128,))
        if K % 128 or N % 256:
            raise QuantUnavailable(f"Marlin needs in_features % 128 == 0 and out_features % 256 == 0, got {K}x{N}")

    @classmethod
    def from_weight(cls, weight, bias=None, group_size=128, reference=False):
        N, K = weight.shape
        cls._refuse(K, N, group_size)
        q, s = fmt.rtn_symmetric(weight, group_size, torch.float16)
        tensors = fmt.marlin_pack(q, s, group_size, marlin_tables(reference))
        return cls(K, N, group_size, bias, reference, **dict(zip(cls.TENSORS, tensors)))

    def _setup(self):
        marlin = awq_module("modules/linear/marlin.py")
        inner = marlin.WQLinear_Marlin(4, self.group_size, self.in_features, self.out_features, False, "meta")
        inner.qweight, inner.scales = self.qweight, self.scales  # the same tensors, not copies
        inner.post_init()  # its workspace: out_features / 128 * max_par int32
        self.inner = inner

    def forward(self, x):
        if self.reference:
            return self._reference_forward(x)
        x2 = x.reshape(-1, self.in_features).to(torch.float16).contiguous()
        if x2.shape[0] > self.KERNEL_MAX_ROWS:  # a prefill: dequantise + matmul (class docstring)
            return self._finish(x2 @ self._dequantised().to(torch.float16).t(), x.shape)
        inner = self.inner  # WQLinear_Marlin.forward's own call, through a custom operator (quant_ops)
        return self._finish(quant_ops.marlin_mul(x2, inner.qweight, inner.scales, inner.workspace, inner.max_par),
                            x.shape)

    def _dequantised(self):
        return fmt.marlin_dequantise(self.qweight, self.scales, self.group_size, marlin_tables(self.reference))


class BnbNF4Linear(QuantLinear):
    """bitsandbytes Linear4bit (nf4, blocksize 64, compress_statistics=False, HF's BitsAndBytesConfig default) of
    the given weight, quantised by bitsandbytes itself when it moves to the GPU; dequantised through bitsandbytes'
    own dequantize_4bit. At batch 1 bitsandbytes runs its own 4-bit GEMV kernel."""

    path_key = "bnb-nf4"

    def __init__(self, weight, bias=None, group_size=None, reference=False, inner=None):
        import bitsandbytes as bnb

        N, K = weight.shape if weight is not None else inner.weight.quant_state.shape
        super().__init__(K, N, BNB_BLOCKSIZE, bias)
        self._F = bnb.functional
        if inner is not None:
            self.inner = inner
            return
        layer = bnb.nn.Linear4bit(K, N, bias=False, compute_dtype=torch.bfloat16, compress_statistics=False,
                                  quant_type="nf4", device="meta")
        layer.weight = bnb.nn.Params4bit(weight.detach().to(torch.bfloat16), requires_grad=False,
                                         quant_type="nf4", blocksize=BNB_BLOCKSIZE, compress_statistics=False)
        self.inner = layer.to(weight.device)  # bitsandbytes quantises here

    @classmethod
    def fuse(cls, parts, bias):
        """One layer of the parts' packed codes and absmax, concatenated (both are the row-major [N, K] weight
        flattened: two codes per byte, one absmax per 64 weights, so rows concatenate as they are)."""
        import bitsandbytes as bnb

        first = parts[0].inner.weight
        K, N = parts[0].in_features, sum(p.out_features for p in parts)
        state = bnb.functional.QuantState(
            absmax=torch.cat([p.inner.weight.quant_state.absmax for p in parts]), shape=torch.Size((N, K)),
            code=first.quant_state.code, blocksize=first.quant_state.blocksize, quant_type="nf4",
            dtype=first.quant_state.dtype)
        layer = bnb.nn.Linear4bit(K, N, bias=False, compute_dtype=torch.bfloat16, compress_statistics=False,
                                  quant_type="nf4", device="meta")
        layer.weight = bnb.nn.Params4bit(torch.cat([p.inner.weight.data for p in parts]), requires_grad=False,
                                         quant_state=state, blocksize=BNB_BLOCKSIZE, compress_statistics=False,
                                         quant_type="nf4", bnb_quantized=True, module=layer)
        return cls(None, bias, inner=layer)

    def forward(self, x):
        return self._finish(self.inner(x.to(torch.bfloat16)), x.shape)

    def _dequantised(self):
        return self._F.dequantize_4bit(self.inner.weight.data, self.inner.weight.quant_state).float()


class Int4TritonLinear(QuantLinear):
    """The package's own int4 GEMV (decodegap.kernels.int4_gemv, Triton), its Int4GemvLinear inside: W = q * s + m
    per group, bf16 s and m."""

    path_key = "int4-triton"

    def __init__(self, weight, bias=None, group_size=128, reference=False):
        from decodegap.kernels.int4_gemv import layer as int4_layer

        N, K = weight.shape
        _check_group(K, group_size)
        super().__init__(K, N, group_size, bias, reference)
        self.inner = int4_layer.Int4GemvLinear.from_weight(weight, None, group_size)

    def forward(self, x):
        if self.reference:
            return self._reference_forward(x)
        return self._finish(self.inner(x.to(torch.bfloat16)), x.shape)

    def _dequantised(self):
        return self.inner.dequantised_weight(torch.float32).float()


LAYER_CLASSES = {cls.path_key: cls for cls in (BF16Linear, TinyGemmLinear, GPTQExllamaV2Linear, AWQTritonLinear,
                                               AWQMarlinLinear, BnbNF4Linear, Int4TritonLinear)}
