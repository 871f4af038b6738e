"""What the claims read: every table the rules test, each from the experiment that owns it (decodegap.experiments),
and the look-ups the rules share (a published value, a GPU's bandwidth, a measured cell, our value on the GPUs we have)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

import numpy as np
import pandas as pd

from decodegap.analysis import cuda_graphs_ab as ab, quantisation as quant_report
from decodegap.analysis import closing_the_gap_confirmation as confirmation
from decodegap.analysis import where_the_thesis_ends as scope_analysis
from decodegap import accounting, checked, hardware, published, records
from decodegap.harness import models
from decodegap.experiments import attention_backends, cuda_graphs_ab, quantisation, where_the_thesis_ends
from decodegap.experiments import cost as cost_experiment
from decodegap.experiments import roofline as roofline_grid

from decodegap.claims import rules

SLOW_GPU_GBPS = rules.get("T2").t("slow_gbps")
"""GPUs below this datasheet bandwidth are the paper's "slow GPUs" (L4, L40S); at or above the H100's, "fast"
(both from the registry: T2's slow_gbps, T1's fast_gbps)."""
FAST_GPU_GBPS = rules.get("T1").t("fast_gbps")


CELL_FRAMES = ("cells", "speed", "decomp", "attention", "quant_cells", "ab_sessions")
"""The Evidence frames of measured cells, one row per cell or per session of a cell (Evidence.measured_values)."""


def of_ab_cells(frame: pd.DataFrame, cells: pd.DataFrame) -> np.ndarray:
    """Which rows of `frame` are of one of `cells` (A/B cell keys: the columns of ab.CELL and `sweep`, those of them
    that `frame` has)."""
    keys = [k for k in cells.columns if k in frame]
    return pd.MultiIndex.from_frame(frame[keys]).isin(pd.MultiIndex.from_frame(cells[keys]))


def _splice(old: pd.DataFrame, new: pd.DataFrame, cells: pd.DataFrame, then=()) -> pd.DataFrame:
    """`old` (ab.speedups' or ab.session_table's frame) with the rows of `cells` replaced by `new` (the same table
    of those cells' rows alone), in the order and columns the whole table has: sorted by cell (and `then`)."""
    parts = [f for f in (old[~of_ab_cells(old, cells)], new) if not f.empty]  # an empty part would loosen the dtypes
    if not parts:
        return old.iloc[:0]
    out = pd.concat(parts, ignore_index=True)
    keys = [k for k in ab.CELL + ["sweep"] if k in out] + list(then)
    return out.sort_values(keys, kind="stable").reindex(columns=old.columns).reset_index(drop=True)


@dataclass
class Evidence:
    """Everything the rules read, each from the module that owns it. Frames may be empty (no rows yet)."""

    published: pd.DataFrame  # published.load()
    specs: pd.DataFrame  # hardware.specs_table()
    configs: Mapping[str, Mapping]  # model key -> HF config, the paper's three models
    cells: pd.DataFrame  # roofline.cell_table of notebook 01's decode rows (cell_rows; with_cell_rows remakes it)
    speed: pd.DataFrame  # ab.speedups (graph), per cell and sweep of the A/B (ab_rows; with_ab_rows remakes it)
    decomp: pd.DataFrame  # ab.decomposition of the A/B's grid sweep (ab_rows, kernel_rows; with_ab_rows remakes it)
    attention: pd.DataFrame  # attention_report.summary
    quant_cells: pd.DataFrame  # quant_report.cells of notebook 04's decode rows (quant_rows; with_quant_rows remakes)
    quant_bytes: pd.DataFrame  # quant_report.byte_table of the headline context
    costs: pd.DataFrame  # cost.cost_table of published and measured configurations
    prices: pd.DataFrame  # cost.load_prices()
    ab_sessions: pd.DataFrame = field(default_factory=pd.DataFrame)  # ab.session_table: per session, one column per arm
    ab_rows: pd.DataFrame = field(default_factory=pd.DataFrame)  # notebook 02's A/B rows behind speed and ab_sessions
    verify: pd.DataFrame = field(default_factory=pd.DataFrame)  # verify.csv rows of every GPU (the checks)
    cell_rows: pd.DataFrame = field(default_factory=pd.DataFrame)  # notebook 01's decode rows behind `cells`
    bandwidth_rows: pd.DataFrame = field(default_factory=pd.DataFrame)  # bandwidth.csv rows: the cells' copy bandwidth
    kernel_rows: pd.DataFrame = field(default_factory=pd.DataFrame)  # kernels.csv grid rows: decomp's kernel counts
    confirmations: pd.DataFrame = field(default_factory=pd.DataFrame)  # notebook 06's confirmation of every lever
    quant_rows: pd.DataFrame = field(default_factory=pd.DataFrame)  # notebook 04's decode rows behind quant_cells
    quant_verify: pd.DataFrame = field(default_factory=pd.DataFrame)  # verify.csv rows whose checks quant_cells read
    data: str = "data"  # the data folder the rows came from (claims.provenance reads env.json and the raw rows)
    scope: Mapping = field(default_factory=dict)  # where_the_thesis_ends.tables: notebook 07's tables (W1, W2a, W2b)
    headline_model: str = "qwen2.5-7b"
    headline_ctx: int = 2048
    attention_model: str = "llama-3.1-8b"
    seed: int = 0  # the bootstrap seed of `speed` (with_ab_rows draws with it again)
    paper_gpus: tuple[str, ...] = ("h100-sxm", "a100-80gb", "l40s", "l4")
    measured: list[str] = field(init=False)

    def __post_init__(self):
        ok = self.cells[self.cells["status"] == "ok"] if not self.cells.empty else self.cells
        self.measured = sorted(set(ok["gpu"])) if not ok.empty else []

    def with_cell_rows(self, rows: pd.DataFrame) -> "Evidence":
        """This evidence with `rows` (some of `cell_rows`) as notebook 01's decode rows and `cells` made again from
        them as notebook 01 makes its cells (roofline_grid.cell_table): what the rules read with a session of a cell
        left out (claims.one_left_out)."""
        return replace(self, cell_rows=rows,
                       cells=roofline_grid.cell_table(rows, self.specs, self.configs, self.bandwidth_rows))

    def with_ab_rows(self, rows: pd.DataFrame, ab_cells: pd.DataFrame | None = None) -> "Evidence":
        """This evidence with `rows` (some of `ab_rows`) as notebook 02's A/B rows and `speed`, `ab_sessions` and
        `decomp` made again from them as the claims table makes them (cuda_graphs_ab.claims_speedups, with this
        evidence's seed, and cuda_graphs_ab.grid_decomposition, with its specs, configs, bandwidth and kernel rows):
        what the rules read with an A/B session left out (claims.one_left_out). `ab_cells`: the keys (the columns of
        ab.CELL and `sweep`) of the only cells whose rows differ from ab_rows; then only those cells' speed-ups and
        sessions are made again and spliced into the frames in their places, the others kept: the frames the whole
        remake gives (ab.speedups draws each cell's bootstrap on its own, with the same seed), at a cell's cost, not
        every cell's (the whole, ab.speedups on the shipped 11,760 rows of 30 cells, takes about 0.5 s). None: every
        cell made again. The decomposition is made again whole either way (about 0.04 s on the shipped rows)."""
        if ab_cells is None or self.ab_rows.empty:
            t = cuda_graphs_ab.claims_speedups(rows, self.seed)
            return replace(self, ab_rows=rows, speed=t["speedups"], ab_sessions=t["sessions"],
                           decomp=self._decomposition(rows))
        ab_cells = pd.DataFrame(ab_cells)
        t = cuda_graphs_ab.claims_speedups(rows[of_ab_cells(rows, ab_cells)], self.seed)
        return replace(self, ab_rows=rows, speed=_splice(self.speed, t["speedups"], ab_cells),
                       ab_sessions=_splice(self.ab_sessions, t["sessions"], ab_cells, ["session"]),
                       decomp=self._decomposition(rows))

    def with_scope_rows(self, rows: pd.DataFrame) -> "Evidence":
        """This evidence with `rows` (some of notebook 07's decode rows, scope["rows"]) and notebook 07's tables made
        again from them as notebook 07 makes them (analysis.where_the_thesis_ends.replay, with the scope's specs and
        configs and this evidence's published numbers; the step model fitted again): what W1, W2a and W2b read with
        a session of notebook 07's sweeps left out (claims.one_left_out). The anatomy's descriptive tables, which no
        rule reads, are kept as they were."""
        t = scope_analysis.replay(rows, self.scope["specs"], self.published, self.scope["configs"])
        return replace(self, scope={**self.scope, **t})

    def with_quant_rows(self, rows: pd.DataFrame) -> "Evidence":
        """This evidence with `rows` (some of `quant_rows`) as notebook 04's decode rows and `quant_cells` made again
        from them as notebook 04 makes its cells (experiments.quantisation.cells_of, with the checks of their own runs
        among quant_verify): what the rules read with a session of a quantised cell left out (claims.one_left_out)."""
        return replace(self, quant_rows=rows, quant_cells=quantisation.cells_of(
            rows, self.specs, self.configs, self.bandwidth_rows, self.quant_verify))

    def _decomposition(self, rows: pd.DataFrame) -> pd.DataFrame:
        """The decomposition of the grid sweep's cells among A/B `rows` (cuda_graphs_ab.grid_decomposition)."""
        return cuda_graphs_ab.grid_decomposition(rows, self.specs, self.configs, self.bandwidth_rows, self.kernel_rows)

    def pub(self, claim: str, quantity: str, **where) -> pd.DataFrame:
        return published.select(self.published, claim, quantity, **where)

    def pub_value(self, claim: str, quantity: str, **where) -> float:
        return float(self.pub(claim, quantity, **where)["value"].iloc[0])

    def bandwidth(self, gpu: str) -> float:
        return float(self.specs.loc[self.specs["gpu"] == gpu, "bandwidth_gbps"].iloc[0])

    def floor_ms(self, gpu: str, model: str | None = None, ctx: int | None = None, convention: str = "W_all") -> float:
        from decodegap.accounting import t_floor_ms

        cfg = self.configs[model or self.headline_model]
        return t_floor_ms(accounting.step_bytes(cfg, ctx or self.headline_ctx, convention), self.bandwidth(gpu))

    def cell(self, gpu: str, arm: str = "eager", model: str | None = None, ctx: int | None = None) -> pd.Series | None:
        c = self.cells
        hit = c[(c["gpu"] == gpu) & (c["arm"] == arm) & (c["model"] == (model or self.headline_model))
                & (c["ctx"] == (ctx or self.headline_ctx)) & (c["status"] == "ok")] if not c.empty else c
        return None if hit.empty else hit.iloc[0]

    def speedup(self, gpu: str, model: str | None = None) -> pd.Series | None:
        """The headline statistic of one GPU and model (ab.headline: the headline sweep's sessions alone)."""
        s = ab.headline(self.speed, self.headline_ctx) if not self.speed.empty else self.speed
        hit = s[(s["gpu"] == gpu) & (s["arm"] == "graph") & (s["model"] == (model or self.headline_model))
                ] if not s.empty else s
        return None if hit.empty else hit.iloc[0]

    def kept_apart(self, gpu: str) -> str:
        """Notebook 02's sentence on the sessions of `gpu`'s headline cells that the headline statistic leaves out
        (ab.sweep_findings), or ''."""
        s = self.speed[self.speed["gpu"] == gpu] if not self.speed.empty else self.speed
        return " ".join(ab.sweep_findings(s, self.headline_ctx)) if not s.empty else ""

    def quant_ms(self, gpu: str, quant: str, arm: str = "eager") -> float:
        q = self.quant_cells
        hit = q[(q["gpu"] == gpu) & (q["quant"] == quant) & (q["arm"] == arm) & (q["model"] == self.headline_model)
                & (q["ctx"] == self.headline_ctx) & (q["status"] == "ok")] if not q.empty else q
        return float(hit["t_obs_ms"].iloc[0]) if not hit.empty else np.nan

    def headline_decomp(self, gpu: str) -> pd.DataFrame:
        d = self.decomp
        return d[(d["gpu"] == gpu) & (d["ctx"] == self.headline_ctx)] if not d.empty else d

    def measured_values(self, column: str) -> list:
        """The values of `column` ("model", "ctx") among the measured cells (CELL_FRAMES and notebook 07's cells),
        sorted; verify.csv's rows are checks of those cells and add none (their ctx is a check's position)."""
        frames = [getattr(self, name) for name in CELL_FRAMES]
        if isinstance(self.scope, Mapping) and isinstance(self.scope.get("cells"), pd.DataFrame):
            frames.append(self.scope["cells"])
        values = set().union(*(set(f[column].dropna()) for f in frames
                                if isinstance(f, pd.DataFrame) and column in f and not f.empty))
        return sorted(values, key=str if column == "model" else int)

    def missing(self, gpu: str) -> str:
        have = ", ".join(self.measured) or "none"
        return f"no {gpu} rows under data/raw/ (GPUs measured: {have})"

    def missing_grid(self, gpu: str, ctx: int | None = None) -> str:
        """Why `gpu` has no rows of the A/B grid sweep at `ctx` (the headline context): not measured at all
        (missing), or measured without that sweep's cells there, naming the contexts its grid sweep has."""
        ctx = ctx or self.headline_ctx
        if gpu not in self.measured:
            return self.missing(gpu)
        s = self.ab_sessions
        grid = s[(s["gpu"] == gpu) & (s["sweep"] == "grid")] if not s.empty and "sweep" in s else s.iloc[:0]
        has = ", ".join(str(int(c)) for c in sorted(set(grid["ctx"]))) if not grid.empty else ""
        return (f"no {gpu} rows of the A/B grid sweep at ctx {ctx}, this rule's input ("
                + (f"its grid sweep has ctx {has}; its headline sweep is not this rule's input)" if has
                   else "it has no grid sweep)"))

    def nearest(self, text) -> str:
        """Our value on the GPUs we do have, for claims about one we do not: `text(gpu)` or None per GPU."""
        parts = [t for t in (text(g) for g in self.measured) if t]
        return "; ours: " + "; ".join(parts) if parts else ""


def collect(data, costs: pd.DataFrame | None = None, prices: pd.DataFrame | None = None,
            headline_model: str = "qwen2.5-7b", headline_ctx: int = 2048, attention_model: str = "llama-3.1-8b",
            seed: int = 0, confirmations: pd.DataFrame | None = None) -> Evidence:
    """Evidence from a data folder through the experiments of notebooks 01-05 (notebook 01's R_floor cells and the
    decode and bandwidth rows they are made of, the graph speed-ups of each A/B sweep and the decomposition of its
    grid, the attention summary, notebook 04's quantisation cells and byte model, notebook 05's cost table: `costs`
    and `prices` where given, else the cost experiment's at its defaults, notebook 06's confirmation of every lever,
    which R5m's cheapest configuration reads (`confirmations`, the cost experiment's, where given), and notebook 07's
    tables). decode.csv and its checks are read and joined once for all of them (checked.loaded_once)."""
    with checked.loaded_once():
        return _collect(data, costs, prices, headline_model, headline_ctx, attention_model, seed, confirmations)


def _collect(data, costs, prices, headline_model, headline_ctx, attention_model, seed, confirmations) -> Evidence:
    """collect's body, inside checked.loaded_once."""
    specs = hardware.specs_table(data)
    keys = roofline_grid.measured_models(data) | {"qwen2.5-7b", "mistral-7b-v0.3", "llama-3.1-8b", headline_model,
                                                  attention_model}
    configs = models.configs(keys, data)
    if costs is None or prices is None:
        t = cost_experiment.tables(data, headline_model=headline_model, headline_ctx=headline_ctx)
        costs, prices, confirmations = t["costs"], t["prices"], t["confirmations"]
    if confirmations is None:
        confirmations = confirmation.lever_confirmations(*confirmation.confirming_rows(data))
    # each notebook's experiment, from the one module the notebook itself calls
    cell_rows, cells, _ = roofline_grid.cells(data, configs)
    ab_t = cuda_graphs_ab.claims_tables(data, configs, seed)
    quant_rows, quant_cells, _ = quantisation.cells(data, configs)
    return Evidence(
        published=published.load(data), specs=specs, configs=configs, cells=cells, cell_rows=cell_rows,
        bandwidth_rows=records.load_experiment("bandwidth", data),
        speed=ab_t["speedups"], ab_sessions=ab_t["sessions"], ab_rows=ab_t["rows"], verify=ab_t["verify"],
        data=str(data), decomp=ab_t["decomposition"], kernel_rows=ab_t["kernels"],
        attention=attention_backends.summary(data),
        quant_cells=quant_cells, quant_rows=quant_rows, quant_verify=records.load_experiment("verify", data),
        quant_bytes=quant_report.byte_table({headline_model: configs[headline_model]}, ctx=headline_ctx),
        costs=costs, prices=prices, headline_model=headline_model, headline_ctx=headline_ctx,
        confirmations=confirmations,
        attention_model=attention_model, seed=seed, scope=where_the_thesis_ends.tables(data))
