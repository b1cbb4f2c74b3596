"""The trace's fast paths past FakeTensorMode (trace/fast_fake.py) and the interval union of
dense views (trace/storages.py): each gives what the general path gives, so no figure moves."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

from conftest import Fn, meta
from torchroofline import analyze
from torchroofline.trace import fast_fake, regions, storages
from torchroofline.trace.refs import TensorRef
from torchroofline.trace.storages import united_elements

aten = torch.ops.aten

#: (op, arguments after the tensor) for a (4, 6, 8) input: one call of every direct view
VIEW_CALLS = [
    (aten.alias.default, ()),
    (aten.as_strided.default, ((3, 5), (7, 2), 4)),
    (aten.diagonal.default, (0, 1, 2)),
    (aten.expand.default, ((2, 4, 6, 8),)),
    (aten.permute.default, ((2, 0, 1),)),
    (aten.select.int, (1, 3)),
    (aten.slice.Tensor, (2, 1, 7, 3)),
    (aten.squeeze.default, ()),
    (aten.squeeze.dim, (0,)),
    (aten.squeeze.dims, ((0, 1),)),
    (aten.transpose.int, (0, 2)),
    (aten.unbind.int, (1,)),
    (aten.unfold.default, (2, 3, 2)),
    (aten.unsqueeze.default, (1,)),
    (aten.view.default, ((24, 8),)),
]


def _layout(tensor: torch.Tensor) -> tuple:
    return (tensor.shape, tensor.stride(), tensor.storage_offset(), tensor.dtype,
            tensor.device, tensor.untyped_storage()._cdata)


def test_every_direct_view_is_listed_once_here() -> None:
    # a view added to DIRECT_VIEWS without a case here would go unchecked
    assert {op for op, _ in VIEW_CALLS} | {aten.t.default} == fast_fake.DIRECT_VIEWS


@pytest.mark.parametrize(("op", "rest"), VIEW_CALLS, ids=[str(op) for op, _ in VIEW_CALLS])
def test_a_direct_view_is_the_view_fake_tensor_mode_makes(op, rest) -> None:  # noqa: ANN001
    mode = FakeTensorMode()
    with mode:
        source = torch.empty(4, 6, 8)
        expected = op(source, *rest)
    made = fast_fake.direct_view(mode, op, (source, *rest), {})
    pairs = zip(made, expected, strict=True) if isinstance(made, list) else [(made, expected)]
    for view, reference in pairs:
        assert type(view) is type(reference) and view.fake_mode is mode
        assert _layout(view) == _layout(reference)  # same sizes, strides, offset, storage


def test_a_direct_view_leaves_other_tensors_to_fake_tensor_mode() -> None:
    mode, other = FakeTensorMode(), FakeTensorMode()
    with other:
        foreign = torch.empty(4, 4)
    assert fast_fake.direct_view(mode, aten.t.default, (foreign,), {}) is None
    assert fast_fake.direct_view(mode, aten.t.default, (torch.empty(4, 4),), {}) is None


def _figures(body, *inputs):  # noqa: ANN001, ANN202
    result = analyze(Fn(body), inputs, "h100-sxm")
    return (result.compulsory_bytes, result.fused_bytes, result.unfused_bytes,
            result.tensor_flops, result.vector_flops, [k.cost for k in result.kernels])


PROGRAMS = [
    lambda x: torch.cat([x[i:i + 1] for i in range(0, 48, 3)]).sum(),
    lambda x: (x[::2, 1:5].T @ x[1::2, 4:8]).relu(),
    lambda x: x.unfold(0, 4, 2).sum(-1) * x.diagonal()[:1],
    lambda x: torch.stack(x.unbind(1)[::2]).expand(2, -1, -1).mean(),
    lambda x: x.view(8, 48 // 8, -1).permute(2, 0, 1)[1:, None].squeeze().exp(),
]


@pytest.mark.parametrize("index", range(len(PROGRAMS)))
def test_the_fast_paths_change_no_figure(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    body = PROGRAMS[index]
    fast = _figures(body, meta(48, 8))
    monkeypatch.setattr("torchroofline.trace.tracer.DIRECT_VIEWS", frozenset())
    monkeypatch.setattr(fast_fake, "LONG_LIST", 10**9)
    assert _figures(body, meta(48, 8)) == fast


def _slice_ref(offset: int, rows: int, width: int, step: int = 1) -> TensorRef:
    return TensorRef(value_id=1, storage_id=1, shape=(rows, width), dtype="float32",
                     elements=rows * width, is_float=True, itemsize=4, offset=offset,
                     strides=(width * step, 1), storage_elements=4096)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(1, 5), st.integers(1, 2)),
                min_size=2, max_size=12))
def test_the_interval_union_counts_what_the_regions_count(views) -> None:  # noqa: ANN001
    # row slices of a 64-wide matrix, dense (step 1) or every other row. Dense runs only: the
    # interval union counts the views' elements exactly, as the region union does; any
    # strided view: the region union alone, never above the exact count
    width = 64
    refs = [_slice_ref(row * width, rows, width, step) for row, rows, step in views]
    covered = {
        ref.offset + r * ref.strides[0] + c
        for ref in refs for r, c in itertools.product(range(ref.shape[0]), range(width))
    }
    storages._united_elements.cache_clear()
    fast = united_elements(refs)
    storages._united_elements.cache_clear()
    original = storages._flat_ranges
    storages._flat_ranges = lambda _refs: None
    try:
        general = united_elements(refs)
    finally:
        storages._flat_ranges = original
        storages._united_elements.cache_clear()
    if all(step == 1 for _, _, step in views):
        assert fast == general == len(covered)
    else:
        assert fast == general <= len(covered)


def test_a_concatenation_of_many_slices_traces_through_the_fast_paths() -> None:
    # 5,000 single-row slices: each row once (n·d elements and the 4-byte result); FakeTensorMode
    # took ~0.7 ms a slice, the direct views ~0.04 ms (not asserted: a test times nothing)
    n, d = 5000, 4
    result = analyze(Fn(lambda x: torch.cat([x[i:i + 1] for i in range(n)]).sum()),
                     (meta(n, d),), "h100-sxm")
    assert result.compulsory_bytes == (n * d + 1) * 4


def _decomposed_calls() -> list[tuple]:
    """(op, arguments) of every op of META_DECOMPOSED, on fake CUDA tensors made by the caller's
    mode: contiguous, channels-last and transposed operands, broadcasts, keyword variants."""
    x = torch.empty(4, 6, 5, 3, device="cuda")
    last = torch.empty_strided((4, 6, 5, 3), (90, 1, 18, 6), device="cuda")  # channels-last
    rows, matrix = torch.empty(4, 6, device="cuda"), torch.empty(6, 8, device="cuda")
    channel = [torch.empty(6, device="cuda") for _ in range(4)]
    target = torch.zeros(4, dtype=torch.long, device="cuda")
    return [
        (aten._log_softmax.default, (rows, 1, False)),
        (aten._unsafe_view.default, (x, (24, 15))),
        (aten.add.Tensor, (last, torch.empty(3, device="cuda"))),
        (aten.addmm.default, (torch.empty(8, device="cuda"), rows, matrix)),
        (aten.addmm.default, (torch.empty(8, device="cuda"), rows,
                                    torch.empty_strided((6, 8), (1, 6), device="cuda"))),
        (aten.gelu.default, (last,)),
        (aten.gelu.default, (x,), {"approximate": "tanh"}),
        (aten.mean.default, (x,)),
        (aten.mean.dim, (last, [1], True)),
        (aten.mul.Tensor, (x, last)),
        (aten.native_batch_norm.default, (x, *channel, True, 0.1, 1e-5)),
        (aten.native_batch_norm.default, (last, *channel, False, 0.1, 1e-5)),
        (aten.native_group_norm.default, (last, *channel[:2], 4, 6, 15, 3, 1e-5)),
        (aten.native_layer_norm.default, (x, [5, 3], None, None, 1e-5)),
        (aten.nll_loss_forward.default, (rows, target, None, 1, -100)),
        (aten.relu.default, (last,)),
        (aten.sigmoid.default, (torch.empty_strided((5, 6, 4, 3), (3, 15, 90, 1), device="cuda"),)),
        (aten.sub.Tensor, (x, torch.empty_strided((4, 6, 1, 1), (6, 1, 1, 1), device="cuda")),
         {"alpha": 2}),
        (aten.sum.dim_IntList, (last, [0, 2])),
        (aten.tanh.default, (torch.empty_strided((4, 3, 5, 3), (90, 30, 3, 1), device="cuda"),)),
    ]


def _expected(mode: FakeTensorMode, op, args: tuple, kwargs: dict):  # noqa: ANN001, ANN202
    """What the trace made before the fast path: FakeTensorMode's output, or, for the ops a
    CPU-only build cannot fake on CUDA (training batch norm), its meta fallback."""
    from torchroofline.trace.tracer import _call_on_meta

    try:
        return FakeTensorMode.__torch_dispatch__(mode, op, (), args, kwargs)
    except RuntimeError:
        with mode:
            return _call_on_meta(op, args, kwargs)


def _outputs(tree) -> list:  # noqa: ANN001
    return [t for t in torch.utils._pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


def test_every_meta_decomposed_op_is_checked_here() -> None:
    mode = FakeTensorMode()
    with mode:
        assert {call[0] for call in _decomposed_calls()} == fast_fake.META_DECOMPOSED


@pytest.mark.parametrize("index", range(20))
def test_a_decomposition_on_meta_makes_what_fake_tensor_mode_makes(index: int) -> None:
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        op, args, *rest = _decomposed_calls()[index]
    _assert_made_as_fake_tensor_mode_makes(mode, op, args, rest[0] if rest else {})


def _assert_made_as_fake_tensor_mode_makes(mode: FakeTensorMode, op, args: tuple,  # noqa: ANN001
                                           kwargs: dict) -> None:
    expected = _expected(mode, op, args, kwargs)
    inputs = {t.untyped_storage()._cdata for t in _outputs(args)}
    for _ in range(2):  # the second call is made from the layout the first one left
        made = fast_fake.decomposed_on_meta(mode, op, args, kwargs)
        assert made is not None
        for mine, reference in zip(_outputs(made), _outputs(expected), strict=True):
            assert type(mine) is type(reference) and mine.fake_mode is mode
            assert _layout(mine)[:5] == _layout(reference)[:5]
            assert mine.untyped_storage().nbytes() == reference.untyped_storage().nbytes()
            # a view of an input (_unsafe_view) shares its storage either way
            assert (mine.untyped_storage()._cdata in inputs) == (
                reference.untyped_storage()._cdata in inputs)


def test_a_decomposition_on_meta_leaves_mixed_devices_to_fake_tensor_mode() -> None:
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        x, scalar = torch.empty(4, device="cuda"), torch.tensor(2.0)
    assert fast_fake.decomposed_on_meta(mode, aten.mul.Tensor, (x, scalar), {}) is None
    assert fast_fake.decomposed_on_meta(mode, aten.mul.Tensor, (torch.empty(4), x), {}) is None
    assert fast_fake.decomposed_on_meta(mode, aten.exp.default, (x,), {}) is None


def test_a_decomposition_on_meta_leaves_cpu_tensors_to_fake_tensor_mode() -> None:
    # eval-mode native_batch_norm on the CPU returns two empty statistics; its decomposition on
    # meta returns C-sized ones (as CUDA does): 2 x 6 fp32 = 48 bytes the memory timeline of a
    # CPU trace would hold that MemTracker does not
    mode = FakeTensorMode()
    with mode:
        x, channel = torch.empty(4, 6, 5), torch.empty(6)
    args = (x, channel, channel, channel, channel, False, 0.1, 1e-5)
    assert fast_fake.decomposed_on_meta(mode, aten.native_batch_norm.default, args, {}) is None
    with mode:
        _, mean, invstd = aten.native_batch_norm.default(*args)
    assert mean.numel() == invstd.numel() == 0


#: (op, operand shapes, dtype, operand dtypes after the first, plain arguments) for the layout
#: rules: size-1 dims (whose strides row-major fixes), every floating dtype, mixed batch-norm
#: statistics, eval and training
_RULE_CALLS = [
    *((op, [(2, 1, 5, 3)], dtype, (), ()) for op in (aten.relu.default, aten.sigmoid.default,
                                                     aten.tanh.default, aten.gelu.default)
      for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64)),
    *((op, [(7, 1), (7, 1)], dtype, (dtype,), ()) for op in (aten.add.Tensor, aten.mul.Tensor,
                                                             aten.sub.Tensor)
      for dtype in (torch.float32, torch.float16, torch.float64)),
    *((aten.native_batch_norm.default, [shape] + [(shape[1],)] * 4, dtype, (weight,) * 2
       + (torch.float32,) * 2, (training, 0.1, 1e-5))
      for shape in ((2, 8), (2, 1, 5), (3, 8, 1, 4)) for training in (True, False)
      for dtype, weight in ((torch.float32, torch.float32), (torch.float16, torch.float16),
                            (torch.bfloat16, torch.float32))),
    *((aten.native_layer_norm.default, [shape] + [normalized] * affine, dtype, (weight,) * affine,
       (normalized,) + (None, None)[affine:] + (1e-5,))
      for shape, normalized in (((2, 8, 6), (6,)), ((2, 8, 6), (8, 6)), ((4, 1, 6), (6,)))
      for affine in (0, 2)
      for dtype, weight in ((torch.float32, torch.float32), (torch.float16, torch.float16),
                            (torch.bfloat16, torch.float32))),
    *((aten.addmm.default, shapes, dtype, (dtype,) * 2, ())
      for shapes in ([(8,), (4, 6), (6, 8)], [(4, 8), (4, 6), (6, 8)], [(2,), (3, 1), (1, 2)])
      for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64)),
    *((aten.native_group_norm.default, [shape] + [(shape[1],)] * affine, dtype, (dtype,) * affine,
       (None, None)[affine:] + (shape[0], shape[1], math.prod(shape[2:]), groups, 1e-5))
      for shape, groups in (((2, 8), 4), ((2, 6, 5, 3), 3), ((3, 8, 4), 8), ((2, 4, 3), 1))
      for affine in (0, 2) for dtype in (torch.float32, torch.float16, torch.bfloat16)),
    *((aten.pow.Tensor_Scalar, [(2, 1, 5, 3)], dtype, (), (exponent,))
      for exponent in (2, 0.5, -1.0) for dtype in (torch.float32, torch.float16, torch.float64)),
]


#: ops whose normalized shape comes second, before the weights
_NORMALIZED = {aten.native_layer_norm.default}


@pytest.mark.parametrize("index", range(len(_RULE_CALLS)))
def test_a_layout_rule_makes_what_the_decomposition_makes(index: int) -> None:
    op, shapes, dtype, others, plain = _RULE_CALLS[index]
    mode = FakeTensorMode()
    with mode:
        tensors = [torch.empty(shape, dtype=each, device="cuda")
                   for shape, each in zip(shapes, (dtype, *others), strict=True)]
    args = (tensors[0], *plain[:1], *tensors[1:], *plain[1:]) if op in _NORMALIZED else (
        *tensors, *plain)
    rule = fast_fake.LAYOUT_RULES[op](args, {}, tensors)
    assert rule is not None
    with fast_fake.in_kernel_invocation_manager(mode):
        output = op(*args)
    assert rule == fast_fake._layout(output, tensors)


def test_a_layout_rule_leaves_other_layouts_to_the_decomposition() -> None:
    mode = FakeTensorMode()
    with mode:
        last = torch.empty_strided((4, 6, 5, 3), (90, 1, 18, 6), device="cuda")  # channels-last
        x, channel = torch.empty(4, 6, 5, 3, device="cuda"), torch.empty(6, device="cuda")
        odd = torch.empty_strided((4, 1), (1, 7), device="cuda")  # contiguous, odd size-1 stride
    rules = fast_fake.LAYOUT_RULES
    def rule(op, *tensors, plain=()):  # noqa: ANN001, ANN202
        return rules[op]((*tensors, *plain), {}, list(tensors))

    assert rule(aten.relu.default, last) is None and rule(aten.relu.default, odd) is None
    assert rule(aten.add.Tensor, x, last) is None
    assert rule(aten.add.Tensor, x, channel) is None  # a broadcast
    assert rule(aten.relu.default, x.long()) is None  # relu keeps ints, sigmoid would not
    assert rule(aten.native_batch_norm.default, last, *[channel] * 4) is None
    assert rule(aten.native_batch_norm.default, x.double(), *[channel] * 4) is None
    layer_norm = aten.native_layer_norm.default
    assert rules[layer_norm]((last, [3]), {}, [last]) is None
    assert rules[layer_norm]((x, [5]), {}, [x]) is None  # not the last dims
    group_norm = aten.native_group_norm.default
    assert rule(group_norm, last, channel, channel, plain=(4, 6, 15, 3, 1e-5)) is None
    assert rule(group_norm, x, channel, channel, plain=(4, 6, 15, 4, 1e-5)) is None  # 6 % 4
    with mode:
        single = torch.empty(4, 6, 1, 3, device="cuda")  # a size-1 dim: its stride is free
        rows, matrix = torch.empty(4, 6, device="cuda"), torch.empty(6, 8, device="cuda")
        bias, row = torch.empty(8, device="cuda"), torch.empty(1, 6, device="cuda")
        transposed = torch.empty(8, 4, device="cuda").t()  # (4, 8), column-major
    assert rule(group_norm, single, channel, channel, plain=(4, 6, 3, 3, 1e-5)) is None
    assert rule(aten.addmm.default, bias, row, matrix) is None  # one row
    assert rule(aten.addmm.default, transposed, rows, matrix) is None
    assert rule(aten.addmm.default, bias.double(), rows, matrix) is None
    assert rule(aten.pow.Tensor_Scalar, x, plain=(1j,)) is None  # a complex power


#: (input shape, weight shape, bias, stride, padding, dilation, transposed, output padding,
#: groups, dtype) of convolutions the layout rule makes: 1-D to 3-D, 1×1 kernels, a 1×1
#: output, groups, transposed with output padding, half precisions
_CONVOLUTIONS = [
    ((2, 3, 9, 9), (4, 3, 3, 3), True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, torch.float32),
    ((2, 3, 9, 8), (4, 3, 3, 2), False, [2, 3], [1, 2], [2, 1], False, [0, 0], 1, torch.float32),
    ((1, 6, 7, 7), (8, 6, 1, 1), False, [2, 2], [0, 0], [1, 1], False, [0, 0], 1, torch.float16),
    ((2, 4, 3, 3), (5, 4, 3, 3), True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, torch.bfloat16),
    ((2, 6, 9, 9), (8, 3, 3, 3), False, [1, 1], [1, 1], [1, 1], False, [0, 0], 2, torch.float32),
    ((2, 4, 5, 5), (4, 3, 3, 3), True, [2, 2], [1, 1], [1, 1], True, [1, 1], 2, torch.float32),
    ((2, 4, 11), (6, 4, 3), True, [2], [1], [3], False, [0], 1, torch.float32),
    ((2, 4, 11), (4, 6, 3), False, [2], [1], [1], True, [1], 1, torch.float32),
    ((2, 3, 5, 6, 7), (4, 3, 3, 2, 2), True, [1, 2, 1], [1, 0, 1], [1, 1, 2], False,
     [0, 0, 0], 1, torch.float32),
    ((2, 4, 3, 4, 5), (4, 2, 2, 2, 2), False, [2, 2, 2], [0, 1, 0], [1, 1, 1], True,
     [1, 0, 1], 1, torch.float16),
]


@pytest.mark.parametrize("index", range(len(_CONVOLUTIONS)))
def test_the_convolution_rule_makes_what_fake_tensor_mode_makes(index: int) -> None:
    shape, weight_shape, bias, *plain, dtype = _CONVOLUTIONS[index]
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        source = torch.empty(shape, dtype=dtype, device="cuda")
        weight = torch.empty(weight_shape, dtype=dtype, device="cuda")
        channels = weight_shape[1] * plain[-1] if plain[3] else weight_shape[0]
        bias = torch.empty(channels, dtype=dtype, device="cuda") if bias else None
    args = (source, weight, bias, *plain)
    made = fast_fake.decomposed_on_meta(mode, aten.convolution.default, args, {})
    assert made is not None
    assert _layout(made)[:5] == _layout(_expected(mode, aten.convolution.default, args, {}))[:5]


def test_the_convolution_rule_leaves_other_layouts_to_fake_tensor_mode() -> None:
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        last = torch.empty_strided((2, 3, 9, 9), (243, 1, 27, 3), device="cuda")
        one_channel, weight = torch.empty(2, 1, 9, 9, device="cuda"), torch.empty(4, 3, 3, 3,
                                                                                  device="cuda")
    plain = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    for source in (last, one_channel):
        assert fast_fake.decomposed_on_meta(
            mode, aten.convolution.default, (source, weight, None, *plain), {}) is None


def _rule_calls() -> list[tuple]:
    """(op, arguments, keywords) of the layout rules past the meta decompositions, on fake CUDA
    tensors made by the caller's mode: transposed and expanded operands, half precisions,
    broadcast masks, integer indices of two widths, keyword variants."""
    def cuda(*shape, dtype=torch.float32):  # noqa: ANN202
        return torch.empty(shape, dtype=dtype, device="cuda")

    half = cuda(4, 6, dtype=torch.float16)
    return [
        (aten.mm.default, (cuda(4, 6), cuda(6, 8)), {}),
        (aten.mm.default, (cuda(6, 4).t(), cuda(8, 6).t()), {}),
        (aten.mm.default, (half, cuda(6, 3, dtype=torch.float16)), {}),
        (aten.bmm.default, (cuda(2, 4, 6), cuda(2, 8, 6).transpose(1, 2)), {}),
        (aten.bmm.default, (cuda(1, 4, 6).expand(3, 4, 6), cuda(3, 6, 5, dtype=torch.float32)), {}),
        (aten._softmax.default, (cuda(4, 6, 5), -1, False), {}),
        (aten._softmax.default, (cuda(4, 6, 5, dtype=torch.bfloat16), 1, False), {}),
        (aten._log_softmax.default, (half, 0, False), {}),
        (aten.clone.default, (cuda(4, 6).t(),), {"memory_format": torch.contiguous_format}),
        (aten.clone.default, (cuda(4, 1, 6),), {}),
        (aten.clone.default, (cuda(4, 6, dtype=torch.int64),),
         {"memory_format": torch.preserve_format}),
        (aten.embedding.default, (cuda(10, 6), cuda(3, 4, dtype=torch.int64)), {}),
        (aten.embedding.default, (cuda(6, 10).t(), cuda(5, dtype=torch.int32)), {}),
        (aten.embedding.default, (cuda(10, 6, dtype=torch.float16),
                                  cuda(2, 3, dtype=torch.int64), 0), {}),
        (aten.eq.Scalar, (cuda(4, 6), 0), {}),
        (aten.ne.Scalar, (cuda(4, 1, 6, dtype=torch.int64), 2), {}),
        (aten.gt.Scalar, (half, 0.5), {}),
        (aten.ge.Scalar, (cuda(3, dtype=torch.bool), True), {}),
        (aten.lt.Scalar, (cuda(2, 3, 4), -1.0), {}),
        (aten.le.Scalar, (cuda(2, 3, 4, dtype=torch.int32), 7), {}),
        (aten.masked_fill.Scalar, (cuda(2, 3, 4, 4), cuda(1, 1, 4, 4, dtype=torch.bool),
                                   float("-inf")), {}),
        (aten.masked_fill.Scalar, (half, cuda(4, 6, dtype=torch.bool), 0.0), {}),
        (aten.new_empty.default, (cuda(4, 6), [0]),
         {"dtype": torch.uint8, "device": torch.device("cuda")}),
        (aten.new_empty.default, (half.t(), [3, 5]), {}),
        (aten.pow.Tensor_Scalar, (cuda(4, 6, 5), 2), {}),
        (aten.pow.Tensor_Scalar, (half, -0.5), {}),
    ]


def test_every_layout_rule_is_checked_here() -> None:
    # a rule added without a case here (or among the meta decompositions', or a test of its
    # own: convolutions, max pools)
    # would go unchecked against FakeTensorMode
    mode = FakeTensorMode()
    with mode:
        checked = {call[0] for call in _rule_calls() + _decomposed_calls()}
    own_tests = {aten.convolution.default, aten.max_pool2d_with_indices.default}
    assert set(fast_fake.LAYOUT_RULES) - own_tests <= checked


@pytest.mark.parametrize("index", range(26))
def test_a_layout_rule_makes_what_fake_tensor_mode_makes(index: int) -> None:
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        calls = _rule_calls()
    assert len(calls) == 26
    _assert_made_as_fake_tensor_mode_makes(mode, *calls[index])


def test_the_layout_rules_leave_other_calls_to_fake_tensor_mode() -> None:
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        x, rows = torch.empty(4, 6, device="cuda"), torch.empty(6, 8, device="cuda")
        last = torch.empty_strided((2, 3, 4, 4), (48, 1, 12, 3), device="cuda")  # channels-last
        mask = torch.empty(2, 3, 4, 4, dtype=torch.bool, device="cuda")
    calls = [
        (aten.mm.default, (x, rows.half()), {}),  # mixed dtypes: the op raises
        (aten.mm.default, (x, x), {}),  # inner sizes differ: the op raises
        (aten.bmm.default, (x, rows), {}),  # not 3-D
        (aten._softmax.default, (x.half(), 1, True), {}),  # half to float
        (aten._softmax.default, (last, 1, False), {}),
        (aten.clone.default, (x.t(),), {}),  # keeps the transposed strides
        (aten.clone.default, (x,), {"memory_format": torch.channels_last}),
        (aten.eq.Scalar, (last, 0), {}),
        (aten.masked_fill.Scalar, (x, mask, 0.0), {}),  # the mask is larger
        (aten.masked_fill.Scalar, (last, mask, 0.0), {}),
        (aten.new_empty.default, (x, [2]), {"layout": torch.sparse_coo}),
    ]
    for op, args, kwargs in calls:
        tensors = [t for t in _outputs((args, kwargs))]
        assert fast_fake.LAYOUT_RULES[op](args, kwargs, tensors) is None, op


#: (factory, arguments, keywords) of every op of FACTORIES
_FACTORY_CALLS = [
    (aten.arange.default, (5,), {"device": torch.device("cuda")}),
    (aten.arange.start, (1, 7), {"dtype": torch.float16}),
    (aten.arange.start_step, (0.0, 1.0, 0.25), {}),
    (aten.empty.memory_format, ([0],), {"dtype": torch.uint8, "device": torch.device("cuda")}),
    (aten.empty_strided.default, ([3, 4], [1, 3]), {}),
    (aten.full.default, ([2, 3], 1.5), {"device": torch.device("cuda")}),
    (aten.ones.default, ([2, 1, 3],), {"dtype": torch.bool}),
    (aten.rand.default, ([4],), {}),
    (aten.randint.default, (10, [2, 2]), {}),
    (aten.randint.low, (0, 10, [4, 256]), {"device": torch.device("cpu")}),
    (aten.randn.default, ([3, 5],), {"dtype": torch.bfloat16, "device": torch.device("cuda")}),
    (aten.zeros.default, ([],), {}),
]


@pytest.mark.parametrize("index", range(len(_FACTORY_CALLS)))
def test_a_factory_makes_what_fake_tensor_mode_makes(index: int) -> None:
    op, args, kwargs = _FACTORY_CALLS[index]
    mode = FakeTensorMode()
    expected = FakeTensorMode.__torch_dispatch__(mode, op, (), args, kwargs)
    made = fast_fake.made_by_factory(mode, op, args, kwargs)
    assert type(made) is type(expected) and made.fake_mode is mode
    assert _layout(made)[:5] == _layout(expected)[:5] and made.constant is expected.constant


def test_every_factory_is_checked_here() -> None:
    assert {op for op, _, _ in _FACTORY_CALLS} == fast_fake.FACTORIES


_INDEX_SETS = st.lists(
    st.builds(lambda start, length, step: range(start, start + length * step, step),
              st.integers(0, 12), st.integers(0, 4), st.integers(1, 3)),
    min_size=1, max_size=2,
).map(lambda ranges: regions.normalize(ranges) or (range(0),))  # disjoint, as every set is


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 3).flatmap(
    lambda rank: st.lists(st.tuples(*[_INDEX_SETS] * rank), min_size=0, max_size=8)))
def test_the_bounds_skip_only_boxes_that_share_nothing(boxes) -> None:  # noqa: ANN001
    # Region.count meets only the pairs whose bounds meet, and the union's containment test
    # only the boxes within another's bounds: every pair they skip shares no element (or is
    # no containment), so the counts are those of the all-pairs loops
    meeting = {frozenset((id(a), id(b))) for a, b in regions._meeting_pairs(boxes)}
    for i, first in enumerate(boxes):
        for second in boxes[i + 1:]:
            if regions.box_intersection(first, second) is not None:
                assert frozenset((id(first), id(second))) in meeting
            if regions.box_size(second) and regions._contains(first, second):
                assert regions._within(regions._bounds(second), regions._bounds(first))
    assert len(meeting) <= len(boxes) * (len(boxes) - 1) // 2


#: (input shape, kernel, stride, padding, dilation, ceil mode) of max pools the layout rule
#: makes: the defaults, a stride of its own, padding, dilation, ceil mode whose last window
#: would start in the right padding, and one whose last window is kept
_MAX_POOLS = [
    ((2, 3, 8, 8), [2, 2], [], [0, 0], [1, 1], False),
    ((2, 3, 9, 7), [3, 3], [2, 2], [1, 1], [1, 1], False),
    ((1, 4, 10, 9), [3, 2], [2, 1], [1, 0], [2, 1], False),
    ((2, 3, 6, 6), [2, 2], [2, 2], [1, 1], [1, 1], True),
    ((2, 3, 7, 7), [3, 3], [2, 2], [0, 0], [1, 1], True),
]


@pytest.mark.parametrize("index", range(len(_MAX_POOLS)))
def test_the_max_pool_rule_makes_what_fake_tensor_mode_makes(index: int) -> None:
    shape, *plain = _MAX_POOLS[index]
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        source = torch.empty(shape, device="cuda")
    for args in ((source, *plain), (source, plain[0])):
        _assert_made_as_fake_tensor_mode_makes(mode, aten.max_pool2d_with_indices.default, args,
                                               {})


def test_the_max_pool_rule_leaves_refused_windows_to_fake_tensor_mode() -> None:
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        source = torch.empty(2, 3, 8, 8, device="cuda")
        last = torch.empty_strided((2, 3, 8, 8), (192, 1, 24, 3), device="cuda")
    rule = fast_fake.LAYOUT_RULES[aten.max_pool2d_with_indices.default]
    assert rule((source, [2, 2], [2, 2], [2, 2]), {}, [source]) is None  # padding over half
    assert rule((source, [9, 9]), {}, [source]) is None  # no window fits
    assert rule((last, [2, 2]), {}, [last]) is None
    with pytest.raises(RuntimeError):  # FakeTensorMode refuses the first, as the CUDA kernel
        FakeTensorMode.__torch_dispatch__(mode, aten.max_pool2d_with_indices.default, (),
                                          (source, [2, 2], [2, 2], [2, 2]), {})
