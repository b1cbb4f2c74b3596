"""Stage 2: the cost of each traced op — category, FLOPs, which unit runs them, bytes.

One registry maps an op's base name (``aten.add_.Tensor`` → ``"add"``; in-place and out-of-place
variants share a rule) to a :class:`CostRule`. Adding an op is adding one entry next to its
relatives. Matmul-class FLOPs reuse ``torch.utils.flop_counter``'s registered formulas.

FLOPs never depend on precision; a multiply-add is 2 FLOPs. Bytes do: floating-point tensors
take the target precision's element size, integer and bool tensors keep their own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import torch
from torch.utils.flop_counter import flop_registry, sdpa_flop_count

from .errors import PrecisionError
from .trace import TensorRef, Trace, TracedOp, base_name, largest_per_value


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


_RULES: dict[str, CostRule] = {}


def register(
    names: Iterable[str],
    category: Category,
    *,
    fusible: bool,
    reads: Callable[[TracedOp], tuple[TensorRef, ...]] | None = None,
) -> Callable:
    """Decorator: register ``formula`` as the FLOP rule of every op in ``names``."""

    def decorate(formula: FlopFormula) -> FlopFormula:
        for name in names:
            _RULES[name] = CostRule(category, formula, fusible, reads)
        return formula

    return decorate


def registered_ops() -> dict[str, list[str]]:
    """Category name → the op base names registered under it (for METHOD.md)."""
    by_category: dict[str, list[str]] = {}
    for name, rule in _RULES.items():
        by_category.setdefault(rule.category.value, []).append(name)
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
        if base in _RULES:
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
    return RuleCoverage(len(registered), len(tagged), tuple(sorted(traceable - tagged)))


def rule_for(op: TracedOp) -> CostRule | None:
    """The registered rule, else the pointwise rule for an op PyTorch tags pointwise."""
    rule = _RULES.get(op.base)
    if rule is None and op.func is not None and torch.Tag.pointwise in op.func.tags:
        return _TAGGED_POINTWISE
    return rule


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
    return FlopCount()


def _per_output_element(flops_per_element: int) -> FlopFormula:
    return lambda op: FlopCount(vector=flops_per_element * _numel(op.output))


def _per_input_element(flops_per_element: int) -> FlopFormula:
    return lambda op: FlopCount(vector=flops_per_element * _input_numel(op))


#: Ops that take a tensor only for its shape, dtype and device (``zeros_like(x)``,
#: ``x.new_full(...)``): their kernels never load it, so their reads leave it out.
SHAPE_ONLY_TEMPLATES = frozenset(
    {"zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
     "randint_like", "new_zeros", "new_ones", "new_full", "new_empty", "new_empty_strided"}
)


def _template_unread(op: TracedOp) -> tuple[TensorRef, ...]:
    """The template is the only tensor argument of these ops: nothing is read."""
    return ()


def _template_reads(name: str) -> Callable[[TracedOp], tuple[TensorRef, ...]] | None:
    return _template_unread if name in SHAPE_ONLY_TEMPLATES else None


# --- Zero-copy: views, aliases, metadata, allocation without a write --------------------------

register(
    [
        "view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "squeeze",
        "unsqueeze", "slice", "select", "alias", "detach", "as_strided", "unbind", "split",
        "split_with_sizes", "chunk", "unsafe_split", "unsafe_split_with_sizes",
        "narrow", "view_as_real", "view_as_complex", "unfold", "diagonal", "movedim",
        "lift_fresh", "empty", "empty_strided", "_reshape_alias", "unflatten", "flatten",
        "expand_as", "view_as", "resize", "resize_as", "_resize_output", "set", "sym_size",
        "sym_stride", "sym_numel", "_local_scalar_dense", "empty_permuted", "_conj", "_neg_view",
    ],
    Category.ZERO_COPY,
    fusible=False,
)(_no_flops)
register(
    ["empty_like", "new_empty", "new_empty_strided"],
    Category.ZERO_COPY,
    fusible=False,
    reads=_template_unread,
)(_no_flops)

# --- Pointwise: FLOPs per output element, the minimum a kernel must do ------------------------
# 1 FLOP for each basic arithmetic, comparison or transcendental instruction; composites are
# the sum of their parts. A bound needs the minimum, so nothing is counted twice.

POINTWISE_FLOPS_PER_ELEMENT: dict[str, int] = {
    # casts, copies and fills move data and do no arithmetic
    "_to_copy": 0, "to": 0, "copy": 0, "clone": 0, "contiguous": 0, "fill": 0, "zero": 0,
    "zeros": 0, "ones": 0, "full": 0, "zeros_like": 0, "ones_like": 0, "full_like": 0,
    "new_zeros": 0, "new_ones": 0, "new_full": 0, "scalar_tensor": 0, "arange": 0,
    "masked_fill": 0, "where": 0, "tril": 0, "triu": 0, "lift": 0,
    "triu_indices": 0, "tril_indices": 0, "eye": 0, "range": 0,  # generators, like arange
    "fft_fftfreq": 0, "fft_rfftfreq": 0, "complex": 0,
    "_add_relu": 2,
    "linalg_cross": 3,  # each component a·b − c·d
    "polar": 4,  # r·cos θ, r·sin θ per complex output
    "linspace": 2,  # start + i·step: one multiply-add
    "logspace": 3,  # base ** (start + i·step): a multiply-add and a power
    # one instruction each
    "add": 1, "sub": 1, "rsub": 1, "mul": 1, "div": 1, "neg": 1, "abs": 1, "relu": 1,
    "exp": 1, "exp2": 1, "log": 1, "log2": 1, "log10": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1,
    "erf": 1, "erfc": 1, "sin": 1, "cos": 1, "tan": 1, "reciprocal": 1, "pow": 1, "square": 1,
    "sign": 1, "floor": 1, "ceil": 1, "round": 1, "trunc": 1, "frac": 1, "maximum": 1,
    "minimum": 1, "clamp": 1, "clamp_min": 1, "clamp_max": 1, "remainder": 1, "fmod": 1,
    "eq": 1, "ne": 1, "lt": 1, "le": 1, "gt": 1, "ge": 1, "logical_not": 1, "logical_and": 1,
    "logical_or": 1, "bitwise_and": 1, "bitwise_or": 1, "bitwise_not": 1, "isnan": 1,
    "threshold": 1, "hardtanh": 1, "relu6": 1, "expm1": 1, "log1p": 1, "atan": 1, "floor_divide": 1,
    # composites: sum of parts
    "sigmoid": 3,  # exp + add + div
    "silu": 4,  # x · sigmoid(x)
    "hardsigmoid": 3,  # add, div, clamp
    "hardswish": 4,  # hardsigmoid + mul
    "softplus": 3,  # exp, add, log
    "mish": 6,  # softplus + tanh + mul
    "elu": 3,  # compare, exp, sub·mul (one select)
    "selu": 4,
    "celu": 3,
    "leaky_relu": 2,  # compare + mul
    "prelu": 2,
    "_prelu_kernel": 2,
    "gelu": 4,  # erf form: x · 0.5 · (1 + erf(x/√2)) → mul, erf, add, mul (constants folded)
    "lerp": 2,
    "addcmul": 2,
    "addcdiv": 2,
    "logit": 3,
    "hardshrink": 2,
    "softshrink": 2,
    "tanhshrink": 2,
    "logsigmoid": 4, "log_sigmoid_forward": 4,
    "glu": 4,  # sigmoid of one half times the other, per output element
    "xlogy": 2,
    "sigmoid_backward": 2,
    # random number generation (Philox): counted as one FLOP per element, the minimal figure
    "rand": 1, "randn": 1, "rand_like": 1, "randn_like": 1, "normal": 1, "uniform": 1,
    "bernoulli": 1, "randint": 1, "randint_like": 1, "native_dropout": 2, "dropout": 2,
    "exponential": 1, "random": 1, "cauchy": 1, "log_normal": 1, "geometric": 1,
    "_fused_dropout": 2, "_masked_scale": 1,
}

for _name, _flops in POINTWISE_FLOPS_PER_ELEMENT.items():
    register([_name], Category.POINTWISE, fusible=True, reads=_template_reads(_name))(
        _per_output_element(_flops)
    )

#: Fallback for ops that PyTorch itself tags ``pointwise`` but that have no entry above.
_TAGGED_POINTWISE = CostRule(Category.POINTWISE, _per_output_element(1), fusible=True)

# --- Reductions: 1 FLOP per input element plus documented extras ------------------------------

REDUCTION_FLOPS_PER_INPUT_ELEMENT: dict[str, int] = {
    "sum": 1, "prod": 1, "amax": 1, "amin": 1, "max": 1, "min": 1, "argmax": 1, "argmin": 1,
    "nansum": 2,  # isnan compare, accumulate (the select of 0 is no arithmetic)
    "count_nonzero": 2,  # compare, accumulate
    "aminmax": 2, "_aminmax": 2,  # two compares
    "any": 1, "all": 1, "cumsum": 1, "cumprod": 1, "logcumsumexp": 3, "cummax": 1, "cummin": 1,
    "_logcumsumexp": 3, "_cummax_helper": 1, "_cummin_helper": 1,
    "dist": 3,  # sub, abs (or square), accumulate
    "_weight_norm_interface": 3,  # square and accumulate for ‖v‖, then scale v by g/‖v‖
    "multi_margin_loss": 4, "multilabel_margin_loss_forward": 4,  # sub, add, max, accumulate
    "native_norm": 2,
    "mean": 1,  # sum, then one divide per output (folded into the element count: negligible)
    "var": 3, "std": 3, "var_mean": 3, "std_mean": 3,  # sub mean, square, accumulate
    "_softmax": 5, "softmax": 5, "_safe_softmax": 5,  # max, sub, exp, sum, div
    "_masked_softmax": 5,
    "_log_softmax": 5, "log_softmax": 5,  # max, sub, exp, sum, sub (log once per row)
    "logsumexp": 4,  # max, sub, exp, sum
    "linalg_vector_norm": 2, "norm": 2,  # square (or abs), accumulate
    "native_layer_norm": 8,  # mean 1 + var 3 + normalise 2 + affine 2
    "native_group_norm": 8,
    "_native_batch_norm_legit_no_training": 4,  # eval: scale and shift only (see batch_norm_flops)
    "instance_norm": 8, "_fused_rms_norm": 5, "rms_norm": 5,  # square, sum, rsqrt·mul, affine
    "mse_loss": 3, "l1_loss": 3, "smooth_l1_loss": 4, "huber_loss": 4, "soft_margin_loss": 4,
    "binary_cross_entropy": 6, "binary_cross_entropy_with_logits": 8, "kl_div": 3,
    "cosine_similarity": 6,
    "triplet_margin_loss": 8, "margin_ranking_loss": 3, "hinge_embedding_loss": 3,
    "mode": 1, "median": 1, "nanmedian": 1, "sort": 1, "topk": 1, "kthvalue": 1,
    "_adaptive_avg_pool2d": 1, "_adaptive_avg_pool3d": 1, "adaptive_avg_pool1d": 1,
    "adaptive_avg_pool2d": 1, "adaptive_avg_pool3d": 1,
    "adaptive_max_pool2d": 1, "adaptive_max_pool3d": 1, "adaptive_max_pool1d": 1,
}

for _name, _flops in REDUCTION_FLOPS_PER_INPUT_ELEMENT.items():
    register([_name], Category.REDUCTION, fusible=True)(_per_input_element(_flops))


def _picked_by_target(op: TracedOp) -> tuple[TensorRef, ...]:
    """NLL loss loads one input element per target (``input[i, target[i]]``), not all N·C."""
    scores, target, *rest = op.reads
    return (replace(scores, elements=min(scores.elements, target.elements)), target, *rest)


@register(
    ["nll_loss_forward", "nll_loss", "nll_loss2d_forward"],
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


@register(["trace"], Category.REDUCTION, fusible=True, reads=_diagonal_reads)
def trace_flops(op: TracedOp) -> FlopCount:
    """One add per diagonal element."""
    return FlopCount(vector=min(op.args[0].shape))


@register(
    ["native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
     "cudnn_batch_norm", "miopen_batch_norm"],
    Category.REDUCTION,
    fusible=True,
)
def batch_norm_flops(op: TracedOp) -> FlopCount:
    """Training: batch statistics then normalise and affine, 8 per element (as layer norm);
    eval (``training=False``): normalise and affine with running statistics, 4 per element."""
    training = op.args[5] if len(op.args) > 5 else op.kwargs.get("training", True)
    return FlopCount(vector=(8 if training else 4) * _input_numel(op))


@register(
    [
        "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices",
        "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "lp_pool2d",
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


def _flop_counter_formula(kind: MatmulKind) -> FlopFormula:
    def formula(op: TracedOp) -> FlopCount:
        count = flop_registry[op.func.overloadpacket](*op.args, **op.kwargs, out_val=op.output)
        return FlopCount(tensor=int(count), kind=kind)

    return formula


register(["mm", "addmm", "bmm", "baddbmm", "_scaled_mm"], Category.COMPUTE, fusible=False)(
    _flop_counter_formula(MatmulKind.MATMUL)
)
register(
    ["convolution", "_convolution", "cudnn_convolution", "convolution_overrideable",
     "_slow_conv2d_forward"],
    Category.COMPUTE,
    fusible=False,
)(_flop_counter_formula(MatmulKind.CONV))
register(
    ["_efficient_attention_forward", "_flash_attention_forward"],  # (batch, length, heads, E)
    Category.COMPUTE,
    fusible=False,
)(_flop_counter_formula(MatmulKind.ATTENTION))


@register(["mv", "addmv", "dot", "vdot", "outer", "addr", "ger"], Category.COMPUTE, fusible=False)
def vector_product_flops(op: TracedOp) -> FlopCount:
    """Matrix-vector and vector products: 2 FLOPs per multiply-add of the product."""
    matrix_or_vector = [a for a in op.args if isinstance(a, torch.Tensor)]
    if op.base in ("outer", "addr", "ger"):
        return FlopCount(tensor=_numel(op.output), kind=MatmulKind.MATMUL)
    largest = max(t.numel() for t in matrix_or_vector)
    return FlopCount(tensor=2 * largest, kind=MatmulKind.MATMUL)


@register(["addbmm"], Category.COMPUTE, fusible=False)
def addbmm_flops(op: TracedOp) -> FlopCount:
    """``addbmm(c, A, B) = β·c + α·Σ_b A[b] @ B[b]`` with A (b, n, m), B (b, m, p): the batch sum
    is one GEMM over the concatenated inner dimension, b·n·m·p multiply-adds = 2·b·n·m·p FLOPs
    (the bias add is not counted, as flop_counter's addmm does not)."""
    batch, rows, inner = op.args[1].shape
    return FlopCount(tensor=2 * batch * rows * inner * op.args[2].shape[-1], kind=MatmulKind.MATMUL)


@register(["_trilinear"], Category.COMPUTE, fusible=False)
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


@register(["_cdist_forward", "_euclidean_dist"], Category.COMPUTE, fusible=False)
def cdist_flops(op: TracedOp) -> FlopCount:
    """``cdist(x1 (…, P, M), x2 (…, R, M))``: all P·R pairs per batch (``_euclidean_dist`` is
    its p = 2 matrix-product path)."""
    p = _argument(op, "p") if op.base == "_cdist_forward" else 2.0
    return _distance_flops(_numel(op.output), op.args[0].shape[-1], p)


@register(["_pdist_forward"], Category.COMPUTE, fusible=False)
def pdist_flops(op: TracedOp) -> FlopCount:
    """``pdist(x (N, M))``: the N·(N − 1)/2 pairs of distinct rows, one output each."""
    p = _argument(op, "p")
    return _distance_flops(_numel(op.output), op.args[0].shape[-1], 2.0 if p is None else p)


@register(
    # the intercepted call, and the backends it decomposes into where interception cannot reach
    # (SDPA called inside another torch function such as F.multi_head_attention_forward)
    ["scaled_dot_product_attention", "_scaled_dot_product_efficient_attention",
     "_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention",
     "_scaled_dot_product_flash_attention_for_cpu"],
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
    if _argument(op, "is_causal"):
        query_len, key_len = q_shape[2], k_shape[2]
        # integer arithmetic: both matmuls' FLOPs are a multiple of L·S, so this is exact
        flops = flops * _causal_kept(query_len, key_len) // (query_len * key_len)
    return FlopCount(tensor=int(flops), kind=MatmulKind.ATTENTION)


def _argument(op: TracedOp, name: str) -> Any:
    """An aten argument by schema name, passed by keyword or by position (None if absent)."""
    if name in op.kwargs or op.func is None:
        return op.kwargs.get(name)
    names = [argument.name for argument in op.func._schema.arguments]
    position = names.index(name) if name in names else len(op.args)
    return op.args[position] if position < len(op.args) else None


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


@register(list(RNN_CELL_FLOPS), Category.COMPUTE, fusible=False)
def rnn_flops(op: TracedOp) -> FlopCount:
    """A cuDNN RNN: per layer and direction one input GEMM over all steps, one recurrent GEMM
    and the gate math per step. Launches: one input GEMM plus one step kernel per time step."""
    input_ = op.args[0]
    options = op.kwargs
    time_dim = 1 if options["batch_first"] and input_.dim() == 3 else 0
    steps = input_.shape[time_dim]
    batch = input_.numel() // (steps * input_.shape[-1])
    tensor = 0
    per_layer = options["weights_per_layer"]
    for index in range(0, len(options["weight_shapes"]), per_layer):
        w_ih, w_hh = options["weight_shapes"][index : index + 2]
        tensor += 2 * steps * batch * w_ih[0] * w_ih[1] + 2 * steps * batch * w_hh[0] * w_hh[1]
        if per_layer in (3, 5):  # LSTM projection weight w_hr: (proj, hidden)
            w_hr = options["weight_shapes"][index + per_layer - 1]
            tensor += 2 * steps * batch * w_hr[0] * w_hr[1]
    layers_and_directions = len(options["weight_shapes"]) // per_layer
    hidden = options["weight_shapes"][0][0] // options["gates"]
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


register(["_thnn_fused_lstm_cell"], Category.POINTWISE, fusible=False)(_fused_cell_flops("lstm"))
register(["_thnn_fused_gru_cell"], Category.POINTWISE, fusible=False)(_fused_cell_flops("gru"))


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
register(["_fft_c2c"], Category.COMPUTE, fusible=False)(
    _fft_flops(complex_fft_flops, lambda op: op.args[0].shape)
)
register(["_fft_r2c"], Category.COMPUTE, fusible=False)(
    _fft_flops(real_fft_flops, lambda op: op.args[0].shape)
)
register(["_fft_c2r"], Category.COMPUTE, fusible=False)(
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
    return rhs.shape[-2] if _argument(op, "left") is False else rhs.shape[-1]


@register(["linalg_lu_factor_ex", "linalg_lu", "_linalg_det", "_linalg_slogdet"],
          Category.COMPUTE, fusible=False)
@_linalg
def lu_factor_flops(op: TracedOp) -> int:
    """LU with partial pivoting (a determinant is its diagonal's product: n more multiplies,
    not counted)."""
    batch, rows, columns = _matrices(op.args[0])
    return batch * lu_flops(rows, columns)


@register(["_linalg_solve_ex"], Category.COMPUTE, fusible=False)
@_linalg
def solve_flops(op: TracedOp) -> int:
    """gesv: LU of A then substitution for each right-hand side."""
    batch, n, _ = _matrices(op.args[0])
    return batch * (lu_flops(n, n) + lu_solve_flops(n, _rhs(op)))


@register(["linalg_lu_solve", "cholesky_solve", "_cholesky_solve_helper"],
          Category.COMPUTE, fusible=False)
@_linalg
def factored_solve_flops(op: TracedOp) -> int:
    """A solve with factors already computed (LU or Cholesky): forward and back substitution,
    2·n²·k − n·k per system (the factor is the argument that is not the right-hand side)."""
    factor, rhs = (op.args[0], op.args[2]) if op.base == "linalg_lu_solve" else op.args[1::-1]
    n = factor.shape[-1]
    return math.prod(rhs.shape) // n * lu_solve_flops(n, 1)


@register(["cholesky_inverse"], Category.COMPUTE, fusible=False)
@_linalg
def cholesky_inverse_flops(op: TracedOp) -> int:
    """potri, the inverse from a Cholesky factor: 2n³/3 + n²/2 + 5n/6."""
    batch, n, _ = _matrices(op.args[0])
    return batch * ((4 * n**3 + 3 * n * n + 5 * n) // 6)


@register(["linalg_eig"], Category.COMPUTE, fusible=False)
@_linalg
def eig_flops(op: TracedOp) -> int:
    """General eigendecomposition: every dense method first reduces to Hessenberg form, gehrd,
    10n³/3 (Golub & Van Loan §7.4.3; the QR iterations and eigenvectors are not counted)."""
    batch, n, _ = _matrices(op.args[0])
    return batch * (10 * n**3) // 3


@register(["linalg_inv_ex"], Category.COMPUTE, fusible=False)
@_linalg
def inverse_flops(op: TracedOp) -> int:
    """getrf + getri (inverse from the LU factors): 2·n³ − 3n²/2 + 5n/2 in all, less than
    solving against the identity (8n³/3)."""
    batch, n, _ = _matrices(op.args[0])
    return batch * ((4 * n**3 - 3 * n * n + 5 * n) // 2)


@register(["linalg_cholesky_ex", "cholesky"], Category.COMPUTE, fusible=False)
@_linalg
def cholesky_flops(op: TracedOp) -> int:
    """potrf: n³/3 + n²/2 + n/6."""
    batch, n, _ = _matrices(op.args[0])
    return batch * ((2 * n**3 + 3 * n * n + n) // 6)


@register(["triangular_solve", "linalg_solve_triangular"], Category.COMPUTE, fusible=False)
@_linalg
def triangular_solve_flops(op: TracedOp) -> int:
    """trsm: n²·k for an n×n triangle and k right-hand sides (n·(n − 1)·k when unitriangular:
    no divides). Every right-hand-side column (or row, ``left=False``) costs the same, so the
    count is n (or n − 1) per element of the solution."""
    triangle = op.args[1] if op.base == "triangular_solve" else op.args[0]
    n = triangle.shape[-1]
    per_element = n - 1 if _argument(op, "unitriangular") else n
    solution = op.output[0] if isinstance(op.output, (tuple, list)) else op.output
    return solution.numel() * per_element


@register(["linalg_qr", "geqrf", "linalg_lstsq"], Category.COMPUTE, fusible=False)
@_linalg
def qr_flops(op: TracedOp) -> int:
    """geqrf, Householder QR of an m×n matrix: 2·M·k² − 2k³/3 (k = min, M = max; the lower-order
    terms are positive). Forming Q explicitly costs more and is not counted; a least-squares
    solve (``linalg_lstsq``) is charged its QR alone."""
    batch, rows, columns = _matrices(op.args[0])
    k, big = min(rows, columns), max(rows, columns)
    return batch * (2 * big * k * k - (2 * k**3) // 3)


@register(["_linalg_eigh"], Category.COMPUTE, fusible=False)
@_linalg
def eigh_flops(op: TracedOp) -> int:
    """Symmetric eigendecomposition: every dense method first reduces to tridiagonal form, sytrd,
    4n³/3 (eigenvectors cost more and are not counted)."""
    batch, n, _ = _matrices(op.args[0])
    return batch * (4 * n**3) // 3


@register(["_linalg_svd"], Category.COMPUTE, fusible=False)
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


@register(["affine_grid_generator"], Category.COMPUTE, fusible=False)
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
    ["gather", "index", "index_select", "embedding", "take", "_unsafe_index", "_embedding_bag",
     "_embedding_bag_forward_only", "upsample_nearest1d", "upsample_nearest2d",
     "upsample_nearest3d", "_upsample_nearest_exact1d", "_upsample_nearest_exact2d",
     "_upsample_nearest_exact3d", "diagonal_copy"],
    Category.DATA_MOVEMENT,
    fusible=True,
    reads=gathered_reads,
)(_no_flops)

register(
    [
        "cat", "stack", "_stack", "_chunk_cat", "lu_unpack", "constant_pad_nd", "pad",
        "reflection_pad1d", "reflection_pad2d",
        "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d",
        "repeat", "roll", "flip", "narrow_copy", "slice_scatter", "select_scatter",
        "as_strided_scatter", "diagonal_scatter",
        "upsample_bilinear2d", "_upsample_bilinear2d_aa", "upsample_linear1d", "upsample_bicubic2d",
        "_upsample_bicubic2d_aa", "_upsample_lanczos2d_aa", "grid_sampler_3d",
        "upsample_trilinear3d", "pixel_shuffle", "pixel_unshuffle", "im2col", "col2im",
        "masked_select", "repeat_interleave", "channel_shuffle", "grid_sampler_2d", "unfold_copy",
        "diag_embed", "diag", "diagflat", "rot90", "block_diag",
    ],
    Category.DATA_MOVEMENT,
    fusible=True,
)(_no_flops)

register(
    ["scatter", "scatter_add", "scatter_reduce", "index_put", "_index_put_impl",
     "_unsafe_index_put", "index_add", "index_copy", "index_fill", "masked_scatter", "nonzero",
     "unique", "_unique2", "_unique", "unique_consecutive", "unique_dim", "unique_dim_consecutive",
     "bincount", "histc", "nonzero_static", "max_unpool2d", "max_unpool3d", "put", "index_reduce",
     # a linalg op's error check: reads one int32 status per matrix, no arithmetic
     "_linalg_check_errors"],
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


register(["searchsorted"], Category.DATA_MOVEMENT, fusible=False)(_binary_search_flops(0))
register(["bucketize"], Category.DATA_MOVEMENT, fusible=False)(_binary_search_flops(1))

#: Ops with no rule: conservative default — input and output bytes, no FLOPs, own kernel.
UNSUPPORTED_RULE = CostRule(Category.DATA_MOVEMENT, _no_flops, fusible=False)


def cost_trace(trace: Trace) -> tuple[OpRecord, ...]:
    """Cost every traced op; ops with no rule get :data:`UNSUPPORTED_RULE` (``has_rule=False``)."""
    return tuple(_cost_op(index, op) for index, op in enumerate(trace.ops))


#: In-place ops that overwrite their destination without loading it (``copy_``, fills, in-place
#: random generators): the trace sees the destination as an argument, the GPU never reads it.
#: ``masked_fill_`` loads only its mask and stores the value where the mask is true; which
#: positions those are is data, so its write stays the whole destination.
OVERWRITES_DESTINATION = frozenset(
    {"copy", "fill", "zero", "uniform", "normal", "bernoulli", "random", "exponential",
     "cauchy", "log_normal", "geometric", "masked_fill"}
)
#: In-place ops that store only the positions their source (last tensor argument) names;
#: accumulating ones also load those positions, the others load nothing of the destination.
STORES_SOURCE_POSITIONS = {
    "index_put": False, "_index_put_impl": False, "_unsafe_index_put": False, "scatter": False,
    "index_copy": False, "masked_scatter": False, "put": False, "index_reduce": True,
    "index_fill": False, "scatter_add": True, "index_add": True, "scatter_reduce": True,
}


def _has_out_argument(op: TracedOp) -> bool:
    arguments = op.func._schema.arguments if op.func is not None else ()
    return any(a.name == "out" and a.alias_info and a.alias_info.is_write for a in arguments)


def _writes_first_argument(op: TracedOp) -> bool:
    arguments = op.func._schema.arguments if op.func is not None else ()
    return bool(arguments) and bool(arguments[0].alias_info and arguments[0].alias_info.is_write)


def in_place_accesses(
    op: TracedOp, reads: tuple[TensorRef, ...]
) -> tuple[tuple[TensorRef, ...], tuple[TensorRef, ...]]:
    """(reads, writes) of an op, with the destination of the in-place ops above charged only
    for what the GPU really loads and stores. A destination that is not loaded stays a read of
    zero elements: what the op leaves untouched is still the previous version's data, so that
    version must exist (a ``zeros`` then ``y[:, :k] = x`` writes all of ``y``)."""
    if not op.writes or not reads:
        return reads, op.writes
    if _has_out_argument(op):
        # an out= buffer (the last tensor argument) is only written: its read loads nothing
        *inputs, out = reads
        return (*inputs, replace(out, elements=0)), op.writes
    if not _writes_first_argument(op):
        return reads, op.writes
    destination, *rest = reads
    if op.base in OVERWRITES_DESTINATION:
        return (replace(destination, elements=0), *rest), op.writes
    if op.base in STORES_SOURCE_POSITIONS and rest:
        # a broadcast scalar value stores one element per index, not one in all
        stored = min(max(ref.elements for ref in rest), destination.elements)
        writes = tuple(replace(ref, elements=min(ref.elements, stored)) for ref in op.writes)
        loaded = stored if STORES_SOURCE_POSITIONS[op.base] else 0
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
    if op.func is None or op.func._schema.is_mutable:
        return ()
    if torch.Tag.nondeterministic_seeded in op.func.tags:
        return ()
    return (op.name, _layout_key((op.args, op.kwargs)))


def _layout_key(tree: Any) -> Any:
    if isinstance(tree, torch.Tensor):
        return (tuple(tree.shape), tuple(tree.stride()), tree.dtype)
    if isinstance(tree, (list, tuple)):
        return tuple(_layout_key(item) for item in tree)
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
    names = {argument.name for argument in op.func._schema.arguments}
    if "running_mean" in names:
        training = "training" in names and _argument(op, "training")
        return tuple(d for d in range(rank) if d != 1) if training else ()
    if "normalized_shape" in names:
        return tuple(range(rank - len(_argument(op, "normalized_shape")), rank))
    if "dim" not in names:
        return tuple(range(rank)) if _numel(op.output) == 1 else None
    dim = _argument(op, "dim")
    dims = [dim] if isinstance(dim, int) else list(dim or range(rank))
    return tuple(sorted({d % rank for d in dims})) if rank else ()
