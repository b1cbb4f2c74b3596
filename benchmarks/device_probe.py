"""Measure the curves the per-kernel model rests on, on the GPU at hand, next to the model's
estimate of each: a check of the model, never its fit (docs/validation.md).

    python benchmarks/device_probe.py [--gpu h100-sxm] [--out probe.json]

Five curves, each point timed with CUDA events as the median of ``--repeats`` runs after a
warm-up, L2 flushed before each run (a 2× L2-sized buffer is written):

1. bandwidth against size: ``y.copy_(x)`` from 4 KiB to 1 GiB (the small-kernel ramp);
2. GEMMs at aligned and odd shapes: bf16 ``a @ b`` with m = n = k = 4096, 4095, 4093, and
   batched ``bmm`` whose leading dimension is odd (the ``align1`` kernels);
3. softmax row lengths: bf16 rows of 1,024 to 65,536 elements, multiples of 8 and odd ones
   (one pass on chip against three passes; 3,137 and 9,217 on either side of the rows current
   PyTorch keeps in registers, ``cunn_SoftMaxForwardReg``);
4. host copies: 64 MiB host→device and device→host, pinned and pageable;
5. transposing copies: ``x.permute(…).contiguous()`` whose source is strided along the walked
   dim (each lane a 32-byte sector of its own, ``eager_kernels.sector_shares``) or keeps its
   innermost dim contiguous.

Prints one table per curve (measured µs, the model's estimate µs, estimate / measured) and
writes them all as JSON with ``--out``. Needs a CUDA or ROCm GPU; not run by tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable

import torch

from torchroofline import analyze
from torchroofline.price.estimate import kernel_gpu_s
from torchroofline.price.estimate_params import DEFAULT_PARAMS
from torchroofline.price.host_copies import as_host_copy


def _flush(buffer: torch.Tensor) -> None:
    buffer.fill_(1)


def timed_us(run: Callable[[], object], flush: torch.Tensor, repeats: int) -> float:
    """Median GPU time of ``run`` (µs) over ``repeats`` runs, L2 flushed before each."""
    run()
    times = []
    for _ in range(repeats):
        _flush(flush)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


class Fn(torch.nn.Module):
    def __init__(self, fn: Callable) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.fn(*args)


def model_us(fn: Callable, args: tuple[torch.Tensor, ...], gpu: str) -> float:
    """The model's eager GPU estimate (µs) of ``fn(*args)`` on ``gpu``, cold L2."""
    meta = tuple(torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")
                 for a in args)
    result = analyze(Fn(fn), meta, gpu, "fp32", cache="cold")
    return result.performance.eager.gpu_busy_s * 1e6


def host_copy_model_us(size: int, gpu: str, pageable: bool) -> float:
    x = torch.empty(size // 4, device="meta")
    result = analyze(Fn(lambda t: t.clone()), (x,), gpu, "fp32", cache="cold")
    performance = result.performance
    on_gpu = DEFAULT_PARAMS.for_gpu(result.gpu)
    return sum(kernel_gpu_s(as_host_copy(load, pageable), result.gpu, on_gpu, "cold")
               for load in performance.program.eager) * 1e6


def probe(gpu: str, repeats: int) -> dict[str, list[dict]]:
    device = torch.device("cuda")
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4 + 1,
                        device=device)
    curves: dict[str, list[dict]] = {"bandwidth": [], "gemm": [], "softmax": [], "host": [],
                                     "transpose": []}

    def point(curve: str, label: str, fn: Callable, args: tuple) -> None:
        measured = timed_us(lambda: fn(*args), flush, repeats)
        estimate = model_us(fn, args, gpu)
        curves[curve].append({"case": label, "measured_us": measured, "estimate_us": estimate,
                              "ratio": estimate / measured})

    for power in range(12, 31, 2):
        x = torch.empty(2**power // 4, device=device)
        y = torch.empty_like(x)
        point("bandwidth", f"copy {2**power:,} B", lambda a, b: b.copy_(a), (x, y))
    for size in (4096, 4095, 4093):
        a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
        point("gemm", f"mm {size}³ bf16", torch.mm, (a, a))
    for lead in (4096, 4097):
        a = torch.randn(16, lead, 1024, device=device, dtype=torch.bfloat16)
        b = torch.randn(16, 1024, lead, device=device, dtype=torch.bfloat16)
        point("gemm", f"bmm 16×{lead}×1024×{lead} bf16", torch.bmm, (a, b))
    for length in (1024, 3137, 4096, 5185, 8192, 9217, 16384, 16385, 65536):
        x = torch.randn(16 * 1024 * 1024 // length, length, device=device, dtype=torch.bfloat16)
        point("softmax", f"softmax rows of {length}", lambda t: torch.softmax(t, -1), (x,))
    for shape, order, dtype in (((8, 12, 3137, 64), (0, 1, 3, 2), torch.bfloat16),
                                ((3136, 12, 8, 64), (0, 1, 3, 2), torch.bfloat16),
                                ((8, 12, 3137, 64), (0, 2, 1, 3), torch.bfloat16),
                                ((4096, 4096), (1, 0), torch.float32)):
        x = torch.randn(*shape, device=device, dtype=dtype)
        point("transpose", f"{tuple(shape)} permuted {order}",
              lambda t, o=order: t.permute(*o).contiguous(), (x,))
    size = 64 * 2**20
    for pinned in (True, False):
        host = torch.empty(size // 4, pin_memory=pinned)
        on_device = torch.empty(size // 4, device=device)
        copies = (
            ("host→device", lambda h=host, d=on_device, p=pinned: d.copy_(h, non_blocking=p)),
            ("device→host", lambda h=host, d=on_device, p=pinned: h.copy_(d, non_blocking=p)),
        )
        for label, fn in copies:
            measured = timed_us(fn, flush, repeats)
            estimate = host_copy_model_us(size, gpu, pageable=not pinned)
            curves["host"].append({
                "case": f"{label} 64 MiB {'pinned' if pinned else 'pageable'}",
                "measured_us": measured, "estimate_us": estimate, "ratio": estimate / measured,
            })
    return curves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", help="the GPU to price on (default: the one present)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", help="write the figures here as JSON")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("device_probe needs a CUDA or ROCm GPU")
    gpu = args.gpu or torch.cuda.get_device_name(0)
    curves = probe(gpu, args.repeats)
    for curve, points in curves.items():
        print(f"\n{curve} ({gpu})\n| case | measured µs | estimate µs | estimate / measured |")
        print("|---|---|---|---|")
        for p in points:
            print(f"| {p['case']} | {p['measured_us']:,.1f} | {p['estimate_us']:,.1f} "
                  f"| {p['ratio']:.2f} |")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump({"gpu": gpu, "curves": curves}, handle, indent=2)


if __name__ == "__main__":
    main()
