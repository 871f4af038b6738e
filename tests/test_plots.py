"""Figures read without the README: a short title that states the finding (style.TITLES), one colour per arm and per GPU across
figures, shared axes where panels compare, targets drawn, no line across separate levers, products labelled,
a failed check told apart from a cell that never ran. Drawn from the committed tables in figures/."""

from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
import pytest

from decodegap.figures import attention_backends as attention_plots, cost as cost_plots, cuda_graphs_ab as ab_plots
from decodegap.figures import closing_the_gap as ladder_plots, quantisation as quant_plots, roofline as roofline_plots, style
from decodegap import levers, paths

F = paths.FIGURES


def _title(fig) -> str:
    return fig._suptitle.get_text() if fig._suptitle is not None else ""


def _hex(color) -> str:
    return mcolors.to_hex(color)


@pytest.fixture(scope="module")
def ladder_table():
    return pd.read_csv(F / "06_ladder.csv")


def test_the_ladder_draws_both_targets_and_joins_no_levers(ladder_table):
    fig = ladder_plots.ladder(ladder_table, "h200")
    ax_ms, ax_r = fig.axes[:2]
    flat = lambda ax: {round(float(line.get_xdata()[0]), 3) for line in ax.get_lines()
                       if len(set(np.round(line.get_xdata(), 6))) == 1 and len(line.get_xdata()) == 2}
    assert levers.TARGETS["bf16"]["r_floor"] in flat(ax_r)  # R_floor 0.80
    assert levers.TARGETS["int4"]["step_ms"] in flat(ax_ms)  # 2.0 ms
    for ax in (ax_ms, ax_r):  # every data series is points: no line runs from one lever to the next
        for line in ax.get_lines():
            xs = np.asarray(line.get_xdata(), dtype=float)
            assert len(xs) <= 2 and (len(set(np.round(xs, 6))) == 1 or len(xs) < 2), line
    assert _title(fig).splitlines()[0] == style.TITLES["06_ladder.png"]
    names = [t.get_text() for t in ax_ms.get_yticklabels()]
    assert names == [lever for lever, _, _ in levers.LEVERS]  # one row per lever, its name written across
    assert all(t.get_rotation() == 0 for t in ax_ms.get_yticklabels())
    colours = {_hex(c) for coll in ax_ms.collections for c in coll.get_facecolors() if c[3] > 0}
    assert _hex(style.ARM_COLOR["lean_attn_compile"]) in colours and _hex(style.ARM_COLOR["graph"]) in colours


def test_products_are_labelled_and_microseconds_written_properly():
    by_projection, fits = pd.read_csv(F / "06_projections.csv"), pd.read_csv(F / "06_product_fits.csv")
    fig = ladder_plots.products(by_projection, fits, "h200", "llama-3.1-8b", 2048, 4800.0,
                                arms=["eager", "lean", "lean_kernels_graph", "lean_attn_compile"])
    ax = fig.axes[0]
    labels = {t.get_text() for t in ax.get_legend().get_texts()}  # each product its own marker, named in the legend
    assert {f"product: {p}" for p in ("qkv", "o", "gate_up", "down", "lm_head", "q", "k", "v")} <= labels
    assert "µs" in ax.get_ylabel() and " us " not in ax.get_ylabel()
    assert any("µs + bytes at" in text for text in labels)


def test_one_colour_per_arm_across_figures_and_shared_axes():
    cells = pd.read_csv(F / "02_ab_cells.csv")
    long = pd.concat([cells.assign(arm=a, t_obs_ms=cells[f"{a}_ms"], r_floor_W_all=cells[f"r_floor_{a}"])
                      for a in ("eager", "graph", "compile")])
    fig = ab_plots.r_floor_per_arm(long)
    for ax in fig.axes[:3]:
        for line in ax.get_lines():
            arm = line.get_label().split(" ")[-1]
            if arm in style.ARM_COLOR:
                assert _hex(line.get_color()) == _hex(style.ARM_COLOR[arm]), line.get_label()
    ylims = {ax.get_ylim() for ax in fig.axes[:3]}
    assert len(ylims) == 1  # the model panels share their y axis
    assert _title(fig).splitlines()[0] == style.TITLES["02_r_floor_per_arm.png"]


def test_attention_panels_share_their_axis_and_name_microseconds():
    summ = pd.read_csv(F / "03_attention_cells.csv")
    fig = attention_plots.attention_us_vs_context(summ, "llama-3.1-8b")
    host, gpu = fig.axes[:2]
    assert host.get_ylim() == gpu.get_ylim()
    assert "µs" in host.get_ylabel()
    by_label = lambda ax: {line.get_label(): _hex(line.get_color()) for line in ax.get_lines()}
    common = set(by_label(host)) & set(by_label(gpu))
    assert len(common) >= 5 and all(by_label(host)[k] == by_label(gpu)[k] for k in common)  # a backend keeps its colour
    assert _title(fig).splitlines()[0] == style.TITLES["03_attention_us_vs_context.png"]
    box = gpu.get_legend() or fig.legends[0]  # beside the panels, or below both once two GPUs' series fill it
    legend = [t.get_text() for t in box.get_texts()]
    assert any(" = " in text for text in legend)  # backends that time alike are one series, named by both


def test_speedup_labels_are_readable():
    speed = pd.DataFrame(dict(gpu="h200", model=["a", "a", "b"], ctx=2048, attn="sdpa", quant="bf16",
                              arm=["graph", "compile", "graph"], base="eager", speedup=[2.5, 4.0, 2.9],
                              ci_low=[2.4, 3.9, 2.8], ci_high=[2.6, 4.1, 3.0], sessions=10))
    pub = pd.DataFrame(dict(gpu=["h100-sxm"], value=[1.259], ci_low=[1.253], ci_high=[1.267]))
    fig = ab_plots.speedup_ci(speed, pub)
    ax = fig.axes[0]
    for tick in ax.get_xticklabels():
        assert tick.get_rotation() == 0 and tick.get_fontsize() >= 8
    assert _title(fig).splitlines()[0] == style.TITLES["02_speedup_ci.png"]


def test_every_figure_function_titles_its_finding():
    cells = pd.read_csv(F / "01_roofline_cells.csv")
    cells["bandwidth_gbps"] = cells["gpu"].map({"h200": 4800.0, "h100-sxm": 3350.0})
    pub = pd.DataFrame(dict(gpu=["l4", "h100-sxm"], value=[0.81, 0.27], bandwidth_gbps=[300.0, 3350.0]))
    fig = roofline_plots.r_floor_vs_bandwidth(cells, pub)
    assert _title(fig).splitlines()[0] == style.TITLES["01_r_floor_vs_bandwidth.png"]
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == ["l4\n300", "h100-sxm\n3,350", "h200\n4,800"]  # one tick per GPU: nothing collides
    decomp = pd.read_csv(F / "02_decomposition.csv")
    assert _title(ab_plots.decomposition(decomp)).splitlines()[0] == style.TITLES["02_decomposition.png"]
    lad, floors = pd.read_csv(F / "05_cost_ladder.csv"), pd.read_csv(F / "05_cost_at_floor.csv")
    fig = cost_plots.cost_ladder(lad, floors, "floor")
    texts = [t.get_text().replace("\\$", "$") for t in fig.axes[0].texts]  # drawn escaped, not as mathtext
    best = lad[(lad.gpu == "h200") & (lad.kernels == "best")].iloc[0]
    assert any(t.startswith(f"{best.configuration}*: ${best.usd_per_mtok:.2f}") for t in texts)  # starred: its price
    # is not the paper's provider's
    assert any("h200 (spheron price)" in t.get_text() for t in fig.texts)  # the provider named under the axes
    assert _title(fig).splitlines()[0] == style.TITLES["05_cost_ladder.png"]


def test_a_failed_check_and_a_cell_that_never_ran_look_different():
    table = pd.DataFrame({"quant": ["bf16", "int4", "nf4"], "ctx": 2048, "g eager ms": [10.0, np.nan, np.nan],
                          "g eager check": ["reference", "failed: NaN logits", None], "g floor ms": [3.0, 1.0, 1.0]})
    fig = quant_plots.ms_vs_floor(table, "test")
    marks = {c.get_label(): (c.get_paths()[0].vertices.tobytes(), _hex(c.get_edgecolors()[0]))
             for c in fig.axes[0].collections if c.get_label() in ("check failed (no time kept)",
                                                                   "never ran here (see the table's status)")}
    assert len(set(marks.values())) == 2  # another marker and colour each
    assert not fig.axes[0].texts  # the markers and the legend say it: no text over the bars
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "check failed (no time kept)" in labels and "never ran here (see the table's status)" in labels


def test_two_gpus_bars_of_one_arm_differ_by_their_hatch():
    """The same arm keeps its colour on every GPU, so the second GPU's bars carry a hatch the first's lack."""
    table = pd.DataFrame({"quant": ["bf16", "int4"], "ctx": 2048, "a eager ms": [10.0, 5.0], "b eager ms": [9.0, 4.0],
                          "a floor ms": [3.0, 1.0], "b floor ms": [2.0, 0.7]})
    fig = quant_plots.ms_vs_floor(table, "test")
    bars = {c.get_label(): c for c in fig.axes[0].containers}
    first, second = bars["a eager (measured)"], bars["b eager (measured)"]
    assert _hex(first.patches[0].get_facecolor()) == _hex(second.patches[0].get_facecolor())  # the arm's colour
    assert not first.patches[0].get_hatch() and second.patches[0].get_hatch() == quant_plots.GPU_HATCHES[1]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "a eager (measured)" in labels and "b eager (measured)" in labels
    assert "bf16 only here" not in _title(fig)
    only_bf16 = table.assign(**{"b eager ms": [9.0, np.nan]})  # b timed bf16 alone for this model
    assert "\nb: bf16 only here, no quantised cell of this model (other models: 04_quant_grid.png" in _title(
        quant_plots.ms_vs_floor(only_bf16, "test"))


def test_the_attention_figure_draws_the_published_values_beside_ours():
    """Issue 16: the per-layer figure shows the paper's H100 per-layer times (stars, labelled published) beside ours."""
    import pandas as pd

    from decodegap import published

    summ = pd.DataFrame([dict(gpu="h200", model="m", ctx=c, attn="sdpa", status="ok", host_us=30.0 + c / 1e3,
                              gpu_us=7.0) for c in (2048, 4096)])
    pub = published.select(published.load(), "attention_backends", "us_per_layer")
    fig = attention_plots.attention_us_vs_context(summ, "m", pub)
    labels = [t.get_text() for t in fig.axes[1].get_legend().texts]  # the legend of both panels
    assert sum("published" in text for text in labels) == len(pub) == 4
    stars = [c for c in fig.axes[0].collections if len(c.get_offsets())]
    assert sorted(float(c.get_offsets()[0][1]) for c in stars) == sorted(pub["value"])


def test_every_attention_backend_has_a_colour_of_its_own():
    from decodegap.harness import attention

    colours = [attention_plots.backend_color(key) for key in attention.BACKENDS]
    assert len(set(colours)) == len(colours)


def test_the_cost_ladder_labels_each_measured_best_with_its_confirmation():
    """A measured best confirmed in 3 sessions carries its confirmed $/Mtok, one in 2 says so, one without a
    confirmation says 'not confirmed'; naive and published points carry nothing."""
    row = dict(bandwidth_gbps=3350, price_provider="modal", confirmed_ms=1.0, confirmed_min_ms=1.0,
               confirmed_max_ms=1.0, confirmed_usd_per_mtok=2.16)
    ladder = pd.DataFrame([dict(row, source="measured", gpu="h100-sxm", kernels="naive", configuration="bf16 eager",
                                step_ms=25.0, usd_per_mtok=28.2, confirmed_sessions=np.nan),
                           dict(row, source="measured", gpu="h100-sxm", kernels="best", configuration="int4 x",
                                step_ms=2.1, usd_per_mtok=2.33, confirmed_sessions=3),
                           dict(row, source="measured", gpu="h200", bandwidth_gbps=4800, kernels="best",
                                configuration="int4 y", step_ms=2.0, usd_per_mtok=2.53, confirmed_sessions=0),
                           dict(row, source="published (paper)", gpu="l4", bandwidth_gbps=300, kernels="best",
                                configuration="gptq-exllamav2", step_ms=17.36, usd_per_mtok=3.85,
                                confirmed_sessions=np.nan)])
    fig = cost_plots.cost_ladder(ladder, pd.DataFrame(), "floor")
    labels = {t.get_text().replace("\\$", "$") for t in fig.axes[0].texts}  # drawn escaped: two $ are not mathtext
    assert {"bf16 eager: $28.20", "int4 x: $2.33 (confirmed $2.16)", "int4 y: $2.53 (one sweep, not confirmed)",
            "gptq-exllamav2: $3.85"} <= labels
    two = cost_plots.confirmed_label(next(ladder.assign(confirmed_sessions=2).iloc[[1]].itertuples()))
    assert two == " (partly confirmed $2.16, 2 of 3 sessions)"
