"""The fused int4 product's instructions a weight, counted offline: every int4 product of the fused int4 steps
(kernels.fused_int4.configs.products) of Llama-3.1-8B and Qwen2.5-7B compiled by this machine's Triton for sm_90
(Hopper, the H200's), without a GPU and without PDL, at LLAMA_CONFIG (one config for every product, so that products
compare like with like) and at each config the product's table entries hold (kernels.fused_int4.configs). The
cubin's SASS (Triton's bundled cuobjdump) is counted: the kernel's instructions, its loop's (the instructions from a
backward branch's target to the branch), and the loop steps the shape takes (K / (32 lanes x warps x SUB chunks of
32 columns)), so that a program executes about static + loop x (steps - 1) instructions. Per weight:
those x the program's threads (32 a warp) / the weights it reads (BLOCK_N x K): thread instructions a weight, which
the int4 GEMV's docstring (kernels.int4_gemv.kernel) sets against the instruction issue the bandwidth allows.

What this is not: a timing. No GPU runs here; the counts are static (a predicated-off instruction counts, and the
output norm's last-block code counts in every program: an upper bound for residual_norm). The timings are
bench/fused_int4_gemv.py's, on the GPU.

Writes data/diagnostics/int4_sass.csv (decodegap.diagnostics: DECODEGAP_DIAG_DIR=OUTDIR writes OUTDIR/int4_sass.csv),
one row per (product, config): model, product, K, N, flavour, config, static, loop, steps, executed,
thread_instructions_per_weight, triton, then the run's provenance. A (product shape, flavour, config, Triton version)
with a row already is not compiled again.
Usage (repository root; needs Triton, pip install triton, not a GPU): PYTHONPATH=lib python3 bench/int4_sass.py
"""

import csv
import re
import sys
from pathlib import Path

from decodegap import paths
from decodegap.diagnostics import Rows
from decodegap.harness import models
from decodegap.kernels import offline
from decodegap.kernels.fused_int4 import configs as int4_configs, signature

MODELS = ("llama-3.1-8b", "qwen2.5-7b")
LLAMA_CONFIG = (8, 1, 2)  # (BLOCK_N, SUB_MAX, num_warps): a config of INT4_CONFIGS every product can run
GROUP_SIZE = 128
FIELDS = ("model", "product", "K", "N", "flavour", "config", "static", "loop", "steps", "executed",
          "thread_instructions_per_weight", "triton")
_ADDRESS = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*)$")
_BRANCH = re.compile(r"\bBRA\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)")


def instructions(sass: str) -> list[tuple[int, str]]:
    """(address, text) of each SASS instruction of a cuobjdump -sass listing."""
    out = []
    for line in sass.splitlines():
        m = _ADDRESS.match(line)
        if m:
            out.append((int(m.group(1), 16), m.group(2).split(";")[0].strip()))
    return out


def loop_length(listing: list[tuple[int, str]]) -> int:
    """The instructions of the longest loop: from a backward branch's target to the branch, both included (0 when no
    branch goes backward; the trailing self-branch that ends a kernel, `BRA` to its own address, is not a loop)."""
    longest = 0
    for i, (address, text) in enumerate(listing):
        m = _BRANCH.search(text)
        if m and int(m.group(1), 16) < address:
            target = int(m.group(1), 16)
            longest = max(longest, sum(1 for a, _ in listing[:i + 1] if a >= target))
    return longest


def loop_steps(K: int, config: tuple[int, int, int], group_size: int = GROUP_SIZE) -> int:
    """The loop steps of a product of K columns on `config`: K / 32 chunks, CHUNKS (32 a warp) x SUB a step, SUB the
    config's SUB_MAX capped at the chunks of a group (the kernel's SUB)."""
    _, sub_max, warps = config
    sub = min(sub_max, group_size // 32)
    return -(-(K // 32) // (32 * warps * sub))


def per_weight(static: int, loop: int, steps: int, config: tuple[int, int, int], K: int) -> tuple[int, float]:
    """(instructions a program executes, thread instructions a weight): static + loop x (steps - 1), times the
    program's 32 x warps threads, over its BLOCK_N x K weights."""
    block_n, _, warps = config
    executed = static + loop * max(0, steps - 1)
    return executed, executed * 32 * warps / (block_n * K)


def configs_of(K: int, N: int, flavour: str) -> list[tuple[int, int, int]]:
    """LLAMA_CONFIG, then each config the table holds for this product (any launch)."""
    table = [c for (n, k, f, _), c in int4_configs.FUSED_INT4_CONFIGS.items() if (n, k, f) == (N, K, flavour)]
    return list(dict.fromkeys([LLAMA_CONFIG, *table]))


def done(path: Path, version: str) -> set:
    """(K, N, flavour, config) with a row of this Triton version in `path` (or the committed file)."""
    out = set()
    for p in {path, paths.DATA / "diagnostics" / "int4_sass.csv"}:
        if p.exists():
            with open(p, newline="") as fh:
                out |= {(int(r["K"]), int(r["N"]), r["flavour"], r["config"]) for r in csv.DictReader(fh)
                        if r["triton"] == version}
    return out


def main() -> None:
    try:
        import triton
    except ImportError:
        sys.exit("int4_sass: needs Triton (pip install triton): it compiles the kernel for sm_90 without a GPU")
    from decodegap.kernels.fused_int4 import source as int4_source

    kernel = int4_source.build()
    out = Rows("int4_sass", FIELDS)
    had = done(out.path, triton.__version__)
    for key in MODELS:
        model_config = models.load_spec(key).config
        for name, K, N, flavour in int4_configs.products(model_config):
            for config in configs_of(K, N, flavour):
                word = int4_configs.config_key(config)
                if (K, N, flavour, word) in had:
                    continue
                had.add((K, N, flavour, word))
                flags = signature.constexprs(K, N, flavour, config, model_config, GROUP_SIZE)
                compiled = offline.compile_sm90(kernel, signature.ARG_TYPES, flags, config[2])
                listing = instructions(offline.cuobjdump(compiled, "-sass"))
                loop, steps = loop_length(listing), loop_steps(K, config)
                executed, weight = per_weight(len(listing), loop, steps, config, K)
                out.add(model=key, product=name, K=K, N=N, flavour=flavour, config=word, static=len(listing),
                        loop=loop, steps=steps, executed=executed, thread_instructions_per_weight=f"{weight:.3f}",
                        triton=triton.__version__)


if __name__ == "__main__":
    main()
