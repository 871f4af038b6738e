"""The fused int4 products' instructions a weight, counted offline (bench/int4_sass.py) and read by notebook 06
(analysis.closing_the_gap_int4_instructions): the SASS listing's parsing and the arithmetic by hand, and the
findings from hand-made rows. The compile itself needs Triton (tests/test_fused_int4.py compiles the same kernel)."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from decodegap import paths
from decodegap.analysis import closing_the_gap_int4_instructions as instructions
from decodegap.kernels.fused_int4 import signature

SASS = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* 0x00000a00ff017b82 */
        /*0010*/                   S2R R0, SR_TID.X ;                           /* 0x0000000000007919 */
        /*0020*/                   LDG.E.128 R4, desc[UR4][R2.64] ;             /* 0x0000000402047981 */
        /*0030*/                   FFMA R8, R4, R5, R8 ;                        /* 0x0000000504087223 */
        /*0040*/              @!P0 BRA 0x20 ;                                   /* 0xfffffff000208947 */
        /*0050*/                   STG.E desc[UR4][R2.64], R8 ;                 /* 0x0000000802007986 */
        /*0060*/                   EXIT ;                                       /* 0x000000000000794d */
        /*0070*/                   BRA 0x70;                                    /* 0xfffffffc00fc7947 */
"""


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("int4_sass", paths.REPO / "bench" / "int4_sass.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_listing_its_loop_and_the_arithmetic_by_hand(bench):
    listing = bench.instructions(SASS)
    assert len(listing) == 8 and listing[2] == (0x20, "LDG.E.128 R4, desc[UR4][R2.64]")
    assert bench.loop_length(listing) == 3  # 0x20 .. 0x40; the closing self-branch at 0x70 is no loop
    assert bench.loop_length(listing[:2]) == 0
    # K 4096: 128 chunks; n8_s1_w2 takes 64 a step (2 steps), n8_s2_w2 128 (1), SUB capped at G / 32 = 4
    assert bench.loop_steps(4096, (8, 1, 2)) == 2 and bench.loop_steps(4096, (8, 2, 2)) == 1
    assert bench.loop_steps(14336, (8, 1, 2)) == 7 and bench.loop_steps(4096, (8, 8, 1), group_size=128) == 1
    # 100 instructions, a loop of 30 over 7 steps: 280 a program; 64 threads over 8 x 14336 weights
    executed, weight = bench.per_weight(100, 30, 7, (8, 1, 2), 14336)
    assert executed == 280 and weight == pytest.approx(280 * 64 / (8 * 14336))
    flags = signature.constexprs(4096, 6144, "norm_rotary", (8, 1, 2), dict(num_attention_heads=32, hidden_size=4096,
                                                                             num_key_value_heads=8))
    assert flags["PAIRED"] and flags["ROTARY"] and flags["NORM"] and (flags["HEAD_D"], flags["NQ"], flags["NKV"]) == (
        128, 32, 8) and flags["XBLOCK"] == 4096 and not flags["GATE_UP"]
    assert bench.configs_of(4096, 6144, "norm")[0] == bench.LLAMA_CONFIG  # then the table's configs


def _rows(**per):
    return pd.DataFrame([dict(model="llama-3.1-8b", product=p, K=4096, N=4096, flavour="-", config="n8_s1_w2",
                              static=0, loop=0, steps=1, executed=0, thread_instructions_per_weight=v,
                              triton="3.9.0", git_commit="abcdef0123") for p, v in per.items()])


def test_the_findings_say_the_counts_and_the_ratios_from_the_rows():
    text = instructions.findings(_rows(down_silu=6.82, down=4.18, gate_up_plain=4.73, gate_up_norm=5.10))
    assert len(text) == 2 and "Triton 3.9.0" in text[0] and "commit abcdef0" in text[0]
    assert "down_silu 6.82" in text[0] and "not a timing" in text[0]
    assert f"(down, the SiLU-epilogue levers') {6.82 / 4.18:.2f}x" in text[1]
    assert f"(gate_up_plain) {5.10 / 4.73:.2f}x" in text[1] and "qkv_rotary" not in text[1]
    older = _rows(down_silu=9.0).assign(triton="3.8.0")  # the newest Triton's rows only
    assert "down_silu 6.82" in instructions.findings(pd.concat([older, _rows(down_silu=6.82)]))[0]
    assert instructions.findings(_rows(down=4.18))[1:] == []  # no pair: the counts alone
    assert "not counted" in instructions.findings(instructions.load(paths.REPO / "no_such_dir"))[0]
