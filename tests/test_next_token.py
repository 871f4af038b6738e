"""The greedy next token in one kernel (decodegap.kernels.next_token): its reference is torch.argmax with the first
index among ties and one added to the position; what it refuses; in Triton's interpreter the kernel against the
reference on ties across programs, a vocabulary that is not a multiple of its block, -inf logits and two launches in
a row (its counter reset); on the GPU, the kernel graphed against torch.argmax and the lean step's tokens with it
against those without it."""

from __future__ import annotations

import pytest
import torch

from decodegap.kernels import next_token as nt


def _state():
    return torch.zeros(1, 1, dtype=torch.long), torch.tensor([7])


def test_the_reference_takes_the_first_of_tied_maxima_and_advances_the_position():
    logits = torch.zeros(1, 1, 5000, dtype=torch.bfloat16)
    logits[0, 0, [4100, 2049, 4999]] = 3.0  # three equal maxima in three blocks: the first index wins
    tok, pos = _state()
    nt.next_token_reference_(logits, tok, pos)
    assert int(tok) == 2049 and int(pos) == 8
    logits[0, 0, 4999] = 3.5
    nt.next_token_reference_(logits, tok, pos)
    assert int(tok) == 4999 and int(pos) == 9


def test_what_the_kernel_cannot_take_is_refused_before_it_runs():
    tok, pos = _state()
    with pytest.raises(ValueError, match="one sequence"):
        nt.next_token_(torch.zeros(2, 1, 64), tok, pos)  # a batch of two keeps torch's argmax
    with pytest.raises(ValueError, match="int64"):
        nt.next_token_(torch.zeros(1, 1, 64), tok.int(), pos)
    with pytest.raises(ValueError, match="at most"):
        nt.next_token_(torch.zeros(nt.BLOCK * nt.MAX_PROGRAMS + 1), tok, pos)


INTERPRETED = """
import torch
from decodegap.kernels import next_token as nt

def both(logits):
    tok, pos = torch.zeros(1, 1, dtype=torch.long), torch.tensor([7])
    ref_tok, ref_pos = tok.clone(), pos.clone()
    nt.next_token_(logits, tok, pos)
    nt.next_token_reference_(logits, ref_tok, ref_pos)
    return (int(tok), int(pos)), (int(ref_tok), int(ref_pos))

gen = torch.Generator().manual_seed(0)
V = 3 * nt.BLOCK + 517  # a last program with a tail
for trial in range(4):
    logits = torch.randn(1, 1, V, generator=gen).bfloat16()
    got, want = both(logits)
    assert got == want, (trial, got, want)
tied = torch.zeros(V, dtype=torch.bfloat16)
tied[[V - 1, 2 * nt.BLOCK + 3, nt.BLOCK + 9]] = 2.0  # tied maxima in three programs: the first index
assert both(tied) == ((nt.BLOCK + 9, 8), (nt.BLOCK + 9, 8)), both(tied)
low = torch.full((V,), float("-inf"), dtype=torch.bfloat16)
low[V - 2] = -1e30
assert both(low)[0] == (V - 2, 8), both(low)
print("interpreted next token ok")
"""


def test_the_next_token_kernel_equals_torch_argmax_in_tritons_interpreter():
    from conftest import run_interpreted

    run_interpreted(INTERPRETED, "interpreted next token ok")


def test_the_next_token_kernel_compiles_for_sm90_with_one_release_and_no_spills():
    """The kernel compiled offline for sm_90 by this Triton (no GPU) at Llama-3.1-8B's vocabulary: one acq_rel
    arrival a program and one counter reset, its partial results loaded past L1 (.cg), no register spills."""
    pytest.importorskip("triton")
    from decodegap.kernels import offline

    programs = -(-128256 // nt.BLOCK)
    compiled = offline.compile_sm90(nt._kernel(), dict(x_ptr="*bf16", tok_ptr="*i64", pos_ptr="*i64", val_ptr="*fp32",
                                                       idx_ptr="*i32", count_ptr="*i32", V="i32"),
                                    dict(BLOCK=nt.BLOCK, PBLOCK=1 << (programs - 1).bit_length()), warps=4)
    ptx = compiled.asm["ptx"]
    assert ptx.count("atom.global.gpu.acq_rel.add") == 1 and ptx.count("atom.global") == 2
    assert "ld.global.cg" in ptx
    assert "LOCAL:0" in offline.cuobjdump(compiled, "--dump-resource-usage")


@pytest.mark.gpu
def test_the_next_token_kernel_graphed_equals_torch_argmax_on_the_gpu():
    """Llama-3.1-8B's vocabulary (128256) in bf16: the kernel captured in a CUDA graph and replayed on fresh logits
    gives torch.argmax's token and advances the position once a replay, ties included."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    logits = torch.randn(1, 1, 128256, generator=gen, device="cuda").bfloat16()
    tok, pos = torch.zeros(1, 1, dtype=torch.long, device="cuda"), torch.zeros(1, dtype=torch.long, device="cuda")
    nt.next_token_(logits, tok, pos)  # compiled outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        nt.next_token_(logits, tok, pos)
    for i in range(5):
        logits.copy_(torch.randn(1, 1, 128256, generator=gen, device="cuda").bfloat16())
        if i == 3:
            logits[0, 0, 100000] = logits[0, 0, 77] = 50.0  # a tie across programs
        graph.replay()
        torch.cuda.synchronize()
        assert int(tok) == int(logits.reshape(-1).argmax()), i
        assert int(pos) == i + 2, i


@pytest.mark.gpu
def test_the_lean_step_decodes_the_same_tokens_with_the_next_token_kernel():
    """Two layers of Llama-3.1-8B's widths in bf16: the fused step with and without the next-token kernel, fed back
    its own argmax for eight steps from the same prefill, gives the same tokens and positions."""
    from test_fused import _two_layers

    from decodegap.harness import lean

    model = _two_layers("llama-3.1-8b")
    base = ("fused", "attention", "pdl", "norm_epilogue", "early_products")
    with torch.inference_mode():
        steps = [lean.LeanStep(model, 64, 128, custom_kernels=kernels) for kernels in (base, base + ("next_token",))]
        for _ in range(8):
            for s in steps:
                s.step()
            assert torch.equal(steps[0].tok, steps[1].tok) and torch.equal(steps[0].pos, steps[1].pos)
