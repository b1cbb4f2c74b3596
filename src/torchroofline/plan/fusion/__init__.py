"""Stage 3: group ops into kernels — Inductor-style fusion, eager (one kernel per op) and the
compulsory traffic of perfect fusion.

The fused plan follows what ``torch.compile`` (Inductor, CUDA backend, default settings) does
with the same graph, in its order:

1. **FX passes**: common-subexpression elimination (two identical calls on the same input values
   are computed once), no-op removal (a clone, a one-input ``cat``, ``pow(x, 1)``… is its input:
   ``post_grad.remove_noop_ops``), dead-code elimination and ``addmm`` unfusing (the bias add of
   an ``addmm`` whose users are all pointwise becomes a pointwise op those users absorb:
   ``post_grad.unfuse_bias_add_to_pointwise``).
2. **Lowering**: a convolution's bias becomes a pointwise add (``kernel/conv.py``); a matmul over
   an inner dim of 1 and a reduction over fewer than 8 elements become pointwise; ``cat``
   becomes either a pointwise kernel (``pointwise_cat``) or no kernel at all (``ConcatKernel``:
   each producer writes straight into its slice of the output); softmaxes and norms become
   statistics plus a pointwise normalize; pointwise ops are *inlined* into the nodes that read
   them unless Inductor realizes them into a buffer (graph outputs, inputs of extern kernels,
   mutated buffers, values with many reads).
3. **Scheduling**: the realized values define scheduler nodes — ``nop`` (views, no kernel),
   ``extern`` (library calls: cuBLAS, cuDNN, attention, scatter and ops without a rule), and
   ``pointwise`` / ``reduction`` nodes with a loop of ``(numel, rnumel)`` elements. Pairs of nodes
   that share a buffer are fusion candidates, tried best score first; :data:`FUSION_RULES` are
   named functions, each returning why a pair may not fuse (``None``: allowed). Rounds repeat
   until nothing fuses (``Scheduler.fuse_nodes``: at most 10).

Only values that cross a kernel's boundary cost traffic: a kernel reads each value produced
outside it once (the largest view of it that its ops touch) and writes each value it produces
that another kernel reads or that the model keeps (returns, or leaves in a mutated input or
buffer) — a kept storage in full, whatever part of it the kernel's last write covers.

"""

from .kernels import Kernel, Plan, Refusal, eager_plan, fused_plan, uninitialised_values
from .scheduler import FUSION_RULES

__all__ = [
    "FUSION_RULES",
    "Kernel",
    "Plan",
    "Refusal",
    "eager_plan",
    "fused_plan",
    "uninitialised_values",
]
