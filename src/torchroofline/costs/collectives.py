"""Cost rules of a distributed trace's communication ops (:mod:`~torchroofline.trace.distributed`):
the collectives, their waits and FSDP2's copies into and out of its collective buffers.

A collective does no arithmetic the bound may count (NVLink SHARP and InfiniBand SHARP reduce
in the switch), and its time is the interconnect's, priced by
:mod:`~torchroofline.price.distributed`; here it is the HBM traffic its kernel moves: its
input read and its output written, as any data-movement kernel, on its own (NCCL launches
one kernel per collective). A wait only orders streams: no kernel.
"""

from __future__ import annotations

from ..trace.distributed import COLLECTIVE_KINDS
from ._core import LAYOUT_COPIES, LIBRARY_RULES, VIEWS, Category, CostRule, NoArithmetic

COLLECTIVE = NoArithmetic(
    "a collective: its time is the interconnect's (price/distributed.py); a reduction in it "
    "may run in the switch (NVLS, SHARP), so no FLOPs"
)

LIBRARY_RULES.update(
    {name: CostRule(Category.DATA_MOVEMENT, COLLECTIVE, fusible=False)
     for name in COLLECTIVE_KINDS}
)
LIBRARY_RULES["_c10d_functional.wait_tensor"] = CostRule(Category.ZERO_COPY, VIEWS,
                                                         fusible=False)
#: FSDP2's copy-in before an all-gather, copy-out after it, and the gradients' copy into the
#: reduce-scatter input (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py)
LIBRARY_RULES.update(
    {name: CostRule(Category.DATA_MOVEMENT, LAYOUT_COPIES, fusible=False)
     for name in ("fsdp.all_gather_copy_in", "fsdp.split_with_sizes_copy", "fsdp.chunk_cat")}
)
