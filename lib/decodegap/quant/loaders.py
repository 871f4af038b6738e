"""The quantisation packages, loaded as each path's layer calls them (AutoAWQ's modules without its package's heavy
imports, ExLlamaV2's JIT-built extension and its shared reconstruction buffer), and QuantUnavailable, the refusal a
path raises where it cannot run here (package, device, shape), its message the reason."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path

import torch

EXLLAMAV2_MAX_DQ_SIZE = 512 * 1024**2
"""ExLlamaV2's config default `max_dq_size` (elements): its linear layer passes max_dq_rows = max_dq_size // N to
make_q_matrix, so that a product of more than MAX_Q_GEMM_ROWS (32) rows (a prefill) reconstructs the fp16 weight
into temp_dq and runs cuBLAS, and only the decode rows use the quantised GEMM. With max_dq_rows = 0 every prefill
row went through the quantised GEMM instead."""


class QuantUnavailable(RuntimeError):
    """This path cannot run here (no CUDA device, package missing, shape refused); the message is the reason."""


def awq_module(relpath: str):
    """A module of the AutoAWQ package. `import awq` pulls in `datasets` and more (absent on the GPU machine):
    where the package import fails, `awq` and its subpackages are registered as bare packages (their __init__
    not run) and the submodule is imported from them (its own imports: torch, triton, numpy, awq.utils.module).
    A submodule that still fails to import raises QuantUnavailable with the reason."""
    name = "awq." + relpath[:-3].replace("/", ".")
    try:
        importlib.import_module("awq")
    except Exception as first:  # noqa: BLE001 - any failure of the package import: bare packages instead
        spec = importlib.util.find_spec("awq") if "awq" not in sys.modules else None
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            raise QuantUnavailable(f"package autoawq not installed or broken (module awq: {first})") from first
        for pkg in ("awq", "awq.utils", "awq.modules", "awq.modules.linear", "awq.modules.triton"):
            folder = str(Path(locations[0], *pkg.split(".")[1:]))
            stub = types.ModuleType(pkg)
            stub.__path__ = [folder]
            stub.__spec__ = importlib.machinery.ModuleSpec(pkg, None, is_package=True)
            stub.__spec__.submodule_search_locations = [folder]
            sys.modules[pkg] = stub
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001
        raise QuantUnavailable(f"autoawq's {relpath} does not import here: {type(exc).__name__}: {exc}") from exc


def exllamav2():
    """(exllamav2_ext, none_tensor). The import JIT-builds the extension on a fresh machine (minutes)."""
    from exllamav2.ext import exllamav2_ext, none_tensor

    return exllamav2_ext, none_tensor


_TEMP_DQ: dict = {}


def exllamav2_temp_dq(device):
    """One fp16 reconstruction buffer per device for every ExLlamaV2 layer (as its library shares one scratch
    buffer): EXLLAMAV2_MAX_DQ_SIZE elements (+64), enough for N x min(max_dq_rows, K) of any layer (1 GiB)."""
    key = str(device)
    if key not in _TEMP_DQ:
        _TEMP_DQ[key] = torch.empty(EXLLAMAV2_MAX_DQ_SIZE + 64, dtype=torch.float16, device=device)
    return _TEMP_DQ[key]
