"""The registry every cost rule enters (keyed by aten overload or packet, as
``torch.utils.flop_counter`` keys its formulas), the records and counts the rules produce, and the
helpers their formulas share."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch
from torch._ops import OpOverload, OpOverloadPacket
from torch.utils._pytree import tree_map

from ..errors import PrecisionError
from ..trace.aten_ops import aten, is_missing
from ..trace.intercept import RNN_CALLS
from ..trace.refs import TensorRef, TracedOp, base_name, largest_per_value


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
    #: another family the matmul-class work may run as, on that family's unit (a product an
    #: algebraic shortcut writes as the convolution it came from may run as the product it is)
    alternative: MatmulKind | None = None

    def scaled(self, share: float) -> FlopCount:
        """These FLOPs times ``share`` (0..1), each count rounded down; itself when that
        changes neither count (a wholly needed op, most often)."""
        tensor, vector = int(self.tensor * share), int(self.vector * share)
        if tensor == self.tensor and vector == self.vector:
            return self
        return FlopCount(tensor, vector, self.kind, self.launches, self.alternative)


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
    """The keys ``op`` is looked up by, most specific first: its overload, the overload an
    ``out=`` spelling computes (``div.Scalar_mode_out`` → ``div.Scalar_mode``), then its packet.
    An op recorded without its overload (``func=None``: a call intercepted above the
    dispatcher, :data:`INTERCEPTED_KEYS`) is keyed by the aten packet its base name names."""
    if op.func is None:
        packet = getattr(torch.ops.aten, op.base, None)
        return () if packet is None else (packet,)
    computed = _computed_overload(op.func)
    if computed is None:
        return (op.func, op.func.overloadpacket)
    return (op.func, computed, op.func.overloadpacket)


@functools.cache
def _computed_overload(func: OpOverload) -> OpOverload | None:
    """The functional overload an ``out=`` overload computes (``add.out`` → ``add.default``)."""
    name = func._overloadname
    functional = "default" if name == "out" else name.removesuffix("_out")
    return None if functional == name else getattr(func.overloadpacket, functional, None)


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
    """Category name → the ops registered under it, in-place twins left out (for METHOD.md), the
    categories in :class:`Category`'s order (rule modules register in any order)."""
    twins = {twin for key in _RULES for twin in _with_in_place(key)[1:]}
    by_category: dict[str, list[str]] = {category.value: [] for category in Category}
    for key, rule in _RULES.items():
        if key not in twins:
            by_category[rule.category.value].append(str(key))
    return {category: names for category, names in by_category.items() if names}


#: Rules of ops outside aten by qualified packet name (``"c10d.allreduce_"``): collectives and
#: the copy kernels of libraries that define their ops only once imported (FSDP2's ``fsdp.*``),
#: which no registry key can name before then (:mod:`.collectives`).
LIBRARY_RULES: dict[str, CostRule] = {}


def rule_for(op: TracedOp) -> CostRule | None:
    """The registered rule, else the pointwise rule for an op PyTorch tags pointwise, else a
    library op's rule by name (:data:`LIBRARY_RULES`)."""
    rule = lookup(_RULES, op)
    if rule is None and op.func is not None:
        if _tagged_pointwise(op.func):
            return _TAGGED_POINTWISE
        return LIBRARY_RULES.get(_packet_name(op.func))
    return rule


@functools.cache
def _packet_name(func: OpOverload) -> str:
    return func.overloadpacket._qualified_op_name.replace("::", ".")


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


def _first_tensor(tree: Any) -> torch.Tensor:
    """The first tensor of an op's output (the output itself, or the first of a tuple)."""
    return tree[0] if isinstance(tree, (list, tuple)) else tree


def _input_numel(op: TracedOp) -> int:
    return _numel(op.args[0]) if op.args else 0


@dataclass(frozen=True)
class NoArithmetic:
    """The FLOP formula of ops that do no arithmetic: they alias, move, pick or store values.
    ``reason`` says why (docs/bytes_only_ops.md lists these ops by it)."""

    reason: str

    def __call__(self, op: TracedOp) -> FlopCount:
        return NO_FLOPS


VIEWS = NoArithmetic("a view, alias, metadata query or allocation: no kernel and no bytes")
COPIES = NoArithmetic(
    "a cast, copy or fill, a select by a mask or index range, or a generated index sequence: "
    "values are moved or written, no floating-point arithmetic"
)
GATHERS = NoArithmetic("picks source elements by index: loads and stores, no arithmetic")
LAYOUT_COPIES = NoArithmetic(
    "copies elements to new positions (concatenation, padding, repeats, flips, shuffles, "
    "patches): no arithmetic"
)
STORES = NoArithmetic(
    "stores values at the positions indices or a mask choose, replacing what was there: "
    "no arithmetic"
)
#: Ops with no rule: priced as their bytes (:data:`UNSUPPORTED_RULE`).
NO_RULE = NoArithmetic("no cost rule yet: priced as every input and output byte, no FLOPs")


def _per_output_element(flops_per_element: int) -> FlopFormula:
    if flops_per_element == 0:
        return COPIES
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


#: Fallback for ops that PyTorch itself tags ``pointwise`` but that have no entry above.
_TAGGED_POINTWISE = CostRule(Category.POINTWISE, _per_output_element(1), fusible=True)


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
