"""The rules registry (decodegap.claims.rules): a rule cannot change without a new history item."""

import dataclasses

import pytest

from decodegap.claims import rules as R


def test_every_rule_is_fingerprinted_in_its_newest_history_item():
    """Changing a rule's fields (statistic, rows, thresholds, noise, holds_if / fails_if, aggregate, sources) changes
    its fingerprint: add a history item (rules._reg(reason, fp=...)) dated when it changed, with the new
    fingerprint; the earlier items keep the earlier rule and the verdict it gave."""
    stale = {r.id: R.fingerprint(r) for r in R.RULES if r.history[-1].fingerprint != R.fingerprint(r)}
    assert not stale, f"rules changed without a new history item (new fingerprints): {stale}"


def test_a_changed_rule_fails_the_fingerprint():
    r = R.get("R3f")
    changed = dataclasses.replace(r, threshold=(("noise_factor", 2.0),))
    assert R.fingerprint(changed) != r.history[-1].fingerprint
    assert R.fingerprint(dataclasses.replace(r, holds_if=r.holds_if + " ")) != R.fingerprint(r)


def test_history_is_dated_in_order_and_says_why():
    for r in R.RULES:
        dates = [c.date for c in r.history]
        assert dates == sorted(dates), r.id
        assert all(c.reason and c.commit for c in r.history), r.id
        fps = [c.fingerprint for c in r.history if c.fingerprint]
        assert len(fps) == len(set(fps)), f"{r.id}: one fingerprint in two history items"
        # earlier items state the earlier rule and the verdict it gave
        assert all(c.rule and c.verdict for c in r.history[:-1] if c is not R.START), r.id


def test_ids_are_unique_and_sources_known():
    ids = [r.id for r in R.RULES]
    assert len(ids) == len(set(ids))
    for r in R.RULES:
        assert r.sources and set(r.sources) <= set(R.SOURCES), r.id
        assert (R.METHOD in r.sources) == (r.sources == (R.METHOD,)), r.id


def test_thresholds_are_read_by_name():
    assert R.get("R4l").t("spread") == 0.3
    with pytest.raises(KeyError):
        R.get("R4l").t("no such threshold")


def test_quantisation_bounds_come_from_the_power_derivation():
    from decodegap import compare

    qt = R.get("QT")
    assert (qt.t("k_pass"), qt.t("k_fail")) == (compare.MODEL_K_PASS, compare.MODEL_K_FAIL) == (1.3, 2 ** 0.5)
    assert qt.t("k_pass") <= qt.t("k_fail")
