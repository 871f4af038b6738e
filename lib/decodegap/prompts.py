"""The prompts of the decode harness: the random prefill tokens of a cell and the one token every teacher-forced
step feeds. A module of its own so that the lean decoder and the harness share them without importing each other."""

from __future__ import annotations


def prompt_ids(vocab_size: int, ctx: int, device, seed: int = 0):
    """`ctx` random token ids [1, ctx], the same for a given seed on any device."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (1, ctx), generator=gen).to(device)


PROMPT_SEED_STRIDE = 1_000_003
"""Seed step between the prompts of one batch: sequence b of a batch is prompt_ids drawn with seed
`seed + b * PROMPT_SEED_STRIDE` (sequence 0 is the batch-1 prompt itself; the stride keeps clear of seed + 1, the
teacher token's)."""


def batch_prompt_ids(vocab_size: int, ctx: int, device, seed: int = 0, batch: int = 1):
    """`batch` different prompts of `ctx` random tokens each, [batch, ctx]: sequence b is prompt_ids with seed
    seed + b * PROMPT_SEED_STRIDE, so that a batch's rows are not copies of one another and sequence 0 is the
    batch-1 prompt (a batch-1 cell's tensor is prompt_ids' own)."""
    import torch

    if batch == 1:
        return prompt_ids(vocab_size, ctx, device, seed)
    return torch.cat([prompt_ids(vocab_size, ctx, device, seed + b * PROMPT_SEED_STRIDE) for b in range(batch)])


def teacher_token(vocab_size: int, seed: int = 0) -> int:
    """The token every teacher-forced step feeds (run_arm with feedback=False), the same for every arm and side:
    not each side's own prefill argmax, which with random weights is a near-tie that bf16 rounding can flip
    (two sides fed different tokens give unrelated logits, ~1.4-1.6 apart by max_relative_error)."""
    import torch

    return int(torch.randint(0, vocab_size, (1,), generator=torch.Generator().manual_seed(seed + 1)))
