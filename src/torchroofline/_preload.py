"""Imported once by the batch forkserver, so every worker forks with what its first problem
would otherwise pay, once per worker: torch and the analysis modules; the imports the first
fake-tensor dispatch makes (sympy, through ``torch.fx.experimental.symbolic_shapes``: about
1 s); and the first call of the ops most problems use (:func:`_warm_up_model`): the
decompositions and meta kernels torch runs, the registries our stages fill, on their first call
in a process. The workers compile nothing: Dynamo stays a placeholder
(``_startup.install_dynamo_placeholder``)."""

import contextlib
import gc

import torch
from torch import nn

from ._startup import install_dynamo_placeholder, let_triton_in
from .api import analyze
from .suites import kernelbench  # noqa: F401 — loads the analysis modules


def _warm_up_model() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A tiny model through the layer kinds most KernelBench problems use (convolution,
    training batch norm, pooling, linear, layer norm, activations, softmax)."""
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(36, 8), nn.LayerNorm(8), nn.GELU(), nn.Softmax(dim=-1),
    )
    return model, (torch.randn(2, 3, 8, 8),)


install_dynamo_placeholder()
if torch.distributed.is_available():
    # what the first op of most problems would import (~0.3 s): a decomposition's dtype cast
    # on fake CUDA tensors, or a view past one, loads DTensor's op registrations; the warm-up
    # below no longer meets one (addmm's layout rule skips its decomposition)
    import torch.distributed.tensor  # noqa: F401
# a warm-up that fails leaves the workers to pay first calls themselves; it must not stop the
# batch (the problems it would have sped up report their own errors)
with contextlib.suppress(Exception):
    analyze(*_warm_up_model())
# collected here, once: else each worker's first analysis would run the full collection the
# warm-up left due (trace.collector), over every object the imports made
gc.collect()
# held back while the forkserver imported (_startup.started_as_the_batch_forkserver): a problem
# that imports it gets it
let_triton_in()
