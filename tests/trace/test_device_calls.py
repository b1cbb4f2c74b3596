"""A forward that moves tensors to the GPU or calls torch.cuda's host functions analyses on a
machine without a CUDA device (CI, a laptop) as it would with one: the moves make no kernel."""

from __future__ import annotations

import pytest
import torch

from conftest import Fn, meta
from torchroofline import analyze

FP32 = 4

# each program is y = x·2 with a device call around it: 4 multiplies of a 4-element x, x read
# and y written once (8 elements · 4 B = 32 B), as for the program without the call
MOVES = {
    "x.cuda()": lambda x: x.cuda() * 2,
    "x.cuda(0)": lambda x: x.cuda(0) * 2,
    "x.to('cuda')": lambda x: x.to("cuda") * 2,
    "x.to('cuda:0')": lambda x: x.to("cuda:0") * 2,
    "x.to(0)": lambda x: x.to(0) * 2,
    "x.to(device='cuda')": lambda x: x.to(device="cuda") * 2,
    "x.to(x)": lambda x: x.to(x) * 2,
    "synchronize": lambda x: (torch.cuda.synchronize(), x * 2)[1],
    "current_device": lambda x: x.to(torch.cuda.current_device()) * 2,
    "empty_cache": lambda x: (torch.cuda.empty_cache(), x * 2)[1],
}


@pytest.mark.parametrize("name", MOVES)
@pytest.mark.parametrize("real", [False, True], ids=["meta", "real"])
def test_a_move_to_the_gpu_makes_no_kernel(name: str, real: bool) -> None:
    x = torch.randn(4) if real else meta(4)
    result = analyze(Fn(MOVES[name]), (x,), "h100-sxm")
    assert (result.flops, result.compulsory_bytes) == (4, 2 * 4 * FP32)


def test_a_move_with_a_dtype_converts() -> None:
    # x.to("cuda", torch.float16) · 2: the conversion is a pointwise op, the product in fp16
    # (2-byte output); same figures as x.half() · 2
    moved = analyze(Fn(lambda x: x.to("cuda", torch.float16) * 2), (meta(4),), "h100-sxm")
    halved = analyze(Fn(lambda x: x.half() * 2), (meta(4),), "h100-sxm")
    assert moved.compulsory_bytes == halved.compulsory_bytes == 4 * FP32 + 4 * 2
    assert moved.flops == halved.flops


def test_the_host_calls_are_torch_s_own_after_the_analysis() -> None:
    originals = (torch.cuda.synchronize, torch.cuda.current_device, torch.cuda.set_device,
                 torch.cuda.empty_cache)
    analyze(Fn(MOVES["synchronize"]), (meta(4),), "h100-sxm")
    assert (torch.cuda.synchronize, torch.cuda.current_device, torch.cuda.set_device,
            torch.cuda.empty_cache) == originals


class _AutocastInside(torch.nn.Module):
    """A Linear under ``torch.autocast("cuda", dtype)`` opened in the forward itself."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(256, 256)
        self.dtype = dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cuda", dtype=self.dtype):
            return self.linear(x)


@pytest.mark.parametrize(("dtype", "name"), [(torch.float16, "fp16"), (torch.bfloat16, "bf16")])
def test_an_autocast_block_in_the_forward_is_on_without_a_gpu(dtype, name) -> None:  # noqa: ANN001
    # without a CUDA device torch.autocast("cuda") turned itself off and the Linear was priced
    # in fp32 (394,240 B: 64·256 in + 256² + 256 weights + 64·256 out, 4 B each); on, its
    # figures are those of autocast=name around the call: the casts' 2-byte copies, the
    # 2-byte output
    inside = analyze(_AutocastInside(dtype), (meta(64, 256),), "h100-sxm")
    around = analyze(torch.nn.Linear(256, 256), (meta(64, 256),), "h100-sxm", autocast=name)
    fp32 = analyze(torch.nn.Linear(256, 256), (meta(64, 256),), "h100-sxm")
    assert fp32.compulsory_bytes == (64 * 256 + 256 * 256 + 256 + 64 * 256) * FP32
    assert inside.compulsory_bytes == around.compulsory_bytes < fp32.compulsory_bytes
    assert inside.tensor_flops == around.tensor_flops == 2 * 64 * 256 * 256


def test_the_amp_check_is_torch_s_own_after_the_analysis() -> None:
    import torch.cuda.amp.common as amp_common

    original = amp_common.amp_definitely_not_available
    analyze(_AutocastInside(torch.float16), (meta(4, 256),), "h100-sxm")
    assert amp_common.amp_definitely_not_available is original
