"""Shape-only big tensors under KernelBench's seed (:mod:`torchroofline.trace.seeded`): the small
tensors made after them must be exactly the ones the real construction makes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from torchroofline.trace.seeded import (
    REPLAYABLE_DRAWS,
    ShapeOnlyDraws,
    ShapeOnlyError,
    _chunk_sizes,
)

aten = torch.ops.aten

#: one draw per registered op, made over ``n`` elements of ``dtype``
DRAWS: dict[object, Callable[[int, torch.dtype], torch.Tensor]] = {
    aten.randn: lambda n, d: torch.randn(n, dtype=d),
    aten.rand: lambda n, d: torch.rand(n, dtype=d),
    aten.randint: lambda n, d: torch.randint(0, 1000, (n,)),
    aten.randn_like: lambda n, d: torch.randn_like(torch.empty(n, dtype=d)),
    aten.rand_like: lambda n, d: torch.rand_like(torch.empty(n, dtype=d)),
    aten.randint_like: lambda n, d: torch.randint_like(torch.empty(n, dtype=d), 50),
    aten.normal_: lambda n, d: torch.empty(n, dtype=d).normal_(0.5, 0.02),
    aten.uniform_: lambda n, d: torch.empty(n, dtype=d).uniform_(-1, 1),
    aten.random_: lambda n, d: torch.empty(n, dtype=d).random_(0, 7),
    aten.bernoulli_: lambda n, d: torch.empty(n, dtype=d).bernoulli_(0.3),
    aten.exponential_: lambda n, d: torch.empty(n, dtype=d).exponential_(),
    aten.cauchy_: lambda n, d: torch.empty(n, dtype=d).cauchy_(),
    aten.log_normal_: lambda n, d: torch.empty(n, dtype=d).log_normal_(),
    aten.geometric_: lambda n, d: torch.empty(n, dtype=d).geometric_(0.2),
}


def test_every_replayable_draw_has_a_case() -> None:
    assert set(DRAWS) == set(REPLAYABLE_DRAWS)


@pytest.mark.parametrize("chunk", [32, 48, 4096])
@pytest.mark.parametrize("elements", [15, 16, 17, 100, 4096 * 3 + 5, 100_003])
def test_chunks_replay_as_one_call(elements: int, chunk: int) -> None:
    sizes = list(_chunk_sizes(elements, chunk))
    assert sum(sizes) == elements
    assert all(size % 16 == 0 for size in sizes[:-1])
    assert sizes[-1] >= min(16, elements)


@pytest.mark.parametrize("op", list(DRAWS), ids=lambda op: str(op).split(".")[-1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_a_small_draw_after_a_shape_only_one_is_the_real_one(
    op: object, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a big draw (shape only: 100,003 elements, replayed in chunks of 4,096, whose last is
    # not a multiple of 16) followed by a small one: the small one must hold the values the
    # real sequence draws, so the generator moved by exactly the big draw's consumption
    monkeypatch.setattr("torchroofline.trace.seeded.ADVANCE_CHUNK_ELEMENTS", 4096)
    make = DRAWS[op]

    def construct() -> tuple[torch.Tensor, torch.Tensor]:
        return make(100_003, dtype), torch.randn(5)

    torch.manual_seed(42)
    _, real_small = construct()
    real_state = torch.random.get_rng_state()
    torch.manual_seed(42)
    with ShapeOnlyDraws(tensor_limit_bytes=1024, total_limit_bytes=2**20):
        big, small = construct()
    assert big.is_meta and not small.is_meta
    assert torch.equal(small, real_small)
    assert torch.equal(torch.random.get_rng_state(), real_state)


def test_a_draw_with_nothing_after_it_is_not_replayed() -> None:
    torch.manual_seed(0)
    before = torch.random.get_rng_state()
    mode = ShapeOnlyDraws(tensor_limit_bytes=1024, total_limit_bytes=2**20)
    with mode:
        big = torch.randn(10**12)  # 4 TB: made as a shape
    assert big.shape == (10**12,) and big.is_meta
    assert len(mode.owed) == 1
    assert torch.equal(torch.random.get_rng_state(), before)


def test_values_computed_from_a_shape_only_tensor_are_shape_only() -> None:
    with ShapeOnlyDraws(tensor_limit_bytes=1024, total_limit_bytes=2**20):
        big = torch.randn(1000, 1000)
        picked = big[:2].argmax(-1)  # small, but its values come from unknown data
        index = torch.randint(0, 1000, (8,))
    assert picked.is_meta and not index.is_meta


def test_the_total_limit_makes_later_tensors_shape_only() -> None:
    # 4,000 B each, 10,000 B in all: the first two are real, the third would pass the total
    with ShapeOnlyDraws(tensor_limit_bytes=4096, total_limit_bytes=10_000):
        made = [torch.randn(1000) for _ in range(3)]
    assert [t.is_meta for t in made] == [False, False, True]


def test_an_in_place_fill_spends_none_of_the_total() -> None:
    # Linear(32, 32) makes its weight with empty (4,096 B), then fills it with uniform_ in
    # place: only the empty spends the total. 10,000 B: two weights real, the third a shape —
    # its fill too; counting the fill as a new tensor wrote a real weight from a shape-only
    # draw (ShapeOnlyError: a MoE of many experts could not be built)
    with ShapeOnlyDraws(tensor_limit_bytes=4096, total_limit_bytes=10_000):
        made = [torch.nn.Linear(32, 32, bias=False).weight for _ in range(3)]
    assert [t.is_meta for t in made] == [False, False, True]


def test_a_real_tensor_written_from_a_shape_only_one_is_refused() -> None:
    with pytest.raises(ShapeOnlyError, match="writes a real tensor"), ShapeOnlyDraws(
        tensor_limit_bytes=1024, total_limit_bytes=2**20
    ):
        small = torch.zeros(4)
        small.add_(torch.randn(1000, 1000)[0, :4])


def test_a_draw_that_cannot_be_replayed_is_refused() -> None:
    with pytest.raises(ShapeOnlyError, match="cannot be replayed"), ShapeOnlyDraws(
        tensor_limit_bytes=1024, total_limit_bytes=2**20
    ):
        torch.randperm(10_000)


@pytest.mark.parametrize("seed", [42, 7])
def test_a_reseed_voids_the_draws_owed_before_it(seed: int) -> None:
    # KernelBench seeds before get_init_inputs() and again before the model: a big draw
    # made before the second seed must not move the generator after it, whether the seed
    # is set through the mode (the same seed again: the state shows no change) or behind it
    torch.manual_seed(42)
    torch.randn(100_000)
    torch.manual_seed(seed)
    real_small = torch.randn(5)
    torch.manual_seed(42)
    with ShapeOnlyDraws(tensor_limit_bytes=1024, total_limit_bytes=2**20) as draws:
        torch.randn(100_000)
        if seed == 42:
            draws.manual_seed(seed)
        else:
            torch.manual_seed(seed)
        small = torch.randn(5)
    assert torch.equal(small, real_small)


def test_a_draw_from_an_explicit_generator_is_refused() -> None:
    generator = torch.Generator().manual_seed(0)
    with pytest.raises(ShapeOnlyError, match="cannot be replayed"), ShapeOnlyDraws(
        tensor_limit_bytes=1024, total_limit_bytes=2**20
    ):
        torch.randn(100_000, generator=generator)
