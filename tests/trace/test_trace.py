"""Tracing: what may be passed in, which ops are seen and how, value identity, fallbacks, and
the one-line errors a user can cause."""

from __future__ import annotations

import resource

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import torchroofline
from conftest import Fn, analyze, meta, op_names
from torchroofline.costs import _RULES, Category
from torchroofline.errors import (
    DataDependentError,
    InputError,
    ModelError,
    PrecisionError,
    TorchrooflineError,
    UnknownGPUError,
)
from torchroofline.trace.modes import one_thread
from torchroofline.trace.tracer import trace_model

LINEAR_FLOPS = 2 * 16 * 32 * 64
LINEAR_BYTES = (16 * 64 + 64 * 32 + 32 + 16 * 32) * 4


def _figures(result: torchroofline.Result) -> tuple[int, ...]:
    return (result.flops, result.unfused_bytes, result.fused_bytes, result.compulsory_bytes)


# --- What may be passed in ---------------------------------------------------------------------


def _meta_linear() -> nn.Linear:
    with torch.device("meta"):
        return nn.Linear(64, 32)


def _fake_linear_and_input() -> tuple[nn.Linear, torch.Tensor]:
    with FakeTensorMode():
        return nn.Linear(64, 32), torch.randn(16, 64)


@pytest.mark.parametrize("case", ["real", "meta", "fake", "meta model, real input",
                                  "real model, fake input", "fake model, meta input"])
def test_real_meta_and_fake_tensors_give_the_same_figures(case: str) -> None:
    fake_model, fake_input = _fake_linear_and_input()
    model, x = {
        "real": (nn.Linear(64, 32), torch.randn(16, 64)),
        "meta": (_meta_linear(), meta(16, 64)),
        "fake": (fake_model, fake_input),
        "meta model, real input": (_meta_linear(), torch.randn(16, 64)),
        "real model, fake input": (nn.Linear(64, 32), fake_input),
        "fake model, meta input": (fake_model, meta(16, 64)),
    }[case]
    result = torchroofline.analyze(model, x)
    assert _figures(result) == (LINEAR_FLOPS, LINEAR_BYTES, LINEAR_BYTES, LINEAR_BYTES)
    assert result.params == 64 * 32 + 32
    assert result.notes == ()


def test_inputs_as_list_or_single_tensor() -> None:
    as_tensor = torchroofline.analyze(nn.Linear(64, 32), meta(16, 64))
    as_list = torchroofline.analyze(nn.Linear(64, 32), [meta(16, 64)])
    assert _figures(as_tensor) == _figures(as_list)


def test_hundred_gigabyte_model_allocates_nothing() -> None:
    width = 100_000
    with torch.device("meta"):
        model = nn.Sequential(*[nn.Linear(width, width) for _ in range(3)])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    result = torchroofline.analyze(model, meta(8, width))
    grown_bytes = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    assert grown_bytes < 2**30
    assert result.params == 3 * (width * width + width)
    assert result.flops == 3 * 2 * 8 * width * width
    assert result.compulsory_bytes >= 3 * width * width * 4  # 120 GB of fp32 weights
    assert result.notes == ()


def test_model_attributes_that_are_plain_tensors_are_converted() -> None:
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.ones(64)  # neither parameter nor buffer

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.scale

    model = Scaled()
    result = torchroofline.analyze(model, meta(16, 64))
    assert result.compulsory_bytes == (16 * 64 + 64 + 16 * 64) * 4
    assert not isinstance(model.scale, torch._subclasses.FakeTensor)  # put back afterwards


def test_tied_weights_are_read_once() -> None:
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(32, 32, bias=False)
            self.b = nn.Linear(32, 32, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(self.a(x))

    result = torchroofline.analyze(Tied(), meta(4, 32))
    assert result.params == 32 * 32
    assert result.compulsory_bytes == (4 * 32 + 32 * 32 + 4 * 32) * 4


# --- Which ops are seen ------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_recurrent_layers_are_one_op(cls: type) -> None:
    result = analyze(cls(16, 32, num_layers=2), meta(100, 4, 16))
    compute = [op for op in result.ops if op.category is Category.COMPUTE]
    assert len(compute) == 1
    assert compute[0].name.endswith(".input")
    assert len(result.ops) <= 6  # the state initialisation and the one call


def test_sdpa_is_intercepted_before_it_decomposes() -> None:
    q, k, v = meta(2, 4, 64, 32), meta(2, 4, 64, 32), meta(2, 4, 64, 32)
    result = analyze(Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)), q, k, v)
    assert op_names(result) == ["aten.scaled_dot_product_attention"]
    # q, k, v in and the output out, no score matrix in between
    assert result.fused_bytes == 4 * q.numel() * 4
    # self-attention on one tensor reads it once
    self_attention = analyze(Fn(lambda x: F.scaled_dot_product_attention(x, x, x)), q)
    assert self_attention.fused_bytes == 2 * q.numel() * 4


def test_multihead_attention_costs_its_attention_kernel() -> None:
    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention = nn.MultiheadAttention(64, 4, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.attention(x, x, x, need_weights=False)[0]

    batch, length, width, heads = 2, 10, 64, 4
    result = analyze(SelfAttention(), meta(batch, length, width))
    # SDPA runs inside multi_head_attention_forward, out of the interceptor's reach: whichever
    # attention backend it decomposes into is costed as attention, not as an unknown op
    [attention] = [op for op in result.ops if "attention" in op.name]
    assert attention.category is Category.COMPUTE
    assert attention.flops.tensor == 4 * batch * heads * length * length * (width // heads)
    assert result.unsupported_ops == {}
    assert "aten._softmax.default" not in op_names(result)


@pytest.mark.parametrize(("fn", "expected_op"), [
    (lambda x: torch.einsum("ij,jk->ik", x, x), "aten.bmm.default"),
    (lambda x: x.cumsum(0), "aten.cumsum.default"),
    (lambda x: x.argmax(-1), "aten.argmax.default"),
    (lambda x: x.masked_fill(x > 0, 0.0), "aten.masked_fill.Scalar"),
    (lambda x: torch.where(x > 0, x, -x), "aten.where.self"),
    (lambda x: x + torch.randn_like(x), "aten.randn_like.default"),
    (lambda x: x + torch.randn(x.shape, device=x.device), "aten.randn.default"),
    (lambda x: F.dropout(x, 0.5, training=True), "aten.native_dropout.default"),
    (lambda x: x.relu_(), "aten.relu_.default"),
])
def test_common_ops_trace_on_fake_cuda(fn, expected_op: str) -> None:  # noqa: ANN001
    result = analyze(Fn(fn), meta(16, 16))
    assert expected_op in op_names(result)
    # where(x > 0, x, -x) picks by data, so -x may be needed nowhere: only that note
    assert all("feed no kept value" in note for note in result.notes)
    assert result.trace.device == "cuda"
    assert result.unsupported_ops == {}


def test_random_tensor_on_the_default_device_falls_back_to_fake_cpu() -> None:
    # torch.randn(shape) makes a CPU tensor next to the (fake) CUDA input: traced on fake CPU
    result = analyze(Fn(lambda x: x + torch.randn(x.shape)), meta(16, 16))
    assert "aten.randn.default" in op_names(result)
    assert result.trace.device == "cpu"
    assert any("mixes devices" in note for note in result.notes)
    assert result.compulsory_bytes == 2 * 256 * 4


def test_integer_and_bool_tensors() -> None:
    def forward(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (ids * 2 + 1 + mask).sum(-1)

    result = analyze(Fn(forward), torch.zeros(4, 8, dtype=torch.int64),
                     torch.zeros(4, 8, dtype=torch.bool))
    reads = {ref.dtype for op in result.ops for ref in op.reads}
    assert reads == {"int64", "bool"}
    # int64 and bool keep their own size at any precision: ids + mask in, 4 sums out
    assert result.compulsory_bytes == 4 * 8 * 8 + 4 * 8 + 4 * 8
    assert analyze(Fn(forward), torch.zeros(4, 8, dtype=torch.int64),
                   torch.zeros(4, 8, dtype=torch.bool), precision="bf16").compulsory_bytes == (
        result.compulsory_bytes
    )


@pytest.mark.parametrize("fn", [
    lambda x: x[0, :, :8] * 2,
    lambda x: x.transpose(1, 2).contiguous(),
    lambda x: x[:1].expand(4, 16, 16) + 1,
    lambda x: torch.empty_like(x).copy_(x),
])
def test_python_bindings_trace_without_real_data(fn) -> None:  # noqa: ANN001
    # a CPU-only build cannot run these bindings on fake CUDA tensors (they take a CUDA device
    # guard before dispatch); they must still trace on fake tensors: a zero limit forbids real
    result = analyze(Fn(fn), meta(2, 16, 16), real_fallback_limit_bytes=0)
    assert not any("real CPU tensors" in note for note in result.notes)
    assert result.compulsory_bytes > 0


def test_setitem_traces_as_a_copy_into_the_slice() -> None:
    def forward(x: torch.Tensor) -> torch.Tensor:
        y = torch.zeros(16, 32, device=x.device)
        y[:, :16] = x
        return y

    result = analyze(Fn(forward), meta(16, 16), real_fallback_limit_bytes=0)
    assert "aten.copy_.default" in op_names(result)
    assert result.flops == 0
    # y is written whole and returned; x is read once
    assert result.compulsory_bytes == (16 * 32 + 16 * 16) * 4


# --- Values: views and in-place ops ------------------------------------------------------------


class BufferUpdate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        view = self.state.view(4, 4)
        view.add_(1)  # mutates the buffer through a view
        return x + self.state


def test_a_view_of_a_buffer_is_the_same_value() -> None:
    trace = trace_model(BufferUpdate(), meta(16))
    view_op, add_in_place, add = trace.ops
    assert view_op.is_view and view_op.writes == ()
    [buffer_before] = view_op.reads
    [read_by_add_], [written] = add_in_place.reads, add_in_place.writes
    assert read_by_add_.value_id == buffer_before.value_id  # the view is the buffer
    assert written.storage_id == buffer_before.storage_id  # same storage ...
    assert written.value_id != buffer_before.value_id  # ... new version
    # the out-of-place add sees the new version through the buffer itself
    assert written.value_id in {ref.value_id for ref in add.reads}
    # the mutated buffer is an output of the graph; its old value was an input
    assert written.value_id in trace.output_value_ids
    assert buffer_before.value_id in trace.input_value_ids


def test_in_place_op_on_an_input_writes_a_new_version() -> None:
    trace = trace_model(Fn(lambda x: x.relu_()), meta(8))
    [op] = trace.ops
    assert op.reads[0].storage_id == op.writes[0].storage_id
    assert op.reads[0].value_id != op.writes[0].value_id
    assert trace.output_value_ids == {op.writes[0].value_id}


def _reshaped_in_place(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y = x * 2
    y.unsqueeze_(0)  # (1, 8, 2): same tensor object, same storage, new shape
    z = y + 1
    w = z[0].clone()
    w.t_()  # (2, 8)
    u = x.new_empty(3)
    u.resize_(2, 8)  # a new, larger storage under the same tensor object
    v = x - 1
    v.data = v.view(4, 4)  # the same storage and value at a new shape, and no op recorded
    return z, w.sum(0), u * 1, v + 1


def test_a_tensor_reshaped_in_place_is_read_at_its_new_shape() -> None:
    # a tensor whose shape or storage changed in place (by an op, or by ``.data =`` with no op)
    # is read at its new shape
    trace = trace_model(Fn(_reshaped_in_place), meta(8, 2))
    reads = {}
    for op in trace.ops:
        reads.setdefault(op.base, []).append([(ref.shape, ref.storage_elements)
                                              for ref in op.reads])
    assert reads["add"] == [[((1, 8, 2), 16)], [((4, 4), 16)]]
    assert reads["sum"] == [[((2, 8), 16)]]
    assert reads["mul"][-1] == [((2, 8), 16)]


def test_views_of_one_tensor_share_a_value() -> None:
    trace = trace_model(Fn(lambda x: x.view(4, 4).t() + x.view(16).view(4, 4)), meta(16))
    add = next(op for op in trace.ops if op.base == "add")
    assert len({ref.value_id for ref in add.reads}) == 1


class _FreeFunction(nn.Module):
    """A free function wrapped as a module outside any model, as the kernels hub's
    ``use_kernel_func_from_hub`` wraps transformers 5's ``apply_rotary_pos_emb``."""

    def __init__(self, function) -> None:  # noqa: ANN001
        super().__init__()
        self.function = function

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.function(*args)


def _rotate(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return q * cos + torch.cat([-q[..., 1:], q[..., :1]], -1) * sin


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        return x * 2

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        return grad * 2


_APPLY_ROTARY = _FreeFunction(_rotate)


class _Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return _Double.apply(_APPLY_ROTARY(self.q(x), cos, sin))


def test_a_module_outside_the_model_is_charged_to_the_module_that_called_it() -> None:
    model = nn.Sequential()
    model.add_module("attn", _Attention())
    model.forward = lambda x, cos, sin: model.attn(x, cos, sin)
    trace = trace_model(model, (meta(4, 16), meta(4, 16), meta(4, 16)))
    paths = {op.base: op.module_path for op in trace.ops}
    # the rotary ops and the autograd.Function's run in attn, not in a pseudo-module "_FreeFunction"
    assert paths["addmm"] == "attn.q"
    assert {paths[base] for base in ("neg", "cat", "add")} == {"attn"}
    assert {op.module_path for op in trace.ops if op.base == "mul"} == {"attn"}


def test_module_paths_are_recorded() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.Sequential(nn.ReLU(), nn.Linear(8, 2)))
    trace = trace_model(model, meta(4, 8))
    paths = {op.base: op.module_path for op in trace.ops if op.base in ("relu", "addmm")}
    assert paths["relu"] == "1.0"
    assert [op.module_path for op in trace.ops if op.base == "addmm"] == ["0", "1.1"]


def test_batch_norm_training_traces() -> None:
    result = analyze(nn.BatchNorm2d(8), meta(4, 8, 16, 16))
    assert any("batch_norm" in name for name in op_names(result))
    assert result.vector_flops >= 8 * 4 * 8 * 16 * 16


# --- Ops without a rule ------------------------------------------------------------------------


def test_op_without_a_rule_is_counted_and_named() -> None:
    exp = torch.ops.aten.linalg_matrix_exp.default
    assert exp.overloadpacket not in _RULES and torch.Tag.pointwise not in exp.tags  # precondition
    result = analyze(Fn(lambda x: torch.linalg.matrix_exp(x) + 1), meta(8, 8))
    assert result.unsupported_ops == {"aten.linalg_matrix_exp.default": 1}
    [note] = [note for note in result.notes if "no cost rule" in note]
    assert "aten.linalg_matrix_exp.default ×1" in note
    # costed conservatively: its input and output as a kernel of its own, no FLOPs
    exp_op = next(op for op in result.ops if not op.has_rule)
    assert exp_op.total_flops == 0
    assert exp_op.category is Category.DATA_MOVEMENT and not exp_op.fusible
    assert result.to_dict()["unsupported_ops"] == {"aten.linalg_matrix_exp.default": 1}


# --- Data-dependent models ---------------------------------------------------------------------


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # control flow on a value: fake tensors cannot answer
            return self.linear(x)
        return -self.linear(x)


class HoldsBranchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Branchy()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


def test_value_dependent_branch_falls_back_to_real_tensors() -> None:
    result = torchroofline.analyze(HoldsBranchy(), meta(4, 8))
    [note] = [note for note in result.notes if note.startswith("traced")]
    assert note.startswith("traced with real CPU tensors")
    assert "'block'" in note
    assert result.trace.device == "cpu"
    linear_flops = 2 * 4 * 8 * 8
    assert linear_flops in {op.flops.tensor for op in result.ops}


def test_the_real_data_fallback_takes_the_same_branch_every_run() -> None:
    # the values standing in for a meta input are seeded draws (FALLBACK_FILL_SEED): a branch
    # on their sign goes the same way each time; unseeded, 8 traces agree with chance 2^-7
    def forward(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) if x.sum() > 0 else -x

    branches = {op_names(analyze(Fn(forward), meta(64, 64)))[-1] for _ in range(8)}
    assert len(branches) == 1


def test_value_dependent_branch_over_the_limit_raises() -> None:
    with pytest.raises(DataDependentError) as caught:
        torchroofline.analyze(HoldsBranchy(), meta(4, 8), real_fallback_limit_bytes=100)
    message = str(caught.value)
    assert "_local_scalar_dense" in message and "'block'" in message
    assert "real_fallback_limit_bytes" in message
    assert "\n" not in message


def test_nonzero_needs_real_data() -> None:
    result = analyze(Fn(lambda x: torch.nonzero(x > 0)), torch.randn(16, 16))
    assert "aten.nonzero.default" in op_names(result)
    assert any("real CPU tensors" in note and "nonzero" in note for note in result.notes)


def test_tensors_built_in_forward_stay_known_only_before_data_decides() -> None:
    # the repeats (lifted before the op that needs data) are a constant on the real retrace;
    # the index built from x's value (lifted after it) holds data and stays unknown
    def forward(x: torch.Tensor) -> torch.Tensor:
        rows = x.repeat_interleave(torch.tensor([1, 2, 0, 1]), 0)
        return rows.index_select(0, torch.tensor([int(rows[0, 0] > 0)]))

    trace = trace_model(Fn(forward), (torch.randn(4, 6),), device="cpu")
    assert [value.tolist() for value in trace.constants.values()] == [[1, 2, 0, 1]]


# --- One-line errors ---------------------------------------------------------------------------


def _one_line(error: BaseException) -> str:
    text = str(error)
    assert text and "\n" not in text
    assert isinstance(error, TorchrooflineError)
    return text


def test_unknown_gpu() -> None:
    with pytest.raises(UnknownGPUError) as caught:
        torchroofline.analyze(nn.ReLU(), meta(4), gpu="no-such-gpu")
    assert "no-such-gpu" in _one_line(caught.value)


def test_unknown_precision() -> None:
    with pytest.raises(PrecisionError) as caught:
        torchroofline.analyze(nn.ReLU(), meta(4), precision="fp4")
    assert "fp4" in _one_line(caught.value)


@pytest.mark.parametrize("inputs", ["a string", {"x": 1}, 3])
def test_inputs_of_the_wrong_type(inputs: object) -> None:
    with pytest.raises(InputError) as caught:
        torchroofline.analyze(nn.ReLU(), inputs)
    assert type(inputs).__name__ in _one_line(caught.value)


def test_model_that_is_not_a_module() -> None:
    with pytest.raises(InputError) as caught:
        torchroofline.analyze(torch.relu, meta(4))
    assert "nn.Module" in _one_line(caught.value)


def test_model_that_raises_in_an_op_names_the_module(capfd: pytest.CaptureFixture) -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.Sequential(nn.ReLU(), nn.Linear(9, 8)))
    with pytest.raises(ModelError) as caught:
        torchroofline.analyze(model, meta(2, 8))
    message = _one_line(caught.value)
    assert "'1.1'" in message and "addmm" in message
    # torch's own traceback logging stays out of the user's terminal
    assert "Traceback" not in capfd.readouterr().err


class Fails(nn.Module):
    """Raises in plain Python, not in an op."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ValueError("expected 3 channels\nsecond line of detail")


def test_model_that_raises_in_python_names_the_module() -> None:
    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Sequential(nn.ReLU(), Fails())
            self.head = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.encoder(x))

    with pytest.raises(ModelError) as caught:
        torchroofline.analyze(Holder(), meta(2, 4))
    message = _one_line(caught.value)
    assert "'encoder.1'" in message and "ValueError" in message
    assert "expected 3 channels" in message and "second line" not in message


def test_exception_caught_inside_the_model_leaves_paths_right() -> None:
    class Tolerant(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.optional = Fails()
            self.linear = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            try:
                self.optional(x)
            except ValueError:
                pass
            return self.linear(x) * 2

    trace = trace_model(Tolerant(), meta(2, 4))
    paths = {op.base: op.module_path for op in trace.ops}
    assert paths["addmm"] == "linear"
    assert paths["mul"] == ""  # back in the top-level forward, not in 'optional'


def test_python_indexing_traces_on_fake_cuda() -> None:
    """x[...], x[...] = v, copy_ and contiguous are spelled in aten ops, so a CPU-only build
    still traces them on fake CUDA tensors (no CPU retrace, no note)."""

    def body(x: torch.Tensor) -> torch.Tensor:
        y = x[:, -1, :] + x[0, 1:3].sum() + x[..., 0].mean()
        z = torch.zeros_like(x)
        z[:, 0] = 1.0
        z[:, 1:3] = x[:, 1:3]
        z.copy_(z.transpose(0, 1).contiguous().transpose(0, 1))
        return y, z[torch.tensor([0, 1])]

    result = analyze(Fn(body), meta(4, 6, 8))
    assert not any(note.startswith("traced") for note in result.notes)
    assert result.trace.device == "cuda"
    names = op_names(result)
    assert "aten.select.int" in names and "aten.index_put_.default" not in names
    assert "aten.index.Tensor" in names and "aten.copy_.default" in names


def test_attention_inside_multihead_attention_is_one_op() -> None:
    """F.multi_head_attention_forward is Python: the interception stays on inside it."""
    mha = nn.MultiheadAttention(64, 4, batch_first=True, device="meta")
    x = torch.empty(2, 16, 64, device="meta")
    result = analyze(mha, x, x, x, None, False)
    assert "aten.scaled_dot_product_attention" in op_names(result)
    assert result.notes == ()


def test_other_cuda_guarded_bindings_trace_on_fake_cuda() -> None:
    def body(x: torch.Tensor) -> torch.Tensor:
        left, right = x.split(2, dim=1)
        first = torch.split(x, [1, 3], 1)[0]
        noise = torch.empty(4, 4, device=x.device)
        noise.uniform_(-1, 1)
        return ~(left > 0), right, first, noise

    result = analyze(Fn(body), meta(3, 4))
    assert result.notes == ()
    names = op_names(result)
    for name in ("aten.split.Tensor", "aten.bitwise_not.default", "aten.uniform_.default"):
        assert name in names


def test_tensor_captured_outside_the_module_still_traces() -> None:
    weight = torch.randn(8, 8)  # a global-like real tensor, not a parameter or buffer
    result = analyze(Fn(lambda x: x @ weight), meta(4, 8))
    assert result.flops == 2 * 4 * 8 * 8
    assert any("fake CPU" in note for note in result.notes)


def test_ops_run_on_meta_remember_their_output_layouts():
    # a CUDA op a CPU build cannot fake runs on meta copies (batch norm, ~ms per call through
    # its decomposition); its output layout is cached by argument metadata, so the second call
    # of the same shapes makes the same outputs without running it, and an in-place op still
    # returns its own argument
    from torchroofline.trace import tracer as tracing

    a, b = torch.empty(4, 8), torch.empty(4, 8)
    for _ in range(2):
        assert tracing._call_on_meta(torch.ops.aten.add_.Tensor, (a, b), {}) is a
        made = tracing._call_on_meta(torch.ops.aten.mul.Tensor, (a, b.t().t()), {})
        assert (made.shape, made.stride(), made.dtype, made.device) == (
            (4, 8), (8, 1), torch.float32, torch.device("cpu"))
        values, indices = tracing._call_on_meta(torch.ops.aten.max.dim, (a, 1), {})
        assert values.shape == (4,) and indices.dtype == torch.int64
    assert (torch.ops.aten.max.dim, (("tensor", (4, 8), (8, 1), torch.float32), 1)) in (
        tracing._META_OUTPUTS)


class _RoutedRows(nn.Module):
    """Rows of a big weight picked by data: ``nonzero`` over the picks (``read_out``) or over
    the ids themselves decides a size."""

    def __init__(self, read_out: bool) -> None:
        super().__init__()
        self.read_out = read_out
        with torch.device("meta"):
            self.weight = nn.Parameter(torch.empty(1000, 8))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(ids.shape[0], 8)
        out.index_add_(0, torch.arange(ids.shape[0]), self.weight[ids])
        decided = out if self.read_out else ids
        return out[: decided.nonzero().shape[0]]


def test_the_real_data_fallback_keeps_meta_tensors_as_shapes() -> None:
    # the size comes from the real ids alone: the meta weight stays a shape (nothing filled
    # at random), and the sizes are those of the given values
    ids = torch.tensor([3, 0, 7, 7])
    trace = trace_model(_RoutedRows(read_out=False), (ids,))
    assert trace.ran_on_given_values
    assert any("meta and bigger ones stayed shapes" in note for note in trace.notes)


def test_a_real_tensor_written_from_a_shape_has_unknown_values() -> None:
    # ``out`` is real but written from the meta weight: its values are unknown, so the size
    # its nonzero decides cannot come from it; the run with shapes fails and the fallback
    # fills the weight at random, as without shapes
    ids = torch.tensor([3, 0, 7, 7])
    trace = trace_model(_RoutedRows(read_out=True), (ids,))
    assert not trace.ran_on_given_values
    assert any("filled with random values)" in note and "stayed shapes" not in note
               for note in trace.notes)


def test_the_analysis_ops_run_on_one_thread_and_give_the_count_back() -> None:
    caller = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(ValueError), one_thread():
            assert torch.get_num_threads() == 1
            raise ValueError("an analysis that fails gives the count back too")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(caller)
