"""Notebook 06's peers: a public decode stack's compiled step (gpt-fast) timed beside the package's best levers in one
process, on the same random weights (harness.peers; `bash bench/measure.sh <gpu> OUTDIR peers`). A cell counts only
when it was timed and every check of its own run, system and path passed (the peer and the package's levers against
HF eager; the int4 steps layer by layer against their bf16 model, and an int4 output layer against its bf16 one);
otherwise it is said as unchecked, never counted."""

from __future__ import annotations

import pandas as pd

from decodegap import accounting

CELL = ["gpu", "model", "ctx", "run_id", "system", "arm", "quant"]
COLUMNS = CELL + ["kind", "checks", "checks_passed", "steps", "step_ms", "status", "reason"]


def peer_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per cell of peers.csv (`rows`): its check rows (how many, how many passed), its timed steps and their
    median (ms), `kind` (bf16 or int4) and `status`: `ok` when timed with every check passed, `unchecked` when timed
    without that, else the cell's own status and reason (`unavailable`, `error`)."""
    if rows.empty:
        return pd.DataFrame(columns=COLUMNS)
    out = []
    for key, g in rows.groupby(CELL, sort=True):
        checks = g[g["check"] != "-"]
        timed = g[(g["check"] == "-") & (g["status"] == "ok")]
        other = g[(g["check"] == "-") & ~g["status"].isin(["ok", "warmup"])]
        passed = int((checks["status"] == "ok").sum())
        if not timed.empty:
            status = "ok" if len(checks) and passed == len(checks) else "unchecked"
            reason = "" if status == "ok" else f"{passed} of {len(checks)} checks of its run passed"
        else:
            status = str(other["status"].iloc[0]) if not other.empty else "not timed"
            reason = str(other["reason"].iloc[0]) if not other.empty else ""
        out.append(dict(zip(CELL, key), kind="bf16" if key[-1] == "bf16" else "int4", checks=len(checks),
                        checks_passed=passed, steps=len(timed),
                        step_ms=float(timed["step_ms"].median()) if len(timed) else float("nan"),
                        status=status, reason=reason))
    return pd.DataFrame(out, columns=COLUMNS)


def findings(table: pd.DataFrame, peer: str = "gpt-fast", ours: str = "decodegap") -> list[str]:
    """Per GPU, model, context and kind: the package's checked step against the peer's from the same run, and the
    ratio; a side without a checked timing is said as such. Without rows, that none is measured yet."""
    if table.empty:
        return [f"No peer measured yet: {peer}'s compiled decode beside the package's levers is the `peers` step of "
                "bench/measure.sh (its source fetched at a pinned commit by bench/fetch_gpt_fast.sh)."]
    out = []
    for (gpu, model, ctx, run_id, kind), g in table.groupby(["gpu", "model", "ctx", "run_id", "kind"]):
        sides = {s: g[g["system"] == s] for s in (ours, peer)}
        said = []
        for system, side in sides.items():
            if side.empty:
                said.append(f"{system}: no cell")
                continue
            r = side.iloc[0]
            said.append(f"{system} {r['arm']} ({r['quant']}) {r['step_ms']:.2f} ms" if r["status"] == "ok"
                        else f"{system} {r['arm']} ({r['quant']}): {r['status']}"
                        + (f" ({r['reason']})" if r["reason"] else ""))
        both = [side.iloc[0] for side in sides.values() if not side.empty and side.iloc[0]["status"] == "ok"]
        ratio = (f"; the package's step is {both[1]['step_ms'] / both[0]['step_ms']:.2f}x as fast"
                 if len(both) == 2 else "; no ratio: a side is not a checked timing")
        out.append(f"{gpu} {model} ctx {ctx}, {kind}, run {run_id}: " + "; ".join(said) + ratio + _heads(sides[ours])
                   + ".")
    return out


def _heads(ours: pd.DataFrame) -> str:
    """For an int4 cell whose package step keeps a bf16 LM head: that gpt-fast's int4 (every nn.Linear of its model,
    harness.peers) quantises its output layer too, so the package's step reads the larger head."""
    if ours.empty or ours.iloc[0]["kind"] != "int4" or ours.iloc[0]["quant"] in accounting.HEAD_QUANTISED:
        return ""
    return (" (gpt-fast's int4 quantises its output layer too; the package's step keeps a bf16 LM head, so it reads "
            "the larger head: path int4-triton-head quantises it as well)")
