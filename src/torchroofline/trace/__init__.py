"""Stage 1, trace: a model and its inputs in, a :class:`~.tracer.Trace` out.

The model runs once on fake tensors (no data); every aten op is recorded with its tensors as
:class:`~.tracer.TensorRef` (shape, strides, dtype, storage). ``training`` traces a whole step
(loss, backward, optimizer); ``seeded`` makes a problem's seeded inputs, the big ones as shapes
only; ``regions`` holds the sets of tensor elements (index boxes) later stages reason with.
Nothing here prices or plans.
"""
