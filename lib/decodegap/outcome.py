"""A measurement's outcome as a row status. Every recorder (kernel profiles, attention and quantised-layer
checks) writes the same three kinds of row when a measurement runs, cannot run here, or fails: a failing
cell is recorded and the sweep goes on, never ends."""

from __future__ import annotations

import traceback
from typing import Callable

REASON_CHARS = 300  # a reason is cut to this many characters


CHECK_FAILED = "correctness check failed"
"""The start of an `error` row's reason when a correctness check failed (its number is in verify.csv)."""

def is_out_of_memory(exc: BaseException) -> bool:
    """torch's OutOfMemoryError (CUDA or other devices), without importing torch here."""
    return any(t.__name__ == "OutOfMemoryError" for t in type(exc).__mro__)


def classify(exc: BaseException, unavailable: tuple[type[BaseException], ...] = (),
             oom: str = "out of memory") -> tuple[str, str]:
    """(status, reason) of a measurement that raised `exc`, the one rule every recorder and the sweep follow:
    "unavailable" for the exception types in `unavailable` (a missing package, device or shape); "oom" for an
    out-of-memory error, its first line after `oom`; "error" with "correctness check failed: ..." for an
    AssertionError; "error" with "Type: message" for anything else."""
    if unavailable and isinstance(exc, unavailable):
        return "unavailable", str(exc)
    if is_out_of_memory(exc):
        return "oom", f"{oom}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    if isinstance(exc, AssertionError):
        return "error", f"{CHECK_FAILED}: {exc}"
    return "error", f"{type(exc).__name__}: {exc}"


def failure(exc: BaseException, unavailable: tuple[type[BaseException], ...] = ()) -> tuple[str, str]:
    """`classify` of a measurement's exception, with the traceback of an unexpected one (not unavailable, not a
    failed check, not out of memory) printed to stderr: what every recorder and the sweep do with a failed cell."""
    status, reason = classify(exc, unavailable)
    if status == "error" and not isinstance(exc, AssertionError):
        traceback.print_exc()
    return status, reason


def attempt(measure: Callable[[], object], unavailable: tuple[type[BaseException], ...] = ()):
    """(value, status, reason) of calling `measure()`: (value, "ok", "") when it returns, else (None, status,
    reason) by `classify`, the reason cut to REASON_CHARS; an unexpected error's traceback goes to stderr. Never
    raises an Exception."""
    try:
        return measure(), "ok", ""
    except Exception as exc:  # recorded, never fatal
        status, reason = failure(exc, unavailable)
        return None, status, reason[:REASON_CHARS]
