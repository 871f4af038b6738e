"""Summaries of the quantisation rows for notebook 04: every cell with its path's own floor, the paper's
table (ms/step per path, the published L4 column beside our columns), the byte model per model and path,
the per-layer correctness rows, each cell's whole-model correctness check (verify.csv) and generated
findings.

Step times are roofline-style: the median over sessions of each session's median step (roofline.cell_table).
Each path's floor is its own: quant_bytes.step_bytes (packed int4 weights, scales, zeros, the bf16 LM head,
norms, biases, one embedding row, KV at ctx) over the GPU's datasheet bandwidth.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from decodegap import accounting, roofline
from decodegap.analysis.quant_checks import checks
from decodegap.checked import UNCHECKED
from decodegap.finding import Finding, span as _values
from decodegap.quant import bytes as quant_bytes, paths as quant
from decodegap.stats import span as _span

CLAIM = "quantisation"
PUBLISHED_GPU = "l4"
REALISED_YES, REALISED_PART = 0.8, 0.3
"""Verdict thresholds on the share of the weight-traffic saving realised as time saved (see `realised`)."""
LAUNCH_BOUND_SHARE = 0.5
"""An eager step is called launch-bound when launch overhead is at least this share of it: bf16's launch share
(eager - graph) / eager = 1 - 1 / eager_over_graph of the same cell (median over its models), as T4 and W1 define
the share. Set 2026-12-06: until then every eager cell was called launch-bound, also where the graphed step takes
nearly as long as eager (long contexts on the H100), which broke the word's meaning; below the share the reason
comes from the same tests as a graphed arm's."""
ARMS = ("eager", "graph", "lean_attn_graph", "lean_attn_compile")
"""Notebook 04's decode arms (its ARMS parameter's default): HF eager and graphed, the lean step (with the Triton
attention) graphed and compiled."""
NOTEBOOK_PATHS = tuple(k for k, p in quant.PATHS.items() if not p.quantises_head)
"""The paths notebook 04 reads: every registered path but those that quantise the LM head too (int4-triton-head, one
of notebook 06's levers: a model other than the paper's paths, whose heads stay bf16); experiments.quantisation leaves
their rows out."""
INT4 = tuple(k for k in NOTEBOOK_PATHS if quant_bytes.LAYOUT_OF[k] not in ("bf16", "nf4"))
"""The registered paths that store int4 codes with group scales (bnb-nf4's 4-bit NormalFloat is not among them)."""


def passing(cell_table: pd.DataFrame) -> pd.DataFrame:
    """The cells of `cell_table` whose correctness check did not fail (`check_failed`; all of them without that
    column)."""
    return cell_table[~cell_table["check_failed"].astype(bool)] if "check_failed" in cell_table else cell_table


def rows(decode_rows: pd.DataFrame, arms: Sequence[str] = ARMS, plans=None) -> pd.DataFrame:
    """Notebook 04's decode rows: default attention (SDPA), the arms `arms`, every quantisation path (rows joined
    with the checks of their own run and labelled first: checked.labelled(checked.join_checks(...)), so that a
    quantised cell without the current rule's checks of its own run, checked.quantised_checks, is a status row
    `unchecked`); given the runs' `plans` (selection.run_plans), each cell's rows of one sweep (roofline.one_sweep: the
    bf16 baseline at ctx 2048 is then the grid's sessions, not the grid's pooled with notebook 02's headline top-up;
    a checked sweep of a cell ranks above an unchecked one)."""
    out = decode_rows[decode_rows["arm"].isin(list(arms)) & (decode_rows["attn"] == "sdpa")]
    return roofline.one_sweep(out, plans) if plans is not None else out


def _group(configs: Mapping[str, Mapping], model: str, group_size: int | None) -> int:
    return group_size or quant.default_group_size(configs[model])


def _bytes(configs, model, key, ctx, group_size=None) -> float:
    if key not in quant_bytes.LAYOUT_OF or model not in configs:
        return float("nan")
    return float(quant_bytes.step_bytes(configs[model], key, int(ctx), _group(configs, model, group_size)))


NOT_TIMED = "checked (verify.csv) but never timed: no decode rows of this cell (the run stopped before timing it)"


def _not_timed(decode_rows: pd.DataFrame, verify_rows: pd.DataFrame | None) -> pd.DataFrame:
    """Cells with a verify row but no decode row, among the arms, attentions and models of `decode_rows`."""
    if verify_rows is None or verify_rows.empty or decode_rows.empty:
        return pd.DataFrame(columns=roofline.CELL)
    v = verify_rows[verify_rows["arm"].isin(set(decode_rows["arm"])) & verify_rows["attn"].isin(set(decode_rows["attn"]))
                    & verify_rows["model"].isin(set(decode_rows["model"]))]
    have = set(map(tuple, decode_rows[roofline.CELL].drop_duplicates().astype({"ctx": int}).itertuples(index=False)))
    out = [r for r in v[roofline.CELL].astype({"ctx": int}).drop_duplicates().itertuples(index=False) if tuple(r) not in have]
    return pd.DataFrame(out, columns=roofline.CELL)


def own_checks(decode_rows: pd.DataFrame) -> pd.DataFrame:
    """Per timed cell (CELL) of `decode_rows` (checked.join_checks' columns, labelled), what its own run's checks
    gave by the one definition (checked.quantised_checks): `quant_check` (its outcome; '' for bf16), `model_k`
    (k = error / null of the model check; the largest over the cell's runs) and `measured` (the UTC start of its
    earliest run), of the counted rows where the cell has any, else of its `unchecked` status rows."""
    from decodegap import checked

    cols = roofline.CELL + ["quant_check", "model_k", "measured"]
    timed = decode_rows[decode_rows["status"].isin(["ok", checked.UNCHECKED])] if "quant_check" in decode_rows \
        else decode_rows.iloc[0:0]
    if timed.empty:
        return pd.DataFrame(columns=cols)
    counted = timed["status"] == "ok"
    has_counted = counted.groupby([timed[c] for c in roofline.CELL]).transform("any")
    mine = timed[counted | ~has_counted]  # a cell's counted rows, or its status rows where none is counted
    out = mine.groupby(roofline.CELL, dropna=False).agg(quant_check=("quant_check", "first"),
                                                        model_k=("model_k", "max"), run_id=("run_id", "min"))
    out["measured"] = [checked.measured_at(r) for r in out.pop("run_id")]
    return out.reset_index()[cols]


def cells(decode_rows: pd.DataFrame, specs: pd.DataFrame, configs: Mapping[str, Mapping],
          bandwidth_rows: pd.DataFrame | None = None, group_size: int | None = None,
          verify_rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """roofline.cell_table of the decode rows plus, per cell, its path's own step bytes (`bytes_quant`),
    floor at the datasheet bandwidth (`t_floor_quant_ms`) and at the measured copy bandwidth, R_floor
    against them, its correctness check (`check`, `check_failed`: see `checks`), and against the bf16 cell
    of the same (gpu, model, ctx, arm, attn): `speedup_over_bf16` (t_bf16 / t_path), `realised_fraction`
    (`realised`: the share of the weight-traffic saving realised as time saved) and
    `saved_over_floor_drop` ((t_bf16 - t_path) / (t_floor_bf16 - t_floor_path): ms saved per ms the path's
    own floor is below bf16's). A cell with a verify row but no decode rows is a row with status
    `not timed`. A quant key outside the byte model gets NaN. With checked.join_checks' columns in `decode_rows`,
    each cell's own checks by the one definition (`own_checks`: quant_check, model_k, measured)."""
    cols = roofline.CELL + ["t_obs_ms", "sessions", "status", "reason", "bytes_quant", "t_floor_quant_ms",
                            "r_floor_quant", "check", "check_failed", "speedup_over_bf16", "realised_fraction",
                            "saved_over_floor_drop", "quant_check", "model_k", "measured"]
    if decode_rows.empty:
        return pd.DataFrame(columns=cols)
    table = roofline.cell_table(decode_rows, specs, configs, bandwidth_rows)
    missing = _not_timed(decode_rows, verify_rows)
    if not missing.empty:
        missing = missing.merge(specs[["gpu", "bandwidth_gbps"]], on="gpu", how="left")
        missing["measured_gbps"] = missing["gpu"].map(table.drop_duplicates("gpu").set_index("gpu")["measured_gbps"])
        missing["status"], missing["reason"] = "not timed", NOT_TIMED
        table = pd.concat([table, missing], ignore_index=True).sort_values(roofline.CELL).reset_index(drop=True)
    table["bytes_quant"] = [_bytes(configs, m, q, c, group_size)
                            for m, q, c in zip(table["model"], table["quant"], table["ctx"])]
    table["t_floor_quant_ms"] = accounting.t_floor_ms(table["bytes_quant"], table["bandwidth_gbps"])
    table["r_floor_quant"] = table["t_floor_quant_ms"] / table["t_obs_ms"]
    table["t_floor_quant_measured_ms"] = accounting.t_floor_ms(table["bytes_quant"], table["measured_gbps"])
    table["r_floor_quant_measured"] = table["t_floor_quant_measured_ms"] / table["t_obs_ms"]
    table = pd.concat([table, checks(table, verify_rows)], axis=1)
    table = table.merge(own_checks(decode_rows), on=roofline.CELL, how="left")
    same = ["gpu", "model", "ctx", "arm", "attn"]
    base = (table[table["quant"] == "bf16"].drop_duplicates(same)
            .set_index(same)[["t_obs_ms", "bytes_quant", "t_floor_quant_ms"]].add_suffix("_bf16"))
    b = table.join(base, on=same)
    table["speedup_over_bf16"] = b["t_obs_ms_bf16"] / b["t_obs_ms"]
    table["realised_fraction"] = realised(b["t_obs_ms"], b["t_obs_ms_bf16"], b["bytes_quant"], b["bytes_quant_bf16"])
    table["saved_over_floor_drop"] = (b["t_obs_ms_bf16"] - b["t_obs_ms"]) / (b["t_floor_quant_ms_bf16"] - b["t_floor_quant_ms"])
    bf16 = table["quant"] == "bf16"
    table.loc[bf16, ["realised_fraction", "saved_over_floor_drop"]] = np.nan
    return table


def byte_table(configs: Mapping[str, Mapping], paths: Sequence[str] | None = None, ctx: int = 2048,
               group_size: int | None = None) -> pd.DataFrame:
    """Per model and path: every byte term of quant_bytes.byte_terms (GB), the weights, KV at ctx and the
    step total (GB), and how many times fewer bytes than bf16 the path streams."""

    rows = []
    for model, cfg in configs.items():
        G = _group(configs, model, group_size)
        bf16 = quant_bytes.step_bytes(cfg, "bf16", ctx)
        for key in paths or NOTEBOOK_PATHS:
            terms = quant_bytes.byte_terms(cfg, key, G)
            total = quant_bytes.step_bytes(cfg, key, ctx, G)
            rows.append(dict(model=model, quant=key, group_size=G if quant_bytes.LAYOUT_OF[key] not in ("bf16", "nf4") else None,
                             **{f"{t}_GB": b / 1e9 for t, b in terms.items()},
                             weights_GB=sum(terms.values()) / 1e9, **{f"kv_ctx{ctx}_GB": accounting.kv_bytes(cfg, ctx) / 1e9},
                             step_GB=total / 1e9, bf16_over_path=bf16 / total))
    return pd.DataFrame(rows)


def int4_target(cell_table: pd.DataFrame, configs: Mapping[str, Mapping], specs: pd.DataFrame,
                bandwidth_rows: pd.DataFrame | None, target: Mapping) -> dict | None:
    """The fastest timed int4 cell (any path, any arm, check passed) at the target cell (`target`: gpu, model, ctx,
    step_ms) with its streamed bytes, the rate it streams them at, and what those bytes alone take at the GPU's
    measured copy bandwidth and at its datasheet bandwidth. None without such a cell."""
    c = cell_table[(cell_table["gpu"] == target["gpu"]) & (cell_table["model"] == target["model"]) & (cell_table["ctx"] == target["ctx"])
               & cell_table["quant"].isin(INT4) & cell_table["t_obs_ms"].notna()]
    c = passing(c)
    if c.empty:
        return None
    best = c.loc[c["t_obs_ms"].idxmin()]
    nbytes = float(best["bytes_quant"])
    copy = roofline.measured_bandwidth(bandwidth_rows).get(target["gpu"], np.nan) if bandwidth_rows is not None else np.nan
    return dict(quant=best["quant"], arm=best["arm"], t_obs_ms=float(best["t_obs_ms"]), target_ms=float(target["step_ms"]),
                step_GB=nbytes / 1e9, streamed_gbps=nbytes / (float(best["t_obs_ms"]) * 1e6),
                bytes_at_copy_ms=accounting.t_floor_ms(nbytes, copy), copy_gbps=copy,
                bytes_at_datasheet_ms=accounting.t_floor_ms(nbytes, _bandwidth(specs, target["gpu"])))


def shares_on_common_models(group: pd.DataFrame) -> tuple[pd.Series, pd.Series, list[str]]:
    """For the cells of one GPU and arm (several paths): the median realised share of each path's saving and its
    median streamed bytes over the models that every path in `group` has, so that paths measured on different sets
    of models are compared on the same ones; with those models. Empty series when no model is common to all."""
    common_models = sorted(set.intersection(*[set(g["model"]) for _, g in group.groupby("quant")])) if not group.empty else []
    common = group[group["model"].isin(common_models)]
    return (common.groupby("quant")["realised_fraction"].median(), common.groupby("quant")["bytes_quant"].median(),
            common_models)


def realised(t_path: float, t_bf16: float, b_path: float, b_bf16: float) -> float:
    """Share of the weight-traffic saving realised as time saved: (1 - t_path/t_bf16) / (1 - b_path/b_bf16).
    1: the step shrank as much as its bytes did (bandwidth-bound both ways); 0: no faster than bf16."""
    return (1 - t_path / t_bf16) / (1 - b_path / b_bf16)


def _published(published: pd.DataFrame, gpu: str = PUBLISHED_GPU) -> dict[str, float]:
    pub = published[(published["claim"] == CLAIM) & (published["quantity"] == "step_ms") & (published["gpu"] == gpu)]
    return {q: float(v) for q, v in zip(pub["quant"], pub["value"]) if isinstance(q, str)}


def _bandwidth(specs: pd.DataFrame, gpu: str) -> float:
    hit = specs[specs["gpu"] == gpu]
    return float(hit["bandwidth_gbps"].iloc[0]) if not hit.empty else float("nan")


def _not_run(key: str, gpu: str, gpu_cells: pd.DataFrame) -> str:
    """Why a registered path has no cell on a GPU: the alias it belongs to ran as another member there
    (the member was passed over as unavailable when the alias was resolved), or no rows at all."""
    here = set(gpu_cells["quant"])
    for alias, members in quant.ALIASES.items():
        ran = [m for m in members if m != key and m in here]
        if key in members and ran and key not in here:  # a member with rows of its own on the GPU was not passed over
            return (f"not run: the `{alias}` alias ran as {ran[0]} on {gpu}, so {key} was unavailable there "
                    f"(quant.resolve; no `unavailable` row of it records the reason)")
    return "no rows"


def paper_table(cell_table: pd.DataFrame, published: pd.DataFrame, specs: pd.DataFrame, configs: Mapping[str, Mapping],
                model: str = "qwen2.5-7b", contexts: Sequence[int] | int = (2048,),
                arms: Sequence[str] = ("eager", "graph"), group_size: int | None = None) -> pd.DataFrame:
    """The paper's quantisation table: one row per registered path (and any other quant key in the data) and
    context. Columns: the path's step bytes for `model` at ctx and how many times fewer than bf16; the
    published L4 ms/step, its speed-up over bf16, the path's L4 floor and the published R_floor against it
    (the paper states neither model nor context: the published values sit on the rows of the first
    context only); then per measured GPU its floor, and per arm ms/step, sessions, speed-up over bf16 on the
    same arm, R_floor, the cell's correctness check (`checks`: a timing whose check failed is shown with
    its label) and whether it is drawn unchecked (`<gpu> <arm> unchecked`: timed only without the current rule's
    checks of its own run, no time kept); a status column where a cell did not run or has no rows."""
    contexts = [int(contexts)] if np.isscalar(contexts) else [int(c) for c in contexts]
    pub = _published(published)
    sel = cell_table[(cell_table["model"] == model) & cell_table["ctx"].isin(contexts) & (cell_table["attn"] == "sdpa")
                 & cell_table["arm"].isin(list(arms))] if not cell_table.empty else cell_table
    keys = list(NOTEBOOK_PATHS) + sorted(set(sel["quant"]) - set(NOTEBOOK_PATHS) if not sel.empty else set())
    l4_bw = _bandwidth(specs, PUBLISHED_GPU)
    gpus = sorted(set(sel["gpu"])) if not sel.empty else []
    rows = []
    for ctx in contexts:
        b_bf16 = _bytes(configs, model, "bf16", ctx, group_size)
        first = ctx == contexts[0]
        for key in keys:
            p = quant.PATHS.get(key)
            b = _bytes(configs, model, key, ctx, group_size)
            row = {"quant": key, "ctx": ctx, "path": p.label if p else key, "kernel": p.kernel if p else "",
                   "step GB": b / 1e9, "bytes vs bf16 (x fewer)": b_bf16 / b}
            ms = pub.get(key, np.nan) if first else np.nan
            floor = accounting.t_floor_ms(b, l4_bw)
            row[f"{PUBLISHED_GPU} ms (published)"] = ms
            row[f"{PUBLISHED_GPU} speed-up (published)"] = (pub.get("bf16", np.nan) if first else np.nan) / ms
            row[f"{PUBLISHED_GPU} floor ms"] = floor
            row[f"{PUBLISHED_GPU} R_floor (our floor, published ms)"] = floor / ms
            for gpu in gpus:
                here = sel[(sel["gpu"] == gpu) & (sel["ctx"] == ctx)]
                row[f"{gpu} floor ms"] = accounting.t_floor_ms(b, _bandwidth(specs, gpu))
                status = []
                for arm in arms:
                    cell = here[(here["arm"] == arm) & (here["quant"] == key)]
                    base = here[(here["arm"] == arm) & (here["quant"] == "bf16")]
                    t = float(cell["t_obs_ms"].iloc[0]) if not cell.empty else np.nan
                    t0 = float(base["t_obs_ms"].iloc[0]) if not base.empty else np.nan
                    if arm in set(sel.loc[sel["gpu"] == gpu, "arm"]):
                        row[f"{gpu} {arm} ms"] = t
                        row[f"{gpu} {arm} sessions"] = float(cell["sessions"].iloc[0]) if not cell.empty else np.nan
                        row[f"{gpu} {arm} speed-up"] = t0 / t
                        row[f"{gpu} {arm} R_floor"] = row[f"{gpu} floor ms"] / t
                        row[f"{gpu} {arm} realised"] = (float(cell["realised_fraction"].iloc[0])
                                                        if not cell.empty and key != "bf16" else np.nan)
                        row[f"{gpu} {arm} check"] = cell["check"].iloc[0] if not cell.empty and "check" in cell else ""
                        row[f"{gpu} {arm} unchecked"] = bool(not cell.empty and cell["status"].iloc[0] == UNCHECKED)
                    if not cell.empty and cell["status"].iloc[0] != "ok":
                        status.append((arm, f"{cell['status'].iloc[0]}: {cell['reason'].iloc[0]}"))
                    elif cell.empty:
                        status.append((arm, _not_run(key, gpu, sel[sel["gpu"] == gpu])))
                if status:
                    texts = dict.fromkeys(text for _, text in status)
                    row[f"{gpu} status"] = "; ".join(", ".join(a for a, t in status if t == text) + f": {text}"
                                                     for text in texts)
            rows.append(row)
    out = pd.DataFrame(rows)
    status_cols = [c for c in out.columns if c.endswith(" status")]
    out[status_cols] = out[status_cols].fillna("")
    return out


VERDICTS = {"yes": "realises its weight-traffic saving", "part": "realises part of its weight-traffic saving",
            "no": "does not realise its weight-traffic saving"}
"""Each verdict on the share realised (`realises`) and how a sentence says it."""


def realises(frac: float) -> str:
    """The verdict on `frac`, the share of the weight-traffic saving realised (`realised`): "yes" from
    REALISED_YES, "part" from REALISED_PART, "no" below (and for NaN)."""
    if frac >= REALISED_YES:
        return "yes"
    if frac >= REALISED_PART:
        return "part"
    return "no"


def _verdict(frac: float) -> str:
    return VERDICTS[realises(frac)]


def has_quant_rows(cell_table: pd.DataFrame) -> bool:
    """Whether any GPU has timed rows of a path other than bf16."""
    return bool(not cell_table.empty and (cell_table["quant"] != "bf16").any() and
                cell_table.loc[cell_table["quant"] != "bf16", "t_obs_ms"].notna().any())


NAN_HYPOTHESIS = {
    "gptq-exllamav2": "ExLlamaV2's GEMM computes in fp16 only, and the activations of a random-weight model "
                      "may overflow fp16 over many layers",
}
"""A hypothesis per path for NaN logits in its correctness check, stated as a hypothesis only (not verified)."""


def _why(arm: str, frac: float, saved: float, speed: float, r_floor: float, bf16: pd.DataFrame) -> tuple[str, dict]:
    """Why a path does or does not realise its saving on one arm, from the numbers (see `findings`), and those
    numbers: `why` names the reason ("shrinks", "launch-bound", "above the floor", "kernel")."""
    bf16_r_floor = _values("bf16_r_floor", bf16["r_floor_quant"])
    slower = dict(slower_than_bf16=bool(speed < 1))
    if frac >= REALISED_YES:
        return "its step shrinks with its bytes", dict(why="shrinks")
    share = launch_share(bf16) if arm == "eager" else float("nan")
    launch = (dict(bf16_launch_share_median=share, **_values("bf16_eager_over_graph", bf16["eager_over_graph"]))
              if arm == "eager" else {})
    if share >= LAUNCH_BOUND_SHARE:
        return (f"the eager step is launch-bound (bf16 at R_floor {_span(bf16['r_floor_quant'])}, "
                f"{_span(bf16['eager_over_graph'])}x its graph arm's time, launch share {share:.2f}: notebook 02), so "
                "the weight bytes hardly matter there" + ("; its eager step is slower than bf16's: its kernels add more "
                                                          "time (launches, host work, dequantisation) than its bytes save"
                                                          if speed < 1 else ""),
                dict(why="launch-bound", **bf16_r_floor, **launch, **slower))
    eager = (f"; the eager step is not launch-bound here (bf16 {_span(bf16['eager_over_graph'])}x its graph arm's "
             f"time, launch share {share:.2f}, below {LAUNCH_BOUND_SHARE:g})" if launch and pd.notna(share) else "")
    if saved >= REALISED_YES:
        return (f"it saves {saved:.2f} ms per ms its own floor drops, but bf16's {'eager' if launch else 'graphed'} "
                f"step is only R_floor {_span(bf16['r_floor_quant'])} of its floor: the part above the floor (launches, "
                "attention, the other kernels) does not shrink with the weight bytes" + eager,
                dict(why="above the floor", saved_over_floor_drop_median=saved, **bf16_r_floor, **launch))
    return (f"its kernel, not its bytes, binds: R_floor {r_floor:.2f} against its own floor (bf16: "
            f"{_span(bf16['r_floor_quant'])}); it saves {saved:.2f} ms per ms its floor drops"
            + ("; it is slower than bf16 on the same arm" if speed < 1 else "") + eager,
            dict(why="kernel", r_floor_median=r_floor, **bf16_r_floor, saved_over_floor_drop_median=saved, **slower,
                 **launch))


def launch_share(bf16: pd.DataFrame) -> float:
    """bf16's launch share of the eager step, (eager - graph) / eager = 1 - 1 / eager_over_graph, median over the
    cell's bf16 rows (`eager_over_graph`: the eager step over the graph arm's, of the same model); NaN without a
    graph arm."""
    ratio = pd.to_numeric(bf16["eager_over_graph"], errors="coerce").dropna()
    return float(1 - 1 / ratio.median()) if not ratio.empty else float("nan")


def _path_line(key: str, arm: str, here: pd.DataFrame, b0: pd.Series, bf16: pd.DataFrame) -> Finding:
    """One path's sentence of `gpu_findings` (without the cell's name) and its values, from its rows `here` on one
    GPU, context and arm."""
    same = ["gpu", "model", "ctx"]
    timed = here[here["t_obs_ms"].notna()]
    valid = passing(timed)
    flagged = timed[timed["check_failed"].astype(bool)]
    untimed = here[here["t_obs_ms"].isna()]
    parts, values = [], dict(quant=key, models=len(valid))
    if not valid.empty:
        frac = float(valid["realised_fraction"].median())
        fewer = valid.join(b0, on=same)["bytes_bf16"] / valid["bytes_quant"]
        n = valid["sessions"].max()
        check = ", ".join(sorted(set(valid["check"].str.replace("model check ", "").str.split(" ").str[0])))
        why, why_values = _why(arm, frac, float(valid["saved_over_floor_drop"].median()),
                               float(valid["speedup_over_bf16"].median()), float(valid["r_floor_quant"].median()), bf16)
        parts.append(f"{key} {_span(valid['t_obs_ms'])} ms/step ({_span(valid['sessions'], '.0f')} "
                     f"session{'s' if n > 1 else ''} each, check {check}) = "
                     f"{_span(valid['speedup_over_bf16'])}x over bf16 with "
                     f"{_span(fewer)}x fewer bytes: it {_verdict(frac)} ({_span(valid['realised_fraction'] * 100, '.0f', '%')} of it"
                     f"{' over ' + str(len(valid)) + ' models' if len(valid) > 1 else ''}): " + why)
        values.update(**_values("step_ms", valid["t_obs_ms"]), **_values("sessions", valid["sessions"]), check=check,
                      **_values("speedup", valid["speedup_over_bf16"]), **_values("bytes_bf16_over_path", fewer),
                      realises=realises(frac), **_values("realised_fraction", valid["realised_fraction"]), **why_values)
    else:
        parts.append(f"{key}: no timed cell with a passing check, so no verdict")
    if not flagged.empty:
        parts.append("left out of the verdict (check failed), timing shown: "
                     + ", ".join(f"{r.model} {r.t_obs_ms:.2f} ms ({r.check})" for r in flagged.itertuples()))
        values.update(flagged=len(flagged), **{f"flagged_{r.model}_{k}": v for r in flagged.itertuples()
                                               for k, v in (("step_ms", r.t_obs_ms), ("check", r.check))})
    if not untimed.empty:
        parts.append("not timed: " + ", ".join(f"{r.model} ({r.status}; check {r.check})" for r in untimed.itertuples()))
        values.update(untimed=len(untimed), **{f"untimed_{r.model}_{k}": v for r in untimed.itertuples()
                                               for k, v in (("status", r.status), ("check", r.check))})
    return Finding("; ".join(parts), **values)


def gpu_findings(cell_table: pd.DataFrame, contexts: Sequence[int], arms: Sequence[str] = ("eager", "graph")) -> list[Finding]:
    """Per measured GPU, context and arm (graph first), from `cells` over every model: bf16's step and
    R_floor, then per path its ms/step, speed-up over bf16 and byte ratio, the share of its weight-traffic
    saving realised (`realised`; verdict `realises` on the median over models) and why not where not (`_why`).
    Cells whose correctness check failed keep their timing in the line but are left out of the verdict. Each line
    is a Finding (gpu, arm, ctx, quant; the spans as `<name>_min`, `<name>_max`; `models`: those in the verdict;
    per model left out, `flagged_<model>_step_ms` and its check; per model not timed, its status and check)."""
    out = []
    if cell_table.empty:
        return out
    c = cell_table[(cell_table["attn"] == "sdpa") & cell_table["ctx"].isin(list(contexts))].copy()
    if "check_failed" not in c:
        c["check_failed"], c["check"] = False, "not checked"
    same = ["gpu", "model", "ctx"]
    graph_bf16 = c[(c["quant"] == "bf16") & (c["arm"] == "graph")].set_index(same)["t_obs_ms"]
    order = [a for a in ("graph", "eager") if a in arms] + [a for a in arms if a not in ("graph", "eager")]
    for gpu in sorted(set(c["gpu"])):
        for ctx in contexts:
            for arm in order:
                here = c[(c["gpu"] == gpu) & (c["ctx"] == ctx) & (c["arm"] == arm)]
                bf16 = here[(here["quant"] == "bf16") & here["t_obs_ms"].notna()].copy()
                if bf16.empty or not (here["quant"] != "bf16").any():
                    continue
                bf16["eager_over_graph"] = bf16["t_obs_ms"] / bf16.set_index(same).index.map(graph_bf16).to_numpy(float)
                b0 = bf16.set_index(same)["bytes_quant"].rename("bytes_bf16")
                name, cell = f"{gpu} {arm}, ctx {ctx}", dict(gpu=gpu, arm=arm, ctx=int(ctx))
                n_models, one_session = len(bf16), bool((bf16["sessions"] == 1).all())
                out.append(Finding(f"{name}: bf16 {_span(bf16['t_obs_ms'])} ms/step over {n_models} "
                                   f"model{'' if n_models == 1 else 's'} ({_span(bf16['sessions'], '.0f')} "
                                   f"session{'' if one_session else 's'}{'' if n_models == 1 else ' each'}), R_floor "
                                   f"{_span(bf16['r_floor_quant'])} against its own floor.",
                                   **cell, quant="bf16", **_values("step_ms", bf16["t_obs_ms"]), models=n_models,
                                   **_values("sessions", bf16["sessions"]), **_values("r_floor", bf16["r_floor_quant"])))
                for key in dict.fromkeys(list(NOTEBOOK_PATHS) + sorted(set(here["quant"]))):
                    rows = here[here["quant"] == key]
                    if rows.empty or key == "bf16":
                        continue
                    line = _path_line(key, arm, rows, b0, bf16)
                    out.append(Finding(f"{name}: {line}.", **cell, **line.values))
    nan = c[c["check"].astype(str).str.startswith("failed: NaN") & (c["arm"] != "eager")]
    for key, rows in nan.groupby("quant"):
        model_names, ctxs = ", ".join(sorted(set(rows["model"]))), ", ".join(map(str, sorted(set(rows["ctx"]))))
        out.append(Finding(f"NaN logits: {key} on {model_names} (ctx {ctxs}): "
                           "the quantised model's graph-versus-eager check gave NaN, so both arms of those cells are "
                           "flagged. " + (f"Hypothesis, not verified: {NAN_HYPOTHESIS[key]}." if key in NAN_HYPOTHESIS else
                                          "Cause not examined."),
                           quant=key, nan_models=model_names, nan_contexts=ctxs, hypothesis=key in NAN_HYPOTHESIS))
    return out


def int4_target_sentence(t: dict | None, target: Mapping) -> Finding:
    """The int4 target (`int4_target`) as a sentence: met or not, and what stands in the way, in numbers. A Finding:
    the target cell (gpu, model, ctx), `measured`, `met` and the values of `t`."""
    where = f"{target['model']} ctx {target['ctx']} on the {target['gpu'].upper()}"
    cell = dict(gpu=target["gpu"], model=target["model"], ctx=int(target["ctx"]))
    if t is None:
        return Finding(f"int4 target ({where}, <= {target['step_ms']:g} ms): no timed int4 cell with a passing check "
                       "yet.", **cell, target_ms=float(target["step_ms"]), measured=False)
    met = bool(t["t_obs_ms"] <= t["target_ms"])
    verdict = "met" if met else "not met"
    return Finding(f"int4 target ({where}, <= {t['target_ms']:g} ms): {verdict}. The fastest int4 step is {t['quant']} on "
            f"{t['arm']} at {t['t_obs_ms']:.2f} ms; it streams {t['step_GB']:.2f} GB (its packed weights, scales, "
            f"the bf16 LM head and the KV), {t['streamed_gbps']:.0f} GB/s over the whole step, while those bytes "
            f"alone take {t['bytes_at_copy_ms']:.2f} ms at the measured copy bandwidth ({t['copy_gbps']:.0f} GB/s) "
            f"and {t['bytes_at_datasheet_ms']:.2f} ms at the datasheet's: the rest of the step (the products' fixed "
            "cost, attention, the small kernels of an uncompiled step) holds it back.", **cell, measured=True, met=met, **t)


def findings(table: pd.DataFrame, published: pd.DataFrame, cell_table: pd.DataFrame, model: str,
             contexts: Sequence[int] | int, arms: Sequence[str] = ("eager", "graph")) -> list[Finding]:
    """Sentences generated from the data (never typed by hand): for the published L4 column (paper_table
    rows of the first context), each path's speed-up over bf16 against its byte ratio, the share of the
    saving realised and its R_floor against its own floor; for every measured GPU, context and arm,
    `gpu_findings` over every model; then the byte convention and what did not run and why. Each is a Finding with
    the numbers and names it states."""
    contexts = [int(contexts)] if np.isscalar(contexts) else [int(c) for c in contexts]
    out = []
    t = table[table["ctx"] == contexts[0]].set_index("quant") if "ctx" in table else table.set_index("quant")
    bf = t.loc["bf16"] if "bf16" in t.index else None
    name, ms_col, r_col = (f"{PUBLISHED_GPU} (published)", f"{PUBLISHED_GPU} ms (published)",
                           f"{PUBLISHED_GPU} R_floor (our floor, published ms)")
    published_cell = dict(gpu=PUBLISHED_GPU, source="published")
    if bf is not None and pd.notna(bf[ms_col]):
        out.append(Finding(f"{name}: bf16 {bf[ms_col]:.2f} ms/step, R_floor {bf[r_col]:.2f} against its own floor.",
                           **published_cell, quant="bf16", step_ms=float(bf[ms_col]), r_floor=float(bf[r_col])))
        for key, r in t.iterrows():
            if key == "bf16" or pd.isna(r[ms_col]):
                continue
            speed = bf[ms_col] / r[ms_col]
            frac = realised(r[ms_col], bf[ms_col], r["step GB"], bf["step GB"])
            out.append(Finding(f"{name}: {key} {r[ms_col]:.2f} ms/step = {speed:.2f}x over bf16 with "
                               f"{r['bytes vs bf16 (x fewer)']:.2f}x fewer bytes: it {_verdict(frac)} ({frac:.0%} of it; "
                               f"R_floor {r[r_col]:.2f}).", **published_cell, quant=key, step_ms=float(r[ms_col]),
                               speedup=float(speed), bytes_bf16_over_path=float(r["bytes vs bf16 (x fewer)"]),
                               realises=realises(frac), realised_fraction=float(frac), r_floor=float(r[r_col])))
    out += gpu_findings(cell_table, contexts, arms)
    pub = published[(published["claim"] == CLAIM) & (published["quantity"] == "step_ms") & (published["gpu"] != PUBLISHED_GPU)]
    if not pub.empty and "gptq-exllamav2" in t.index and pd.notna(t.loc["gptq-exllamav2", f"{PUBLISHED_GPU} ms (published)"]):
        g = t.loc["gptq-exllamav2", f"{PUBLISHED_GPU} ms (published)"]
        out.append(Finding("Published comparison: L4 + gptq-exllamav2 " + f"{g:.2f} ms against "
                           + ", ".join(f"{r.gpu} {r.arm} bf16 {r.value:.2f} ms" for r in pub.itertuples()) + ".",
                           quant="gptq-exllamav2", l4_step_ms=float(g),
                           **{f"{r.gpu}_{r.arm}_bf16_step_ms": float(r.value) for r in pub.itertuples()}))
    out.append(Finding(f"Byte convention: each path's floor counts its packed int4 weights, scales and zeros in its own "
                       f"dtype and layout, the bf16 LM head, norms, biases, one embedding row and the KV at ctx; the "
                       f"L4 column is set against {model} at ctx {contexts[0]} (the paper does not state the model or "
                       "context of its quantisation table).", model=model, ctx=contexts[0]))
    if not has_quant_rows(cell_table):
        out.append(Finding("No quantised-path rows yet on any GPU (no decode rows whose quant is not bf16 with a timing): "
                           "the table shows the published L4 column and the floors; measure with MEASURE = True.",
                           quant_rows=False))
    for col in [col for col in table.columns if col.endswith(" status")]:
        for _, r in table[table[col].astype(str).str.contains("not run")].drop_duplicates("quant").iterrows():
            out.append(Finding(f"{col.split(' ')[0]}: {r['quant']}: {r[col]}.", gpu=col.split(" ")[0], quant=r["quant"],
                               status=r[col]))
    if not cell_table.empty:
        failed = cell_table[~cell_table["status"].isin(["ok", "not timed", "error"]) & (cell_table["quant"] != "bf16")]
        for r in failed.drop_duplicates(["gpu", "quant", "arm"]).itertuples():
            out.append(Finding(f"{r.gpu}: {r.quant} ({r.arm}) did not run: {r.status}: {r.reason}", gpu=r.gpu,
                               quant=r.quant, arm=r.arm, status=r.status, reason=r.reason))
    return out
