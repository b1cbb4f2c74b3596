"""The bound for the given input values (data="given"): zero structure, data-chosen indices,
routing; and the choice between the two bounds."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from torchroofline import analyze
from torchroofline.errors import InputError
from torchroofline.suites.kernelbench import (
    _seeded_model,
    analyze_file,
    load_problem,
    seeded_inputs,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "given"


@pytest.mark.parametrize(
    "name", ["upper_triangular_matmul.py", "lower_triangular_matmul.py"]
)
def test_triangular_inputs_charge_the_nonzero_products(name: str) -> None:
    # C = triu(A @ B), A and B upper triangular (N × N): C[i, j] = Σ_k A[i, k]·B[k, j] has a
    # nonzero product only for i ≤ k ≤ j, so a kept C[i, j] (i ≤ j) needs j − i + 1 of them and
    # the whole product Σ_{i≤j} (j − i + 1) = Σ_{d=0}^{N−1} (N − d)(d + 1) = N(N+1)(N+2)/6
    # multiply-adds (the lower case, i ≥ k ≥ j, is its mirror image). Reads: the N(N+1)/2
    # nonzeros of each operand, every one of which meets a nonzero of the other.
    n = 48
    given = analyze_file(FIXTURES / name, data="given")
    every = analyze_file(FIXTURES / name, data="any")
    multiply_adds = n * (n + 1) * (n + 2) // 6
    assert given.tensor_flops == 2 * multiply_adds
    assert given.plans.bound_data == "given"
    operands = [r for r in given.plans.necessary.input_refs if r.shape == (n, n)]
    assert sorted(r.elements for r in operands) == [n * (n + 1) // 2] * 2
    assert every.plans.bound_data == "any"
    assert every.tensor_flops > given.tensor_flops
    assert given.time_ms["sol_any_input"] == pytest.approx(every.sol_ms)
    assert "sol_any_input" not in every.time_ms
    assert given.to_dict()["bound_data"] == "given"


def test_problem_default_is_given_within_the_limit_and_any_above() -> None:
    path = FIXTURES / "upper_triangular_matmul.py"
    assert analyze_file(path).plans.bound_data == "given"
    small = analyze_file(path, data_limit_bytes=1024)
    assert small.plans.bound_data == "any"
    assert any("data limit" in note for note in small.notes)
    with pytest.raises(InputError, match="--data-limit"):
        analyze_file(path, data="given", data_limit_bytes=1024)


class _Lookup(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(1000, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table(ids)


def test_embedding_charges_the_distinct_rows_it_looks_up() -> None:
    ids = torch.tensor([[3, 3, 7, 999], [7, 0, 3, 3]])
    result = analyze(_Lookup(), (ids,))  # real inputs: "given" by default
    table = next(r for r in result.plans.necessary.input_refs if r.shape == (1000, 16))
    assert result.plans.bound_data == "given"
    assert table.elements == 4 * 16  # rows 0, 3, 7 and 999
    any_input = analyze(_Lookup(), (ids,), data="any")
    table = next(r for r in any_input.plans.necessary.input_refs if r.shape == (1000, 16))
    assert table.elements == 16  # repeated ids may all pick one row


class _Gather(nn.Module):
    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return x[index] * 2


def test_gather_charges_every_row_with_a_nonzero_gradient() -> None:
    # the oracle's criterion on real data: a source element whose gradient (of the kept
    # output) is nonzero is needed by every correct kernel, so the bound must charge it
    x = torch.randn(50, 8, requires_grad=True)
    index = torch.randint(0, 50, (30,))
    _Gather()(x, index).sum().backward()
    needed = int((x.grad != 0).sum())
    result = analyze(_Gather(), (x.detach(), index))
    source = next(r for r in result.plans.necessary.input_refs if r.shape == (50, 8))
    assert source.elements >= needed
    assert source.elements == index.unique().numel() * 8


def test_moe_charges_every_expert_that_receives_a_token() -> None:
    # tokens T = 6 routed top-k = 2 over E = 16 experts (H = 32, I = 64): each routed
    # (token, expert) pair is one row times the expert's H × I matrix, 2·H·I FLOPs, and each
    # expert with at least one token has its whole matrix read; the router's logits are
    # x @ W_r (2·T·H·E FLOPs) and every logit decides the top-k.
    path = FIXTURES / "moe_topk.py"
    tokens, hidden, inner, experts, top_k = 6, 32, 64, 16, 2
    problem = load_problem(path)
    model = _seeded_model(problem, problem.model_class(*problem.get_init_inputs()), 2**30)
    (x,) = seeded_inputs(problem)
    _, chosen = model.router(x).topk(top_k, dim=-1)
    used = chosen.unique().numel()
    result = analyze_file(path)
    assert result.plans.bound_data == "given"
    weights = next(
        r for r in result.plans.necessary.input_refs if r.shape == (experts, hidden, inner)
    )
    assert weights.elements == used * hidden * inner
    expert_flops = 2 * tokens * top_k * hidden * inner
    assert result.tensor_flops == expert_flops + 2 * tokens * hidden * experts
    assert result.time_ms["sol_any_input"] < result.sol_ms


def test_experts_made_as_shapes_keep_the_bound_of_the_real_model() -> None:
    # a data limit of 16 KiB lets a tensor take 4 KiB: the experts (16·32·64·4 B = 128 KiB)
    # are made as shapes only, the router (16·32·4 B = 2 KiB) and x (6·32·4 B) for real.
    # The experts are drawn first, so the router holds its seeded values only if the
    # generator was moved past them exactly; every routed expert is then charged as when
    # the whole model is real
    path = FIXTURES / "moe_topk.py"
    real = analyze_file(path)
    shapes = analyze_file(path, data_limit_bytes=16 * 2**10)
    assert shapes.plans.bound_data == "given"
    assert shapes.tensor_flops == real.tensor_flops
    assert shapes.sol_ms == real.sol_ms
    assert any("up (131.07 KB) made as shapes only" in note for note in shapes.notes)


def test_given_needs_real_inputs() -> None:
    with pytest.raises(InputError, match="real input tensors"):
        analyze(_Lookup(), (torch.empty(2, 3, dtype=torch.long, device="meta"),), data="given")
    with pytest.raises(InputError, match="'any' or 'given'"):
        analyze(_Lookup(), (torch.tensor([[1]]),), data="some")
    assert analyze(_Lookup(), (torch.tensor([[1]]),), data="any").plans.bound_data == "any"


class _Bags(nn.Module):
    def __init__(self, padding_idx: int | None = None) -> None:
        super().__init__()
        self.bags = nn.EmbeddingBag(1000, 16, mode="sum", padding_idx=padding_idx)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.bags(ids)
        return y[0] * 2, y[1, :4] * 2


class _Routed(nn.Module):
    """Tokens summed into the rows their ids pick, each row then scaled by a weight row."""

    def forward(
        self, x: torch.Tensor, ids: torch.Tensor, table: torch.Tensor
    ) -> torch.Tensor:
        out = torch.zeros(8, x.shape[1], dtype=x.dtype).index_add(0, ids, x)
        return out * table[ids.unique()].sum(0)


class _Fn(nn.Module):
    def __init__(self, function) -> None:  # noqa: ANN001
        super().__init__()
        self.function = function

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.function(*args)


def _scatter_cases() -> dict[str, tuple[nn.Module, tuple, dict]]:
    """Scatters with given indices, keeping part of the output: the program, its inputs and
    the elements charged per (shape, dtype) of the inputs (two index tensors of one shape and
    dtype share an entry)."""
    torch.manual_seed(0)
    index = torch.tensor([[0, 1, 5], [2, 2, 0], [5, 4, 3], [1, 0, 0]])
    distinct = torch.tensor([[0, 1, 5], [2, 3, 0], [5, 4, 3], [1, 0, 2]])
    src = ((4, 3), "float32")
    return {
        # out[:, :2] of x.scatter_add(1, index, src), x (4, 6): the index entries < 2 are 2, 1,
        # 0 and 3 per row: 6 source elements and their 6 index elements; all 8 kept elements of
        # x, which the sums add to (the any-input rule: 1 source element)
        "scatter_add": (
            _Fn(lambda x, i, s: x.scatter_add(1, i, s)[:, :2] * 2),
            (torch.randn(4, 6), index, torch.randn(4, 3)),
            {((4, 6), "float32"): 8, ((4, 3), "int64"): 6, src: 6},
        ),
        # as scatter_add, but include_self=False: the sums replace x where a source lands, at
        # 2 + 1 + 0 + 2 = 5 of the 8 kept positions: 3 elements of x
        "scatter_reduce": (
            _Fn(lambda x, i, s: x.scatter_reduce(1, i, s, "sum", include_self=False)[:, :2] * 2),
            (torch.randn(4, 6), index, torch.randn(4, 3)),
            {((4, 6), "float32"): 3, ((4, 3), "int64"): 6, src: 6},
        ),
        # x.scatter(1, distinct, src)[:, :2]: 2 + 1 + 0 + 2 = 5 sources land on kept
        # positions, each overwriting one of the 8 kept elements of x: 3 of x left to read
        "scatter": (
            _Fn(lambda x, i, s: x.scatter(1, i, s)[:, :2] * 2),
            (torch.randn(4, 6), distinct, torch.randn(4, 3)),
            {((4, 6), "float32"): 3, ((4, 3), "int64"): 5, src: 5},
        ),
        # x[:, [1, 3]] = v (5, 2), keeping rows :3: v's rows :3 (6 elements) overwrite 6 of
        # the 12 kept elements of x; both index elements are read
        "index_put": (
            _Fn(lambda x, c, v: torch.ops.aten.index_put(x, [None, c], v)[:3] * 2),
            (torch.randn(5, 4), torch.tensor([1, 3]), torch.randn(5, 2)),
            {((5, 4), "float32"): 6, ((2,), "int64"): 2, ((5, 2), "float32"): 6},
        ),
        # x[[0, 2, 0], [1, 1, 1]] += v, keeping rows :3: all 3 values land there (two on
        # x[0, 1]), added to all 12 kept elements of x
        "index_put accumulate": (
            _Fn(lambda x, r, c, v: x.index_put((r, c), v, accumulate=True)[:3] * 2),
            (torch.randn(5, 4), torch.tensor([0, 2, 0]), torch.tensor([1, 1, 1]), torch.randn(3)),
            {((5, 4), "float32"): 12, ((3,), "int64"): 3, ((3,), "float32"): 3},
        ),
        # x.masked_scatter(eye(4), s)[:2]: the diagonal's first two positions take s[0], s[1]
        # and leave 8 − 2 kept elements of x (the mask: its 8 kept elements)
        "masked_scatter": (
            _Fn(lambda x, m, s: x.masked_scatter(m, s)[:2] * 2),
            (torch.randn(4, 4), torch.eye(4, dtype=torch.bool), torch.randn(8)),
            {((4, 4), "float32"): 6, ((4, 4), "bool"): 8, ((8,), "float32"): 2},
        ),
        # x.put([11, 0, -9, 5], s)[0], x (3, 4): flat 0 and 3 (-9) are in row 0: s[1], s[2]
        # and their indices, and 4 − 2 elements of x's row 0
        "put": (
            _Fn(lambda x, i, s: x.put(i, s)[0] * 2),
            (torch.randn(3, 4), torch.tensor([11, 0, -9, 5]), torch.randn(4)),
            {((3, 4), "float32"): 2, ((4,), "int64"): 2, ((4,), "float32"): 2},
        ),
        # x.index_fill(1, [0, 3], v)[:, :2], x (4, 5): column 0 is filled (index[0] and the
        # 0-dim value read), 4 elements of x's column 1 kept
        "index_fill": (
            _Fn(lambda x, i, v: x.index_fill(1, i, v)[:, :2] * 2),
            (torch.randn(4, 5), torch.tensor([0, 3]), torch.tensor(2.0)),
            {((4, 5), "float32"): 4, ((2,), "int64"): 1, ((), "float32"): 1},
        ),
    }


@pytest.mark.parametrize("name", list(_scatter_cases()))
def test_scatters_with_given_indices_charge_the_sources_landing_on_kept_outputs(name: str):
    model, inputs, expected = _scatter_cases()[name]
    result = analyze(model, inputs, data="given")
    charged = {(r.shape, r.dtype): r.elements for r in result.plans.necessary.input_refs}
    assert charged == expected


def test_a_scatter_whose_kept_position_two_sources_overwrite_is_charged_one_of_them():
    # x.scatter(1, index, src)[:, :2] with row 3's index [1, 0, 0]: src[3, 1] or src[3, 2]
    # lands on x[3, 0] (unspecified which), so one of them is needed, positioned nowhere; the
    # sources landing alone on kept positions are certain: src[0, 0], src[0, 1] (row 0's 0
    # and 1), src[1, 2] (row 1's 0) and src[3, 0] (row 3's 1). Each source lands on one
    # position only, so no source serves two: 4 + 1 (was 1, the any-input rule)
    model, (x, _, src), _ = _scatter_cases()["scatter"]
    index = torch.tensor([[0, 1, 5], [2, 3, 0], [5, 4, 3], [1, 0, 0]])
    result = analyze(model, (x, index, src), data="given")
    charged = {(r.shape, r.dtype): r.elements for r in result.plans.necessary.input_refs}
    assert charged[(4, 3), "float32"] == 4 + 1


def _given_cases() -> dict[str, tuple[nn.Module, tuple]]:
    torch.manual_seed(0)
    return {
        **{name: case[:2] for name, case in _scatter_cases().items()},
        "triangular matmul": (
            _Fn(lambda a, b: torch.triu(a @ b)),
            (torch.randn(6, 6).triu(), torch.randn(6, 6).triu()),
        ),
        "banded operand": (
            _Fn(lambda a, w: a @ w),
            (torch.randn(5, 7) * (torch.rand(5, 7) > 0.6), torch.randn(7, 4)),
        ),
        "gather": (_Gather(), (torch.randn(20, 3), torch.randint(0, 20, (9,)))),
        "gather of whole rows": (
            _Fn(lambda x, i: x.gather(0, i[:, None].expand(-1, 2))[1:] * 2),
            (torch.randn(20, 3), torch.randint(0, 20, (9,))),
        ),
        "columns picked by a 2-d index": (
            _Fn(lambda x, i: x[:, i][1:, :, 1] * 2),
            (torch.randn(5, 12), torch.tensor([[3, -1], [3, 0], [7, 7]])),
        ),
        "nll loss kept in part": (
            _Fn(lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, reduction="none",
                                        ignore_index=1)[:3] * 2),
            (torch.randn(8, 5), torch.tensor([1, 4, 1, 0, 2, 3, 1, 1])),
        ),
        "padding mask per batch": (
            _Fn(lambda mask, x: torch.where(mask, x, 0.0) * 2),
            (torch.arange(8).expand(2, 1, 8) < torch.tensor([6, 3]).reshape(2, 1, 1),
             torch.randn(2, 8, 8)),
        ),
        "routed rows": (
            _Routed(),
            (torch.randn(6, 4), torch.tensor([1, 5, 5, 2, 1, 7]), torch.randn(8, 4)),
        ),
    }


@pytest.mark.parametrize("name", list(_given_cases()))
def test_given_bound_charges_every_element_the_given_data_proves(name: str) -> None:
    # the dependence oracle on the given values alone (tests/oracle.py, data="given"): an
    # element with a nonzero gradient of the kept outputs there is read by every kernel that is
    # correct for these inputs, so the given bound charges it; and never more than the program
    # touches (every input element once, the outputs once)
    from oracle import oracle

    model, inputs = _given_cases()[name]
    result = analyze(model, inputs, data="given")
    proven = oracle(model, inputs, data="given")
    assert result.plans.bound_data == "given"
    assert result.compulsory_bytes >= proven.bytes(4)
    touched = sum(
        leaf.elements * (4 if leaf.is_float else leaf.itemsize) for leaf in proven.leaves
    ) + proven.output_bytes(4)
    assert result.compulsory_bytes <= touched
    assert result.flops <= sum(op.flops.tensor + op.flops.vector for op in result.ops)


def test_normal_draws_read_only_for_zeros_are_not_made() -> None:
    # get_inputs() returns torch.randn matrices: a normal sample is zero with probability 0,
    # so the matmul's known-operand rule could skip nothing and the inputs are never made
    path = Path(__file__).parents[1] / "fixtures" / "kernelbench" / "level1"
    result = analyze_file(path / "1_Square_matrix_multiplication_.py")
    assert result.plans.bound_data == "given"
    assert result.trace.given == {}
    assert "sol_any_input" not in result.time_ms


class _PagedKeys(nn.Module):
    """Keys read through a page table from a cache too big to number element by element."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(4096, 16, 8, 64), persistent=False)

    def forward(self, table: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bhd,bpthd->bpth", q, self.cache[table])


def test_paged_cache_charges_the_distinct_pages_its_table_names() -> None:
    # pages 3, 9, 100, 7, 2 and -1 (page 4095; 3 and 9 twice): 6 distinct pages of 16·8·64
    table = torch.tensor([[3, 9, 9, 100], [7, 3, 2, -1]])
    result = analyze(_PagedKeys(), (table, torch.randn(2, 8, 64)))
    cache = next(r for r in result.plans.necessary.input_refs if r.shape == (4096, 16, 8, 64))
    assert cache.elements == 6 * 16 * 8 * 64


def test_cli_data_options(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from torchroofline.cli import main

    path = str(FIXTURES / "upper_triangular_matmul.py")
    assert main(["analyze", path, "--data", "any", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bound_data"] == "any"
    assert main(["analyze", path, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["bound_data"] == "given"
    assert document["time_ms"]["sol_any_input"] > document["time_ms"]["sol"]
    assert main(["analyze", path, "--data-limit", "1e-9", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bound_data"] == "any"


def test_dense_real_inputs_need_no_second_walk() -> None:
    # a matmul operand is read for its zeros only; a randn input has none, so the bound for
    # the given values is the one for any values and is walked once
    result = analyze(nn.Linear(8, 4), (torch.randn(3, 8),))
    assert result.plans.bound_data == "given"
    assert result.plans.necessary_any_input is None
    masked = analyze(nn.Linear(8, 4), (torch.randn(3, 8) * (torch.arange(8) < 5),))
    assert masked.plans.necessary_any_input is not None
    assert masked.tensor_flops == 2 * 3 * 5 * 4  # columns 5..7 of x are zero


def test_scattered_zeros_are_no_structure():
    # torch.rand draws an exact 0.0 about once in 2**24 values: a 64×64 operand with one zero
    # (1/4096 of it, under SCATTERED_ZERO_SHARE = 1e-3) is priced dense, 2·64³ FLOPs, with no
    # "known operand values" note; a quarter of zeros (A[:32, :32] = 0) is structure:
    # Σ_k nnz(A[:, k])·nnz(B[k, :]) = 32 k × 32·64 + 32 k × 64·64 = 64³ − 32·32·64 products
    import torchroofline
    from conftest import Fn

    a, b = torch.rand(64, 64) + 0.5, torch.rand(64, 64) + 0.5
    a[0, 0] = 0
    dense = torchroofline.analyze(Fn(torch.mm), (a, b), data="given")
    assert dense.flops == 2 * 64**3 and dense.plans.necessary.structures == ()
    a[:32, :32] = 0
    blocked = torchroofline.analyze(Fn(torch.mm), (a, b), data="given")
    assert blocked.tensor_flops == 2 * (64**3 - 32 * 32 * 64)


def test_overlapping_kept_blocks_count_their_products_once():
    # y = triu(A) @ B, 64 × 64, keeping y[:32] and y[:, :32]: the kept outputs are rows < 32
    # (all columns) and rows ≥ 32 of columns < 32. Row i of triu(A) has 64 − i nonzeros, so
    # products = Σ_{i<32} (64 − i)·64 + Σ_{32≤i<64} (64 − i)·32 = 99,328 + 16,896 = 116,224
    # multiply-adds (the overlap y[:32, :32] was once counted twice: 331,776 FLOPs)
    import torchroofline

    class TwoSlices(nn.Module):
        def forward(self, a, b):
            y = a @ b
            return y[:32].clone(), y[:, :32].clone()

    a, b = torch.triu(torch.rand(64, 64) + 0.5), torch.rand(64, 64) + 0.5
    result = torchroofline.analyze(TwoSlices(), (a, b), data="given")
    rows = sum((64 - i) * 64 for i in range(32)) + sum((64 - i) * 32 for i in range(32, 64))
    assert rows == 116_224
    assert result.tensor_flops == 2 * rows


def test_a_zero_dim_index_is_one_position():
    # torch accepts a 0-dim index for index_select and index_add_; the given-data rules read
    # it as one position (they raised IndexError): index_select(x, 0, tensor(3)) copies row 3,
    # 8 floats read and 8 written, plus the 8-byte index
    import torchroofline
    from conftest import Fn

    x = torch.randn(10, 8)
    result = torchroofline.analyze(
        Fn(lambda x, i: torch.index_select(x, 0, i)), (x, torch.tensor(3)), data="given"
    )
    assert result.compulsory_bytes == 8 * 4 + 8 + 8 * 4
    added = torchroofline.analyze(
        Fn(lambda d, i, s: d.index_add(0, i, s)),
        (torch.zeros(4, 8), torch.tensor(2), torch.randn(1, 8)), data="given",
    )
    # out = d with s[0] added to row 2: all of d (32 floats, row 2 included), the index and
    # s's one row are read, the 4 × 8 output written: (32 + 8 + 32) · 4 + 8 bytes
    assert added.compulsory_bytes == (32 + 8 + 32) * 4 + 8


def test_a_normal_draw_cast_to_integers_is_no_dense_draw():
    # randn(...).long() is mostly zeros (|x| < 1 rounds to 0): its values are structure a
    # given bound reads, so it is made; randn(...) and its float copies are dense draws
    from torchroofline.plan.given import drawn_dense

    assert drawn_dense(lambda: [torch.randn(8, 8), torch.randn(8, 8).double()])
    assert not drawn_dense(lambda: [torch.randn(8, 8).long()])
    # draws and detaches made past the fake mode's dispatch (trace/fast_fake.py) are tracked
    # as the mode's own: a detached draw is one, zeros and a uniform draw are not
    assert drawn_dense(lambda: [torch.randn(8, 8, requires_grad=True).detach()])
    assert not drawn_dense(lambda: [torch.randn(8), torch.zeros(8)])
    assert not drawn_dense(lambda: [torch.rand(8).detach()])


class _TwoLookups(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(100, 10)

    def forward(self, ids):
        y = self.table(ids)
        return y[0].clone(), y[1, :1].clone()


def test_embedding_lookups_charge_each_kept_box_at_its_own_columns():
    # e = Embedding(100, 10) at ids [5, 7], keeping y[0] (row 5, all 10 columns) and y[1, :1]
    # (row 7, column 0): 11 weight elements (every picked row was charged at the widest box's
    # 10 columns: 20)
    import torchroofline

    result = torchroofline.analyze(_TwoLookups(), (torch.tensor([5, 7]),), data="given")
    weight = [r for r in result.plans.necessary.input_refs if r.shape == (100, 10)]
    assert [r.elements for r in weight] == [11]


@pytest.mark.parametrize("data", ["any", "given"])
def test_a_lookup_reads_the_index_of_every_kept_box(data):
    # y[0] reads ids[0] and y[1, :1] reads ids[1]: both index elements, whatever the data (the
    # index was charged its largest demanded share, int(2 · 11/20) = 1 element)
    result = analyze(_TwoLookups(), (torch.tensor([5, 7]),), data=data)
    ids = [r for r in result.plans.necessary.input_refs if r.dtype == "int64"]
    assert [r.elements for r in ids] == [2]


def test_gathers_sharing_an_index_read_it_where_each_is_kept():
    # gather(a, 1, i)[0] and gather(b, 1, i)[1] with i (4, 6): rows 0 and 1 of the index, 12
    # elements (each gather charged a count of 6, and two counts unite to the larger: 6);
    # likewise a.index_select(0, j)[0] and b.index_select(0, j)[1] read j[0] and j[1]
    from conftest import Fn

    a, b, index = torch.randn(4, 6), torch.randn(4, 6), torch.randint(0, 6, (4, 6))
    gathered = analyze(
        Fn(lambda a, b, i: (torch.gather(a, 1, i)[0] * 2, torch.gather(b, 1, i)[1] * 2)),
        (a, b, index), data="any",
    )
    ids = [r for r in gathered.plans.necessary.input_refs if r.dtype == "int64"]
    assert [r.elements for r in ids] == [12]
    selected = analyze(
        Fn(lambda a, b, j: (a.index_select(0, j)[0] * 2, b.index_select(0, j)[1] * 2)),
        (a, b, torch.tensor([3, 1, 1, 0, 2])), data="any",
    )
    ids = [r for r in selected.plans.necessary.input_refs if r.dtype == "int64"]
    assert [r.elements for r in ids] == [2]


def test_embedding_bags_charge_the_distinct_rows_of_their_kept_bags():
    # bags [3, 3, 7, 999] (kept whole: rows 3, 7, 999 × 16 columns) and [7, 0, 3, 3] (kept at
    # columns :4: rows 0, 3, 7, of which only row 0 is new): 48 + 4 = 52 weight elements (the
    # any-input rule: one element); with padding_idx = 3 the 3s are skipped: (7, 999) × 16 +
    # row 0 × 4 = 36
    # — exactly the weight elements with a nonzero gradient of the kept outputs (the oracle's
    # criterion; tests/oracle.py cannot replay _embedding_bag's integer outputs)
    ids = torch.tensor([[3, 3, 7, 999], [7, 0, 3, 3]])
    charged, proven = {}, {}
    for padding, data in [(None, "given"), (None, "any"), (3, "given")]:
        result = analyze(_Bags(padding), (ids,), data=data)
        weight = [r for r in result.plans.necessary.input_refs if r.shape == (1000, 16)]
        charged[padding, data] = [r.elements for r in weight]
        model = _Bags(padding)
        sum(y.sum() for y in model(ids)).backward()
        proven[padding] = int((model.bags.weight.grad != 0).sum())
    assert charged == {(None, "given"): [52], (None, "any"): [1], (3, "given"): [36]}
    assert proven == {None: 52, 3: 36}


def test_nll_loss_reads_the_targets_of_its_kept_outputs_and_skips_ignored_ones():
    # nll_loss(x, t, reduction='none')[:3], x (8, 5): outputs 0..2 read targets 0..2 and one
    # score each, 3 + 3 elements, whatever the data (every target and score row was charged:
    # 8 + 8). Given t = [1, 4, 1, 0, 2, 3, 1, 1] and ignore_index = 1, outputs 0 and 2 are 0
    # without a score: x[1, 4] alone, and the class weight w[4]; a mean over all 8 reads the
    # scores and weights of the 4 targets that are not 1 (classes 4, 0, 2, 3)
    from conftest import Fn

    x, t, w = torch.randn(8, 5), torch.tensor([1, 4, 1, 0, 2, 3, 1, 1]), torch.rand(5)

    def charged(function, data):
        result = analyze(Fn(function), (x, t, w), data=data)
        return {r.shape: r.elements for r in result.plans.necessary.input_refs}

    def kept(x, t, w):
        return F.nll_loss(x, t, w, reduction="none", ignore_index=1)[:3] * 2

    assert charged(kept, "any") == {(8, 5): 3, (8,): 3, (5,): 1}
    assert charged(kept, "given") == {(8, 5): 1, (8,): 3, (5,): 1}
    def mean(x, t, w):
        return F.nll_loss(x, t, w, ignore_index=1)

    assert charged(mean, "given") == {(8, 5): 4, (8,): 8, (5,): 4}


def test_a_padding_mask_keeps_each_batch_rows_own_columns():
    # where(mask, x, 0) with x (2, 8, 8) and a key padding mask (2, 1, 8) keeping columns < 6 of
    # batch 0 and < 3 of batch 1: x is read at 8·6 + 8·3 = 72 elements (the columns every
    # batch keeps, 2·8·3 = 48, were charged); a causal mask per batch, tril(8 × 8) cut at those
    # columns, reads Σ_i min(i + 1, 6) + Σ_i min(i + 1, 3) = 33 + 21 = 54 less at most half a
    # band per row band (8 rows in 32 bands of one row each for the 2 distinct batches: exact)
    from conftest import Fn

    lengths = torch.tensor([6, 3]).reshape(2, 1, 1)
    padding = torch.arange(8).expand(2, 1, 8) < lengths
    causal = torch.ones(8, 8, dtype=torch.bool).tril() & padding
    x = torch.randn(2, 8, 8)
    charged = []
    for mask in (padding, causal):
        result = analyze(Fn(lambda m, x: torch.where(m, x, 0.0) * 2), (mask, x), data="given")
        charged += [r.elements for r in result.plans.necessary.input_refs if r.is_float]
    assert charged == [72, 54]


class _RoutedExperts(nn.Module):
    """Tokens sent to the experts a given routing names, each expert x[token] @ up[e]."""

    def __init__(self, experts: int, hidden: int, inner: int) -> None:
        super().__init__()
        self.up = nn.Parameter(torch.randn(experts, hidden, inner))

    def forward(self, x: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(x.shape[0], self.up.shape[-1])
        for expert in range(self.up.shape[0]):
            token, _ = torch.where(chosen == expert)
            if token.numel():
                out.index_add_(0, token, x[token] @ self.up[expert])
        return out


def test_experts_given_more_than_64_tokens_each_charge_every_routed_token() -> None:
    # T = 256 tokens routed top-2 over E = 8 experts (H = 16, I = 32): even tokens to experts
    # 0 and 2, odd ones to 1 and 3, so each of the 4 used experts gathers 128 rows of x and
    # experts 4..7 get none. Every token is routed, so the gathers together read all of x,
    # T·H·4 B = 16,384 B, and each used expert its whole H × I matrix: 4·16·32·4 B = 8,192 B
    # (the unused ones nothing); the output is written whole (T·I·4 B = 32,768 B): at least
    # 57,344 B in all, more only for the routing's own reads
    tokens, experts, hidden, inner = 256, 8, 16, 32
    parity = torch.arange(tokens) % 2
    chosen = torch.stack([parity, 2 + parity], dim=1)
    result = analyze(
        _RoutedExperts(experts, hidden, inner), (torch.randn(tokens, hidden), chosen)
    )
    charged = {r.shape: r.elements for r in result.plans.necessary.input_refs}
    assert charged[(tokens, hidden)] == tokens * hidden
    assert charged[(experts, hidden, inner)] == 4 * hidden * inner
    x_and_weights = (tokens * hidden + 4 * hidden * inner) * 4
    assert result.compulsory_bytes >= x_and_weights + tokens * inner * 4


def test_unions_of_gathers_picking_more_than_64_lines_stay_exact() -> None:
    # x (256 × 16): x[even rows] and x[odd rows] (128 lines each) together read all 4,096
    # elements; s (256 × 2): s[t, t % 2] and s[t, 1 − t % 2] (one column per line, two sets
    # of columns: two boxes each) together read all 512 — the two gathers' picks are united
    # exactly, not kept as the larger of two counts
    def both(x: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = torch.arange(256)
        rows = x[t[0::2]] + x[t[1::2]]
        return rows * 2, s[t, t % 2] + s[t, 1 - t % 2]

    result = analyze(_Fn(both), (torch.randn(256, 16), torch.randn(256, 2)), data="given")
    charged = {r.shape: r.elements for r in result.plans.necessary.input_refs}
    assert charged == {(256, 16): 256 * 16, (256, 2): 256 * 2}


def test_the_zero_sample_draws_once_in_each_stratum_in_order():
    # ZERO_SAMPLE strata of a 10**6-element operand: stratum i is [i·n//m, (i+1)·n//m); one
    # seeded draw in each, ascending, the same draws each time
    from torchroofline.plan.demand import matmul

    n, m = 10**6, matmul.ZERO_SAMPLE
    positions = matmul._sample_positions(n)
    bounds = torch.arange(m + 1) * n // m
    assert positions.shape == (m,)
    assert bool(((bounds[:-1] <= positions) & (positions < bounds[1:])).all())
    matmul._sample_positions.cache_clear()
    assert torch.equal(matmul._sample_positions(n), positions)


def test_a_dense_operand_is_not_scanned_whole_and_a_zero_block_is_found(monkeypatch):
    # 1024² = 1,048,576 elements, past _SAMPLE_ABOVE·ZERO_SAMPLE = 262,144: a sample with no
    # zero ends the check (count_nonzero never runs); a zero block of 1 % (rows 0..10 of
    # 1024) escapes ZERO_SAMPLE stratified draws with probability ≤ 0.99**4096 ≈ 1e-18, so it
    # is found and counted whole: 11·1024 zeros ≥ 1e-3 of the operand
    from torchroofline.plan.demand import matmul

    value = torch.rand(1024, 1024) + 0.5
    assert value.numel() > matmul._SAMPLE_ABOVE * matmul.ZERO_SAMPLE
    counted = []
    original = torch.count_nonzero
    monkeypatch.setattr(torch, "count_nonzero", lambda t: counted.append(t) or original(t))
    assert not matmul.has_structure(value) and counted == []
    value[:11] = 0
    assert matmul.has_structure(value) and len(counted) == 1


class _Product(nn.Module):
    def __init__(self, how) -> None:  # noqa: ANN001
        super().__init__()
        self.how = how

    def forward(self, *operands: torch.Tensor) -> torch.Tensor:
        return self.how(*operands)


@pytest.mark.parametrize("data", ["any", "given"])
@pytest.mark.parametrize(("how", "scaled"), [
    (lambda x: x @ torch.ones(16, 16), 0),  # a constant: every column of B alike
    (lambda x: x @ torch.full((16, 16), 3.0), 16),
    (lambda x: torch.ones(16, 16) @ x, 0),  # every row of A alike
])
def test_a_product_with_alike_lines_computes_one_line(how, scaled, data) -> None:  # noqa: ANN001
    # x @ ones(16, 16) is x's row sums, each written 16 times: the walk's equal lines compute
    # the 16 distinct outputs, 2·16 FLOPs each (2·16² in all, not 2·16³); both it and the
    # algebra's row sums (one add per element, 16², and × 3 once per row: 16 more) move x
    # (16² floats in) and the output (16² out), 2·16²·4 bytes, the constant made in the
    # kernel, so the time ties and the bound takes the sums' fewer FLOPs
    result = analyze(_Product(how), [torch.randn(16, 16)], data=data)
    assert (result.tensor_flops, result.vector_flops) == (0, 16 * 16 + scaled)
    assert result.compulsory_bytes == 2 * 16 * 16 * 4
    assert sum(op.flops.tensor for op in result.plans.necessary.ops) == 2 * 16**2


def test_a_given_ones_operand_computes_one_line() -> None:
    # y @ ones(16, 16) given, as above: 2·16² FLOPs; the known operand is read at one column
    # (16 floats) besides y and the output
    given = analyze(_Product(lambda y, o: y @ o), [torch.randn(16, 16), torch.ones(16, 16)],
                    data="given")
    assert (given.tensor_flops, given.compulsory_bytes) == (2 * 16**2, (2 * 16**2 + 16) * 4)
    dense = analyze(_Product(lambda y, o: y @ o), [torch.randn(16, 16), torch.ones(16, 16)],
                    data="any")
    assert dense.tensor_flops == 2 * 16**3  # for any values the operand's lines may differ


def test_a_column_broadcast_operand_computes_one_column() -> None:
    # y @ w[:, None].expand(16, 16), w any data: every column of B is w (stride 0), so y @ w
    # once, 2·16² FLOPs, and w read once (16 floats) besides y and the output
    spread = analyze(_Product(lambda y, w: y @ w[:, None].expand(16, 16)),
                     [torch.randn(16, 16), torch.randn(16)], data="any")
    assert (spread.tensor_flops, spread.compulsory_bytes) == (2 * 16**2, (2 * 16**2 + 16) * 4)
    # a bias of one value per column differs along the row: every column computed, 2·16³
    biased = analyze(_Product(lambda y, w, b: torch.addmm(b, y, w[:, None].expand(16, 16))),
                     [torch.randn(16, 16), torch.randn(16), torch.randn(16)], data="any")
    assert biased.tensor_flops == 2 * 16**3


@pytest.mark.parametrize("how", [
    lambda x: torch.tril(torch.ones(16, 16)) @ x,
    lambda x: torch.triu(torch.ones(16, 16)) @ x,  # the reversed scan
    lambda x: x @ torch.tril(torch.ones(16, 16)),
    lambda x: x @ torch.triu(torch.ones(16, 16)),
])
def test_a_product_with_a_triangle_of_ones_is_a_prefix_sum(how) -> None:  # noqa: ANN001
    # out[i] = Σ_{k≤i} x[k]: a scan, out[i] = out[i-1] + x[i], charged one add per element
    # (16², where 15 per line of 16 suffice), not the triangle's 16²·17 multiply-adds; both
    # move x and the output alone (2·16²·4 bytes), so the time ties and the fewer FLOPs win
    result = analyze(_Product(how), [torch.randn(16, 16)], data="any")
    assert (result.flops, result.compulsory_bytes) == (16 * 16, 2 * 16 * 16 * 4)


@pytest.mark.xfail(strict=True, reason="a given triangle of ones is no cumulative sum: the "
                   "algebra reads values known from shapes and constants (docs/limitations.md)")
def test_a_product_with_a_given_triangle_of_ones_is_a_prefix_sum() -> None:
    # t = tril(ones(16, 16)) given: t @ x is x's prefix sums down its columns, as when built
    result = analyze(_Product(lambda x, t: t @ x), [torch.randn(16, 16),
                     torch.tril(torch.ones(16, 16))], data="given")
    assert result.flops <= 16 * 16


@pytest.mark.xfail(strict=True, reason="a given input's zeros zero a mul that reads it "
                   "directly, not through a sum (docs/limitations.md)")
def test_a_sum_of_a_given_zero_input_zeroes_what_it_multiplies() -> None:
    # z.sum(1, keepdim=True) is 0 for z = zeros(16, 16) given, so times a finite y it is 16²
    # zeros written, nothing read: 16²·4 bytes
    result = analyze(_Product(lambda z, y: z.sum(1, keepdim=True) * y),
                     [torch.zeros(16, 16), torch.randn(16, 16)], data="given")
    assert result.compulsory_bytes == 16 * 16 * 4


def test_a_given_zero_input_zeroes_what_it_multiplies() -> None:
    # z = zeros(16, 16) given: z * y is 0 for finite y, so a kernel writes 16² zeros, reads
    # nothing: 16²·4 bytes, no FLOPs
    zeros = torch.zeros(16, 16)
    result = analyze(_Product(lambda z, y: z * y), [zeros, torch.randn(16, 16)], data="given")
    assert (result.flops, result.compulsory_bytes) == (0, 16 * 16 * 4)
    assert any("zero factor" in note for note in result.notes)
    # y = inf is no finite factor (0·inf is NaN), nor is any y for any values: 16² multiplies
    # reading z and y, writing the output: 3·16²·4 bytes
    infinite = torch.full((16, 16), float("inf"))
    for inputs, data in (([zeros, infinite], "given"), ([zeros, torch.randn(16, 16)], "any")):
        result = analyze(_Product(lambda z, y: z * y), inputs, data=data)
        assert (result.flops, result.compulsory_bytes) == (16 * 16, 3 * 16 * 16 * 4)
