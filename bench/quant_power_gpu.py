"""The quantisation checks' power on the whole Llama-3.1-8B (32 decoder layers) on a GPU (quant.power; its docstring
derives the tolerance): data/diagnostics/quant_power_gpu.csv, one row per null draw, correct model and fault.

    PYTHONPATH=lib:.ext python3 bench/quant_power_gpu.py [PATH,...]      (bench/measure.sh's quant_power step)

For each path (default: every quantised path) at ctx 2048, the context of the timed cells: the null of its
format, then its own kernel (where it runs here) and its reference build (x @ W_deq^T of the layer's own tensors;
not int4-tinygemm, whose kernel runs in either, nor bnb-nf4), each correct and with each planted fault
(harness.quant_checks.power_rows). The bf16 layers are recorded once and put back after each case. Each row is
written as it is measured, so a run cut short keeps what it measured.
"""

import argparse

import torch

from decodegap.diagnostics import Rows

from decodegap.harness import models, quant_checks

MODEL, CTX = "llama-3.1-8b", 2048
PATHS = ("awq-marlin", "int4-tinygemm", "awq-triton", "int4-triton", "bnb-nf4", "gptq-exllamav2")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="?", default=",".join(PATHS))
    ap.add_argument("--builds", default="kernel,reference")
    args = ap.parse_args()
    out = Rows("quant_power_gpu", quant_checks.POWER_FIELDS)
    add = lambda r: out.add(**{k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()})  # noqa: E731
    model = models.build_model(models.load_spec(MODEL), device="cuda")
    reference = quant_checks.record_layers(model, CTX)
    for key in args.paths.split(","):
        quant_checks.power_rows(model, CTX, reference, [key], builds=tuple(args.builds.split(",")),
                                model_key=MODEL, on_row=add)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
