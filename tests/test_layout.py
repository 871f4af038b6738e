"""The package's map (decodegap.__init__'s docstring) and its tree agree: every module is named once, under its
stage, and the map names no module the tree lacks."""

from __future__ import annotations

import re

import decodegap
from decodegap import paths

PACKAGE = paths.REPO / "lib" / "decodegap"


def _tree() -> set[str]:
    """Every module of the package as a path under it without .py (kernels/fused/launch), packages' __init__ left
    out: a package is named by its modules."""
    return {str(p.relative_to(PACKAGE).with_suffix("")) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}


def _map(doc: str) -> list[str]:
    """The module names of the map: the first word of each indented line under a stage's heading."""
    return re.findall(r"^  (\S+)\s", doc.split("\n\n", 2)[2], re.M)


def test_the_module_map_names_every_module_of_the_tree_once():
    named = _map(decodegap.__doc__)
    assert len(named) == len(set(named)), sorted({n for n in named if named.count(n) > 1})
    tree = _tree()
    assert not tree - set(named), f"add these modules to decodegap/__init__.py's map: {sorted(tree - set(named))}"
    assert not set(named) - tree, f"the map names modules the tree does not have: {sorted(set(named) - tree)}"


def test_a_module_sits_under_its_own_package_in_the_map():
    """A line under `harness:` names a harness/ module, and so on; the base and the entry points sit at the top."""
    stage = None
    for line in decodegap.__doc__.split("\n\n", 2)[2].splitlines():
        heading = re.match(r"^(\w[\w ]*?)(:|$)", line)
        if heading and not line.startswith(" "):
            stage = heading.group(1)
            continue
        name = line.split()[0]
        top = name.split("/")[0] if "/" in name else None
        assert top == (stage if stage in {p.name for p in PACKAGE.iterdir() if p.is_dir()} else None), (stage, name)
