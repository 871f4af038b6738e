"""The README's byte-accounting tables are the ones the code generates (they cannot drift)."""

from __future__ import annotations

import pytest

from decodegap import hardware, paths, roofline, tables
from decodegap.harness import models

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
        assert "give a ratio far below the paper's: row R5" in " ".join(readme.split())
        ours, published = float(table.loc["R5", "ours"].rstrip("x")), table.loc["R5", "published"]
        assert ours < 0.75 * float(str(published).lstrip("~").split("x")[0])  # "far below", by the table's numbers
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
