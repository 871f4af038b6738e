"""The README's byte-accounting tables are the ones the code generates (they cannot drift)."""

from __future__ import annotations

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
