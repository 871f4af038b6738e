"""A measurement's outcome as a row status. Every recorder (kernel profiles, attention and quantised-layer
checks) writes the same three kinds of row when a measurement runs, cannot run here, or fails: a failing
cell is recorded and the sweep goes on, never ends."""

from __future__ import annotations

import traceback
from typing import Callable

REASON_CHARS = 300  # a reason is cut to this many characters


CHECK_FAILED = "correctness check failed"
"""The start of an `error` row's reason when a correctness check failed (its number is in verify.csv)."""

def attempt(measure: Callable[[], object], unavailable: tuple[type[BaseException], ...] = ()):
    """(value, status, reason) of calling `measure()`: (value, "ok", "") when it returns; (None,
    "unavailable", why) for the exception types in `unavailable` (a missing package, device or shape);
    (None, "error", "correctness check failed: ...") for an AssertionError; (None, "error", "Type: message")
    for any other exception, whose traceback goes to stderr. Never raises an Exception."""
    try:
        return measure(), "ok", ""
    except unavailable as exc:
        return None, "unavailable", str(exc)[:REASON_CHARS]
    except AssertionError as exc:
        return None, "error", f"{CHECK_FAILED}: {exc}"[:REASON_CHARS]
    except Exception as exc:  # recorded, never fatal
        traceback.print_exc()
        return None, "error", f"{type(exc).__name__}: {exc}"[:REASON_CHARS]
