"""bench/build_flash_attn.sh's Python steps (a shell script keeps no Python of its own): a trimmed build of the
flash-attn package's CUDA extension `flash_attn_2_cuda`, only what `flash_attn_with_kvcache` runs at batch 1 for the
three models (head dim 128, bf16).

  python3 bench/flash_attn_build.py package SRC OUT
      copies the Python package SRC/flash_attn (its flash_attn_interface.py does `import flash_attn_2_cuda`) to
      OUT/flash_attn, beside the extension, so that OUT on PYTHONPATH (bench/gpu_env.sh adds .ext) imports both.
  python3 bench/flash_attn_build.py patch WORK
      applies PATCHES to the copies WORK/csrc/flash_attn/src/static_switch.h and WORK/csrc/flash_attn/flash_api.cpp;
      exits non-zero unless each patch matches exactly once (sources changed: stop, never build unpatched).
  python3 bench/flash_attn_build.py build SRC OUT
      copies SRC/csrc/flash_attn to a temporary folder, patches it, prints the plan, compiles SOURCES with torch's
      JIT builder (ninja, MAX_JOBS parallel nvcc jobs, for TORCH_CUDA_ARCH_LIST), copies flash_attn_2_cuda.so to
      OUT and writes OUT/flash_attn_build.json (hardware.kernel_builds copies it into env.json as kernel_builds).
      FA_CXX_STD (default c++17, upstream's) is the C++ standard; FA_BUILD_KEEP=1 keeps the build folder.

What is compiled: flash_api.cpp and the four head-dim-128 bf16 forward files, plain and split-KV, causal and not
(SOURCES). mha_fwd_kvcache runs the plain forward kernel when its split heuristic picks one split and the split-KV
kernel otherwise, so it needs both; a decode query (one token) is not causal, a prefill is. The upstream setup.py
compiles every head dim (32 to 256), fp16 and bf16, forward, split-KV and backward: FULL_BUILD_FILES counts them.
The kernels are FlashAttention-2's Ampere (sm80) kernels, compiled for the GPU's own architecture from
TORCH_CUDA_ARCH_LIST (9.0 on an H200): sm_80 machine code alone would not load on sm_90 (a cubin runs only on GPUs
of its major compute capability), so the sm80 kernel family is built as sm_90 code, as upstream's "90" target does.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOURCES = ("flash_api.cpp",
           "src/flash_fwd_hdim128_bf16_sm80.cu", "src/flash_fwd_hdim128_bf16_causal_sm80.cu",
           "src/flash_fwd_split_hdim128_bf16_sm80.cu", "src/flash_fwd_split_hdim128_bf16_causal_sm80.cu")
"""Paths under csrc/flash_attn of what the trimmed build compiles."""

DISABLED = ("FLASHATTENTION_DISABLE_BACKWARD", "FLASHATTENTION_DISABLE_DROPOUT", "FLASHATTENTION_DISABLE_ALIBI",
            "FLASHATTENTION_DISABLE_SOFTCAP", "FLASHATTENTION_DISABLE_UNEVEN_K", "FLASHATTENTION_DISABLE_LOCAL")
"""flash-attn's own switches (csrc/flash_attn/src/static_switch.h, flash_api.cpp): each fixes a template flag
(fewer kernels per file) and makes the host code refuse the feature instead of running it. Decode needs none of
them: inference (no backward, no dropout), no ALiBi, no soft-cap, no sliding window; head dim 128 is a multiple of
32, so K is always even."""

# upstream setup.py's flags for flash_attn_2_cuda; -std=c++17 as upstream (FA_CXX_STD chooses another)
NVCC_FLAGS = ("-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
              "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "--expt-relaxed-constexpr", "--expt-extended-lambda",
              "--use_fast_math")
CXX_FLAGS = ("-O3",)

HEADDIM_128 = r"""#define HEADDIM_SWITCH(HEADDIM, ...)                                        \
  [&] {                                                                     \
    TORCH_CHECK((HEADDIM) == 128, "this trimmed flash-attn build (decodegap "  \
                "bench/build_flash_attn.sh) has head dim 128 only, not ",      \
                (HEADDIM));                                                 \
    constexpr static int kHeadDim = 128;                                    \
    return __VA_ARGS__();                                                   \
  }()"""
BF16_ONLY = r"""#define FP16_SWITCH(COND, ...)                                              \
  [&] {                                                                     \
    TORCH_CHECK(!(COND), "this trimmed flash-attn build (decodegap "           \
                "bench/build_flash_attn.sh) has bf16 kernels only, not fp16"); \
    using elem_type = cutlass::bfloat16_t;                                  \
    return __VA_ARGS__();                                                   \
  }()"""
NO_BACKWARD_BODY = ('{\n    TORCH_CHECK(false, "this trimmed flash-attn build (decodegap bench/build_flash_attn.sh) '
                    'has no backward kernels");\n}')
BWD_SIGNATURE = "void run_mha_bwd(Flash_bwd_params &params, cudaStream_t stream)"

PATCHES = (
    ("src/static_switch.h", "HEADDIM_SWITCH: head dim 128 only",
     "the dispatch names a kernel for every head dim (32 to 256); only the 128 kernels are compiled, so any other "
     "name would be an undefined symbol when Python loads the extension; another head dim now raises instead"),
    ("src/static_switch.h", "FP16_SWITCH: bf16 only",
     "the same for the fp16 kernels: the models run bf16; an fp16 call now raises"),
    ("flash_api.cpp", "run_mha_bwd: raises",
     "FLASHATTENTION_DISABLE_BACKWARD makes mha_bwd refuse before it calls run_mha_bwd, yet run_mha_bwd still names "
     "the backward kernels (not compiled): its body becomes the same refusal"),
)


def _replace_macro(text: str, name: str, replacement: str) -> tuple[str, int]:
    """`text` with every definition of macro `name` (its #define line and the lines its backslashes continue)
    replaced by `replacement`, and how many there were."""
    lines, out, found, i = text.split("\n"), [], 0, 0
    while i < len(lines):
        if re.match(rf"\s*#\s*define\s+{name}\(", lines[i]):
            found += 1
            while lines[i].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
            out.append(replacement)
        else:
            out.append(lines[i])
        i += 1
    return "\n".join(out), found


def _replace_body(text: str, signature: str, body: str) -> tuple[str, int]:
    """`text` with the braces-delimited body of the function whose definition starts with `signature` replaced by
    `body`, and how many such definitions there were (only the first is replaced)."""
    found = len(re.findall(re.escape(signature) + r"\s*\{", text))
    if not found:
        return text, 0
    start = re.search(re.escape(signature) + r"\s*\{", text).end() - 1
    depth = 0
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            return text[:start] + body + text[end + 1:], found
    return text, 0  # unbalanced: not patched


def patch(work: str) -> str:
    """Apply PATCHES to the sources under `work` (a copy); return the sha256 of the patched files."""
    root = Path(work) / "csrc" / "flash_attn"
    switch, api = root / "src" / "static_switch.h", root / "flash_api.cpp"
    text, n_dim = _replace_macro(switch.read_text(), "HEADDIM_SWITCH", HEADDIM_128)
    text, n_fp16 = _replace_macro(text, "FP16_SWITCH", BF16_ONLY)
    api_text, n_bwd = _replace_body(api.read_text(), BWD_SIGNATURE, NO_BACKWARD_BODY)
    counts = dict(zip((p[1] for p in PATCHES), (n_dim, n_fp16, n_bwd)))
    bad = {k: n for k, n in counts.items() if n != 1}
    if bad:
        sys.exit("build_flash_attn: each patch must match exactly once; "
                 + ", ".join(f"{k}: found {n}" for k, n in bad.items()) + " (sources changed?)")
    switch.write_text(text)
    api.write_text(api_text)
    for _, what, _ in PATCHES:
        print("build_flash_attn: patched", what)
    return hashlib.sha256(switch.read_bytes() + api.read_bytes()).hexdigest()


def package(src: str, out: str) -> None:
    """The Python package flash_attn beside the extension (its interface imports `flash_attn_2_cuda` by name)."""
    shutil.copytree(Path(src) / "flash_attn", Path(out) / "flash_attn", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))


def full_build_files(src: str) -> int:
    """How many CUDA files upstream's setup.py compiles into flash_attn_2_cuda (read from it, not assumed)."""
    setup = Path(src) / "setup.py"
    return len(set(re.findall(r'"csrc/flash_attn/src/[\w]+\.cu"', setup.read_text()))) if setup.exists() else 0


def ninja_times(build_dir: Path) -> dict[str, float]:
    """Seconds per compiled object from ninja's log (lines: start ms, end ms, mtime, output, hash)."""
    log = build_dir / ".ninja_log"
    out = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        parts = line.split("\t")
        if len(parts) >= 4 and parts[0].isdigit() and parts[3].endswith(".o"):
            out[parts[3]] = (int(parts[1]) - int(parts[0])) / 1e3
    return out


def _source_commit(src: str) -> str:
    if os.path.exists(f"{src}/COMMIT"):  # an export: `git -C` inside this repository would name its own commit
        with open(f"{src}/COMMIT") as fh:
            return fh.read().strip()
    return subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def build(src: str, out: str) -> None:
    import torch
    from torch.utils import cpp_extension

    jobs = int(os.environ.get("MAX_JOBS") or os.cpu_count() or 1)
    std = os.environ.get("FA_CXX_STD", "c++17")
    full = full_build_files(src)
    n_cuda = sum(s.endswith(".cu") for s in SOURCES)
    print(f"build_flash_attn: {n_cuda} CUDA files and 1 C++ file on {min(len(SOURCES), jobs)} parallel jobs "
          f"(MAX_JOBS {jobs}) for TORCH_CUDA_ARCH_LIST {os.environ.get('TORCH_CUDA_ARCH_LIST', '(torch default)')}: "
          f"they compile side by side, so the build takes about as long as its slowest file; the full package "
          f"compiles {full} CUDA files, about {math.ceil(full / jobs)} such rounds on these jobs", flush=True)
    work = Path(tempfile.mkdtemp(prefix="flash_attn_build."))
    try:
        shutil.copytree(Path(src) / "csrc" / "flash_attn", work / "csrc" / "flash_attn")
        patch_sha256 = patch(str(work))
        root = work / "csrc" / "flash_attn"
        defines = [f"-D{d}" for d in DISABLED]
        build_dir = work / "build"
        build_dir.mkdir()
        t0 = time.perf_counter()
        module = cpp_extension.load(
            name="flash_attn_2_cuda", sources=[str(root / s) for s in SOURCES],
            extra_cflags=[*CXX_FLAGS, f"-std={std}", *defines],
            extra_cuda_cflags=[*NVCC_FLAGS, f"-std={std}", *defines],
            extra_include_paths=[str(root), str(root / "src"),
                                 str((Path(src) / "csrc" / "cutlass" / "include").resolve())],
            build_directory=str(build_dir), verbose=True)
        seconds = time.perf_counter() - t0
        if not hasattr(module, "fwd_kvcache"):
            sys.exit("build_flash_attn: the built module has no fwd_kvcache")
        shutil.copy2(build_dir / "flash_attn_2_cuda.so", Path(out) / "flash_attn_2_cuda.so")
        times = ninja_times(build_dir)
        cuda_times = [t for name, t in times.items() if name.endswith(".cuda.o")]  # torch's name for a .cu object
        estimate = math.ceil(full / jobs) * (sum(cuda_times) / len(cuda_times)) if cuda_times and full else None
        nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()
        info = dict(kernel="flash_attn_2_cuda (Dao-AILab/flash-attention), trimmed: head dim 128, bf16, forward and "
                           "split-KV forward",
                    head_dims=[128], dtypes=["bfloat16"],  # what HEADDIM_128 and BF16_ONLY keep
                    source_commit=_source_commit(src) or "not a git checkout",
                    sources=list(SOURCES), compile_s=times, defines=list(DISABLED),
                    patches=[dict(file=f, patch=what, why=why) for f, what, why in PATCHES],
                    patched_files_sha256=patch_sha256, nvcc_flags=[*NVCC_FLAGS, f"-std={std}"],
                    arch_list=os.environ.get("TORCH_CUDA_ARCH_LIST"), nvcc=nvcc[-1] if nvcc else "not found",
                    torch=torch.__version__, jobs=jobs, build_s=round(seconds, 1), full_build_cuda_files=full,
                    full_build_estimate_s=round(estimate) if estimate else None)
        with open(Path(out) / "flash_attn_build.json", "w") as fh:
            json.dump(info, fh, indent=1)
        print(f"build_flash_attn: built in {seconds:.0f} s; per CUDA file "
              + (f"{min(cuda_times):.0f}-{max(cuda_times):.0f} s" if cuda_times else "(no ninja log)")
              + (f"; the full package's {full} CUDA files at that mean on {jobs} jobs: about {estimate:.0f} s"
                 if estimate else ""), flush=True)
    finally:
        if os.environ.get("FA_BUILD_KEEP"):  # to read the build folder (ninja's files, the objects) afterwards
            print("build_flash_attn: kept", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["patch"] and len(sys.argv) == 3:
        print("build_flash_attn: patched files sha256", patch(sys.argv[2]))
    elif sys.argv[1:2] == ["package"] and len(sys.argv) == 4:
        package(*sys.argv[2:])
    elif sys.argv[1:2] == ["build"] and len(sys.argv) == 4:
        build(*sys.argv[2:])
    else:
        sys.exit(__doc__)
