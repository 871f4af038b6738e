"""The CLI's command names: each measuring command is named after its experiment, the earlier short names stay aliases
(command lines that earlier runs recorded in data/raw/<gpu>/env.json still parse)."""

from __future__ import annotations

import json

import pytest

from decodegap import cli, paths

RENAMED = {"ab": "cuda-graphs-ab", "attention": "attention-backends", "quant": "quantisation",
           "ladder": "closing-the-gap", "scope": "where-the-thesis-ends", "kernels": "kernel-counts"}


def _subcommands(parser) -> dict:
    return next(a for a in parser._actions if a.dest == "command").choices


@pytest.mark.parametrize("old, new", sorted(RENAMED.items()))
def test_an_old_name_and_the_new_one_parse_to_the_same_handler_and_options(old, new):
    rest = ["--axis", "batch"] if new == "where-the-thesis-ends" else []
    parser = cli.build_parser()
    by_old, by_new = parser.parse_args([old, "--gpu", "h200", *rest]), parser.parse_args([new, "--gpu", "h200", *rest])
    assert by_old.func is by_new.func
    assert {k: v for k, v in vars(by_old).items() if k != "command"} == \
        {k: v for k, v in vars(by_new).items() if k != "command"}
    assert _subcommands(parser)[old] is _subcommands(parser)[new]  # one parser: --data-dir added to it once


def test_help_lists_the_new_names_with_the_old_as_aliases(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["--help"])
    text = capsys.readouterr().out
    for old, new in RENAMED.items():
        assert f"{new} ({old})" in text, new


def test_every_recorded_command_line_still_parses():
    """The command lines of the shipped runs: the subcommand and its options as this parser reads them."""
    seen = 0
    for env in sorted(paths.DATA.glob("raw/*/env.json")):
        for entry in json.loads(env.read_text()).values():
            line = entry.get("command_line") if isinstance(entry, dict) else None
            words = line.split() if line else []
            if not words or not words[0].endswith("decodegap/__main__.py") or "_session" in words:
                continue  # another script's argv (a `python -c` run records `-`), or a sweep's own session
            argv = words[1:]
            try:
                cli.build_parser().parse_args(argv)
            except SystemExit:
                pytest.fail(f"{env}: {line!r} no longer parses")
            seen += 1
    assert seen


def test_reproduce_prints_each_notebooks_wall_time(monkeypatch, capsys):
    """notebooks.run_all names each notebook as it starts and its wall time in whole seconds as it ends (a slow
    notebook is seen by name in `make reproduce`'s output)."""
    import time

    from decodegap import notebooks

    clock = iter([100.0, 142.4, 200.0, 200.6])  # started, ended: 42 s, then 1 s (0.6 rounds up)
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(notebooks, "run", lambda nb, params, out_dir=None: nb)
    done = notebooks.run_all({}, only=["01_roofline", "05_cost"])
    assert [p.stem for p in done] == ["01_roofline", "05_cost"]
    assert capsys.readouterr().out.splitlines() == [
        "running 01_roofline.ipynb ...", "  01_roofline.ipynb took 42 s",
        "running 05_cost.ipynb ...", "  05_cost.ipynb took 1 s"]
