"""The bound against the dependence oracle (tests/oracle.py) on the op families
test_oracle.py's generated chains leave out: selection by known indices and masks, scans,
sorts, flat rolls, pads of every mode, triangles, diagonals, expansions, chunks and folds.

Programs: hypothesis-generated chains over a small 2-D tensor, each stage drawn with its
indices, masks and shifts (index tensors and masks are built in ``forward`` from Python lists:
constants the bound reads, as the oracle does), then a tail that keeps a part of the result.
Each program is checked for tightness (compulsory bytes ≥ 0.95 × the oracle's bytes, per op
FLOPs ≥ 0.95 × the proven ones) and soundness (compulsory bytes ≤ every input and constant
read once and the outputs written once; compulsory ≤ fused ≤ unfused bytes; necessary ≤
executed FLOPs). Below them, the cases the generator found, as closed forms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from test_oracle import FLOAT_BYTES, HYPOTHESIS, Figures, assert_tight, figures

from conftest import Fn
from torchroofline import analyze

Draw = Callable[..., Any]  #: hypothesis's ``data.draw``
Stage = tuple[Callable[[torch.Tensor], torch.Tensor], tuple[int, int]]


def _constant_bytes(found: Figures) -> int:
    """Bytes of the values the program reads that are neither its arguments nor its
    parameters or buffers: the index tensors and masks built in ``forward``."""
    trace = found.result.plans.trace
    own = set(trace.argument_value_ids) | set(trace.module_value_ids.values())
    constants = {
        ref.value_id: ref.storage_elements * ref.itemsize
        for op in trace.ops for ref in op.reads
        if ref.value_id in trace.input_value_ids and ref.value_id not in own
    }
    return sum(constants.values())


def assert_sound(found: Figures) -> None:
    """Never above the program's own work: every input element and constant read once and
    the outputs written once; the bound below the fused plan, the fused below the eager."""
    touched = sum(
        leaf.elements * (FLOAT_BYTES if leaf.is_float else leaf.itemsize)
        for leaf in found.proven.leaves
    ) + found.proven.output_bytes(FLOAT_BYTES) + _constant_bytes(found)
    result = found.result
    assert result.compulsory_bytes <= touched, found.describe()
    assert result.compulsory_bytes <= result.fused_bytes <= result.unfused_bytes, (
        found.describe()
    )
    assert result.flops <= found.executed_flops, found.describe()


# --- stages over a (rows, columns) tensor ----------------------------------------------------


def _gather(draw: Draw, rows: int, columns: int) -> Stage:
    width = draw(st.integers(1, 4))
    index = draw(st.lists(st.lists(st.integers(0, columns - 1), min_size=width,
                                   max_size=width), min_size=rows, max_size=rows))
    return (lambda x: x.gather(1, torch.tensor(index))), (rows, width)


def _index_select(draw: Draw, rows: int, columns: int) -> Stage:
    picks = draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=4))
    return (lambda x: x.index_select(0, torch.tensor(picks))), (len(picks), columns)


def _advanced_columns(draw: Draw, rows: int, columns: int) -> Stage:
    picks = draw(st.lists(st.integers(0, columns - 1), min_size=1, max_size=4))
    return (lambda x: x[:, torch.tensor(picks)]), (rows, len(picks))


def _scatter(draw: Draw, rows: int, columns: int) -> Stage:
    """x with its first rows scattered along dim 0 into itself (a sum, a max, a mean, a sum
    of the sources alone, or a store), or a sum into zeros. A store's index sends no two
    sources to one position: autograd differentiates every source stored there, though one
    wins, so the oracle would claim them all."""
    sent = draw(st.integers(1, rows))
    kind = draw(st.sampled_from(["add", "amax", "mean", "sum_without_self", "store",
                                 "into_zeros"]))
    if kind == "store":
        lines = [draw(st.permutations(range(rows)))[:sent] for _ in range(columns)]
        index = [list(row) for row in zip(*lines, strict=True)]
    else:
        index = draw(st.lists(st.lists(st.integers(0, rows - 1), min_size=columns,
                                       max_size=columns), min_size=sent, max_size=sent))

    def scatter(x: torch.Tensor) -> torch.Tensor:
        at, source = torch.tensor(index), x[:sent].exp()
        if kind == "add":
            return x.scatter_add(0, at, source)
        if kind == "amax":
            return x.scatter_reduce(0, at, source, "amax")
        if kind == "mean":
            return x.scatter_reduce(0, at, source, "mean")
        if kind == "sum_without_self":
            return x.scatter_reduce(0, at, source, "sum", include_self=False)
        if kind == "store":
            return x.scatter(0, at, source)
        return x.new_zeros(rows, columns).scatter_add(0, at, source)

    return scatter, (rows, columns)


def _index_put(draw: Draw, rows: int, columns: int) -> Stage:
    """The exps of x's last rows stored or added at picked rows (a store picks no row twice:
    :func:`_scatter`)."""
    accumulate = draw(st.booleans())
    picks = draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=3,
                          unique=not accumulate))
    return (lambda x: x.index_put((torch.tensor(picks),), x.flip(0)[: len(picks)].exp(),
                                  accumulate=accumulate)), (rows, columns)


def _masked(draw: Draw, rows: int, columns: int) -> Stage:
    mask = draw(st.lists(st.lists(st.booleans(), min_size=columns, max_size=columns),
                         min_size=rows, max_size=rows))
    if draw(st.booleans()):
        return (lambda x: x.masked_fill(torch.tensor(mask), 0.0)), (rows, columns)
    return (lambda x: torch.where(torch.tensor(mask), x, x.exp())), (rows, columns)


def _scan(draw: Draw, rows: int, columns: int) -> Stage:
    dim = draw(st.integers(0, 1))
    scan = draw(st.sampled_from(["cumsum", "cumprod", "logcumsumexp", "cummax"]))
    if scan == "cummax":
        return (lambda x: x.cummax(dim).values), (rows, columns)
    return (lambda x: getattr(x, scan)(dim)), (rows, columns)


def _sort(draw: Draw, rows: int, columns: int) -> Stage:
    if draw(st.booleans()):
        dim = draw(st.integers(0, 1))
        return (lambda x: x.sort(dim).values), (rows, columns)
    k = draw(st.integers(1, columns))
    return (lambda x: x.topk(k, 1).values), (rows, k)


def _roll(draw: Draw, rows: int, columns: int) -> Stage:
    shift = draw(st.integers(-4, 4))
    if draw(st.booleans()):
        return (lambda x: x.roll(shift)), (rows, columns)
    dim = draw(st.integers(0, 1))
    return (lambda x: x.roll(shift, dim).flip(1 - dim)), (rows, columns)


def _pad(draw: Draw, rows: int, columns: int) -> Stage:
    mode = draw(st.sampled_from(["constant", "reflect", "replicate", "circular"]))
    left, right = draw(st.integers(0, columns - 1)), draw(st.integers(0, columns - 1))
    return (lambda x: F.pad(x[None], (left, right), mode=mode)[0]), (rows, columns + left + right)


def _triangle(draw: Draw, rows: int, columns: int) -> Stage:
    offset = draw(st.integers(-1, 1))
    lower = draw(st.booleans())
    return (lambda x: x.tril(offset) if lower else x.triu(offset)), (rows, columns)


def _expand(draw: Draw, rows: int, columns: int) -> Stage:
    return (lambda x: x[:, None].expand(rows, 2, columns).reshape(2 * rows, columns)), (
        2 * rows, columns
    )


def _chunk(draw: Draw, rows: int, columns: int) -> Stage:
    """One of the two column chunks (of ⌈columns / 2⌉ columns, the last of the rest)."""
    last = draw(st.booleans()) and columns > 1
    kept = columns // 2 if last else columns - columns // 2
    return (lambda x: x.chunk(2, 1)[-1 if last else 0]), (rows, kept)


def _diagonal(draw: Draw, rows: int, columns: int) -> Stage:
    """A diagonal matrix per row, summed back over one of its dims."""
    dim = draw(st.integers(1, 2))
    return (lambda x: torch.diag_embed(x).sum(dim)), (rows, columns)


def _fold(draw: Draw, rows: int, columns: int) -> Stage:
    """Overlapping windows of each row (``unfold``) summed back into it (``F.fold``)."""
    size, step = draw(st.integers(1, min(2, columns))), draw(st.integers(1, 2))
    windows = (columns - size) // step + 1
    length = (windows - 1) * step + size

    def fold(x: torch.Tensor) -> torch.Tensor:
        blocks = x.unfold(1, size, step).permute(0, 2, 1)
        return F.fold(blocks, (1, length), (1, size), stride=(1, step))[:, 0, 0]

    return fold, (rows, length)


STAGES = {
    "gather": _gather, "index_select": _index_select, "advanced_columns": _advanced_columns,
    "scatter": _scatter, "index_put": _index_put, "masked": _masked, "scan": _scan,
    "sort": _sort, "roll": _roll, "pad": _pad, "triangle": _triangle, "expand": _expand,
    "chunk": _chunk, "diagonal": _diagonal, "fold": _fold,
}

#: what the program keeps of the last (rows, columns) tensor
TAILS: dict[str, Callable[[torch.Tensor], Any]] = {
    "all": lambda y: y,
    "row_0": lambda y: y[0],
    "last_column": lambda y: y[:, -1],
    "strided": lambda y: y[::2, 1::2],
    "inner": lambda y: y[1:-1, 1:-1],
    "column_sums": lambda y: y.sum(0),
    "row_maxima": lambda y: y.amax(1),
}


def program(draw: Callable[..., Any],
            stages_from: dict[str, Callable[[Draw, int, int], Stage]] = STAGES) -> tuple:
    """One to three stages (of ``stages_from``) over a (3..5, 3..6) tensor, then a tail
    (``draw``: hypothesis's ``data.draw``, so a failure lists every drawn stage, index and
    shift)."""
    shape = draw(st.integers(3, 5)), draw(st.integers(3, 6))
    stages = []
    rows, columns = shape
    for _ in range(draw(st.integers(1, 3))):
        stage, (rows, columns) = stages_from[draw(st.sampled_from(sorted(stages_from)))](
            draw, rows, columns
        )
        stages.append(stage)
    tail = TAILS[draw(st.sampled_from(sorted(TAILS)))]

    def run(x: torch.Tensor) -> Any:
        for stage in stages:
            x = stage(x)
        return tail(x)

    torch.manual_seed(draw(st.integers(0, 2**16)))
    return Fn(run), torch.randn(*shape)


def assert_generated_tight_and_sound(
    draw: Draw, stages_from: dict[str, Callable[[Draw, int, int], Stage]] = STAGES,
    data: str = "any",
) -> None:
    """One drawn :func:`program` of ``stages_from``, tight and sound for ``data``."""
    found = figures(*program(draw, stages_from), data=data)
    assert_tight(found)
    assert_sound(found)


@settings(HYPOTHESIS, max_examples=30)
@given(st.data())
def test_generated_selection_programs_are_tight_and_sound(data):
    assert_generated_tight_and_sound(data.draw)


# --- the cases the generator found -----------------------------------------------------------


def _bound(fn: Callable[..., Any], *inputs: torch.Tensor):
    return analyze(Fn(fn), inputs, gpu="h100-sxm", precision="fp32", data="any")


def test_a_flat_roll_read_in_part_reads_as_many_input_elements() -> None:
    # x.roll(3) of a (3, 5) x rolls the flattened tensor: output p copies input (p − 3) mod 15,
    # a permutation, so its first two rows (10 outputs) copy 10 distinct inputs. 10 reads and
    # 10 writes of 4 B: 80 B (was 40: no input charged)
    result = _bound(lambda x: x.roll(3)[:2], torch.randn(3, 5))
    assert result.compulsory_bytes == (10 + 10) * FLOAT_BYTES
    # the rolled exps: one exp per kept output
    result = _bound(lambda x: x.exp().roll(3)[:2], torch.randn(3, 5))
    assert result.flops == 10
    # placed: the last column of x.cumsum(0).roll(4) (flat 4, 9, 14) copies flat 0, 5, 10,
    # x's first column, whose running sums need only that column (the scan rule's one add per
    # kept output: 3)
    result = _bound(lambda x: x.cumsum(0).roll(4)[:, -1], torch.randn(3, 5))
    assert result.compulsory_bytes == (3 + 3) * FLOAT_BYTES
    assert result.flops == 3


def test_scatter_add_folds_only_the_pairs_landing_on_kept_outputs() -> None:
    # x.scatter_add(0, index, s), x (3, 3), s (2, 3): pair (i, j) adds s[i, j] into
    # x[index[i, j], j]. Every index is 0, so rows 1 and 2 take no pair: keeping them needs no
    # add (the share of outputs, 6/9 of 6 adds, charged 4)
    zeros = [[0, 0, 0], [0, 0, 0]]
    result = _bound(lambda x, s: x.scatter_add(0, torch.tensor(zeros), s)[1:],
                    torch.randn(3, 3), torch.randn(2, 3))
    assert result.flops == 0
    # index [[2, 2, 2], [2, 1, 2]]: row 2 takes 5 of the 6 pairs, 5 adds (the share charged 2)
    twos = [[2, 2, 2], [2, 1, 2]]
    result = _bound(lambda x, s: x.scatter_add(0, torch.tensor(twos), s)[2:],
                    torch.randn(3, 3), torch.randn(2, 3))
    assert result.flops == 5
    # without include_self the k pairs on one position take k − 1 adds: row 0 of
    # x.scatter_reduce(0, [[0, 0, 1], [0, 1, 1]], s, "sum", include_self=False) takes 2 pairs
    # at column 0 and 1 at column 1: 1 + 0 (the share of outputs, 3/9 of 6, charged 2)
    pairs = [[0, 0, 1], [0, 1, 1]]
    result = _bound(
        lambda x, s: x.scatter_reduce(0, torch.tensor(pairs), s, "sum", include_self=False)[0],
        torch.randn(3, 3), torch.randn(2, 3),
    )
    assert result.flops == 1
    # a mean with x included: the 3 pairs' adds and a divide at each of the 2 positions hit
    result = _bound(lambda x, s: x.scatter_reduce(0, torch.tensor(pairs), s, "mean")[0],
                    torch.randn(3, 3), torch.randn(2, 3))
    assert result.flops == 3 + 2


def test_two_index_tensors_held_outside_the_model_are_both_known() -> None:
    # two real index tensors a closure holds: the fake copy the trace made of the first was
    # freed, and the second's took its address (the trace failed on the stale entry). out =
    # x[:, [3]] with 2·x[1, 0] added into row 4 and 2·x[0, 0] into row 0... of the 5 outputs
    # (20 B), the column's 5 elements and the 2 added (28 B), and the index constants 1 + 2
    # int64 (24 B)
    columns, rows = torch.tensor([3]), torch.tensor([4, 0])
    result = _bound(
        lambda x: x[:, columns].index_put((rows,), x[:2, :1] * 2, accumulate=True),
        torch.randn(5, 6),
    )
    assert result.compulsory_bytes == 20 + 28 + 24


def test_a_triangular_operand_read_in_part_reads_its_triangle_and_what_it_meets() -> None:
    # (a.triu() @ b)[-1], a (4, 4), b (4, 3): row 3 of triu(a) holds a[3, 3] alone, so the
    # kept row is a[3, 3]·b[3]: 1 + 3 reads, 3 writes (was a[3, 3] and all 12 of b), and
    # 2 FLOPs per (nonzero, column) pair: 2·1·3 (was 2·4·3)
    result = _bound(lambda a, b: (a.triu() @ b)[-1], torch.randn(4, 4), torch.randn(4, 3))
    assert result.compulsory_bytes == (1 + 3 + 3) * FLOAT_BYTES
    assert result.flops == 2 * 1 * 3
    # all of tril(a) @ b: its 4·5/2 = 10 nonzeros, each times 3 columns of b
    result = _bound(lambda a, b: a.tril() @ b, torch.randn(4, 4), torch.randn(4, 3))
    assert result.flops == 2 * 10 * 3
    # a right operand, transposed: column 1 of triu(b, 1).t() is row 1 of triu(b, 1), its
    # columns 2 and 3; a's rows meet it at those 2 positions: 3 rows × 2 reads of a, 2 of b,
    # 3 writes, 2·2·3 FLOPs
    result = _bound(lambda a, b: (a @ b.triu(1).t())[:, 1:2], torch.randn(3, 4),
                    torch.randn(4, 4))
    assert result.compulsory_bytes == (3 * 2 + 2 + 3) * FLOAT_BYTES
    assert result.flops == 2 * 2 * 3
    assert any("triangular matmul" in note for note in result.notes)


def test_a_structured_operand_of_two_batch_dims_is_seen_through_the_bmm() -> None:
    # a (2, 2, 4, 4) @ b (2, 2, 4, 3) runs as a bmm of a viewed as (4, 4, 4): each of the 4
    # matrices of tril(a) is the same triangle, 10 nonzeros: 4·2·10·3 (was 4·2·16·3)
    a, b = torch.randn(2, 2, 4, 4), torch.randn(2, 2, 4, 3)
    found = figures(lambda a, b: a.tril() @ b, a, b)
    assert found.result.flops == 4 * 2 * 10 * 3
    assert_tight(found)
    # a right triangle, a (3, 4) @ tril(b), b (4, 4): column j keeps rows j..3, 10 nonzeros
    # each met by 3 rows of a, 2·10·3; the oracle counts the pairs both factors may make
    # nonzero (2k − 1 per output: 3·(7 + 5 + 3 + 1)), not the left operand's alone (3·4·7)
    found = figures(lambda a, b: a @ b.tril(), torch.randn(3, 4), torch.randn(4, 4))
    assert (found.result.flops, found.proven.ops[-1].demanded_flops) == (2 * 10 * 3, 3 * 16)
    assert_tight(found)
    # diag_embed(v) of v (2, 2, 4) so merged: which vector a bmm matrix scales is not
    # followed there, so the product stays dense, 4·2·16·3
    assert _bound(lambda v, b: torch.diag_embed(v) @ b, a[..., 0], b).flops == 4 * 2 * 16 * 3


def test_a_triangle_of_known_values_is_counted_by_its_nonzeros_not_as_a_triangle() -> None:
    # tril(ones(4, 4)) @ v: the mask is a constant, so its nonzeros are counted (known operand
    # values: 10 products per column of v, 2·10·3 FLOPs), and the triangle rule stays out; the
    # bound takes the algebra's prefix sums, one add per element of v (4·3), at the same time
    result = _bound(lambda v: torch.ones(4, 4).tril() @ v, torch.randn(4, 3))
    assert result.flops == 4 * 3
    written = result.plans.necessary.ops
    assert sum(op.flops.tensor + op.flops.vector for op in written) == 2 * 10 * 3
    assert not any("triangular matmul" in note for note in result.notes)
    assert any("known operand values" in note for note in result.notes)


def test_a_mask_drawn_anew_from_a_problem_file_is_not_its_traced_pick(tmp_path) -> None:
    from torchroofline import analyze_file

    # x[x > 0] of a problem file: the file's get_inputs() draws new values after the trace, so
    # the mask known to the bound picks another count of elements than the traced output holds
    # (it raised IndexError: index 6 is out of bounds for dimension 0 with size 6). The picks
    # stay unknown; the bound is at most reading x once and writing the 16 elements it may keep.
    problem = tmp_path / "masked.py"
    problem.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x[x > 0]\n"
        "def get_inputs():\n"
        "    return [torch.randn(4, 4)]\n"
        "def get_init_inputs():\n"
        "    return []\n"
    )
    for _ in range(3):  # a new draw each time: the counts differ more often than not
        result = analyze_file(problem, "h100-sxm")
        assert 0 < result.compulsory_bytes <= 2 * 16 * FLOAT_BYTES
