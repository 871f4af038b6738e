"""Registry keys checked before anything is measured or written: arms, levers, attention backends, quantisation
paths, model keys against the data folder's models/, context lengths against those models' maximum
(`contexts_for`), and the GPU key against the device that will be measured. A
bad key leaves no row, no env.json entry and no file behind; it raises inputs.InputError, whose message is one
line saying what is wrong and how to put it right. The registries checked against load lazily: checking a key
imports no torch unless the key is the GPU to measure on a CUDA device.

`check_parameters` is what a notebook runs first: inputs.parse_parameters (the parameters by type and value),
then every parameter naming a registry key (PARAMETER_KEYS, MODEL_PARAMETERS) against its registry."""

from __future__ import annotations

from typing import Callable, Iterable

from decodegap import inputs
from decodegap.inputs import InputError


def _known(kind: str, value, known: Iterable[str], fix: str) -> InputError:
    return InputError(f"unknown {kind} {value!r}; known: {', '.join(known)}. {fix}")


def _one_or_more(kind: str, values: Iterable[str], known, fix: str, every: str = "") -> tuple[str, ...]:
    """`values` as a tuple, each one of `known`, at least one (`every`: the option left out for all of them, named
    when none is given)."""
    out = tuple(values)
    for value in out:
        if value not in known:
            raise _known(kind, value, known, fix)
    if not out:
        raise InputError(f"no {kind} given; pass one or more of {', '.join(known)}"
                         + (f", or leave {every} out for every {kind}" if every else ""))
    return out


def arms(values: Iterable[str]) -> tuple[str, ...]:
    """Arm keys, each one of arms.ARMS."""
    from decodegap.arms import ARMS

    return _one_or_more("arm", values, ARMS, "Check the spelling (--arms / ARMS).")


def levers(values: Iterable[str]) -> tuple[str, ...]:
    """Arm keys of the ladder's levers (levers.LEVERS), each checked."""
    from decodegap.levers import LEVERS

    return _one_or_more("lever", values, tuple(dict.fromkeys(a for _, a, _ in LEVERS)),
                        "Check the spelling (ladder --levers).")


def attn(value: str) -> str:
    """An attention backend key of attention.BACKENDS."""
    from decodegap.harness.attention import BACKENDS

    if value not in BACKENDS:
        raise _known("attention backend", value, BACKENDS, "Check the spelling (--attn / --backends).")
    return value


def quant(value: str) -> str:
    """A quantisation path key of quant.PATHS or one of its aliases (quant.ALIASES)."""
    from decodegap.quant.paths import ALIASES, PATHS

    if value not in PATHS and value not in ALIASES:
        raise _known("quantisation path", value, [*PATHS, *ALIASES], "Check the spelling (--quant / QUANT_PATHS).")
    return value


def quants(values: Iterable[str]) -> tuple[str, ...]:
    """Quantisation path keys (quantisation --paths), each one of quant.PATHS or its aliases, at least one: an
    empty list is refused, not read as every path."""
    from decodegap.quant.paths import ALIASES, PATHS

    return _one_or_more("quantisation path", values, [*PATHS, *ALIASES], "Check the spelling (--paths).",
                        every="--paths")


def models(keys: Iterable[str], data=None) -> tuple[str, ...]:
    """Model keys with a config under data/models/."""
    from decodegap.harness import models as registry

    out = tuple(keys)
    if not out:
        raise InputError("no model given; pass one or more model keys (--models / MODELS)")
    for key in out:
        try:
            registry.load_spec(key, data)
        except registry.UnknownModelError as exc:
            raise InputError(str(exc)) from None
    return out


def gpu_to_measure(gpu: str | None, device: str, data=None) -> str:
    """The registry key the rows of a measurement on `device` will carry, checked against that device: a
    CUDA device must be the GPU the key names (by its device_names), and a CPU (tests only) takes a key whose
    architecture is `cpu`, so a CPU's timings can never be written as a GPU's rows. `gpu` None: detect it."""
    from decodegap import hardware

    inputs.data_folder(data)
    try:
        spec = hardware.gpu_spec(gpu, data) if gpu else None
    except hardware.UnknownGPUError as exc:
        raise InputError(str(exc)) from None
    if str(device).startswith("cpu"):
        if spec is None or spec.architecture != "cpu":
            what = f"GPU key {gpu!r} names an {spec.name}" if spec else "no GPU key was given"
            raise InputError(f"{what}, but device {device!r} measures this machine's CPU, so its rows would not be "
                             "that GPU's. Measure on the GPU (device cuda), or for a test use a key whose "
                             "architecture is cpu in data/specs/gpus.csv")
        return spec.gpu
    if not str(device).startswith("cuda"):
        raise InputError(f"device {device!r} is neither cuda nor cpu; measure with device cuda")
    import torch

    if not torch.cuda.is_available():
        what = f"GPU {gpu!r} cannot" if gpu else "no GPU can"
        raise InputError(f"no CUDA device is visible, so {what} be measured on this machine; here only replay "
                         "works (MEASURE=False, `make reproduce`)")
    name = torch.cuda.get_device_name(torch.device(device))
    try:
        detected = hardware.gpu_key_for_device_name(name, data)
    except hardware.UnknownGPUError as exc:
        raise InputError(str(exc)) from None
    if spec is not None and spec.gpu != detected:
        raise InputError(f"GPU key {gpu!r} names an {spec.name}, but this machine's {device} is a {name!r} "
                         f"(key {detected!r}); pass --gpu {detected} / GPU={detected!r}, or leave it out to detect it")
    return detected


def contexts_for(contexts: Iterable[int], model_keys: Iterable[str] | None, data=None, say=None) -> list[int]:
    """Context lengths de-duplicated (in their order; a repeat is dropped with a note through `say`, default: print
    to stderr) and bounded by the smallest max_position_embeddings of the models (`model_keys`; None: every model of
    the registry that is not a tiny test config). Raises InputError for a context above it."""
    import sys

    from decodegap import paths
    from decodegap.harness import models as registry

    values = list(inputs.contexts(tuple(contexts)))
    out = list(dict.fromkeys(values))
    if len(out) < len(values):
        twice = sorted({c for c in values if values.count(c) > 1})
        (say or (lambda text: print(text, file=sys.stderr)))(
            f"note: context(s) {', '.join(map(str, twice))} given more than once; each is measured and read once")
    keys = list(model_keys) if model_keys is not None else [
        k for k in registry.model_keys(data) if not registry.load_spec(k, data).tiny]
    limits = {key: int(registry.load_spec(key, data).config.get("max_position_embeddings", 0) or 0) for key in keys}
    for key, limit in sorted(limits.items(), key=lambda kv: kv[1]):
        over = [c for c in out if limit and c > limit]
        if over:
            raise InputError(f"context {over[0]:,} is beyond {key}'s maximum of {limit:,} tokens (max_position_embeddings "
                             f"in {paths.data_dir(data)}/models/{key}.json); pass at most {limit}")
    return out


def _each(check: Callable) -> Callable:
    return lambda values: [check(v) for v in values]


PARAMETER_KEYS: dict[str, Callable] = {
    "ARMS": arms, "GRID_ARM": lambda value: arms([value]),
    "STEP_BACKENDS": _each(attn), "BACKENDS": lambda values: values is None or _each(attn)(values),
    "QUANT_PATHS": _each(quant),
}
"""Notebook parameters naming registry keys (beside the model keys, MODEL_PARAMETERS): name -> the check of the
parsed value (inputs.PARAMETERS), raising InputError for a key its registry does not know."""
MODEL_PARAMETERS = ("MODELS", "TABLE_MODEL", "HEADLINE_MODEL", "ATTENTION_MODEL")
"""Parameters naming model keys, checked against the chosen data folder's models/."""
GPU_PARAMETERS = ("GPU", "LADDER_GPU", "CHEAP_GPU", "DEAR_GPU")
"""Parameters naming GPU keys, checked against the chosen data folder's specs/gpus.csv (a suggestion when near one)."""
CONTEXT_PARAMETERS = ("CONTEXTS", "STEP_CONTEXTS")
"""Context lists: de-duplicated with a note, bounded by the models' max_position_embeddings (contexts_for)."""


def check_parameters(namespace: dict) -> None:
    """Check a notebook's parameters (its UPPER_CASE globals, as papermill injected them): by type and value
    (inputs.parse_parameters, which normalises a list parameter given as one value or a comma-separated string
    into a list, in place), then each key against its registry (PARAMETER_KEYS) and each model key against the
    data folder's models/. Raises InputError naming what is wrong and how to fix it."""
    from decodegap import validate

    inputs.parse_parameters(namespace)
    data = namespace.get("DATA_DIR")
    for name, value in namespace.items():
        if name in PARAMETER_KEYS:
            PARAMETER_KEYS[name](value)
        elif name in MODEL_PARAMETERS:
            models([value] if isinstance(value, str) else value, data)
        elif name in GPU_PARAMETERS and value is not None:
            validate.gpu_key(value, data, f"parameter {name}")
    if namespace.get("FIGURES_DIR"):  # papermill run directly: the same folder of its own as reproduce asks for
        from pathlib import Path

        from decodegap import paths

        validate.own_figures_folder(Path(namespace["FIGURES_DIR"]).resolve(), paths.data_dir(data).resolve())
    for name in CONTEXT_PARAMETERS:
        if name in namespace:
            namespace[name] = contexts_for(namespace[name], namespace.get("MODELS"), data,
                                           say=lambda text, name=name: print(f"{name}: {text}"))
