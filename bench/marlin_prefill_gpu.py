"""Is AutoAWQ + Marlin's prefill error a nondeterministic kernel defect? data/diagnostics/marlin_prefill_gpu.csv.

    PYTHONPATH=lib:.ext python3 bench/marlin_prefill_gpu.py      (after bench/build_marlin.sh; about a minute;
                                                                  bench/measure.sh's marlin_prefill step)

Per Llama-3.1-8B shape (q_proj 4096x4096, k_proj 4096x1024, gate_proj 4096x14336, down_proj 14336x4096) the
awq-marlin layer of the layer check (quant.build_linear, seeded as check_linear seeds it) and x [M, K] N(0, 1) in
bf16 then fp16, as the layer feeds its kernel; the reference x @ W_deq^T in float64 from the layer's own tensors.
For each M, CALLS identical calls of marlin_cuda.mul (route `kernel`) in its default configuration and, for the
multi-row M, with another max_par (its workspace sized to match) or fewer multiprocessors; at M = 1 also on the
tile shape of the multi-row configuration (thread_k 64, thread_n 256); and the layer's own forward (route
`layer`: the kernel up to 16 rows, dequantise + matmul beyond, quant_layers.AWQMarlinLinear). Each row: the
relative errors' min / median / max over the calls, whether every call gave the same bits, how many distinct
outputs, the locks left in the workspace, and where the first call's bad elements (beyond 8 fp16 roundings of
max|ref|) fall: how many, in how many 16-row blocks and 64-column groups.
If it is a race: M <= 16 repeatable near 0.003; M > 16 not repeatable, the error varying from call to call. If it
is precision: repeatable, the error the same each call.
"""

import time

import torch

from decodegap.diagnostics import Rows

from decodegap.quant import paths as quant

SHAPES = {"q_proj": (4096, 4096), "k_proj": (4096, 1024), "gate_proj": (4096, 14336), "down_proj": (14336, 4096)}
ROWS = (1, 16, 17, 64, 512, 2048, 16384)
CALLS = 10
FIELDS = ("layer", "in_features", "out_features", "rows", "route", "config", "calls", "err_min", "err_median",
          "err_max", "bitwise_repeatable", "distinct_outputs", "locks_left", "bad_elements", "bad_16row_blocks",
          "bad_64col_groups", "seconds")


def kernel_call(layer, x, max_par=8, thread_k=-1, thread_n=-1, sms=-1):
    import marlin_cuda

    N = layer.out_features
    ws = torch.zeros(N // 128 * max_par, dtype=torch.int32, device="cuda")  # as WQLinear_Marlin.post_init sizes it
    out = torch.empty(x.shape[0], N, dtype=torch.float16, device="cuda")
    marlin_cuda.mul(x, layer.qweight, out, layer.scales, ws, thread_k, thread_n, sms, max_par)
    torch.cuda.synchronize()
    return out.float(), int(ws.abs().sum())


def configs(m):
    out = [("kernel", {})]
    if m >= 512:
        out += [("kernel", dict(max_par=1)), ("kernel", dict(max_par=16)), ("kernel", dict(sms=66))]
    if m == 512:
        out += [("kernel", dict(sms=1))]
    if m == 1:
        out += [("kernel", dict(thread_k=64, thread_n=256))]
    return out + [("layer", {})]


def main() -> None:
    quant.require("awq-marlin", "cuda")
    rows = Rows("marlin_prefill_gpu", FIELDS)
    for name, (K, N) in SHAPES.items():
        layer = quant.build_linear("awq-marlin", K, N, "cuda", seed=quant.LAYERS.index(name))
        w = layer.dequantised_weight(torch.float32).double()
        gen = torch.Generator(device="cuda").manual_seed(K + N)
        for m in ROWS:
            x = torch.randn(m, K, device="cuda", generator=gen).to(torch.bfloat16)
            x16 = x.half()
            ref = (x16.double() @ w.t()).float()
            scale = float(ref.abs().max())
            for route, cfg in configs(m):
                t0 = time.time()
                label = ",".join(f"{k}={v}" for k, v in cfg.items()) or "default"
                if route == "kernel":
                    try:
                        outs = [kernel_call(layer, x16, **cfg) for _ in range(CALLS)]
                    except RuntimeError as exc:  # a configuration the kernel refuses: say so, go on
                        print(f"{name} M={m} {label}: {exc}", flush=True)
                        continue
                else:
                    with torch.no_grad():
                        outs = [(layer(x).float(), 0) for _ in range(CALLS)]
                    torch.cuda.synchronize()
                errs = sorted(float((y - ref).abs().max()) / scale for y, _ in outs)
                distinct = []
                for y, _ in outs:
                    if not any(torch.equal(y, d) for d in distinct):
                        distinct.append(y)
                bad = (outs[0][0] - ref).abs() > 8 * 2 ** -11 * scale
                r, c = bad.nonzero(as_tuple=True)
                rows.add(layer=name, in_features=K, out_features=N, rows=m, route=route,
                         config=label, calls=CALLS,
                         err_min=round(errs[0], 6), err_median=round(errs[len(errs) // 2], 6), err_max=round(errs[-1], 6),
                         bitwise_repeatable=len(distinct) == 1, distinct_outputs=len(distinct),
                         locks_left=max(l for _, l in outs), bad_elements=int(bad.sum()),
                         bad_16row_blocks=int(r.div(16, rounding_mode="floor").unique().numel()),
                         bad_64col_groups=int(c.div(64, rounding_mode="floor").unique().numel()),
                         seconds=round(time.time() - t0, 2))
                del outs, distinct, bad
            del x, x16, ref
        del layer, w
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
