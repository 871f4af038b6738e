"""Notebook 07's anatomy tables on hand-made rows: the copy share and the per-axis two-term fit, checked by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from decodegap.analysis import where_the_thesis_ends_anatomy as anatomy


def _kernels(run, batch, copies_us, other_us, arm="eager"):
    base = dict(run_id=run, gpu="h200", model="m", ctx=2048, arm=arm, attn="sdpa", quant="bf16", status="ok",
                reason="", batch=batch)
    rows = [dict(base, kernel_index=i, kernel="void at::native::direct_copy_kernel_cuda<...>", gpu_us=us)
            for i, us in enumerate(copies_us)]
    return rows + [dict(base, kernel_index=len(copies_us) + i, kernel="nvjet_sm90_gemm", gpu_us=us)
                   for i, us in enumerate(other_us)]


def test_the_copy_share_of_each_profiled_step_by_hand():
    int4 = [dict(r, quant="int4-triton") for r in _kernels("r9", 1, [1.0], [1.0])]  # another path's newer profile
    rows = pd.DataFrame(_kernels("r1", 1, [100.0], [900.0]) + _kernels("r1", 8, [600.0, 600.0], [800.0])
                        + _kernels("r0", 8, [1.0], [1.0]) + int4)  # an older run of the same step: left out
    t = anatomy.copy_shares(rows).set_index("batch")
    assert t.loc[1, "copy_share"] == pytest.approx(0.1) and t.loc[1, "gpu_ms"] == pytest.approx(1.0)
    assert t.loc[8, "copy_share"] == pytest.approx(0.6) and t.loc[8, "kernels"] == 3
    [line] = anatomy.findings(anatomy.copy_shares(rows), pd.DataFrame(columns=anatomy.FIT_COLUMNS))
    assert "10% of its GPU time at batch 1" in line and "60% at batch 8 (1.20 of 2.00 ms)" in line


def test_the_two_term_fit_recovers_known_numbers_and_flags_an_unphysical_one():
    floor, n = np.array([1.0, 2.0, 4.0, 8.0]), np.array([1000, 1200, 2000, 3000])
    t = floor / 0.8 + n * 2.5e-3  # a = 0.8, c = 2.5 us
    f = anatomy.fit_two_terms(floor, n, t)
    assert (f["a"], f["c_us"], f["points"]) == (pytest.approx(0.8), pytest.approx(2.5), 4)
    assert f["rms_rel_residual"] == pytest.approx(0.0, abs=1e-12)
    assert np.isnan(anatomy.fit_two_terms([1.0], [100], [2.0])["a"])
    scope = pd.DataFrame([dict(gpu="h200", model=m, ctx=2048, batch=1, arm="graph", t_floor_bw_ms=fl,
                               t_obs_ms=fl / 0.8 + k * 2.5e-3) for m, fl, k in (("s1", 1.0, 1000), ("s2", 2.0, 1200),
                                                                                ("s3", 4.0, 2000))])
    counts = pd.DataFrame([dict(gpu="h200", model=m, ctx=2048, arm="eager", batch=1, n_kernels=k)
                           for m, k in (("s1", 1000), ("s2", 1200), ("s3", 2000))])
    fits = anatomy.axis_fits(scope, counts, size_models=("s1", "s2", "s3"), batch_model="s1")
    size = fits[fits.axis == "size"].iloc[0]
    assert (size.arm, size.points, size.a, size.c_us) == ("graph", 3, pytest.approx(0.8), pytest.approx(2.5))
    bad = pd.DataFrame([dict(fits.iloc[0], a=0.04, c_us=-40.0)])
    [line] = anatomy.findings(pd.DataFrame(columns=anatomy.COPY_COLUMNS), bad)
    assert "not a physical fit" in line
    # two cells for two terms: any two fit exactly (rms residual 0), so the line says so and reports no numbers
    two = anatomy.axis_fits(scope.iloc[:2], counts, size_models=("s1", "s2", "s3"), batch_model="s1")
    assert two[two.axis == "size"].iloc[0].rms_rel_residual == pytest.approx(0.0, abs=1e-12)
    [line] = anatomy.findings(pd.DataFrame(columns=anatomy.COPY_COLUMNS), two[two.axis == "size"])
    assert line == ("h200 graph, the size axis alone: 2 cells with a kernel count, no more than the fit's two terms "
                    "(an exact fit whatever the cells): not reported.")
