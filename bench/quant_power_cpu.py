"""The quantisation checks' power at the Llama-3.1-8B shapes on a CPU (quant.power; its docstring derives the
tolerance): data/diagnostics/quant_power_cpu.csv, one row per null draw, correct layer and planted fault.

    python3 bench/quant_power_cpu.py [products] [model]      (both by default; bench/measure.sh's quant_power step)

products  one product x W^T per Llama-3.1-8B shape (q/o_proj 4096x4096, k/v_proj 4096x1024, gate/up_proj
          4096x14336, down_proj 14336x4096), 128 rows: every path's null, correct layer and planted faults, each
          against x W^T of the bf16 weight, with the elementwise format check (harness.quant_checks.product_rows). The
          CUDA-only formats run their reference product (x @ W_deq^T of the layer's own tensors); int4-tinygemm
          runs its CPU kernel.
model     two full Llama-3.1-8B decoder layers (the real config with num_hidden_layers 2 and the vocabulary cut to
          8192, which changes no decoder shape), ctx 64: the forced-layer model check (harness.quant_checks.
          power_rows) with its null, the correct layers and each planted fault.
bnb-nf4 needs bitsandbytes on a GPU: its null alone is measured here. About 25 minutes on 2 cores.
"""

import sys

import torch

from decodegap.diagnostics import Rows

from decodegap.harness import models, quant_checks

SHAPES = (("q/o_proj", 4096, 4096), ("k/v_proj", 4096, 1024), ("gate/up_proj", 4096, 14336),
          ("down_proj", 14336, 4096))
PATHS = ("gptq-exllamav2", "awq-triton", "awq-marlin", "int4-tinygemm", "int4-triton")
MODEL, LAYERS, VOCAB, CTX = "llama-3.1-8b", 2, 8192, 64


def main(parts) -> None:
    torch.manual_seed(0)
    out = Rows("quant_power_cpu", quant_checks.POWER_FIELDS)
    add = lambda r: out.add(**{k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()})  # noqa: E731
    if "products" in parts:
        quant_checks.product_rows(SHAPES, PATHS + ("bnb-nf4",), rows=128, device="cpu", on_row=add)
    if "model" in parts:
        spec = models.load_spec(MODEL)
        spec = models.ModelSpec(spec.key, spec.name, spec.hf_repo, spec.source, False,
                                dict(spec.config, num_hidden_layers=LAYERS, vocab_size=VOCAB))
        model = models.build_model(spec, device="cpu")
        reference = quant_checks.record_layers(model, CTX)
        quant_checks.power_rows(model, CTX, reference, PATHS + ("bnb-nf4",), builds=("reference", "kernel"),
                                model_key=f"{MODEL} ({LAYERS} layers, vocab {VOCAB})", on_row=add)


if __name__ == "__main__":
    main(sys.argv[1:] or ("products", "model"))
