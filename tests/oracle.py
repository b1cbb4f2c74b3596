"""A dependence oracle for the bound: which elements the kept outputs provably need.

The program runs on small real CPU tensors (float64) with autograd, and the gradient of a random
weighting of its kept outputs, Σ output · w (w random, one weight per float output element), is
taken with respect to every input, parameter and buffer. An element with a nonzero gradient
changes the outputs when it changes, so every correct implementation must read it. The program
is also traced at the aten level (``make_fx``) and replayed with every op's output retaining its
gradient: an op output element with a nonzero gradient is a demanded output of that op.

Zero gradient proves nothing (relu, max, where and the saturated side of a softmax have zero
partials where the value still matters), so the oracle is a floor under the truth: the bound
may never be below it. Rounding leaves tiny gradients where the true derivative is zero (the sum
of a softmax row), so a gradient counts only above ``RELATIVE_ZERO`` of the largest one.
"""

from __future__ import annotations

import copy
import difflib
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx import Interpreter
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_flatten

from conftest import Fn
from torchroofline.price.roofline import Result
from torchroofline.price.shortcuts import charged_record

#: a gradient this far below the largest one (float64: 1e-16 rounding) is taken for zero
RELATIVE_ZERO = 1e-10


@dataclass(frozen=True)
class LeafDemand:
    """One input, parameter or buffer: how many of its elements the kept outputs provably need."""

    name: str  #: ``input 0``, or the parameter's or buffer's name
    necessary: int  #: elements with a nonzero gradient
    elements: int
    itemsize: int  #: bytes of one element as the model keeps it (float64 here: see ``bytes``)
    is_float: bool


@dataclass(frozen=True)
class OpDemand:
    """One non-view aten op of the replay: its demanded output elements."""

    name: str  #: e.g. ``aten.convolution.default``
    demanded: int  #: output elements with a nonzero gradient
    elements: int  #: output elements
    #: FLOPs the demanded outputs need, for the ops of ``DEMANDED_FLOPS``; None: every output
    #: costs the same, its share of the op's FLOPs
    demanded_flops: int | None = None
    #: for the ops of ``DIFFERENCES``: the share of the op's FLOPs its demanded outputs need,
    #: the positions where its two inputs ever differ (elsewhere its output is the constant 0)
    flop_share: float | None = None


@dataclass(frozen=True)
class Oracle:
    """The proven demand of one program run."""

    leaves: tuple[LeafDemand, ...]
    #: elements of the float outputs the program returns and of the float inputs and buffers
    #: it overwrites
    output_elements: int
    output_other_bytes: int  #: bytes of its integer and bool outputs and overwritten tensors
    ops: tuple[OpDemand, ...]

    def input_bytes(self, float_bytes: int) -> int:
        """Bytes of the provably needed input, parameter and buffer elements, floats counted at
        ``float_bytes`` (the analysed precision)."""
        return sum(leaf.necessary * float_bytes for leaf in self.leaves if leaf.is_float)

    def bytes(self, float_bytes: int) -> int:
        """What any implementation must move: the needed inputs read once, the outputs written
        once (the figure to compare with ``Result.compulsory_bytes``)."""
        return self.input_bytes(float_bytes) + self.output_bytes(float_bytes)

    def output_bytes(self, float_bytes: int) -> int:
        """Bytes of the outputs (bar views of inputs) and of the inputs and buffers the
        program overwrites, floats at ``float_bytes``."""
        return self.output_elements * float_bytes + self.output_other_bytes


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {**dict(model.named_parameters()), **dict(model.named_buffers())}


def _leaf(tensor: torch.Tensor, differentiable: bool) -> torch.Tensor:
    return tensor.detach().clone().requires_grad_(differentiable and tensor.is_floating_point())


def _weighted_sum(outputs: Any, aliases: set[int], generator: torch.Generator) -> torch.Tensor:
    """Σ output · w over every float output with a gradient bar ``aliases`` (positions in
    the flattened outputs), w uniform in [1, 2) (no zero)."""
    total = torch.zeros((), dtype=torch.float64)
    for position, out in enumerate(tree_flatten(outputs)[0]):
        if position in aliases:
            continue
        if isinstance(out, torch.Tensor) and out.is_floating_point() and out.requires_grad:
            weights = 1 + torch.rand(out.shape, dtype=out.dtype, generator=generator)
            total = total + (out * weights).sum()
    return total


def _output_sizes(outputs: Any, aliases: set[int]) -> tuple[int, int]:
    """Elements of the float outputs and bytes of the others, views of inputs left out."""
    kept = [
        out for position, out in enumerate(tree_flatten(outputs)[0])
        if position not in aliases and isinstance(out, torch.Tensor)
    ]
    return (
        sum(out.numel() for out in kept if out.is_floating_point()),
        sum(out.numel() * out.element_size() for out in kept if not out.is_floating_point()),
    )


def _mutated(before: Sequence[Any], after: Sequence[Any]) -> tuple[int, int]:
    """Elements of the float inputs and buffers a run overwrote (its kept writes: running
    statistics, caches), and bytes of the other ones."""
    changed = [
        new for old, new in zip(before, after, strict=True)
        if isinstance(old, torch.Tensor) and not torch.equal(old, new)
    ]
    return (
        sum(t.numel() for t in changed if t.is_floating_point()),
        sum(t.numel() * t.element_size() for t in changed if not t.is_floating_point()),
    )


def _aliases(outputs: Any, values: Sequence[Any]) -> set[int]:
    """Positions of the outputs that are views of an input, parameter or buffer: returning
    one moves nothing, so nothing is needed for it."""
    storages = {
        v.untyped_storage().data_ptr() for v in values if isinstance(v, torch.Tensor)
    }
    return {
        position for position, out in enumerate(tree_flatten(outputs)[0])
        if isinstance(out, torch.Tensor) and out.untyped_storage().data_ptr() in storages
    }


def _convolution_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    """2 FLOPs per (input channel, in-bounds tap) pair of each demanded output: the count is
    the same convolution of all-ones data with all-ones filters (border outputs have fewer).
    ``args[0]`` is the taps, not the data: 0 on the zeros of an explicit zero pad, which count
    as padding (see ``_Retaining``), 1 elsewhere."""
    taps, weight = args[0].detach(), args[1].detach()
    ones = taps, torch.ones_like(weight)
    pairs = torch.ops.aten.convolution.default(*ones, None, *args[3:])
    return int(2 * pairs[demanded].sum())


def _lines_flops(demanded: torch.Tensor, line_dims: Sequence[int]) -> int:
    """2 FLOPs per element of every line (the elements over ``line_dims``) holding a demanded
    output: any output of a softmax or normalisation needs its line's statistics, at least
    one exp or square and one add per element."""
    dims = [d % demanded.dim() for d in line_dims]
    line = math.prod(demanded.shape[d] for d in dims)
    if line == 1:  # a softmax over one element is 1, a norm of one element 0: constants
        return 0
    touched = demanded.any(dim=dims) if dims else demanded
    return 2 * int(touched.sum()) * line


def _softmax_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    """2 FLOPs per finite score (an exp, an add) of every line holding a demanded output and
    two finite scores or more: exp(−inf) is 0, and a line of one finite score is the constant
    one-hot (none: NaN)."""
    finite = args[0].detach().isfinite()
    dim = args[1] % finite.dim()
    counts = finite.sum(dim)
    touched = demanded.any(dim) & (counts > 1)
    return 2 * int(counts[touched].sum())


def _layer_norm_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    return _lines_flops(demanded, range(-len(args[1]), 0))


def _group_norm_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    batch, groups = demanded.shape[0], args[6]
    return _lines_flops(demanded.reshape(batch, groups, -1), [2])


def _reduction_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    """n − 1 FLOPs per demanded output of a reduction over n elements: combining n values
    takes n − 1 binary operations (none over dims of size 1)."""
    data = args[0]
    dims = args[1] if len(args) > 1 else range(data.dim())
    dims = [dims] if isinstance(dims, int) else list(dims) or range(data.dim())
    reduced = math.prod(data.shape[d] for d in dims)
    return int(demanded.sum()) * (reduced - 1)


def _norm_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    """2n − 1 FLOPs per demanded output of a vector norm over n elements: each element's
    absolute value (or square), then n − 1 folds; the root at the end not counted (a floor).
    ``linalg_vector_norm``'s arguments: x, ord, dim (None: every dim), keepdim."""
    dims = args[2] if len(args) > 2 and args[2] is not None else ()
    folds = _reduction_flops((args[0], dims), demanded)
    return 2 * folds + int(demanded.sum())


def _sum_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    """k − 1 adds per demanded output of a sum or mean whose line holds k elements that may be
    nonzero: ``args[0]`` is the taps, 0 on the structural zeros of a zero pad, a triangle or a
    diagonal (see ``_Retaining``), 1 elsewhere."""
    taps, dims = args[0].detach(), args[1] if len(args) > 1 else None
    dims = [dims] if isinstance(dims, int) else list(dims or range(taps.dim()))
    keepdim = len(args) > 2 and bool(args[2])
    per_output = taps.sum(dims, keepdim=keepdim)
    return int((per_output - 1).clamp(min=0)[demanded].sum())


def _taps(args: Sequence[Any], ceil_position: int) -> torch.Tensor:
    """In-bounds taps of each window of a pooling op (padding and ``ceil_mode``'s overhang
    hold none): the window sums of all-ones data, padded with zeros."""
    data, kernel = args[0].detach(), args[1]
    stride = args[2] if len(args) > 2 and args[2] else kernel
    padding = args[3] if len(args) > 3 else 0
    ceil_mode = args[ceil_position] if len(args) > ceil_position else False
    pool = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[len(kernel) - 1]
    return pool(torch.ones_like(data), kernel, stride, padding, ceil_mode,
                count_include_pad=False, divisor_override=1)


def _max_pool_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    """n − 1 compares per demanded window of n in-bounds taps (dilated windows: one per
    output, as their taps are not counted here)."""
    if len(args) > 4 and any(d != 1 for d in args[4]):
        return int(demanded.sum())
    return int((_taps(args, 5) - 1)[demanded].sum())


def _avg_pool_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    """n − 1 adds per demanded window of n in-bounds taps."""
    return int((_taps(args, 4) - 1)[demanded].sum())


def _attention_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    """Per kept (query row, key) pair, 2·E FLOPs for the score once any output of the row is
    demanded and 2 per demanded output for its value product (``flash_attention_for_cpu``'s
    arguments: query, key, value, dropout, is_causal; causal masks are top-left aligned). A row
    that attends one key needs none: a softmax of one score is 1, the row that key's values."""
    query, key = args[0], args[1]
    causal = len(args) > 4 and bool(args[4])
    rows, keys = query.shape[-2], key.shape[-2]
    kept = torch.ones(rows, keys).tril() if causal else torch.ones(rows, keys)
    per_row = kept.sum(-1)  # keys each query row attends to
    per_row = per_row * (per_row > 1)
    row_demanded = demanded.any(-1).double()
    return int(2 * query.shape[-1] * (row_demanded * per_row).sum()
               + 2 * (demanded.double() * per_row[:, None]).sum())


def _product_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    """2k − 1 FLOPs (k multiplies, k − 1 adds) per demanded output of ``mm`` or ``bmm`` with k
    contracted positions where both factors may be nonzero: ``args[0]`` and ``args[1]`` are
    the taps, 0 on the structural zeros of a triangle, a diagonal or a masked softmax (and on
    the exact 1 of its one-hot line: a copy), 1 elsewhere (see ``_Retaining``), so their
    product counts the pairs. A Gram product (``args[2]``: the right factor holds the left's
    values transposed, x·xᵀ) is symmetric: of out[i, k] and out[k, i] one is computed and
    copied, so a demanded pair costs one output's FLOPs (a SYRK)."""
    pairs = torch.matmul(args[0].detach(), args[1].detach())
    if args[2]:
        demanded = (demanded | demanded.transpose(-1, -2)).triu()
    return int((2 * pairs - 1).clamp(min=0)[demanded].sum())


def _biased_product_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    """2k FLOPs (k multiply-adds, the bias's add among them) per demanded output of
    ``addmm(bias, a, b)`` with k contracted positions where both factors may be nonzero
    (``args[1]`` and ``args[2]`` the taps, as :func:`_product_flops`'s); none where k = 0:
    the output is the bias (an RNN cell's ``zeros(h) @ W_hhᵀ + b_hh`` from no given state)."""
    pairs = torch.matmul(args[1].detach(), args[2].detach()).expand(demanded.shape)
    return int((2 * pairs)[demanded].sum())


def _fft_flops(args: Sequence[Any], demanded: torch.Tensor, part: int | None = None) -> int:
    """(n − 1) + (k − 1) ops per line of an FFT (the elements across its transformed dims)
    holding k ≥ 1 demanded outputs, n the line's input points: every output is a linear form
    with a nonzero weight (|w| = 1) on each input point, so the first needs n − 1 adds, and
    each other, a distinct form of the same inputs, one op more (none for a line of one
    point: a copy). Of a real FFT along one dim whose outputs are kept for one ``part`` alone
    (0 real, 1 imaginary: ``fft(x).imag``), which weighs some points by 0 (x_0): the most
    points one demanded output weighs less one, and one op for each other demanded output
    weighing any."""
    dims = [d % demanded.dim() for d in args[1]]
    if part is not None and len(dims) == 1 and not args[0].is_complex():
        n = args[0].shape[dims[0]]
        lines = demanded.movedim(dims[0], -1).reshape(-1, demanded.shape[dims[0]])
        phase = torch.outer(torch.arange(n, dtype=torch.float64),
                            torch.arange(lines.shape[1], dtype=torch.float64)) * (2 * math.pi / n)
        weighs = (phase.cos() if part == 0 else phase.sin()).abs() > 1e-9
        live = lines & weighs.any(0)
        most = (weighs.sum(0) * live).amax(1)
        kept = live.sum(1)
        return int((most - 1 + kept - 1)[kept > 0].sum())
    points = math.prod(args[0].shape[d] for d in dims)
    per_line = demanded.sum(dims)
    lines = per_line > 0
    return 0 if points < 2 else int((points - 2 + per_line[lines]).sum())


def _scatter_add_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    """One fold (an add, a compare) per (index, source) pair landing on a demanded output of
    ``scatter_add`` or ``scatter_reduce`` (the old value is data: each pair's fold is needed;
    k − 1 for k pairs without ``include_self``), and a mean's divide per demanded output some
    pair lands on: the landings are the same scatter of ones into zeros."""
    data, dim, index = args[0].detach(), args[1], args[2]
    ones = torch.ones(index.shape, dtype=data.dtype)
    landings = torch.zeros_like(data).scatter_add(dim, index, ones)[demanded]
    reduce = args[4] if len(args) > 4 else "sum"
    include_self = args[5] if len(args) > 5 else True
    folds = landings.sum() if include_self else (landings - 1).clamp(min=0).sum()
    return int(folds + ((landings > 0).sum() if reduce == "mean" else 0))


def _index_add_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    """One add per source element landing on a demanded output of ``index_add`` (and a
    multiply by ``alpha`` unless it is 1): the landings are the same index_add of ones."""
    data, dim, index, source = args[0].detach(), args[1], args[2], args[3]
    landings = torch.zeros_like(data).index_add(dim, index, torch.ones_like(source.detach()))
    alpha = args[4] if len(args) > 4 else 1
    return int(landings[demanded].sum()) * (1 if alpha == 1 else 2)


def _col2im_flops(args: Sequence[Any], demanded: torch.Tensor) -> int:
    """k − 1 adds per demanded output of a fold (``col2im``) that k column elements land on
    (none where k is 0 or 1): the landings are the same fold of ones."""
    columns = torch.ones_like(args[0].detach())
    landings = torch.ops.aten.col2im.default(columns, *args[1:])
    return int((landings[demanded] - 1).clamp(min=0).sum())


#: aten op → FLOPs its demanded outputs provably need (from its arguments and the mask of its
#: first output's demanded elements), for ops whose outputs do not each cost the same: border
#: outputs of a convolution or a padded pool, lines that share statistics, rows of causal
#: attention, reductions (none over size-1 dims)
DEMANDED_FLOPS: dict[Any, Callable[[Sequence[Any], torch.Tensor], int]] = {
    torch.ops.aten.convolution.default: _convolution_flops,
    torch.ops.aten._softmax.default: _softmax_flops,
    torch.ops.aten._log_softmax.default: _softmax_flops,
    torch.ops.aten.native_layer_norm.default: _layer_norm_flops,
    torch.ops.aten.native_group_norm.default: _group_norm_flops,
    torch.ops.aten.sum.dim_IntList: _sum_flops,
    torch.ops.aten.mean.dim: _sum_flops,
    torch.ops.aten.amax.default: _reduction_flops,
    torch.ops.aten.prod.dim_int: _reduction_flops,
    torch.ops.aten.prod.default: _reduction_flops,
    torch.ops.aten.nansum.default: _reduction_flops,
    torch.ops.aten.amin.default: _reduction_flops,
    torch.ops.aten.max.dim: _reduction_flops,
    torch.ops.aten.min.dim: _reduction_flops,
    torch.ops.aten.logsumexp.default: _reduction_flops,
    torch.ops.aten.linalg_vector_norm.default: _norm_flops,
    # (x, p, dim, keepdim): linalg_vector_norm's arguments (a triplet loss's distances)
    torch.ops.aten.norm.ScalarOpt_dim: _norm_flops,
    torch.ops.aten.max_pool2d_with_indices.default: _max_pool_flops,
    torch.ops.aten.max_pool3d_with_indices.default: _max_pool_flops,
    torch.ops.aten.avg_pool2d.default: _avg_pool_flops,
    torch.ops.aten.avg_pool3d.default: _avg_pool_flops,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default: _attention_flops,
    torch.ops.aten.scatter_add.default: _scatter_add_flops,
    torch.ops.aten.scatter_reduce.two: _scatter_add_flops,
    torch.ops.aten.col2im.default: _col2im_flops,
    torch.ops.aten.index_add.default: _index_add_flops,
    torch.ops.aten.mm.default: _product_flops,
    torch.ops.aten.bmm.default: _product_flops,
    torch.ops.aten._fft_r2c.default: _fft_flops,
    torch.ops.aten._fft_c2c.default: _fft_flops,
    torch.ops.aten._fft_c2r.default: _fft_flops,
    torch.ops.aten.addmm.default: _biased_product_flops,
}


def _triangle_zeros(keep: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    return lambda args, out: ~keep(torch.ones(out.shape, dtype=bool), *args[1:])


#: ops whose output is zero at places their arguments fix (the bound's ``ZERO_PATTERNS``; a
#: zero pad is tracked on its own, as convolutions fold it into their padding): (the op's
#: arguments, its output) → where those zeros are
STRUCTURAL_ZEROS: dict[Any, Callable[[Sequence[Any], torch.Tensor], torch.Tensor]] = {
    torch.ops.aten.tril.default: _triangle_zeros(torch.tril),
    torch.ops.aten.triu.default: _triangle_zeros(torch.triu),
    torch.ops.aten.diag_embed.default: lambda args, out: ~torch.diag_embed(
        torch.ones(args[0].shape, dtype=bool), *args[1:]
    ),
    # a tensor of zeros made in forward (an RNN cell's state when none is given)
    torch.ops.aten.zeros.default: lambda args, out: torch.ones(out.shape, dtype=torch.bool),
    # exp(−inf) = 0 (a masked score); a line of one finite score is the one-hot, its 1 a copy
    torch.ops.aten._softmax.default: lambda args, out: (
        ~args[0].detach().isfinite()
        | (args[0].detach().isfinite().sum(args[1], keepdim=True) <= 1)
    ),
}

#: FFTs, whose outputs' real or imaginary part alone weighs fewer points
FFTS = {torch.ops.aten._fft_r2c.default, torch.ops.aten._fft_c2c.default,
        torch.ops.aten._fft_c2r.default}

#: differences of their two inputs and losses of one, f(a − b) with f(0) = 0 (the bound's
#: ``_DIFFERENCES``): where the inputs are equal in every run (one element of one tensor,
#: ``x − x.flip(1)``'s middle column) the output is the constant 0, written with no FLOP
DIFFERENCES = {
    torch.ops.aten.sub.Tensor, torch.ops.aten.mse_loss.default,
    torch.ops.aten.smooth_l1_loss.default, torch.ops.aten.huber_loss.default,
}

#: ops the graph (traced without autograd) holds in a form autograd has no formula for →
#: the same op with one, run in their place (the replay keeps the traced name)
REPLAYED_AS = {
    torch.ops.aten._embedding_bag_forward_only.default: torch.ops.aten._embedding_bag.default,
}

#: matrix products whose left operand's structural zeros are no products
PRODUCTS = {torch.ops.aten.mm.default, torch.ops.aten.bmm.default}

#: reductions that add their line: adding a structural zero is no work
SUMS = {torch.ops.aten.sum.dim_IntList, torch.ops.aten.mean.dim}


def _positional(target: Any, args: tuple, kwargs: dict) -> tuple:
    """``args`` and then the op's keyword-only arguments, in its schema's order (defaults where
    not given): ``scatter_reduce``'s ``include_self`` at position 5."""
    rest = target._schema.arguments[len(args):]
    return (*args, *(
        kwargs.get(a.name, a.default_value if a.has_default_value() else None) for a in rest
    ))


class _Retaining(Interpreter):
    """Replays an aten graph; every non-view op's tensor outputs keep their gradient."""

    def __init__(self, graph_module: torch.fx.GraphModule) -> None:
        super().__init__(graph_module)
        self.kept: list[tuple[str, list[torch.Tensor]]] = []
        #: index in ``kept`` → the op's arguments (ops in ``DEMANDED_FLOPS``)
        self.arguments: dict[int, tuple[Any, Any]] = {}
        #: id of a tensor → the tensor (kept, so the id is not reused) and where it holds
        #: zeros a zero ``constant_pad_nd`` put there
        self.padded_zeros: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        #: the same for the zeros of the ops of ``STRUCTURAL_ZEROS``
        self.structural_zeros: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        #: (index in ``kept``, output position) → the gradient of that output as the op wrote it
        self.grads: dict[tuple[int, int], torch.Tensor] = {}
        #: index in ``kept`` → where the two inputs of a difference (``DIFFERENCES``) differ
        self.differing: dict[int, torch.Tensor] = {}

    def _keep(self, key: tuple[int, int], grad: torch.Tensor) -> None:
        self.grads[key] = grad

    def _padded_zeros(self, tensor: torch.Tensor) -> torch.Tensor:
        _, zeros = self.padded_zeros.get(id(tensor), (None, torch.zeros(tensor.shape, dtype=bool)))
        return zeros

    def _taps(self, tensor: torch.Tensor) -> torch.Tensor:
        """1 where ``tensor`` may be nonzero, 0 on the zeros a pad or a structural op put
        there, in its dtype."""
        zeros = self._padded_zeros(tensor)
        _, more = self.structural_zeros.get(id(tensor), (None, zeros))
        return (~(zeros | more)).to(tensor.dtype)

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        out = super().call_function(REPLAYED_AS.get(target, target), args, kwargs)
        if target is torch.ops.aten.constant_pad_nd.default and not (args[2:] and args[2]):
            self.padded_zeros[id(out)] = (out, F.pad(self._padded_zeros(args[0]), args[1],
                                                     value=True))
        if target in STRUCTURAL_ZEROS:
            self.structural_zeros[id(out)] = (out, STRUCTURAL_ZEROS[target](args, out))
        if isinstance(target, torch._ops.OpOverload) and target.is_view and args:
            # a view of zeros holds them where it reads them (F.pad(x[None], p)[0])
            for zeros in (self.padded_zeros, self.structural_zeros):
                if id(args[0]) in zeros and isinstance(out, torch.Tensor):
                    zeros[id(out)] = (out, target(zeros[id(args[0])][1], *args[1:], **kwargs))
        if target is torch.ops.aten.convolution.default:
            # a product with a padded zero is no work (the bound folds such a pad into the
            # convolution's own padding): the taps are the other elements
            args = ((~self._padded_zeros(args[0])).to(args[0].dtype), *args[1:])
        if target in SUMS:
            args = (self._taps(args[0]), *args[1:])
        if target is torch.ops.aten.addmm.default:
            args = (args[0], self._taps(args[1]), self._taps(args[2]))
        if target in PRODUCTS:
            gram = torch.equal(args[0].detach(), args[1].detach().transpose(-1, -2))
            args = (self._taps(args[0]), self._taps(args[1]), gram)
        if isinstance(target, torch._ops.OpOverload) and not target.is_view:
            tensors = [
                t for t in tree_flatten(out)[0]
                if isinstance(t, torch.Tensor) and t.requires_grad and not t.is_leaf
                and (t.is_floating_point() or t.is_complex()) and t._base is None
            ]
            for position, tensor in enumerate(tensors):
                # a hook, not retain_grad: an in-place op after this one (masked_fill_ of a
                # loss) would move a retained gradient to its own output's
                tensor.register_hook(functools.partial(self._keep, (len(self.kept), position)))
            if target in DEMANDED_FLOPS:
                self.arguments[len(self.kept)] = (target, _positional(target, args, kwargs))
            if target in DIFFERENCES and kwargs.get("alpha", 1) == 1 and len(args) >= 2 and all(
                isinstance(a, torch.Tensor) for a in args[:2]
            ):
                left, right = torch.broadcast_tensors(args[0].detach(), args[1].detach())
                self.differing[len(self.kept)] = left != right
            self.kept.append((str(target), tensors))
        return out


def _double(module: nn.Module) -> nn.Module:
    """``module.double()``, and float tensors kept as plain attributes too (an RNN's initial
    state stored as ``self.h0``), so the run does not mix float32 and float64."""
    module.double()
    for sub in module.modules():
        for name, value in list(vars(sub).items()):
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                setattr(sub, name, value.double())
    return module


def _shuffled(tensor: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The same values in a random order: new data in the domain the model expects (a positive
    input stays positive), so a max or a relu picks other elements."""
    order = torch.randperm(tensor.numel(), generator=generator)
    return tensor.detach().reshape(-1)[order].reshape(tensor.shape)


def _perturbed(tensor: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Parameters plus noise: a norm's weights start all ones, and with equal weights the
    mean of a normalised group is constant, hiding a dependence that other weights show."""
    noise = torch.randn(tensor.shape, dtype=tensor.dtype, generator=generator)
    return tensor.detach() + 0.5 * noise


def oracle(
    model: nn.Module | Callable[..., Any],
    inputs: Sequence[Any],
    *,
    draws: int = 3,
    seed: int = 0,
    data: str = "any",
) -> Oracle:
    """The proven demand of ``model(*inputs)`` (float tensors run in float64), over ``draws``
    runs: the given data, then its values shuffled within each float input, and the parameters
    perturbed. A correct implementation is correct for every input, so an element needed in
    any run is needed; buffers keep their values (a causal mask is a constant, not data).
    ``data="given"`` proves the demand for these values only (the bound for the given inputs,
    ``analyze(data="given")``): one run, on the data as given, and no zero of a float input
    (its zeros are structure a kernel for these inputs may skip)."""
    if data == "given":
        draws = 1
    module = model if isinstance(model, nn.Module) else Fn(model)
    module = _double(copy.deepcopy(module))
    parameters, buffers = dict(module.named_parameters()), dict(module.named_buffers())
    state = {**parameters, **buffers}
    count = len(inputs)
    names = [f"input {i}" for i in range(count)] + list(state)
    originals = [
        (x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x)
        for x in inputs
    ] + list(state.values())
    differentiable = range(count + len(parameters))  # inputs and parameters; buffers stay

    def run(*values: Any) -> Any:
        # clones, so in-place ops on inputs and buffers act on non-leaf tensors
        values = [v.clone() if isinstance(v, torch.Tensor) else v for v in values]
        bound = dict(zip(state, values[count:], strict=True))
        return torch.func.functional_call(module, bound, tuple(values[:count]))

    def detached(x: Any) -> Any:
        return x.detach() if isinstance(x, torch.Tensor) else x

    with torch.no_grad():
        copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in originals]
        outputs = torch.func.functional_call(
            module, dict(zip(state, copies[count:], strict=True)), tuple(copies[:count])
        )
        aliases = _aliases(outputs, copies)
        mutated = _mutated(originals, copies)
    # functional ops only: a model that adds into a relu output in place (out += shortcut)
    # cannot be differentiated as written, its functional twin can
    graph = make_fx(torch.func.functionalize(run, remove="mutations"))(
        *map(detached, originals)
    )
    generator = torch.Generator().manual_seed(seed)
    leaf_masks: list[torch.Tensor | None] = [None] * len(originals)
    op_masks: list[list[torch.Tensor]] = []
    differing: dict[int, torch.Tensor] = {}
    #: index in ``kept`` → the parts (0 real, 1 imaginary) of a complex output with a gradient
    parts: dict[int, set[int]] = {}
    for draw in range(draws):
        values = [
            (_shuffled if i < count else _perturbed)(x, generator)
            if draw and i in differentiable and isinstance(x, torch.Tensor)
            and x.is_floating_point()
            else x
            for i, x in enumerate(originals)
        ]
        leaves, replay, outputs = _replay(graph, values, differentiable, aliases, generator)
        grads = {
            i: (leaf.shape, leaf.grad) for i, leaf in enumerate(leaves)
            if isinstance(leaf, torch.Tensor)
        } | {
            (k, j): (t.shape, replay.grads.get((k, j)))
            for k, (_, tensors) in enumerate(replay.kept) for j, t in enumerate(tensors)
        }
        masks = _nonzero_masks(grads)
        for k, (_, tensors) in enumerate(replay.kept):
            grad = replay.grads.get((k, 0))
            if tensors and tensors[0].is_complex() and grad is not None:
                parts[k] = parts.get(k, set()) | {
                    i for i, half in enumerate((grad.real, grad.imag)) if bool(half.any())
                }
        differing = {k: _union(differing.get(k), new) for k, new in replay.differing.items()}
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, torch.Tensor):
                leaf_masks[i] = _union(leaf_masks[i], masks[i])
        kept = [
            [masks[k, j] for j in range(len(tensors))]
            for k, (_, tensors) in enumerate(replay.kept)
        ]
        op_masks = kept if not op_masks else [
            [a | b for a, b in zip(old, new, strict=True)]
            for old, new in zip(op_masks, kept, strict=True)
        ]
    if data == "given":
        # the given zeros are structure a kernel for these inputs may know (a triangle, a
        # padding): it needs to read no zero, however the outputs would move if one changed
        for i, x in enumerate(originals[:count]):
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                leaf_masks[i] = leaf_masks[i] & (x != 0)
    leaf_demands = tuple(
        LeafDemand(
            name=name,
            necessary=int(mask.sum()),
            elements=leaf.numel(),
            itemsize=leaf.element_size(),
            is_float=leaf.is_floating_point(),
        )
        for name, leaf, mask in zip(names, originals, leaf_masks, strict=True)
        if isinstance(leaf, torch.Tensor)
    )
    op_demands = tuple(
        OpDemand(
            name,
            sum(int(m.sum()) for m in masks),
            sum(m.numel() for m in masks),
            _demanded_flops(*replay.arguments[k], masks[0], parts.get(k, set()))
            if k in replay.arguments and masks else None,
            _difference_share(differing[k], masks[0]) if k in differing and masks else None,
        )
        for k, ((name, _), masks) in enumerate(zip(replay.kept, op_masks, strict=True))
    )
    floats, others = _output_sizes(outputs, aliases)
    return Oracle(leaf_demands, floats + mutated[0], others + mutated[1], op_demands)


def _demanded_flops(target: Any, args: Sequence[Any], demanded: torch.Tensor,
                    parts: set[int]) -> int:
    """``DEMANDED_FLOPS``' count for op ``target``; an FFT's for the one part of its outputs
    the program keeps, where it keeps one (``parts``)."""
    if target in FFTS and len(parts) == 1:
        return _fft_flops(args, demanded, next(iter(parts)))
    return DEMANDED_FLOPS[target](args, demanded)


def _difference_share(differing: torch.Tensor, demanded: torch.Tensor) -> float:
    """The share of a difference's FLOPs its ``demanded`` outputs need: of the positions, those
    demanded (every one where the output is one reduced loss) where the inputs ever differ."""
    if demanded.shape == differing.shape:
        differing = differing & demanded
    elif not demanded.any():
        return 0.0
    return int(differing.sum()) / differing.numel()


def _replay(
    graph: torch.fx.GraphModule,
    values: Sequence[Any],
    differentiable: range,
    aliases: set[int],
    generator: torch.Generator,
) -> tuple[list[Any], _Retaining, Any]:
    """One run of ``graph`` on ``values`` with autograd, back-propagated from a random
    weighting of its outputs bar ``aliases``; the values at the positions ``differentiable``
    get gradients."""
    leaves = [
        _leaf(x, i in differentiable) if isinstance(x, torch.Tensor) else x
        for i, x in enumerate(values)
    ]
    replay = _Retaining(graph)
    outputs = replay.run(*leaves)
    total = _weighted_sum(outputs, aliases, generator)
    if total.requires_grad:
        total.backward()
    return leaves, replay, outputs


def _nonzero_masks(
    grads: dict[Any, tuple[torch.Size, torch.Tensor | None]],
) -> dict[Any, torch.Tensor]:
    """key → where the gradient of that tensor (its shape, its gradient or None) is nonzero
    (above ``RELATIVE_ZERO`` of the largest of all)."""
    finite = [g[g.isfinite()].abs() for _, g in grads.values() if g is not None]
    scale = max((g.max().item() for g in finite if g.numel()), default=0.0)
    return {
        key: torch.zeros(shape, dtype=torch.bool) if grad is None
        else grad.isfinite() & (grad.abs() > scale * RELATIVE_ZERO)
        for key, (shape, grad) in grads.items()
    }


def _union(old: torch.Tensor | None, new: torch.Tensor) -> torch.Tensor:
    return new if old is None else old | new


@dataclass(frozen=True)
class OpTightness:
    """One op the bound and the oracle both see: the share of its FLOPs the bound charges
    against the share of its outputs the oracle proves demanded."""

    index: int  #: position in the analysed trace
    name: str
    charged_flops: int
    executed_flops: int
    demanded_share: float  #: the oracle's demanded outputs / outputs

    proven_flops: float  #: FLOPs the demanded outputs need


#: FLOP-free copies left out of the alignment of trace and replay
COPIES = {"aten.clone.default", "aten._to_copy.default", "aten.copy_.default"}


def _aligned(name: str) -> str:
    """The op's name for alignment: SDPA is traced as itself and replayed as the back end the
    CPU picks (``_scaled_dot_product_flash_attention_for_cpu``, ...)."""
    return "sdpa" if "scaled_dot_product" in name else name


def per_op(result: Result, proven: Oracle) -> list[OpTightness]:
    """The bound's FLOPs per op beside the oracle's demanded share, ops matched by name in
    execution order (the trace and the replay see the same aten ops, bar views)."""
    trace_ops = [
        (i, op) for i, op in enumerate(result.plans.trace.ops) if not op.is_view and op.writes
    ]
    # a structure rule may price an op inside a later one (a product read only by its column
    # sum: x @ W.sum(1)): its FLOPs are that op's, so it has none of its own to compare
    absorbed = set(result.necessary.absorbed_ops)
    # copies come and go with layout (the CPU flash kernel returns a layout in which
    # transpose-then-reshape is a view; the meta one does not), and have no FLOPs to compare:
    # left in, a stray clone pairs the next op with the wrong one
    trace_ops = [(i, op) for i, op in trace_ops if op.name not in COPIES]
    replay_ops = [op for op in proven.ops if op.name not in COPIES]
    matcher = difflib.SequenceMatcher(
        a=[_aligned(op.name) for _, op in trace_ops], b=[_aligned(op.name) for op in replay_ops],
        autojunk=False,
    )
    shortcut_taken = bool(result.rewrites)
    rows = []
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            index, op = trace_ops[block.a + k]
            demand = replay_ops[block.b + k]
            executed = result.plans.ops[index].flops
            if index in absorbed or not demand.elements or not (executed.tensor + executed.vector):
                continue
            record = charged_record(result, index)
            if record is None:  # an algebraic shortcut replaced it: some correct program skips it
                continue
            if shortcut_taken:
                # a shortcut moves work between ops (a sum through a linear map or a diagonal
                # scale reads their inputs summed): an op's FLOPs are then the rewritten
                # program's, not a share of the op as written; the bytes stay checked
                continue
            charged = record.flops
            share = demand.demanded / demand.elements
            flop_share = share if demand.flop_share is None else demand.flop_share
            executed_flops = executed.tensor + executed.vector
            # (rounded down, as the bound rounds a share of an op's FLOPs: 4 of 18 outputs
            # of a 15-FLOP op need 3, not 3.33)
            needed = math.floor(flop_share * executed_flops) if demand.demanded_flops is None else (
                demand.demanded_flops
            )
            rows.append(OpTightness(
                index, op.name, charged.tensor + charged.vector, executed_flops, share, needed
            ))
    return rows
