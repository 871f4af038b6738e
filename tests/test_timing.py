"""timing: the one event-timing helper, on a CPU (perf_counter) by hand; its CUDA paths on the GPU machine."""

import time

import pytest
import torch

from decodegap import timing


def test_each_call_is_timed_after_its_before_hook_and_its_output_kept():
    calls, hooks, kept = [], [], []

    def fn():
        time.sleep(0.005)
        calls.append(1)
        return torch.full((2,), float(len(calls)))

    def before():
        hooks.append(len(calls))  # runs ahead of each call, outside its timing
        time.sleep(0.02)

    ms = timing.event_times_ms(fn, 3, cuda=False, before=before, keep=kept)
    assert len(ms) == 3 and all(5.0 <= t < 20.0 for t in ms)  # the 5 ms call, not the 20 ms hook
    assert hooks == [0, 1, 2] and [k.tolist() for k in kept] == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]


@pytest.mark.gpu
def test_a_graph_of_n_copies_replays_in_about_n_times_one_copy():
    src = torch.randn(1 << 24, device="cuda")
    dst = torch.empty_like(src)

    def copies(n):
        def run():
            for _ in range(n):
                dst.copy_(src)
        return run

    one = min(timing.graph_replay_ms(copies(1), 5))
    ten = min(timing.graph_replay_ms(copies(10), 5))
    assert 5 * one < ten < 20 * one
    assert torch.equal(dst, src)
