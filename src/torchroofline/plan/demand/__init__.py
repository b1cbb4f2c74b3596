"""Stage 3 (bound side): the *necessary* work — what the kept values need, walked backwards.

The speed of light charges what any correct implementation must do, not what the traced program
happens to touch. Starting from the kept values (the views the model returns and the parts of
inputs or buffers it overwrites), every op maps the demanded elements of its outputs to the
demanded elements of its inputs (:data:`DEMAND_RULES`), and counts FLOPs only for demanded output
elements. An op whose outputs nobody demands costs nothing (dead code). Compulsory bytes are the
demanded elements of graph inputs, read once (all views of one storage united, inputs that share
a storage counted once), plus the kept elements, written once.

Where the exact set cannot be known (data-dependent indices, views that are not index boxes) the
rules charge *less*, never more: a bound may be loose, never wrong. The *moved* work (what eager
or Inductor kernels really read and write) stays in :mod:`costs` and :mod:`fusion`.

The walk is in :mod:`.walk` (the dims data sized, which any input may leave empty, in
:mod:`.sized`); the rules, one module per family of ops, register themselves into
:data:`DEMAND_RULES` when imported here: :mod:`.reductions` (pointwise ops, reductions, softmax,
norms), :mod:`.matmul` (products, attention), :mod:`.windows` (convolution, pooling,
resampling), :mod:`.layout` (cat, pad, flip, roll, triangles, diagonals), :mod:`.linalg`
(decompositions and solves read in part), :mod:`.rearrange`
(pixel and channel shuffles, rot90, reflection and replication pads, im2col), :mod:`.recurrent`
(whole RNNs, step by step), :mod:`.selection`
(masks, losses that pick a score), :mod:`.gathers`, :mod:`.scatters` (:mod:`.numbered` the
demand found by running an op on element numbers: scatters into views), :mod:`.quantized`
(scaled fp8/fp4 matmuls), :mod:`.training` (optimizer updates, tensor by tensor),
:mod:`.collectives` (a distributed rank's collectives: all of their inputs); :mod:`.structures`
holds the structured operands and :mod:`.constants` the values known from shapes and constants.
"""

from . import (
    collectives,
    gathers,
    layout,
    linalg,
    masked,
    matmul,
    numbered,
    quantized,
    rearrange,
    recurrent,
    reductions,
    scatters,
    selection,
    training,
    windows,
)
from ._core import DEMAND_RULES, LIBRARY_DEMAND, SHORTCUT_STRUCTURES, Demand, demand_rule
from .constants import known_values
from .reductions import pointwise_demand
from .structures import MATRIX_BUILDERS, STRUCTURE_RULES
from .walk import Necessary, necessary_work

__all__ = [
    "DEMAND_RULES",
    "LIBRARY_DEMAND",
    "MATRIX_BUILDERS",
    "SHORTCUT_STRUCTURES",
    "STRUCTURE_RULES",
    "Demand",
    "collectives",
    "gathers",
    "Necessary",
    "demand_rule",
    "known_values",
    "layout",
    "linalg",
    "numbered",
    "masked",
    "matmul",
    "necessary_work",
    "pointwise_demand",
    "quantized",
    "rearrange",
    "recurrent",
    "reductions",
    "scatters",
    "selection",
    "training",
    "windows",
]
