"""Notebook 06's split-KV attention by itself (analysis.closing_the_gap_attention) on hand-made bench rows: the forms
it names are found by their block, split and options, the floor is the bytes at the datasheet rate, and a device the
registry lacks is left out."""

import pandas as pd
import pytest

from decodegap.analysis import closing_the_gap_attention as attention
from decodegap.kernels.step import split_size

SPECS = pd.DataFrame([dict(gpu="h200", bandwidth_gbps=4800.0, device_names="NVIDIA H200")])


def _rows(device="NVIDIA H200", launch_us=(5.5,)):
    L, Hkv = 2088, 8
    variants = [(32, split_size(L, Hkv, 32), 0, 0, 4, 3, [8.0, 9.0, 7.0]),  # the default: median 8.0
                (64, split_size(L, Hkv, 64), 1, 0, 4, 3, [6.0, 6.5, 5.5]),  # the kv-together form: 6.0
                (64, split_size(L, Hkv, 64), 1, 1, 4, 3, [15.0]),  # its one-kernel form
                (32, split_size(L, Hkv, 32), 0, 0, 8, 2, list(launch_us)),  # the default's block at another launch
                (128, 128, 0, 0, 4, 3, [5.0, 5.0])]  # the fastest
    return pd.DataFrame([dict(gpu=device, model="m", ctx=2048, L=L, length=2068, Hkv=Hkv, block=b, split=s,
                              kv_together=kv, merged=mg, warps=w, stages=st, us=us, bytes=4_800_000, status="ok")
                         for b, s, kv, mg, w, st, times in variants for us in times])


def test_the_forms_and_the_floor_by_hand():
    assert split_size(2088, 8, 32) == 64 and split_size(2088, 8, 64) == 64  # 264 programs / 8 heads -> 2088 / 33 -> 64
    (r,) = attention.table(_rows(), SPECS).itertuples()
    assert (r.gpu, r.model, r.ctx, r.variants) == ("h200", "m", 2048, 5)
    assert r.floor_us == pytest.approx(1.0)  # 4.8 MB at 4,800 GB/s
    assert (r.default_us, r.kv_together_us, r.one_kernel_us, r.fastest_us) == (8.0, 6.0, 15.0, 5.0)
    assert r.fastest == "block 128, split 128, V beside K no, two kernels, 4 warps, 3 stages"
    (line,) = attention.findings(attention.table(_rows(), SPECS), {"m": 32})
    assert "0.13 ms a step above the floor at best" in line  # 32 layers x (5.0 - 1.0) us
    assert "8.00 us by default, 6.00 in the kv-together levers' form (block 64)" in line and "one-kernel form 15.00 us" in line


def test_a_device_the_registry_lacks_is_left_out():
    assert attention.table(_rows("Some GPU"), SPECS).empty
    assert attention.findings(attention.table(_rows("Some GPU"), SPECS), {}) == []


def test_no_bench_rows_give_an_empty_table(tmp_path):
    assert attention.load(tmp_path).empty and attention.table(attention.load(tmp_path), SPECS).empty


def test_a_launch_is_part_of_the_variant():
    """The default form is read at the default launch alone (8.0, not the 8-warp launch's 4.0), and a faster launch
    is the fastest variant, named with its warps and stages."""
    (r,) = attention.table(_rows(launch_us=(4.0,)), SPECS).itertuples()
    assert (r.default_us, r.fastest_us) == (8.0, 4.0)
    assert r.fastest == "block 32, split 64, V beside K no, two kernels, 8 warps, 2 stages"


def test_rows_from_before_the_launch_sweep_read_as_the_default_launch(tmp_path):
    """Rows whose warps and stages are blank (the bench passed neither) are Triton's defaults, 4 warps and 3 stages."""
    rows = _rows().drop(columns=["warps", "stages"])
    rows = rows.assign(warps="", stages="")
    (tmp_path / "diagnostics").mkdir()
    rows.to_csv(tmp_path / "diagnostics" / "attention_splits.csv", index=False)
    loaded = attention.load(tmp_path)
    assert set(zip(loaded["warps"], loaded["stages"])) == {(4, 3)}
    (r,) = attention.table(loaded, SPECS).itertuples()
    # the 8-warp row read at the default launch joins the default's: median of 7.0, 8.0, 9.0 and 5.5
    assert (r.default_us, r.variants) == (7.5, 4)


def test_the_bench_times_each_launch_on_the_two_kernel_form():
    """bench/attention_splits.py's variants at the target cell's cache (2088 positions, 8 kv heads), counted by hand:
    blocks 32, 64, 128 give 3, 2 and 2 distinct splits over waves 1-8 (32: 256, 64, 32; 64: 256, 64; 128: 256, 128),
    so 7 a form; 4 forms at the default launch, and 3 x 4 - 1 = 11 other launches of the two-kernel form: 105."""
    import importlib.util

    from decodegap import paths

    spec = importlib.util.spec_from_file_location("attention_splits", paths.REPO / "bench" / "attention_splits.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    got = list(bench.variants(2088, 8))
    assert len(got) == 105 == len(set(got))
    assert {(b, s) for b, _, s, *_ in got} == {(32, 256), (32, 64), (32, 32), (64, 256), (64, 64), (128, 256),
                                                (128, 128)}
    other = [v for v in got if v[5:] != (4, 3)]
    assert len(other) == 77 and all(v[3:5] == (False, False) for v in other)
