"""Notebook 04's correctness verdicts, from verify.csv: each cell's check label (the arm against eager, the
quantised model against bf16), the layer checks per path and row count, the model checks in the order run, and
the sentences on them. quant_report joins the labels to the timed cells. Which quantised cell counts as checked is
decodegap.checked.quantised_checks' (one definition for every reader); `coverage` counts the cells by it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from decodegap.quant import paths as quant
from decodegap.finding import Finding, span as _values
from decodegap.stats import span as _span
from decodegap.outcome import CHECK_FAILED


def _check_label(err: float, tol: float) -> tuple[str, bool]:
    if pd.isna(err):
        return "failed: NaN logits", True
    if not err <= tol:
        return f"failed: {err:.3g} > {tol:g}", True
    return f"ok {err:.4f}", False


def checks(cell_table: pd.DataFrame, verify_rows: pd.DataFrame | None) -> pd.DataFrame:
    """Each cell's whole-model correctness check: `check` (a label) and `check_failed` (bool), one per row of
    `cell_table` in its order.

    An arm other than eager is checked against the same model's eager arm before it is timed
    (checks.verify_arm: teacher-forced logits, relative to the eager logits' max, within `tol`). Its label is
    "ok <err>" from its verify.csv row, or "failed: <err> > <tol>" past the tolerance, or "failed: NaN logits"
    where the error is NaN (rows recorded before verify_arm failed NaN say `ok` with a NaN error: the label
    goes by the number, not the status). An `error` decode row whose reason says its check failed
    (outcome.CHECK_FAILED) but that has no verify row is "failed (no verify row)": its number is never read
    back from the text. The eager arm is the reference of
    those checks: "reference", except where a check of the same (gpu, model, ctx, attn, quant) gave NaN
    logits, which puts the model itself in doubt: then it is "failed: NaN logits (in its <arm> check)".
    A quantised cell's model check (verify.csv `vs_bf16`: the quantised model against the bf16 model it came
    from, the last row of the cell) labels its eager arm ("model check ok <err>"), and, where it failed, every
    arm of that cell ("model check failed: ..."; such cells are never timed). A cell with none of these is
    "not checked" (not counted as failed)."""
    keys = ["gpu", "model", "ctx", "arm", "attn", "quant"]
    verify, model_check = {}, {}
    if verify_rows is not None and not verify_rows.empty:
        if "check" in verify_rows:
            arm_checks = verify_rows[verify_rows["check"] == "vs_eager"]
            for r in verify_rows[verify_rows["check"] == "vs_bf16"].itertuples():  # in run order: the last counts
                model_check[(r.gpu, r.model, int(r.ctx), r.quant)] = (float(r.max_rel_err), float(r.tol))
        else:
            arm_checks = verify_rows
        for r in arm_checks.drop_duplicates(keys, keep="last").itertuples():
            verify[(r.gpu, r.model, int(r.ctx), r.arm, r.attn, r.quant)] = (float(r.max_rel_err), float(r.tol))
    labels = {}
    for r in cell_table.itertuples():
        key = (r.gpu, r.model, int(r.ctx), r.arm, r.attn, r.quant)
        if key in verify:
            labels[key] = _check_label(*verify[key])
            continue
        if str(getattr(r, "reason", "") or "").startswith(CHECK_FAILED):
            labels[key] = ("failed (no verify row)", True)
    nan_checks = {}
    for (gpu, model, ctx, arm, attn, q), (err, _) in verify.items():
        if pd.isna(err) and arm != "eager":
            nan_checks.setdefault((gpu, model, ctx, attn, q), arm)
    check, failed = [], []
    for r in cell_table.itertuples():
        key = (r.gpu, r.model, int(r.ctx), r.arm, r.attn, r.quant)
        against_bf16 = model_check.get((r.gpu, r.model, int(r.ctx), r.quant))
        model_label = None
        if against_bf16 is not None:
            text, bad = _check_label(*against_bf16)
            model_label = ("model check " + text, bad)
        if model_label is not None and model_label[1]:
            label = model_label
        elif r.arm == "eager":
            other = nan_checks.get(key[:3] + key[4:])
            if other:
                label = (f"failed: NaN logits (in its {other} check)", True)
            else:
                label = model_label or ("reference", False)
        else:
            label = labels.get(key, ("not checked", False))
        check.append(label[0])
        failed.append(label[1])
    return pd.DataFrame({"check": check, "check_failed": failed}, index=cell_table.index)


def layer_summary(verify_rows: pd.DataFrame) -> pd.DataFrame:
    """The layer checks (verify.csv, check `layer`) per (gpu, quant, rows): how many (model, layer) were checked,
    how many failed (past their tolerance, NaN included), the largest error, the tolerance, and the layer of it."""
    cols = ["gpu", "quant", "rows", "checked", "failed", "unavailable", "max_rel_err", "tol", "worst"]
    if verify_rows.empty or "check" not in verify_rows:
        return pd.DataFrame(columns=cols)
    v = verify_rows[verify_rows["check"] == "layer"]
    v = v.drop_duplicates(["gpu", "model", "quant", "layer", "rows"], keep="last")
    out = []
    for (gpu, key, rows), g in v.groupby(["gpu", "quant", "rows"]):
        ran = g[g["status"] != "unavailable"]
        worst = ran.loc[ran["max_rel_err"].idxmax()] if ran["max_rel_err"].notna().any() else None
        out.append(dict(gpu=gpu, quant=key, rows=int(rows), checked=len(ran), failed=int((ran["status"] != "ok").sum()),
                        unavailable=int((g["status"] == "unavailable").sum()),
                        max_rel_err=float(ran["max_rel_err"].max()) if len(ran) else np.nan,
                        tol=float(g["tol"].max()),
                        worst=f"{worst['model']} {worst['layer']}" if worst is not None else ""))
    order = {k: i for i, k in enumerate(quant.PATHS)}
    table = pd.DataFrame(out, columns=cols)
    return table.sort_values(["gpu", "quant", "rows"], key=lambda c: c.map(order) if c.name == "quant" else c)\
                .reset_index(drop=True)


def model_checks(verify_rows: pd.DataFrame) -> pd.DataFrame:
    """The model checks of the quantised paths (verify.csv, check `vs_bf16`: every decoder layer fed the bf16
    model's input, quant_check), one row per (gpu, model, ctx, quant, tol) in the order run: the error, the
    tolerance it was judged by and the verdict; beside it the end-to-end logits error of the same cell where an
    earlier run recorded it (check `vs_bf16_logits`)."""
    cols = ["gpu", "model", "ctx", "quant", "max_rel_err", "tol", "status", "logits_err_end_to_end"]
    if verify_rows.empty or "check" not in verify_rows:
        return pd.DataFrame(columns=cols)
    key = ["gpu", "model", "ctx", "quant"]
    v = verify_rows[verify_rows["check"] == "vs_bf16"].drop_duplicates(key + ["tol"], keep="last")
    ends = (verify_rows[verify_rows["check"] == "vs_bf16_logits"].drop_duplicates(key, keep="last")
            .set_index(key)["max_rel_err"].rename("logits_err_end_to_end"))
    out = v.join(ends, on=key)
    return out[cols].reset_index(drop=True)


def check_findings(verify_rows: pd.DataFrame) -> list[Finding]:
    """Sentences on the checks, from the rows: per GPU and path the layer checks at one row and at prefill rows,
    the model checks' errors against their tolerances, and the end-to-end logits errors that the model check
    replaced. Each is a Finding (gpu, quant): per kind of layer check (`layer_one_row_*`, `layer_prefill_*`) the
    checks, how many passed, the tolerance and the largest error (and the prefill rows); per model check
    (`model_check_<model>_tol<tol>_*`) its tolerance, error span, contexts and how many passed; the end-to-end
    logits error span (`logits_err_end_to_end_min`, `_max`)."""
    out = []
    layers = layer_summary(verify_rows)
    model_check_rows = model_checks(verify_rows)
    for gpu in sorted(set(layers["gpu"]) | set(model_check_rows["gpu"])):
        for key in [k for k in quant.PATHS if k != "bf16"]:
            parts, values = [], {}
            lay = layers[(layers["gpu"] == gpu) & (layers["quant"] == key)]
            for multi, g in lay.groupby(lay["rows"] > 1):
                rows = "prefill rows (" + ", ".join(str(r) for r in g["rows"]) + ")" if multi else "one row"
                failed, checked = int(g["failed"].sum()), int(g["checked"].sum())
                parts.append(f"layer checks at {rows}: {checked - failed} of {checked} "
                             f"within {g['tol'].max():g}, largest {g['max_rel_err'].max():.4f}")
                name = "layer_prefill" if multi else "layer_one_row"
                values.update({f"{name}_passed": checked - failed, f"{name}_checks": checked, f"{name}_tol": float(g["tol"].max()),
                               f"{name}_max_rel_err": float(g["max_rel_err"].max())})
                if multi:
                    values["layer_prefill_rows"] = ", ".join(str(r) for r in g["rows"])
            m = model_check_rows[(model_check_rows["gpu"] == gpu) & (model_check_rows["quant"] == key)]
            for (model, tol), g in m.groupby(["model", "tol"], sort=False):
                ok = int((g["status"] == "ok").sum())
                parts.append(f"model check on {model} (each layer fed the bf16 input) {_span(g['max_rel_err'], '.2f')} "
                             f"against tolerance {tol:.3f}: {ok} of {len(g)} contexts pass")
                name = f"model_check_{model}_tol{tol:.3f}"
                values.update({f"{name}_tol": float(tol), **_values(f"{name}_max_rel_err", g["max_rel_err"]),
                               f"{name}_passed": ok, f"{name}_contexts": len(g)})
            ends = m["logits_err_end_to_end"].dropna()
            if not ends.empty:
                parts.append(f"end to end the logits differ by {_span(ends)} (unrelated), which is why the model "
                             "check feeds each layer the bf16 input")
                values.update(_values("logits_err_end_to_end", ends))
            if parts:
                out.append(Finding(f"{gpu} {key}: " + "; ".join(parts) + ".", gpu=gpu, quant=key, **values))
    return out


def coverage(cell_table: pd.DataFrame) -> pd.DataFrame:
    """Per GPU and quantised path of notebook 04's timed cells (quant_report.cells, status `ok` or `unchecked`),
    by the one definition of a checked quantised cell (decodegap.checked.quantised_checks, carried as
    `quant_check`, `model_k`, `measured`): `timed`, `checked` (counted: status ok), `unchecked` (drawn, never
    counted) and of those `earlier_rule` (measured before in-run layer checks, between `earlier_from` and
    `earlier_to`) and `failing` (a check of the current rule failed, inconclusive or missing); the k span of the
    checked cells (`k_min`, `k_max`) and their contexts."""
    from decodegap import checked

    cols = ["gpu", "quant", "timed", "checked", "unchecked", "earlier_rule", "failing", "earlier_from", "earlier_to",
            "k_min", "k_max", "checked_contexts"]
    if cell_table.empty or "quant_check" not in cell_table:
        return pd.DataFrame(columns=cols)
    timed = cell_table[(cell_table["quant"] != "bf16") & cell_table["status"].isin(["ok", checked.UNCHECKED])]
    out = []
    for (gpu, key), g in timed.groupby(["gpu", "quant"]):
        ok, drawn = g[g["status"] == "ok"], g[g["status"] == checked.UNCHECKED]
        earlier = drawn[drawn["quant_check"] == checked.EARLIER_RULE]
        out.append(dict(gpu=gpu, quant=key, timed=len(g), checked=len(ok), unchecked=len(drawn),
                        earlier_rule=len(earlier), failing=len(drawn) - len(earlier),
                        earlier_from=min(earlier["measured"]) if len(earlier) else "",
                        earlier_to=max(earlier["measured"]) if len(earlier) else "",
                        k_min=float(ok["model_k"].min()) if len(ok) else np.nan,
                        k_max=float(ok["model_k"].max()) if len(ok) else np.nan,
                        checked_contexts=", ".join(str(int(c)) for c in sorted(set(ok["ctx"])))))
    order = {k: i for i, k in enumerate(quant.PATHS)}
    table = pd.DataFrame(out, columns=cols)
    return table.sort_values(["gpu", "quant"], key=lambda c: c.map(order) if c.name == "quant" else c)\
                .reset_index(drop=True)


def coverage_text(r) -> str:
    """One row of `coverage` in words: '<path>: <n> of <m> timed cells checked in their own run (k a-b, ctx ...),
    <u> drawn unchecked (<e> measured <from> to <to>, before in-run layer checks; <f> failing a check)'."""
    text = f"{r.quant}: {r.checked} of {r.timed} timed cells checked in their own run"
    if r.checked:
        k = f"{r.k_min:.2f}" if f"{r.k_min:.2f}" == f"{r.k_max:.2f}" else f"{r.k_min:.2f}-{r.k_max:.2f}"
        text += f" (k {k}, ctx {r.checked_contexts})"
    drawn = []
    if r.earlier_rule:
        span = r.earlier_from if r.earlier_from == r.earlier_to else f"{r.earlier_from} to {r.earlier_to}"
        drawn.append(f"{r.earlier_rule} measured {span}, before in-run layer checks")
    if r.failing:
        drawn.append(f"{r.failing} failing or lacking a check of the current rule")
    return text + (f", {r.unchecked} drawn unchecked ({'; '.join(drawn)})" if r.unchecked else "")


def coverage_findings(cell_table: pd.DataFrame) -> list[Finding]:
    """`coverage` as one sentence per GPU and path (a Finding with the row's values)."""
    out = []
    for r in coverage(cell_table).itertuples(index=False):
        values = {k: (v if not isinstance(v, float) or v == v else None) for k, v in r._asdict().items()}
        out.append(Finding(f"{r.gpu}: {coverage_text(r)}.", **values))
    return out
