"""The algebraic rules (torchroofline.algebra): each identity with a closed form where it fires
and a program where it must not (a nonlinearity between, an in-place write between the reads);
convolutions in tests/plan/test_algebra_convs.py. How the result, the JSON, the report and the
prompt name a shortcut: tests/price/test_shortcuts.py.

Sizes are large (meta tensors: free) so that the products are compute-bound and a shortcut
lowers the speed of light; FLOPs are counted as the cost rules count them: a product
2·M·K·N, a sum or mean one add per input element, a pointwise op one per output element.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import Fn, analyze, meta
from torchroofline.plan.algebra import chain_order
from torchroofline.plan.algebra._core import Graph, rules_for
from torchroofline.plan.demand import known_values
from torchroofline.price.roofline import Result
from torchroofline.trace.tracer import trace_model

M, K, N = 2048, 1024, 512


class _With(nn.Module):
    """``forward`` is ``fn(self, *inputs)``; the keyword modules and parameters are attributes."""

    def __init__(self, fn: Callable[..., Any], **parts: Any) -> None:
        super().__init__()
        self.fn = fn
        for name, part in parts.items():
            setattr(self, name, part)

    def forward(self, *inputs: Any) -> Any:
        return self.fn(self, *inputs)


def _weight(*shape: int) -> nn.Parameter:
    return nn.Parameter(torch.empty(shape, device="meta"))


def _rules(result: Result) -> list[tuple[str, str]]:
    return [(shortcut.module, shortcut.rule) for shortcut in result.rewrites]


# --- linear maps commute with sums and means ---------------------------------------------------


def test_a_column_sum_through_a_scale_is_a_matrix_vector_product() -> None:
    # (x @ W / 2).sum(1) * 1.5 = (x @ (W.sum(1) / 2)) * 1.5: 2·M·K tensor FLOPs; K·N adds to
    # sum W, K multiplies for the 1/2 (on the smallest factor), then the × 1.5 per row
    model = _With(lambda s, x: (x @ s.w / 2).sum(1, keepdim=True) * 1.5, w=_weight(K, N))
    result = analyze(model, meta(M, K))
    assert (result.tensor_flops, result.vector_flops) == (2 * M * K, K * N + K + M)
    assert _rules(result) == [("", "sum through the linear map")]
    shortcut = result.rewrites[0]
    assert shortcut.flops_before == 2 * M * K * N + 2 * M * N  # the product, divide and sum
    assert shortcut.flops_after == 2 * M * K + K * N + K
    assert result.time_ms["sol_as_written"] > result.time_ms["sol"]


def test_a_nonlinearity_between_the_product_and_the_sum_stops_the_rule() -> None:
    model = _With(lambda s, x: torch.relu(x @ s.w).sum(1), w=_weight(K, N))
    result = analyze(model, meta(M, K))
    assert result.tensor_flops == 2 * M * K * N
    assert not result.rewrites and "sol_as_written" not in result.time_ms


def test_a_sum_over_a_transposed_product_sums_the_products_rows() -> None:
    # (x @ W)ᵀ.sum(1) = Σ over the product's rows = x.sum(0) @ W: M·K adds, 2·K·N
    model = _With(lambda s, x: (x @ s.w).T.sum(1), w=_weight(K, N))
    result = analyze(model, meta(M, K))
    assert (result.tensor_flops, result.vector_flops) == (2 * K * N, M * K)


def test_a_sum_over_a_transposed_product_is_no_column_sum() -> None:
    # ((x @ W) / 2)ᵀ.sum(1) sums the product's rows (a column sum would have the right shape
    # and the wrong value: the float64 check "transposed-square" below): (x.sum(0) / 2) @ W,
    # K² adds and K halvings, then 2·K² for the vector-matrix product
    model = _With(lambda s, x: ((x @ s.w) / 2).T.sum(1), w=_weight(K, K))
    result = analyze(model, meta(K, K))
    assert (result.tensor_flops, result.vector_flops) == (2 * K**2, K**2 + K)


def test_a_linear_layer_on_a_3d_input_then_a_mean_over_features() -> None:
    # B·M rows: 2·B·M·K tensor FLOPs; K·N (Σ W) + K (its 1/N) + N (Σ b) + 1 (its 1/N), and
    # the bias term added to each row
    batch = 4
    model = _With(lambda s, x: s.fc(x).mean(-1), fc=nn.Linear(K, N, device="meta"))
    result = analyze(model, meta(batch, M, K))
    assert result.tensor_flops == 2 * batch * M * K
    assert result.vector_flops == K * N + K + N + 1 + batch * M
    assert _rules(result) == [("fc", "sum through the linear map")]


def test_a_sum_over_rows_is_the_summed_rows_times_the_matrix() -> None:
    # (x @ W).sum(0) = x.sum(0) @ W: M·K adds, then 2·K·N
    model = _With(lambda s, x: (x @ s.w).sum(0), w=_weight(K, N))
    result = analyze(model, meta(M, K))
    assert (result.tensor_flops, result.vector_flops) == (2 * K * N, M * K)


def test_kernelbench_51_subtract_then_mean_moves_into_the_gemm() -> None:
    # mean(x @ Wᵀ + b − c, 1) = x @ (ΣW / N) + Σ(b − c) / N: K·N + K for W; b − c (N, the
    # common factor of two terms taken out), its sum (N) and the 1/N (1); added to each row (M)
    model = _With(
        lambda s, x: (s.gemm(x) - s.c).mean(1, keepdim=True),
        gemm=nn.Linear(K, N, device="meta"), c=_weight(N),
    )
    result = analyze(model, meta(M, K))
    assert result.tensor_flops == 2 * M * K
    assert result.vector_flops == K * N + K + 2 * N + 1 + M


def test_a_channel_sum_of_a_convolution_is_a_one_channel_convolution() -> None:
    # Σ_co conv(x, W) = conv(x, Σ_co W): 2·Cin·k² per output pixel of one channel
    n, cin, cout, size, k = 64, 64, 128, 64, 3
    model = _With(lambda s, x: s.conv(x).sum(1), conv=nn.Conv2d(cin, cout, k, device="meta"))
    result = analyze(model, meta(n, cin, size, size))
    out = size - k + 1
    assert result.tensor_flops == 2 * cin * k * k * n * out * out
    assert _rules(result) == [("conv", "sum through the linear map")]


def test_kernelbench_42_uncropped_transposed_conv_then_global_mean() -> None:
    # Σ_p convT(x, W)[n, co] = Σ_ci (Σ x[n, ci])·(Σ_t W[ci, co, t]) + |p|·b[co]: one
    # (N, Cin) @ (Cin, Cout) product
    n, cin, cout, size = 64, 64, 128, 64
    conv = nn.ConvTranspose2d(cin, cout, 3, stride=2, device="meta")
    model = _With(lambda s, x: s.conv(x).mean((2, 3), keepdim=True), conv=conv)
    result = analyze(model, meta(n, cin, size, size))
    assert result.tensor_flops == 2 * n * cin * cout


def test_a_global_mean_of_a_padded_convolution_sums_boxes_of_the_input() -> None:
    # each tap sums the input box it reaches (prefix sums, borders cut), then one
    # (N, Cin·9) @ (Cin·9, Cout) product: 2·N·Cin·9·Cout tensor FLOPs
    n, cin, cout, size = 64, 64, 128, 64
    conv = nn.Conv2d(cin, cout, 3, padding=1, device="meta")
    model = _With(lambda s, x: s.conv(x).mean((2, 3)), conv=conv)
    result = analyze(model, meta(n, cin, size, size))
    assert result.tensor_flops == 2 * n * cin * 9 * cout
    assert _rules(result) == [("conv", "sum through the linear map")]


@pytest.mark.parametrize(("change", "flops"), [
    # W shifted in place: the sum must use the W the product read, which is no longer held
    (lambda w: w.add_(1), 2 * M * K * N),
    # W doubled in place: the W the product read is W′/2, so Σₙ (x·W/2)[:, n] is
    # x·(Σₙ W′[:, n])/4, a matrix-vector product (2·M·K tensor FLOPs)
    (lambda w: w.mul_(2), 2 * M * K),
], ids=["shifted", "scaled"])
def test_an_in_place_write_between_the_product_and_the_sum_stops_the_rule(change, flops) -> None:
    def forward(s: nn.Module, x: torch.Tensor) -> torch.Tensor:
        y = x @ s.w
        change(s.w)
        return (y / 2).sum(1)

    result = analyze(_With(forward, w=_weight(K, N)), meta(M, K))
    assert result.tensor_flops == flops


# --- constants, common subexpressions, broadcast operands --------------------------------------


IDENTITIES = [
    ("x − x = 0", lambda x: x - x, 4),
    ("x·0 = 0", lambda x: x * 0, 4),
    ("x eq x = True", lambda x: x == x, 1),
    ("exp(x)·exp(−x) = 1", lambda x: torch.exp(x) * torch.exp(-x), 4),
]


@pytest.mark.parametrize(
    ("rule", "function", "itemsize"), IDENTITIES, ids=[r for r, *_ in IDENTITIES]
)
def test_a_value_constant_for_finite_inputs_is_only_written(
    rule: str, function: Callable, itemsize: int
) -> None:
    # no FLOPs and no input read: the M·K outputs written once
    result = analyze(Fn(function), meta(M, K))
    assert (result.flops, result.compulsory_bytes) == (0, M * K * itemsize)
    assert _rules(result) == [("", rule)]


@pytest.mark.parametrize(
    ("rule", "function"),
    [
        ("softmax rows sum to 1", lambda x: torch.softmax(x, 1).sum(1)),
        ("normalised rows sum to 0", lambda x: F.layer_norm(x, (K,)).mean(-1)),
    ],
)
def test_rows_of_a_softmax_or_normalisation_sum_to_a_constant(
    rule: str, function: Callable
) -> None:
    result = analyze(Fn(function), meta(M, K))
    assert (result.flops, result.compulsory_bytes) == (0, M * 4)
    assert _rules(result) == [("", rule)]


@pytest.mark.parametrize(
    "function",
    [
        lambda x, y: x - y,
        lambda x, y: torch.softmax(x, 1).sum(0),  # not along the softmax's dim
        lambda x, y: (x * y).sum(1),
    ],
)
def test_no_constant_where_the_identity_does_not_hold(function: Callable) -> None:
    result = analyze(Fn(function), meta(M, K), meta(M, K))
    assert not result.rewrites and result.flops > 0


def test_layer_norm_with_an_affine_keeps_its_mean() -> None:
    model = _With(lambda s, x: s.norm(x).mean(-1), norm=nn.LayerNorm(K, device="meta"))
    assert analyze(model, meta(M, K)).flops > M * K


def test_the_same_product_twice_is_computed_once() -> None:
    # (x @ W) + (x @ W): one product, 2·M·K·N, and the add
    model = _With(lambda s, x: (x @ s.w) + (x @ s.w), w=_weight(K, N))
    result = analyze(model, meta(M, K))
    assert (result.tensor_flops, result.vector_flops) == (2 * M * K * N, M * N)
    assert _rules(result) == [("", "common subexpression")]
    # two weights: no common subexpression, but x a common factor, x @ (W + V): one product
    # and the K·N adds of W + V
    other = _With(lambda s, x: (x @ s.w) + (x @ s.v), w=_weight(K, N), v=_weight(K, N))
    result = analyze(other, meta(M, K))
    assert (result.tensor_flops, result.vector_flops) == (2 * M * K * N, K * N)
    assert _rules(result) == [("", "common factor taken out")]


def test_a_row_broadcast_operand_is_one_row_of_the_product() -> None:
    model = _With(lambda s, v: v.expand(M, K) @ s.w, w=_weight(K, N))
    result = analyze(model, meta(K))
    assert result.tensor_flops == 2 * K * N
    assert _rules(result) == [("", "broadcast operand computed once")]
    assert analyze(model, meta(M, K)).tensor_flops == 2 * M * K * N  # no broadcast: no rule


# --- chains ----------------------------------------------------------------------------------


def test_chain_order_is_the_classic_dynamic_program() -> None:
    # 10×30, 30×5, 5×60: (AB)C = 1500 + 3000 = 4500 multiply-adds, A(BC) = 9000 + 18000
    cost, split = chain_order([10, 30, 5, 60])
    assert (cost, split[0, 2]) == (4500, 1)


def test_a_product_times_a_vector_is_reassociated() -> None:
    # (A @ B) @ v = A @ (B @ v): two matrix-vector products, 2·2·n²
    n = 4096
    result = analyze(Fn(lambda a, b, v: (a @ b) @ v), meta(n, n), meta(n, n), meta(n))
    assert result.tensor_flops == 4 * n * n
    assert _rules(result) == [("", "matrix chain reassociated")]
    already = analyze(Fn(lambda a, b, v: a @ (b @ v)), meta(n, n), meta(n, n), meta(n))
    assert not already.rewrites and already.tensor_flops == 4 * n * n


def test_a_low_rank_operand_is_applied_factor_by_factor() -> None:
    # x @ (u @ vᵀ) = (x @ u) vᵀ: 2·n·n for x @ u, then n² multiplies (an outer product)
    # instead of 2·n³
    n = 4096
    result = analyze(Fn(lambda x, u, v: x @ (u @ v)), meta(n, n), meta(n, 1), meta(1, n))
    assert (result.tensor_flops, result.vector_flops) == (2 * n * n, n * n)


def test_an_outer_product_operand_is_applied_factor_by_factor() -> None:
    # x @ outer(u, v) = (x @ u) vᵀ: 2·n² for the matrix-vector product, n² for the scaling
    n = 4096
    result = analyze(Fn(lambda x, u, v: x @ torch.outer(u, v)), meta(n, n), meta(n), meta(n))
    assert (result.tensor_flops, result.vector_flops) == (2 * n * n, n * n)
    assert _rules(result) == [("", "matrix chain reassociated")]


def test_two_linear_layers_without_activation_are_multiplied_out() -> None:
    # Linear(K, H) → Linear(H, 1): W₁ @ W₂ (2·K·H), x @ that (2·M·K), b₁ @ W₂ (2·H)
    hidden = 2048
    first, second = nn.Linear(K, hidden, device="meta"), nn.Linear(hidden, 1, device="meta")
    model = _With(lambda s, x: s.b(s.a(x)), a=first, b=second)
    result = analyze(model, meta(M, K))
    assert result.tensor_flops == 2 * K * hidden + 2 * M * K + 2 * hidden
    assert _rules(result) == [("b", "matrix chain reassociated")]
    relu = _With(lambda s, x: s.b(torch.relu(s.a(x))), a=first, b=second)
    assert analyze(relu, meta(M, K)).tensor_flops == 2 * M * hidden * (K + 1)


# --- constant buffers with structure ---------------------------------------------------------


class _Buffered(nn.Module):
    """``forward`` is ``fn(self, *inputs)``; the keyword tensors are buffers (known values)."""

    def __init__(self, fn: Callable[..., Any], **buffers: torch.Tensor) -> None:
        super().__init__()
        self.fn = fn
        for name, value in buffers.items():
            self.register_buffer(name, value)

    def forward(self, *inputs: Any) -> Any:
        return self.fn(self, *inputs)


SQUARE = 1024


@pytest.mark.parametrize(
    ("rule", "model", "vector_flops"),
    [
        # x @ 1: a row sum (n adds per row), broadcast (c = 1: no scale): n²
        ("matrix chain reassociated",
         _Buffered(lambda s, x: x @ s.m, m=torch.ones(SQUARE, SQUARE)), SQUARE**2),
        # x @ triu(1): a cumulative sum along the rows (c = 1: no scale): n²
        ("triangular constant product is a cumulative sum",
         _Buffered(lambda s, x: x @ s.m, m=torch.ones(SQUARE, SQUARE).triu()), SQUARE**2),
        ("triangular constant product is a cumulative sum",
         _Buffered(lambda s, x: s.m @ x, m=torch.ones(SQUARE, SQUARE).tril()), SQUARE**2),
        # x @ triu(3): the cumulative sum and the scale by 3: 2·n²
        ("triangular constant product is a cumulative sum",
         _Buffered(lambda s, x: x @ s.m, m=torch.full((SQUARE, SQUARE), 3.0).triu()),
         2 * SQUARE**2),
    ],
)
def test_a_product_with_a_constant_matrix_is_a_sum(
    rule: str, model: nn.Module, vector_flops: int
) -> None:
    result = analyze(model, meta(SQUARE, SQUARE))
    assert (result.tensor_flops, result.vector_flops) == (0, vector_flops)
    assert _rules(result) == [("", rule)]


@pytest.mark.parametrize("side", [4096, 8192])
def test_a_triangle_made_in_forward_is_known_from_its_ops_at_any_size(side: int) -> None:
    # tril(ones) @ a over 4 M elements (too big to evaluate): a cumulative sum down the
    # columns (c = 1: no scale, n² vector FLOPs, no product), where the triangle's values
    # alone charged the half product n³
    result = analyze(Fn(lambda a: torch.tril(torch.ones(side, side)) @ a), meta(side, side))
    assert (result.tensor_flops, result.vector_flops) == (0, side**2)
    assert _rules(result) == [("", "triangular constant product is a cumulative sum")]


def test_a_triangle_off_the_main_diagonal_is_no_cumulative_sum() -> None:
    # tril(ones, -1) @ a is strictly lower: a shifted scan the rule does not write; the demand
    # walk's triangular structure charges the strict triangle, n(n − 1)/2 rows of 2n FLOPs
    n = 4096
    result = analyze(Fn(lambda a: torch.tril(torch.ones(n, n), -1) @ a), meta(n, n))
    assert result.tensor_flops == n * n * (n - 1)
    assert _rules(result) == []


@pytest.mark.parametrize("side", [1024, 4096])
def test_a_triangular_constant_mask_makes_a_triangular_product(side: int) -> None:
    # (tril(ones) · a) @ b = tril(a) @ b: n(n + 1)/2 nonzeros of a, each 2n FLOPs of the
    # product (the mask made in forward, known from its ops at any size)
    n = side
    result = analyze(Fn(lambda a, b: (torch.tril(torch.ones(n, n)) * a) @ b),
                     meta(n, n), meta(n, n))
    assert result.tensor_flops == n * n * (n + 1)
    assert _rules(result) == [("", "triangular constant mask is a triangle")]


@pytest.mark.parametrize("mask", [
    lambda w, n: torch.tril(w),  # a triangle of a parameter: data, not constant
    lambda w, n: torch.tril(torch.arange(n * n, dtype=torch.float32).reshape(n, n)),  # unequal
], ids=["parameter", "unequal"])
def test_a_mask_of_unequal_values_is_no_constant_triangle(mask) -> None:
    n = 512
    model = _With(lambda s, a: (mask(s.w, n) * a), w=nn.Parameter(torch.ones(n, n)))
    assert not [rule for _, rule in _rules(analyze(model, meta(n, n)))
                if rule == "triangular constant mask is a triangle"]


def test_a_matrix_with_unequal_values_or_a_parameter_is_no_constant() -> None:
    varied = _Buffered(lambda s, x: x @ s.m, m=torch.arange(SQUARE**2.0).reshape(SQUARE, SQUARE))
    assert analyze(varied, meta(SQUARE, SQUARE)).tensor_flops == 2 * SQUARE**3
    parameter = _With(lambda s, x: x @ s.w, w=nn.Parameter(torch.ones(SQUARE, SQUARE)))
    assert analyze(parameter, meta(SQUARE, SQUARE)).tensor_flops == 2 * SQUARE**3


def test_a_convolution_with_a_box_filter_is_a_box_sum() -> None:
    # the channels summed (Cin adds per pixel) and one add per tap per output pixel: a 3×3
    # average pool's 9 of one channel, then the scale; no tensor-core work
    n, channels, size = 16, 64, 64
    model = _Buffered(lambda s, x: F.conv2d(x, s.w, padding=1), w=torch.ones(8, channels, 3, 3))
    result = analyze(model, meta(n, channels, size, size))
    assert result.tensor_flops == 0
    assert _rules(result) == [("", "constant filter is a box sum")]
    dilated = _Buffered(lambda s, x: F.conv2d(x, s.w, dilation=2), w=torch.ones(8, channels, 3, 3))
    assert not analyze(dilated, meta(n, channels, size, size)).rewrites


# --- every replacement computes what the op it replaces computes --------------------------------


def _replacement(model: nn.Module, inputs: tuple) -> tuple[str, torch.Tensor]:
    """The first shortcut a rule finds in ``model(*inputs)``: its name and its replacement run
    on the real inputs and parameters (each read as the trace read it: views included)."""
    trace = trace_model(model, inputs)
    values = dict(zip(trace.argument_value_ids, inputs, strict=True))
    held = dict(model.state_dict(keep_vars=True))  # parameters and buffers
    values |= {value: held[name] for name, value in trace.module_value_ids.items()}
    graph = Graph.of(trace, known_values(trace.ops, trace.constants))
    for index, op in enumerate(trace.ops):
        for rule in rules_for(op):
            match = rule(graph, index)
            if match is not None:
                tensors = [
                    values[ref.value_id].detach().as_strided(ref.shape, ref.strides, ref.offset)
                    for ref in match.inputs
                ]
                return match.rule, match.build(*tensors)
    raise AssertionError("no rule fired")


def _double(*shape: int) -> torch.Tensor:
    return torch.randn(shape, dtype=torch.float64)


class _Linear(nn.Module):
    def __init__(self, body: Callable[..., torch.Tensor], **layers: nn.Module) -> None:
        super().__init__()
        self.body = body
        self.layers = nn.ModuleDict(layers)

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.body(self.layers, *inputs)


EXACT = [
    ("gemm-scale-sum", Fn(lambda x, w: (x @ w / 2).sum(1, keepdim=True)),
     (_double(7, 5), _double(5, 4))),
    ("rows", Fn(lambda x, w: (x @ w).sum(0)), (_double(7, 5), _double(5, 4))),
    ("transposed", Fn(lambda x, w: (x @ w).T.sum(1, keepdim=True)), (_double(7, 5), _double(5, 4))),
    ("transposed-square", Fn(lambda x, w: (x @ w).t().mean(0)), (_double(5, 5), _double(5, 5))),
    ("both", Fn(lambda x, w: (-(x @ w)).mean()), (_double(7, 5), _double(5, 4))),
    ("bmm", Fn(lambda x, w: (torch.bmm(x, w) * 3).sum(-1)), (_double(2, 7, 5), _double(2, 5, 4))),
    ("linear-3d-sub",
     _Linear(lambda m, x, c: (m["fc"](x) - c).mean(-1), fc=nn.Linear(5, 4).double()),
     (_double(2, 3, 5), _double(4))),
    ("conv-channels", Fn(lambda x, w, b: F.conv2d(x, w, b, padding=1).sum(1)),
     (_double(2, 3, 6, 5), _double(4, 3, 3, 3), _double(4))),
    ("conv-window", Fn(lambda x, w, b: F.conv2d(x, w, b, padding=2).mean((2, 3))),
     (_double(2, 3, 6, 5), _double(4, 3, 3, 3), _double(4))),
    ("conv1d-window", Fn(lambda x, w: F.conv1d(x, w).sum(-1)),
     (_double(2, 3, 9), _double(4, 3, 3))),
    ("convT-global", Fn(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2).mean((2, 3))),
     (_double(2, 3, 5, 4), _double(3, 4, 3, 3), _double(4))),
    ("convT-channels", Fn(lambda x, w: F.conv_transpose2d(x, w, padding=1).sum(1)),
     (_double(2, 3, 5, 4), _double(3, 4, 3, 3))),
    ("chain", Fn(lambda a, b, v: (a @ b) @ v), (_double(6, 6), _double(6, 6), _double(6))),
    ("low-rank", Fn(lambda x, u, v: x @ (u @ v)), (_double(6, 6), _double(6, 1), _double(1, 6))),
    ("linear-linear", _Linear(lambda m, x: m["b"](m["a"](x)), a=nn.Linear(6, 8).double(),
                              b=nn.Linear(8, 1).double()), (_double(7, 6),)),
    ("broadcast", Fn(lambda v, w: v.expand(6, 5) @ w), (_double(5), _double(5, 3))),
    ("outer-right", Fn(lambda x, u, v: x @ torch.outer(u, v)), (_double(3, 5), _double(5),
                                                               _double(4))),
    ("outer-left", Fn(lambda u, v, y: torch.outer(u, v) @ y), (_double(3), _double(5),
                                                              _double(5, 4))),
    ("softmax", Fn(lambda x: torch.softmax(x, 1).mean(1)), (_double(4, 5),)),
    ("layer-norm", Fn(lambda x: F.layer_norm(x, (5,)).sum(-1)), (_double(4, 5),)),
    ("exp", Fn(lambda x: torch.exp(-x) * torch.exp(x)), (_double(4, 5),)),
    ("ones", _Buffered(lambda s, x: x @ s.m, m=torch.full((5, 4), 3.0, dtype=torch.float64)),
     (_double(6, 5),)),
    ("triu-right", _Buffered(lambda s, x: x @ s.m, m=torch.ones(5, 5).double().triu()),
     (_double(6, 5),)),
    ("tril-right", _Buffered(lambda s, x: x @ s.m, m=torch.ones(5, 5).double().tril() * 2),
     (_double(6, 5),)),
    ("tril-left", _Buffered(lambda s, x: s.m @ x, m=torch.ones(5, 5).double().tril()),
     (_double(5, 6),)),
    ("triu-left", _Buffered(lambda s, x: s.m @ x, m=torch.ones(5, 5).double().triu()),
     (_double(5, 6),)),
    # made in forward: a triangle known from its ops (read transposed: upper)
    ("tril-made", Fn(lambda x: x @ torch.tril(torch.ones(5, 5, dtype=torch.float64)).T),
     (_double(6, 5),)),
    ("tril-mask", Fn(lambda x: x * torch.tril(torch.full((5, 5), 2.0, dtype=torch.float64))),
     (_double(5, 5),)),
    ("box", _Buffered(lambda s, x, b: F.conv2d(x, s.w, b, stride=2, padding=1),
                      w=torch.full((4, 3, 3, 3), 0.5, dtype=torch.float64)),
     (_double(2, 3, 7, 6), _double(4))),
]


@pytest.mark.parametrize(("model", "inputs"), [c[1:] for c in EXACT], ids=[c[0] for c in EXACT])
def test_the_replacement_computes_the_same_values(model: nn.Module, inputs: tuple) -> None:
    """Each identity checked on float64 data: the replacement equals the program's output."""
    _, replaced = _replacement(model, inputs)
    expected = model(*inputs)
    assert replaced.shape == expected.shape
    assert torch.allclose(replaced, expected.to(replaced.dtype), atol=1e-9)
