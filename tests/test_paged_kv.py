"""FlashInfer's page table of one request and HF's cache read as FlashInfer's NHD pages (decodegap.harness.paged_kv), on a
CPU: by hand, and against the cache they stand for."""

from __future__ import annotations

import pytest
import torch

from decodegap.harness import paged_kv


def test_page_table_by_hand():
    assert paged_kv.page_table(10, 4) == ([0, 3], [0, 1, 2], [2])  # pages of 4: 4 + 4 + 2 tokens
    assert paged_kv.page_table(8, 4) == ([0, 2], [0, 1], [4])  # a full last page holds page_size, not 0
    assert paged_kv.page_table(5, 1) == ([0, 5], [0, 1, 2, 3, 4], [1])  # one token a page
    assert paged_kv.page_table(1, 16) == ([0, 1], [0], [1])
    with pytest.raises(ValueError, match="kv_len >= 1"):
        paged_kv.page_table(0, 1)


@pytest.mark.parametrize("page_size", [1, 4])
def test_paged_view_is_hf_cache_in_flashinfer_nhd_pages_without_a_copy(page_size):
    cache = torch.arange(1 * 2 * 8 * 3, dtype=torch.float32).reshape(1, 2, 8, 3)  # [1, Hkv=2, L=8, D=3]
    pages = paged_kv.paged_view(cache, page_size)
    assert pages.shape == (8 // page_size, page_size, 2, 3)
    assert pages.stride() == (page_size * 3, 3, 8 * 3, 1) and pages.data_ptr() == cache.data_ptr()
    for p, t, h in [(0, 0, 1), (1, page_size - 1, 0), (8 // page_size - 1, 0, 1)]:
        assert torch.equal(pages[p, t, h], cache[0, h, p * page_size + t])
    _, indices, last = paged_kv.page_table(7, page_size)  # the table's tokens, gathered, are the first 7 positions
    assert torch.equal(pages[indices].flatten(0, 1)[:(len(indices) - 1) * page_size + last[0]].transpose(0, 1),
                       cache[0, :, :7])
