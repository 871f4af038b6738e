"""Notebook 03, the attention backends: does the kernel or the launch sequence bind? Its measurements
(attention_bench: the per-layer microbenchmark of every backend, then whole decode steps with a backend inside the HF
model), its rows (attention.csv, each cell's newest run; decode.csv with a forced backend), its tables (the per-layer
summary, the paper's table, identical calls, the whole step, the ranking) and its findings."""

from __future__ import annotations

import pandas as pd

from decodegap.analysis import attention_backends as attention_report
from decodegap import checked, hardware, published, records, roofline
from decodegap.harness import models

NOTEBOOK = "03_attention_backends"
STEP_BACKENDS = ("sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math", "flex", "fa2", "fa3",
                 "flashinfer_paged")
"""Backends timed inside the whole decode step (the notebook's STEP_BACKENDS default)."""
STEP_CONTEXTS = (2048, 16384)


def plan(gpu: str, models_, step_backends=STEP_BACKENDS, step_contexts=STEP_CONTEXTS, sessions: int = 1,
         steps: int = 30, warmup: int = 5, device: str = "cuda") -> list:
    """The whole-step sweeps, one per backend (attention_bench.step_plans); the per-layer microbenchmark is no sweep
    (attention_bench.record_attention times every cell of a run once a round)."""
    from decodegap.experiments import attention_backends_measure as attention_bench

    return attention_bench.step_plans(gpu, models_, step_backends, step_contexts, sessions, steps, warmup, device)


def measure(gpu: str, models_, contexts, backends=None, step_backends=STEP_BACKENDS, step_contexts=STEP_CONTEXTS,
            sessions: int = 1, steps: int = 30, warmup: int = 5, device: str = "cuda", data=None) -> None:
    """The per-layer microbenchmark, then the sweeps of `plan` (attention_bench.measure_attention)."""
    from decodegap.experiments import attention_backends_measure as attention_bench

    attention_bench.measure_attention(gpu, models_, contexts, backends, step_backends, step_contexts, sessions, steps,
                                      warmup, device, data)


def record_attention(gpu: str, models_, contexts, backends=None, data=None, device: str = "cuda",
                     retry_unavailable: bool = False, again: bool = False) -> str:
    """The per-layer microbenchmark alone (attention_bench.record_attention); returns its run id."""
    from decodegap.experiments import attention_backends_measure as attention_bench

    return attention_bench.record_attention(gpu, models_, contexts, backends, data, device,
                                            retry_unavailable=retry_unavailable, again=again)


def rows(data) -> pd.DataFrame:
    """The per-layer rows (data/raw/<gpu>/attention.csv of every GPU)."""
    return records.load_experiment("attention", data)


def summary(data) -> pd.DataFrame:
    """attention_report.summary of `rows` (each cell's newest run). The claims table reads it from here too."""
    return attention_report.summary(rows(data))


def step_rows(data) -> pd.DataFrame:
    """The decode rows of the whole-step measurement: each cell from one sweep, as every notebook reads decode.csv,
    unchecked cells as status rows (checked.labelled)."""
    return roofline.one_sweep(checked.labelled(checked.load("decode", data)), records.run_plans(data))


def tables(data, models_=(), step_backends=STEP_BACKENDS, step_contexts=STEP_CONTEXTS, table_ctx: int = 2048,
           table_model: str = "llama-3.1-8b") -> dict:
    """Notebook 03's tables: `summary` (per layer, each cell's newest run), `published`, `paper_table` (the paper's
    table at `table_ctx` and `table_model` with our columns), `shape_agreement` (identical calls of two models),
    `steps` (attention_report.step_table of `step_backends` at `step_contexts`), `ranking` (the per-layer ranking
    against the whole step's), the configs of `models_` and `measured_gbps` (copy bandwidth per GPU)."""
    summ = summary(data)
    pub = published.load(data)
    shapes = {k: models.load_spec(k, data).config for k in sorted(set(summ["model"]))}
    configs = {key: models.load_spec(key, data).config for key in models_}
    steps = attention_report.step_table(step_rows(data), hardware.specs_table(data), configs, list(step_backends),
                                        list(step_contexts))
    return dict(
        summary=summ, published=pub, configs=configs,
        paper_table=attention_report.paper_table(summ, pub, table_ctx, table_model),
        published_us=published.select(pub, "attention_backends", "us_per_layer"),
        shape_agreement=attention_report.shape_agreement(summ, shapes),
        steps=steps, ranking=attention_report.ranking_table(steps, summ),
        measured_gbps=roofline.measured_bandwidth(records.load_experiment("bandwidth", data)).to_dict())


def findings(t: dict) -> dict:
    """Per figures stem: identical calls, what binds one call of SDPA's default, per backend and shape, the graphed
    whole step against the per-layer kernel, and whether the faster per-layer kernel makes the faster step."""
    return {"03_findings_identical_calls": attention_report.shape_findings(t["shape_agreement"]),
            "03_findings_binding": attention_report.binding_findings(t["summary"]),
            "03_findings_backends": attention_report.findings(t["summary"]),
            "03_findings_steps": attention_report.step_findings(t["steps"], t["summary"], t["configs"],
                                                                t["measured_gbps"]),
            "03_findings_ranking": attention_report.ranking_findings(t["ranking"])}
