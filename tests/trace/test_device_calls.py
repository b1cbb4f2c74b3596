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
