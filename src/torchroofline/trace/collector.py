"""Python's cyclic garbage collector, paused while a trace or an analysis runs.

A trace makes hundreds of thousands of objects (fake tensors, refs, op records) and frees few
before it ends, so collection passes during it rescan them for nothing (15–25 % of an
analysis). Reference counting still frees whatever is dropped.

When the pause ends, every object made during it that is still alive sits in the youngest
generation, and the next allocation would trigger a collection that scans them all once more
(~0.02 ms per traced op). They are instead moved straight to the oldest generation
(``gc.freeze`` then ``gc.unfreeze``: two list splices, no scan). That bypasses the count
CPython keeps of objects promoted since its last full collection, the count that decides when
the next one runs, so the module keeps that count itself and applies CPython's own rule
(``Modules/gcmodule.c``: a full collection once promoted objects exceed a quarter of those
that survived the last one) before the next pause: cyclic garbage made during an analysis
(PyTorch's recursive closures) is freed as soon as CPython would have freed it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: objects moved to the oldest generation since the last full collection
_promoted = 0
#: objects that survived the last full collection this module ran (0: not counted yet)
_long_lived = 0
#: ``gc.get_stats()[2]["collections"]`` when ``_promoted`` was last reset
_full_collections = -1


def _collect_if_due() -> None:
    """CPython's rule for a full collection, applied to the objects this module promoted."""
    global _promoted, _long_lived, _full_collections
    full_collections = gc.get_stats()[2]["collections"]
    if full_collections != _full_collections:  # someone collected: our garbage is gone
        _promoted, _full_collections = 0, full_collections
    if not _promoted:  # nothing to collect yet: no count of the long-lived ones (~30 ms)
        return
    if not _long_lived:
        _long_lived = len(gc.get_objects(generation=2))
    if _promoted > _long_lived // 4:
        gc.collect()
        _promoted, _long_lived = 0, len(gc.get_objects(generation=2))
        _full_collections = gc.get_stats()[2]["collections"]


def _promote_survivors() -> None:
    """Move what the pause left in the young generations to the oldest one without a scan."""
    global _promoted
    young = gc.get_count()[0]
    gc.freeze()
    gc.unfreeze()
    _promoted += young


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The cyclic collector off for the block (nested pauses do nothing). A caller that froze
    objects itself (``gc.freeze`` before forking) keeps them frozen: its pause ends the plain
    way, with the collection the next allocation triggers."""
    if not gc.isenabled():
        yield
        return
    own_freeze = gc.get_freeze_count() == 0
    if own_freeze:
        _collect_if_due()
    gc.disable()
    try:
        yield
    finally:
        if own_freeze:
            _promote_survivors()
        gc.enable()
