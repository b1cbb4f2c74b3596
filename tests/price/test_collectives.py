"""Collectives priced from the interconnect against nccl-tests' bus factors, and the two-stream
schedule of a step against hand-placed kernels."""

from __future__ import annotations

import dataclasses

import pytest

from torchroofline.errors import InputError
from torchroofline.price.distributed import (
    KINDS,
    PricedCollective,
    StepKernel,
    collective_estimate_s,
    collective_sol_s,
    comm_sol_s,
    schedule,
)
from torchroofline.price.interconnect import INTERCONNECTS, interconnect_for
from torchroofline.trace.distributed import CollectiveCall, Layout

SIZE = 2**30  #: 1 GiB
H100 = INTERCONNECTS["h100-sxm"]


def _call(kind: str, group: int, nodes: int = 1, size: int = SIZE) -> CollectiveCall:
    return CollectiveCall(index=0, op=kind, kind=kind, size_bytes=size, dtype="bfloat16",
                          group_size=group, nodes=nodes, ranks_per_node=group // nodes,
                          phase="forward", module_path="", itemsize=2)


@pytest.mark.parametrize(("kind", "factor"), [
    # nccl-tests (doc/PERFORMANCE.md): bytes each GPU moves per byte of size
    ("all_gather", 7 / 8), ("reduce_scatter", 7 / 8), ("all_to_all", 7 / 8),
    # NVLink SHARP reduces in the switch: each GPU sends and receives the buffer once
    ("all_reduce", 1.0),
])
def test_bound_inside_an_h100_node(kind: str, factor: float) -> None:
    # 450 GB/s one way: NVLink 4, 900 GB/s both directions
    assert collective_sol_s(_call(kind, 8), H100, 8) == pytest.approx(factor * SIZE / 450e9)


def test_ring_all_reduce_bound_without_a_reducing_switch() -> None:
    # A100's NVSwitch cannot reduce: 2(n-1)/n of the size at 300 GB/s one way
    a100 = INTERCONNECTS["a100-80gb"]
    assert collective_sol_s(_call("all_reduce", 8), a100, 8) == pytest.approx(
        2 * 7 / 8 * SIZE / 300e9)


def test_all_gather_across_nodes() -> None:
    # 64 ranks on 8 nodes: a GPU takes in 63/64 of the size over NVLink and its NIC
    # (450 + 50 GB/s); a node takes in 7/8 of it over its 8 NICs (PXN: 400 GB/s); the larger
    call = _call("all_gather", 64, nodes=8)
    expected = max(63 / 64 * SIZE / 500e9, 7 / 8 * SIZE / 400e9)
    assert collective_sol_s(call, H100, 8) == pytest.approx(expected)


def test_mesh_links_limit_a_small_group() -> None:
    # MI300X: one 64 GB/s xGMI link to each peer, so 4 ranks reach 3 links
    mi300x = INTERCONNECTS["mi300x"]
    assert collective_sol_s(_call("all_gather", 4), mi300x, 8) == pytest.approx(
        3 / 4 * SIZE / (3 * 64e9))


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize(("group", "nodes"), [(2, 1), (8, 1), (16, 2), (64, 8)])
@pytest.mark.parametrize("gpu", sorted(INTERCONNECTS))
def test_the_estimate_never_beats_the_bound(kind: str, group: int, nodes: int, gpu: str
                                            ) -> None:
    net = INTERCONNECTS[gpu]
    for size in (2**10, 2**20, 2**30):
        call = _call(kind, group, nodes, size)
        assert collective_estimate_s(call, net) >= collective_sol_s(call, net, 8) > 0


def test_one_rank_moves_nothing() -> None:
    call = _call("all_reduce", 1)
    assert collective_sol_s(call, H100, 8) == collective_estimate_s(call, H100) == 0


def test_step_bound_adds_what_shares_the_links() -> None:
    # two all-gathers inside a node share the GPU's NVLink: their bytes add
    calls = [PricedCollective(_call("all_gather", 8), 0.0, 0.0)] * 2
    priced = [dataclasses.replace(p, sol_s=collective_sol_s(p.call, H100, 8)) for p in calls]
    assert comm_sol_s(priced, H100, Layout(8, (("dp", 8),))) == pytest.approx(
        2 * 7 / 8 * SIZE / 450e9)


def test_schedule_exposes_what_compute_waits_for() -> None:
    # compute A (1 s) feeds a collective (2 s) that compute C reads; B (1 s) is independent:
    # the collective runs 1..3 beside B (1..2), C waits until 3: 1 s exposed, the step 4 s
    collective = PricedCollective(_call("all_reduce", 8), 0.0, 2.0)
    kernels = [
        StepKernel("A", 1.0, frozenset(), frozenset({1})),
        StepKernel("comm", 2.0, frozenset({1}), frozenset({2}), collective),
        StepKernel("B", 1.0, frozenset(), frozenset({3})),
        StepKernel("wait", 0.0, frozenset({2}), frozenset({4}), passes=True),
        StepKernel("C", 1.0, frozenset({4, 3}), frozenset({5})),
    ]
    placed = {i.name: (i.start_s, i.end_s) for i in schedule(kernels)}
    assert placed == {"A": (0, 1), "comm": (1, 3), "B": (1, 2), "C": (3, 4)}


def test_all_gathers_prefetch_one_ahead() -> None:
    # FSDP2's program order: each block's all-gather (1 s, inputs ready at once), then its
    # compute (5 s) reading it. The second may start once the first is in use (t=1), the third
    # once the second is (t=6): one block ahead, never more
    gather = PricedCollective(_call("all_gather", 8), 0.0, 1.0)
    kernels = []
    for i in range(3):
        kernels += [StepKernel(f"g{i}", 1.0, frozenset(), frozenset({10 + i}), gather),
                    StepKernel(f"c{i}", 5.0, frozenset({10 + i}), frozenset({20 + i}))]
    placed = {i.name: i.start_s for i in schedule(kernels)}
    assert [placed[f"g{i}"] for i in range(3)] == [0, 1, 6]
    assert [placed[f"c{i}"] for i in range(3)] == [1, 6, 11]


def test_a_gpu_without_interconnect_figures() -> None:
    with pytest.raises(InputError, match="no interconnect figures for T4"):
        interconnect_for("t4")
