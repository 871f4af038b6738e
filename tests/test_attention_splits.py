"""Notebook 06's split-KV attention by itself (analysis.closing_the_gap_attention) on hand-made bench rows: the forms
it names are found by their block, split and options, the floor is the bytes at the datasheet rate, and a device the
registry lacks is left out."""

import pandas as pd
import pytest

from decodegap.analysis import closing_the_gap_attention as attention
from decodegap.kernels.step import split_size

SPECS = pd.DataFrame([dict(gpu="h200", bandwidth_gbps=4800.0, device_names="NVIDIA H200")])


def _rows(device="NVIDIA H200"):
    L, Hkv = 2088, 8
    variants = [(32, split_size(L, Hkv, 32), 0, 0, [8.0, 9.0, 7.0]),  # the default: median 8.0
                (64, split_size(L, Hkv, 64), 1, 0, [6.0, 6.5, 5.5]),  # the kv-together form: 6.0
                (64, split_size(L, Hkv, 64), 1, 1, [15.0]),  # its one-kernel form
                (128, 128, 0, 0, [5.0, 5.0])]  # the fastest
    return pd.DataFrame([dict(gpu=device, model="m", ctx=2048, L=L, length=2068, Hkv=Hkv, block=b, split=s,
                              kv_together=kv, merged=mg, us=us, bytes=4_800_000, status="ok")
                         for b, s, kv, mg, times in variants for us in times])


def test_the_forms_and_the_floor_by_hand():
    assert split_size(2088, 8, 32) == 64 and split_size(2088, 8, 64) == 64  # 264 programs / 8 heads -> 2088 / 33 -> 64
    (r,) = attention.table(_rows(), SPECS).itertuples()
    assert (r.gpu, r.model, r.ctx, r.variants) == ("h200", "m", 2048, 4)
    assert r.floor_us == pytest.approx(1.0)  # 4.8 MB at 4,800 GB/s
    assert (r.default_us, r.kv_together_us, r.one_kernel_us, r.fastest_us) == (8.0, 6.0, 15.0, 5.0)
    assert r.fastest == "block 128, split 128, V beside K no, two kernels"
    (line,) = attention.findings(attention.table(_rows(), SPECS), {"m": 32})
    assert "0.13 ms a step above the floor at best" in line  # 32 layers x (5.0 - 1.0) us
    assert "8.00 us by default, 6.00 in the kv-together levers' form (block 64)" in line and "one-kernel form 15.00 us" in line


def test_a_device_the_registry_lacks_is_left_out():
    assert attention.table(_rows("Some GPU"), SPECS).empty
    assert attention.findings(attention.table(_rows("Some GPU"), SPECS), {}) == []


def test_no_bench_rows_give_an_empty_table(tmp_path):
    assert attention.load(tmp_path).empty and attention.table(attention.load(tmp_path), SPECS).empty
