"""The Triton kernels compiled for sm_90 (Hopper, the H200's) by this machine's Triton without a GPU, and read back
with Triton's bundled cuobjdump: what the offline compile tests (tests/test_fused.py, tests/test_fused_int4.py) and
the instruction count (bench/int4_sass.py) look at."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path


def compile_sm90(kernel, types: dict, constexprs: dict, warps: int, pdl: bool = False):
    """`kernel` (a triton.jit function) compiled for sm_90 as a launch specialises it: `types` its runtime arguments'
    Triton types (pointers and ints divisible by 16), the rest `constexprs`; `pdl`: launched with launch_pdl."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = kernel.arg_names
    signature = {n: types.get(n, "constexpr") for n in names}
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n, t in types.items() if t != "fp32"}
    return triton.compile(ASTSource(kernel, signature, constexprs=constexprs, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options=dict(num_warps=warps, launch_pdl=bool(pdl)))


def cuobjdump(compiled, option: str) -> str:
    """Triton's bundled cuobjdump with `option` (-sass, --dump-resource-usage) on a compile's cubin."""
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        return subprocess.run([str(tool), option, str(cubin)], capture_output=True, text=True, check=True).stdout
