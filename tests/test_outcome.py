"""outcome.attempt: the three kinds of row every recorder writes."""

from __future__ import annotations

import pytest

from decodegap import outcome
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


def test_classify_is_the_one_rule_for_a_failed_measurement():
    class Missing(RuntimeError):
        pass

    class OutOfMemoryError(RuntimeError):  # torch's name: recognised without importing torch
        pass

    assert outcome.classify(Missing("no package"), (Missing,)) == ("unavailable", "no package")
    assert outcome.classify(OutOfMemoryError("CUDA out of memory.\nmore")) == ("oom", "out of memory: CUDA out of memory.")
    assert outcome.classify(OutOfMemoryError("x"), oom="model did not fit") == ("oom", "model did not fit: x")
    assert outcome.classify(AssertionError("err 0.3 > 0.1")) == ("error", f"{outcome.CHECK_FAILED}: err 0.3 > 0.1")
    assert outcome.classify(ValueError("bad")) == ("error", "ValueError: bad")


def test_a_real_torch_out_of_memory_error_is_oom():
    import torch

    assert outcome.classify(torch.OutOfMemoryError("CUDA out of memory"))[0] == "oom"


def test_failure_prints_the_traceback_of_an_unexpected_error_only(capsys):
    for exc, status, printed in ((ValueError("bad"), "error", True), (AssertionError("0.3 > 0.1"), "error", False),
                                 (Missing("no package"), "unavailable", False)):
        try:
            raise exc
        except Exception as caught:
            assert outcome.failure(caught, (Missing,))[0] == status
        assert ("Traceback" in capsys.readouterr().err) == printed
