"""Device-event timing, written once: every GPU time in the package (a decode step, a copy, an attention call
replayed from a graph, an int4 product in bench/int4_gemv.py) is taken by these two functions.

  event_times_ms   each call between two CUDA events, queued back to back with no host sync between calls (a
                   host-bound call shows its host time), one sync at the end; perf_counter around each call on a CPU
  graph_replay_ms  the calls captured once in a CUDA graph (after a warm-up on a side stream, as torch's graph
                   capture requires), each replay between two CUDA events
"""

from __future__ import annotations

import time
from typing import Callable


def event_times_ms(fn: Callable[[], object], n: int, cuda: bool, before: Callable[[], object] | None = None,
                   keep: list | None = None) -> list[float]:
    """Milliseconds of each of `n` calls of `fn`. `before` runs ahead of each call, outside its events (e.g. an L2
    flush); `keep` collects a float clone of each call's output."""
    import torch

    if not cuda:
        times = []
        for _ in range(n):
            if before is not None:
                before()
            t0 = time.perf_counter()
            out = fn()
            times.append((time.perf_counter() - t0) * 1e3)
            if keep is not None:
                keep.append(out.detach().float().clone())
        return times
    events = []
    for _ in range(n):
        if before is not None:
            before()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn()
        end.record()
        events.append((start, end))
        if keep is not None:
            keep.append(out.detach().float().clone())
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in events]


def graph_replay_ms(capture: Callable[[], object], replays: int, warm: Callable[[], object] | None = None) -> list[float]:
    """Milliseconds of each of `replays` replays of one CUDA graph of `capture()`'s calls. `warm` (default:
    `capture`) runs first on a side stream; one untimed replay precedes the timed ones."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        (warm or capture)()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        capture()
    graph.replay()
    torch.cuda.synchronize()
    return event_times_ms(graph.replay, replays, cuda=True)
