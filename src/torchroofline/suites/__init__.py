"""Suites: many problems and measured runs in, one report out.

``kernelbench`` loads KernelBench problem files; ``batch`` analyses many, isolated per problem;
``batch_report`` and ``runs`` hold their results and verdicts; ``validate`` compares estimates
with measured timings. They call the pipeline through :func:`torchroofline.api.analyze`.
"""
