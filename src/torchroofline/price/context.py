"""What one pricing needs, resolved once: the GPU (at its clocks), the precision, the math rung,
the cache mode, the torch math switches and the performance model's constants.

:func:`PricingContext.resolve` checks and resolves what a user passed (a GPU name, a precision
string) and fails before any tracing; :func:`~.roofline.price` and :mod:`.estimate` then read
the frozen value and never look a GPU up again. ``Result.on`` builds a new context from the old
one with the fields it changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..costs import float_element_bytes
from ..errors import InputError
from .estimate_params import DEFAULT_PARAMS, EstimateParams
from .hardware import GPUSpec, get_gpu
from .precision import MathSwitches, check_math, check_precision

#: ``cold``: every kernel reads its inputs from HBM; ``warm``: what a previous kernel left in L2
#: is free (the bound no kernel in a model may beat).
CACHE_MODES = ("cold", "warm")


@dataclass(frozen=True)
class PricingContext:
    """The resolved inputs of one pricing."""

    gpu: GPUSpec
    #: the program's precision ("fp32", "bf16", …): floating-point tensors' element size
    precision: str
    #: the rung of :data:`.precision.MATH_RUNGS` the speed of light assumes
    math: str
    cache: str
    #: the torch switches fp32 matmul-class work follows (TF32, cuDNN)
    switches: MathSwitches
    estimate_params: EstimateParams

    @classmethod
    def resolve(
        cls,
        gpu: str | GPUSpec,
        precision: str = "fp32",
        cache: str = "cold",
        *,
        math: str = "program",
        switches: MathSwitches | None = None,
        estimate_params: EstimateParams | None = None,
        clock_mhz: float | None = None,
        mem_clock_mhz: float | None = None,
    ) -> PricingContext:
        """Check and resolve everything once (raises our one-line errors on bad input);
        ``switches`` default to torch's as they are now, ``estimate_params`` to the fitted ones,
        the clocks to the datasheet's."""
        if cache not in CACHE_MODES:
            raise InputError(f"cache must be 'cold' or 'warm', got {cache!r}")
        return cls(
            gpu=get_gpu(gpu).at_clocks(clock_mhz, mem_clock_mhz),
            precision=check_precision(precision),
            math=check_math(math),
            cache=cache,
            switches=switches or MathSwitches.current(),
            estimate_params=estimate_params or DEFAULT_PARAMS,
        )

    @property
    def float_bytes(self) -> int:
        """Bytes per floating-point element at :attr:`precision`."""
        return float_element_bytes(self.precision)

    def on(
        self,
        gpu: str | GPUSpec | None = None,
        precision: str | None = None,
        cache: str | None = None,
        estimate_params: EstimateParams | None = None,
        math: str | None = None,
    ) -> PricingContext:
        """This context with the fields given changed (each checked as :meth:`resolve` does);
        the switches stay those read when the analysis ran."""
        return PricingContext.resolve(
            self.gpu if gpu is None else gpu,
            precision or self.precision,
            cache or self.cache,
            math=math or self.math,
            switches=self.switches,
            estimate_params=estimate_params or self.estimate_params,
        )
