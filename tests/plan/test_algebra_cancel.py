"""Terms of a linear segment that cancel (plan/algebra/contraction.py): a sum whose terms add
to nothing over the reals is 0, whatever spelling made it, so the bound computes none of them
(x − x = 0, for terms that are no one value the program holds twice). A cancellation needs
the same values: a relu between, another operand or a value changed in place keeps the work."""

from __future__ import annotations

import functools
import operator

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tensor_network import _always_fire, _forced_replacements  # noqa: F401 (a fixture)

from conftest import Fn, analyze, meta

N = 4096
PRODUCT = 2 * N**3  #: one N × N by N × N product


@pytest.mark.parametrize("forward", [
    lambda a, b, c: a @ b + a @ c - a @ (b + c),
    lambda a, b, c: (a + b) @ c - a @ c - b @ c,
    lambda a, b, c: a @ (2 * b) - (2 * a) @ b,
    lambda a, b, c: (a @ b).T - b.T @ a.T + 0 * c,
], ids=["distributed", "sum-of-operands", "scalar-moved", "transposed"])
def test_terms_that_cancel_compute_nothing(forward) -> None:
    # each is 0 over the reals: a·b + a·c − a·(b + c) = 0 (and so on); a kernel writes zeros
    # (N² floats, 64 MiB) and computes no product (it charged the three products as written)
    result = analyze(Fn(forward), *(meta(N, N) for _ in range(3)))
    assert result.tensor_flops == 0
    assert result.compulsory_bytes == 4 * N * N
    assert any(s.rule == "x − x = 0" for s in result.rewrites)


def _eye(a: torch.Tensor) -> torch.Tensor:
    return torch.eye(a.shape[0], dtype=a.dtype)


@pytest.mark.parametrize(("forward", "products"), [
    # (I − W)·X + W·X = X − W·X + W·X = X: no product. An ``eye`` made its two labels one for
    # the whole network, so beside other terms it was no network at all (2 products charged)
    (lambda x, w, y: (_eye(x) - w) @ x + w @ x, 0),
    (lambda x, w, y: (_eye(x) + w) @ x - x, 1),  # W·X
    (lambda x, w, y: x @ (_eye(x) - w) + x @ w, 0),  # I on the right
    (lambda x, w, y: (_eye(x) - w) @ x + w @ y, 1),  # X + W·(Y − X)
    # relu(W) is no W: X + (W − relu(W))·X, one product
    (lambda x, w, y: (_eye(x) - torch.relu(w)) @ x + w @ x, 1),
], ids=["I-W", "I+W-minus", "right", "other-operand", "relu"])
def test_an_identity_beside_other_terms_is_summed_out_of_its_own(forward, products: int) -> None:
    result = analyze(Fn(forward), *(meta(N, N) for _ in range(3)))
    assert result.tensor_flops == products * PRODUCT


def _changed_between(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    first = a @ b + a @ c
    b.mul_(2)
    return first - a @ (b + c)


@pytest.mark.parametrize(("forward", "products"), [
    # a·b + a·c − a·(relu(b) + c) = a·(b − relu(b)): one product, relu(b) is not b
    (lambda a, b, c: a @ b + a @ c - a @ (torch.relu(b) + c), 1),
    (lambda a, b, c: a @ b + a @ c - a @ (b + 2 * c), 1),  # −a·c is left
    (lambda a, b, c: a @ b + c @ a - a @ (b + c), 2),  # c·a is no a·c: a·(b − b − c) + c·a
], ids=["relu", "other-coefficient", "other-side"])
def test_terms_that_do_not_cancel_keep_their_products(forward, products: int) -> None:
    # the fewest products of what is left (hand counted); never 0
    result = analyze(Fn(forward), *(meta(N, N) for _ in range(3)))
    assert result.tensor_flops == products * PRODUCT


def _divided_between(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    first = a @ b
    a.div_(4)
    return first - 4 * (a @ b) + 0 * c


def _shifted_between(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    first = a @ b + a @ c
    b.add_(1)
    return first - a @ (b + c)


@pytest.mark.parametrize(("forward", "products"), [
    # b doubled in place between (b = b'/2, b' what b holds at the end): a·b + a·c −
    # a·(b' + c) = a·b'/2 − a·b' = −a·b'/2, one product (it charged two: b' was another value)
    (_changed_between, 1),
    # a quartered (a = 4a'): 4a'·b − 4·a'·b = 0
    (_divided_between, 0),
], ids=["doubled", "divided"])
def test_a_value_scaled_in_place_between_is_its_new_value_scaled(forward, products) -> None:
    result = analyze(Fn(forward), *(meta(N, N) for _ in range(3)))
    assert result.tensor_flops == products * PRODUCT


def test_a_value_shifted_in_place_between_is_another_value() -> None:
    # b + 1 is no scale of b: a·b (computed before the change, or a·(b + c)) and a·b' stay, two
    # products at least and the three written at most (read as a scale, b' = b, they cancel)
    result = analyze(Fn(_shifted_between), *(meta(N, N) for _ in range(3)))
    assert 2 * PRODUCT <= result.tensor_flops <= 3 * PRODUCT


@pytest.mark.usefixtures("_always_fire")
@pytest.mark.parametrize("forward", [_changed_between, _divided_between])
def test_a_value_scaled_in_place_between_computes_the_value(forward) -> None:
    # float64: the replacement reads the scaled values the program holds at its root
    inputs = tuple(torch.randn(5, 5, dtype=torch.float64) for _ in range(3))
    expected = Fn(forward)(*(x.clone() for x in inputs))
    found = _forced_replacements(Fn(forward), inputs)
    assert found
    for _, replaced in found:
        assert torch.allclose(replaced, expected, atol=1e-9)


@pytest.mark.usefixtures("_always_fire")
@pytest.mark.parametrize("forward", [
    lambda a, b, c: a @ b + a @ c - a @ (b + c),
    lambda x, w, c: (_eye(x) - w) @ x + w @ x,
    lambda x, w, c: (2 * _eye(x) + w) @ x - x,
    lambda x, w, c: (x @ (_eye(x) + w)).sum(0) + (x @ _eye(x)).sum() * w[0],
], ids=["zero", "identity", "scaled-identity", "summed-identity"])
def test_the_cancelled_sum_is_its_value(forward) -> None:
    # float64 values: the replacement equals the program up to rounding (0 for the first;
    # X, X + W·X and the column sums beside tr(X)·w₀ for the identities summed out)
    model = Fn(forward)
    inputs = tuple(torch.randn(5, 5, dtype=torch.float64) for _ in range(3))
    found = _forced_replacements(model, inputs)
    assert found
    for _, replaced in found:
        assert torch.allclose(replaced, model(*inputs), atol=1e-9)


def _respelled(chains: list[tuple[int, ...]], coeffs: list[int], bump: int) -> Fn:
    """Σᵢ cᵢ·chainᵢ minus the same sum spelled otherwise (the terms in reverse order, each
    coefficient moved onto the chain's first factor), its first coefficient raised by ``bump``."""
    def body(*pool: torch.Tensor) -> torch.Tensor:
        def chain(positions: tuple[int, ...], first: torch.Tensor) -> torch.Tensor:
            return functools.reduce(operator.matmul, (pool[i] for i in positions[1:]), first)

        written = [c * chain(p, pool[p[0]]) for p, c in zip(chains, coeffs, strict=True)]
        moved = [chain(p, (c + (bump if n == 0 else 0)) * pool[p[0]])
                 for n, (p, c) in enumerate(zip(chains, coeffs, strict=True))][::-1]
        return functools.reduce(operator.add, written) - functools.reduce(operator.add, moved)

    return Fn(body)


_SUMS = st.lists(st.lists(st.integers(0, 2), min_size=2, max_size=3).map(tuple),
                 min_size=1, max_size=3, unique=True)


@settings(max_examples=15, deadline=None)
@given(_SUMS, st.lists(st.sampled_from([1, 2, -1, -3]), min_size=3, max_size=3))
def test_a_sum_minus_itself_respelled_is_zero_and_a_changed_one_is_not(
    chains: list[tuple[int, ...]], coeffs: list[int]
) -> None:
    # the difference is 0 over the reals: no product charged; with one coefficient changed it
    # is that chain (times the change) at least: one product or more, never 0
    coeffs = coeffs[:len(chains)]
    zero = analyze(_respelled(chains, coeffs, 0), *(meta(64, 64) for _ in range(3)))
    assert zero.tensor_flops == 0
    changed = analyze(_respelled(chains, coeffs, 1), *(meta(64, 64) for _ in range(3)))
    assert changed.tensor_flops >= 2 * 64**3


@pytest.mark.usefixtures("_always_fire")
@settings(max_examples=10, deadline=None)
@given(_SUMS, st.lists(st.sampled_from([1, 2, -1, -3]), min_size=3, max_size=3),
       st.sampled_from([0, 1]))
def test_a_respelled_difference_computes_its_value(
    chains: list[tuple[int, ...]], coeffs: list[int], bump: int
) -> None:
    # every replacement (forced) equals the program on float64 values
    model = _respelled(chains, coeffs[:len(chains)], bump)
    inputs = tuple(torch.randn(5, 5, dtype=torch.float64) for _ in range(3))
    for _, replaced in _forced_replacements(model, inputs):
        assert torch.allclose(replaced, model(*inputs), atol=1e-9)
