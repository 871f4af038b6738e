"""Checks of what a user passes in (CLI values, papermill parameters, the data folder) by type and value, made
before anything is written: a bad input leaves no row, no env.json entry and no file behind. Every failure is
an InputError whose message is one line saying what is wrong and how to put it right; the CLI prints it
without a traceback and a notebook shows it as that one line (`_render_traceback_`, IPython's hook). The
parameters only: registry keys (arms, backends, paths, models, the GPU against the device) are checked by
decodegap.harness.keys, which holds the registries."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable, Iterable

from decodegap import paths


class InputError(ValueError):
    """A bad input, refused before anything is measured or written; the message says how to fix it."""

    def _render_traceback_(self) -> list[str]:  # IPython (and so papermill) shows this instead of a traceback
        return [f"{type(self).__name__}: {self}"]


def is_data_folder(path: Path) -> bool:
    """Whether `path` holds specs/gpus.csv, what marks a data folder (a copy of the repository's data/)."""
    return (Path(path) / "specs" / "gpus.csv").is_file()


def data_folder(data: str | Path | None = None) -> Path:
    """The data folder (`paths.data_dir`), refused unless it exists and holds specs/gpus.csv."""
    path = paths.data_dir(data)
    if not path.is_dir():
        raise InputError(f"data folder {path} does not exist; pass an existing folder (--data-dir / DATA_DIR) "
                         f"or leave it out for the repository's {paths.DATA}")
    if not is_data_folder(path):
        raise InputError(f"data folder {path} has no specs/gpus.csv; a data folder is a copy of the repository's "
                         f"data/ (models/, specs/, published/, raw/)")
    return path


def contexts(values: Iterable[int]) -> tuple[int, ...]:
    """Context lengths: positive whole numbers of tokens."""
    out = tuple(values)
    if not out:
        raise InputError("no context given; pass one or more lengths in tokens, e.g. 2048,16384")
    for c in out:
        if isinstance(c, bool) or not isinstance(c, int) or c <= 0:
            raise InputError(f"context {c!r} is not a positive whole number of tokens; write e.g. 2048, not 2k")
    return out


def positive(name: str, value, minimum: int = 1) -> int:
    """A whole number >= minimum (sessions, steps, ...)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{name} takes a whole number >= {minimum}, got {value!r}")
    return value


# Papermill parameters: name -> (what it expects, check returning the value, normalised). A list parameter
# also takes one value or a comma-separated string (what `papermill -p NAME a,b` passes).

def _list_literal(name: str, value):
    """`value` read as a list where it is the text of one (`-p MODELS '["a", "b"]'` passes that text, not a list),
    else as it came."""
    if not (isinstance(value, str) and value.strip().startswith("[") and value.strip().endswith("]")):
        return value
    try:
        out = ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        raise InputError(f"parameter {name}: cannot read {value!r} as a list; write -p {name} a,b or "
                         f"-y '{name}: [a, b]'") from None
    return out if isinstance(out, list) else value


def _listed(kind: Callable, what: str, each: Callable | None = None) -> Callable:
    def check(name, value):
        value = _list_literal(name, value)
        if isinstance(value, str) and kind is str:
            value = [v.strip() for v in value.split(",") if v.strip()]
        elif isinstance(value, str) and "," in value:  # `-p CONTEXTS 2048,16384`, as the CLI passes it
            value = [_number(v.strip(), kind) for v in value.split(",") if v.strip()]
        elif isinstance(value, (int, float, str)) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, (list, tuple)) or not value or not all(
                isinstance(v, kind) and not isinstance(v, bool) for v in value):
            raise InputError(f"parameter {name} takes {what}, got {value!r}")
        if each:
            each(value)
        return list(value)
    return check


def _number(text: str, kind):
    """One item of a comma-separated number list as `kind` (int, or a tuple of kinds: the first that reads it),
    else the text itself, which the list check then refuses by name."""
    for k in kind if isinstance(kind, tuple) else (kind,):
        try:
            return k(text)
        except ValueError:
            pass
    return text


def _flag(name, value):
    if not isinstance(value, bool):
        raise InputError(f"parameter {name} takes True or False (papermill: -p {name} True), got {value!r}")
    return value


def _whole(minimum: int) -> Callable:
    return lambda name, value: positive(f"parameter {name}", value, minimum)


def _optional_text(name, value):
    if value is not None and not isinstance(value, str):
        raise InputError(f"parameter {name} takes a text value or None, got {value!r}")
    return value


def _text(name, value):
    if not isinstance(value, str) or not value:
        raise InputError(f"parameter {name} takes a text value, got {value!r}")
    return value


def _one_of(*choices) -> Callable:
    def check(name, value):
        if value not in choices:
            raise InputError(f"parameter {name} takes one of {', '.join(map(repr, choices))}, got {value!r}")
        return value
    return check


def _device(name, value):
    if not isinstance(value, str) or not (value.startswith("cuda") or value.startswith("cpu")):
        raise InputError(f"parameter {name} takes 'cuda' (or 'cpu' for the tests), got {value!r}")
    return value


def _optional(check: Callable) -> Callable:
    return lambda name, value: None if value is None else check(name, value)


def _folder(name, value):
    if value is not None:
        if not isinstance(value, str):
            raise InputError(f"parameter {name} takes a folder path or None, got {value!r}")
    return value


PARAMETERS: dict[str, Callable] = {
    "GPU": _optional_text, "LADDER_GPU": _text, "MEASURE": _flag, "DEVICE": _device,
    "MODELS": _listed(str, "a list of model keys, e.g. ['llama-3.1-8b'] or 'qwen2.5-7b,llama-3.1-8b'"),
    "CONTEXTS": _listed(int, "a list of context lengths in tokens, e.g. [2048, 16384]", contexts),
    "STEP_CONTEXTS": _listed(int, "a list of context lengths in tokens, e.g. [2048, 16384]", contexts),
    "ARMS": _listed(str, "a list of arm keys, e.g. ['eager', 'graph']"),
    "GRID_ARM": _text,
    "STEP_BACKENDS": _listed(str, "a list of attention backend keys, e.g. ['sdpa', 'flex']"),
    "BACKENDS": _optional(_listed(str, "a list of attention backend keys or None")),
    "QUANT_PATHS": _listed(str, "a list of quantisation path keys, e.g. ['bf16', 'int4-tinygemm']"),
    "SESSIONS": _whole(1), "HEADLINE_SESSIONS": _whole(1), "COMPILE_SESSIONS": _whole(1), "STEPS": _whole(1), "WARMUP": _whole(0),
    "HEADLINE_CTX": _whole(1), "TABLE_CTX": _whole(1), "BANDWIDTH_MIB": _whole(1),
    "SEED": _whole(0), "GROUP_SIZE": _optional(_whole(1)),
    "CONVENTION": _one_of("W_all", "W_streamed"),
    "COUNT_KERNELS": _flag, "LAYER_CHECK": _flag,
    "TABLE_MODEL": _text, "HEADLINE_MODEL": _text, "ATTENTION_MODEL": _text,
    "PROVIDER": _text, "CHEAP_GPU": _text, "DEAR_GPU": _text,
    "PRICE_RATIOS": _listed((int, float), "a list of numbers, e.g. [3, 6, 10]"),
    "DATA_DIR": _folder, "FIGURES_DIR": _folder,
}
"""Every parameter name the notebooks use, with its check by type and value (tests/test_inputs.py keeps it
complete); the parameters naming registry keys are checked against their registries by harness.keys."""


def parse_parameters(namespace: dict) -> None:
    """Check a notebook's parameters (its UPPER_CASE globals, as papermill injected them) by type and value,
    normalising a list parameter given as one value or a comma-separated string into a list, in place.
    DATA_DIR must be an existing data folder. Raises InputError naming the parameter and what it expects.
    harness.keys.check_parameters runs this, then checks the keys."""
    names = [k for k in namespace if k in PARAMETERS]
    data = namespace.get("DATA_DIR")
    if "DATA_DIR" in names:
        _folder("DATA_DIR", data)
        data_folder(data)
    for name in names:
        namespace[name] = PARAMETERS[name](name, namespace[name])
