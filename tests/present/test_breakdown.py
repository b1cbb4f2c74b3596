"""The per-module roll-up and the unconfirmed GPU figures a result rests on (breakdown.py), and
how the report and JSON show them."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import torchroofline
from torchroofline.errors import InputError
from torchroofline.present.breakdown import TOP_LEVEL, module_costs, unconfirmed_figures
from torchroofline.present.report import format_result


class TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wide = nn.Linear(64, 256, bias=False)
        self.narrow = nn.Linear(256, 32, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.narrow(self.wide(x)) * 2.0


@pytest.fixture(scope="module")
def result() -> torchroofline.Result:
    return torchroofline.analyze(TwoLayers(), torch.empty(128, 64, device="meta"))


def test_each_module_gets_its_own_ops_flops(result):
    costs = {cost.path: cost for cost in module_costs(result)}
    assert set(costs) == {"wide", "narrow", TOP_LEVEL}
    assert costs["wide"].flops == 2 * 128 * 64 * 256  # x @ W.T: 2·M·K·N
    assert costs["narrow"].flops == 2 * 128 * 256 * 32
    assert costs[TOP_LEVEL].flops == 128 * 32  # the final * 2.0, one FLOP per element
    # the wide layer reads x (128×64) and W (256×64) and writes 128×256, fp32; its transpose
    # of W is a view (an op, no bytes)
    assert costs["wide"].bytes == 4 * (128 * 64 + 256 * 64 + 128 * 256)
    assert costs["wide"].ops == 2


def test_the_roll_up_adds_up_to_the_whole(result):
    costs = module_costs(result)
    # the program as written, all of it necessary (the bound itself multiplies the two layers'
    # weights first: docs/algebra.md, so result.flops is less)
    executed = sum(op.total_flops for op in result.ops)
    assert sum(cost.flops for cost in costs) == executed
    assert sum(op.total_flops for op in result.plans.necessary.ops) == executed
    assert sum(cost.bytes for cost in costs) == result.unfused_bytes
    assert sum(cost.ops for cost in costs) == len(result.ops)
    times = [cost.time_ms for cost in costs]
    assert times == sorted(times, reverse=True)
    eager_roofline_ms = sum(max(k.compute_s, k.memory_s) for k in result.eager_kernels) * 1e3
    assert sum(times) == pytest.approx(eager_roofline_ms)


def test_modules_in_json_and_text(result):
    data = result.to_dict()
    assert [m["module"] for m in data["modules"]] == [c.path for c in module_costs(result)]
    assert set(data["modules"][0]) == {"module", "ops", "flops", "bytes", "time_ms"}
    text = format_result(result)
    assert "module" in text and "wide" in text and "narrow" in text


@pytest.mark.parametrize(
    ("gpu", "cache", "expected"),
    [
        ("h100-sxm", "cold", []),  # every figure confirmed
        ("h100-pcie", "cold", ["memory_bandwidth_bytes_per_s"]),  # 2039 vs 2000 GB/s
        # fp32 matmuls run on the CUDA cores: B200's unconfirmed FP32 figure, and its L2 (size
        # and bandwidth) when the cache is warm; its unconfirmed TF32 figure is not used (no
        # attention here)
        ("b200", "warm", ["vector.fp32", "l2_bytes", "l2_bandwidth_bytes_per_s"]),
        ("b200", "cold", ["vector.fp32"]),
    ],
)
def test_unconfirmed_figures_the_bound_rests_on(result, gpu, cache, expected):
    priced = result.on(gpu, cache=cache)
    assert unconfirmed_figures(priced) == expected
    assert priced.to_dict()["unconfirmed_figures"] == expected
    flagged = "Unconfirmed GPU figures used" in format_result(priced)
    assert flagged == bool(expected)


def test_a_derived_tensor_roof_flags_its_table_figure():
    # fp32 SDPA runs as 3xTF32 (a third of the TF32 peak): B200's TF32 figure is unconfirmed
    q = torch.empty(2, 4, 128, 64, device="meta")

    class Attention(nn.Module):
        def forward(self, q: torch.Tensor) -> torch.Tensor:
            return nn.functional.scaled_dot_product_attention(q, q, q)

    priced = torchroofline.analyze(Attention(), q, "b200")
    assert "tensor.tf32" in unconfirmed_figures(priced)


class Layer(TwoLayers):
    def __init__(self) -> None:
        super().__init__()
        self.narrow = nn.Linear(256, 64, bias=False)  # back to the input width: layers stack


def test_depth_sums_a_layer_s_modules():
    layers = nn.Sequential(Layer(), Layer())
    result = torchroofline.analyze(layers, torch.empty(128, 64, device="meta"))
    leaves = {cost.path: cost for cost in module_costs(result)}
    assert {"0.wide", "0.narrow", "1.wide", "1.narrow", "0", "1"} == set(leaves)
    by_layer = {cost.path: cost for cost in module_costs(result, depth=1)}
    assert set(by_layer) == {"0", "1"}
    for layer in ("0", "1"):  # the layer's own forward (the * 2.0) plus its two Linears
        parts = [leaves[layer], leaves[f"{layer}.wide"], leaves[f"{layer}.narrow"]]
        assert by_layer[layer].flops == sum(part.flops for part in parts)
        assert by_layer[layer].bytes == sum(part.bytes for part in parts)
    for depth in (0, -1):  # a cut that keeps no name (or drops the last) is refused
        with pytest.raises(InputError, match=f"depth={depth} keeps no module name"):
            module_costs(result, depth=depth)
