"""kernels/device_buffers on a CPU: a device's buffers are made once and the same objects returned after, another device
gets its own; and the three workspaces made through it keep their shapes, dtypes and zeroed counters."""

from __future__ import annotations

import torch

from decodegap.kernels import next_token, step
from decodegap.kernels.device_buffers import DeviceBuffers
from decodegap.kernels.fused import workspace


def test_a_device_gets_the_same_buffers_at_every_call_and_another_device_fresh_ones():
    made = []

    def make(device):
        """Two buffers of `device`, counted as they are made."""
        made.append(str(device))
        return torch.zeros(8, device=device), torch.empty(4, dtype=torch.int32, device=device)

    buffers = DeviceBuffers(make)
    first = buffers("cpu")
    assert buffers("cpu") is first and buffers(torch.device("cpu")) is first
    assert all(a is b for a, b in zip(first, buffers("cpu")))  # the tensors themselves, not copies
    other = buffers("meta")
    assert other is not first and other[0].device.type == "meta" and buffers("meta") is other
    assert made == ["cpu", "meta"]
    assert DeviceBuffers(make)("cpu") is not first  # another cache: buffers of its own
    assert made == ["cpu", "meta", "cpu"]


def test_the_three_workspaces_keep_their_shapes_dtypes_and_zeroed_counters_and_stay_the_same_objects():
    counters = step.merge_counters("cpu")
    assert counters is step.merge_counters(torch.device("cpu")) and counters is not step.merge_counters("meta")
    assert counters.shape == (step.MERGE_COUNTERS,) and counters.dtype == torch.int32 and counters.abs().sum() == 0
    partials, counts = workspace.workspace("cpu")
    assert workspace.workspace("cpu")[0] is partials and workspace.workspace("cpu")[1] is counts
    assert partials.shape == (workspace.WORKSPACE_FLOATS,) and partials.dtype == torch.float32
    assert counts.shape == (workspace.WORKSPACE_ROW_BLOCKS,) and counts.dtype == torch.int32 and counts.abs().sum() == 0
    assert workspace.workspace("meta")[0] is not partials
    vals, idxs, count = next_token._workspace("cpu")
    assert all(a is b for a, b in zip((vals, idxs, count), next_token._workspace("cpu")))
    assert vals.shape == idxs.shape == (next_token.MAX_PROGRAMS,) and (vals.dtype, idxs.dtype) == (torch.float32,
                                                                                                  torch.int32)
    assert count.shape == (1,) and count.dtype == torch.int32 and count.item() == 0
    assert next_token._workspace("meta")[2] is not count


def test_a_bare_cuda_names_the_current_device_so_a_check_through_it_reads_the_kernels_buffers(monkeypatch):
    """The kernels ask for their tensors' device ("cuda:1" here, the current one); a test that asks for "cuda" must get
    the same buffers, not a never-used set of its own. No GPU is needed: `make` allocates nothing."""
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    made = []
    buffers = DeviceBuffers(lambda device: made.append(str(device)) or object())
    assert buffers("cuda") is buffers("cuda:1") is buffers(torch.device("cuda", 1))
    assert buffers("cuda:0") is not buffers("cuda")
    assert made == ["cuda:1", "cuda:0"]
