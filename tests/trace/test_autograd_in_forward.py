"""A forward that takes a gradient itself (a gradient penalty, a physics-informed loss:
``torch.autograd.grad`` under ``torch.enable_grad()``) is traced, never a process crash (issue 28,
hangs and crashes). On fake CUDA tensors a CPU-only build aborts the process when autograd
records the graph's first node (a C++ error thrown where it cannot be caught); the trace stops
before that call and runs again on fake CPU tensors (:class:`~torchroofline.trace.modes.
FakeCudaAutogradGuard`). Each analysis runs in a child process, so an abort fails the test
instead of killing pytest."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# a linear layer on (8, 16) inputs whose forward returns y² summed plus the squared norm of its
# own gradient with respect to x (create_graph: the gradient is differentiated again in train)
_CHILD = """
import json, sys
import torch, torch.nn as nn
import torchroofline

class GradientPenalty(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x):
        with torch.enable_grad():
            x = x if x.requires_grad else x.requires_grad_(True)
            energy = self.linear(x).pow(2).sum()
            (force,) = torch.autograd.grad(energy, x, create_graph=True)
        return energy + force.pow(2).sum()

torch.manual_seed(0)
figures = {}
for device in ("meta", "cpu"):
    for mode in ("inference", "train"):
        result = torchroofline.analyze(GradientPenalty(), torch.randn(8, 16, device=device),
                                       mode=mode)
        figures[f"{device} {mode}"] = {"tensor_flops": result.tensor_flops,
                                       "notes": list(result.notes)}
print(json.dumps(figures))
"""


@pytest.fixture(scope="module")
def figures() -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                          check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_a_gradient_inside_the_forward_is_traced_with_its_matmuls(figures, device):
    # the forward's addmm (8·16 @ 16·16) and the gradient's mm (8·16 @ 16·16, dE/dy @ W):
    # 2 · 2·8·16·16 tensor FLOPs, on meta and on real inputs alike
    assert figures[f"{device} inference"]["tensor_flops"] == 2 * 2 * 8 * 16 * 16


def test_the_trace_says_it_ran_on_fake_cpu_tensors_and_why(figures):
    (note,) = [n for n in figures["meta inference"]["notes"] if "fake CPU" in n]
    assert "without a CUDA device (linear in 'linear')" in note


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_a_training_step_through_a_gradient_inside_the_forward(figures, device):
    # the step differentiates the forward's gradient again (create_graph): at least the
    # forward's two matmuls plus one backward matmul per weight and per input gradient
    assert figures[f"{device} train"]["tensor_flops"] > figures[f"{device} inference"][
        "tensor_flops"]
