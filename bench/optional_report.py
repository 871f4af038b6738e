"""What the optional kernels of this machine are: bench/measure.sh's `env` and `quant` steps print it before measuring.

  python3 bench/optional_report.py                  each optional module: imported (with its version) or why not
  python3 bench/optional_report.py --quant-paths    each quantisation path (quant.PATHS): available or the reason
  python3 bench/optional_report.py --exllamav2-build SECONDS OUT
                                                    writes OUT, the record of ExLlamaV2's JIT build that
                                                    hardware.kernel_builds copies into env.json
A missing module is not an error here: the sweeps record it as an `unavailable` row with the reason.
"""

import importlib
import json
import sys

MODULES = ("fa3_fwd_interface", "flashinfer", "flash_attn_2_cuda", "flash_attn", "flash_attn_interface",  # notebook 03
           "bitsandbytes", "exllamav2", "awq", "marlin_cuda", "torchao", "triton")  # notebook 04, 06


def report_modules() -> None:
    for name in MODULES:
        try:
            module = importlib.import_module(name)
            print("import", name, "ok", getattr(module, "__version__", ""), flush=True)
        except Exception as exc:  # noqa: BLE001 (a report: any failure to import is the answer)
            first = str(exc).splitlines()[0] if str(exc) else ""
            print("import", name, "failed:", type(exc).__name__, first, flush=True)


def report_quant_paths() -> None:
    from decodegap.quant import paths as quant

    for key in quant.PATHS:
        print(key, "->", quant.unavailable_reason(key, "cuda") or "available", flush=True)


def write_exllamav2_build(seconds: str, out: str) -> None:
    import importlib.metadata

    import torch

    version = importlib.metadata.version("exllamav2")
    record = dict(kernel=f"exllamav2_ext (exllamav2 {version}, its own JIT build)", torch=torch.__version__,
                  build_s=int(seconds))
    with open(out, "w") as fh:
        json.dump(record, fh)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--quant-paths"]:
        report_quant_paths()
    elif sys.argv[1:2] == ["--exllamav2-build"] and len(sys.argv) == 4:
        write_exllamav2_build(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 1:
        report_modules()
    else:
        sys.exit(__doc__)
