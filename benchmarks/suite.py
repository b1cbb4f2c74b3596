"""Write a generated KernelBench-format suite: level1/ (every single-op family), level2/ (fusion
chains) and level3/ (whole networks), one problem file per case.

Each file has ``class Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()``, as in
KernelBench. Sizes are KernelBench-like (some are large: the analysis runs on fake tensors); the
problems marked ``proto`` are small enough to run for real on a CPU, and are the ones the
prototype comparison (ptflops + torch.fx ShapeProp on real tensors) uses.

``python benchmarks/suite.py DIR`` writes the suite to DIR.
"""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


@dataclass(frozen=True)
class Spec:
    """One generated problem."""

    level: int
    name: str  #: file stem without the number KernelBench puts in front
    source: str  #: the file's whole text
    proto: bool = False  #: in the prototype comparison subset (runs for real on a CPU)
    quick: bool = False  #: in the ``--quick`` suite


def _inputs(inputs: list[str]) -> str:
    return "def get_inputs():\n    return [" + ", ".join(inputs) + "]\n"


def _net(level: int, name: str, body: str, inputs: list[str], init: str = "[]", **flags) -> Spec:
    """A problem whose ``body`` defines ``Model`` (and helpers); ``init`` is what
    ``get_init_inputs`` returns, as source."""
    source = (
        textwrap.dedent(body).strip()
        + "\n\n\n"
        + _inputs(inputs)
        + f"\n\ndef get_init_inputs():\n    return {init}\n"
    )
    return Spec(level, name, HEADER + source, **flags)


def _fn(level: int, name: str, expr: str, inputs: list[str], args: str = "x", *,
        ctor: str | None = None, **flags) -> Spec:
    """A one-line problem: ``forward(args)`` returns ``expr``; with ``ctor``, ``self.op`` is
    that module (KernelBench's level-1 files mostly build their module without arguments)."""
    member = f"        self.op = {ctor}\n" if ctor else ""
    body = (
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        f"        super().__init__()\n{member}\n"
        f"    def forward(self, {args}):\n"
        f"        return {expr}\n"
    )
    return _net(level, name, body, inputs, **flags)


def _mod(level: int, name: str, ctor: str, inputs: list[str], args: str = "x", **flags) -> Spec:
    """A problem that applies one module, ``ctor``, to its inputs."""
    return _fn(level, name, f"self.op({args})", inputs, args, ctor=ctor, **flags)


def _r(*shape: int) -> str:
    return f"torch.randn({', '.join(map(str, shape))})"


# --- Level 1: one op family per file --------------------------------------------------------


def _matmuls() -> list[Spec]:
    return [
        _fn(1, "Square_matrix_multiplication_", "torch.matmul(A, B)", [_r(4096, 4096)] * 2,
            "A, B", quick=True),
        _fn(1, "Standard_matrix_multiplication_", "torch.matmul(A, B)",
            [_r(1024, 4096), _r(4096, 2048)], "A, B", proto=True),
        _fn(1, "Batched_matrix_multiplication", "torch.bmm(A, B)",
            [_r(128, 512, 1024), _r(128, 1024, 2048)], "A, B"),
        _fn(1, "Matrix_vector_multiplication_", "torch.matmul(A, B)",
            [_r(2048, 1048576), _r(1048576, 1)], "A, B"),
        _fn(1, "Matrix_scalar_multiplication", "A * s", [_r(16384, 4096), "3.14"], "A, s"),
        _fn(1, "Matmul_with_large_K_dimension_", "torch.matmul(A, B)",
            [_r(256, 524288), _r(524288, 256)], "A, B"),
        _fn(1, "Matmul_with_small_K_dimension_", "torch.matmul(A, B)",
            [_r(16384, 64), _r(64, 16384)], "A, B"),
        _fn(1, "Matmul_for_upper_triangular_matrices", "torch.triu(torch.matmul(A, B))",
            ["torch.triu(torch.randn(4096, 4096))"] * 2, "A, B"),
        _fn(1, "Matmul_for_lower_triangular_matrices", "torch.tril(torch.matmul(A, B))",
            ["torch.tril(torch.randn(4096, 4096))"] * 2, "A, B"),
        _fn(1, "Matmul_with_transposed_A", "torch.matmul(A.T, B)",
            [_r(4096, 1024), _r(4096, 2048)], "A, B"),
        _fn(1, "Matmul_with_transposed_B", "torch.matmul(A, B.T)",
            [_r(1024, 4096), _r(2048, 4096)], "A, B"),
        _fn(1, "Matmul_with_transposed_both", "torch.matmul(A.T, B.T)",
            [_r(4096, 1024), _r(2048, 4096)], "A, B"),
        _fn(1, "Matmul_with_diagonal_matrices_", "torch.diag(A) @ B",
            [_r(4096), _r(4096, 4096)], "A, B"),
        _fn(1, "3D_tensor_matrix_multiplication", "torch.matmul(A, B)",
            [_r(16, 1024, 2048), _r(2048, 768)], "A, B"),
        _fn(1, "4D_tensor_matrix_multiplication", 'torch.einsum("bijl,lk->bijk", A, B)',
            [_r(8, 256, 512, 256), _r(256, 768)], "A, B"),
        _fn(1, "Symmetric_matrix_multiplication", "torch.matmul(A, B)",
            ["(lambda a: (a + a.T) / 2)(torch.randn(4096, 4096))"] * 2, "A, B"),
        _fn(1, "Matmul_irregular_shapes_", "torch.matmul(A, B)",
            [_r(8205, 2949), _r(2949, 5921)], "A, B"),
        _fn(1, "Batched_matmul_broadcast", "A @ B", [_r(32, 8, 256, 64), _r(64, 512)], "A, B",
            proto=True),
    ]


def _convs() -> list[Spec]:
    rows = [
        ("conv_standard_2D__square_input__square_kernel", "nn.Conv2d(3, 64, 3)",
         (16, 3, 256, 256), {}),
        ("conv_standard_2D__asymmetric_input__square_kernel", "nn.Conv2d(3, 64, 3)",
         (16, 3, 256, 128), {"proto": True}),
        ("conv_standard_2D__square_input__asymmetric_kernel", "nn.Conv2d(3, 64, (3, 5))",
         (16, 3, 256, 256), {}),
        ("conv_standard_2D_strided_padded", "nn.Conv2d(32, 64, 3, stride=2, padding=1)",
         (16, 32, 256, 256), {}),
        ("conv_pointwise_2D", "nn.Conv2d(64, 128, 1)", (16, 64, 128, 128), {}),
        ("conv_dilated_2D", "nn.Conv2d(3, 64, 3, dilation=2, padding=2)",
         (16, 3, 256, 256), {}),
        ("conv_grouped_2D", "nn.Conv2d(64, 128, 3, groups=8, padding=1)",
         (16, 64, 128, 128), {}),
        ("conv_depthwise_2D", "nn.Conv2d(64, 64, 3, groups=64, padding=1)",
         (16, 64, 256, 256), {}),
        ("conv_depthwise_separable_2D",
         "nn.Sequential(nn.Conv2d(64, 64, 3, groups=64, padding=1), nn.Conv2d(64, 128, 1))",
         (16, 64, 128, 128), {}),
        ("conv_standard_1D", "nn.Conv1d(64, 128, 3)", (16, 64, 65536), {}),
        ("conv_standard_1D_dilated_strided", "nn.Conv1d(64, 128, 3, stride=3, dilation=4)",
         (16, 64, 65536), {"proto": True}),
        ("conv_grouped_1D", "nn.Conv1d(64, 128, 5, groups=4)", (16, 64, 32768), {}),
        ("conv_standard_3D__square_input__square_kernel", "nn.Conv3d(3, 64, 3)",
         (16, 3, 64, 64, 64), {}),
        ("conv_standard_3D__asymmetric_kernel", "nn.Conv3d(3, 64, (3, 5, 7))",
         (16, 3, 64, 64, 64), {}),
        ("conv_depthwise_3D", "nn.Conv3d(32, 32, 3, groups=32, padding=1)",
         (8, 32, 32, 64, 64), {}),
        ("conv_transposed_1D", "nn.ConvTranspose1d(64, 32, 3)", (16, 64, 65536), {}),
        ("conv_transposed_1D_dilated", "nn.ConvTranspose1d(32, 64, 5, stride=2, dilation=3)",
         (16, 32, 16384), {}),
        ("conv_transposed_2D__square_input__square_kernel", "nn.ConvTranspose2d(64, 32, 3)",
         (16, 64, 128, 128), {"proto": True}),
        ("conv_transposed_2D_strided_padded",
         "nn.ConvTranspose2d(32, 64, 4, stride=2, padding=1)", (16, 32, 128, 128), {}),
        ("conv_transposed_2D_grouped", "nn.ConvTranspose2d(64, 64, 3, groups=4)",
         (16, 64, 128, 128), {}),
        ("conv_transposed_2D_dilated", "nn.ConvTranspose2d(32, 64, 3, dilation=2)",
         (16, 32, 128, 128), {}),
        ("conv_transposed_3D", "nn.ConvTranspose3d(32, 16, 3)", (8, 32, 32, 32, 32), {}),
        ("conv_transposed_3D_strided_grouped",
         "nn.ConvTranspose3d(32, 32, 3, stride=2, padding=1, output_padding=1, groups=4)",
         (8, 32, 16, 32, 32), {}),
        ("conv_standard_2D_no_bias", "nn.Conv2d(64, 64, 3, padding=1, bias=False)",
         (16, 64, 128, 128), {}),
    ]
    return [_mod(1, name, ctor, [_r(*shape)], **flags) for name, ctor, shape, flags in rows]


def _activations() -> list[Spec]:
    rows = [
        ("ReLU", "torch.relu(x)"),
        ("LeakyReLU", "F.leaky_relu(x, negative_slope=0.01)"),
        ("Sigmoid", "torch.sigmoid(x)"),
        ("Tanh", "torch.tanh(x)"),
        ("Softmax", "torch.softmax(x, dim=1)"),
        ("LogSoftmax", "torch.log_softmax(x, dim=1)"),
        ("Swish", "x * torch.sigmoid(x)"),
        ("GELU_", "F.gelu(x)"),
        ("GELU_tanh", "F.gelu(x, approximate='tanh')"),
        ("SELU_", "torch.selu(x)"),
        ("HardSigmoid", "F.hardsigmoid(x)"),
        ("Softplus", "F.softplus(x)"),
        ("Softsign", "F.softsign(x)"),
        ("ELU", "F.elu(x, alpha=1.0)"),
        ("HardTanh", "F.hardtanh(x, min_val=-1.0, max_val=1.0)"),
        ("HardSwish", "F.hardswish(x)"),
        ("Mish", "F.mish(x)"),
        ("ReLU6", "F.relu6(x)"),
        ("SiLU", "F.silu(x)"),
        ("LogSigmoid", "F.logsigmoid(x)"),
        ("Tanhshrink", "F.tanhshrink(x)"),
        ("CELU", "F.celu(x)"),
        ("GLU", "F.glu(x, dim=1)"),
        ("Clamp", "torch.clamp(x, -0.5, 0.5)"),
        ("MinGPTNewGelu",
         "0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))"),
    ]
    return [
        _fn(1, name, expr, [_r(4096, 32768)], quick=name == "ReLU",
            proto=name in ("Softmax", "GELU_"))
        for name, expr in rows
    ]


def _reductions() -> list[Spec]:
    x = [_r(128, 4096, 4095)]
    rows = [
        ("Sum_reduction_over_a_dimension", "torch.sum(x, dim=1, keepdim=True)", x),
        ("Mean_reduction_over_a_dimension", "torch.mean(x, dim=1)", x),
        ("Max_reduction_over_a_dimension", "torch.max(x, dim=1)[0]", x),
        ("Min_reduction_over_a_dimension", "torch.min(x, dim=1)[0]", x),
        ("Product_reduction_over_a_dimension", "torch.prod(x, dim=1)", x),
        ("Argmax_over_a_dimension", "torch.argmax(x, dim=1)", x),
        ("Argmin_over_a_dimension", "torch.argmin(x, dim=1)", x),
        ("Amax_last_dimension", "torch.amax(x, dim=-1)", x),
        ("LogSumExp", "torch.logsumexp(x, dim=1)", x),
        ("Variance_over_a_dimension", "torch.var(x, dim=1)", x),
        ("Std_over_a_dimension", "torch.std(x, dim=-1)", x),
        ("Full_sum", "x.sum()", x),
        ("cumsum", "torch.cumsum(x, dim=1)", [_r(32768, 32768)]),
        ("cumprod", "torch.cumprod(x, dim=1)", [_r(32768, 32768)]),
        ("cumsum_reverse", "torch.cumsum(x.flip(1), dim=1).flip(1)", [_r(32768, 32768)]),
        ("cumsum_exclusive",
         "torch.cumsum(torch.cat((torch.zeros_like(x[:, :1]), x), dim=1), dim=1)[:, :-1]",
         [_r(32768, 32768)]),
        ("masked_cumsum", "torch.cumsum(x * mask, dim=1)",
         [_r(32768, 32768), "torch.randint(0, 2, (32768, 32768)).bool()"]),
        ("Frobenius_norm_", "x / torch.norm(x, p='fro')", [_r(112, 64, 512, 512)]),
        ("L1Norm_", "x / torch.sum(torch.abs(x), dim=1, keepdim=True)", [_r(32768, 65535)]),
        ("L2Norm_", "x / torch.norm(x, p=2, dim=1, keepdim=True)", [_r(32768, 65535)]),
    ]
    specs = []
    for name, expr, inputs in rows:
        args = "x, mask" if len(inputs) == 2 else "x"
        specs.append(_fn(1, name, expr, inputs, args))
    # KernelBench's original (small) sizes, which also run for real in the prototype comparison.
    small = [
        ("Sum_reduction_small", "torch.sum(x, dim=1, keepdim=True)", _r(16, 256, 256), True),
        ("Argmax_small", "torch.argmax(x, dim=1)", _r(16, 256, 256), False),
        ("cumsum_small", "torch.cumsum(x, dim=1)", _r(128, 4000), False),
    ]
    return specs + [_fn(1, name, expr, [x], proto=proto) for name, expr, x, proto in small]


def _norms() -> list[Spec]:
    rows = [
        ("BatchNorm", "nn.BatchNorm2d(64)", (64, 64, 512, 512), {}),
        ("BatchNorm1d", "nn.BatchNorm1d(1024)", (4096, 1024, 64), {}),
        ("BatchNorm3d", "nn.BatchNorm3d(32)", (16, 32, 64, 64, 64), {}),
        ("LayerNorm", "nn.LayerNorm((64, 256, 256))", (16, 64, 256, 256), {}),
        ("LayerNorm_last_dim", "nn.LayerNorm(4096)", (8, 2048, 4096), {"proto": True}),
        ("GroupNorm_", "nn.GroupNorm(8, 64)", (112, 64, 512, 512), {}),
        ("InstanceNorm", "nn.InstanceNorm2d(64)", (112, 64, 512, 512), {}),
        ("InstanceNorm1d", "nn.InstanceNorm1d(128, affine=True)", (256, 128, 8192), {}),
        ("InstanceNorm3d", "nn.InstanceNorm3d(32)", (8, 32, 64, 64, 64), {}),
        ("RMSNorm_", "nn.RMSNorm(4096)", (8, 2048, 4096), {}),
        ("LocalResponseNorm", "nn.LocalResponseNorm(5)", (16, 96, 128, 128), {}),
    ]
    specs = [_mod(1, name, ctor, [_r(*shape)], **flags) for name, ctor, shape, flags in rows]
    specs.append(
        _fn(1, "RMSNorm_manual", "x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)",
            [_r(112, 64, 512, 512)])
    )
    return specs


def _pools() -> list[Spec]:
    rows = [
        ("Max_Pooling_1D", "nn.MaxPool1d(4, stride=2, padding=2, dilation=3)",
         (64, 192, 65536), {}),
        ("Max_Pooling_2D", "nn.MaxPool2d(4, stride=2, padding=1, dilation=1)",
         (32, 64, 512, 512), {}),
        ("Max_Pooling_3D", "nn.MaxPool3d(3, stride=2, padding=1)", (16, 32, 128, 128, 128), {}),
        ("Average_Pooling_1D", "nn.AvgPool1d(8, stride=1, padding=4)", (64, 128, 65536), {}),
        ("Average_Pooling_2D", "nn.AvgPool2d(11)", (16, 64, 2048, 2048), {}),
        ("Average_Pooling_3D", "nn.AvgPool3d(3, stride=2, padding=1)",
         (16, 32, 128, 128, 128), {}),
        ("Adaptive_Avg_Pooling_2D", "nn.AdaptiveAvgPool2d((7, 7))", (64, 512, 56, 56), {}),
        ("Adaptive_Max_Pooling_1D", "nn.AdaptiveMaxPool1d(64)", (64, 512, 4096), {}),
        ("Max_Pooling_2D_small", "nn.MaxPool2d(2)", (16, 64, 256, 256), {"proto": True}),
        ("LP_Pooling_2D", "nn.LPPool2d(2, 3, stride=2)", (16, 64, 256, 256), {}),
    ]
    return [_mod(1, name, ctor, [_r(*shape)], **flags) for name, ctor, shape, flags in rows]


def _attention() -> list[Spec]:
    q = _r(32, 32, 1024, 64)
    return [
        _fn(1, "ScaledDotProductAttention", "F.scaled_dot_product_attention(q, k, v)", [q] * 3,
            "q, k, v"),
        _fn(1, "ScaledDotProductAttention_small", "F.scaled_dot_product_attention(q, k, v)",
            [_r(8, 8, 256, 64)] * 3, "q, k, v", proto=True),
        _fn(1, "ScaledDotProductAttention_causal",
            "F.scaled_dot_product_attention(q, k, v, is_causal=True)", [q] * 3, "q, k, v"),
        _fn(1, "ScaledDotProductAttention_mask",
            "F.scaled_dot_product_attention(q, k, v, attn_mask=m)",
            [q, q, q, "torch.randn(1024, 1024)"], "q, k, v, m"),
        _fn(1, "ScaledDotProductAttention_long_sequence",
            "F.scaled_dot_product_attention(q, k, v, is_causal=True)",
            [_r(4, 16, 8192, 128)] * 3, "q, k, v"),
        _fn(1, "Manual_softmax_attention",
            "torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1) @ v", [q] * 3, "q, k, v"),
        _fn(1, "Manual_softmax_attention_small",
            "torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1) @ v", [_r(8, 8, 256, 64)] * 3,
            "q, k, v"),
        _net(1, "MultiheadAttention", """
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(512, 8, batch_first=True)

                def forward(self, x):
                    return self.attn(x, x, x, need_weights=False)[0]
            """, [_r(16, 1024, 512)]),
    ]


def _losses() -> list[Spec]:
    n, c = 32768, 4096
    pred, target = _r(n, c), _r(n, c)
    labels = f"torch.randint(0, {c}, ({n},))"
    prob = f"torch.randn({n}, {c}).softmax(dim=-1)"
    sign = f"torch.randint(0, 2, ({n}, 1)).float() * 2 - 1"
    rows = [
        ("MSELoss", "torch.mean((p - t) ** 2)", [pred, target], {}),
        ("MSELoss_small", "torch.mean((p - t) ** 2)", [_r(128, 4096)] * 2, {"proto": True}),
        ("CrossEntropyLoss", "F.cross_entropy(p, t)", [pred, labels], {}),
        ("CrossEntropyLoss_small", "F.cross_entropy(p, t)",
         [_r(4096, 1000), "torch.randint(0, 1000, (4096,))"], {"proto": True}),
        ("KLDivLoss", "F.kl_div(torch.log(p), t, reduction='batchmean')", [prob, prob], {}),
        ("HuberLoss", "F.smooth_l1_loss(p, t)", [pred, target], {}),
        ("HingeLoss", "torch.mean(torch.clamp(1 - p * t, min=0))", [_r(n, 1), sign], {}),
        ("CosineSimilarityLoss", "torch.mean(1 - F.cosine_similarity(p, t, dim=1))",
         [pred, target], {}),
        ("TripletMarginLoss", "F.triplet_margin_loss(p, t, t.flip(0), margin=1.0)",
         [pred, target], {}),
        ("BCEWithLogitsLoss", "F.binary_cross_entropy_with_logits(p, t)",
         [pred, f"torch.rand({n}, {c})"], {}),
        ("NLLLoss", "F.nll_loss(torch.log_softmax(p, dim=1), t)", [pred, labels], {}),
        ("L1Loss", "F.l1_loss(p, t)", [pred, target], {}),
        ("MarginRankingLoss", "F.margin_ranking_loss(p, t, torch.ones_like(p))",
         [_r(n * 16), _r(n * 16)], {}),
    ]
    return [_fn(1, name, expr, inputs, "p, t", **flags) for name, expr, inputs, flags in rows]


def _misc() -> list[Spec]:
    return [
        _mod(1, "Embedding", "nn.Embedding(50257, 768)",
             ["torch.randint(0, 50257, (32, 2048))"]),
        _fn(1, "Transpose_contiguous", "x.transpose(1, 2).contiguous()", [_r(64, 2048, 4096)]),
        _fn(1, "Concat", "torch.cat((x, y), dim=1)", [_r(64, 2048, 4096)] * 2, "x, y"),
        _fn(1, "Pad_reflect", "F.pad(x, (2, 2, 2, 2), mode='reflect')", [_r(16, 64, 512, 512)]),
        _fn(1, "Upsample_bilinear", "F.interpolate(x, scale_factor=2, mode='bilinear')",
            [_r(16, 64, 256, 256)]),
        _fn(1, "Upsample_nearest", "F.interpolate(x, scale_factor=2, mode='nearest')",
            [_r(16, 64, 256, 256)]),
        _fn(1, "Gather_rows", "torch.index_select(x, 0, i)",
            [_r(1048576, 256), "torch.randint(0, 1048576, (65536,))"], "x, i"),
        _fn(1, "Where_select", "torch.where(x > 0, x, y)", [_r(4096, 32768)] * 2, "x, y"),
        _fn(1, "Topk", "torch.topk(x, 16, dim=-1)[0]", [_r(4096, 32768)]),
        _fn(1, "Sort", "torch.sort(x, dim=-1)[0]", [_r(4096, 32768)]),
    ]


# --- Level 2: an operator followed by a fusible chain ---------------------------------------

#: The producing operator: (label, constructor, input shape, output rank, output channels,
#: output last-dimension size).
_BASES = [
    ("Conv2d", "nn.Conv2d(3, 16, 3)", (128, 3, 32, 32), 4, 16, 30),
    ("Conv3d", "nn.Conv3d(3, 16, 3)", (128, 3, 16, 32, 32), 5, 16, 30),
    ("ConvTranspose2d", "nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1)",
     (128, 32, 16, 16), 4, 16, 32),
    ("ConvTranspose3d", "nn.ConvTranspose3d(32, 16, 3, stride=2, padding=1, output_padding=1)",
     (32, 32, 8, 16, 16), 5, 16, 32),
    ("Gemm", "nn.Linear(1024, 512)", (128, 1024), 2, 512, 512),
    ("Matmul", "nn.Linear(512, 1024, bias=False)", (128, 64, 512), 3, 64, 1024),
]

#: The fusible chain after it: (label, extra __init__ lines, forward lines); ``{C}`` is the
#: output channel count, ``{L}`` the last-dimension size, ``{bshape}`` a per-channel shape and
#: ``{nd}`` the output rank.
_CHAINS = [
    ("ReLU_BiasAdd", ["self.bias = nn.Parameter(torch.randn({bshape}))"],
     ["x = torch.relu(x) + self.bias"]),
    ("GELU_GroupNorm", ["self.norm = nn.GroupNorm(8, {C})"],
     ["x = self.norm(F.gelu(x))"]),
    ("BatchNorm_Scale",
     ["self.norm = {bn}({C})", "self.scale = nn.Parameter(torch.ones({bshape}))"],
     ["x = self.norm(x) * self.scale"]),
    ("Swish_Residual", [], ["x = x * torch.sigmoid(x) + x"]),
    ("HardSwish_Clamp_Multiply", ["self.scale = 0.5"],
     ["x = torch.clamp(F.hardswish(x), -1.0, 1.0) * self.scale"]),
    ("LayerNorm_Tanh", ["self.norm = nn.LayerNorm({L})"], ["x = torch.tanh(self.norm(x))"]),
    ("Subtract_Mean", [], ["x = x - x.mean(dim=1, keepdim=True)"]),
    ("Softmax_Multiply", [], ["x = torch.softmax(x, dim=1) * 2.0"]),
    ("Min_Tanh_Tanh", [], ["x = torch.tanh(torch.tanh(torch.min(x, torch.tensor(0.5))))"]),
    ("Swish_Sum", [], ["x = torch.sum(x * torch.sigmoid(x), dim=1)"]),
    ("LogSumExp_ReLU", [], ["x = torch.relu(torch.logsumexp(x, dim=1, keepdim=True))"]),
    ("Dropout_Mean_Softmax", ["self.dropout = nn.Dropout(0.2)"],
     ["x = torch.softmax(torch.mean(self.dropout(x), dim=1, keepdim=True), dim=1)"]),
]

_BATCH_NORMS = {2: "nn.BatchNorm1d", 3: "nn.BatchNorm1d", 4: "nn.BatchNorm2d", 5: "nn.BatchNorm3d"}


def _chain(base: tuple, chain: tuple, **flags) -> Spec:
    label, ctor, shape, rank, channels, last = base
    name, init_lines, forward_lines = chain
    fields = {
        "C": channels,
        "L": last,
        "bshape": ", ".join([str(channels)] + ["1"] * (rank - 2)),
        "bn": _BATCH_NORMS[rank],
    }
    init = "".join(f"        {line.format(**fields)}\n" for line in init_lines)
    forward = "".join(f"        {line.format(**fields)}\n" for line in forward_lines)
    source = (
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        f"        self.op = {ctor}\n"
        f"{init}\n"
        "    def forward(self, x):\n"
        "        x = self.op(x)\n"
        f"{forward}"
        "        return x\n\n\n"
        f"{_inputs([_r(*shape)])}\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    return Spec(2, f"{label}_{name}", HEADER + source, **flags)


_PROTO_CHAINS = {("Conv2d", "ReLU_BiasAdd"), ("Gemm", "GELU_GroupNorm"),
                 ("Conv2d", "BatchNorm_Scale"), ("ConvTranspose3d", "Softmax_Multiply"),
                 ("Matmul", "LayerNorm_Tanh")}


def _level2() -> list[Spec]:
    specs = [
        _chain(base, chain, proto=(base[0], chain[0]) in _PROTO_CHAINS,
               quick=(base[0], chain[0]) == ("Conv2d", "ReLU_BiasAdd"))
        for base in _BASES
        for chain in _CHAINS
    ]
    specs += [
        _net(2, "Conv2d_MaxPool_HardSwish_BiasAdd", """
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(16, 32, 3, padding=1)
                    self.bias = nn.Parameter(torch.randn(32, 1, 1))

                def forward(self, x):
                    return F.hardswish(F.max_pool2d(self.conv(x), 2)) + self.bias
            """, [_r(128, 16, 64, 64)]),
        _net(2, "ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply", """
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.ConvTranspose3d(8, 16, 3, stride=2, padding=1)
                    self.pool = nn.AvgPool3d(2)

                def forward(self, x):
                    x = torch.clamp(self.pool(self.conv(x)), 0.0, 1.0)
                    return torch.softmax(x.flatten(2), dim=2).view_as(x) * 2.0
            """, [_r(16, 8, 16, 32, 32)]),
        _net(2, "Gemm_BatchNorm_GELU_GroupNorm_Mean_ReLU", """
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.gemm = nn.Linear(512, 1024)
                    self.bn = nn.BatchNorm1d(1024)
                    self.gn = nn.GroupNorm(8, 1024)

                def forward(self, x):
                    x = self.gn(F.gelu(self.bn(self.gemm(x))))
                    return torch.relu(x.mean(dim=1, keepdim=True))
            """, [_r(1024, 512)], proto=True),
        _net(2, "Matmul_Scale_Residual_LayerNorm_GELU", """
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.weight = nn.Parameter(torch.randn(1024, 1024))
                    self.norm = nn.LayerNorm(1024)

                def forward(self, x):
                    y = torch.matmul(x, self.weight) * 0.5
                    return F.gelu(self.norm(x + y))
            """, [_r(16, 256, 1024)]),
        _net(2, "Conv2d_InstanceNorm_Divide_Sigmoid", """
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 16, 3)
                    self.norm = nn.InstanceNorm2d(16)

                def forward(self, x):
                    return torch.sigmoid(self.norm(self.conv(x)) / 2.0)
            """, [_r(128, 3, 64, 64)]),
        _net(2, "Conv3d_GroupNorm_Min_Clamp_Dropout", """
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv3d(3, 16, 3)
                    self.norm = nn.GroupNorm(4, 16)
                    self.dropout = nn.Dropout(0.1)

                def forward(self, x):
                    x = torch.clamp(torch.min(self.norm(self.conv(x)), torch.tensor(0.0)), 0, 1)
                    return self.dropout(x)
            """, [_r(64, 3, 16, 32, 32)]),
    ]
    return specs


# --- Level 3: whole networks ----------------------------------------------------------------

_RESNET_BLOCKS = """
class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.down = None
        if stride != 1 or c_in != c_out:
            self.down = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class Bottleneck(nn.Module):
    def __init__(self, c_in, width, stride):
        super().__init__()
        c_out = width * 4
        self.body = nn.Sequential(
            nn.Conv2d(c_in, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
            nn.ReLU(inplace=True), nn.Conv2d(width, c_out, 1, bias=False), nn.BatchNorm2d(c_out),
        )
        self.down = None
        if stride != 1 or c_in != c_out:
            self.down = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x):
        return torch.relu(self.body(x) + (x if self.down is None else self.down(x)))


class Model(nn.Module):
    def __init__(self, block, layers, widths, num_classes=1000):
        super().__init__()
        block = {"basic": BasicBlock, "bottleneck": Bottleneck}[block]
        expansion = 4 if block is Bottleneck else 1
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        blocks, c_in = [], 64
        for i, (count, width) in enumerate(zip(layers, widths)):
            for j in range(count):
                blocks.append(block(c_in, width, 2 if (j == 0 and i > 0) else 1))
                c_in = width * expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
"""

_VGG = """
class Model(nn.Module):
    def __init__(self, config, num_classes=1000):
        super().__init__()
        layers, c_in = [], 3
        for item in config:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c_in, item, 3, padding=1), nn.ReLU(inplace=True)]
                c_in = item
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(c_in * 7 * 7, 4096), nn.ReLU(inplace=True), nn.Dropout(0.0),
            nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(0.0),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 7)
        return self.classifier(torch.flatten(x, 1))
"""

_MOBILENET_V2 = """
class InvertedResidual(nn.Module):
    def __init__(self, c_in, c_out, stride, expand):
        super().__init__()
        hidden = c_in * expand
        self.residual = stride == 1 and c_in == c_out
        self.body = nn.Sequential(
            nn.Conv2d(c_in, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, c_out, 1, bias=False), nn.BatchNorm2d(c_out),
        )

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class Model(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                    (6, 160, 3, 2), (6, 320, 1, 1)]
        layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6(inplace=True)]
        c_in = 32
        for expand, c_out, count, stride in settings:
            for i in range(count):
                layers.append(InvertedResidual(c_in, c_out, stride if i == 0 else 1, expand))
                c_in = c_out
        layers += [nn.Conv2d(c_in, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6(True)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x):
        return self.classifier(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))
"""

#: Models that live as files: benchmarks/models/ (also built by run.py) and the bundled example.
_MODELS = Path(__file__).resolve().parent / "models"
_EXAMPLE = Path(__file__).resolve().parent.parent / "examples/kernelbench/level3/mini_gpt_block.py"


def _file(level: int, name: str, path: Path, inputs: list[str] | None = None, init: str = "[]",
          **flags) -> Spec:
    """A problem whose code is a file, written whole: a complete problem file (no ``inputs``),
    or a model file followed by ``get_inputs``/``get_init_inputs``."""
    source = path.read_text(encoding="utf-8")
    if inputs is not None:
        source += f"\n\n{_inputs(inputs)}\n\ndef get_init_inputs():\n    return {init}\n"
    return Spec(level, name, source, **flags)


_MIN_GPT_ATTENTION = """
class Model(nn.Module):
    # minGPT's causal self-attention, written out (masked_fill + softmax, no SDPA).
    def __init__(self, embed, heads, length):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(embed, 3 * embed)
        self.c_proj = nn.Linear(embed, embed)
        mask = torch.tril(torch.ones(length, length)).view(1, 1, length, length)
        self.register_buffer("mask", mask)

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)
"""

_RNN = """
class Model(nn.Module):
    def __init__(self, kind, input_size, hidden_size, num_layers, bidirectional, batch_first,
                 batch_size, head):
        super().__init__()
        cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind]
        self.rnn = cls(input_size, hidden_size, num_layers, batch_first=batch_first,
                       bidirectional=bidirectional)
        directions = 2 if bidirectional else 1
        shape = (num_layers * directions, batch_size, hidden_size)
        self.h0 = torch.randn(shape)
        self.c0 = torch.randn(shape) if kind == "lstm" else None
        self.fc = nn.Linear(hidden_size * directions, 10) if head else None

    def forward(self, x):
        state = (self.h0, self.c0) if self.c0 is not None else self.h0
        out, _ = self.rnn(x, state)
        return self.fc(out[:, -1, :]) if self.fc is not None else out
"""


def _rnn(name: str, kind: str, layers: int, bidirectional: bool, batch_first: bool,
         head: bool, **flags) -> Spec:
    batch, steps, features, hidden = 10, 512, 128, 256
    shape = (batch, steps, features) if batch_first else (steps, batch, features)
    init = (f"['{kind}', {features}, {hidden}, {layers}, {bidirectional}, {batch_first}, "
            f"{batch}, {head}]")
    return _net(3, name, _RNN, [_r(*shape)], init, **flags)


def _level3() -> list[Spec]:
    return [
        _net(3, "MLP", """
            class Model(nn.Module):
                def __init__(self, sizes):
                    super().__init__()
                    layers = []
                    for a, b in zip(sizes[:-2], sizes[1:-1]):
                        layers += [nn.Linear(a, b), nn.ReLU()]
                    self.net = nn.Sequential(*layers, nn.Linear(sizes[-2], sizes[-1]))

                def forward(self, x):
                    return self.net(x)
            """, [_r(128, 4096)], "[[4096, 2048, 2048, 1024, 10]]", proto=True, quick=True),
        _net(3, "DeepNarrowMLP", """
            class Model(nn.Module):
                def __init__(self, width, depth):
                    super().__init__()
                    layers = []
                    for _ in range(depth):
                        layers += [nn.Linear(width, width), nn.ReLU()]
                    self.net = nn.Sequential(*layers, nn.Linear(width, 10))

                def forward(self, x):
                    return self.net(x)
            """, [_r(1024, 64)], "[64, 16]"),
        _net(3, "LeNet5", """
            class Model(nn.Module):
                def __init__(self, num_classes):
                    super().__init__()
                    self.conv1 = nn.Conv2d(1, 6, 5)
                    self.conv2 = nn.Conv2d(6, 16, 5)
                    self.fc1 = nn.Linear(16 * 5 * 5, 120)
                    self.fc2 = nn.Linear(120, 84)
                    self.fc3 = nn.Linear(84, num_classes)

                def forward(self, x):
                    x = F.max_pool2d(F.relu(self.conv1(x)), 2)
                    x = F.max_pool2d(F.relu(self.conv2(x)), 2)
                    x = x.view(x.size(0), -1)
                    return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))
            """, [_r(1024, 1, 32, 32)], "[10]", proto=True),
        _net(3, "AlexNet", """
            class Model(nn.Module):
                def __init__(self, num_classes):
                    super().__init__()
                    self.features = nn.Sequential(
                        nn.Conv2d(3, 96, 11, 4, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
                        nn.Conv2d(96, 256, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
                        nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(inplace=True),
                        nn.Conv2d(384, 384, 3, padding=1), nn.ReLU(inplace=True),
                        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
                        nn.MaxPool2d(3, 2),
                    )
                    self.classifier = nn.Sequential(
                        nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
                        nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Linear(4096, num_classes),
                    )

                def forward(self, x):
                    return self.classifier(torch.flatten(self.features(x), 1))
            """, [_r(10, 3, 224, 224)], "[1000]", proto=True),
        _net(3, "VGG11", _VGG, [_r(10, 3, 224, 224)],
             "[[64, 'M', 128, 'M', 256, 256, 'M', 512, 512, 'M', 512, 512, 'M']]"),
        _net(3, "VGG16", _VGG, [_r(10, 3, 224, 224)],
             "[[64, 64, 'M', 128, 128, 'M', 256, 256, 256, 'M', 512, 512, 512, 'M', 512, 512, "
             "512, 'M']]"),
        _net(3, "VGG_small_cifar", _VGG, [_r(8, 3, 64, 64)],
             "[[32, 'M', 64, 'M', 128, 128, 'M']]"),
        _net(3, "ResNet18", _RESNET_BLOCKS, [_r(10, 3, 224, 224)],
             "['basic', [2, 2, 2, 2], [64, 128, 256, 512]]"),
        _net(3, "ResNet34", _RESNET_BLOCKS, [_r(10, 3, 224, 224)],
             "['basic', [3, 4, 6, 3], [64, 128, 256, 512]]"),
        _net(3, "ResNet50", _RESNET_BLOCKS, [_r(10, 3, 224, 224)],
             "['bottleneck', [3, 4, 6, 3], [64, 128, 256, 512]]"),
        _net(3, "ResNet101", _RESNET_BLOCKS, [_r(10, 3, 224, 224)],
             "['bottleneck', [3, 4, 23, 3], [64, 128, 256, 512]]"),
        _net(3, "ResNet_small", _RESNET_BLOCKS, [_r(2, 3, 112, 112)],
             "['basic', [1, 1, 1, 1], [64, 128, 256, 512]]", proto=True),
        _net(3, "MobileNetV1", """
            def dw(c_in, c_out, stride):
                return nn.Sequential(
                    nn.Conv2d(c_in, c_in, 3, stride, 1, groups=c_in, bias=False),
                    nn.BatchNorm2d(c_in), nn.ReLU(inplace=True),
                    nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out),
                    nn.ReLU(inplace=True),
                )


            class Model(nn.Module):
                def __init__(self, num_classes):
                    super().__init__()
                    plan = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1),
                            (256, 512, 2)] + [(512, 512, 1)] * 5 + [(512, 1024, 2), (1024, 1024, 1)]
                    self.stem = nn.Sequential(
                        nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(True)
                    )
                    self.body = nn.Sequential(*(dw(a, b, s) for a, b, s in plan))
                    self.fc = nn.Linear(1024, num_classes)

                def forward(self, x):
                    x = F.adaptive_avg_pool2d(self.body(self.stem(x)), 1)
                    return self.fc(x.flatten(1))
            """, [_r(10, 3, 224, 224)], "[1000]"),
        _net(3, "MobileNetV2", _MOBILENET_V2, [_r(10, 3, 224, 224)], "[1000]"),
        _net(3, "SqueezeNetFireModule", """
            class Model(nn.Module):
                def __init__(self, c_in, squeeze, expand1, expand3):
                    super().__init__()
                    self.squeeze = nn.Conv2d(c_in, squeeze, 1)
                    self.expand1 = nn.Conv2d(squeeze, expand1, 1)
                    self.expand3 = nn.Conv2d(squeeze, expand3, 3, padding=1)

                def forward(self, x):
                    x = torch.relu(self.squeeze(x))
                    return torch.cat([torch.relu(self.expand1(x)), torch.relu(self.expand3(x))], 1)
            """, [_r(10, 3, 224, 224)], "[3, 6, 64, 64]"),
        _net(3, "DenseNetBlock", """
            class Model(nn.Module):
                def __init__(self, layers, c_in, growth):
                    super().__init__()
                    self.layers = nn.ModuleList(
                        nn.Sequential(nn.BatchNorm2d(c_in + i * growth), nn.ReLU(inplace=True),
                                      nn.Conv2d(c_in + i * growth, growth, 3, 1, 1, bias=False))
                        for i in range(layers)
                    )

                def forward(self, x):
                    features = [x]
                    for layer in self.layers:
                        features.append(layer(torch.cat(features, 1)))
                    return torch.cat(features, 1)
            """, [_r(10, 32, 224, 224)], "[6, 32, 32]"),
        _net(3, "GoogleNetInceptionModule", """
            class Model(nn.Module):
                def __init__(self, c_in, c1, c3r, c3, c5r, c5, cp):
                    super().__init__()
                    self.b1 = nn.Conv2d(c_in, c1, 1)
                    self.b3 = nn.Sequential(nn.Conv2d(c_in, c3r, 1), nn.Conv2d(c3r, c3, 3, 1, 1))
                    self.b5 = nn.Sequential(nn.Conv2d(c_in, c5r, 1), nn.Conv2d(c5r, c5, 5, 1, 2))
                    self.bp = nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(c_in, cp, 1))

                def forward(self, x):
                    return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1)
            """, [_r(10, 480, 224, 224)], "[480, 192, 96, 208, 16, 48, 64]"),
        _net(3, "ShuffleNetUnit", """
            class Model(nn.Module):
                def __init__(self, channels, groups):
                    super().__init__()
                    self.groups = groups
                    mid = channels // 4
                    self.conv1 = nn.Conv2d(channels, mid, 1, groups=groups, bias=False)
                    self.bn1 = nn.BatchNorm2d(mid)
                    self.conv2 = nn.Conv2d(mid, mid, 3, padding=1, groups=mid, bias=False)
                    self.bn2 = nn.BatchNorm2d(mid)
                    self.conv3 = nn.Conv2d(mid, channels, 1, groups=groups, bias=False)
                    self.bn3 = nn.BatchNorm2d(channels)

                def forward(self, x):
                    y = F.relu(self.bn1(self.conv1(x)))
                    b, c, h, w = y.shape
                    y = y.view(b, self.groups, c // self.groups, h, w).transpose(1, 2)
                    y = y.reshape(b, c, h, w)
                    y = self.bn3(self.conv3(self.bn2(self.conv2(y))))
                    return F.relu(x + y)
            """, [_r(10, 240, 224, 224)], "[240, 3]"),
        _net(3, "UNet_small", """
            def double(c_in, c_out):
                return nn.Sequential(
                    nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(True),
                    nn.Conv2d(c_out, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(True),
                )


            class Model(nn.Module):
                def __init__(self, c_in, c_out, width):
                    super().__init__()
                    self.enc1 = double(c_in, width)
                    self.enc2 = double(width, width * 2)
                    self.mid = double(width * 2, width * 4)
                    self.up2 = nn.ConvTranspose2d(width * 4, width * 2, 2, stride=2)
                    self.dec2 = double(width * 4, width * 2)
                    self.up1 = nn.ConvTranspose2d(width * 2, width, 2, stride=2)
                    self.dec1 = double(width * 2, width)
                    self.out = nn.Conv2d(width, c_out, 1)

                def forward(self, x):
                    e1 = self.enc1(x)
                    e2 = self.enc2(F.max_pool2d(e1, 2))
                    m = self.mid(F.max_pool2d(e2, 2))
                    d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
                    d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
                    return self.out(d1)
            """, [_r(8, 3, 128, 128)], "[3, 4, 32]"),
        _net(3, "ConvNeXtBlock", """
            class Model(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
                    self.norm = nn.LayerNorm(dim)
                    self.fc1 = nn.Linear(dim, 4 * dim)
                    self.fc2 = nn.Linear(4 * dim, dim)
                    self.gamma = nn.Parameter(torch.full((dim,), 1e-6))

                def forward(self, x):
                    y = self.dw(x).permute(0, 2, 3, 1)
                    y = self.fc2(F.gelu(self.fc1(self.norm(y)))) * self.gamma
                    return x + y.permute(0, 3, 1, 2)
            """, [_r(16, 96, 56, 56)], "[96]", proto=True),
        _net(3, "EfficientNetMBConv", """
            class Model(nn.Module):
                def __init__(self, c_in, c_out, expand, se_ratio):
                    super().__init__()
                    hidden = c_in * expand
                    self.expand = nn.Sequential(nn.Conv2d(c_in, hidden, 1, bias=False),
                                                nn.BatchNorm2d(hidden), nn.SiLU())
                    self.dw = nn.Sequential(
                        nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
                        nn.BatchNorm2d(hidden), nn.SiLU(),
                    )
                    squeezed = max(1, int(c_in * se_ratio))
                    self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(hidden, squeezed, 1),
                                            nn.SiLU(), nn.Conv2d(squeezed, hidden, 1), nn.Sigmoid())
                    self.project = nn.Sequential(nn.Conv2d(hidden, c_out, 1, bias=False),
                                                 nn.BatchNorm2d(c_out))

                def forward(self, x):
                    y = self.dw(self.expand(x))
                    return x + self.project(y * self.se(y))
            """, [_r(10, 112, 56, 56)], "[112, 112, 6, 0.25]"),
        _net(3, "VisionTransformer", """
            class Model(nn.Module):
                def __init__(self, image, patch, dim, depth, heads, num_classes):
                    super().__init__()
                    self.embed = nn.Conv2d(3, dim, patch, stride=patch)
                    tokens = (image // patch) ** 2 + 1
                    self.cls = nn.Parameter(torch.zeros(1, 1, dim))
                    self.pos = nn.Parameter(torch.zeros(1, tokens, dim))
                    layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0,
                                                       batch_first=True, norm_first=True)
                    self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
                    self.head = nn.Linear(dim, num_classes)

                def forward(self, x):
                    x = self.embed(x).flatten(2).transpose(1, 2)
                    x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
                    return self.head(self.encoder(x)[:, 0])
            """, [_r(10, 3, 224, 224)], "[224, 16, 384, 6, 6, 1000]"),
        _net(3, "TransformerEncoderLayer", """
            class Model(nn.Module):
                def __init__(self, dim, heads):
                    super().__init__()
                    self.layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0,
                                                            batch_first=True)

                def forward(self, x):
                    return self.layer(x)
            """, [_r(16, 512, 512)], "[512, 8]", proto=True),
        _file(3, "mini_gpt_block", _EXAMPLE, quick=True),
        # (vocab, width, layers, heads, kv heads, MLP width, SwiGLU, tied head, context)
        _file(3, "GPT_4_layers", _MODELS / "gpt.py", ["torch.randint(0, 50257, (8, 1024))"],
              "[50257, 768, 4, 12, 12, 3072, False, False, 1024]"),
        _file(3, "GPT_tiny", _MODELS / "gpt.py", ["torch.randint(0, 4096, (4, 256))"],
              "[4096, 256, 4, 4, 4, 1024, False, False, 256]", proto=True),
        _net(3, "MinGPTCausalAttention", _MIN_GPT_ATTENTION, [_r(16, 512, 768)],
             "[768, 12, 512]", proto=True),
        _rnn("LSTM", "lstm", 6, False, True, True),
        _rnn("LSTMBidirectional", "lstm", 6, True, True, True),
        _rnn("LSTM_single_layer", "lstm", 1, False, True, True, proto=True),
        _rnn("GRU", "gru", 6, False, False, False),
        _rnn("GRUBidirectional", "gru", 6, True, False, False, quick=True),
        _rnn("GRU_batch_first_head", "gru", 2, False, True, True),
        _rnn("VanillaRNN_tanh", "rnn", 2, False, True, True),
        _net(3, "LSTMCell_loop", """
            class Model(nn.Module):
                def __init__(self, input_size, hidden_size, steps):
                    super().__init__()
                    self.cell = nn.LSTMCell(input_size, hidden_size)
                    self.steps = steps

                def forward(self, x):
                    h = torch.zeros(x.shape[0], self.cell.hidden_size)
                    c = torch.zeros_like(h)
                    for t in range(self.steps):
                        h, c = self.cell(x[:, t], (h, c))
                    return h
            """, [_r(10, 64, 128)], "[128, 256, 64]"),
        _net(3, "VanillaRNNCell_manual", """
            class Model(nn.Module):
                def __init__(self, input_size, hidden_size, output_size):
                    super().__init__()
                    self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
                    self.h2o = nn.Linear(hidden_size, output_size)
                    self.hidden = torch.randn(8, hidden_size)

                def forward(self, x):
                    self.hidden = torch.tanh(self.i2h(torch.cat((x, self.hidden), dim=1)))
                    return self.h2o(self.hidden)
            """, [_r(8, 1024)], "[1024, 256, 128]", proto=True),
    ]


# --- The suite ------------------------------------------------------------------------------


def problems() -> list[Spec]:
    """Every generated problem, level by level."""
    return (
        _matmuls() + _convs() + _activations() + _reductions() + _norms() + _pools()
        + _attention() + _losses() + _misc() + _level2() + _level3()
    )


def write_suite(root: str | Path, *, quick: bool = False) -> list[Path]:
    """Write the suite (or its ``--quick`` subset) under ``root``/levelN/; returns the files.
    Files are numbered per level in KernelBench's ``N_Name.py`` style."""
    root = Path(root)
    written: list[Path] = []
    counters: dict[int, int] = {}
    for spec in problems():
        counters[spec.level] = counters.get(spec.level, 0) + 1
        if quick and not spec.quick:
            continue
        folder = root / f"level{spec.level}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{counters[spec.level]}_{spec.name}.py"
        path.write_text(spec.source, encoding="utf-8")
        written.append(path)
    return written


#: The prototype comparison's problems in ``--quick`` mode: two small ones that run in seconds.
QUICK_PROTO = ("level2/Conv2d_ReLU_BiasAdd", "level3/MLP")


def label(path: Path) -> str:
    """``level2/Conv2d_ReLU_BiasAdd`` for ``.../level2/3_Conv2d_ReLU_BiasAdd.py``."""
    return f"{path.parent.name}/{path.stem.split('_', 1)[1]}"


def proto_subset(paths: list[Path], *, quick: bool = False) -> list[Path]:
    """The written files that the prototype comparison runs: the ``proto`` problems, or
    :data:`QUICK_PROTO` in ``quick`` mode."""
    proto = {f"level{s.level}/{s.name}" for s in problems() if s.proto}
    chosen = set(QUICK_PROTO) if quick else proto
    return [path for path in paths if label(path) in chosen]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python benchmarks/suite.py DIR")
    files = write_suite(sys.argv[1])
    print(f"wrote {len(files)} problems under {sys.argv[1]}")
