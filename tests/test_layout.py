"""The package's map (decodegap.__init__'s docstring) and its tree agree: every module is named once, under its
stage, and the map names no module the tree lacks; and the imports keep to the map's order: a module imports only
from its own stage and the stages listed before it, and no modules import each other in a circle."""

from __future__ import annotations

import ast
import functools
import re

import pytest

import decodegap
from decodegap import paths

PACKAGE = paths.REPO / "lib" / "decodegap"

pytestmark = pytest.mark.xdist_group("layout")  # on one worker, which parses the tree once (_parse)


@functools.cache
def _parse(source: str) -> ast.Module:
    """ast.parse, once per source text for the whole module's tests (the trees are only read)."""
    return ast.parse(source)


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


def _stages() -> dict[str, str]:
    """module (as the map names it) -> the heading of the stage it is listed under."""
    out, stage = {}, None
    for line in decodegap.__doc__.split("\n\n", 2)[2].splitlines():
        if not line.startswith(" "):
            stage = re.match(r"^(\w[\w ]*?)(:|$)", line).group(1)
        else:
            out[line.split()[0]] = stage
    return out


def _module_of(dotted: str, tree: set[str]) -> str | None:
    """The module of the tree that `decodegap.a.b.c` names (a name inside a module resolves to that module; a
    package to None: its modules are what it holds)."""
    parts = dotted.split(".")[1:]
    while parts and "/".join(parts) not in tree:
        parts = parts[:-1]
    return "/".join(parts) or None


def _imports() -> dict[str, set[str]]:
    """module -> the package's modules it imports, anywhere in its body (an import inside a function included)."""
    tree = _tree()
    out = {}
    for name in sorted(tree):
        found = set()
        for node in ast.walk(_parse((PACKAGE / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{name}: a relative import; import decodegap.... by its whole name"
                if (node.module or "").split(".")[0] == "decodegap":
                    found |= {_module_of(f"{node.module}.{a.name}", tree) for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {_module_of(a.name, tree) for a in node.names if a.name.split(".")[0] == "decodegap"}
        out[name] = found - {None, name}
    return out


def _order_graph(imports: dict[str, set[str]]) -> list[str]:
    """The modules in an order where each comes after what it imports; AssertionError naming a circle."""
    done, on_path, order = set(), [], []

    def visit(m):
        if m in done:
            return
        assert m not in on_path, "a circle of imports: " + " -> ".join(on_path[on_path.index(m):] + [m])
        on_path.append(m)
        for t in sorted(imports[m]):
            visit(t)
        on_path.pop()
        done.add(m)
        order.append(m)

    for m in sorted(imports):
        visit(m)
    return order


def _upward(imports: dict[str, set[str]], stages: dict[str, str]) -> list[str]:
    """Each import of a module from a stage listed after its own, as `module (stage) imports target (stage)`."""
    rank = {stage: i for i, stage in enumerate(dict.fromkeys(stages.values()))}
    return sorted(f"{m} ({stages[m]}) imports {t} ({stages[t]})" for m, targets in imports.items() for t in targets
                  if rank[stages[t]] > rank[stages[m]])


def test_no_module_imports_from_a_stage_listed_after_its_own():
    upward = _upward(_imports(), _stages())
    assert not upward, "imports against the map's order (move the code, or the entry point, to the later stage): " \
        + "; ".join(upward)


def test_no_modules_import_each_other_in_a_circle():
    imports = _imports()
    assert sorted(_order_graph(imports)) == sorted(imports)


def test_the_order_checks_see_a_circle_and_an_upward_import():
    """The checks above on made-up graphs (each can fail), and the imports they read on the tree."""
    with pytest.raises(AssertionError, match="a circle of imports: a -> b -> a"):
        _order_graph({"a": {"b"}, "b": {"a"}})
    assert _order_graph({"a": {"b"}, "b": set()}) == ["b", "a"]
    stages = {"paths": "base", "kernels/step": "kernels", "harness/lean": "harness"}
    assert _upward({"kernels/step": {"harness/lean", "paths"}, "harness/lean": {"kernels/step"}, "paths": set()},
                   stages) == ["kernels/step (kernels) imports harness/lean (harness)"]
    tree = _tree()
    assert _module_of("decodegap.quant.paths.QUANT_TOL", tree) == "quant/paths"
    assert _module_of("decodegap.kernels.int4_gemv", tree) is None
    assert "harness/quant_checks" in _imports()["harness/session"]  # an import inside a function counts


def _unused_imports(source: str) -> list[str]:
    """`line name` of each name a module imports from decodegap and never uses: a front handing the name on (its
    callers should import it where it is defined) or a dead import. An import for its side effect says so:
    `# noqa: F401  (why)` on its line."""
    lines = source.splitlines()
    tree = _parse(source)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and re.search(r"#\s*noqa: F401\s+\(", lines[node.lineno - 1]):
            continue
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "decodegap":
            out += [f"{node.lineno} {a.asname or a.name}" for a in node.names if (a.asname or a.name) not in used]
        elif isinstance(node, ast.Import):
            out += [f"{node.lineno} {a.asname}" for a in node.names
                    if a.name.split(".")[0] == "decodegap" and a.asname and a.asname not in used]
    return out


def test_no_module_imports_a_name_of_the_package_it_does_not_use():
    """No fronts: a name is imported where it is used, from the module that defines it (no `__all__` lists, no
    names imported only to be handed on)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        unused = _unused_imports(text) + (["__all__"] if re.search(r"^__all__\s*=", text, re.M) else [])
        if unused:
            found[str(path.relative_to(PACKAGE))] = unused
    assert not found, f"imported and not used (import them where they are used): {found}"


def test_an_import_only_handed_on_is_found():
    source = ("from decodegap.claims.verdicts import counts, VERDICTS\nfrom decodegap import paths as p\n"
              "from decodegap.kernels import ops  # noqa: F401  (registers the op)\nprint(counts)\n")
    assert _unused_imports(source) == ["1 VERDICTS", "2 p"]

LONGEST_LINES = 80
"""The most lines a function may span (its signature, docstring and body), kernels and the argument parser aside."""
LONG_ON_PURPOSE = {
    "cli.py:build_parser": "the argument parser: one add_argument after another, every command's options in one place",
    "kernels/fused/source.py:build": "the fused GEMV's Triton source: one kernel body, its prologues and epilogues",
    "kernels/fused/source.py:fused_gemv_kernel": "that kernel body itself (inside build)",
    "kernels/int4_gemv/kernel.py:_kernel": "the int4 GEMV's Triton kernel and its autotuned configs",
    "kernels/fused_int4/source.py:build": "the fused int4 GEMV's Triton source: one kernel body and its helpers",
    "kernels/fused_int4/source.py:fused_int4_gemv_kernel": "that kernel body itself (inside build), as the bf16 one's",
    "kernels/step.py:_attention_kernels": "the split-KV attention's builder: its two Triton kernels, compiled once",
    "kernels/step.py:split_kernel": "the split stage's kernel body (inside _attention_kernels), its rotary and "
                                    "prefetch prologues with it",
}
"""Functions allowed over LONGEST_LINES, by file (under lib/decodegap/) and name, with why."""


def _function_lengths(root, files) -> dict[str, int]:
    """'file:function' -> the lines it spans, for every function (nested ones too) of `files` under `root`."""
    out = {}
    for path in files:
        for node in ast.walk(_parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[f"{path.relative_to(root)}:{node.name}"] = node.end_lineno - node.lineno + 1
    return out


def test_no_function_is_longer_than_eighty_lines_but_kernels_and_the_parser():
    """A long function does several things: split it where a new one passes LONGEST_LINES (bench/'s scripts too)."""
    lengths = {**_function_lengths(PACKAGE, sorted(PACKAGE.rglob("*.py"))),
               **_function_lengths(paths.REPO, sorted((paths.REPO / "bench").glob("*.py")))}
    long = {name: n for name, n in lengths.items() if n > LONGEST_LINES}
    new = {name: n for name, n in sorted(long.items()) if name not in LONG_ON_PURPOSE}
    assert not new, f"split these functions (their lines): {new}"
    assert set(LONG_ON_PURPOSE) <= set(long), f"no longer long: drop {sorted(set(LONG_ON_PURPOSE) - set(long))}"


def test_a_function_spans_its_signature_docstring_and_body(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(LONGEST_LINES - 2))
    (tmp_path / "m.py").write_text(f'def f():\n    """doc"""\n{body}\n\ndef g():\n    def inner():\n        pass\n')
    assert _function_lengths(tmp_path, [tmp_path / "m.py"]) == {"m.py:f": LONGEST_LINES, "m.py:g": 3, "m.py:inner": 2}
