"""Notebook 06's int4 products counted offline: the thread instructions a weight of each fused int4 product
(bench/int4_sass.py's rows, data/diagnostics/int4_sass.csv): the kernel compiled for sm_90 by Triton on a machine
without a GPU, its SASS counted statically, one config for every product so that they compare like with like. Not
a timing: what it separates is the instructions each prologue and epilogue adds to the same loop, the part of an
int4 product's work the timings (analysis.closing_the_gap_int4_products) cannot tell apart."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from decodegap import paths

DIAGNOSTIC = "int4_sass"
COLUMNS = ["model", "product", "K", "N", "flavour", "config", "static", "loop", "steps", "executed",
           "thread_instructions_per_weight", "triton", "git_commit"]
MODEL, CONFIG = "llama-3.1-8b", "n8_s1_w2"  # bench/int4_sass.py's LLAMA_CONFIG
PAIRS = (("down_silu", "down", "down with SiLU(gate) * up as its prologue (down_silu) against down without it (down, "
          "the SiLU-epilogue levers')"),
         ("gate_up_norm", "gate_up_plain", "gate_up with the norm as its prologue (gate_up_norm) against none "
          "(gate_up_plain)"),
         ("qkv", "gate_up_plain", "qkv (the norm prologue) against gate_up_plain"),
         ("gate_up_silu", "gate_up_plain", "gate_up with the SiLU epilogue (gate_up_silu) against gate_up_plain"),
         ("qkv_rotary", "qkv", "qkv with the rotary epilogue (qkv_rotary) against qkv"),
         ("lm_head", "lm_head_plain", "the LM head with the final norm as its prologue (lm_head) against none "
          "(lm_head_plain, the all-epilogues levers')"),
         ("qkv_rotary", "qkv_rotary_plain", "qkv with the rotary epilogue and the norm prologue (qkv_rotary) against "
          "none (qkv_rotary_plain, the epilogue-norms levers')"))
"""(product, baseline, what the comparison is) of the findings' ratios."""


def load(data: Path | None = None) -> pd.DataFrame:
    """The rows of data/diagnostics/int4_sass.csv (empty with COLUMNS when the file is absent)."""
    path = (Path(data) if data is not None else paths.DATA) / "diagnostics" / f"{DIAGNOSTIC}.csv"
    if not path.exists():
        return pd.DataFrame(columns=COLUMNS)
    return pd.read_csv(path)


def findings(rows: pd.DataFrame, model: str = MODEL, config: str = CONFIG) -> list[str]:
    """One line of `model`'s products at `config` (the newest Triton version's rows), then one of the ratios PAIRS
    name where both products have rows; without rows, that none are counted."""
    rows = rows[(rows["model"] == model) & (rows["config"] == config)] if len(rows) else rows
    if rows.empty:
        return [f"The fused int4 products' instructions are not counted for {model} at {config} "
                "(bench/int4_sass.py compiles them offline; it needs Triton, not a GPU)."]
    version = sorted(rows["triton"].astype(str))[-1]
    rows = rows[rows["triton"].astype(str) == version].drop_duplicates("product", keep="last").set_index("product")
    per = rows["thread_instructions_per_weight"].astype(float)
    normed = [name for name in ("o_norm", "down_norm") if name in per.index]
    commits = ", ".join(sorted({str(c)[:7] for c in rows.get("git_commit", pd.Series(dtype=str)).dropna()}))
    first = (f"Offline (no GPU): {model}'s fused int4 products compiled for sm_90 by Triton {version} at one config, "
             f"{config}, their SASS counted statically (data/diagnostics/int4_sass.csv, commit {commits or 'unknown'}; "
             "not a timing): thread instructions a weight, the loop's counted once for each loop step, "
             + ", ".join(f"{name} {value:.2f}" for name, value in per.items())
             + (f" ({' and '.join(normed)}: the output-norm code, which one program runs, counted in every program, "
                "an upper bound)" if normed else "") + ".")
    ratios = [f"{what} {per[a] / per[b]:.2f}x" for a, b, what in PAIRS if a in per.index and b in per.index]
    if not ratios:
        return [first]
    return [first, "Instructions a weight, product against product: " + "; ".join(ratios) + ". A prologue runs in "
            "every program for each column it reads; an epilogue once for each output row."]
