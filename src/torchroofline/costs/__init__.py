"""Stage 2, costs: a :class:`~torchroofline.trace.tracer.Trace` in, one :class:`OpRecord` per op
out — its category, FLOPs, which unit runs them, bytes.

One registry maps aten ops to a :class:`CostRule`, keyed as ``torch.utils.flop_counter`` keys its
formulas: by overload packet (``aten.add``: every overload and the ``out=`` spellings; the in-place
packet ``aten.add_`` shares the rule), or by single overload where overloads of one packet mean
different things (``aten.max.dim`` reduces, ``aten.max.other`` is element-wise). Registering a key
twice is an error. Adding an op is adding one entry next to its relatives. Matmul-class FLOPs
reuse ``torch.utils.flop_counter``'s registered formulas, and every formula can be called on
shapes alone (:func:`flops_on_shapes`).

FLOPs never depend on precision; a multiply-add is 2 FLOPs. Bytes do: floating-point tensors
take the target precision's element size, integer and bool tensors keep their own.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import torch
from torch._ops import OpOverload, OpOverloadPacket
from torch.utils._pytree import tree_map
from torch.utils.flop_counter import flop_registry, sdpa_flop_count

from ..errors import PrecisionError
from ..trace.aten_ops import aten, is_missing, missing_ops
from ..trace.intercept import RNN_CALLS
from ..trace.refs import TensorRef, Trace, TracedOp, base_name, largest_per_value


class Category(str, Enum):
    """What kind of kernel an op is; decides fusion and how it is drawn."""

    ZERO_COPY = "zero-copy"  #: views and metadata: no kernel, no traffic
    POINTWISE = "pointwise"
    REDUCTION = "reduction"
    COMPUTE = "compute"  #: matmul-class library kernels (cuBLAS, cuDNN, attention)
    DATA_MOVEMENT = "data-movement"  #: bytes but no FLOPs


class MatmulKind(str, Enum):
    """Matmul-class op families; the roofline stage maps each to the unit it runs on."""

    MATMUL = "matmul"
    CONV = "conv"
    ATTENTION = "attention"
    RNN = "rnn"


#: Element size in bytes of a floating-point tensor at each target precision.
FLOAT_ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}


def float_element_bytes(precision: str) -> int:
    """Bytes per floating-point element at ``precision``; raises :class:`PrecisionError`."""
    try:
        return FLOAT_ELEMENT_BYTES[precision]
    except KeyError:
        raise PrecisionError(
            f"unknown precision '{precision}'; use one of {', '.join(FLOAT_ELEMENT_BYTES)}"
        ) from None


def tensor_bytes(ref: TensorRef, float_bytes: int) -> int:
    """Bytes of one tensor access at a float element size of ``float_bytes``. A float tensor
    the model itself keeps narrower (an fp16 cast inside an fp32 model) keeps its own size: a
    bound may never charge more bytes than the program moves."""
    if not ref.is_float:
        return ref.elements * ref.itemsize
    if ref.dtype.startswith("complex"):  # two floats per element
        return ref.elements * 2 * min(float_bytes, ref.itemsize // 2)
    return ref.elements * min(float_bytes, ref.itemsize)


@dataclass(frozen=True)
class FlopCount:
    """FLOPs of one op: ``tensor`` (matmul-class, of family ``kind``) and ``vector`` (the rest)."""

    tensor: int = 0
    vector: int = 0
    kind: MatmulKind | None = None
    launches: int = 1  #: GPU kernel launches the op stands for (an RNN is many)

    def scaled(self, share: float) -> FlopCount:
        """These FLOPs times ``share`` (0..1), each count rounded down; itself when that
        changes neither count (a wholly needed op, most often)."""
        tensor, vector = int(self.tensor * share), int(self.vector * share)
        if tensor == self.tensor and vector == self.vector:
            return self
        return FlopCount(tensor, vector, self.kind, self.launches)


#: No FLOPs (one launch), shared: FLOP counts are immutable
NO_FLOPS = FlopCount()


@dataclass(frozen=True)
class Cost:
    """The work and traffic of some ops or kernels, added with ``+``: FLOPs on the matmul units
    (``tensor_flops``) and on the vector units (``vector_flops``), and HBM bytes (``bytes``)."""

    tensor_flops: int = 0
    vector_flops: int = 0
    bytes: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.tensor_flops + other.tensor_flops,
            self.vector_flops + other.vector_flops,
            self.bytes + other.bytes,
        )

    @property
    def flops(self) -> int:
        return self.tensor_flops + self.vector_flops


def total_cost(costs: Iterable[Cost]) -> Cost:
    """The sum of ``costs`` (zero when empty)."""
    return sum(costs, Cost())


FlopFormula = Callable[[TracedOp], FlopCount]


@dataclass(frozen=True)
class CostRule:
    """How one op is costed. ``fusible``: Inductor can fold it into a generated kernel.
    ``reads``: the tensors the GPU kernel really reads, where that is less than every element
    of every argument (a gather reads only the rows it picks)."""

    category: Category
    flops: FlopFormula
    fusible: bool
    reads: Callable[[TracedOp], tuple[TensorRef, ...]] | None = None


@dataclass(frozen=True)
class OpRecord:
    """One traced op with its costs. Bytes are per access; see :meth:`bytes_read`."""

    index: int
    name: str
    category: Category
    fusible: bool
    flops: FlopCount
    reads: tuple[TensorRef, ...]
    writes: tuple[TensorRef, ...]
    module_path: str
    has_rule: bool
    #: For fusion's CSE: the call's non-tensor arguments and tensor layouts (equal for calls that
    #: compute equal outputs from equal input values); ``()`` for random or mutating calls.
    call_key: tuple = ()
    #: For fusion's loop shapes: the dims of its first input a reduction folds (None: unknown).
    reduced_dims: tuple[int, ...] | None = None

    @property
    def total_flops(self) -> int:
        return self.flops.tensor + self.flops.vector

    @property
    def distinct_reads(self) -> tuple[TensorRef, ...]:
        """Each value read once: the largest view of it this op touches."""
        return largest_per_value(self.reads)

    def bytes_read(self, float_bytes: int) -> int:
        """Bytes this op reads when run as its own kernel (eager)."""
        return sum(tensor_bytes(ref, float_bytes) for ref in self.distinct_reads)

    def bytes_written(self, float_bytes: int) -> int:
        """Bytes this op writes when run as its own kernel (eager)."""
        return sum(tensor_bytes(ref, float_bytes) for ref in self.writes)

    def eager_bytes(self, float_bytes: int) -> int:
        """Eager traffic: zero for views, else every distinct input once plus every output."""
        if self.category is Category.ZERO_COPY:
            return 0
        return self.bytes_read(float_bytes) + self.bytes_written(float_bytes)


#: A registry key: an aten overload packet (all its overloads) or one overload.
OpKey = OpOverloadPacket | OpOverload

#: Library calls the trace records above the dispatcher, with ``func=None`` (by ``TracedOp.base``):
#: each is keyed by the aten packet it binds (``F.scaled_dot_product_attention`` calls
#: ``aten::scaled_dot_product_attention``, ``torch._VF.lstm`` calls ``aten::lstm``). Those are
#: CompositeImplicitAutograd, so no dispatched op ever carries the same key.
INTERCEPTED_KEYS: dict[str, OpOverloadPacket] = {
    name: getattr(aten, name) for name in ("scaled_dot_product_attention", *RNN_CALLS)
}


def _with_in_place(key: OpKey) -> tuple[OpKey, ...]:
    """``key`` and its in-place twin (``aten.add`` → ``aten.add_``, ``aten.div.Tensor_mode`` →
    ``aten.div_.Tensor_mode``): the same values written into the first argument, whose accesses
    :func:`in_place_accesses` corrects. An op the installed PyTorch lacks has no twin."""
    if is_missing(key):
        return (key,)
    if isinstance(key, OpOverload):
        twin = getattr(getattr(torch.ops.aten, key.overloadpacket.__name__ + "_", None),
                       key._overloadname, None)
    else:
        twin = getattr(torch.ops.aten, key.__name__ + "_", None)
    return (key,) if twin is None else (key, twin)


def add_rules(table: dict[OpKey, Any], ops: Iterable[OpKey], rule: Any, what: str) -> None:
    """Enter ``rule`` for every op of ``ops`` (and its in-place twin) into ``table``; a key
    entered twice is a programming error, raised at import. An op the installed PyTorch lacks
    (:func:`aten_ops.missing_ops`) is entered too: no traced op can meet it."""
    for op in ops:
        for key in _with_in_place(op):
            if key in table:
                raise ValueError(f"two {what} rules for {key}; keep one of them")
            table[key] = rule
    _OVERLOAD_ENTRIES.clear()


def op_keys(op: TracedOp) -> tuple[OpKey, ...]:
    """The keys ``op`` is looked up by, most specific first: its overload, then its packet. An
    op recorded without its overload (``func=None``: a call intercepted above the dispatcher,
    :data:`INTERCEPTED_KEYS`) is keyed by the aten packet its base name names."""
    if op.func is None:
        packet = getattr(torch.ops.aten, op.base, None)
        return () if packet is None else (packet,)
    return (op.func, op.func.overloadpacket)


#: Each table's entry per overload, found once: a program calls few overloads, each many
#: times, and an overload hashes in Python. Keyed by the table's id, holding the table so that no
#: other takes its id; emptied by :func:`add_rules`, which fills the tables on import.
_OVERLOAD_ENTRIES: dict[int, tuple[dict[OpKey, Any], dict[OpOverload, Any]]] = {}
_NOT_FOUND = object()


def lookup(table: dict[OpKey, Any], op: TracedOp) -> Any:
    """The entry of ``table`` for ``op`` under its most specific key (None if none)."""
    if op.func is None:
        return _entry(table, op)
    held = _OVERLOAD_ENTRIES.get(id(table))
    if held is None:
        held = _OVERLOAD_ENTRIES[id(table)] = (table, {})
    entry = held[1].get(op.func, _NOT_FOUND)
    if entry is _NOT_FOUND:
        entry = held[1][op.func] = _entry(table, op)
    return entry


def _entry(table: dict[OpKey, Any], op: TracedOp) -> Any:
    """:func:`lookup`, uncached."""
    for key in op_keys(op):
        if key in table:
            return table[key]
    return None


_RULES: dict[OpKey, CostRule] = {}


def register(
    ops: Iterable[OpKey],
    category: Category,
    *,
    fusible: bool,
    reads: Callable[[TracedOp], tuple[TensorRef, ...]] | None = None,
) -> Callable:
    """Decorator: register ``formula`` as the FLOP rule of every op in ``ops``."""

    def decorate(formula: FlopFormula) -> FlopFormula:
        add_rules(_RULES, ops, CostRule(category, formula, fusible, reads), "cost")
        return formula

    return decorate


def registered_ops() -> dict[str, list[str]]:
    """Category name → the ops registered under it, in-place twins left out (for METHOD.md)."""
    twins = {twin for key in _RULES for twin in _with_in_place(key)[1:]}
    by_category: dict[str, list[str]] = {}
    for key, rule in _RULES.items():
        if key not in twins:
            by_category.setdefault(rule.category.value, []).append(str(key))
    return by_category


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


def rule_for(op: TracedOp) -> CostRule | None:
    """The registered rule, else the pointwise rule for an op PyTorch tags pointwise."""
    rule = lookup(_RULES, op)
    if rule is None and op.func is not None and _tagged_pointwise(op.func):
        return _TAGGED_POINTWISE
    return rule


@functools.cache  # an overload's tags never change, and reading them is slow
def _tagged_pointwise(func: OpOverload) -> bool:
    return torch.Tag.pointwise in func.tags


def flops_on_shapes(func: OpOverload, *args: Any, **kwargs: Any) -> FlopCount:
    """The FLOPs the rule for ``func`` charges a call with these arguments, each ``torch.Size``
    standing for a float32 tensor of that shape: no model, no trace, no data (as
    ``torch.utils.flop_counter``'s formulas take shapes). ``func`` runs on meta tensors for its
    output shape. Raises ``KeyError`` for an op with no rule."""

    def tensor(leaf: Any) -> Any:
        return torch.empty(leaf, device="meta") if isinstance(leaf, torch.Size) else leaf

    args, kwargs = tree_map(tensor, (args, kwargs), is_leaf=lambda x: isinstance(x, torch.Size))
    op = TracedOp(
        name=str(func), base=base_name(func), func=func, args=args, kwargs=kwargs,
        output=func(*args, **kwargs), reads=(), writes=(), module_path="", is_view=func.is_view,
    )
    rule = rule_for(op)
    if rule is None:
        raise KeyError(f"no cost rule for {func}")
    return rule.flops(op)


# --- Helpers for formulas --------------------------------------------------------------------


def _numel(tree: Any) -> int:
    """Elements of the first tensor in ``tree`` (an op's output, usually)."""
    if isinstance(tree, torch.Tensor):
        return tree.numel()
    if isinstance(tree, (list, tuple)):
        return _numel(tree[0]) if tree else 0
    return 0


def _input_numel(op: TracedOp) -> int:
    return _numel(op.args[0]) if op.args else 0


def _no_flops(op: TracedOp) -> FlopCount:
    return NO_FLOPS


def _per_output_element(flops_per_element: int) -> FlopFormula:
    return lambda op: FlopCount(vector=flops_per_element * _numel(op.output))


def _per_input_element(flops_per_element: int) -> FlopFormula:
    return lambda op: FlopCount(vector=flops_per_element * _input_numel(op))


#: Ops that take a tensor only for its shape, dtype and device (``zeros_like(x)``,
#: ``x.new_full(...)``): their kernels never load it, so their reads leave it out.
SHAPE_ONLY_TEMPLATES = frozenset(
    {aten.zeros_like, aten.ones_like, aten.full_like, aten.empty_like, aten.rand_like,
     aten.randn_like, aten.randint_like, aten.new_zeros, aten.new_ones, aten.new_full,
     aten.new_empty, aten.new_empty_strided}
)


def _template_unread(op: TracedOp) -> tuple[TensorRef, ...]:
    """The template is the only tensor argument of these ops: nothing is read."""
    return ()


def _template_reads(key: OpKey) -> Callable[[TracedOp], tuple[TensorRef, ...]] | None:
    return _template_unread if key in SHAPE_ONLY_TEMPLATES else None


# --- Zero-copy: views, aliases, metadata, allocation without a write --------------------------

register(
    [
        aten.view, aten._unsafe_view, aten.reshape, aten.permute, aten.transpose, aten.t,
        aten.expand, aten.squeeze,
        aten.unsqueeze, aten.slice, aten.select, aten.alias, aten.detach, aten.as_strided,
        aten.unbind, aten.split,
        aten.split_with_sizes, aten.chunk, aten.unsafe_split, aten.unsafe_split_with_sizes,
        aten.narrow, aten.view_as_real, aten.view_as_complex, aten.unfold, aten.diagonal,
        aten.movedim,
        aten.lift_fresh, aten.empty, aten.empty_strided, aten._reshape_alias, aten.unflatten,
        aten.flatten,
        aten.expand_as, aten.view_as, aten.resize, aten.resize_as, aten._resize_output, aten.set,
        aten.sym_size,
        aten.sym_stride, aten.sym_numel, aten._local_scalar_dense, aten.empty_permuted, aten._conj,
        aten._neg_view,
    ],
    Category.ZERO_COPY,
    fusible=False,
)(_no_flops)
register(
    [aten.empty_like, aten.new_empty, aten.new_empty_strided],
    Category.ZERO_COPY,
    fusible=False,
    reads=_template_unread,
)(_no_flops)

# --- Pointwise: FLOPs per output element, the minimum a kernel must do ------------------------
# 1 FLOP for each basic arithmetic, comparison or transcendental instruction; composites are
# the sum of their parts. A bound needs the minimum, so nothing is counted twice.

POINTWISE_FLOPS_PER_ELEMENT: dict[OpKey, int] = {
    # casts, copies and fills move data and do no arithmetic
    aten._to_copy: 0, aten.to: 0, aten.copy: 0, aten.clone: 0, aten.contiguous: 0, aten.fill: 0,
    aten.zero: 0, aten.zeros: 0, aten.ones: 0, aten.full: 0, aten.zeros_like: 0,
    aten.ones_like: 0, aten.full_like: 0, aten.new_zeros: 0, aten.new_ones: 0, aten.new_full: 0,
    aten.scalar_tensor: 0, aten.arange: 0,
    aten.masked_fill: 0, aten.where: 0, aten.tril: 0, aten.triu: 0, aten.lift: 0,
    # generators, like arange
    aten.triu_indices: 0, aten.tril_indices: 0, aten.eye: 0, aten.range: 0,
    aten.fft_fftfreq: 0, aten.fft_rfftfreq: 0, aten.complex: 0,
    aten._add_relu: 2,
    aten.linalg_cross: 3,  # each component a·b − c·d
    aten.polar: 4,  # r·cos θ, r·sin θ per complex output
    aten.linspace: 2,  # start + i·step: one multiply-add
    aten.logspace: 3,  # base ** (start + i·step): a multiply-add and a power
    # one instruction each
    aten.add: 1, aten.sub: 1, aten.rsub: 1, aten.mul: 1, aten.div: 1, aten.neg: 1, aten.abs: 1,
    aten.relu: 1,
    aten.exp: 1, aten.exp2: 1, aten.log: 1, aten.log2: 1, aten.log10: 1, aten.sqrt: 1,
    aten.rsqrt: 1, aten.tanh: 1,
    aten.erf: 1, aten.erfc: 1, aten.sin: 1, aten.cos: 1, aten.tan: 1, aten.reciprocal: 1,
    aten.pow: 1, aten.square: 1,
    aten.sign: 1, aten.floor: 1, aten.ceil: 1, aten.round: 1,
    aten.round.decimals: 3,  # x·10^d, round, ÷10^d
    aten.div.Tensor_mode: 2, aten.div.Scalar_mode: 2,  # divide, then floor or trunc
    aten.trunc: 1, aten.frac: 1, aten.maximum: 1,
    aten.minimum: 1, aten.clamp: 1, aten.clamp_min: 1, aten.clamp_max: 1, aten.remainder: 1,
    aten.fmod: 1,
    aten.eq: 1, aten.ne: 1, aten.lt: 1, aten.le: 1, aten.gt: 1, aten.ge: 1, aten.logical_not: 1,
    aten.logical_and: 1,
    aten.logical_or: 1, aten.bitwise_and: 1, aten.bitwise_or: 1, aten.bitwise_not: 1, aten.isnan: 1,
    aten.threshold: 1, aten.hardtanh: 1, aten.relu6: 1, aten.expm1: 1, aten.log1p: 1, aten.atan: 1,
    aten.floor_divide: 1,
    # composites: sum of parts
    aten.sigmoid: 3,  # exp + add + div
    aten.silu: 4,  # x · sigmoid(x)
    aten.hardsigmoid: 3,  # add, div, clamp
    aten.hardswish: 4,  # hardsigmoid + mul
    aten.softplus: 3,  # exp, add, log
    aten.mish: 6,  # softplus + tanh + mul
    aten.elu: 3,  # compare, exp, sub·mul (one select)
    aten.selu: 4,
    aten.celu: 3,
    aten.leaky_relu: 2,  # compare + mul
    aten.prelu: 2,
    aten._prelu_kernel: 2,
    aten.gelu: 4,  # erf form: x · 0.5 · (1 + erf(x/√2)) → mul, erf, add, mul (constants folded)
    aten.lerp: 2,
    aten.addcmul: 2,
    aten.addcdiv: 2,
    aten.logit: 3,
    aten.hardshrink: 2,
    aten.softshrink: 2,
    aten.log_sigmoid_forward: 4,
    aten.glu: 4,  # sigmoid of one half times the other, per output element
    aten.xlogy: 2,
    aten.sigmoid_backward: 2,
    # random number generation (Philox): counted as one FLOP per element, the minimal figure
    aten.rand: 1, aten.randn: 1, aten.rand_like: 1, aten.randn_like: 1, aten.normal: 1,
    aten.uniform: 1,
    aten.bernoulli: 1, aten.randint: 1, aten.randint_like: 1, aten.native_dropout: 2,
    aten.dropout: 2,
    aten.exponential: 1, aten.random: 1, aten.cauchy: 1, aten.log_normal: 1, aten.geometric: 1,
    aten._fused_dropout: 2, aten._masked_scale: 1,
}

for _name, _flops in POINTWISE_FLOPS_PER_ELEMENT.items():
    register([_name], Category.POINTWISE, fusible=True, reads=_template_reads(_name))(
        _per_output_element(_flops)
    )

#: Fallback for ops that PyTorch itself tags ``pointwise`` but that have no entry above.
_TAGGED_POINTWISE = CostRule(Category.POINTWISE, _per_output_element(1), fusible=True)

# --- Reductions: 1 FLOP per input element plus documented extras ------------------------------

REDUCTION_FLOPS_PER_INPUT_ELEMENT: dict[OpKey, int] = {
    aten.sum: 1, aten.prod: 1, aten.amax: 1, aten.amin: 1, aten.argmax: 1, aten.argmin: 1,
    # by overload: max.other/min.other are element-wise (the pointwise tag's rule covers them)
    aten.max.default: 1, aten.max.dim: 1, aten.min.default: 1, aten.min.dim: 1,
    aten.nansum: 2,  # isnan compare, accumulate (the select of 0 is no arithmetic)
    aten.count_nonzero: 2,  # compare, accumulate
    aten.aminmax: 2, aten._aminmax: 2,  # two compares
    aten.any: 1, aten.all: 1, aten.cumsum: 1, aten.cumprod: 1, aten.logcumsumexp: 3, aten.cummax: 1,
    aten.cummin: 1,
    aten._logcumsumexp: 3, aten._cummax_helper: 1, aten._cummin_helper: 1,
    aten.dist: 3,  # sub, abs (or square), accumulate
    aten._weight_norm_interface: 3,  # square and accumulate for ‖v‖, then scale v by g/‖v‖
    aten.multi_margin_loss: 4, aten.multilabel_margin_loss_forward: 4,  # sub, add, max, accumulate
    aten.native_norm: 2,
    aten.mean: 1,  # sum, then one divide per output (folded into the element count: negligible)
    aten.var: 3, aten.std: 3, aten.var_mean: 3, aten.std_mean: 3,  # sub mean, square, accumulate
    aten._softmax: 5, aten.softmax: 5, aten._safe_softmax: 5,  # max, sub, exp, sum, div
    aten._masked_softmax: 5,
    aten._log_softmax: 5, aten.log_softmax: 5,  # max, sub, exp, sum, sub (log once per row)
    aten.logsumexp: 4,  # max, sub, exp, sum
    aten.linalg_vector_norm: 2, aten.norm: 2,  # square (or abs), accumulate
    aten.native_layer_norm: 8,  # mean 1 + var 3 + normalise 2 + affine 2
    aten.native_group_norm: 8,
    # eval: scale and shift only (see batch_norm_flops)
    aten._native_batch_norm_legit_no_training: 4,
    # square, sum, rsqrt·mul, affine
    aten.instance_norm: 8, aten._fused_rms_norm: 5, aten.rms_norm: 5,
    aten.mse_loss: 3, aten.l1_loss: 3, aten.smooth_l1_loss: 4, aten.huber_loss: 4,
    aten.soft_margin_loss: 4,
    aten.binary_cross_entropy: 6, aten.binary_cross_entropy_with_logits: 8, aten.kl_div: 3,
    aten.cosine_similarity: 6,
    aten.triplet_margin_loss: 8, aten.margin_ranking_loss: 3, aten.hinge_embedding_loss: 3,
    aten.mode: 1, aten.median: 1, aten.nanmedian: 1, aten.sort: 1, aten.topk: 1, aten.kthvalue: 1,
    aten._adaptive_avg_pool2d: 1, aten._adaptive_avg_pool3d: 1, aten.adaptive_avg_pool1d: 1,
    aten.adaptive_avg_pool2d: 1, aten.adaptive_avg_pool3d: 1,
    aten.adaptive_max_pool2d: 1, aten.adaptive_max_pool3d: 1, aten.adaptive_max_pool1d: 1,
}

for _name, _flops in REDUCTION_FLOPS_PER_INPUT_ELEMENT.items():
    register([_name], Category.REDUCTION, fusible=True)(_per_input_element(_flops))


def _picked_by_target(op: TracedOp) -> tuple[TensorRef, ...]:
    """NLL loss loads one input element per target (``input[i, target[i]]``), not all N·C."""
    scores, target, *rest = op.reads
    return (replace(scores, elements=min(scores.elements, target.elements)), target, *rest)


@register(
    [aten.nll_loss_forward, aten.nll_loss, aten.nll_loss2d_forward],
    Category.REDUCTION,
    fusible=True,
    reads=_picked_by_target,
)
def nll_loss_flops(op: TracedOp) -> FlopCount:
    """One negate-and-accumulate per target element."""
    return FlopCount(vector=_numel(op.args[1]))


def _diagonal_reads(op: TracedOp) -> tuple[TensorRef, ...]:
    """``trace`` loads the diagonal of its matrix, min(m, n) elements."""
    (matrix,) = op.reads
    return (replace(matrix, elements=min(op.args[0].shape)),)


@register([aten.trace], Category.REDUCTION, fusible=True, reads=_diagonal_reads)
def trace_flops(op: TracedOp) -> FlopCount:
    """One add per diagonal element."""
    return FlopCount(vector=min(op.args[0].shape))


@register(
    [ aten.native_batch_norm, aten._native_batch_norm_legit,
     aten._native_batch_norm_legit_functional,
     aten.cudnn_batch_norm, aten.miopen_batch_norm],
    Category.REDUCTION,
    fusible=True,
)
def batch_norm_flops(op: TracedOp) -> FlopCount:
    """Training: batch statistics then normalise and affine, 8 per element (as layer norm);
    eval (``training=False``): normalise and affine with running statistics, 4 per element."""
    in_training = op.args[5] if len(op.args) > 5 else op.kwargs.get("training", True)
    return FlopCount(vector=(8 if in_training else 4) * _input_numel(op))


@register(
    [
        aten.max_pool1d, aten.max_pool2d, aten.max_pool3d, aten.max_pool2d_with_indices,
        aten.max_pool3d_with_indices, aten.avg_pool1d, aten.avg_pool2d, aten.avg_pool3d,
    ],
    Category.REDUCTION,
    fusible=True,
)
def pooling_flops(op: TracedOp) -> FlopCount:
    """Windowed pooling: one compare/add per window element per output element."""
    window = op.args[1] if len(op.args) > 1 else op.kwargs.get("kernel_size", 1)
    window_elements = math.prod(window) if isinstance(window, (list, tuple)) else int(window)
    spatial_dims = op.args[0].dim() - 2
    if isinstance(window, (list, tuple)) and len(window) == 1:
        window_elements = window[0] ** spatial_dims
    return FlopCount(vector=_numel(op.output) * window_elements)


# --- Compute: matmul-class library kernels, FLOPs from torch.utils.flop_counter --------------


#: (overload, argument layouts) → FLOPs from :data:`flop_registry`; emptied when full. The
#: formulas see shapes only, and a deep model repeats a few matmul shapes thousands of times,
#: each costing a pytree walk of its arguments
_FLOP_COUNTS: dict[tuple, int] = {}
_FLOP_COUNTS_LIMIT = 4096


def _flop_counter_formula(kind: MatmulKind) -> FlopFormula:
    def formula(op: TracedOp) -> FlopCount:
        key = (op.func, _arguments_key(op))
        count = _FLOP_COUNTS.get(key)
        if count is None:
            if len(_FLOP_COUNTS) >= _FLOP_COUNTS_LIMIT:
                _FLOP_COUNTS.clear()
            count = _FLOP_COUNTS[key] = int(
                flop_registry[op.func.overloadpacket](*op.args, **op.kwargs, out_val=op.output)
            )
        return FlopCount(tensor=count, kind=kind)

    return formula


# (scaled, quantized matmuls: costs/quantized.py)
register([aten.mm, aten.addmm, aten.bmm, aten.baddbmm], Category.COMPUTE, fusible=False)(
    _flop_counter_formula(MatmulKind.MATMUL)
)
register(
    [aten.convolution, aten._convolution, aten.cudnn_convolution, aten.convolution_overrideable,
     aten._slow_conv2d_forward],
    Category.COMPUTE,
    fusible=False,
)(_flop_counter_formula(MatmulKind.CONV))
register(
    [aten._efficient_attention_forward, aten._flash_attention_forward],  # (batch, length, heads, E)
    Category.COMPUTE,
    fusible=False,
)(_flop_counter_formula(MatmulKind.ATTENTION))


@register([aten.mv, aten.addmv, aten.dot, aten.vdot], Category.COMPUTE, fusible=False)
def vector_product_flops(op: TracedOp) -> FlopCount:
    """Matrix-vector and dot products: 2 FLOPs per multiply-add, one per element of the largest
    operand."""
    largest = max(a.numel() for a in op.args if isinstance(a, torch.Tensor))
    return FlopCount(tensor=2 * largest, kind=MatmulKind.MATMUL)


# torch.outer and torch.ger decompose into mul before the trace sees them (pointwise)
@register([aten.addr], Category.COMPUTE, fusible=False)
def outer_product_flops(op: TracedOp) -> FlopCount:
    """``addr(M, u, v) = β·M + α·u ⊗ v``: one multiply per output element."""
    return FlopCount(tensor=_numel(op.output), kind=MatmulKind.MATMUL)


@register([aten.addbmm], Category.COMPUTE, fusible=False)
def addbmm_flops(op: TracedOp) -> FlopCount:
    """``addbmm(c, A, B) = β·c + α·Σ_b A[b] @ B[b]`` with A (b, n, m), B (b, m, p): the batch sum
    is one GEMM over the concatenated inner dimension, b·n·m·p multiply-adds = 2·b·n·m·p FLOPs
    (the bias add is not counted, as flop_counter's addmm does not)."""
    batch, rows, inner = op.args[1].shape
    return FlopCount(tensor=2 * batch * rows * inner * op.args[2].shape[-1], kind=MatmulKind.MATMUL)


@register([aten._trilinear], Category.COMPUTE, fusible=False)
def trilinear_flops(op: TracedOp) -> FlopCount:
    """``_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim)`` (``nn.Bilinear``): the sum over
    ``sumdim`` of the product of three tensors, each unsqueezed at its ``expand`` dims. The
    cheapest standard evaluation contracts two of them first, then the third (as einsum path
    optimisers do); charged is the cheapest of the three orders. A pairwise step costs 2 FLOPs
    per element of the joint index space where it sums a dimension away, 1 where it only
    multiplies. For ``nn.Bilinear`` (x1 (N, a), W (o, a, b), x2 (N, b)) the cheapest order is the
    outer product x1 ⊗ x2 (N·a·b) then the weight contraction (2·N·o·a·b)."""
    tensors = op.args[:3]
    expands = op.args[3:6]
    summed = set(op.args[6])
    rank = tensors[0].dim() + len(expands[0])
    dims, size = [], {}
    for tensor, expand in zip(tensors, expands, strict=True):
        present = [d for d in range(rank) if d not in expand]
        size.update(zip(present, tensor.shape, strict=True))
        dims.append(set(present))
    kept = set(range(rank)) - summed

    def step(left: set[int], right: set[int], later: set[int]) -> tuple[int, set[int]]:
        joint = left | right
        result = {d for d in joint if d in later or d in kept}
        per_element = 2 if joint - result else 1
        return per_element * math.prod(size[d] for d in joint), result

    costs = []
    for first, second, third in ((0, 1, 2), (0, 2, 1), (1, 2, 0)):
        pair_flops, pair = step(dims[first], dims[second], dims[third])
        last_flops, _ = step(pair, dims[third], set())
        costs.append(pair_flops + last_flops)
    return FlopCount(tensor=min(costs), kind=MatmulKind.MATMUL)


def _distance_flops(pairs: int, coordinates: int, p: float) -> FlopCount:
    """Distances between ``pairs`` pairs of points with ``coordinates`` each. p = 2 has a
    matrix-product form, ‖x‖² + ‖y‖² − 2·x·y (torch.cdist's ``use_mm_for_euclid_dist``): 2 FLOPs
    per coordinate of each pair on the matmul unit, then two adds and a square root per pair.
    Other p: a difference, an absolute value (or power) and an accumulate per coordinate."""
    if p == 2:
        return FlopCount(tensor=2 * pairs * coordinates, vector=3 * pairs, kind=MatmulKind.MATMUL)
    return FlopCount(vector=3 * pairs * coordinates)


@register([aten._cdist_forward, aten._euclidean_dist], Category.COMPUTE, fusible=False)
def cdist_flops(op: TracedOp) -> FlopCount:
    """``cdist(x1 (…, P, M), x2 (…, R, M))``: all P·R pairs per batch (``_euclidean_dist`` is
    its p = 2 matrix-product path)."""
    p = op.argument("p")  # _euclidean_dist takes none
    return _distance_flops(_numel(op.output), op.args[0].shape[-1], 2.0 if p is None else p)


@register([aten._pdist_forward], Category.COMPUTE, fusible=False)
def pdist_flops(op: TracedOp) -> FlopCount:
    """``pdist(x (N, M))``: the N·(N − 1)/2 pairs of distinct rows, one output each."""
    p = op.argument("p")
    return _distance_flops(_numel(op.output), op.args[0].shape[-1], 2.0 if p is None else p)


@register(
    # the intercepted call, and the backends it decomposes into where interception cannot reach
    # (SDPA called inside another torch function such as F.multi_head_attention_forward)
    [aten.scaled_dot_product_attention, aten._scaled_dot_product_efficient_attention,
     aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_cudnn_attention,
     aten._scaled_dot_product_flash_attention_for_cpu],
    Category.COMPUTE,
    fusible=False,
)
def attention_flops(op: TracedOp) -> FlopCount:
    """The two matmuls of attention; with ``is_causal`` only the unmasked score blocks."""
    query, key, value = op.args[:3]
    q_shape = _as_4d(query.shape)
    k_shape = _as_4d(key.shape)
    v_shape = _as_4d(value.shape)
    flops = sdpa_flop_count(q_shape, k_shape, v_shape)
    if op.argument("is_causal"):
        query_len, key_len = q_shape[2], k_shape[2]
        # integer arithmetic: both matmuls' FLOPs are a multiple of L·S, so this is exact
        flops = flops * _causal_kept(query_len, key_len) // (query_len * key_len)
    return FlopCount(tensor=int(flops), kind=MatmulKind.ATTENTION)


def _as_4d(shape: torch.Size) -> tuple[int, int, int, int]:
    """(…, L, E) → (batch, heads, L, E): leading dims fold into the batch."""
    *lead, length, embed = shape
    if len(lead) >= 2:
        return (math.prod(lead[:-1]), lead[-1], length, embed)
    return (1, lead[0] if lead else 1, length, embed)


def _causal_kept(query_len: int, key_len: int) -> int:
    """Score entries a causal (top-left aligned, ``tril``) mask keeps: row ``r`` keeps
    ``min(r + 1, key_len)``, summed in closed form."""
    full_rows = max(query_len - key_len, 0)  # rows past the diagonal's end keep every key
    triangle = query_len - full_rows
    return triangle * (triangle + 1) // 2 + full_rows * key_len


#: Pointwise FLOPs per hidden unit per step of each recurrent cell, after the two GEMMs:
#: adds combining input and recurrent projections (one per gate) plus the cell math.
RNN_CELL_FLOPS = {
    "lstm": 4 + 3 * 3 + 2 + 3 + 1,  # 3 sigmoids, 2 tanh, c = f·c + i·g, h = o·tanh(c)
    "gru": 3 + 2 * 3 + 3 + 4,  # 2 sigmoids, n = tanh(xn + r·hn), h = (1 − z)·n + z·h
    "rnn_tanh": 1 + 1,
    "rnn_relu": 1 + 1,
}


#: Gates per hidden unit of each recurrent cell: the rows of its input weight are gates × hidden.
RNN_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


@register([INTERCEPTED_KEYS[cell] for cell in RNN_CELL_FLOPS], Category.COMPUTE, fusible=False)
def rnn_flops(op: TracedOp) -> FlopCount:
    """A cuDNN RNN: per layer and direction one input GEMM over all steps, one recurrent GEMM
    and the gate math per step. Launches: one input GEMM plus one step kernel per time step.
    ``op.args`` are the ``torch._VF`` call's: input, state, flat weights, has_biases,
    num_layers, dropout, train, bidirectional, batch_first."""
    input_, _state, weights, _biases, num_layers, _dropout, _train, bidirectional, batch_first = (
        op.args
    )
    layers_and_directions = num_layers * (2 if bidirectional else 1)
    per_layer = len(weights) // layers_and_directions  # w_ih, w_hh[, b_ih, b_hh][, w_hr]
    time_dim = 1 if batch_first and input_.dim() == 3 else 0
    steps = input_.shape[time_dim]
    batch = input_.numel() // (steps * input_.shape[-1])
    tensor = 0
    for index in range(0, len(weights), per_layer):
        w_ih, w_hh = weights[index : index + 2]
        tensor += 2 * steps * batch * (w_ih.numel() + w_hh.numel())
        if per_layer in (3, 5):  # LSTM projection weight w_hr: (proj, hidden)
            tensor += 2 * steps * batch * weights[index + per_layer - 1].numel()
    hidden = weights[0].shape[0] // RNN_GATES[op.base]
    vector = layers_and_directions * steps * batch * hidden * RNN_CELL_FLOPS[op.base]
    return FlopCount(
        tensor=tensor,
        vector=vector,
        kind=MatmulKind.RNN,
        launches=layers_and_directions * (1 + steps),
    )


def _fused_cell_flops(cell: str) -> FlopFormula:
    """A fused recurrent cell (``nn.LSTMCell``/``nn.GRUCell`` on CUDA: the two GEMMs are separate
    ``mm`` ops, then one kernel does the gate math): :data:`RNN_CELL_FLOPS` per hidden unit of
    the ``cx``/``hx`` argument, plus an add per gate pre-activation for each bias passed."""

    def formula(op: TracedOp) -> FlopCount:
        input_gates, _, state, *biases = op.args
        bias_adds = sum(b is not None for b in biases) * input_gates.numel()
        return FlopCount(vector=state.numel() * RNN_CELL_FLOPS[cell] + bias_adds)

    return formula


register([aten._thnn_fused_lstm_cell], Category.POINTWISE, fusible=False)(_fused_cell_flops("lstm"))
register([aten._thnn_fused_gru_cell], Category.POINTWISE, fusible=False)(_fused_cell_flops("gru"))


# --- FFTs: cuFFT, vector work ------------------------------------------------------------------


def complex_fft_flops(points: int) -> int:
    """FLOPs of one complex FFT of ``points`` points, kept below every published count. The
    radix-2 Cooley–Tukey count, 5·N·log2 N (Cooley & Tukey 1965; the figure FFTW's benchmarks
    report, fftw.org/speed/method.html), is not the least: split radix needs 4·N·log2 N − 6·N + 8
    (Yavne 1968) and the lowest known count is (34/9)·N·log2 N − (124/27)·N − O(log N) (Johnson &
    Frigo, IEEE Trans. Signal Process. 55(1), 2007). A bound takes the lowest, with the linear
    term rounded to −5·N so the charge stays below it at every size."""
    if points < 2:
        return 0
    return max(0, math.floor(34 / 9 * points * math.log2(points)) - 5 * points)


def real_fft_flops(points: int) -> int:
    """FLOPs of one real-input (or real-output) FFT of ``points`` points: half the complex
    count's leading term, (17/9)·N·log2 N (Johnson & Frigo 2007 give the real-data count with
    this leading term), with the linear term rounded down to −4·N."""
    if points < 2:
        return 0
    return max(0, math.floor(17 / 9 * points * math.log2(points)) - 4 * points)


def _fft_flops(
    per_signal: Callable[[int], int], signal_shape: Callable[[TracedOp], Any]
) -> FlopFormula:
    """A multi-dimensional FFT is a 1-D FFT along each transformed dimension in turn: along
    dimension d of length n, numel/n transforms of n points. Real transforms are charged as
    real along every dimension, below what the complex passes over the half spectrum cost."""

    def formula(op: TracedOp) -> FlopCount:
        shape = signal_shape(op)
        total = math.prod(shape)
        flops = sum(total // shape[d] * per_signal(shape[d]) for d in op.args[1] if shape[d])
        return FlopCount(vector=flops)

    return formula


# c2r transforms the output's real signal (last dim ``last_dim_size``); the others their input
register([aten._fft_c2c], Category.COMPUTE, fusible=False)(
    _fft_flops(complex_fft_flops, lambda op: op.args[0].shape)
)
register([aten._fft_r2c], Category.COMPUTE, fusible=False)(
    _fft_flops(real_fft_flops, lambda op: op.args[0].shape)
)
register([aten._fft_c2r], Category.COMPUTE, fusible=False)(
    _fft_flops(real_fft_flops, lambda op: op.output.shape)
)


# --- Dense linear algebra: cuSOLVER / MAGMA ---------------------------------------------------
# FLOPs are LAPACK Working Note 41's operation counts (Dongarra et al., "Installation guide for
# LAPACK", Appendix C), multiplications plus additions; where methods differ the lower count.
# Blocked factorisations do their O(n³) work in GEMM updates, so the FLOPs are charged at the
# matmul unit: the faster unit keeps a bound.


def _matrices(tensor: torch.Tensor) -> tuple[int, int, int]:
    """(batch, rows, columns) of a (…, m, n) matrix argument."""
    rows, columns = tensor.shape[-2:]
    return math.prod(tensor.shape[:-2]), rows, columns


def lu_flops(rows: int, columns: int) -> int:
    """getrf of an m×n matrix, k = min(m, n), M = max(m, n): M·k² − k³/3 − k²/2 + 5k/6."""
    k, big = min(rows, columns), max(rows, columns)
    return (6 * big * k * k - 2 * k**3 - 3 * k * k + 5 * k) // 6


def lu_solve_flops(n: int, rhs: int) -> int:
    """getrs: forward and back substitution with the LU factors, 2·n²·k − n·k."""
    return 2 * n * n * rhs - n * rhs


def _linalg(formula: Callable[[TracedOp], int]) -> FlopFormula:
    return lambda op: FlopCount(tensor=formula(op), kind=MatmulKind.MATMUL)


def _rhs(op: TracedOp) -> int:
    """Right-hand sides per system of a solve with A (…, n, n) and B (…, n, k) or (…, n);
    (…, k, n) for ``left=False`` (X·A = B)."""
    matrix, rhs = op.args[0], op.args[1]
    if rhs.dim() == matrix.dim() - 1:
        return 1
    return rhs.shape[-2] if op.argument("left") is False else rhs.shape[-1]


@register([aten.linalg_lu_factor_ex, aten.linalg_lu, aten._linalg_det, aten._linalg_slogdet],
          Category.COMPUTE, fusible=False)
@_linalg
def lu_factor_flops(op: TracedOp) -> int:
    """LU with partial pivoting (a determinant is its diagonal's product: n more multiplies,
    not counted)."""
    batch, rows, columns = _matrices(op.args[0])
    return batch * lu_flops(rows, columns)


@register([aten._linalg_solve_ex], Category.COMPUTE, fusible=False)
@_linalg
def solve_flops(op: TracedOp) -> int:
    """gesv: LU of A then substitution for each right-hand side."""
    batch, n, _ = _matrices(op.args[0])
    return batch * (lu_flops(n, n) + lu_solve_flops(n, _rhs(op)))


def _substitution_flops(factor: torch.Tensor, rhs: torch.Tensor) -> int:
    """A solve with factors already computed (LU or Cholesky): forward and back substitution,
    2·n²·k − n·k per system."""
    n = factor.shape[-1]
    return math.prod(rhs.shape) // n * lu_solve_flops(n, 1)


@register([aten.linalg_lu_solve], Category.COMPUTE, fusible=False)
@_linalg
def lu_factored_solve_flops(op: TracedOp) -> int:
    """``linalg_lu_solve(LU, pivots, B)``: substitution with the LU factors."""
    return _substitution_flops(op.args[0], op.args[2])


@register([aten.cholesky_solve, aten._cholesky_solve_helper], Category.COMPUTE, fusible=False)
@_linalg
def cholesky_factored_solve_flops(op: TracedOp) -> int:
    """``cholesky_solve(B, L)``: substitution with the Cholesky factor."""
    return _substitution_flops(op.args[1], op.args[0])


@register([aten.cholesky_inverse], Category.COMPUTE, fusible=False)
@_linalg
def cholesky_inverse_flops(op: TracedOp) -> int:
    """potri, the inverse from a Cholesky factor: 2n³/3 + n²/2 + 5n/6."""
    batch, n, _ = _matrices(op.args[0])
    return batch * ((4 * n**3 + 3 * n * n + 5 * n) // 6)


@register([aten.linalg_eig], Category.COMPUTE, fusible=False)
@_linalg
def eig_flops(op: TracedOp) -> int:
    """General eigendecomposition: every dense method first reduces to Hessenberg form, gehrd,
    10n³/3 (Golub & Van Loan §7.4.3; the QR iterations and eigenvectors are not counted)."""
    batch, n, _ = _matrices(op.args[0])
    return batch * (10 * n**3) // 3


@register([aten.linalg_inv_ex], Category.COMPUTE, fusible=False)
@_linalg
def inverse_flops(op: TracedOp) -> int:
    """getrf + getri (inverse from the LU factors): 2·n³ − 3n²/2 + 5n/2 in all, less than
    solving against the identity (8n³/3)."""
    batch, n, _ = _matrices(op.args[0])
    return batch * ((4 * n**3 - 3 * n * n + 5 * n) // 2)


@register([aten.linalg_cholesky_ex, aten.cholesky], Category.COMPUTE, fusible=False)
@_linalg
def cholesky_flops(op: TracedOp) -> int:
    """potrf: n³/3 + n²/2 + n/6."""
    batch, n, _ = _matrices(op.args[0])
    return batch * ((2 * n**3 + 3 * n * n + n) // 6)


@register([aten.triangular_solve, aten.linalg_solve_triangular], Category.COMPUTE, fusible=False)
@_linalg
def triangular_solve_flops(op: TracedOp) -> int:
    """trsm: n²·k for an n×n triangle and k right-hand sides (n·(n − 1)·k when unitriangular:
    no divides). Every right-hand-side column (or row, ``left=False``) costs the same, so the
    count is n (or n − 1) per element of the solution."""
    triangle = op.argument("A")  # triangular_solve(B, A); linalg_solve_triangular(A, B)
    triangle = op.args[0] if triangle is None else triangle
    n = triangle.shape[-1]
    per_element = n - 1 if op.argument("unitriangular") else n
    solution = op.output[0] if isinstance(op.output, (tuple, list)) else op.output
    return solution.numel() * per_element


@register([aten.linalg_qr, aten.geqrf, aten.linalg_lstsq], Category.COMPUTE, fusible=False)
@_linalg
def qr_flops(op: TracedOp) -> int:
    """geqrf, Householder QR of an m×n matrix: 2·M·k² − 2k³/3 (k = min, M = max; the lower-order
    terms are positive). Forming Q explicitly costs more and is not counted; a least-squares
    solve (``linalg_lstsq``) is charged its QR alone."""
    batch, rows, columns = _matrices(op.args[0])
    k, big = min(rows, columns), max(rows, columns)
    return batch * (2 * big * k * k - (2 * k**3) // 3)


@register([aten._linalg_eigh], Category.COMPUTE, fusible=False)
@_linalg
def eigh_flops(op: TracedOp) -> int:
    """Symmetric eigendecomposition: every dense method first reduces to tridiagonal form, sytrd,
    4n³/3 (eigenvectors cost more and are not counted)."""
    batch, n, _ = _matrices(op.args[0])
    return batch * (4 * n**3) // 3


@register([aten._linalg_svd], Category.COMPUTE, fusible=False)
@_linalg
def svd_flops(op: TracedOp) -> int:
    """SVD: reduction to bidiagonal form, the cheaper of gebrd on the m×n matrix (4·M·k² −
    4k³/3) and a QR first then gebrd on the k×k factor (2·M·k² + 2k³), less M·k for the
    negative lower-order term of gebrd; singular vectors are not counted."""
    batch, rows, columns = _matrices(op.args[0])
    k, big = min(rows, columns), max(rows, columns)
    direct = 4 * big * k * k - (4 * k**3) // 3
    qr_first = 2 * big * k * k + 2 * k**3
    return batch * max(0, min(direct, qr_first) - big * k)


@register([aten.affine_grid_generator], Category.COMPUTE, fusible=False)
def affine_grid_flops(op: TracedOp) -> FlopCount:
    """Each grid point is θ (2×3 or 3×4) times (x, y[, z], 1): per output coordinate one multiply-
    add per spatial input and one add for the translation, 2·s FLOPs for s spatial dims (4 in
    2-D). Run as a batched matmul in PyTorch, so charged at the matmul unit."""
    spatial = op.output.shape[-1]
    return FlopCount(tensor=2 * spatial * _numel(op.output), kind=MatmulKind.MATMUL)


# --- Data movement: bytes, no FLOPs ----------------------------------------------------------

def gathered_reads(op: TracedOp) -> tuple[TensorRef, ...]:
    """A gather reads at most as many source elements as it writes (an embedding lookup reads
    the rows it picks, not the whole table; nearest-neighbour resampling one source element per
    output); the source is the op's first tensor argument."""
    source, *rest = op.reads
    picked = min(source.elements, _numel(op.output))
    return (replace(source, elements=picked), *rest)


register(
    [ aten.gather, aten.index, aten.index_select, aten.embedding, aten.take, aten._unsafe_index,
     aten._embedding_bag,
     aten._embedding_bag_forward_only, aten.upsample_nearest1d, aten.upsample_nearest2d,
     aten.upsample_nearest3d, aten._upsample_nearest_exact1d, aten._upsample_nearest_exact2d,
     aten._upsample_nearest_exact3d, aten.diagonal_copy],
    Category.DATA_MOVEMENT,
    fusible=True,
    reads=gathered_reads,
)(_no_flops)

register(
    [
        aten.cat, aten.stack, aten._stack, aten._chunk_cat, aten.lu_unpack, aten.constant_pad_nd,
        aten.pad,
        aten.reflection_pad1d, aten.reflection_pad2d,
        aten.reflection_pad3d, aten.replication_pad1d, aten.replication_pad2d,
        aten.replication_pad3d,
        aten.repeat, aten.roll, aten.flip, aten.narrow_copy, aten.slice_scatter,
        aten.select_scatter,
        aten.as_strided_scatter, aten.diagonal_scatter,
        aten.upsample_bilinear2d, aten._upsample_bilinear2d_aa, aten.upsample_linear1d,
        aten.upsample_bicubic2d,
        aten._upsample_bicubic2d_aa, aten._upsample_lanczos2d_aa, aten.grid_sampler_3d,
        aten.upsample_trilinear3d, aten.pixel_shuffle, aten.pixel_unshuffle, aten.im2col,
        aten.col2im,
        aten.masked_select, aten.repeat_interleave, aten.channel_shuffle, aten.grid_sampler_2d,
        aten.unfold_copy,
        aten.diag_embed, aten.diag, aten.diagflat, aten.rot90, aten.block_diag,
    ],
    Category.DATA_MOVEMENT,
    fusible=True,
)(_no_flops)

register(
    [aten.scatter, aten.scatter_add, aten.scatter_reduce, aten.index_put, aten._index_put_impl,
     aten._unsafe_index_put, aten.index_add, aten.index_copy, aten.index_fill, aten.masked_scatter,
     aten.nonzero,
     aten._unique2, aten._unique, aten.unique_consecutive, aten.unique_dim,
     aten.unique_dim_consecutive,
     aten.bincount, aten.histc, aten.nonzero_static, aten.max_unpool2d, aten.max_unpool3d, aten.put,
     aten.index_reduce,
     # a linalg op's error check: reads one int32 status per matrix, no arithmetic
     aten._linalg_check_errors],
    Category.DATA_MOVEMENT,
    fusible=False,
)(_no_flops)


def _binary_search_flops(sorted_position: int) -> FlopFormula:
    """A search of each element among ``b`` sorted boundaries: ⌈log2(b + 1)⌉ comparisons, the
    fewest any comparison search needs to tell ``b + 1`` outcomes apart."""

    def formula(op: TracedOp) -> FlopCount:
        boundaries = op.args[sorted_position].shape[-1]
        return FlopCount(vector=_numel(op.output) * math.ceil(math.log2(boundaries + 1)))

    return formula


register([aten.searchsorted], Category.DATA_MOVEMENT, fusible=False)(_binary_search_flops(0))
register([aten.bucketize], Category.DATA_MOVEMENT, fusible=False)(_binary_search_flops(1))

#: Ops with no rule: conservative default — input and output bytes, no FLOPs, own kernel.
UNSUPPORTED_RULE = CostRule(Category.DATA_MOVEMENT, _no_flops, fusible=False)


def cost_trace(trace: Trace) -> tuple[OpRecord, ...]:
    """Cost every traced op; ops with no rule get :data:`UNSUPPORTED_RULE` (``has_rule=False``)."""
    return tuple(_cost_op(index, op) for index, op in enumerate(trace.ops))


class DestinationAccess(Enum):
    """What an op does with the destination it writes (its first argument, in place). The trace
    sees the destination as an argument; the GPU loads and stores only what the access says.
    All but ``OVERWRITTEN`` write positions chosen by index or mask values (data)."""

    #: every element stored, none loaded: ``copy_``, fills, in-place random generators
    OVERWRITTEN = "overwritten"
    #: the value stored where the mask is true, only the mask loaded (``masked_fill_``); which
    #: positions those are is data, so the moved write stays the whole destination
    MASKED = "stored where a mask is true"
    #: only the positions its source (last tensor argument) names are stored, none loaded
    STORED_AT_INDICES = "stored at indices"
    #: the positions its source names are loaded and stored (accumulating scatters)
    ACCUMULATED_AT_INDICES = "accumulated at indices"
    #: the rows its indices pick are rescaled where their norm is too large (data); moved as a
    #: whole read and write
    RENORMED_ROWS = "renormed rows"

    @property
    def data_chosen(self) -> bool:
        return self is not DestinationAccess.OVERWRITTEN


#: One declaration per op (its in-place twin shared) of how it accesses its destination.
DESTINATION_ACCESS: dict[OpKey, DestinationAccess] = {}


def _destinations(ops: Iterable[OpKey], access: DestinationAccess) -> None:
    add_rules(DESTINATION_ACCESS, ops, access, "destination-access")


_destinations(
    [aten.copy, aten.fill, aten.zero, aten.uniform, aten.normal, aten.bernoulli, aten.random,
     aten.exponential, aten.cauchy, aten.log_normal, aten.geometric],
    DestinationAccess.OVERWRITTEN,
)
_destinations([aten.masked_fill], DestinationAccess.MASKED)
_destinations(
    [aten.index_put, aten._index_put_impl, aten._unsafe_index_put, aten.scatter, aten.index_copy,
     aten.masked_scatter, aten.put, aten.index_fill],
    DestinationAccess.STORED_AT_INDICES,
)
_destinations(
    [aten.index_reduce, aten.scatter_add, aten.index_add, aten.scatter_reduce],
    DestinationAccess.ACCUMULATED_AT_INDICES,
)
_destinations([aten.embedding_renorm], DestinationAccess.RENORMED_ROWS)


def _has_out_argument(op: TracedOp) -> bool:
    return any(name == "out" for _, name in op.written_arguments)


def _writes_first_argument(op: TracedOp) -> bool:
    return any(position == 0 for position, _ in op.written_arguments)


def _index_put_positions(op: TracedOp) -> int | None:
    """``x[i, :, j] = v``: the broadcast index shape times every dim left whole; a boolean mask
    counts each of its elements (an upper limit) over the dims it spans."""
    indices = op.argument("indices")
    if not indices:
        return None
    shape = op.args[0].shape
    dim, shapes, whole = 0, [], []
    for index in indices:
        if index is None:
            whole.append(shape[dim])
            dim += 1
        elif index.dtype == torch.bool:
            shapes.append((index.numel(),))
            dim += index.dim()
        else:
            shapes.append(tuple(index.shape))
            dim += 1
    if not shapes:
        return None
    return math.prod(torch.broadcast_shapes(*shapes)) * math.prod(whole) * math.prod(shape[dim:])


def _index_fill_positions(op: TracedOp) -> int:
    """``index_fill(dim, index)``: each index replaces a whole slice along ``dim``."""
    shape = op.args[0].shape
    dim = op.argument("dim", 0) % max(len(shape), 1)
    return op.argument("index").numel() * math.prod(shape) // max(shape[dim] if shape else 1, 1)


#: Indexed stores whose shapes say how many destination positions they touch (others touch at
#: most one per index element).
INDEXED_POSITIONS: dict[OpKey, Callable[[TracedOp], int | None]] = {}
add_rules(INDEXED_POSITIONS, [aten.index_fill], _index_fill_positions, "indexed-positions")
add_rules(
    INDEXED_POSITIONS,
    [aten.index_put, aten._index_put_impl, aten._unsafe_index_put],
    _index_put_positions,
    "indexed-positions",
)


def indexed_positions(op: TracedOp, largest_input: int) -> int:
    """The most destination positions an indexed store can touch: from the shapes where
    :data:`INDEXED_POSITIONS` has a rule, else one per element of its largest other input
    (``largest_input``), never more than the destination holds."""
    rule = lookup(INDEXED_POSITIONS, op)
    positions = rule(op) if rule is not None else None
    destination = op.args[0]
    total = destination.numel() if isinstance(destination, torch.Tensor) else largest_input
    return min(largest_input if positions is None else positions, total)


def in_place_accesses(
    op: TracedOp, reads: tuple[TensorRef, ...]
) -> tuple[tuple[TensorRef, ...], tuple[TensorRef, ...]]:
    """(reads, writes) of an op, with the destination of an in-place op charged only for what
    the GPU really loads and stores (:data:`DESTINATION_ACCESS`). A destination that is not
    loaded stays a read of zero elements: what the op leaves untouched is still the previous
    version's data, so that version must exist (a ``zeros`` then ``y[:, :k] = x`` writes all of
    ``y``)."""
    if not op.writes or not reads:
        return reads, op.writes
    if _has_out_argument(op):
        # an out= buffer (the last tensor argument) is only written: its read loads nothing
        *inputs, out = reads
        return (*inputs, replace(out, elements=0)), op.writes
    if not _writes_first_argument(op):
        return reads, op.writes
    destination, *rest = reads
    access = lookup(DESTINATION_ACCESS, op)
    if access in (DestinationAccess.OVERWRITTEN, DestinationAccess.MASKED):
        return (replace(destination, elements=0), *rest), op.writes
    indexed = (DestinationAccess.STORED_AT_INDICES, DestinationAccess.ACCUMULATED_AT_INDICES)
    if access in indexed and rest:
        # a broadcast scalar value stores one element per indexed position, not one in all
        stored = min(indexed_positions(op, max(ref.elements for ref in rest)),
                     destination.elements)
        writes = tuple(replace(ref, elements=min(ref.elements, stored)) for ref in op.writes)
        loaded = stored if access is DestinationAccess.ACCUMULATED_AT_INDICES else 0
        return (replace(destination, elements=loaded), *rest), writes
    return reads, op.writes


def _cost_op(index: int, op: TracedOp) -> OpRecord:
    rule = rule_for(op)
    has_rule = rule is not None
    rule = rule or UNSUPPORTED_RULE
    category = Category.ZERO_COPY if op.is_view else rule.category
    reads = rule.reads(op) if rule.reads and op.reads else op.reads
    reads, writes = in_place_accesses(op, reads)
    return OpRecord(
        index=index,
        name=op.name,
        category=category,
        fusible=rule.fusible,
        flops=rule.flops(op),
        reads=reads,
        writes=writes,
        module_path=op.module_path,
        has_rule=has_rule or op.is_view,
        call_key=_call_key(op),
        reduced_dims=_reduced_dims(op) if category is Category.REDUCTION else None,
    )


def _call_key(op: TracedOp) -> tuple:
    """See :attr:`OpRecord.call_key`: FX's CSE pass skips seeded-random and mutating ops."""
    if op.func is None or _cse_skips(op.func):
        return ()
    return (op.name, _arguments_key(op))


@functools.cache
def _cse_skips(func: OpOverload) -> bool:
    return func._schema.is_mutable or torch.Tag.nondeterministic_seeded in func.tags


#: argument types that are their own key (most leaves of an op's arguments)
_PLAIN_LEAVES = frozenset({int, float, bool, str, type(None)})


def _arguments_key(op: TracedOp) -> tuple:
    """:func:`_layout_key` of ``(op.args, op.kwargs)``."""
    return (_layout_key(op.args), _layout_key(op.kwargs))


def _layout_key(tree: Any) -> Any:
    """``tree`` with each tensor replaced by its (shape, strides, dtype) and containers by
    tuples: equal for calls the same up to tensor values."""
    if type(tree) in _PLAIN_LEAVES:
        return tree
    if isinstance(tree, (list, tuple)):  # a list, not a generator: faster to build a tuple from
        return tuple([item if type(item) in _PLAIN_LEAVES else _layout_key(item) for item in tree])
    if isinstance(tree, torch.Tensor):
        return (tuple(tree.shape), tuple(tree.stride()), tree.dtype)
    if isinstance(tree, dict):
        return tuple((key, _layout_key(value)) for key, value in sorted(tree.items()))
    return tree


def _reduced_dims(op: TracedOp) -> tuple[int, ...] | None:
    """The ``dim`` argument (none given: every dim), a layer norm's trailing
    ``normalized_shape`` dims, every dim but the channels of a batch norm in training (none in
    eval: it only scales and shifts), every dim of a full reduction; None otherwise."""
    if op.func is None or not op.reads:
        return None
    rank = len(op.reads[0].shape)
    names = set(op.argument_names)
    if "running_mean" in names:
        training = "training" in names and op.argument("training")
        return tuple(d for d in range(rank) if d != 1) if training else ()
    if "normalized_shape" in names:
        return tuple(range(rank - len(op.argument("normalized_shape")), rank))
    if "dim" not in names:
        return tuple(range(rank)) if _numel(op.output) == 1 else None
    dim = op.argument("dim")
    dims = [dim] if isinstance(dim, int) else list(dim or range(rank))
    return tuple(sorted({d % rank for d in dims})) if rank else ()


from . import quantized, training  # noqa: E402,F401
