"""The experiment layer's interface (decodegap.experiments): one module per notebook with the same small set of
functions, and the plans it hands the harness."""

from __future__ import annotations

import importlib

import pytest

from decodegap import notebooks
from decodegap.harness import sweep

MODULES = {"01_roofline": "roofline", "02_cuda_graphs_ab": "cuda_graphs_ab",
           "03_attention_backends": "attention_backends", "04_quantisation_l4": "quantisation", "05_cost": "cost",
           "06_closing_the_gap": "closing_the_gap", "07_where_the_thesis_ends": "where_the_thesis_ends"}
MEASURED_APART = {"cost", "where_the_thesis_ends"}
"""Experiments without a plan and measure of their own here: cost measures nothing; notebook 07's measuring side
(plan, measure) joins its replay side in the same module."""


def test_one_experiment_module_per_notebook_with_the_common_interface():
    assert sorted(MODULES) == sorted(p.stem for p in notebooks.notebook_paths())
    for stem, name in MODULES.items():
        module = importlib.import_module(f"decodegap.experiments.{name}")
        assert module.NOTEBOOK == stem
        wanted = ("rows", "tables", "findings") + (("plan", "measure") if name not in MEASURED_APART else ())
        assert all(callable(getattr(module, f, None)) for f in wanted), (name, wanted)


def test_the_quantisation_plan_is_one_sweep_per_path_on_the_notebooks_arms():
    from decodegap.experiments import quantisation

    plans = quantisation.plan("h200", ["llama-3.1-8b"], [2048, 4096], ["int4-tinygemm", "bf16"], device="cpu")
    assert [p.quant for p in plans] == ["int4-tinygemm", "bf16"]
    assert all(isinstance(p, sweep.SweepPlan) and p.arms == quantisation.ARMS and p.contexts == (2048, 4096)
               and p.sessions == 1 for p in plans)
    with pytest.raises(Exception, match="int4-tinygem"):  # a misspelled path is refused by the plan itself
        quantisation.plan("h200", ["llama-3.1-8b"], [2048], ["int4-tinygem"], device="cpu")
