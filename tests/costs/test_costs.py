"""FLOPs of each op family against closed forms; categories and the rule registry."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import Fn, analyze, meta, op_names
from torchroofline.costs import (
    _RULES,
    Category,
    MatmulKind,
    add_rules,
    flops_on_shapes,
    rule_coverage,
    rule_for,
)
from torchroofline.trace.refs import TracedOp

# --- Matmul class ------------------------------------------------------------------------------


@pytest.mark.parametrize(("m", "k", "n"), [(16, 64, 32), (1, 7, 3), (129, 65, 33)])
def test_mm_is_2mnk(m: int, k: int, n: int) -> None:
    result = analyze(Fn(torch.mm), meta(m, k), meta(k, n))
    assert result.tensor_flops == 2 * m * n * k
    assert result.vector_flops == 0
    [op] = result.ops
    assert op.category is Category.COMPUTE and op.flops.kind is MatmulKind.MATMUL


@pytest.mark.parametrize(("b", "m", "k", "n"), [(3, 16, 32, 8), (5, 1, 9, 2)])
def test_bmm_is_2bmnk(b: int, m: int, k: int, n: int) -> None:
    result = analyze(Fn(torch.bmm), meta(b, m, k), meta(b, k, n))
    assert result.tensor_flops == 2 * b * m * n * k


def test_linear_with_bias_is_one_addmm_of_2mnk() -> None:
    # the bias add rides in cuBLAS's epilogue: no FLOPs of its own, no second kernel
    result = analyze(nn.Linear(64, 32), meta(16, 64))
    assert [op.name for op in result.ops if op.category is not Category.ZERO_COPY] == [
        "aten.addmm.default"
    ]
    assert result.flops == 2 * 16 * 32 * 64
    assert result.fused_kernel_count == 1


def test_linear_over_a_sequence_folds_leading_dims() -> None:
    result = analyze(nn.Linear(8, 4, bias=False), meta(2, 5, 8))
    assert result.flops == 2 * (2 * 5) * 4 * 8


def test_broadcast_matmul_counts_every_batch() -> None:
    # (3, 1, 4, 8) @ (2, 8, 5) broadcasts to 3·2 products of 4×8 by 8×5
    result = analyze(Fn(torch.matmul), meta(3, 1, 4, 8), meta(2, 8, 5))
    assert result.tensor_flops == 2 * (3 * 2) * 4 * 5 * 8


@pytest.mark.parametrize(
    ("equation", "shapes", "flops"),
    [
        ("bij,bjk->bik", [(3, 16, 32), (3, 32, 8)], 2 * 3 * 16 * 8 * 32),
        ("ij,jk->ik", [(16, 32), (32, 8)], 2 * 16 * 8 * 32),
        ("bhqd,bhkd->bhqk", [(2, 4, 16, 8), (2, 4, 12, 8)], 2 * 2 * 4 * 16 * 12 * 8),
    ],
)
def test_einsum_contractions(equation: str, shapes: list, flops: int) -> None:
    result = analyze(Fn(lambda *xs: torch.einsum(equation, *xs)), *(meta(*s) for s in shapes))
    assert result.tensor_flops == flops


def test_vector_products() -> None:
    assert analyze(Fn(torch.mv), meta(12, 5), meta(5)).tensor_flops == 2 * 12 * 5
    assert analyze(Fn(torch.dot), meta(7), meta(7)).tensor_flops == 2 * 7
    # outer decomposes into a broadcast multiply: one FLOP per product, on the CUDA cores
    assert analyze(Fn(torch.outer), meta(6), meta(4)).flops == 6 * 4


# --- Convolutions ------------------------------------------------------------------------------


def _conv_out(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


CONVS = [
    # dims, in, out, kernel, stride, padding, dilation, groups, input spatial size
    (1, 4, 8, 5, 1, 2, 1, 1, 50),
    (1, 6, 4, 3, 2, 0, 3, 2, 31),
    (2, 3, 16, 3, 1, 1, 1, 1, 32),
    (2, 8, 16, 3, 2, 1, 2, 2, 32),
    (2, 16, 16, 3, 1, 1, 1, 16, 14),  # depthwise
    (2, 4, 6, 1, 1, 0, 1, 1, 9),  # 1×1
    (3, 4, 8, 3, 1, 0, 1, 1, 8),
    (3, 4, 4, 3, 2, 1, 1, 2, 9),
]


@pytest.mark.parametrize(("dims", "cin", "cout", "k", "s", "p", "d", "g", "size"), CONVS)
def test_conv_flops(dims, cin, cout, k, s, p, d, g, size) -> None:  # noqa: ANN001
    conv_class = (nn.Conv1d, nn.Conv2d, nn.Conv3d)[dims - 1]
    conv = conv_class(cin, cout, k, stride=s, padding=p, dilation=d, groups=g, bias=False)
    batch = 2
    result = analyze(conv, meta(batch, cin, *[size] * dims))
    out = _conv_out(size, k, s, p, d)
    # per spatial dim, the (output, tap) pairs whose input position is inside the image: taps
    # on the zero padding multiply nothing, so the bound does not count them
    pairs = sum(1 for o in range(out) for t in range(k) if 0 <= o * s - p + t * d < size)
    assert result.tensor_flops == batch * pairs**dims * cout * (cin // g) * 2
    if p == 0:  # no padding: every output element does kernel volume × Ci/groups MACs
        assert result.tensor_flops == batch * out**dims * cout * k**dims * (cin // g) * 2
    [op] = result.ops
    assert op.flops.kind is MatmulKind.CONV


@pytest.mark.parametrize(("dims", "cin", "cout", "k", "s", "p", "g", "size"), [
    (1, 4, 6, 3, 2, 1, 1, 10),
    (2, 8, 16, 3, 2, 1, 2, 10),
    (3, 4, 4, 2, 2, 0, 1, 5),
])
def test_transposed_conv_flops(dims, cin, cout, k, s, p, g, size) -> None:  # noqa: ANN001
    conv_class = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)[dims - 1]
    conv = conv_class(cin, cout, k, stride=s, padding=p, groups=g, bias=False)
    batch = 3
    result = analyze(conv, meta(batch, cin, *[size] * dims))
    # the adjoint of a conv: input i and tap t land on output i·s − p + t; taps that land in the
    # cropped padding (outside the output) add nothing to a kept element
    out = (size - 1) * s - 2 * p + k
    pairs = sum(1 for i in range(size) for t in range(k) if 0 <= i * s - p + t < out)
    assert result.tensor_flops == batch * pairs**dims * cin * (cout // g) * 2
    if p == 0:  # no cropping: every input element scatters into kernel volume × Co/g outputs
        assert result.tensor_flops == batch * size**dims * cin * k**dims * (cout // g) * 2


def test_conv_flops_do_not_depend_on_bias() -> None:
    # flop_counter's convention (the bias add is in the conv kernel's epilogue)
    with_bias = analyze(nn.Conv2d(3, 8, 3, bias=True), meta(2, 3, 16, 16))
    without = analyze(nn.Conv2d(3, 8, 3, bias=False), meta(2, 3, 16, 16))
    assert with_bias.flops == without.flops == 2 * (2 * 14 * 14) * 8 * 9 * 3


# --- Attention ---------------------------------------------------------------------------------


def _sdpa(**options: object) -> Fn:
    return Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **options))


def test_sdpa_is_one_op_of_4bhlse() -> None:
    b, h, length, s, e = 2, 4, 128, 256, 64
    result = analyze(_sdpa(), meta(b, h, length, e), meta(b, h, s, e), meta(b, h, s, e))
    assert op_names(result) == ["aten.scaled_dot_product_attention"]
    assert result.tensor_flops == 4 * b * h * length * s * e
    assert result.ops[0].flops.kind is MatmulKind.ATTENTION


def test_sdpa_value_width_differs_from_query_width() -> None:
    b, h, length, s, e, ev = 2, 3, 16, 24, 64, 32
    result = analyze(_sdpa(), meta(b, h, length, e), meta(b, h, s, e), meta(b, h, s, ev))
    assert result.tensor_flops == 2 * b * h * length * s * e + 2 * b * h * length * s * ev


def test_sdpa_without_batch_dim() -> None:
    h, length, e = 8, 16, 32
    q = meta(h, length, e)
    assert analyze(_sdpa(), q, q, q).tensor_flops == 4 * h * length * length * e


def test_sdpa_grouped_query_attention_counts_query_heads() -> None:
    b, hq, hkv, length, e = 2, 8, 2, 16, 32
    kv = meta(b, hkv, length, e)
    result = analyze(_sdpa(enable_gqa=True), meta(b, hq, length, e), kv, kv)
    assert result.tensor_flops == 4 * b * hq * length * length * e


def test_sdpa_with_mask_costs_full_scores_and_reads_the_mask() -> None:
    b, h, length, e = 1, 2, 32, 16
    q = meta(b, h, length, e)
    plain = analyze(_sdpa(), q, q, q)
    masked = analyze(
        Fn(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
        q, q, q, meta(length, length, dtype=torch.bool),
    )
    assert masked.tensor_flops == plain.tensor_flops
    assert masked.compulsory_bytes == plain.compulsory_bytes + length * length  # 1 B per bool


# (2, 11) and (8, 35): a float fraction of the full count truncates one FLOP short
@pytest.mark.parametrize(
    ("length", "s"), [(128, 128), (7, 7), (5, 13), (13, 5), (1, 9), (33, 32), (2, 11), (8, 35)]
)
def test_causal_sdpa_counts_kept_scores(length: int, s: int) -> None:
    b, h, e = 2, 3, 7
    kept = sum(min(row + 1, s) for row in range(length))  # tril mask, top-left aligned
    result = analyze(
        _sdpa(is_causal=True), meta(b, h, length, e), meta(b, h, s, e), meta(b, h, s, e)
    )
    assert result.executed_flops == 4 * b * h * e * kept  # exactly: FLOPs are ints
    # the bound leaves out row 0, which attends key 0 alone (a softmax of one score is 1)
    assert result.tensor_flops == 4 * b * h * e * (kept - 1)


@pytest.mark.parametrize("backend", [
    # the aten attention backends a trace sees when SDPA is called out of the interceptor's
    # reach; is_causal is positional in each, at a different place
    lambda q, k, v: torch.ops.aten._scaled_dot_product_efficient_attention(
        q, k, v, None, False, 0.0, True
    )[0],
    lambda q, k, v: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, 0.0, True
    )[0],
])
def test_attention_backends_count_causal_like_sdpa(backend) -> None:  # noqa: ANN001
    b, h, length, e = 2, 4, 9, 16
    q = meta(b, h, length, e)
    result = analyze(Fn(backend), q, q, q)
    [op] = [op for op in result.ops if op.category is Category.COMPUTE]
    assert op.flops.kind is MatmulKind.ATTENTION
    assert op.flops.tensor == 4 * b * h * e * (length * (length + 1) // 2)


def test_causal_square_attention_is_about_half() -> None:
    q = meta(1, 1, 1024, 64)
    full = analyze(_sdpa(), q, q, q).executed_flops
    causal = analyze(_sdpa(is_causal=True), q, q, q).executed_flops
    assert causal == full * (1024 * 1025 // 2) // 1024**2


# --- Recurrent networks ------------------------------------------------------------------------

RNN_GATES = {nn.GRU: 3, nn.LSTM: 4, nn.RNN: 1}


def _rnn_tensor_flops(gates: int, inp: int, hidden: int, layers: int, dirs: int, t: int, b: int):
    """Per layer and direction: one input GEMM over all steps + one recurrent GEMM per step."""
    total = 0
    for layer in range(layers):
        layer_in = inp if layer == 0 else hidden * dirs
        total += dirs * 2 * t * b * (gates * hidden) * (layer_in + hidden)
    return total


@pytest.mark.parametrize("cls", [nn.GRU, nn.LSTM, nn.RNN])
@pytest.mark.parametrize(("layers", "bidirectional", "batch_first"), [
    (1, False, False), (2, True, False), (3, True, True),
])
def test_rnn_flops(cls: type, layers: int, bidirectional: bool, batch_first: bool) -> None:
    inp, hidden, t, b = 10, 20, 7, 3
    rnn = cls(inp, hidden, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    x = meta(b, t, inp) if batch_first else meta(t, b, inp)
    result = analyze(rnn, x)
    dirs = 2 if bidirectional else 1
    gates = RNN_GATES[cls]
    assert result.tensor_flops == _rnn_tensor_flops(gates, inp, hidden, layers, dirs, t, b)
    # the gate math: per unit per step per layer-direction, the cell's pointwise FLOPs
    # LSTM: 4 gate adds + 3 sigmoids (3 each) + 2 tanh + c = f·c + i·g (3) + h = o·tanh(c) (1)
    # = 19; GRU: 3 adds + 2 sigmoids (6) + n = tanh(xn + r·hn) (3) + (1 − z)·n + z·h (4) = 16;
    # tanh RNN: one add, one tanh = 2
    per_unit = {nn.GRU: 16, nn.LSTM: 19, nn.RNN: 2}[cls]
    assert result.vector_flops == layers * dirs * t * b * hidden * per_unit
    # one input GEMM per layer-direction plus one step kernel per time step
    [rnn_kernel] = [k for k in result.kernels if k.category == "compute"]
    assert rnn_kernel.launches == layers * dirs * (1 + t)
    [rnn_op] = [op for op in result.ops if op.category is Category.COMPUTE]
    assert rnn_op.flops.kind is MatmulKind.RNN


def test_lstm_with_projection() -> None:
    inp, hidden, proj, t, b = 10, 20, 5, 7, 3
    result = analyze(nn.LSTM(inp, hidden, proj_size=proj), meta(t, b, inp))
    # W_ih (4H × in), W_hh (4H × P), W_hr (P × H): each a GEMM over all T·B positions
    expected = 2 * t * b * (4 * hidden * (inp + proj) + proj * hidden)
    assert result.tensor_flops == expected


def test_unbatched_gru() -> None:
    inp, hidden, t = 10, 20, 7
    result = analyze(nn.GRU(inp, hidden), meta(t, inp))
    assert result.tensor_flops == 2 * t * 1 * 3 * hidden * (inp + hidden)


def test_deep_bidirectional_gru_is_a_handful_of_ops() -> None:
    # a 6-layer bidirectional GRU over 512 steps is one cuDNN call, not 6·2·512 cell steps
    inp, hidden, t, b = 64, 128, 512, 4
    result = analyze(nn.GRU(inp, hidden, num_layers=6, bidirectional=True), meta(t, b, inp))
    assert len(result.ops) <= 4
    assert [op.name for op in result.ops if op.category is Category.COMPUTE] == ["aten.gru.input"]
    assert result.tensor_flops == _rnn_tensor_flops(3, inp, hidden, 6, 2, t, b)


# --- Pointwise and reductions ------------------------------------------------------------------


@pytest.mark.parametrize(("fn", "per_element"), [
    (torch.relu, 1),  # max(x, 0)
    (torch.sigmoid, 3),  # 1 / (1 + exp(−x)): exp, add, divide
    (F.gelu, 4),  # x · 0.5 · (1 + erf(x/√2)), constants folded: multiply, erf, add, multiply
    (F.silu, 4),  # x · sigmoid(x): the sigmoid's 3 and a multiply
    (torch.exp, 1), (torch.tanh, 1),
])
def test_pointwise_flops_per_element(fn, per_element: int) -> None:  # noqa: ANN001
    n = 3 * 17
    result = analyze(Fn(fn), meta(3, 17))
    assert result.vector_flops == n * per_element
    assert all(op.category is Category.POINTWISE for op in result.ops)


def test_in_place_variant_shares_the_rule() -> None:
    out_of_place = analyze(Fn(torch.sigmoid), meta(64))
    in_place = analyze(Fn(torch.sigmoid_), meta(64))
    assert in_place.vector_flops == out_of_place.vector_flops == 3 * 64
    assert op_names(in_place) == ["aten.sigmoid_.default"]


def test_op_tagged_pointwise_without_an_entry_gets_one_flop_per_element() -> None:
    # precondition: only PyTorch's pointwise tag covers it
    assert torch.ops.aten.atan2 not in _RULES
    result = analyze(Fn(torch.atan2), meta(8, 8), meta(8, 8))
    [op] = result.ops
    assert op.has_rule and op.category is Category.POINTWISE and op.fusible
    assert result.vector_flops == 64
    assert result.unsupported_ops == {}


@pytest.mark.parametrize(("fn", "per_input_element"), [
    (lambda x: x.sum(-1), 1),
    (lambda x: torch.softmax(x, -1), 5),
    (lambda x: F.layer_norm(x, x.shape[-1:]), 8),
    (lambda x: x.argmax(-1), 1),
    (lambda x: x.cumsum(0), 1),
])
def test_reduction_flops_per_input_element(fn, per_input_element: int) -> None:  # noqa: ANN001
    result = analyze(Fn(fn), meta(16, 24))
    assert result.vector_flops == 16 * 24 * per_input_element
    assert {op.category for op in result.ops} == {Category.REDUCTION}


def test_max_pool_counts_window_per_output() -> None:
    result = analyze(nn.MaxPool2d(3, stride=2), meta(2, 4, 17, 17))
    out = 2 * 4 * 8 * 8
    assert result.vector_flops == out * 9


def test_views_cost_nothing() -> None:
    result = analyze(Fn(lambda x: x.view(4, 8).t().unsqueeze(0).expand(3, 8, 4)), meta(32))
    assert result.ops and all(op.category is Category.ZERO_COPY for op in result.ops)
    assert result.flops == 0
    assert result.unfused_bytes == result.fused_bytes == result.compulsory_bytes == 0
    assert result.fused_kernel_count == result.unfused_kernel_count == 0


def test_data_movement_has_bytes_and_no_flops() -> None:
    result = analyze(Fn(lambda x, y: torch.cat([x, y])), meta(16, 32), meta(16, 32))
    [op] = result.ops
    assert op.category is Category.DATA_MOVEMENT
    assert result.flops == 0
    assert result.fused_bytes == 2 * (2 * 16 * 32) * 4  # both halves in, the whole out


def test_every_rule_formula_returns_int_flops() -> None:
    models = [
        (nn.Conv2d(3, 4, 3), meta(1, 3, 9, 9)),
        (_sdpa(is_causal=True), meta(1, 2, 9, 5), meta(1, 2, 9, 5), meta(1, 2, 9, 5)),
        (nn.LSTM(4, 6), meta(3, 2, 4)),
        (Fn(lambda x: torch.softmax(torch.relu(x), -1)), meta(5, 7)),
    ]
    for model, *inputs in models:
        for op in analyze(model, *inputs).ops:
            assert type(op.flops.tensor) is int and type(op.flops.vector) is int, op.name


def test_registry_resolves_in_place_names() -> None:
    # ``aten.add_.Tensor`` and ``aten.add.Tensor`` share the "add" rule
    in_place = analyze(Fn(lambda x, y: x.add_(y)), meta(4), meta(4)).ops[0]
    out_of_place = analyze(Fn(torch.add), meta(4), meta(4)).ops[0]
    assert in_place.name == "aten.add_.Tensor" and out_of_place.name == "aten.add.Tensor"
    assert in_place.flops == out_of_place.flops
    assert out_of_place.flops.vector == 4


def test_rule_for_is_none_for_an_unregistered_untagged_op() -> None:
    trace_op = analyze(Fn(lambda x: torch.linalg.matrix_exp(x)), meta(8, 8)).trace.ops[0]
    assert trace_op.base == "linalg_matrix_exp"
    assert rule_for(trace_op) is None


def test_embedding_reads_only_the_rows_it_picks() -> None:
    """A 50257×768 table looked up for 2×16 tokens reads 32 rows, not 154 MB."""
    vocab, dim, batch, length = 50257, 768, 2, 16
    model = torch.nn.Embedding(vocab, dim, device="meta")
    tokens = torch.zeros(batch, length, dtype=torch.int64, device="meta")
    result = analyze(model, tokens, precision="fp32")
    # which rows the tokens pick is data (repeated tokens may pick one), so the bound charges
    # one row; the moved (eager) figure reads the 32 it looks up
    written = batch * length * dim * 4
    assert result.compulsory_bytes == written + dim * 4 + batch * length * 8
    assert result.eager_kernels[0].bytes == 2 * written + batch * length * 8
    assert result.compulsory_bytes < vocab * dim * 4 / 100


def test_batch_norm_flops_depend_on_training() -> None:
    elements = 8 * 16 * 32 * 32
    bn = torch.nn.BatchNorm2d(16, device="meta")
    training = analyze(bn, meta(8, 16, 32, 32))
    evaluating = analyze(bn.eval(), meta(8, 16, 32, 32))
    assert training.vector_flops == 8 * elements + 1  # + num_batches_tracked += 1
    assert evaluating.vector_flops == 4 * elements


def test_glu_and_logsigmoid_have_rules() -> None:
    result = analyze(Fn(lambda x: (F.glu(x, -1), F.logsigmoid(x))), meta(64, 32))
    assert result.unsupported_ops == {}
    assert result.vector_flops == 4 * 64 * 16 + 4 * 64 * 32


def test_in_place_overwrites_do_not_read_their_destination() -> None:
    """cache.copy_(x) into a model buffer loads x and stores the buffer: 2·N elements, not 3."""

    class Cache(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("cache", torch.empty(1024, 64, device="meta"))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.cache.copy_(x)
            return self.cache

    result = analyze(Cache(), meta(1024, 64))
    assert result.compulsory_bytes == 2 * 1024 * 64 * 4
    assert result.unfused_bytes == 2 * 1024 * 64 * 4


def test_index_put_stores_only_the_indexed_rows() -> None:
    """buffer[idx] = values stores len(idx) rows; the rest of the buffer is not touched."""
    rows, width, picked = 4096, 64, 8

    class Scatter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", torch.empty(rows, width, device="meta"))

        def forward(self, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
            self.table.index_put_((index,), values)
            return values.sum()

    index = torch.zeros(picked, dtype=torch.int64, device="meta")
    result = analyze(Scatter(), index, meta(picked, width))
    written = next(op for op in result.ops if op.name == "aten.index_put_.default")
    assert sum(ref.elements for ref in written.writes) == picked * width
    assert result.compulsory_bytes < rows * width * 4 / 10


@pytest.mark.parametrize(
    ("store", "positions"),
    [
        # a[:, cols] = 1: 2 index entries × the 10 rows left whole
        (lambda a, rows, cols: a.__setitem__((slice(None), cols), 1.0), 10 * 2),
        # a[rows, cols] = 1: the two 2-entry indices broadcast to 2 positions
        (lambda a, rows, cols: a.__setitem__((rows, cols), 1.0), 2),
        # index_fill_ along dim 1: 2 columns × the 10 rows
        (lambda a, rows, cols: a.index_fill_(1, cols, 1.0), 10 * 2),
    ],
)
def test_a_broadcast_value_is_stored_at_every_indexed_position(store, positions: int) -> None:
    def fn(a: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        store(a, rows, cols)
        return a

    index = torch.zeros(2, dtype=torch.int64, device="meta")
    result = analyze(Fn(fn), meta(10, 10), index, index)
    stores = ("aten.index_put_", "aten.index_fill_")
    [written] = [op for op in result.ops if op.name.startswith(stores)]
    assert sum(ref.elements for ref in written.writes) == positions


def test_a_scatter_of_a_value_stores_one_element_per_index() -> None:
    # y.scatter_(1, idx, 1.0) with idx (1000, 1): 1,000 positions, not index × a whole row
    def fn(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        y = x * 2
        y.scatter_(1, idx, 1.0)
        return y

    index = torch.zeros(1000, 1, dtype=torch.int64, device="meta")
    result = analyze(Fn(fn), meta(1000, 1000), index)
    [written] = [op for op in result.ops if op.name.startswith("aten.scatter_")]
    assert sum(ref.elements for ref in written.writes) == 1000


def test_reads_of_picked_elements_only() -> None:
    """EmbeddingBag, NLL loss and nearest downsampling load what they pick, not their input."""
    bag = nn.EmbeddingBag(1_000_000, 128, device="meta")
    bags, per_bag = 256, 40
    indices = torch.zeros(bags, per_bag, dtype=torch.int64, device="meta")
    table_rows = analyze(bag, indices).compulsory_bytes - bags * per_bag * 8 - bags * 128 * 4
    assert table_rows <= bags * 128 * 4  # at most one row per output element, not 512 MB

    rows, classes = 4096, 50257
    target = torch.zeros(rows, dtype=torch.int64, device="meta")
    nll = analyze(Fn(F.nll_loss), meta(rows, classes), target)
    assert nll.compulsory_bytes == rows * 4 + rows * 8 + 4  # one score per target, loss scalar
    assert nll.vector_flops == rows

    down = analyze(Fn(lambda x: F.interpolate(x, scale_factor=0.25)), meta(2, 8, 64, 64))
    assert down.compulsory_bytes == 2 * (2 * 8 * 16 * 16) * 4


def test_out_buffer_is_not_read() -> None:
    class Out(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("buffer", torch.empty(256, 256, device="meta"))

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            torch.add(a, b, out=self.buffer)
            return self.buffer

    result = analyze(Out(), meta(256, 256), meta(256, 256))
    assert result.compulsory_bytes == 3 * 256 * 256 * 4


def test_overlapping_view_reads_its_span_only() -> None:
    # 16000 samples framed into overlapping windows of 400 every 160: the windows of a row
    # cover its first (frames − 1)·160 + 400 samples, each once; the rows' spans lie apart (not
    # the span from the first row's first to the last row's last element: the 384 samples at
    # the end of each row, between them, are not read)
    result = analyze(Fn(lambda x: x[:, :16000].unfold(-1, 400, 160).sum(-1)), meta(8, 16384))
    frames = (16000 - 400) // 160 + 1
    per_row = (frames - 1) * 160 + 400
    assert result.compulsory_bytes == 8 * per_row * 4 + 8 * frames * 4


# --- Rules for ops that counted no FLOPs before (issue 9) --------------------------------------
# Each closed form is derived in the rule's docstring in costs.py; these are the same formulas
# written out by hand for small shapes.


def test_addbmm_is_2bnmp() -> None:
    b, n, m, p = 3, 5, 7, 4
    result = analyze(Fn(torch.addbmm), meta(n, p), meta(b, n, m), meta(b, m, p))
    assert result.tensor_flops == 2 * b * n * m * p


def test_bilinear_takes_the_cheapest_contraction_order() -> None:
    # y[n, o] = Σ_ab x1[n, a] W[o, a, b] x2[n, b]: outer product x1 ⊗ x2 (N·a·b multiplies),
    # then contract with W (2·N·o·a·b); the other orders cost 2·N·o·a·b + 2·N·o·(a or b)
    n, a, b, o = 8, 3, 4, 5
    result = analyze(nn.Bilinear(a, b, o, bias=False), meta(n, a), meta(n, b))
    assert result.tensor_flops == n * a * b + 2 * n * o * a * b
    assert result.unsupported_ops == {}


@pytest.mark.parametrize("mode", ["donot_use_mm_for_euclid_dist", "use_mm_for_euclid_dist"])
def test_euclidean_cdist_is_a_product_form(mode: str) -> None:
    # ‖x‖² + ‖y‖² − 2·x·y: 2·M FLOPs per pair on the matmul unit, two adds and a root per pair
    batch, p, r, m = 2, 30, 40, 16
    result = analyze(
        Fn(lambda x, y: torch.cdist(x, y, compute_mode=mode)), meta(batch, p, m), meta(batch, r, m)
    )
    pairs = batch * p * r
    assert result.tensor_flops == 2 * pairs * m
    assert result.vector_flops == 3 * pairs
    assert result.unsupported_ops == {}


def test_manhattan_cdist_and_pdist() -> None:
    batch, p, r, m = 2, 5, 6, 3
    l1 = analyze(Fn(lambda x, y: torch.cdist(x, y, p=1.0)), meta(batch, p, m), meta(batch, r, m))
    assert (l1.tensor_flops, l1.vector_flops) == (0, 3 * batch * p * r * m)  # sub, abs, add
    rows = 10
    pairs = rows * (rows - 1) // 2
    pd = analyze(Fn(F.pdist), meta(rows, m))
    assert (pd.tensor_flops, pd.vector_flops) == (2 * pairs * m, 3 * pairs)


def test_lstm_cell_gate_math_is_one_fused_op() -> None:
    batch, inputs, hidden = 4, 6, 8
    result = analyze(nn.LSTMCell(inputs, hidden), meta(batch, inputs))
    # two GEMMs, then per hidden unit RNN_CELL_FLOPS["lstm"] = 19 plus two bias adds per gate;
    # no state is passed, so h is torch.zeros: h @ W_hh has no product of two nonzeros (the
    # known-operand rule, METHOD 3b) and only x @ W_ih is charged
    assert result.tensor_flops == 2 * batch * 4 * hidden * inputs
    assert result.vector_flops == batch * hidden * 19 + 2 * batch * 4 * hidden
    assert result.unsupported_ops == {}


def test_lstm_cell_without_biases_traces() -> None:
    # the fused cell's meta kernel reads each bias's device, so LSTMCell(bias=False) failed
    # there; its outputs come from shapes. h = 0 as above: x @ W_ih only, and no bias adds.
    # Compulsory: x (4·6) and W_ih (32·6) read, h' and c' (4·8 each) written
    batch, inputs, hidden = 4, 6, 8
    result = analyze(nn.LSTMCell(inputs, hidden, bias=False), meta(batch, inputs))
    assert result.tensor_flops == 2 * batch * 4 * hidden * inputs
    assert result.vector_flops == batch * hidden * 19
    read, written = batch * inputs + 4 * hidden * inputs, 2 * batch * hidden
    assert result.compulsory_bytes == (read + written) * 4


def test_gru_cell_gate_math() -> None:
    # a CPU build cannot trace the fused GRU cell (CUDA only): the rule on shapes alone
    batch, hidden = 4, 8
    gates = torch.empty(batch, 3 * hidden, device="meta")
    state = torch.empty(batch, hidden, device="meta")
    bias = torch.empty(3 * hidden, device="meta")
    op = TracedOp("aten._thnn_fused_gru_cell.default", "_thnn_fused_gru_cell", None,
                  (gates, gates, state, bias, bias), {}, (state, gates), (), (), "", False)
    # RNN_CELL_FLOPS["gru"] = 16 per hidden unit, plus two bias adds per gate pre-activation
    assert rule_for(op).flops(op).vector == batch * hidden * 16 + 2 * batch * 3 * hidden


def _fft_bound(points: int, coefficient: float, linear: int) -> int:
    """⌊c·N·log2 N⌋ − linear·N: the lowest published FFT counts, rounded down (costs.py)."""
    return int(coefficient * points * math.log2(points)) - linear * points


def test_fft_counts() -> None:
    batch, n = 4, 1024
    complex_ = analyze(Fn(torch.fft.fft), meta(batch, n, dtype=torch.complex64))
    assert complex_.vector_flops == batch * _fft_bound(n, 34 / 9, 5)
    assert complex_.tensor_flops == 0  # cuFFT: no tensor-core work
    assert complex_.vector_flops < batch * 5 * n * 10  # below radix-2's 5·N·log2 N
    real = analyze(Fn(torch.fft.rfft), meta(batch, n))
    assert real.vector_flops == batch * _fft_bound(n, 17 / 9, 4)
    inverse = analyze(Fn(lambda x: torch.fft.irfft(x, n=n)), meta(batch, n // 2 + 1,
                                                                  dtype=torch.complex64))
    assert inverse.vector_flops == real.vector_flops
    rows, cols = 16, 8  # 2-D: a 1-D FFT along each dimension in turn
    grid = analyze(Fn(torch.fft.fft2), meta(rows, cols, dtype=torch.complex64))
    assert grid.vector_flops == cols * _fft_bound(rows, 34 / 9, 5) + rows * _fft_bound(
        cols, 34 / 9, 5
    )


N_LINALG, K_RHS, BATCH = 64, 3, 2
_LU = (4 * N_LINALG**3 - 3 * N_LINALG**2 + 5 * N_LINALG) // 6  # 2n³/3 − n²/2 + 5n/6, exact


@pytest.mark.parametrize(
    ("fn", "shapes", "flops"),
    [
        (lambda a: torch.linalg.lu_factor(a), [(N_LINALG, N_LINALG)], _LU),
        (lambda a: torch.linalg.det(a), [(N_LINALG, N_LINALG)], _LU),
        # LU, then 2n²k − nk of forward and back substitution
        (torch.linalg.solve, [(N_LINALG, N_LINALG), (N_LINALG, K_RHS)],
         _LU + 2 * N_LINALG**2 * K_RHS - N_LINALG * K_RHS),
        # getrf + getri: 2n³ − 3n²/2 + 5n/2
        (torch.linalg.inv, [(N_LINALG, N_LINALG)],
         2 * N_LINALG**3 - 3 * N_LINALG**2 // 2 + 5 * N_LINALG // 2),
        # n³/3 + n²/2 + n/6 = n(n + 1)(2n + 1)/6
        (torch.linalg.cholesky, [(N_LINALG, N_LINALG)],
         N_LINALG * (N_LINALG + 1) * (2 * N_LINALG + 1) // 6),
        (lambda a, b: torch.linalg.solve_triangular(a, b, upper=True),
         [(N_LINALG, N_LINALG), (N_LINALG, K_RHS)], N_LINALG**2 * K_RHS),
        (lambda b, a: torch.triangular_solve(b, a, unitriangular=True),
         [(N_LINALG, K_RHS), (N_LINALG, N_LINALG)], N_LINALG * (N_LINALG - 1) * K_RHS),
        # Householder QR of m×n: 2mn² − 2n³/3
        (lambda a: torch.linalg.qr(a), [(2 * N_LINALG, N_LINALG)],
         2 * 2 * N_LINALG**3 - (2 * N_LINALG**3) // 3),
        (lambda a: torch.linalg.eigh(a), [(N_LINALG, N_LINALG)], (4 * N_LINALG**3) // 3),
        # factors given: substitution only, 2n²k − nk
        (lambda lu, b: torch.linalg.lu_solve(lu, torch.zeros(lu.shape[:-1], dtype=torch.int32,
                                                             device=lu.device), b),
         [(N_LINALG, N_LINALG), (N_LINALG, K_RHS)],
         2 * N_LINALG**2 * K_RHS - N_LINALG * K_RHS),
        (torch.cholesky_solve, [(N_LINALG, K_RHS), (N_LINALG, N_LINALG)],
         2 * N_LINALG**2 * K_RHS - N_LINALG * K_RHS),
        # bidiagonalisation of a square matrix: 4n³ − 4n³/3, less the n² lower-order margin
        (lambda a: torch.linalg.svdvals(a), [(N_LINALG, N_LINALG)],
         4 * N_LINALG**3 - (4 * N_LINALG**3) // 3 - N_LINALG**2),
    ],
)
def test_linalg_standard_counts(fn, shapes, flops: int) -> None:  # noqa: ANN001
    single = analyze(Fn(fn), *(meta(*shape) for shape in shapes))
    assert single.tensor_flops == flops
    assert single.unsupported_ops == {}
    batched = analyze(Fn(fn), *(meta(BATCH, *shape) for shape in shapes))
    assert batched.tensor_flops == BATCH * flops


def test_small_generators_and_searches() -> None:
    n = 1000
    space = analyze(Fn(lambda x: torch.linspace(0, 1, n, device=x.device) + x), meta(n))
    assert space.vector_flops == 2 * n + n  # multiply-add per element, then the add
    log = analyze(Fn(lambda x: torch.logspace(0, 1, n, device=x.device) + x), meta(n))
    assert log.vector_flops == 3 * n + n
    boundaries = 15  # 16 outcomes: 4 comparisons per element
    search = analyze(Fn(torch.bucketize), meta(n), meta(boundaries))
    assert search.vector_flops == 4 * n
    total = analyze(Fn(torch.nansum), meta(32, 32))
    assert total.vector_flops == 2 * 32 * 32  # isnan, accumulate
    for fn in (torch.triu_indices, torch.tril_indices):
        made = analyze(Fn(lambda x, fn=fn: fn(8, 8, device=x.device)), meta(1))
        assert made.unsupported_ops == {} and made.flops == 0


def test_affine_grid_is_two_flops_per_spatial_input_per_coordinate() -> None:
    batch, height, width = 2, 16, 24
    grid = analyze(
        Fn(lambda theta: F.affine_grid(theta, [batch, 3, height, width], align_corners=False)),
        meta(batch, 2, 3),
    )
    # x' = θ00·x + θ01·y + θ02 per output coordinate: 2 multiply-adds (4 FLOPs), 2 coordinates
    assert grid.tensor_flops == batch * height * width * 2 * 4


def test_diagonal_copy_reads_only_the_diagonal() -> None:
    n = 512
    result = analyze(Fn(torch.diagonal_copy), meta(n, n))
    assert result.unfused_bytes == 2 * n * 4


@pytest.mark.parametrize(
    "fn",
    [torch.zeros_like, torch.ones_like, torch.empty_like, torch.rand_like, torch.randn_like,
     lambda t: torch.full_like(t, 2.0), lambda t: torch.randint_like(t, 10),
     lambda t: t.new_zeros(64, 64), lambda t: t.new_ones(64, 64),
     lambda t: t.new_full((64, 64), 2.0), lambda t: t.new_empty(64, 64)],
)
def test_templates_are_not_read(fn) -> None:  # noqa: ANN001
    # a 50257×768 embedding table as the template: the op writes its output and reads nothing
    result = analyze(Fn(fn), meta(50257, 768))
    made = result.ops[0]
    assert made.reads == ()
    written = 0 if made.category is Category.ZERO_COPY else made.writes[0].elements * 4
    assert result.unfused_bytes == written


def test_in_place_masked_fill_loads_only_the_mask() -> None:
    n = 4096

    class Fill(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("x", torch.empty(n, device="meta"))

        def forward(self, mask: torch.Tensor) -> torch.Tensor:
            return self.x.masked_fill_(mask, 0.0)

    result = analyze(Fill(), torch.empty(n, dtype=torch.bool, device="meta"))
    [op] = result.ops
    assert op.bytes_read(4) == n  # the bool mask; positions are data, the buffer is not loaded
    assert op.bytes_written(4) == n * 4


def test_rule_coverage() -> None:
    coverage = rule_coverage()
    assert coverage.total == coverage.registered + coverage.tagged_pointwise
    assert {getattr(torch.ops.aten, name, None) for name in coverage.unsupported}.isdisjoint(_RULES)
    newly_covered = ["_cdist_forward", "_euclidean_dist", "_trilinear", "addbmm",
                     "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "_fft_r2c", "_fft_c2r",
                     "_fft_c2c", "_linalg_solve_ex", "linalg_lu_factor_ex", "linalg_cholesky_ex",
                     "_linalg_eigh", "linalg_qr", "_linalg_svd", "linalg_inv_ex", "_linalg_det",
                     "triangular_solve", "linalg_solve_triangular", "nansum", "linspace",
                     "logspace", "bucketize", "affine_grid_generator", "triu_indices",
                     "tril_indices", "diagonal_copy"]
    assert {getattr(torch.ops.aten, name) for name in newly_covered} <= set(_RULES)
    # an op that decomposes before dispatch (CompositeImplicitAutograd) never reaches a trace
    assert "linalg_solve_ex" not in coverage.unsupported
    assert "linalg_matrix_exp" in coverage.unsupported


def test_more_linalg_and_small_families() -> None:
    n = 32
    eig = analyze(Fn(torch.linalg.eig), meta(n, n))
    assert eig.tensor_flops == 10 * n**3 // 3  # Hessenberg reduction, 10n³/3
    inverse = analyze(Fn(torch.cholesky_inverse), meta(n, n))
    assert inverse.tensor_flops == (4 * n**3 + 3 * n**2 + 5 * n) // 6  # potri
    rows = 100
    cross = analyze(Fn(torch.linalg.cross), meta(rows, 3), meta(rows, 3))
    assert cross.vector_flops == 3 * rows * 3  # a·b − c·d per component
    polar = analyze(Fn(torch.polar), meta(rows), meta(rows))
    assert polar.vector_flops == 4 * rows
    trace = analyze(Fn(torch.trace), meta(n, 2 * n))
    assert trace.vector_flops == n
    assert trace.compulsory_bytes == n * 4 + 4  # the diagonal in, a scalar out
    for result in (eig, inverse, cross, polar, trace):
        assert result.unsupported_ops == {}


# --- The registry: keyed by aten ops, one rule per key; formulas on shapes alone ----------------

aten = torch.ops.aten
S = torch.Size


def test_registry_refuses_a_second_rule_for_one_op() -> None:
    table: dict = {}
    add_rules(table, [aten.add], "first", "test")
    assert table == {aten.add: "first", aten.add_: "first"}  # the in-place twin shares it
    with pytest.raises(ValueError, match="two test rules for aten.add"):
        add_rules(table, [aten.add], "second", "test")
    with pytest.raises(ValueError, match="aten.add_"):
        add_rules(table, [aten.add_], "second", "test")


def test_every_registry_key_is_an_aten_op() -> None:
    from torchroofline.costs import DESTINATION_ACCESS, INDEXED_POSITIONS
    from torchroofline.plan.demand import DEMAND_RULES, MATRIX_BUILDERS
    from torchroofline.trace.aten_ops import MissingOp

    tables = (_RULES, DEMAND_RULES, DESTINATION_ACCESS, MATRIX_BUILDERS, INDEXED_POSITIONS)
    for key in (key for table in tables for key in table):
        # or an op this release lacks (torch ≥ 2.14 has no aten.cholesky)
        assert isinstance(key, (torch._ops.OpOverloadPacket, torch._ops.OpOverload, MissingOp)), key


def test_max_of_two_tensors_is_pointwise_and_max_of_one_a_reduction() -> None:
    # torch.max(a, b) (aten.max.other) is element-wise: one compare per output element, and a
    # broadcast (4, 1) with (1, 5) has 20 outputs — a rule per input element would say 4
    assert flops_on_shapes(aten.max.other, S((4, 1)), S((1, 5))).vector == 4 * 5
    # x.max() and x.max(dim) compare every input element once: 4·5 = 20, however many outputs
    assert flops_on_shapes(aten.max.default, S((4, 5))).vector == 20
    assert flops_on_shapes(aten.max.dim, S((4, 5)), 1).vector == 20
    pairwise = analyze(Fn(torch.max), meta(4, 1), meta(1, 5))
    assert [op.category for op in pairwise.ops] == [Category.POINTWISE]
    assert pairwise.vector_flops == 20
    reduced = analyze(Fn(lambda x: x.max()), meta(4, 5))
    assert [op.category for op in reduced.ops] == [Category.REDUCTION]
    assert reduced.vector_flops == 20


def test_formulas_on_shapes_alone() -> None:
    # mm (4, 5) @ (5, 6): 4·6 outputs, 5 multiply-adds each: 2·4·5·6 = 240
    assert flops_on_shapes(aten.mm.default, S((4, 5)), S((5, 6))).tensor == 240
    # addr(M (3, 4), u (3), v (4)): one multiply per output element, 12
    assert flops_on_shapes(aten.addr.default, S((3, 4)), S((3,)), S((4,))).tensor == 12
    # sum over all or one dim: one add per input element, 20 either way
    assert flops_on_shapes(aten.sum.default, S((4, 5))).vector == 20
    assert flops_on_shapes(aten.sum.dim_IntList, S((4, 5)), [1]).vector == 20
    # var over dim 1 of (4, 5): subtract the mean, square, accumulate: 3 · 20 = 60
    assert flops_on_shapes(aten.var.correction, S((4, 5)), [1]).vector == 60
    # round to 2 decimals: scale by 100, round, scale back: 3 per element; plain round 1
    assert flops_on_shapes(aten.round.decimals, S((7,)), decimals=2).vector == 21
    assert flops_on_shapes(aten.round.default, S((7,))).vector == 7
    # floor division: divide, then floor: 2 per element
    x = S((6,))
    assert flops_on_shapes(aten.div.Tensor_mode, x, x, rounding_mode="floor").vector == 12
    # cholesky (n = 4): n³/3 + n²/2 + n/6 = 64/3 + 8 + 2/3 = 30
    assert flops_on_shapes(aten.linalg_cholesky_ex.default, S((4, 4))).tensor == 30


def test_an_op_this_release_lacks_is_a_name_never_a_crash() -> None:
    # torch 2.14 removed aten.cholesky: naming a missing op in a rule table must neither raise
    # at import nor match any traced op; its overloads are missing too
    from torchroofline.costs import add_rules
    from torchroofline.trace.aten_ops import MissingOp, aten, is_missing, missing_ops

    gone = aten.op_no_release_has
    assert is_missing(gone) and is_missing(gone.default)
    assert "op_no_release_has" in missing_ops()
    assert str(gone) == "aten.op_no_release_has"  # prints as a real packet would
    table: dict = {}
    add_rules(table, [gone, aten.mm], "rule", "test")
    assert table == {gone: "rule", torch.ops.aten.mm: "rule"}  # mm has no in-place twin
    assert gone != MissingOp("mm") and not is_missing(aten.mm)
    with pytest.raises(ValueError, match="two test rules"):
        add_rules(table, [gone], "again", "test")
