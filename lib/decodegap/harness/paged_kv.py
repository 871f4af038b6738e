"""FlashInfer's batch decode over HF's own KV cache, read in place as a paged cache.

FlashInfer's single_decode_with_kv_cache, as the `flashinfer` row calls it, refuses Qwen-2.5-7B's group of 7 query
heads per KV head ("Unsupported group_size: 7": its CUDA-core decode kernel is compiled for groups 1, 2, 3, 4, 6
and 8, DISPATCH_GQA_GROUP_SIZE in include/flashinfer/utils.cuh). Its batch decode wrapper,
BatchDecodeWithPagedKVCacheWrapper, with `use_tensor_cores=True` runs FlashInfer's prefill (tensor-core) kernels,
which pack the group into the query tile and take any group size: that is the FlashInfer backend here
(`flashinfer_paged`), on all three models, per layer and inside the whole decode step, through the API FlashInfer's
servers call (plan once per step, run per layer).

The paged cache is HF's cache itself, no copy: HF keeps one layer's keys as [1, Hkv, L, D] (contiguous). With
`PAGE_SIZE` tokens a page, page p, token t, head h is element h*L*D + (p*PAGE_SIZE + t)*D of it, so the view
[L / PAGE_SIZE, PAGE_SIZE, Hkv, D] with strides (PAGE_SIZE*D, D, L*D, 1) is FlashInfer's NHD page layout
([max_num_pages, page_size, num_kv_heads, head_dim]); FlashInfer reads a paged cache through its strides
(csrc/batch_prefill.cu passes paged_k_cache.strides() to paged_kv_t; its tests run non-contiguous caches).
PAGE_SIZE is 1, SGLang's layout: a page table of one page per token fits any cache length (a view of pages of P
tokens needs P to divide L, which the harness's cache lengths, ctx plus every forward call, need not), and the
page table of a request of n tokens is pages 0..n-1 in order (`page_table`).

Planning: `plan(kv_len)` builds the page table on the host and hands it to the wrapper, which splits the KV
range into chunks for the SMs; `run` then launches the kernels, once per layer for one plan, as FlashInfer
intends. The wrapper is made with `use_cuda_graph=True` (fixed index buffers, a schedule padded to a fixed grid):
the same wrapper then serves an eager step and a captured one, where the plan before each replay (outside the
graph, as SGLang does) rewrites the buffers the captured kernels read.
"""

from __future__ import annotations

import math

PAGE_SIZE = 1
WORKSPACE_BYTES = 128 * 1024 * 1024  # FlashInfer's recommended float workspace for split-KV partial results
KV_LAYOUT = "NHD"


def page_table(kv_len: int, page_size: int = PAGE_SIZE) -> tuple[list[int], list[int], list[int]]:
    """FlashInfer's page table of one request whose `kv_len` tokens fill pages 0, 1, ... in order:
    (indptr [0, pages], indices [0 .. pages-1], last_page_len [tokens in the last page, 1..page_size])."""
    if kv_len < 1 or page_size < 1:
        raise ValueError(f"a page table needs kv_len >= 1 and page_size >= 1, got {kv_len} and {page_size}")
    pages = math.ceil(kv_len / page_size)
    return [0, pages], list(range(pages)), [kv_len - (pages - 1) * page_size]


def paged_view(cache, page_size: int = PAGE_SIZE):
    """HF's cache of one layer, [1, Hkv, L, D], as FlashInfer's NHD pages [L // page_size, page_size, Hkv, D]:
    a view (no copy) over the first L // page_size * page_size positions."""
    if cache.dim() != 4 or cache.shape[0] != 1:
        raise ValueError(f"expected one request's cache [1, Hkv, L, D], got {tuple(cache.shape)}")
    pages = cache.shape[2] // page_size
    return cache[0, :, :pages * page_size].unflatten(1, (pages, page_size)).permute(1, 2, 0, 3)


class PagedDecode:
    """One BatchDecodeWithPagedKVCacheWrapper over HF's cache of one request, for up to `capacity` tokens.
    `wrapper_cls` is FlashInfer's class (attention.flashinfer_wrapper_class; a CPU test passes a stand-in with the
    same plan/run calls)."""

    def __init__(self, num_qo_heads: int, num_kv_heads: int, head_dim: int, capacity: int, device, dtype,
                 scale: float | None, wrapper_cls, page_size: int = PAGE_SIZE):
        import torch

        cls = wrapper_cls
        self.heads, self.dtype, self.device, self.page_size = (num_qo_heads, num_kv_heads, head_dim), dtype, \
            torch.device(device), page_size
        self.capacity, self.scale, self.kv_len = capacity, scale, 0
        pages = math.ceil(capacity / page_size)
        # the page indices live on the device once: a plan copies a slice of them device to device
        self._indices = torch.arange(pages, dtype=torch.int32, device=device)
        self.wrapper = cls(torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device), KV_LAYOUT,
                           use_cuda_graph=True, use_tensor_cores=True,
                           paged_kv_indptr_buffer=torch.zeros(2, dtype=torch.int32, device=device),
                           paged_kv_indices_buffer=torch.zeros(pages, dtype=torch.int32, device=device),
                           paged_kv_last_page_len_buffer=torch.zeros(1, dtype=torch.int32, device=device))

    def plan(self, kv_len: int) -> None:
        """Plan the attention of one query token over the first `kv_len` tokens (host work, outside any graph)."""
        import torch

        if kv_len > self.capacity:
            raise ValueError(f"kv_len {kv_len} is past this page table's capacity {self.capacity}")
        indptr, _, last = page_table(kv_len, self.page_size)
        q_heads, kv_heads, head_dim = self.heads
        self.wrapper.plan(torch.tensor(indptr, dtype=torch.int32), self._indices[:indptr[1]],
                          torch.tensor(last, dtype=torch.int32), q_heads, kv_heads, head_dim, self.page_size,
                          q_data_type=self.dtype, kv_data_type=self.dtype, sm_scale=self.scale)
        self.kv_len = kv_len

    def run(self, query, key, value):
        """One decode query [1, Hq, 1, D] against HF's cache [1, Hkv, L, D] as planned: output [1, Hq, D]."""
        return self.wrapper.run(query[:, :, 0, :], (paged_view(key, self.page_size), paged_view(value, self.page_size)))
