"""The method claims (M1-M8: GPUs, models, contexts, cells, R_floor, the A/B design, the software-stack matrix)
and the paper's scope (S1)."""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from decodegap.analysis import cuda_graphs_ab as ab, attention_backends as attention_report
from decodegap import accounting
from decodegap.claims import rules
from decodegap.harness import models
from decodegap.claims.evidence import Evidence
from decodegap.claims.rules import METHOD
from decodegap.claims.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, Judged, checks_hold, row


def _m(outcome: str) -> Judged:
    return Judged(METHOD, outcome)


def _attention_matrix_verdict(done: Mapping[str, list]) -> str:
    """Every paper backend with an ok row (a stand-in counts, and is named in the row)."""
    return HOLDS if all(done.values()) else NOT_TESTABLE


def method(ev: Evidence) -> list[dict]:
    rows = []
    missing = [g for g in ev.paper_gpus if g not in ev.measured]
    rows.append(row("M1", "method", "GPUs: H100 SXM5, A100-80GB SXM4, L40S, L4 (cloud hosts).",
                     ", ".join(ev.paper_gpus), ", ".join(ev.measured) or "none", ", ".join(ev.measured) or "-",
                     _m(NOT_TESTABLE if missing else HOLDS),
                     f"Not measured here: {', '.join(missing)}; every other claim about them is not testable until "
                     "their rows are added (`python -m decodegap measure --gpu KEY`)." if missing else "All four measured."))
    ok = ev.cells[ev.cells["status"] == "ok"] if not ev.cells.empty else ev.cells
    models = sorted(set(ok["model"])) if not ok.empty else []
    lo, hi = rules.get("M2").t("params_lo_b"), rules.get("M2").t("params_hi_b")
    params = {m: accounting.param_count(ev.configs[m]).total / 1e9 for m in models if m in ev.configs}
    gqa = {m: ev.configs[m]["num_key_value_heads"] < ev.configs[m]["num_attention_heads"] for m in params}
    rows.append(row("M2", "method", "Models: three 7-8B GQA transformers (Qwen-2.5-7B, Mistral-7B-v0.3, "
                     "Llama-3.1-8B), bf16 weights, SDPA attention.", "3 models, 7-8B, GQA, bf16, SDPA",
                     ", ".join(f"{m} {p:.2f}B" for m, p in params.items()) or "-", ", ".join(ev.measured) or "-",
                     _m(checks_hold([len(params) == 3, all(gqa.values()),
                                     all(lo <= round(p) <= hi for p in params.values()),
                                     set(ok["quant"]) == {"bf16"} if not ok.empty else False,
                                     set(ok["attn"]) == {"sdpa"} if not ok.empty else False])),
                     "The measured models are three, GQA (fewer KV heads than heads), 7-8B parameters rounded, "
                     "bf16 and SDPA in the default rows. Weights are random normal bf16 of the real shapes "
                     "(no checkpoint): timing depends on shapes, not values."))
    pub_ctx = sorted(int(c) for c in ev.pub("method", "context_length")["ctx"])
    ctx_by_gpu = {g: sorted(set(ok.loc[ok["gpu"] == g, "ctx"])) for g in ev.measured}
    rows.append(row("M3", "method", "Contexts: 4 lengths from 2048 to 16384 (2048, 4096, 8192, 16384).",
                     ", ".join(map(str, pub_ctx)), "; ".join(f"{g}: {', '.join(map(str, c))}" for g, c in ctx_by_gpu.items()) or "-",
                     ", ".join(ev.measured) or "-", _m(checks_hold([c == pub_ctx for c in ctx_by_gpu.values()])),
                     "Every measured GPU covers exactly the paper's contexts."))
    grid = ev.cells[ev.cells["arm"] == "eager"] if not ev.cells.empty else ev.cells
    counts = {g: (int((grid["gpu"] == g).sum()), int(((grid["gpu"] == g) & (grid["status"] == "ok")).sum())) for g in ev.measured}
    rows.append(row("M4", "method", "3 models x 4 contexts x 4 GPUs = 48 cells, of which 44 are valid.",
                     f"{ev.pub_value('method', 'total_cells'):.0f} cells, {ev.pub_value('method', 'valid_cells'):.0f} valid",
                     "; ".join(f"{g}: {n} eager cells, {v} valid" for g, (n, v) in counts.items()) or "-",
                     ", ".join(ev.measured) or "-", _m(NOT_TESTABLE),
                     "The 48-cell grid needs the paper's four GPUs (" + ev.missing("l4") + "); the paper does not say "
                     "which 4 cells were invalid. Our grid per GPU has the same 12 cells; invalid cells would be "
                     "`oom` rows."))
    cap = rules.get("M5").t("max_r_floor")
    flagged = int((ok["r_floor_W_all"] > cap).sum()) if not ok.empty else 0
    rows.append(row("M5", "method", "R_floor = t_floor / t_obs with t_floor = (W + K) / B_peak; 1.0 is perfect "
                     "bandwidth use.", "definition", f"{len(ok)} cells, {flagged} with R_floor > 1",
                     ", ".join(ev.measured) or "-", _m(checks_hold([flagged == 0]) if len(ok) else NOT_TESTABLE),
                     f"No measured cell exceeds R_floor {cap:g} (which would be a measurement or accounting bug). "
                     "We compute it under two byte conventions (W_all, the paper's; W_streamed) and against the "
                     "measured copy bandwidth too (notebook 01)."))
    rows.append(_ab_design(ev))
    rows += _software_matrix(ev)
    return rows


def _ab_design(ev: Evidence) -> dict:
    """M6: the paper's A/B design (N fresh sessions per arm at the headline cells, a bootstrap CI) against notebook
    02's headline statistic (ab.headline), which takes one sweep's sessions and keeps the other sweep's apart. Met
    where every GPU's headline cells have at least the paper's N sessions of that sweep; not met where a GPU's have
    fewer (the design is not replicated there; the row says how many); not testable without headline rows."""
    n_pub = int(rules.get("M6").t("sessions"))
    head = ab.headline(ev.speed, ev.headline_ctx) if not ev.speed.empty else ev.speed
    head = head[head["arm"] == "graph"] if not head.empty else head
    sessions = {g: (int(s["sessions"].min()), s["sweep"].iloc[0]) for g, s in head.groupby("gpu")} if not head.empty else {}
    short = {g: n for g, (n, _) in sessions.items() if n < n_pub}
    verdict = NOT_TESTABLE if not sessions else FAILS if short else HOLDS
    sweep = {g: f" ({s} sweep)" if s else "" for g, (_, s) in sessions.items()}
    return row("M6", "method", "CUDA Graphs A/B: eager vs graphed decode, N = 10 fresh sessions, 95 % bootstrap CI.",
               f"N = {n_pub}, 95 % bootstrap",
               "; ".join(f"{g}: N = {n} per arm at ctx {ev.headline_ctx}{sweep[g]}" for g, (n, _) in sessions.items()) or "-",
               ", ".join(sessions) or "-", _m(verdict),
               f"The headline statistic (notebook 02, ab.headline: the sessions of one sweep of the A/B, never two "
               f"pooled) pairs at least N = {n_pub} fresh sessions of eager and graph at every headline cell. Each session "
               "is a new process; the CI is a seeded percentile bootstrap over sessions."
               + "".join(f" {t}" for t in (ev.kept_apart(g) for g in sessions) if t)
               + "".join(f" So the paper's design is not replicated on the {g}: N = {n_pub} sessions of one sweep needs "
                         f"{n_pub - n} more of its headline sweep (rerunning `python -m decodegap cuda-graphs-ab` adds them: its "
                         "headline sessions are numbered after the grid's, so the grid's no longer count toward "
                         "them)." for g, n in short.items())
               + ("" if sessions else " No A/B rows yet."))


def _software_matrix(ev: Evidence) -> list[dict]:
    pub_attn = list(ev.pub("attention_backends", "us_per_layer")["attn"])
    att = ev.attention
    ran = set(att.loc[att["status"] == "ok", "attn"]) if not att.empty else set()
    done = {p: [k for k in attention_report.PUBLISHED_TO_OURS[p] if k in ran] for p in pub_attn}
    not_ok = att[att["status"] != "ok"] if not att.empty else att
    why = "; ".join(f"{gpu} {attn}: {status} for {', '.join(sorted(set(g['model'])))}"
                    for (gpu, attn, status), g in not_ok.groupby(["gpu", "attn", "status"])) if not att.empty else \
        "no attention rows yet"
    rows = [row("M7", "method", "Software-stack matrix, attention backends: SDPA, FlashAttention-2, FlashAttention-3, FlashInfer.",
                 ", ".join(pub_attn), "; ".join(f"{p}: {', '.join(k) or 'no row'}" for p, k in done.items()),
                 ", ".join(sorted(set(att["gpu"]))) if not att.empty else "-",
                 _m(_attention_matrix_verdict(done)),
                 "Every paper backend has an ok timing row (ours: the registry `attention.BACKENDS`, each "
                 "checked against the math backend first); a backend timed only through a stand-in (PyTorch SDPA's "
                 "FLASH backend, PyTorch's vendored FlashAttention-2 kernels, for the flash-attn package) is named "
                 f"as one. Not run or unavailable: {why}.")]
    rows.append(_quantisation_matrix(ev))
    return rows


def _quantisation_matrix(ev: Evidence) -> dict:
    """M8: every paper path has a timed cell checked in its own run (QT's definition, checked.quantised_checks)."""
    from decodegap.analysis import quant_checks
    from decodegap.claims.quantisation import timed_quant_cells

    pub_q = [q for q in ev.pub("quantisation", "step_ms", gpu="l4")["quant"]]
    qc = ev.quant_cells
    bf16 = qc[(qc["quant"] == "bf16") & (qc["status"] == "ok")] if not qc.empty else qc
    timed = timed_quant_cells(ev)
    cov = quant_checks.coverage(timed).set_index(["gpu", "quant"]) if not timed.empty else pd.DataFrame()
    outs, parts = {}, []
    for q in pub_q:
        if q == "bf16":
            outs[q] = HOLDS if not bf16.empty else NOT_TESTABLE
            parts.append(f"bf16: {len(bf16)} timed cells (the reference)")
            continue
        o = timed.loc[timed["quant"] == q, "qt"].tolist() if not timed.empty else []
        outs[q] = (NOT_TESTABLE if not o or set(o) == {NOT_TESTABLE} else HOLDS if HOLDS in o
                   else FAILS if all(x in (FAILS, NOT_TESTABLE) for x in o) else INCONCLUSIVE)
        here = cov[cov.index.get_level_values("quant") == q] if not cov.empty else cov
        parts += ([quant_checks.coverage_text(r) for r in here.reset_index().itertuples()] if not here.empty
                  else [f"{q}: no timed cell"])
    verdict = (NOT_TESTABLE if NOT_TESTABLE in outs.values() else FAILS if FAILS in outs.values()
               else INCONCLUSIVE if INCONCLUSIVE in outs.values() else HOLDS)
    missing = [q for q, o in outs.items() if o == NOT_TESTABLE]
    return row("M8", "method", "Software-stack matrix, quantisation paths: bf16, bitsandbytes nf4, AutoAWQ + Marlin, "
               "GPTQ + ExLlamaV2.", ", ".join(pub_q), "; ".join(parts) or "none",
               ", ".join(sorted(set(qc["gpu"]))) if not qc.empty else "-", _m(verdict),
               "Every paper path has a timed cell checked in its own run: its format and layer checks at one row and "
               "at the prefill's rows, and its whole-model check against its bf16 model within k_pass x the null of "
               "that run (QT's definition, checked.quantised_checks; bf16 is the reference). A cell checked only "
               "under an earlier rule is drawn unchecked and counted nowhere. "
               + (f"No checked timed cell yet for: {', '.join(missing)}." if missing else ""))


def _batches_measured(ev: Evidence) -> str:
    """Notebook 07's batch sizes above 1 per GPU (ev.scope's cells), as words: 'h200 B = 2-64', or ''."""
    cells = ev.scope.get("cells") if isinstance(ev.scope, dict) else None
    big = cells[cells["batch"] > 1] if cells is not None and not cells.empty else None
    if big is None or big.empty:
        return ""
    return ", ".join(f"{gpu} B = {int(g['batch'].min())}-{int(g['batch'].max())}" for gpu, g in big.groupby("gpu"))


def scope(ev: Evidence) -> list[dict]:
    batches = _batches_measured(ev)
    return [row("S1", "scope", "Not claimed for large batches (the launch tax shrinks), other architectures (MHA/MQA) or "
                 "other hardware (AMD, Blackwell).", "scope", "-", "-", _m(NOT_TESTABLE),
                 "A statement of scope, not a measurement. Its remark that the launch tax shrinks with batch is tested "
                 + (f"as W1, on notebook 07's batch rows ({batches}). " if batches else
                    "as W1 once notebook 07 has batch > 1 rows (none yet). ")
                 + f"{_attention_kinds(ev)}; {_hardware_kinds(ev)}.")]


def _hardware_kinds(ev: Evidence) -> str:
    """The GPUs measured, by name and architecture (the registry, data/specs/gpus.csv), and whether any is an AMD or a
    Blackwell one (the paper's scope statement leaves those out)."""
    specs = ev.specs.set_index("gpu") if "gpu" in ev.specs else ev.specs
    named = {g: (str(specs.loc[g, "name"]), str(specs.loc[g, "architecture"])) for g in ev.measured if g in specs.index}
    out = [g for g, (name, arch) in named.items() if "AMD" in name or "Blackwell" in arch]
    return ("the GPUs measured here: " + (", ".join(f"{name} ({arch})" for name, arch in named.values()) or "none")
            + (f" ({', '.join(out)} outside the paper's hardware)" if out else ": AMD and Blackwell GPUs are not measured"))


def _attention_kinds(ev: Evidence) -> str:
    """The attention of the models measured (Evidence.measured_values: those with rows among the measured cells, from
    their configs): grouped-query where a model has fewer key-value heads than query heads and
    more than one, MHA where as many, MQA where one."""
    keys = ev.measured_values("model")
    kinds: dict[str, list[str]] = {}
    for key, c in models.configs(keys, ev.data).items():
        heads, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
        kinds.setdefault("MHA" if kv == heads else "MQA" if kv == 1 else "GQA", []).append(key)
    return ("Of the " + str(len(keys)) + " models measured here, "
            + ", ".join(f"{len(v)} {k}" for k, v in sorted(kinds.items()))
            + ("" if {"MHA", "MQA"} & set(kinds) else " (MHA and MQA models are not measured)"))
