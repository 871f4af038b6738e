"""outcome.attempt: the three kinds of row every recorder writes."""

from __future__ import annotations

import pytest

from decodegap.outcome import REASON_CHARS, attempt


class Missing(RuntimeError):
    pass


def _raise(exc):
    def measure():
        raise exc
    return measure


def test_a_measurement_that_returns_is_ok():
    assert attempt(lambda: 42, (Missing,)) == (42, "ok", "")


def test_an_unavailable_kind_names_its_reason():
    assert attempt(_raise(Missing("package foo not installed")), (Missing,)) == (None, "unavailable", "package foo not installed")


def test_a_failed_check_and_a_crash_are_errors_with_their_reason(capsys):
    assert attempt(_raise(AssertionError("0.2 > 0.1")), (Missing,)) == (None, "error", "correctness check failed: 0.2 > 0.1")
    value, status, reason = attempt(_raise(ZeroDivisionError("division by zero")))
    assert (value, status, reason) == (None, "error", "ZeroDivisionError: division by zero")
    assert "Traceback" in capsys.readouterr().err  # the crash's traceback is not swallowed


def test_reasons_are_cut_and_other_exception_types_are_not_unavailable():
    _, status, reason = attempt(_raise(Missing("x" * 1000)), (Missing,))
    assert status == "unavailable" and len(reason) == REASON_CHARS
    assert attempt(_raise(Missing("m")))[1] == "error"  # not listed as unavailable: an error
    with pytest.raises(KeyboardInterrupt):  # never swallows an interrupt
        attempt(_raise(KeyboardInterrupt()))
