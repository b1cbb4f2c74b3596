"""Which aten ops the cost rules cover, and which are priced as bytes alone (README and
docs/bytes_only_ops.md show both)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from ..trace.aten_ops import is_missing, missing_ops
from ..trace.refs import base_name
from ._core import (
    _RULES,
    NO_RULE,
    Category,
    NoArithmetic,
    _with_in_place,
)

#: aten ops a dense forward model on a GPU does not reach: backward and optimiser kernels,
#: sparse, quantized and nested layouts, other backends' private variants, internal helpers.
_NOT_MET_IN_FORWARD = re.compile(
    r"backward|^_?foreach|^_fused_(adam|sgd|adagrad)|sparse|quantiz|^q_|^_?fake_quant|mkldnn|"
    r"miopen|cudnn|mps|vulkan|xnnpack|onednn|fbgemm|nnpack|nested|jagged|padded|coo|csr|csc|"
    r"bsr|bsc|coalesce|_nnz|dense_dim|^_?dim[IV]$|^(values|indices|ccol_indices|crow_indices)|"
    r"int4pack|_dyn_quant|^_(assert|print|test|foobar|validate|has_|is_|make_|sym|fw_primal|"
    r"unpack_dual|amp_|cufft|efficientzerotensor|pin|to_cpu|copy_from|functional|propagate|"
    r"lazy_clone|local_scalar|philox|triton|fused_sdp_choice|new_zeros_with)|^__|"
    r"^sym_constrain|^record_stream|^is_|^qscheme|^from_file|_functional$|_copy$|indices$|"
    r"values$|int_repr|obs_fq|cslt|^_?sp(diags|solve|addmm)$|^hspmm$|"
    r"^(allclose|equal|is_same_size|is_set_to|hash_tensor)$|_cpu_fallback|^slow_conv"
)


@dataclass(frozen=True)
class RuleCoverage:
    """Which aten ops the cost rules cover (README's figures come from :func:`rule_coverage`)."""

    registered: int  #: aten op names with a registered rule
    tagged_pointwise: int  #: further aten op names PyTorch tags pointwise (the fallback rule)
    unsupported: tuple[str, ...]  #: ops a forward model may meet that have no rule
    missing: tuple[str, ...]  #: ops the rules name that the installed PyTorch lacks

    @property
    def total(self) -> int:
        return self.registered + self.tagged_pointwise


def rule_coverage() -> RuleCoverage:
    """Count the aten op names (in-place and out-of-place share one) with a cost rule, and list
    those without one that a traced forward model can meet: an overload that is
    CompositeImplicitAutograd decomposes before the trace sees it, so it never needs a rule, and
    ``out=`` overloads are left out (models call the functional spelling)."""
    registered, tagged, traceable = set(), set(), set()
    for qualified in torch._C._dispatch_get_all_op_names():
        namespace, _, name = qualified.partition("::")
        packet_name, _, overload_name = name.partition(".")
        packet = getattr(torch.ops.aten, packet_name, None) if namespace == "aten" else None
        overload = getattr(packet, overload_name or "default", None)
        if overload is None:
            continue
        base = base_name(overload)
        if overload in _RULES or packet in _RULES:
            registered.add(base)
        elif torch.Tag.pointwise in overload.tags:
            tagged.add(base)
        elif (
            not overload_name.endswith("out")  # an out= spelling of an op with a rule elsewhere
            and not torch._C._dispatch_has_kernel_for_dispatch_key(
                qualified, "CompositeImplicitAutograd"
            )
            and not _NOT_MET_IN_FORWARD.search(base)
        ):
            traceable.add(base)
    return RuleCoverage(
        len(registered), len(tagged), tuple(sorted(traceable - tagged)), missing_ops()
    )


def bytes_only_ops() -> dict[str, list[str]]:
    """Why an op is priced as bytes alone → the ops so priced (docs/bytes_only_ops.md): those
    whose rule is a :class:`NoArithmetic` (in-place twins left out), and those a forward model
    may meet with no rule (:func:`rule_coverage`), under :data:`NO_RULE`'s reason, last; the
    others by their rules' category, then reason."""
    twins = {twin for key in _RULES for twin in _with_in_place(key)[1:]}
    by_reason: dict[str, list[str]] = {}
    place: dict[str, int] = {}
    for key, rule in _RULES.items():
        if isinstance(rule.flops, NoArithmetic) and key not in twins and not is_missing(key):
            reason = rule.flops.reason
            by_reason.setdefault(reason, []).append(str(key))
            place[reason] = min(place.get(reason, len(Category)), list(Category).index(
                rule.category))
    found = {reason: sorted(by_reason[reason])
             for reason in sorted(by_reason, key=lambda reason: (place[reason], reason))}
    return {**found, NO_RULE.reason: [f"aten.{name}" for name in rule_coverage().unsupported]}
