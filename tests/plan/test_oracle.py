"""The bound against the dependence oracle (tests/oracle.py): never below what the kept outputs
provably need, never above what the program touches.

Tightness: compulsory bytes ≥ 0.95 × the oracle's bytes (the input elements with a nonzero
gradient of a random weighting of the outputs, read once, and the outputs, written once), and
per op the FLOPs charged ≥ 0.95 × the op's FLOPs times the share of its outputs the oracle proves
demanded. Soundness: compulsory bytes ≤ every input element read once and the outputs written
once; necessary FLOPs ≤ executed FLOPs.

Programs: hypothesis-generated chains over small NCHW tensors (windows: plain, grouped,
depthwise and transposed convolutions, padded, ceil-mode and adaptive pools; norms, softmax,
gates, residuals, pads, resampling, shuffles, scans, views, masks; reductions and slices of the
output) and attention blocks, and a list of tiny
KernelBench-style problems, among them every collapse issue 16 found (pool of pool over a
transposed convolution, norms and softmax read in part, cross-entropy, a class token or one
query row behind attention, causal masks made in forward or kept as a buffer).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torchroofline
from conftest import Fn
from oracle import Oracle, oracle, per_op
from torchroofline.price.roofline import Result

FLOAT_BYTES = 4  # fp32
TIGHT = 0.95
HYPOTHESIS = settings(
    deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Figures:
    """One program's bound beside its oracle."""

    result: Result
    proven: Oracle

    @property
    def executed_flops(self) -> int:
        return sum(op.flops.tensor + op.flops.vector for op in self.result.ops)

    def flop_shortfalls(self) -> list[str]:
        """The ops charged below ``TIGHT`` of their proven FLOPs."""
        return [
            f"{row.name} (op {row.index}): charged {row.charged_flops:,} of "
            f"{row.executed_flops:,}, proven {row.proven_flops:,.0f}"
            for row in per_op(self.result, self.proven)
            if row.charged_flops < TIGHT * row.proven_flops
        ]

    def describe(self) -> str:
        return (
            f"compulsory {self.result.compulsory_bytes:,} B, oracle "
            f"{self.proven.bytes(FLOAT_BYTES):,} B; FLOPs {self.result.flops:,} of "
            f"{self.executed_flops:,}; short ops: {self.flop_shortfalls()}"
        )


def figures(model: nn.Module | Callable[..., Any], *inputs: Any, data: str = "any") -> Figures:
    """The bound and the oracle of ``model(*inputs)``, both for any input values or both for
    the given ones (``data``)."""
    module = model if isinstance(model, nn.Module) else Fn(model)
    result = torchroofline.analyze(module, inputs, gpu="h100-sxm", precision="fp32", data=data)
    return Figures(result, oracle(module, inputs, data=data))


def assert_tight(found: Figures) -> None:
    assert found.result.compulsory_bytes >= TIGHT * found.proven.bytes(FLOAT_BYTES), (
        found.describe()
    )
    assert not found.flop_shortfalls(), found.describe()


def assert_sound(found: Figures) -> None:
    """Never above the program's own work: every input element once and the outputs once."""
    touched = sum(
        leaf.elements * (FLOAT_BYTES if leaf.is_float else leaf.itemsize)
        for leaf in found.proven.leaves
    ) + found.proven.output_bytes(FLOAT_BYTES)
    assert found.result.compulsory_bytes <= touched, found.describe()
    assert found.result.flops <= found.executed_flops, found.describe()


# --- generated chains over NCHW tensors ----------------------------------------------------


class Chain(nn.Module):
    """``stages`` applied in order, then ``tail`` (what the program keeps)."""

    def __init__(self, stages: list[nn.Module], tail: Callable[[torch.Tensor], Any]) -> None:
        super().__init__()
        self.stages = nn.Sequential(*stages)
        self.tail = tail

    def forward(self, x: torch.Tensor) -> Any:
        return self.tail(self.stages(x))


def _tril_masked(x: torch.Tensor) -> torch.Tensor:
    keep = torch.ones(x.shape[-2:], dtype=torch.bool).tril()
    return x.masked_fill(~keep, 0.0)


def _tril_where(x: torch.Tensor) -> torch.Tensor:
    keep = torch.ones(x.shape[-2:], dtype=torch.bool).tril()
    return torch.where(keep, x, torch.zeros((), dtype=x.dtype))


class Residual(nn.Module):
    """``x + body(x)``."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class Gate(nn.Module):
    """A gated 1×1 convolution: ``act(a) * b`` of its two channel halves (GLU kind)."""

    def __init__(self, channels: int, act: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.conv, self.act = nn.Conv2d(channels, 2 * channels, 1), act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.conv(x).chunk(2, 1)
        return self.act(a) * b


class ChannelsLastNorm(nn.Module):
    """ConvNeXt's LayerNorm over channels: permute to NHWC, normalise, permute back."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class SqueezeExcite(nn.Module):
    """Channel gates from the spatial mean: ``x * sigmoid(conv1x1(mean(x)))``."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.fc = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.fc(F.adaptive_avg_pool2d(x, 1)).sigmoid()


#: stages that keep an NCHW tensor NCHW; each takes the channel count, returns (module, channels)
SHAPE_KEEPING: dict[str, Callable[[int], tuple[nn.Module, int]]] = {
    "relu": lambda c: (nn.ReLU(), c),
    "tanh": lambda c: (nn.Tanh(), c),
    "softmax_channels": lambda c: (nn.Softmax(dim=1), c),
    "log_softmax_width": lambda c: (nn.LogSoftmax(dim=-1), c),
    "batch_norm_train": lambda c: (nn.BatchNorm2d(c), c),
    "batch_norm_eval": lambda c: (nn.BatchNorm2d(c).eval(), c),
    "group_norm": lambda c: (nn.GroupNorm(1, c), c),
    "instance_norm": lambda c: (nn.InstanceNorm2d(c, affine=True), c),
    "transpose": lambda c: (Fn(lambda x: x.transpose(2, 3)), c),
    "flatten_unflatten": lambda c: (Fn(lambda x: x.flatten(2).unflatten(2, x.shape[2:])), c),
    "tril_masked_fill": lambda c: (Fn(_tril_masked), c),
    "tril_where": lambda c: (Fn(_tril_where), c),
    "gelu": lambda c: (nn.GELU(), c),
    "silu_gate": lambda c: (Gate(c, F.silu), c),
    "residual_depthwise": lambda c: (Residual(nn.Conv2d(c, c, 3, padding=1, groups=c)), c),
    "convnext_norm": lambda c: (ChannelsLastNorm(c), c),
    "squeeze_excite": lambda c: (SqueezeExcite(c), c),
    "cumsum_width": lambda c: (Fn(lambda x: x.cumsum(-1)), c),
    "flip": lambda c: (Fn(lambda x: x.flip(-1)), c),
    "roll": lambda c: (Fn(lambda x: x.roll((1, -2), (2, 3))), c),
    "reflection_pad": lambda c: (nn.ReflectionPad2d(1), c),
    "zero_pad": lambda c: (nn.ZeroPad2d((1, 2, 0, 1)), c),
    "pixel_shuffle": lambda c: (nn.Sequential(nn.Conv2d(c, 4 * c, 1), nn.PixelShuffle(2)), c),
    "nearest_up": lambda c: (nn.Upsample(scale_factor=2), c),
    "bilinear_up": lambda c: (nn.Upsample(scale_factor=1.5, mode="bilinear"), c),
}

WINDOWS: dict[str, Callable[[int], tuple[nn.Module, int]]] = {
    "conv3": lambda c: (nn.Conv2d(c, 3, 3), 3),
    "conv3_padded": lambda c: (nn.Conv2d(c, 2, 3, padding=1), 2),
    "conv1_strided": lambda c: (nn.Conv2d(c, 3, 1, stride=2), 3),
    "conv_transpose": lambda c: (nn.ConvTranspose2d(c, 2, 3), 2),
    "conv_transpose_strided": lambda c: (nn.ConvTranspose2d(c, 2, 2, stride=2), 2),
    "max_pool": lambda c: (nn.MaxPool2d(2), c),
    "max_pool_overlapping": lambda c: (nn.MaxPool2d(3, stride=1), c),
    "avg_pool": lambda c: (nn.AvgPool2d(2), c),
    "conv_grouped": lambda c: (nn.Conv2d(c, 2 * c, 3, groups=c), 2 * c),
    "conv_depthwise_strided": lambda c: (nn.Conv2d(c, c, 3, stride=2, padding=1, groups=c), c),
    "conv_transpose_output_padding": lambda c: (
        nn.ConvTranspose2d(c, 2, 3, stride=2, padding=1, output_padding=1), 2
    ),
    "avg_pool_ceil": lambda c: (nn.AvgPool2d(3, 2, ceil_mode=True), c),
    "avg_pool_exclude_pad": lambda c: (nn.AvgPool2d(3, 2, padding=1, count_include_pad=False), c),
    "max_pool_padded": lambda c: (nn.MaxPool2d(3, 2, padding=1), c),
    "adaptive_avg": lambda c: (nn.AdaptiveAvgPool2d((3, 4)), c),
    "adaptive_max": lambda c: (nn.AdaptiveMaxPool2d(3), c),
}

#: what the program keeps of the last NCHW tensor
TAILS: dict[str, Callable[[torch.Tensor], Any]] = {
    "all": lambda x: x,
    "channel_0": lambda x: x[:, 0],
    "row_0": lambda x: x[:, :, 0],
    "last_row": lambda x: x[:, :, -1],
    "strided_rows": lambda x: x[:, :, ::2],
    "channels_from_1": lambda x: x[:, 1:],
    "mean_of_rows_1_2": lambda x: x[:, :, 1:3].mean((1, 2, 3)),
    "sum_channels": lambda x: x.sum(1),
    "mean_spatial": lambda x: x.mean((2, 3)),
    "amax_width": lambda x: x.amax(-1),
    "cross_entropy": lambda x: F.cross_entropy(
        x.flatten(2).mean(2), torch.zeros(x.shape[0], dtype=torch.long)
    ),
}


def chain(names: list[str], tail: str, channels: int = 3, size: int = 9) -> tuple:
    """The chain of the named stages and tail, and its input (2, channels, size, size)."""
    x = torch.randn(2, channels, size, size)
    stages = []
    for name in names:
        stage, channels = {**WINDOWS, **SHAPE_KEEPING}[name](channels)
        stages.append(stage)
    return Chain(stages, TAILS[tail]), x


@st.composite
def chains(draw: st.DrawFn) -> tuple:
    """A chain of one to three stages and a tail."""
    stages = st.lists(st.sampled_from(sorted({**WINDOWS, **SHAPE_KEEPING})), min_size=1,
                      max_size=3)
    names = draw(stages)
    tail = draw(st.sampled_from(sorted(TAILS)))
    torch.manual_seed(draw(st.integers(0, 2**16)))
    return chain(names, tail, draw(st.integers(2, 3)), draw(st.integers(8, 10)))


# --- attention blocks ----------------------------------------------------------------------


class Attention(nn.Module):
    """Multi-head self-attention: manual (scores, optional causal mask from a ``tril`` buffer,
    softmax, weighted sum) or ``F.scaled_dot_product_attention``; keeps ``tail`` of
    ``LayerNorm(x + attention(x))``, or the attention output alone."""

    def __init__(self, embed: int, heads: int, length: int, *, sdpa: bool, causal: bool,
                 residual: bool, tail: Callable[[torch.Tensor], Any]) -> None:
        super().__init__()
        self.qkv = nn.Linear(embed, 3 * embed)
        self.proj = nn.Linear(embed, embed)
        self.norm = nn.LayerNorm(embed)
        self.heads, self.sdpa, self.causal, self.residual, self.tail = (
            heads, sdpa, causal, residual, tail
        )
        self.register_buffer("mask", torch.ones(length, length).tril().view(1, 1, length, length))

    def forward(self, x: torch.Tensor) -> Any:
        batch, length, embed = x.shape
        q, k, v = (
            t.view(batch, length, self.heads, embed // self.heads).transpose(1, 2)
            for t in self.qkv(x).split(embed, dim=2)
        )
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
            if self.causal:
                scores = scores.masked_fill(self.mask[:, :, :length, :length] == 0, float("-inf"))
            y = scores.softmax(-1) @ v
        y = self.proj(y.transpose(1, 2).reshape(batch, length, embed))
        return self.tail(self.norm(x + y) if self.residual else y)


SEQUENCE_TAILS: dict[str, Callable[[torch.Tensor], Any]] = {
    "all": lambda y: y,
    "token_0": lambda y: y[:, 0],
    "last_token": lambda y: y[:, -1],
    "mean_tokens": lambda y: y.mean(1),
}


@st.composite
def attentions(draw: st.DrawFn) -> tuple:
    """Attention blocks: manual or SDPA, causal or not, with or without a residual norm."""
    heads = draw(st.sampled_from([1, 2]))
    embed, length = 4 * heads, draw(st.integers(3, 6))
    torch.manual_seed(draw(st.integers(0, 2**16)))
    sdpa, causal, residual = draw(st.booleans()), draw(st.booleans()), draw(st.booleans())
    tail = draw(st.sampled_from(sorted(SEQUENCE_TAILS)))
    model = Attention(
        embed, heads, length, sdpa=sdpa, causal=causal,
        residual=residual, tail=SEQUENCE_TAILS[tail],
    )
    return model, torch.randn(2, length, embed)


@settings(HYPOTHESIS, max_examples=42)
@given(st.one_of(chains(), attentions()))
def test_generated_programs_are_tight(program):
    assert_tight(figures(*program))


@settings(HYPOTHESIS, max_examples=13)
@given(st.one_of(chains(), attentions()))
def test_generated_programs_are_sound(program):
    assert_sound(figures(*program))


# --- tiny KernelBench-style problems -------------------------------------------------------


class ConvTransposeMaxMaxSum(nn.Module):
    """Level 2 #78 at a tiny size: ConvTranspose3d → MaxPool3d(2) → MaxPool3d(3) → sum over
    channels. The pools' windows cover 9 of the 10 conv outputs per dim (10 → 5 → 1 ... 3 of
    the 5 pooled rows), so most of the convolution is needed."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose3d(2, 3, 3, stride=2, padding=1)
        self.pool1, self.pool2 = nn.MaxPool3d(2), nn.MaxPool3d(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool2(self.pool1(self.conv(x))).sum(1, keepdim=True)


class ConvPoolNormMean(nn.Module):
    """Conv → max-pool → group norm → mean over everything but the batch (level 2 #10 kind)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose2d(3, 4, 3, stride=2)
        self.norm = nn.GroupNorm(2, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.norm(F.max_pool2d(self.conv(x), 2)).mean((1, 2, 3)))


class GroupNormSlice(nn.Module):
    """``GroupNorm(conv(x))[:, :, 0]``: the group statistics need every output of the group."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.norm = nn.GroupNorm(2, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(x))[:, :, 0]


class TinyViT(nn.Module):
    """Patch embedding, a class token, two encoder layers, a head on the class token only
    (level 3 #28 kind): the class token attends to every token of every earlier layer."""

    def __init__(self) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, 8, 4, stride=4)
        self.cls = nn.Parameter(torch.randn(1, 1, 8))
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(x.shape[0], -1, -1), tokens], 1)
        return self.head(self.encoder(tokens)[:, 0])


class TopKRouter(nn.Module):
    """A router's group-limited top-k over masked logits: ``where`` with a data mask, then
    ``topk`` (which needs every element it chooses from)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(8, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.gate(x)
        groups = logits.view(-1, 3, 2).amax(-1)
        keep = groups >= groups.topk(2, -1).values[:, -1:]
        masked = torch.where(keep.repeat_interleave(2, -1), logits, float("-inf"))
        weights, chosen = masked.topk(2, -1)
        return weights.softmax(-1), chosen


def _mlp_mean(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x @ w).mean(1)


KERNELBENCH_STYLE: dict[str, tuple[Callable[[], nn.Module], Callable[[], tuple]]] = {
    "conv_transpose3d_max_max_sum": (ConvTransposeMaxMaxSum, lambda: (torch.randn(1, 2, 5, 5, 5),)),
    "conv_transpose_pool_groupnorm_mean": (ConvPoolNormMean, lambda: (torch.randn(2, 3, 5, 5),)),
    "group_norm_slice": (GroupNormSlice, lambda: (torch.randn(2, 3, 8, 8),)),
    "cross_entropy": (
        lambda: Fn(F.cross_entropy),
        lambda: (torch.randn(6, 5), torch.randint(0, 5, (6,))),
    ),
    "layer_norm_residual_attention_token_0": (
        lambda: Attention(8, 2, 5, sdpa=False, causal=False, residual=True,
                          tail=SEQUENCE_TAILS["token_0"]),
        lambda: (torch.randn(2, 5, 8),),
    ),
    "mingpt_causal_attention": (
        lambda: Attention(8, 2, 5, sdpa=False, causal=True, residual=False,
                          tail=SEQUENCE_TAILS["all"]),
        lambda: (torch.randn(2, 5, 8),),
    ),
    # two heads: the traced op list has a copy (transpose → reshape) the CPU replay lacks
    "sdpa_causal_token_0": (
        lambda: Attention(8, 2, 3, sdpa=True, causal=True, residual=False,
                          tail=SEQUENCE_TAILS["token_0"]),
        lambda: (torch.randn(2, 3, 8),),
    ),
    "sdpa_causal": (
        lambda: Attention(8, 2, 5, sdpa=True, causal=True, residual=False,
                          tail=SEQUENCE_TAILS["all"]),
        lambda: (torch.randn(2, 5, 8),),
    ),
    "vit_class_token": (TinyViT, lambda: (torch.randn(2, 3, 8, 8),)),
    "topk_router": (TopKRouter, lambda: (torch.randn(4, 8),)),
    "matmul_mean": (lambda: Fn(_mlp_mean), lambda: (torch.randn(4, 6), torch.randn(6, 5))),
    "matmul_relu_sum": (
        lambda: nn.Sequential(nn.Linear(6, 5), nn.ReLU(), Fn(lambda y: y.sum(1))),
        lambda: (torch.randn(4, 6),),
    ),
    "conv_softmax_maxpool_maxpool": (
        lambda: nn.Sequential(nn.Conv3d(2, 3, 3), nn.Softmax(1), nn.MaxPool3d(2),
                              nn.MaxPool3d(2)),
        lambda: (torch.randn(1, 2, 6, 6, 6),),
    ),
    "lower_triangular_matmul": (
        lambda: Fn(lambda a, b: torch.tril(a @ b)),
        lambda: (torch.randn(6, 6).tril(), torch.randn(6, 6).tril()),
    ),
    "log_softmax_rows": (lambda: nn.LogSoftmax(1), lambda: (torch.randn(4, 7),)),
}


#: Data movement at positions fixed by the shapes or by constants built in forward, and row-wise
#: transforms, each read in part: a slice of the output needs exactly the input elements it
#: moves (or whole rows of them).
REARRANGEMENTS: dict[str, tuple[Callable[[], nn.Module], Callable[[], tuple]]] = {
    "pixel_shuffle_rows": (
        lambda: nn.Sequential(nn.Conv2d(3, 12, 3, padding=1), nn.PixelShuffle(2),
                              Fn(lambda y: y[:, :, :3])),
        lambda: (torch.randn(1, 3, 4, 4),),
    ),
    "pixel_unshuffle_channel": (
        lambda: Fn(lambda x: F.pixel_unshuffle(x, 2)[:, 1:6]), lambda: (torch.randn(2, 3, 4, 6),),
    ),
    "channel_shuffle_channels": (
        lambda: Fn(lambda x: nn.ChannelShuffle(3)(x)[:, :4, 1:]),
        lambda: (torch.randn(1, 6, 3, 3),),
    ),
    "rot90_quarter": (
        lambda: Fn(lambda x: torch.rot90(x, 1, (1, 2))[:, :2, 1:]), lambda: (torch.randn(2, 4, 5),),
    ),
    "rot90_three_quarters": (
        lambda: Fn(lambda x: torch.rot90(x, -1, (2, 1))[:, 1:3]), lambda: (torch.randn(2, 4, 5),),
    ),
    "reflection_pad_corner": (
        lambda: Fn(lambda x: F.pad(x, (2, 1, 2, 2), mode="reflect")[..., :3, :4]),
        lambda: (torch.randn(1, 2, 5, 6),),
    ),
    "replication_pad_edge": (
        lambda: Fn(lambda x: F.pad(x, (3, 0, 1, 2), mode="replicate")[..., 4:, ::2]),
        lambda: (torch.randn(1, 2, 5, 6),),
    ),
    # a stride-2 window's even and odd taps, mapped through the pad's edge, clash in step
    "reflection_pad_strided_pool": (
        lambda: Fn(lambda x: F.avg_pool2d(F.pad(x, (1, 0, 2, 0), mode="reflect"), 3, 2)),
        lambda: (torch.randn(1, 1, 6, 6),),
    ),
    "replication_pad_strided_conv": (
        lambda: nn.Sequential(nn.ReplicationPad2d((1, 0, 2, 0)), nn.Conv2d(1, 1, 3, stride=2)),
        lambda: (torch.randn(1, 1, 6, 6),),
    ),
    "unfold_columns": (
        lambda: Fn(lambda x: F.unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=2)[..., 2:7]),
        lambda: (torch.randn(1, 3, 7, 8),),
    ),
    "fold_rows": (
        lambda: Fn(lambda x: F.fold(x, (6, 5), (2, 3), padding=1, stride=(1, 2))[..., 1:3, :]),
        lambda: (torch.randn(2, 12, 7 * 3),),
    ),
    "cdist_block": (
        lambda: Fn(lambda a, b: torch.cdist(a, b)[:, 1:3, :2]),
        lambda: (torch.randn(2, 5, 4), torch.randn(2, 6, 4)),
    ),
    "glu_first_row": (lambda: Fn(lambda x: F.glu(x, 0)[:1]), lambda: (torch.randn(4, 6),)),
    "index_add_constant_rows": (
        lambda: Fn(lambda x, s: x.index_add(0, torch.tensor([0, 2]), s)[1:]),
        lambda: (torch.randn(4, 6), torch.randn(2, 6)),
    ),
    # repeats given in forward: the trace runs on real tensors (the output size is data), and
    # the index the repeats make is still a constant: rows 0 and 1 are copied
    "repeat_interleave_constant_rows": (
        lambda: Fn(lambda x: x.repeat_interleave(torch.tensor([1, 2, 0, 1]), 0)[:2]),
        lambda: (torch.randn(4, 6),),
    ),
    # only the product's diagonal is needed: row i of a and column i of b, 2·K FLOPs each
    "diag_of_product": (
        lambda: Fn(lambda a, b: torch.diag(a @ b)), lambda: (torch.randn(5, 4), torch.randn(4, 5)),
    ),
    # the same through a view (stride n + 1, no box of the product's layout): each of the 4
    # kept elements is placed exactly, so rows 0..3 of a and columns 1..4 of b are needed
    "diagonal_view_of_product": (
        lambda: Fn(lambda a, b: torch.diagonal(a @ b, 1)),
        lambda: (torch.randn(5, 4), torch.randn(4, 5)),
    ),
    # overlapping windows (a view with no box either): windows 0 and 1 of size 3, step 2
    "unfold_windows_kept": (
        lambda: Fn(lambda x: x.unfold(1, 3, 2)[:, :2].sum(-1)), lambda: (torch.randn(3, 9),),
    ),
    "trace_of_product": (
        lambda: Fn(lambda a, b: torch.trace(a @ b)), lambda: (torch.randn(5, 4), torch.randn(4, 5)),
    ),
    "pdist_pairs": (lambda: Fn(lambda x: F.pdist(x)[2:7]), lambda: (torch.randn(6, 3),)),
    "rfft_low_frequencies": (
        lambda: Fn(lambda x: torch.fft.rfft(x[:, :3], dim=-1)[..., :2].abs()),
        lambda: (torch.randn(4, 5, 8),),
    ),
}


def _chain_case(names: list[str], tail: str) -> tuple[Callable[[], nn.Module], Callable]:
    torch.manual_seed(0)
    model, x = chain(names, tail)
    return lambda: model, lambda: (x,)


#: Issue 28's collapses: diagonals of products past MAX_BOXES (100 > 96) elements, scatters
#: that add every source, one DFT bin, overlapping windows, many slices
COLLAPSES: dict[str, tuple[Callable[[], nn.Module], Callable[[], tuple]]] = {
    "trace_of_product": (
        lambda: Fn(lambda a, b: torch.trace(a @ b)),
        lambda: (torch.randn(100, 100), torch.randn(100, 100)),
    ),
    "diagonal_of_gram": (
        lambda: Fn(lambda x: torch.diagonal(x @ x.T)), lambda: (torch.randn(100, 100),),
    ),
    "batched_trace": (
        lambda: Fn(lambda a, b: torch.einsum("bii->b", torch.bmm(a, b))),
        lambda: (torch.randn(2, 100, 100), torch.randn(2, 100, 100)),
    ),
    "cumsum_diagonal": (
        lambda: Fn(lambda x: torch.cumsum(x, 1).diagonal()), lambda: (torch.randn(100, 90),),
    ),
    "softmax_diagonal": (
        lambda: Fn(lambda x: torch.softmax(x, 1).diagonal()), lambda: (torch.randn(100, 100),),
    ),
    "index_add": (
        lambda: Fn(lambda x, i, s: x.index_add(0, i, s)[:, :3]),
        lambda: (torch.randn(8, 5), torch.randint(0, 8, (6,)), torch.randn(6, 5)),
    ),
    "scatter_add": (
        lambda: Fn(lambda x, i, s: x.scatter_add(0, i, s[:4, :3])),
        lambda: (torch.randn(8, 5), torch.randint(0, 8, (4, 3)), torch.randn(6, 5)),
    ),
    "rfft_bin_0": (
        lambda: Fn(lambda x: torch.fft.rfft(x, dim=1)[:, 0].real), lambda: (torch.randn(4, 16),),
    ),
    "overlapping_windows": (
        lambda: Fn(lambda a: a.as_strided((100, 2), (100, 100)) * 2),
        lambda: (torch.randn(100 * 100 + 1),),
    ),
    "cat_of_slices": (
        lambda: Fn(lambda x: torch.cat([x[i:i + 1] for i in range(0, 200, 2)]).sum()),
        lambda: (torch.randn(200, 3),),
    ),
    # 110 picks, past 64 placed boxes: each needs its row's log-sum-exp (was 880 B of 48,840)
    "log_softmax_anti_diagonal": (
        lambda: Fn(lambda x: torch.log_softmax(x, 1)[
            torch.arange(x.shape[0]), torch.arange(x.shape[0]).flip(0)]),
        lambda: (torch.randn(110, 110),),
    ),
}

CASES = {
    **KERNELBENCH_STYLE,
    **REARRANGEMENTS,
    **COLLAPSES,
    "conv_transpose_avg_pool": _chain_case(["conv_transpose_strided", "avg_pool"], "all"),
    "conv_transpose_conv": _chain_case(["conv_transpose", "conv1_strided"], "sum_channels"),
    "group_norm_row_0": _chain_case(["group_norm"], "row_0"),
    "batch_norm_train_row_0": _chain_case(["batch_norm_train"], "row_0"),
    "softmax_channel_0": _chain_case(["softmax_channels"], "channel_0"),
    "tril_masked_fill_mean": _chain_case(["tril_masked_fill"], "mean_spatial"),
    "tril_where_sum": _chain_case(["tril_where"], "sum_channels"),
    "conv_tril_where": _chain_case(["conv3_padded", "tril_where"], "all"),
    "zero_pad_conv": _chain_case(["zero_pad", "zero_pad", "conv3"], "all"),
    # a recurrence read in part (issue 28's sweep): out[0] is one step of each layer (was every
    # step), a bidirectional out[0] the backward direction's every step but one forward step,
    # h_n[0] the first layer only
    "rnn_first_step": (
        lambda: nn.Sequential(nn.RNN(3, 4, 2), Fn(lambda y: y[0][0])),
        lambda: (torch.randn(5, 2, 3),),
    ),
    "rnn_bidirectional_step_0": (
        lambda: nn.Sequential(nn.RNN(3, 4, bidirectional=True), Fn(lambda y: y[0][0])),
        lambda: (torch.randn(5, 2, 3),),
    ),
    "rnn_final_state_layer_0": (
        lambda: nn.Sequential(nn.RNN(3, 4, 2), Fn(lambda y: y[1][0])),
        lambda: (torch.randn(5, 2, 3),),
    ),
    # linear algebra read in part (issue 28's sweep; each charged nothing of its matrix): a
    # singular value, an inverse's column, one determinant of a batch, a solve's column need
    # their whole matrix; R[0, 0] of a QR column 0 (Cholesky: test_read_in_part.py)
    "svdvals_top": (
        lambda: Fn(lambda a: torch.linalg.svdvals(a)[..., 0]), lambda: (torch.randn(3, 5, 4),),
    ),
    "inverse_column": (
        lambda: Fn(lambda a: torch.linalg.inv(a)[:, 0]),
        lambda: (torch.randn(4, 4) + 4 * torch.eye(4),),
    ),
    "determinant_of_one": (
        lambda: Fn(lambda a: torch.linalg.det(a)[1]), lambda: (torch.randn(3, 4, 4),),
    ),
    "solve_column": (
        lambda: Fn(lambda a, b: torch.linalg.solve(a, b)[:, :1]),
        lambda: (torch.randn(4, 4) + 4 * torch.eye(4), torch.randn(4, 3)),
    ),
    "qr_corner": (lambda: Fn(lambda a: torch.linalg.qr(a).R[0, 0]), lambda: (torch.randn(5, 4),)),
    # an adaptive pool that upsamples (1×2 → 3×4), read in its first row: a third of the
    # outputs, but every input element, each priced one FLOP
    "adaptive_avg_upsampling_row": (
        lambda: Fn(lambda x: F.adaptive_avg_pool2d(x, (3, 4))[:, :, 0]),
        lambda: (torch.randn(2, 2, 1, 2),),
    ),
}

def _figures_of(name: str) -> Figures:
    make, inputs = CASES[name]
    torch.manual_seed(0)
    model = make()
    return figures(model, *inputs())


@pytest.mark.parametrize("name", list(CASES))
def test_kernelbench_style_problems_are_tight(name):
    assert_tight(_figures_of(name))


@pytest.mark.parametrize("name", list(CASES))
def test_kernelbench_style_problems_are_sound(name):
    assert_sound(_figures_of(name))


# --- the cheapest equal program (torchroofline.algebra) ----------------------------------------


class _Linear3d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).mean(-1)


class _TwoLinears(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(6, 8), nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x))


#: (name, program, inputs): programs a rule of torchroofline.algebra rewrites
ALGEBRA_PROGRAMS = [
    ("gemm-divide-sum", lambda x, w: (x @ w / 2).sum(1, keepdim=True),
     (torch.randn(7, 6), torch.randn(6, 5))),
    ("linear-3d-mean", _Linear3d(), (torch.randn(2, 3, 6),)),
    ("conv-channel-sum", lambda x, w: F.conv2d(x, w, padding=1).sum(1),
     (torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3))),
    ("convT-global-mean", lambda x, w: F.conv_transpose2d(x, w, stride=2).mean((2, 3)),
     (torch.randn(2, 3, 5, 5), torch.randn(3, 4, 3, 3))),
    ("conv-global-mean", lambda x, w: F.conv2d(x, w, padding=1).mean((2, 3)),
     (torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3))),
    ("self-difference", lambda x: x - x, (torch.randn(4, 5),)),
    ("exp-times-exp-negated", lambda x: torch.exp(x) * torch.exp(-x), (torch.randn(4, 5),)),
    ("softmax-row-sum", lambda x: torch.softmax(x, 1).sum(1), (torch.randn(4, 5),)),
    ("same-product-twice", lambda x, w: (x @ w) + (x @ w), (torch.randn(4, 5), torch.randn(5, 3))),
    ("broadcast-rows", lambda v, w: v.expand(6, 5) @ w, (torch.randn(5), torch.randn(5, 3))),
    ("product-times-vector", lambda a, b, v: (a @ b) @ v,
     (torch.randn(6, 6), torch.randn(6, 6), torch.randn(6))),
    ("two-linears", _TwoLinears(), (torch.randn(7, 6),)),
    ("scaled-twin", lambda a, b: torch.softmax(a @ b * 0.5, 1) + torch.softmax((a * 0.25) @ b, 1),
     (torch.randn(5, 6), torch.randn(6, 4))),
    ("made-triangle", lambda a: torch.tril(torch.ones(6, 6, dtype=a.dtype)) @ a,
     (torch.randn(6, 5),)),
    ("triangle-mask", lambda a, b: (torch.triu(torch.ones(6, 6, dtype=a.dtype)) * a) @ b,
     (torch.randn(6, 6), torch.randn(6, 5))),
    ("pooled-1x1-conv", lambda x, w: F.avg_pool2d(F.conv2d(x, w), 2),
     (torch.randn(2, 3, 4, 6), torch.randn(4, 3, 1, 1))),
]


@pytest.mark.parametrize(
    ("program", "inputs"), [p[1:] for p in ALGEBRA_PROGRAMS], ids=[p[0] for p in ALGEBRA_PROGRAMS]
)
def test_a_shortcut_removes_only_work_some_correct_program_avoids(
    program: Any, inputs: tuple
) -> None:
    """The cheapest program's bound against the oracle: it still reads every element the
    outputs provably need, and does no more than the program as written."""
    found = figures(program, *inputs)
    plans = found.result.plans
    # the shortcut is the algebra's (a cheaper equal program) or a demand rule's (x − x inside
    # the walk: plans.as_written holds the program as written)
    if plans.cheapest is not None:
        assert plans.cheapest.program.rewrites
        necessary = plans.cheapest.necessary
    else:
        assert plans.as_written is not None
        necessary = plans.necessary
    assert necessary.bytes(FLOAT_BYTES) >= TIGHT * found.proven.bytes(FLOAT_BYTES), (
        found.describe()
    )
    flops = sum(op.flops.tensor + op.flops.vector for op in necessary.ops)
    assert flops <= found.executed_flops
    assert_sound(found)


#: Cases whose every charged element the oracle proves needed, and no more: the bound meets the
#: proof exactly (a recurrence read in part was charged every step, 2× the proof; a
#: decomposition read in part none of its matrix, 0.02–0.2 of it)
EXACT = (
    "rnn_first_step", "rnn_bidirectional_step_0", "rnn_final_state_layer_0", "svdvals_top",
    "inverse_column", "determinant_of_one", "solve_column", "qr_corner",
)


@pytest.mark.parametrize("name", EXACT)
def test_a_recurrence_or_decomposition_read_in_part_is_charged_what_the_proof_needs(name):
    found = _figures_of(name)
    assert found.result.compulsory_bytes == found.proven.bytes(FLOAT_BYTES), found.describe()
