"""bench/build_marlin.sh's two Python steps (a shell script keeps no Python of its own).

  python3 bench/marlin_build.py patch KERNEL
      replaces the cache-hinted cp.async of cp_async4_stream in KERNEL (marlin/marlin_cuda_kernel.cu, a copy) by a
      plain `cp.async.cg.shared.global` (nvcc 13.0's ptxas on sm_90 drops the createpolicy; marlin issues 40, 44);
      exits non-zero unless exactly one such block was found.
  python3 bench/marlin_build.py record SRC KERNEL OUT SECONDS
      writes OUT/marlin_build.json (source commit, patch, the patched kernel's sha256, nvcc, build seconds), which
      hardware.kernel_builds copies into env.json.
"""

import hashlib
import json
import os
import re
import subprocess
import sys

HINTED = re.compile(r'asm volatile\(\s*"\{\\n"\s*"\s*\.reg \.b64 p;\\n"\s*"\s*createpolicy[^;]*;"\s*'
                    r'"\s*cp\.async\.cg\.shared\.global\.L2::cache_hint \[%0\], \[%1\], %2, p;\\n"\s*"\}\\n"')
PLAIN = 'asm volatile(\n    "cp.async.cg.shared.global [%0], [%1], %2;\\n"'


def patch(path: str) -> None:
    with open(path) as fh:
        src = fh.read()
    patched, n = HINTED.subn(lambda _: PLAIN, src)  # a function: the replacement is taken as it is
    if n != 1:
        sys.exit(f"build_marlin: expected one cache-hinted cp.async in cp_async4_stream, found {n}: sources changed?")
    with open(path, "w") as fh:
        fh.write(patched)
    print("build_marlin: patched cp_async4_stream (plain cp.async.cg.shared.global)")


def record(src: str, kernel: str, out: str, seconds: str) -> None:
    if os.path.exists(f"{src}/COMMIT"):  # an export; `git -C` inside this repository would name this repository's commit
        with open(f"{src}/COMMIT") as fh:
            commit = fh.read().strip()
    else:
        commit = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    with open(kernel, "rb") as fh:
        kernel_sha256 = hashlib.sha256(fh.read()).hexdigest()
    info = dict(kernel="marlin_cuda (IST-DASLab/marlin)", source_commit=commit or "not a git checkout",
                patch="cp_async4_stream: plain cp.async.cg.shared.global (no createpolicy L2 hint; marlin issues 40, 44)",
                patched_kernel_sha256=kernel_sha256, nvcc=nvcc, build_s=int(seconds))
    with open(f"{out}/marlin_build.json", "w") as fh:
        json.dump(info, fh, indent=1)
    print("build_marlin:", json.dumps(info))


if __name__ == "__main__":
    if sys.argv[1:2] == ["patch"] and len(sys.argv) == 3:
        patch(sys.argv[2])
    elif sys.argv[1:2] == ["record"] and len(sys.argv) == 6:
        record(*sys.argv[2:])
    else:
        sys.exit(__doc__)
