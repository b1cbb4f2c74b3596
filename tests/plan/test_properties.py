"""Invariants and closed forms over random shapes (hypothesis; few examples, meta tensors)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import Fn, analyze, meta
from torchroofline.price.roofline import Result

FEW = settings(max_examples=20, deadline=None)
sizes = st.integers(min_value=1, max_value=96)
precisions = st.sampled_from(["fp32", "tf32", "bf16", "fp16"])
gpus = st.sampled_from(["h100-sxm", "a100", "v100", "l4"])


def check_invariants(result: Result) -> None:
    """What must hold for every analysis, whatever the model."""
    assert 0 <= result.compulsory_bytes <= result.fused_bytes <= result.unfused_bytes
    assert result.fused_kernel_count <= result.unfused_kernel_count
    assert result.sol_s == max(result.compute_sol_s, result.memory_sol_s)
    assert result.sol_s <= result.fused_estimate_s * (1 + 1e-12)
    assert result.sol_s <= min(result.eager_estimate_s, result.cudagraph_estimate_s)
    assert result.memory_sol_s <= result.memory_fused_s * (1 + 1e-12)
    assert result.flops == result.tensor_flops + result.vector_flops
    assert sum(k.bytes for k in result.kernels) == result.fused_bytes
    assert sum(k.bytes for k in result.eager_kernels) == result.unfused_bytes
    assert sum(k.flops for k in result.kernels) >= result.flops  # moved ≥ necessary
    for figure in (result.flops, result.unfused_bytes, result.fused_bytes, result.compulsory_bytes):
        assert type(figure) is int


class MLP(nn.Module):
    def __init__(self, widths: list[int], bias: bool, activation: str) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for width_in, width_out in zip(widths, widths[1:], strict=False):
            layers += [nn.Linear(width_in, width_out, bias=bias), getattr(nn, activation)()]
        self.layers = nn.Sequential(*layers[:-1])  # no activation after the last layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


ACTIVATION_FLOPS = {"ReLU": 1, "GELU": 4, "Sigmoid": 3, "SiLU": 4}


@FEW
@given(
    batch=sizes,
    widths=st.lists(sizes, min_size=2, max_size=5),
    bias=st.booleans(),
    activation=st.sampled_from(sorted(ACTIVATION_FLOPS)),
    precision=precisions,
    gpu=gpus,
)
def test_mlp(batch: int, widths: list[int], bias: bool, activation: str, precision: str,
             gpu: str) -> None:
    result = analyze(MLP(widths, bias, activation), meta(batch, widths[0]),
                     gpu=gpu, precision=precision)
    check_invariants(result)
    pairs = list(zip(widths, widths[1:], strict=False))
    assert result.tensor_flops == sum(2 * batch * a * b for a, b in pairs)
    hidden = sum(batch * b for _, b in pairs[:-1])
    assert result.vector_flops == ACTIVATION_FLOPS[activation] * hidden
    params = sum(a * b + (b if bias else 0) for a, b in pairs)
    assert result.params == params
    element = 4 if precision in ("fp32", "tf32") else 2
    # perfect fusion: the input, every parameter, the output — nothing in between
    assert result.compulsory_bytes == (batch * widths[0] + params + batch * widths[-1]) * element


UNARY = {
    "relu": (torch.relu, 1),
    "sigmoid": (torch.sigmoid, 3),
    "exp": (torch.exp, 1),
    "neg": (torch.neg, 1),
    "double": (lambda x: x * 2, 1),
    "tanh": (torch.tanh, 1),
}


@FEW
@given(
    shape=st.lists(st.integers(1, 24), min_size=1, max_size=3),
    chain=st.lists(st.sampled_from(sorted(UNARY)), min_size=1, max_size=8),
    precision=precisions,
)
def test_pointwise_chain(shape: list[int], chain: list[str], precision: str) -> None:
    def forward(x: torch.Tensor) -> torch.Tensor:
        for name in chain:
            x = UNARY[name][0](x)
        return x

    result = analyze(Fn(forward), meta(*shape), precision=precision)
    check_invariants(result)
    elements = torch.Size(shape).numel()
    element = 4 if precision in ("fp32", "tf32") else 2
    assert result.vector_flops == elements * sum(UNARY[name][1] for name in chain)
    assert result.unfused_kernel_count == len(chain)
    assert result.unfused_bytes == len(chain) * 2 * elements * element
    assert result.fused_kernel_count == 1
    assert result.fused_bytes == result.compulsory_bytes == 2 * elements * element


@FEW
@given(b=st.integers(1, 8), m=sizes, k=sizes, n=sizes, precision=precisions, gpu=gpus)
def test_batched_matmul(b: int, m: int, k: int, n: int, precision: str, gpu: str) -> None:
    result = analyze(Fn(torch.bmm), meta(b, m, k), meta(b, k, n), gpu=gpu, precision=precision)
    check_invariants(result)
    element = 4 if precision in ("fp32", "tf32") else 2
    assert result.tensor_flops == 2 * b * m * n * k
    assert result.fused_bytes == result.compulsory_bytes == (b * m * k + b * k * n + b * m * n) * (
        element
    )


@FEW
@given(rows=sizes, cols=sizes, warm=st.booleans())
def test_precision_halves_float_bytes_only(rows: int, cols: int, warm: bool) -> None:
    def forward(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.softmax(x, -1), x.argmax(-1)

    cache = "warm" if warm else "cold"
    fp32 = analyze(Fn(forward), meta(rows, cols), precision="fp32", cache=cache)
    bf16 = analyze(Fn(forward), meta(rows, cols), precision="bf16", cache=cache)
    check_invariants(fp32)
    check_invariants(bf16)
    assert fp32.flops == bf16.flops
    int64_out = rows * 8  # argmax indices keep 8 bytes at every precision
    assert fp32.compulsory_bytes - int64_out == 2 * (bf16.compulsory_bytes - int64_out)
    # softmax and argmax over a size-1 dim are constants (1 and 0): x is then not needed
    reads = 0 if cols == 1 else rows * cols
    assert fp32.compulsory_bytes == (reads + rows * cols) * 4 + int64_out
    cold_s = fp32.compulsory_bytes / fp32.gpu.memory_bandwidth_bytes_per_s
    # a few KB always fit in L2: warm, every byte crosses it at its peak (never free)
    bandwidth = fp32.gpu.l2_bandwidth if warm else fp32.gpu.memory_bandwidth_bytes_per_s
    assert fp32.memory_sol_s == (fp32.compulsory_bytes / bandwidth if warm else cold_s) > 0


@FEW
@given(
    batch=st.integers(1, 4),
    channels=st.integers(1, 8),
    size=st.integers(4, 20),
    kernel=st.integers(1, 4),
    stride=st.integers(1, 3),
    padding=st.integers(0, 2),
    groups=st.sampled_from([1, 2]),
)
def test_conv_block(batch: int, channels: int, size: int, kernel: int, stride: int,
                    padding: int, groups: int) -> None:
    cin, cout = 2 * channels, 4 * channels  # divisible by groups
    model = nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, groups=groups),
        nn.ReLU(),
    )
    result = analyze(model, meta(batch, cin, size, size))
    check_invariants(result)
    out = (size + 2 * padding - kernel) // stride + 1
    # taps that land on padding multiply zeros: only (output, tap) pairs inside the image count
    pairs = sum(
        1 for o in range(out) for k in range(kernel) if 0 <= o * stride - padding + k < size
    )
    assert result.tensor_flops == 2 * batch * cout * (cin // groups) * pairs * pairs
    assert result.vector_flops == batch * cout * out * out
    assert [k.category for k in result.kernels] == ["compute", "pointwise"]


@FEW
@given(rows=st.integers(1, 32), cols=st.integers(2, 32), data=st.data())
def test_output_assembled_by_a_slice_write(rows: int, cols: int, data: st.DataObject) -> None:
    filled = data.draw(st.integers(1, cols - 1))

    def forward(x: torch.Tensor) -> torch.Tensor:
        y = torch.zeros(rows, cols, device=x.device)
        y[:, :filled] = x
        return y

    result = analyze(Fn(forward), meta(rows, filled))
    check_invariants(result)
    # x is read once; y — zeros and the copied slice alike — is written whole once
    assert result.compulsory_bytes == (rows * filled + rows * cols) * 4


class Block(nn.Module):
    """A transformer-style block: attention, norms, residuals, an MLP."""

    def __init__(self, width: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.norm2 = nn.LayerNorm(width)
        hidden = 4 * width
        self.mlp = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        attended = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + attended.transpose(1, 2).reshape(batch, length, width)
        return x + self.mlp(self.norm2(x))


ZOO = {
    "block": (Block(), (meta(2, 16, 32),)),
    "convnet": (nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Conv2d(8, 4, 1), nn.AdaptiveAvgPool2d(1)),
                (meta(2, 3, 16, 16),)),
    "lstm": (nn.LSTM(8, 16, num_layers=2, bidirectional=True), (meta(5, 3, 8),)),
    "embedding": (nn.EmbeddingBag(50, 8), (torch.zeros(4, 6, dtype=torch.int64),)),
    "mha": (nn.MultiheadAttention(16, 2), (meta(5, 2, 16), meta(5, 2, 16), meta(5, 2, 16))),
}


@pytest.mark.parametrize("name", sorted(ZOO))
@pytest.mark.parametrize(("gpu", "precision", "cache"), [
    ("h100-sxm", "fp32", "cold"), ("a100", "bf16", "warm"), ("v100", "fp16", "cold"),
])
def test_invariants_hold_across_models(name: str, gpu: str, precision: str, cache: str) -> None:
    model, inputs = ZOO[name]
    check_invariants(analyze(model, *inputs, gpu=gpu, precision=precision, cache=cache))
