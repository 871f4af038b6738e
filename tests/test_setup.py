"""Packaging agrees with itself: environment.yml vs pyproject.toml, CI calls the README's test command,
notebooks are committed clean with a `parameters` cell."""

from __future__ import annotations

import json
import re
import tomllib

import pytest

from decodegap import paths

REPO = paths.REPO


def _normalise(requirement: str) -> tuple[str, str]:
    """('name', 'specifier') with PEP 503 name normalisation and the specifier's clauses sorted."""
    m = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*?)\s*", requirement)
    assert m, requirement
    name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
    spec = ",".join(sorted(c.replace(" ", "") for c in m.group(3).split(",") if c.strip()))
    return name, spec


def environment_pip_entries(text: str) -> list[str]:
    """The `- pip:` list of a conda environment.yml (a small line parser: no YAML library needed)."""
    entries, in_pip, pip_indent = [], False, None
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        item = line.strip()
        if item in ("- pip:", "-pip:"):
            in_pip, pip_indent = True, indent
            continue
        if in_pip:
            if indent <= pip_indent:
                in_pip = False
                continue
            assert item.startswith("- "), f"unexpected line in the pip list: {raw!r}"
            entries.append(item[2:].strip().strip("'\""))
    return entries


def test_the_line_parser():
    text = "name: x\ndependencies:\n  - python=3.12\n  - pip\n  - pip:\n      - torch>=2.4  # gpu\n      - 'a_b.c >= 1, <2'\n      - -e .\n  - other\n"
    assert environment_pip_entries(text) == ["torch>=2.4", "a_b.c >= 1, <2", "-e ."]
    assert _normalise("a_b.c >= 1, <2") == ("a-b-c", "<2,>=1")


def test_environment_yml_and_pyproject_declare_the_same_dependencies():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in ("dev", "lab"):
        declared += project["optional-dependencies"][extra]
    pip = environment_pip_entries((REPO / "environment.yml").read_text())
    assert "-e ." in pip  # the package itself, editable
    conda_side = sorted(_normalise(e) for e in pip if e != "-e ." and not e.startswith("-c "))
    pyproject_side = sorted(_normalise(d) for d in declared)
    assert conda_side == pyproject_side
    assert len(set(n for n, _ in pyproject_side)) == len(pyproject_side)  # nothing declared twice
    assert ("torch", ">=2.4") in pyproject_side  # a sanity anchor of the comparison itself


def test_environment_yml_python_satisfies_requires_python():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    m = re.search(r"python\s*=\s*(\d+)\.(\d+)", (REPO / "environment.yml").read_text())
    low = re.fullmatch(r">=(\d+)\.(\d+)", project["requires-python"])
    assert m and low
    assert (int(m.group(1)), int(m.group(2))) >= (int(low.group(1)), int(low.group(2)))


def test_ci_runs_make_test():
    script = (REPO / ".ci" / "run").read_text()
    commands = [line.strip() for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert "make test" in commands
    assert (REPO / ".ci" / "run").stat().st_mode & 0o111, ".ci/run must be executable"
    makefile = (REPO / "Makefile").read_text()
    test_recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert test_recipe and 'pytest -m "not gpu"' in test_recipe.group(1)


def test_readme_starts_with_the_two_commands():
    readme = REPO / "README.md"
    if not readme.exists():
        pytest.skip("README.md is not written yet")
    text = readme.read_text()
    commands = []
    for block in re.findall(r"```[^\n]*\n(.*?)```", text, re.S):
        for ln in block.splitlines():
            ln = ln.split("#", 1)[0].strip()  # drop a trailing comment
            if ln:
                commands.append(ln.removeprefix("$ ").strip())
    assert commands[:2] == ["make reproduce", "make test"], commands[:4]


def _notebooks():
    return sorted(p for p in paths.NOTEBOOKS.glob("*.ipynb"))


def test_notebooks_are_committed_clean_with_a_parameters_cell():
    notebooks = _notebooks()
    if not notebooks:
        pytest.skip("no notebooks/*.ipynb yet")
    for nb_path in notebooks:
        nb = json.loads(nb_path.read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        for cell in code:
            assert cell.get("outputs", []) == [], f"{nb_path.name}: a code cell has outputs"
            assert cell.get("execution_count") is None, f"{nb_path.name}: a code cell has an execution count"
        tagged = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{nb_path.name}: needs exactly one code cell tagged `parameters`"


def test_make_lab_opens_the_notebooks_in_the_same_environment():
    makefile = (REPO / "Makefile").read_text()
    target = makefile.split("\nlab:", 1)[1].split("\n\n", 1)[0]
    assert "$(VENV)/bin/jupyter lab" in target and "--notebook-dir=notebooks" in target
    assert "'.[lab]'" in makefile  # jupyterlab from the project's own `lab` extra, into .venv
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert any(r.startswith("jupyterlab") for r in project["optional-dependencies"]["lab"])


def test_packaging_is_quiet_and_transformers_capped():
    """A plain-string SPDX license (the table form warns at every build, setuptools >= 77), and transformers
    capped below 5.18: the harness's StaticCache handling was checked on 5.17, and later 5.x rename
    `past_key_values` (5.24 warns that the old name goes in 5.40)."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "MIT"
    assert any(r.startswith("setuptools>=77") for r in pyproject["build-system"]["requires"])
    spec = dict(_normalise(r) for r in pyproject["project"]["dependencies"])["transformers"]
    assert spec == "<5.18,>=5.17"
    pinned = (REPO / "constraints.txt").read_text()
    assert "transformers==5.17.0" in pinned


def test_environment_yml_is_pinned_like_the_venv():
    """conda users get make's versions: environment.yml's pip list takes constraints.txt (pip reads a constraints
    line of a requirements list relative to the file), and every pin there satisfies pyproject's range."""
    pip = environment_pip_entries((REPO / "environment.yml").read_text())
    assert "-c constraints.txt" in pip
    assert "-c constraints.txt" in (REPO / "Makefile").read_text()
    pins = dict(line.split("==") for line in (REPO / "constraints.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#"))
    assert {"torch", "transformers"} <= set(pins)
    from packaging.specifiers import SpecifierSet

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = dict(_normalise(d) for d in [*project["dependencies"], *project["optional-dependencies"]["dev"]])
    for name, version in pins.items():
        assert version in SpecifierSet(declared[name]), f"constraints.txt pins {name} {version} outside {declared[name]}"


def test_seaborn_is_neither_declared_nor_imported():
    """Dropped: figures.style carries the palettes; a declared dependency is one some module imports."""
    assert "seaborn" not in (REPO / "pyproject.toml").read_text().split("[project.optional-dependencies]")[0].split(
        "dependencies = [")[1]
    assert "seaborn" not in (REPO / "environment.yml").read_text()
    assert not any("import seaborn" in p.read_text() for p in (REPO / "lib").rglob("*.py"))


def test_citation_cff_names_the_package_and_the_paper():
    """CITATION.cff (issue 30, item 7): the package's name, version and licence as pyproject.toml states them, and
    the paper it reproduces as the preferred citation (a small line reader: no YAML library needed)."""
    text = (REPO / "CITATION.cff").read_text()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert text.startswith("cff-version: 1.2.0\n")
    assert f"\nversion: {project['version']}\n" in text and f"\nlicense: {project['license']}\n" in text
    assert "decodegap" in text.split("\ntitle:", 1)[1].splitlines()[0]
    assert "Memory-Bound but Not Bandwidth-Limited" in text.split("preferred-citation:", 1)[1]
