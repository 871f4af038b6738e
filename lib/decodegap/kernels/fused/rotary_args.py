"""The arguments of the qkv product's rotary epilogue (their check and the kernels' form of them), shared by the bf16 fused GEMV
(decodegap.kernels.fused.launch) and the fused int4 product (decodegap.kernels.fused_int4.launch): both take
`rotary` = (cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads) and refuse the same misuses."""

from __future__ import annotations


def check_rotary(N: int, rotary, other_epilogue: bool) -> None:
    """Refuse a rotary epilogue the kernels cannot run: a weight that is not the model's q, k and v heads (N rows),
    caches or tables of another shape, or a second epilogue."""
    cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads = rotary
    _, Hkv, _, D = k_cache.shape
    if other_epilogue:
        raise ValueError("rotary is the qkv product's epilogue: it takes no gate_up, silu_x, residual or out_norm")
    if (Hkv != n_kv_heads or N != (n_heads + 2 * n_kv_heads) * D or D & (D - 1) or D < 2
            or v_cache.shape != k_cache.shape or not (k_cache.is_contiguous() and v_cache.is_contiguous())
            or cos_table.shape[-1] != D or sin_table.shape != cos_table.shape):
        raise ValueError(f"rotary needs the weight's rows to be (H + 2 Hkv) x head_dim, contiguous caches "
                         f"[1, Hkv, L, head_dim] of one shape, cos and sin tables [L, head_dim] and a power-of-two "
                         f"head_dim; got {N} rows, H {n_heads}, Hkv {n_kv_heads}, caches {tuple(k_cache.shape)} and "
                         f"{tuple(v_cache.shape)}, tables {tuple(cos_table.shape)}")


def kernel_args(rotary, stand_in) -> dict:
    """The rotary arguments of the kernels (fused_gemv_kernel's and fused_int4_gemv_kernel's): the tables, position,
    caches and head counts of `rotary` with ROTARY set, or `stand_in` (a tensor the call reads anyway) in their
    place and ROTARY unset when there is no rotary epilogue."""
    if rotary is None:
        return dict(cos_ptr=stand_in, sin_ptr=stand_in, pos_ptr=stand_in, kc_ptr=stand_in, vc_ptr=stand_in, L=0,
                    ROTARY=False, HEAD_D=2, NQ=1, NKV=1)
    cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads = rotary
    return dict(cos_ptr=cos_table, sin_ptr=sin_table, pos_ptr=start_pos, kc_ptr=k_cache, vc_ptr=v_cache,
                L=k_cache.shape[2], ROTARY=True, HEAD_D=k_cache.shape[-1], NQ=n_heads, NKV=n_kv_heads)


def with_own_caches(rotary):
    """`rotary` with copies of its two caches: what a reference writes into beside the kernel it is checked against."""
    return rotary[:3] + (rotary[3].clone(), rotary[4].clone()) + rotary[5:]


def rotary_rows(rotary) -> tuple:
    """(k rows, v rows) a rotary product wrote: its two caches at the token's position (`rotary`'s start_pos), every kv
    head ([Hkv, head_dim] each): what a check compares beside q, the kernel's caches against its reference's."""
    pos = int(rotary[2].reshape(-1)[0])
    return rotary[3][0, :, pos], rotary[4][0, :, pos]


def clear_rows(rotary) -> None:
    """Zero the k and v rows at the token's position (rotary_rows) of `rotary`'s caches: before a check's call, so that
    rows an earlier call wrote into the same caches cannot pass for this call's."""
    for rows in rotary_rows(rotary):
        rows.zero_()


def random_rotary(config, ctx: int, device, gen):
    """`rotary` operands of model `config`'s heads (an HF config dict) for a bench or a test: random bf16 cos and sin
    tables and zeroed caches of ctx + 8 positions, the token at ctx (start_pos a [1] device tensor)."""
    import torch

    H, Hkv = config["num_attention_heads"], config["num_key_value_heads"]
    D, L = config["hidden_size"] // H, ctx + 8
    cos, sin = (torch.randn(L, D, generator=gen, device=device).bfloat16() for _ in range(2))
    caches = [torch.zeros(1, Hkv, L, D, dtype=torch.bfloat16, device=device) for _ in range(2)]
    return (cos, sin, torch.tensor([ctx], device=device), *caches, H, Hkv)
