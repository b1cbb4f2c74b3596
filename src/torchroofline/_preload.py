"""Imported once by the batch forkserver, so every worker forks with torch and the fake-tensor
machinery already loaded (the first ``FakeTensorMode()`` imports about 1.5 s of torch internals;
paying it once per batch instead of once per worker is the point of long-lived workers)."""

from torch._subclasses.fake_tensor import FakeTensorMode

from .suites import kernelbench  # noqa: F401 — loads the analysis modules

FakeTensorMode()
