"""The README gallery quotes figures/gallery.csv, which decodegap.figures.gallery generates from the tables in figures/;
the values it quotes are checked here against those tables, computed again by hand."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest

from decodegap.claims import table as claims
from decodegap.figures import gallery
from decodegap import paths


def _gallery_lines() -> dict[str, str]:
    readme = (paths.REPO / "README.md").read_text()
    block = readme.split("## Gallery", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| !\[\]\(figures/([\w.-]+\.png)\) `[\w.-]+` \| (.*) \|$", block, re.M))


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"(?<![\w.])\d+\.\d+|(?<![\w.])\d+(?![\w.])", text)]


def test_the_readme_gallery_quotes_figures_gallery_csv_for_every_figure():
    committed = pd.read_csv(paths.FIGURES / "gallery.csv").set_index("figure")["finding"]
    lines = _gallery_lines()
    pngs = sorted(p.name for p in paths.FIGURES.glob("*.png"))
    assert sorted(committed.index) == pngs, "figures/gallery.csv does not cover every figure: run make reproduce"
    for png in pngs:
        assert png in lines, f"{png} is missing from the README gallery"
        assert lines[png] == committed[png], (f"README gallery line of {png} differs from figures/gallery.csv: run "
                                              "python -m decodegap gallery --readme")


def test_figures_gallery_csv_is_what_the_tables_give_now():
    committed = pd.read_csv(paths.FIGURES / "gallery.csv").set_index("figure")["finding"].to_dict()
    assert committed == {name: gallery.line(name, text) for name, text in gallery.findings().items()}, \
        "figures/gallery.csv is stale: run make reproduce"


def test_the_graph_speedups_and_eager_span_are_the_tables_values():
    found = gallery.findings()
    sp = pd.read_csv(paths.FIGURES / "02_speedups.csv")
    h = sp[(sp.gpu == "h200") & (sp.ctx == 2048) & (sp.arm == "graph") & (sp.sweep == "headline")]
    lo, hi = _numbers(found["02_speedup_ci.png"])[:2]
    assert (lo, hi) == (round(h.speedup.min(), 2), round(h.speedup.max(), 2))
    cells = pd.read_csv(paths.FIGURES / "01_roofline_cells.csv")
    eager = cells[(cells.gpu == "h200") & (cells.arm == "eager")]
    lo, hi = _numbers(found["01_step_time_vs_context.png"])[:2]  # "H200" and "2k" are not numbers here
    assert (lo, hi) == (round(eager.t_obs_ms.min(), 1), round(eager.t_obs_ms.max(), 1))



def test_the_step_model_line_says_its_claim_reads_every_gpus_fits():
    """The line describes the H200's fits; W2a's label (claims.csv) reads every GPU's, the paper's class first."""
    found = gallery.findings()
    claims = pd.read_csv(paths.FIGURES / "claims.csv").set_index("id")
    assert found["07_step_model_residuals.png"].startswith("On the H200: ")
    assert (f"(claims W2a, over every GPU's fits, the paper's GPU class first: {claims.loc['W2a', 'verdict']}; "
            in found["07_step_model_residuals.png"])

def test_the_cost_ratio_and_the_published_values_come_from_their_files():
    found = gallery.findings()
    ladder = pd.read_csv(paths.FIGURES / "05_cost_ladder.csv")
    lad = ladder[ladder.source == "published (paper)"].set_index(["gpu", "kernels"])
    ratio = lad.loc[("h100-sxm", "best"), "usd_per_mtok"] / lad.loc[("l4", "best"), "usd_per_mtok"]
    assert f"({ratio:.2f}x, not ~6x)" in found["05_cost_ladder.png"]  # 6: the paper's "about 6x" (paper.csv)
    ours = ladder[(ladder.source == "measured") & (ladder.gpu == "h100-sxm")].set_index("kernels").usd_per_mtok
    if len(ours):  # the H100 SXM measured here, beside the paper's
        assert (f"An H100 SXM measured here costs ${ours['naive']:.2f}/Mtok naive" in found["05_cost_ladder.png"]
                and f"and ${ours['best']:.2f} at its best" in found["05_cost_ladder.png"])
    # each measured best with what notebook 06's confirmation sweeps hold of it, from the same table
    for gpu, best in ladder[(ladder.source == "measured") & (ladder.kernels == "best")].set_index("gpu").iterrows():
        words = (f"confirmed at {best.confirmed_ms:.2f} ms = ${best.confirmed_usd_per_mtok:.2f}/Mtok in "
                 f"{int(best.confirmed_sessions)} fresh sessions" if best.confirmed_sessions else
                 f"{best.configuration}; the cheapest of many, from one sweep, not confirmed in fresh sessions")
        assert words in found["05_cost_ladder.png"], gpu
    pub = pd.read_csv(paths.DATA / "published" / "paper.csv")
    r = pub[(pub.claim == "inverted_ladder") & (pub.quantity == "r_floor")].set_index("gpu")["value"]
    assert found["01_r_floor_vs_bandwidth.png"].startswith(f"L4 {r['l4']:.2f} and "
                                                         f"H100 {r['h100-sxm']:.2f} (published)")


def test_readme_text_replaces_each_gallery_line_and_refuses_a_missing_one():
    readme = "## Gallery\n\n| figure | finding |\n|---|---|\n| ![](figures/a.png) `a.png` | old |\n\n## Next\n"
    assert "| ![](figures/a.png) `a.png` | new |" in gallery.readme_text(readme, {"a.png": "new"})
    with pytest.raises(ValueError, match="b.png"):
        gallery.readme_text(readme, {"a.png": "new", "b.png": "x"})


def test_the_readme_counts_line_is_rewritten_from_the_claims_table(tmp_path):
    import pandas as pd

    pd.DataFrame({"section": ["finding", "finding", "finding", "method check"],
                  "category": ["supported by the paper's own numbers"] * 2 + ["not testable here", "method check: met"]}
                 ).to_csv(tmp_path / "claims.csv", index=False)
    counts = claims.claim_counts(tmp_path)
    assert counts.startswith("0 reproduced on the paper's GPU class, 0 contradicted on the paper's GPU class, ")
    assert "2 supported by the paper's own numbers, 0 contradicted by the paper's own numbers" in counts
    assert counts.endswith(", 1 not testable here, of 3 findings, and 1 method checks apart: 1 met, 0 not met, "
                           "0 inconclusive: within noise, 0 not testable here") and ";" not in counts
    text = "x\n(9 reproduced, 9 proxy; generated by notebook 05, never by hand)\n"
    assert gallery.readme_text(text, {}, counts) == f"x\n({counts}; generated by notebook 05, never by hand)\n"


def test_the_attention_line_sets_sdpas_graphed_step_beside_the_fastest_from_the_ranking_table():
    cells = pd.read_csv(paths.FIGURES / "03_attention_cells.csv")
    steps = pd.read_csv(paths.FIGURES / "03_attention_step.csv")
    ranking = pd.read_csv(paths.FIGURES / "03_attention_ranking.csv")
    g = steps[(steps.gpu == "h200") & (steps.model == "llama-3.1-8b") & (steps.arm == "graph") & (steps.status == "ok")]
    text = gallery._attention(cells, 36.05, ranking)
    for ctx, c in g.groupby("ctx"):  # by hand from the step table the ranking came from
        t = c.set_index("attn").t_obs_ms
        if t.idxmin() != "sdpa":
            assert f"{t['sdpa']:.2f} ms against {t.idxmin()}'s {t.min():.2f} ms at ctx {int(ctx)}" in text
    assert "Inside HF's" not in gallery._attention(cells, 36.05, ranking[ranking.fastest_step == "sdpa"])


def test_the_r_floor_per_arm_line_reads_one_selection():
    """Every arm's range in the 02_r_floor_per_arm line comes from the same cells: ctx 2048 of 02_ab_cells.csv."""
    ab = pd.read_csv(paths.FIGURES / "02_ab_cells.csv")
    h = ab[(ab.gpu == "h200") & (ab.ctx == 2048)]
    line = gallery.findings()["02_r_floor_per_arm.png"]
    for arm in ("eager", "graph", "compile"):
        col = h[f"r_floor_{arm}"]
        assert f"{col.min():.2f}-{col.max():.2f}" in line, arm
    assert "at ctx 2048" in line


def test_the_readme_count_of_checked_quantised_cells_is_rewritten_from_the_cells(tmp_path):
    """gallery.quant_counts on a hand-made 04_quant_cells.csv: bf16 and untimed cells are no quantised timed cells;
    two counted at ctx 2048, two drawn of an earlier rule (their dates the span), one failing a check."""
    import pandas as pd

    cells = [("bf16", "ok", "", ""), ("awq-marlin", "ok", "checked", "2026-12-02 17:03 UTC"),
             ("gptq-exllamav2", "ok", "checked", "2026-12-02 17:04 UTC"),
             ("awq-marlin", "unchecked", "earlier rule", "2026-12-01 10:53 UTC"),
             ("bnb-nf4", "unchecked", "earlier rule", "2026-11-29 12:28 UTC"),
             ("int4-triton", "unchecked", "failed", "2026-12-02 17:06 UTC"), ("awq-triton", "not timed", "", "")]
    pd.DataFrame([dict(gpu="h200", model="m", ctx=2048, arm="graph", quant=q, status=s, quant_check=c, measured=m)
                  for q, s, c, m in cells]).to_csv(tmp_path / "04_quant_cells.csv", index=False)
    counts = gallery.quant_counts(tmp_path)
    assert counts == ("on the H200, 2 of 5 timed quantised cells are checked in their own run (ctx 2048), 2 were "
                      "timed between 2026-11-29 12:28 UTC and 2026-12-01 10:53 UTC, before in-run layer checks, 1 "
                      "fail or lack a check of the current rule")
    readme = "x\n(old counts; generated by notebook 04, never by hand)\n"
    assert gallery.readme_text(readme, {}, quant=counts) == f"x\n({counts}; generated by notebook 04, never by hand)\n"
    with pytest.raises(ValueError, match="notebook 04"):
        gallery.readme_text("no count here\n", {}, quant=counts)



def test_the_quantisation_line_states_the_notebooks_own_spans():
    """The cells table holds speed-ups to 3 decimals: 0.5751 is 0.575 there, which prints "0.57"; the notebook's
    findings (6 decimals) say "0.56-0.58", and so must the gallery. Two models' cells, one quantised path."""
    import pandas as pd

    cells = pd.DataFrame([dict(gpu="h200", model=m, ctx=2048, arm=a, quant=q, status="ok", checked=True, check="ok",
                               t_obs_ms=t, speedup_over_bf16=sp)
                          for a in ("graph", "lean_attn_graph") for m, q, t, sp in (
                              ("a", "bf16", 5.996, 1.0), ("b", "bf16", 6.496, 1.0),
                              ("a", "awq-triton", 10.426, 0.575), ("b", "awq-triton", 11.385, 0.560))])
    found = pd.DataFrame([dict(gpu="h200", ctx=2048, arm=a, quant="bf16", step_ms_min=5.996272, step_ms_max=6.49592,
                               speedup_min=float("nan"), speedup_max=float("nan")) for a in ("graph", "lean_attn_graph")]
                         + [dict(gpu="h200", ctx=2048, arm=a, quant="awq-triton", step_ms_min=10.426416,
                                 step_ms_max=11.385408, speedup_min=0.5597, speedup_max=0.575104)
                            for a in ("graph", "lean_attn_graph")])
    line = gallery._quant(cells, found)
    assert line.count("AWQ's Triton GEMM 0.56-0.58x") == 2 and "0.57x" not in line
    assert "(bf16 6.00-6.50 ms)" in line and "H100" not in line  # no cell of the paper's GPU: no sentence of it
    h100 = cells[cells.model == "a"].assign(gpu="h100-sxm", sessions=[3, 1, 3, 1], checked=True)
    h100_found = found.assign(gpu="h100-sxm")
    line = gallery._quant(pd.concat([cells.assign(sessions=3), h100]), pd.concat([found, h100_found]))
    assert line.startswith("On the H200 (ctx 2048")  # the H200's sentence first, as it was
    assert line.count("AWQ's Triton GEMM 0.56-0.58x") == 4  # each GPU's spans are its own findings'
    assert ("On the H100 SXM (the paper's GPU class; ctx 2048, a, 1 session a quantised cell; the 2 quantised cells "
            "checked in their own run, 0 more drawn unchecked) HF graph (bf16 6.00 ms)") in line  # model a's bf16
    assert gallery._sessions(pd.Series([6, 7, 6])) == "N = 6-7 sessions"
    assert gallery._sessions(pd.Series([10, 10])) == "N = 10 sessions each"

def test_the_ladder_line_says_how_each_kinds_chosen_lever_stands_in_its_confirmation():
    """Not confirmed: a best of many, not counted; confirmed: the confirmed time, its sessions and the margin over
    the runner-up (R_floor for bf16 only, whose target is one)."""
    pending = pd.DataFrame([dict(status="not confirmed", confirmed_ms=float("nan"), r_floor_bf16=float("nan"),
                                 sessions=0, margin_median=float("nan"))])
    assert gallery._confirmation_words(pending) == "not yet confirmed by a fresh sweep (a best of many, not counted)"
    assert gallery._confirmation_words(pending.iloc[0:0]).startswith("not yet confirmed")
    done = pending.assign(status="confirmed", confirmed_ms=2.345, r_floor_bf16=0.8123, sessions=3, margin_median=0.021)
    assert gallery._confirmation_words(done) == ("confirmed at 2.35 ms (R_floor 0.812) in 3 fresh sessions, +2.1 % "
                                                 "over the runner-up")
    assert gallery._confirmation_words(done, r_floor=False) == ("confirmed at 2.35 ms in 3 fresh sessions, +2.1 % over "
                                                                "the runner-up")
    unpaired = done.assign(margin_median=float("nan"))  # the runner-up not timed in the confirmation's sessions
    assert gallery._confirmation_words(unpaired) == ("confirmed at 2.35 ms (R_floor 0.812) in 3 fresh sessions, no "
                                                     "runner-up timed in those sessions")
    reversed_ = done.assign(margin_median=-0.007, order="reversed")  # the runner-up faster in every paired session
    assert gallery._confirmation_words(reversed_, r_floor=False) == (
        "confirmed at 2.35 ms in 3 fresh sessions, the runner-up faster by 0.7 % (order reversed in every paired "
        "session)")
    assert gallery._confirmation_words(done.assign(order="mixed")).endswith("+2.1 % over the runner-up (order mixed)")
    assert gallery._confirmation_words(done.assign(order="held")).endswith("+2.1 % over the runner-up")
    held = pd.Series(dict(counted_lever="lever A", counted_ms=4.1658, counted_r_floor=0.8166))
    assert gallery._confirmation_words(pending, counted=held) == (
        "not yet confirmed by a fresh sweep (a best of many, not counted; the target counts lever A, confirmed at "
        "4.17 ms, R_floor 0.817)")
    grid = pd.Series(dict(cells_confirmed=12.0, cells_met=8.0, cells_held=1.0))
    assert gallery._grid_confirmed_words(grid) == ("12 of them confirmed by a fresh sweep (1 on the lever confirmed "
                                                   "there before the selection's current pick), 8 reaching it there.")
    assert gallery._grid_confirmed_words(grid.drop("cells_held")) == "12 of them confirmed by a fresh sweep, 8 reaching it there."
    line = _gallery_lines()["06_ladder.png"]
    assert "nan" not in line, line
    assert re.search(r"best int4 lever \(.*\) takes \d\.\d\d ms against the 2\.0 ms target, (not yet confirmed|"
                     r"confirmed at)", line), line


def test_the_ladder_line_states_the_paper_gpus_confirmed_levers_from_the_confirmation_table():
    """The H100 SXM's confirmed levers at the target cell, bf16 first, each with its own confirmation's numbers (read
    here from 06_confirmation.csv by hand); nothing where none is confirmed there."""
    conf = pd.DataFrame([dict(kind="int4", lever="B", status="confirmed", confirmed_ms=2.0801, r_floor_bf16=2.34,
                              sessions=3, margin_median=float("nan")),
                         dict(kind="bf16", lever="A", status="confirmed", confirmed_ms=5.4638, r_floor_bf16=0.8921,
                              sessions=3, margin_median=0.448)])
    assert gallery._paper_gpu_words(conf) == (
        " On the paper's GPU (h100-sxm, the same cell; R_floor against its own datasheet): its bf16 step (A) confirmed "
        "at 5.46 ms (R_floor 0.892) in 3 fresh sessions, +44.8 % over the runner-up; its int4 step (B) confirmed at "
        "2.08 ms in 3 fresh sessions, no runner-up timed in those sessions.")
    assert gallery._paper_gpu_words(conf.assign(status="not confirmed")) == ""
    fastest = pd.Series([0.8612, 0.9081, 0.8925])  # three cells' fastest R_floor: the span is their min and max
    assert gallery._paper_gpu_words(conf, fastest).endswith(
        "no runner-up timed in those sessions; over its 3 grid cells each cell's fastest bf16 lever of the selection "
        "sweeps reaches R_floor 0.861-0.908 (a best of many, not counted).")
    assert gallery._paper_gpu_words(conf, fastest.head(1)) == gallery._paper_gpu_words(conf)  # one cell: no span
    shipped = pd.read_csv(paths.FIGURES / "06_confirmation.csv")
    h100 = shipped[(shipped.gpu == "h100-sxm") & (shipped.model == "llama-3.1-8b") & (shipped.ctx == 2048)
                   & (shipped.status == "confirmed")]
    line = _gallery_lines()["06_ladder.png"]
    for r in h100.itertuples():  # each confirmed H100 lever's time, as the table holds it
        assert f"its {r.kind} step ({r.lever}) confirmed at {r.confirmed_ms:.2f} ms" in line, line


def test_the_best_bf16_levers_span_names_its_contexts_as_they_are():
    """One cell: that cell alone and no span; several: the span over the contexts they hold."""
    one = pd.DataFrame([dict(ctx=2048, t_obs_ms=4.17)])
    assert gallery._best_path_words(one, pd.Series([6.70]), 12) == (
        "The best bf16 lever has rows in 1 of the grid's 12 cells (at ctx 2048 alone), HF compiled 6.70 ms there")
    two = pd.DataFrame([dict(ctx=2048, t_obs_ms=4.17), dict(ctx=16384, t_obs_ms=4.70)])
    assert gallery._best_path_words(two, pd.Series([6.70, 10.05]), 12) == (
        "The best bf16 lever has rows in 2 of the grid's 12 cells, where it takes 4.17-4.70 ms from 2k to 16k tokens, "
        "HF compiled 6.70-10.05 ms")


def test_the_int4_products_line_states_the_timed_products_without_a_bf16_twin(tmp_path):
    """The int4 target model's products timed alone with no bf16 twin at their launches: their times, not "none
    timed"."""
    row = dict(finding="x", gpu=gallery.GPU, model="llama-3.1-8b", arm="lean_fused_all_next_token_graph",
               layer_us=50.4, products_ms=1.61, floor_ms=0.77, gbps_min=1190.0, gbps_max=3000.0,
               bf16_layer_us=float("nan"), bytes_ratio=float("nan"), time_ratio=float("nan"))
    pd.DataFrame([row]).to_csv(tmp_path / "06_findings_int4_products.csv", index=False)
    line = gallery._int4_products(tmp_path)["06_int4_products.png"]
    assert line.startswith("On the H200 (llama-3.1-8b) one layer's lean_fused_all_next_token_graph int4 products")
    assert "50.4 us" in line and "no bf16 time stands beside them" in line and "nan" not in line


def _damage_missing(f):
    (f / "06_ladder.csv").unlink()


def _damage_not_a_number(f):
    t = pd.read_csv(f / "06_ladder.csv")
    t["t_obs_ms"] = t["t_obs_ms"].astype(object)
    t.loc[t.index[0], "t_obs_ms"] = "12.3ms"
    t.to_csv(f / "06_ladder.csv", index=False)


def _damage_truncated(f):
    text = (f / "05_cost_ladder.csv").read_bytes()
    (f / "05_cost_ladder.csv").write_bytes(text[:len(text) // 3])


def _damage_emptied(f):
    (f / "05_cost_ladder.csv").write_bytes(b"")


@pytest.mark.parametrize("damage,table,words", [
    (_damage_missing, "06_ladder.csv", "is missing"),
    (_damage_not_a_number, "06_ladder.csv", "its column t_obs_ms holds '12.3ms', not a number"),
    (_damage_truncated, "05_cost_ladder.csv", "could not be read"),
    (_damage_emptied, "05_cost_ladder.csv", "could not be read (EmptyDataError")])
def test_a_damaged_figures_table_leaves_gallery_csv_as_it_was_and_names_the_table(tmp_path, damage, table, words):
    """gallery.write computes every line before it writes, and writes beside gallery.csv then moves the file into
    place: a missing, damaged or truncated table is one InputError naming it and saying how to rebuild or restore
    the tables, and the gallery.csv there was is left byte for byte (not cut to its header)."""
    from decodegap.inputs import InputError

    f = tmp_path / "figures"
    shutil.copytree(paths.FIGURES, f)
    before = (f / gallery.GALLERY_CSV).read_bytes()
    damage(f)
    with pytest.raises(InputError) as err:
        gallery.write(f)
    message = str(err.value)
    assert table in message and words in message and "\n" not in message
    assert "python -m decodegap reproduce" in message and "git checkout figures/" in message
    assert (f / gallery.GALLERY_CSV).read_bytes() == before
    assert not [p.name for p in f.iterdir() if p.name.startswith(".")]  # no temporary file left beside it


def test_a_column_of_words_with_one_that_reads_as_a_number_is_not_a_damaged_column(tmp_path):
    """_not_numbers names a column of numbers with a value typed in (12.3ms among step times), not a column of
    commits of which one reads as a number (6844e40: 6844 x 10^40), which made the one damaged table of a figure group
    one of two and its message vaguer."""
    pd.DataFrame({"commits": ["b01bfa9", "6844e40", "2d0555e"], "t_obs_ms": ["4.1", "12.3ms", "4.2"]}).to_csv(
        tmp_path / "t.csv", index=False)
    assert gallery._not_numbers(tmp_path, ["t.csv"]) == [("t.csv", "t_obs_ms", "12.3ms")]


def test_commits_and_run_ids_that_all_read_as_numbers_are_read_as_text(tmp_path):
    """A figures table whose every commit reads as a number (6844e40 is 6844 x 10^40, 1234567 an integer) keeps them as
    the words they are: pandas' type guessing would print 6.844e+43 in a finding."""
    pd.DataFrame({"commits": ["6844e40", "1234567"], "run_ids": ["20261207", "20261208"], "t_obs_ms": [4.1, 4.2]}
                 ).to_csv(tmp_path / "t.csv", index=False)
    t = gallery._table(tmp_path, "t.csv")
    assert list(t["commits"]) == ["6844e40", "1234567"] and list(t["run_ids"]) == ["20261207", "20261208"]
    assert t["t_obs_ms"].sum() == pytest.approx(8.3)
    assert gallery._not_numbers(tmp_path, ["t.csv"]) == []

def test_gallery_write_on_whole_tables_gives_the_committed_bytes(tmp_path):
    """The normal path is unchanged: written into a copy of figures/, gallery.csv is the committed file byte for
    byte, and nothing else is left there."""
    f = tmp_path / "figures"
    shutil.copytree(paths.FIGURES, f, ignore=shutil.ignore_patterns("*.png", "*.md"))
    (f / gallery.GALLERY_CSV).write_text("figure,finding\n")  # a stale one, replaced whole
    names = sorted(p.name for p in f.iterdir())
    assert gallery.write(f) == f / gallery.GALLERY_CSV
    assert (f / gallery.GALLERY_CSV).read_bytes() == (paths.FIGURES / gallery.GALLERY_CSV).read_bytes()
    assert sorted(p.name for p in f.iterdir()) == names


def test_the_gallery_command_reads_and_writes_the_figures_of_the_data_folder_it_is_given(data_dir, capsys):
    """`gallery --data-dir DIR` reads DIR's figures (beside it, where `reproduce --data-dir DIR` writes them) and
    writes its gallery.csv there; it ignored the folder and rewrote the repository's figures/gallery.csv
    (2026-12-07). Without figures there it is refused, and --readme (the repository's README) only takes the
    repository's data/; neither refusal writes anything."""
    from decodegap import cli

    committed = (paths.FIGURES / gallery.GALLERY_CSV).stat().st_mtime_ns
    assert cli.main(["--data-dir", str(data_dir), "gallery"]) == 2
    assert f"no figures at {data_dir.parent / 'figures'}" in capsys.readouterr().err
    assert cli.main(["--data-dir", str(data_dir), "gallery", "--readme"]) == 2
    assert "--readme rewrites the repository's README" in capsys.readouterr().err
    f = data_dir.parent / "figures"
    shutil.copytree(paths.FIGURES, f, ignore=shutil.ignore_patterns("*.png", "*.md", gallery.GALLERY_CSV))
    assert cli.main(["--data-dir", str(data_dir), "gallery"]) == 0
    assert capsys.readouterr().out == f"wrote {f / gallery.GALLERY_CSV}\n"
    assert (f / gallery.GALLERY_CSV).read_bytes() == (paths.FIGURES / gallery.GALLERY_CSV).read_bytes()
    assert (paths.FIGURES / gallery.GALLERY_CSV).stat().st_mtime_ns == committed  # the repository's not rewritten
