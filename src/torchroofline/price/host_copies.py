"""Host↔device copies: bytes over the GPU's host link (PCIe generation and width, or
NVLink-C2C) at ``EstimateParams.host_copy_fraction`` of its rate, no faster than the driver's
staging rate where the host side is pageable (``pageable_copy_bytes_per_s``), plus the copy
engine's fill latency (:func:`host_copy_s`). A copy reads each byte once and writes it once, so
half the bytes a copy kernel moves cross the link (:func:`as_host_copy`). Bytes, bytes/s,
seconds.
"""


from __future__ import annotations

from dataclasses import replace

from .estimate_params import EstimateParams
from .hardware import GPUSpec
from .kernel_load import KernelLoad

#: The host link assumed for a GPU whose entry names none: PCIe 4.0 x16 (bytes/s).
DEFAULT_HOST_LINK_BYTES_PER_S = 16e9 / 8 * 128 / 130 * 16


def host_copy_s(load: KernelLoad, gpu: GPUSpec, params: EstimateParams) -> float:
    """A host↔device copy: its bytes at the achievable share of the host link (PCIe generation
    and width, or NVLink-C2C), no faster than the driver's staging rate where the host side is
    pageable, plus the fill latency of the copy engine."""
    link = gpu.host_link_bytes_per_s or DEFAULT_HOST_LINK_BYTES_PER_S
    rate = params.host_copy_fraction * link
    if load.pageable:
        rate = min(rate, params.pageable_copy_bytes_per_s)
    return load.host_bytes / rate + params.fill_latency_s


def as_host_copy(load: KernelLoad, pageable: bool) -> KernelLoad:
    """A copy kernel's load as a copy between host and GPU: a copy reads each byte once and
    writes it once, so half the bytes it moves cross the host link."""
    return replace(load, family=HOST_COPY_FAMILY, host_bytes=load.bytes // 2, pageable=pageable)


#: The family of a host↔device copy (:func:`host_copy_s`).
HOST_COPY_FAMILY = "host_copy"
