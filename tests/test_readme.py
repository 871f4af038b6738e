"""The README's byte-accounting tables are the ones the code generates (they cannot drift)."""

from __future__ import annotations

import pytest

from decodegap import hardware, models, paths, roofline, tables

MODELS = ("qwen2.5-7b", "mistral-7b-v0.3", "llama-3.1-8b")


def test_readme_tables_match_the_generated_ones(tmp_path):
    configs = {k: models.load_spec(k).config for k in sorted(MODELS)}
    readme = (paths.REPO / "README.md").read_text()
    _, md = tables.write_table(roofline.model_bytes_table(configs), "bytes", tmp_path)
    assert md.read_text().strip() in readme
    floors = roofline.floors_by_gpu(configs, hardware.specs_table(), ctx=2048, convention="W_all")
    _, md = tables.write_table(floors.reset_index(names="model"), "floors", tmp_path)
    assert md.read_text().strip() in readme


def test_readme_starts_with_the_two_commands():
    readme = (paths.REPO / "README.md").read_text()
    first_block = readme.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()
    assert [line.split("#")[0].strip() for line in first_block[:2]] == ["make reproduce", "make test"]


def _pct(lo, hi) -> str:
    return f"{lo:.0%}-{hi:.0%}".replace("%-", "-")


def _attention_finding(att) -> str:
    ok = att[(att.status == "ok") & (att.ctx == 2048)] if "status" in att else att.iloc[0:0]
    if ok.empty:
        return "No GPU attention rows yet: the figure is empty and the table shows the published H100 column only."
    assert set(ok.gpu) == {"h200"}, "attention rows of another GPU: extend this finding"
    llama = ok[ok.model == "llama-3.1-8b"].set_index("attn")
    fastest = llama.host_us.idxmin()
    return (f"On the H200 (Llama-3.1-8B shape, ctx 2048) the fastest backend host-inclusive is {fastest} at "
            f"{llama.host_us.min():.1f} us (the paper's H100 SDPA: 36.05 us) and FA3 takes {llama.loc['fa3', 'host_us']:.1f} us; "
            f"host-inclusive time is a median {ok.host_over_gpu.median():.1f}x the GPU-only time: the launch sequence binds.")


def _span(v, fmt=".2f") -> str:
    lo, hi = format(v.min(), fmt), format(v.max(), fmt)
    return lo if lo == hi else f"{lo}-{hi}"


QUANT_NAMES = {"int4-triton": "the Triton int4 GEMV", "int4-tinygemm": "int4 tinygemm", "bnb-nf4": "bitsandbytes nf4",
               "gptq-exllamav2": "GPTQ + ExLlamaV2", "awq-marlin": "AutoAWQ + Marlin", "awq-triton": "AWQ's Triton GEMM"}


def _quant_h200_finding(qc) -> str:
    """Notebook 04 on the H200 at ctx 2048, over the cells whose checks passed: HF graph and the lean step."""
    g = qc[(qc.gpu == "h200") & (qc.ctx == 2048) & qc.t_obs_ms.notna() & ~qc.check.astype(str).str.contains("failed")]
    if g.empty or not (g.quant != "bf16").any():
        return "No H200 rows of the quantised paths."
    parts = []
    for arm, name in (("graph", "HF graph"), ("lean_attn_graph", "lean step + Triton attention, graphed")):
        a = g[g.arm == arm]
        order = a[a.quant != "bf16"].groupby("quant").speedup_over_bf16.median().sort_values(ascending=False).index
        parts.append(f"{name} (bf16 {_span(a[a.quant == 'bf16'].t_obs_ms)} ms): " + ", ".join(
            f"{QUANT_NAMES[k]} {_span(a[a.quant == k].speedup_over_bf16)}x" for k in order))
    return ("On the H200 (ctx 2048, speed-up over bf16 on the same arm, every path quantised from the model's own "
            "weights and checked against it) " + "; ".join(parts) + ".")


def _h200_cost_finding(lad) -> str:
    """The measured H200 on the cost ladder, at the price prices.csv gives it (its provider named)."""
    naive, best = lad.loc[("h200", "naive")], lad.loc[("h200", "best")]
    assert naive.price_provider == best.price_provider == "spheron", "the H200's price changed: rewrite this finding"
    return (f"The H200 measured here, at Spheron's price (no Modal price was found), costs ${naive.usd_per_mtok:.2f}/Mtok "
            f"naive (bf16 eager) and ${best.usd_per_mtok:.2f} at its best ({best.configuration}).")


def gallery_findings() -> dict[str, str]:
    """The README gallery's finding of each figure, recomputed from the committed tables in figures/."""
    import pandas as pd

    f = paths.FIGURES
    cells = pd.read_csv(f / "01_roofline_cells.csv")
    eager = cells[(cells.gpu == "h200") & (cells.arm == "eager")]
    head = eager[(eager.model == "qwen2.5-7b") & (eager.ctx == 2048)].iloc[0]
    sp = pd.read_csv(f / "02_speedups.csv")
    sp = sp[(sp.gpu == "h200") & (sp.ctx == 2048) & (sp.arm == "graph")]
    hs, gs = sp[sp.sweep == "headline"], sp[sp.sweep == "grid"]
    ab = pd.read_csv(f / "02_ab_cells.csv")
    ab = ab[ab.gpu == "h200"]
    h = ab[ab.ctx == 2048]
    d = pd.read_csv(f / "02_decomposition.csv")
    d = d[d.gpu == "h200"]
    d2, d16 = d[d.ctx == 2048].launch_overhead_fraction, d[d.ctx == 16384].launch_overhead_fraction
    att = pd.read_csv(f / "03_attention_cells.csv")
    qt = pd.read_csv(f / "04_quant_table.csv")
    q = qt[qt.ctx == qt.ctx.min()].set_index("quant")["l4 R_floor (our floor, published ms)"]
    lad = pd.read_csv(f / "05_cost_ladder.csv").set_index(["gpu", "kernels"])
    floor = pd.read_csv(f / "05_cost_at_floor.csv").set_index("gpu").usd_per_mtok
    l4, h100 = lad.loc[("l4", "best")], lad.loc[("h100-sxm", "best")]
    assert (l4.configuration, h100.configuration) == ("gptq-exllamav2", "bf16 graph")
    lad6 = pd.read_csv(f / "06_ladder.csv")
    cell6 = lad6[(lad6.gpu == "h200") & (lad6.model == "llama-3.1-8b") & (lad6.ctx == 2048) & (lad6.status == "ok")]
    bf16_6, int4_6 = cell6[cell6.quant == "bf16"], cell6[cell6.quant != "bf16"]
    best6, best_int4 = bf16_6.loc[bf16_6.t_obs_ms.idxmin()], int4_6.loc[int4_6.t_obs_ms.idxmin()]
    lean = cell6.set_index("lever").t_obs_ms
    ok6 = lad6[(lad6.gpu == "h200") & (lad6.status == "ok")]
    best_path = ok6[ok6.lever == "lean compiled + Triton attention"]
    hf_compiled = ok6[(ok6.lever == "HF compiled") & ok6.set_index(["model", "ctx"]).index.isin(
        best_path.set_index(["model", "ctx"]).index)].t_obs_ms
    fits = pd.read_csv(f / "06_product_fits.csv")
    fits = fits[(fits.gpu == "h200") & (fits.model == "llama-3.1-8b") & (fits.ctx == 2048)].set_index(["arm", "quant"])
    shares = pd.read_csv(f / "06_projections.csv")
    shares = shares[(shares.gpu == "h200") & (shares.model == "llama-3.1-8b") & (shares.ctx == 2048)
                    & (shares.arm == "lean_attn_compile") & (shares.quant == "bf16")].set_index("projection").of_datasheet
    compiled, gemv = fits.loc[("lean_attn_compile", "bf16")], fits.loc[("lean_kernels_graph", "bf16")]
    tinygemm = fits.loc[("lean_attn_compile", "int4-tinygemm")]
    return {
        "06_products.png": f"On the H200 (Llama-3.1-8B, ctx 2048) each matrix product of the compiled lean step costs "
                           f"{compiled.fixed_us:.1f} us plus its weights at {compiled.stream_gbps:.0f} GB/s "
                           f"({compiled.stream_gbps / 4800:.0%} of the datasheet): {compiled.products} products pay "
                           f"{compiled.fixed_us * compiled.products / 1e3:.2f} ms of fixed cost, so the small ones fall short "
                           f"(o {shares['o']:.0%}, qkv {shares['qkv']:.0%} of the datasheet; the LM head {shares['lm_head']:.0%}). "
                           f"The Triton GEMV streams as fast ({gemv.stream_gbps:.0f} GB/s) but pays {gemv.fixed_us:.1f} us "
                           f"per product; int4 tinygemm pays {tinygemm.fixed_us:.1f} us but streams its codes and scales at "
                           f"{tinygemm.stream_gbps:.0f} GB/s ({tinygemm.stream_gbps / 4800:.0%}).",
        "06_ladder.png": f"On the H200 (Llama-3.1-8B, ctx 2048) the best bf16 lever is {best6.lever} at "
                         f"{best6.t_obs_ms:.2f} ms, R_floor {best6.r_floor_bf16:.3f} against the 0.80 target (HF compiled "
                         f"{lean['HF compiled']:.2f} ms, the lean decoder graphed {lean['lean graph']:.2f} ms); the best int4 lever "
                         f"({best_int4.lever}) takes {best_int4.t_obs_ms:.1f} ms against the 2.0 ms target. Over the "
                         f"{len(best_path)} cells where the lean levers pass their check, that lever takes "
                         f"{best_path.t_obs_ms.min():.2f}-{best_path.t_obs_ms.max():.2f} ms from 2k to 16k tokens, HF compiled "
                         f"{hf_compiled.min():.2f}-{hf_compiled.max():.2f} ms.",
        "01_r_floor_vs_bandwidth.png": f"R_floor falls as peak bandwidth rises: L4 0.81 and H100 0.27 (published), "
                                       f"H200 {head.r_floor_W_all:.2f} (measured, eager, Qwen-2.5-7B ctx 2048).",
        "01_step_time_vs_context.png": f"The H200 eager step stays between {eager.t_obs_ms.min():.1f} and "
                                       f"{eager.t_obs_ms.max():.1f} ms from 2k to 16k tokens, {1 / eager.r_floor_W_all.max():.0f}-"
                                       f"{1 / eager.r_floor_W_all.min():.0f}x its memory floor: it is not paying for bytes.",
        "02_speedup_ci.png": f"CUDA graphs: {hs.speedup.min():.2f}-{hs.speedup.max():.2f}x faster than eager on the H200 at "
                             f"ctx 2048 (N = {int(hs.sessions.min())} sessions each, of the headline sweep alone; the grid "
                             f"sweep's {int(gs.sessions.min())} sessions of those cells, kept apart, give "
                             f"{gs.speedup.min():.2f}-{gs.speedup.max():.2f}x), against 1.259x published for the H100.",
        "02_decomposition.png": f"Launch overhead is {_pct(d2.min(), d2.max())} of the H200 eager step at ctx 2048 and "
                                f"{_pct(d16.min(), d16.max())} at 16k (the paper: ~20 % on the H100).",
        "02_r_floor_per_arm.png": f"On the H200, R_floor is {ab.r_floor_eager.min():.2f}-{ab.r_floor_eager.max():.2f} eager, "
                                  f"{ab.r_floor_graph.min():.2f}-{ab.r_floor_graph.max():.2f} graphed and "
                                  f"{h.r_floor_compile.min():.2f}-{h.r_floor_compile.max():.2f} with torch.compile (ctx 2048).",
        "03_attention_us_vs_context.png": _attention_finding(att),
        "04_quant_ms_vs_floor.png": f"On the published L4 numbers GPTQ + ExLlamaV2 reaches R_floor {q['gptq-exllamav2']:.2f} of its "
                                    f"own floor, bf16 {q['bf16']:.2f} and bitsandbytes nf4 {q['bnb-nf4']:.2f}: the kernel, not "
                                    "the int4 format, realises the saving. " + _quant_h200_finding(pd.read_csv(f / "04_quant_cells.csv")),
        "05_cost_ladder.png": f"At Modal's May 2026 prices the L4 with GPTQ + ExLlamaV2 costs ${l4.usd_per_mtok:.2f}/Mtok against "
                              f"the graphed H100's ${h100.usd_per_mtok:.2f} ({h100.usd_per_mtok / l4.usd_per_mtok:.2f}x, not ~6x); "
                              f"at the memory floor the H100 (${floor['h100-sxm']:.2f}) would undercut the L4 (${floor['l4']:.2f}). "
                              + _h200_cost_finding(lad),
    }


def test_readme_gallery_has_every_figure_with_its_finding():
    readme = (paths.REPO / "README.md").read_text()
    gallery = readme.split("## Gallery", 1)[1].split("\n## ", 1)[0]
    findings = gallery_findings()
    for png in sorted(p.name for p in paths.FIGURES.glob("*.png")):
        assert f"![](figures/{png})" in gallery, f"{png} is missing from the README gallery"
        assert png in findings, f"{png} has no checked finding in tests/test_readme.py"
        expected = findings[png]
        assert expected in gallery, f"README gallery line of {png} drifted from figures/: expected\n{expected}"


def test_readme_links_the_claims_table_with_its_counts():
    import pandas as pd

    readme = (paths.REPO / "README.md").read_text()
    top = readme.split("## ", 1)[0] + readme.split("## ", 2)[1]
    assert "[`figures/claims.md`](figures/claims.md)" in top
    verdicts = pd.read_csv(paths.FIGURES / "claims.csv").verdict.value_counts()
    counts = (f"({verdicts.get('reproduced', 0)} reproduced, {verdicts.get('consistent (arithmetic)', 0)} consistent "
              f"(arithmetic), {verdicts.get('proxy', 0)} proxy, {verdicts.get('contradicted', 0)} contradicted, "
              f"{verdicts.get('not testable here', 0)} not testable here")
    assert counts in " ".join(readme.split()), counts
    table = pd.read_csv(paths.FIGURES / "claims.csv").set_index("id")
    if table.loc["R5", "verdict"] == "contradicted":
        assert f"give {table.loc['R5', 'ours']}, not about 6x" in " ".join(readme.split())
    if table.loc["T1", "verdict"] == "contradicted":
        assert "the thesis itself on the paper's own H100 numbers" in readme and "gpu_excess" in table.loc["T1", "ours"]


def test_readme_adds_a_gpu_through_every_notebook_and_the_cli():
    from decodegap import notebooks

    readme = (paths.REPO / "README.md").read_text()
    for nb in notebooks.notebook_paths():
        assert f"papermill notebooks/{nb.name} notebooks/executed/{nb.name}" in readme, nb.name
    assert "python -m decodegap measure --gpu" in readme


def test_readme_quantisation_prose_matches_the_h200_cells():
    """The notebook-04 paragraph's statements without numbers, checked on figures/04_quant_cells.csv (cells whose
    checks passed, every context)."""
    import pandas as pd

    readme = " ".join((paths.REPO / "README.md").read_text().split())
    qc = pd.read_csv(paths.FIGURES / "04_quant_cells.csv")
    qc = qc[(qc.gpu == "h200") & (qc.quant != "bf16") & qc.t_obs_ms.notna() & ~qc.check.astype(str).str.contains("failed")]
    graph, eager, lean = qc[qc.arm == "graph"], qc[qc.arm == "eager"], qc[qc.arm == "lean_attn_graph"]
    int4 = graph[graph.quant.isin(["int4-tinygemm", "int4-triton"])]
    g2048 = graph[graph.ctx == 2048]
    assert "the two int4 weight-only paths are the only ones clearly faster than bf16 in HF's graphed step" in readme
    assert (int4[int4.ctx == 2048].speedup_over_bf16 > 1.1).all()
    assert (g2048[~g2048.quant.isin(["int4-tinygemm", "int4-triton"])].speedup_over_bf16 < 1.1).all()
    assert "they save about as many milliseconds as their floors drop, yet realise only part" in readme
    assert (int4[int4.ctx == 2048].saved_over_floor_drop > 0.8).all() and (int4.realised_fraction < 0.8).all()
    assert "save little of what their floors allow there" in readme
    assert (graph[graph.quant.isin(["bnb-nf4", "gptq-exllamav2"])].saved_over_floor_drop < 0.3).all()
    assert "AutoAWQ's two kernels (Marlin and its Triton GEMM) are slower than bf16 there" in readme
    assert (graph[graph.quant.isin(["awq-marlin", "awq-triton"])].speedup_over_bf16 < 1).all()
    assert "In the lean step every int4 kernel but AWQ's Triton GEMM beats bf16" in readme
    assert (lean[lean.quant != "awq-triton"].speedup_over_bf16 > 1).all() and (lean[lean.quant == "awq-triton"].speedup_over_bf16 < 1).all()
    assert "no path in HF's eager step is more than 10% faster than bf16" in readme and (eager.speedup_over_bf16 < 1.1).all()
    assert "nothing gave NaN logits" in readme
    assert not qc.check.astype(str).str.contains("NaN").any()


def test_readme_names_every_module():
    readme = (paths.REPO / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1]
    for module in sorted(p.stem for p in (paths.REPO / "lib" / "decodegap").glob("*.py") if not p.stem.startswith("_")):
        assert f"`{module}`" in layout, f"module {module} is missing from the README's layout"


HISTORY_CITATION = r"`([\w./-]+)` at commit ([0-9a-f]{7,40})\b"
"""A file git keeps but the tree no longer has, cited as `bench/NAME` at commit SHA (data/README.md's provenance)."""


def _history_citations(text: str) -> set[tuple[str, str]]:
    import re

    return set(re.findall(HISTORY_CITATION, text))


def _missing_from_history(citations) -> list[str]:
    """The (path, commit) citations whose file is not in that commit of this repository's history."""
    import subprocess

    return [f"{path} at commit {commit}" for path, commit in sorted(citations)
            if subprocess.run(["git", "cat-file", "-e", f"{commit}:{path}"], cwd=paths.REPO,
                              capture_output=True).returncode != 0]


def _cited_paths(text: str) -> set[str]:
    """Repository paths a Markdown text cites: links and `code` spans that look like files or folders
    (placeholders such as <gpu>, globs and brace lists left out; citations of git history apart)."""
    import re

    text = re.sub(HISTORY_CITATION, "", text)
    cited = set(re.findall(r"\]\(([^)#\s]+)\)", text))
    for span in re.findall(r"`([^`\n]+)`", text):
        for word in span.split():
            if re.fullmatch(r"[\w./-]+", word) and ("/" in word or re.search(r"\.(md|csv|png|ipynb|py|sh|yml|toml|txt|json)$", word)):
                cited.add(word)
    top = {p.name for p in paths.REPO.iterdir()} - {".venv", ".git"}
    return {c for c in cited if not c.startswith(("http", "-", ".", "/", "notebooks/executed"))
            and (c.split("/", 1)[0] in top if "/" in c else re.search(r"\.(md|csv|png|ipynb|py|sh|yml|toml)$", c))}


def test_readmes_cite_only_files_that_exist():
    """A cited path exists from the repository root or the README's folder; a bare file name (figures in the
    gallery, env.json) is the name of some file in the repository."""
    names = {p.name for p in paths.REPO.rglob("*") if ".venv" not in p.parts and ".git" not in p.parts}
    for readme in (paths.REPO / "README.md", paths.DATA / "README.md", paths.REPO / "bench" / "README.md"):
        text = readme.read_text()
        missing = sorted(c for c in _cited_paths(text)
                         if not (paths.REPO / c.rstrip("/")).exists() and not (readme.parent / c.rstrip("/")).exists()
                         and not ("/" not in c and c in names))
        assert not missing, f"{readme.name} cites files the repository does not have: {missing}"


def _needs_full_history() -> None:
    import subprocess

    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=paths.REPO, capture_output=True,
                             text=True)
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("needs a git checkout with its whole history (a copied tree or a shallow clone has not)")


def test_readmes_cite_git_history_only_for_files_it_has():
    """`bench/NAME` at commit SHA: the file is in that commit (git show SHA:bench/NAME reads it)."""
    cited = set()
    for readme in (paths.REPO / "README.md", paths.DATA / "README.md"):
        cited |= _history_citations(readme.read_text())
    assert ("bench/ladder7_h200.sh", "39e95d7") in cited  # the provenance of notebook 06's rows
    _needs_full_history()
    missing = _missing_from_history(cited)
    assert not missing, f"cited as git history but not there: {missing}"


def test_history_citations_are_checked_against_the_commit_named():
    _needs_full_history()
    cited = _history_citations("made by `bench/nosuch_h200.sh` at commit 1d4bda5 and `Makefile` at commit 1d4bda5")
    assert cited == {("bench/nosuch_h200.sh", "1d4bda5"), ("Makefile", "1d4bda5")}
    assert _missing_from_history(cited) == ["bench/nosuch_h200.sh at commit 1d4bda5"]
    assert _cited_paths("`bench/nosuch_h200.sh` at commit 1d4bda5, `bench/also_missing.sh`") == {"bench/also_missing.sh"}


def test_no_file_cites_the_working_notes_outside_the_repository():
    import subprocess

    hits = subprocess.run(["git", "grep", "-n", "-I", "-E", r"PAPER\.md|DESIGN\.md|\.\./shared", "--", ".",
                           ":!tests/test_readme.py"], cwd=paths.REPO, capture_output=True, text=True).stdout
    assert hits == "", f"files citing notes the repository does not have:\n{hits}"
