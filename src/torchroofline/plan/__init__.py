"""Stage 3, plans: a costed trace in, what must be done and how it is scheduled out.

``demand`` walks the ops backwards to the necessary work (the elements and FLOPs any correct
implementation needs); ``fusion`` groups ops into Inductor-style kernels (the fused plan) beside
the eager plan of one kernel per op; ``step_graphs`` does the same per phase of a training step;
``memory`` replays allocations to the peak; ``given`` decides which input values the bound may
rely on. ``plans`` bundles them into :class:`~.plans.Plans`. Nothing here knows a GPU.
"""
