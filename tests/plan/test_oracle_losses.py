"""The bound against the dependence oracle (tests/oracle.py) on the families KernelBench uses
that the other generators leave out: losses per element or per row (cross entropy with an
ignored class, nll, kl_div, smooth L1 and Huber, hinge embedding, triplet margin, BCE with
logits), pools with ``ceil_mode`` and padding, transposed convolutions read in part, and scans
run backwards (a flipped cumsum or cumprod).

Programs: one to three stages over a small 2-D tensor (test_oracle_selection's
:func:`program`), each drawn with its targets, sizes and modes (built in ``forward`` from
Python lists: constants), then a tail that keeps a part of the result; checked for tightness
and soundness as there. Below them, the cases the generator found, as closed forms.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from test_oracle import FLOAT_BYTES, HYPOTHESIS, assert_tight, figures
from test_oracle_selection import Draw, Stage, assert_generated_tight_and_sound


def _targets(draw: Draw, rows: int, columns: int) -> list[int]:
    return draw(st.lists(st.integers(0, columns - 1), min_size=rows, max_size=rows))


def _class_loss(draw: Draw, rows: int, columns: int) -> Stage:
    """x as logits of ``rows`` samples over ``columns`` classes: the cross entropy of drawn
    targets per sample, one class maybe ignored (its samples' losses 0), or the nll of the
    log-softmax; a loss per sample, kept as a column."""
    targets = _targets(draw, rows, columns)
    ignored = draw(st.sampled_from([-100, *targets]))
    smoothing = draw(st.sampled_from([0.0, 0.1]))
    if draw(st.booleans()):
        return (lambda x: F.cross_entropy(x, torch.tensor(targets), ignore_index=ignored,
                                          label_smoothing=smoothing, reduction="none")[:, None]
                ), (rows, 1)
    return (lambda x: F.nll_loss(x.log_softmax(1), torch.tensor(targets), ignore_index=ignored,
                                 reduction="none")[:, None]), (rows, 1)


def _elementwise_loss(draw: Draw, rows: int, columns: int) -> Stage:
    """A loss per element against x flipped: smooth L1 and Huber at a drawn ``beta``/``delta``,
    kl_div of two log-softmaxes, BCE with logits against x's sigmoid, hinge embedding with
    drawn ±1 labels."""
    kind = draw(st.sampled_from(["smooth_l1", "huber", "kl_div", "bce", "hinge"]))
    width = draw(st.sampled_from([0.5, 1.0]))
    labels = draw(st.lists(st.lists(st.sampled_from([-1.0, 1.0]), min_size=columns,
                                    max_size=columns), min_size=rows, max_size=rows))
    return {
        "smooth_l1": lambda x: F.smooth_l1_loss(x, x.flip(1), reduction="none", beta=width),
        "huber": lambda x: F.huber_loss(x, x.flip(0), reduction="none", delta=width),
        "kl_div": lambda x: F.kl_div(x.log_softmax(1), x.flip(0).log_softmax(1),
                                     reduction="none", log_target=True),
        "bce": lambda x: F.binary_cross_entropy_with_logits(x, x.flip(1).sigmoid(),
                                                            reduction="none"),
        "hinge": lambda x: F.hinge_embedding_loss(x, torch.tensor(labels), margin=width,
                                                  reduction="none"),
    }[kind], (rows, columns)


def _triplet(draw: Draw, rows: int, columns: int) -> Stage:
    """The triplet margin loss of each row (anchor) against the next row (positive) and the
    flipped rows (negative), p = 1 or 2, maybe swapped; a column of losses."""
    p = draw(st.sampled_from([1.0, 2.0]))
    swap = draw(st.booleans())
    return (lambda x: F.triplet_margin_loss(x, x.roll(1, 0), x.flip(0), p=p, swap=swap,
                                            reduction="none")[:, None]), (rows, 1)


def _padded_pool(draw: Draw, rows: int, columns: int) -> Stage:
    """x as a one-channel image pooled (max or average, padding counted or not) by a drawn
    window and stride, with padding up to half the window and ``ceil_mode``."""
    kernel = draw(st.integers(1, min(3, rows))), draw(st.integers(1, min(3, columns)))
    stride = draw(st.integers(1, 2))
    padding = draw(st.integers(0, min(kernel) // 2))
    ceil = draw(st.booleans())
    kind = draw(st.sampled_from(["max", "avg", "avg_without_pad"]))

    def pool(x: torch.Tensor) -> torch.Tensor:
        image = x[None, None]
        if kind == "max":
            return F.max_pool2d(image, kernel, stride, padding, ceil_mode=ceil)[0, 0]
        return F.avg_pool2d(image, kernel, stride, padding, ceil_mode=ceil,
                            count_include_pad=kind == "avg")[0, 0]

    return pool, tuple(pool(torch.zeros(rows, columns)).shape)


def _conv_transpose(draw: Draw, rows: int, columns: int) -> Stage:
    """x as a one-channel image through a transposed convolution of a drawn (constant) filter,
    stride and padding."""
    kernel = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    weights = draw(st.lists(st.sampled_from([-1.0, 0.5, 2.0]), min_size=kernel[0] * kernel[1],
                            max_size=kernel[0] * kernel[1]))
    stride = draw(st.integers(1, 2))
    padding = draw(st.integers(0, (min(kernel) - 1) // 2))

    def transposed(x: torch.Tensor) -> torch.Tensor:
        w = torch.tensor(weights, dtype=x.dtype).reshape(1, 1, *kernel)
        return F.conv_transpose2d(x[None, None], w, stride=stride, padding=padding)[0, 0]

    return transposed, tuple(transposed(torch.zeros(rows, columns)).shape)


def _reversed_scan(draw: Draw, rows: int, columns: int) -> Stage:
    """A running sum or product from the end of a dim (flip, scan, flip back)."""
    dim = draw(st.integers(0, 1))
    scan = draw(st.sampled_from(["cumsum", "cumprod"]))
    return (lambda x: getattr(x.flip(dim), scan)(dim).flip(dim)), (rows, columns)


FAMILIES = {
    "class_loss": _class_loss, "elementwise_loss": _elementwise_loss, "triplet": _triplet,
    "padded_pool": _padded_pool, "conv_transpose": _conv_transpose,
    "reversed_scan": _reversed_scan,
}


@settings(HYPOTHESIS, max_examples=25)
@given(st.data())
def test_generated_loss_and_window_programs_are_tight_and_sound(data):
    assert_generated_tight_and_sound(data.draw, FAMILIES)


# --- the cases the generator found -----------------------------------------------------------


def test_a_loss_per_element_read_in_part_reads_its_own_elements() -> None:
    # smooth_l1_loss(x, x.flip(1), reduction="none")[:, -1] of x (3, 3): loss (i, 2) compares
    # x[i, 2] with x[i, 0], so 6 reads and 3 writes, 36 B, the oracle's. Was 24 B: as a
    # reduction, each input was charged its share as a count, and x and its flip, two views
    # of one tensor, shared it (found by the generator through a pool and a transposed conv,
    # whose FLOPs were then charged for half the outputs the loss needs)
    found = figures(lambda x: F.smooth_l1_loss(x, x.flip(1), reduction="none", beta=0.5)[:, -1],
                    torch.randn(3, 3))
    assert found.result.compulsory_bytes == found.proven.bytes(FLOAT_BYTES) == 9 * FLOAT_BYTES
    assert_tight(found)


def test_the_oracle_sees_an_output_as_written_before_an_in_place_op() -> None:
    # cross entropy with label smoothing, targets [0, 2, 0] and ignore_index 0: the smoothing
    # term −Σ log p of each row is then zeroed in place (masked_fill_) for the ignored rows 0
    # and 2, so of the negation's 3 outputs only row 1's is needed (1 FLOP, the bound's). The
    # oracle claimed all 3: a retained gradient moves to the in-place op's output, where
    # every position has one
    found = figures(lambda x: F.cross_entropy(x, torch.tensor([0, 2, 0]), ignore_index=0,
                                              label_smoothing=0.1, reduction="none"),
                    torch.randn(3, 3))
    negation = next(op for op in found.proven.ops if op.name == "aten.neg.default")
    assert (negation.demanded, negation.elements) == (1, 3)
    assert_tight(found)


def test_a_loss_of_an_element_against_itself_needs_neither() -> None:
    # mse_loss(x, x.flip(1)) of x (3, 3): column 1 is compared with itself, (x − x)² = 0
    # whatever it holds, so the mean needs columns 0 and 2 alone: 6 reads and 1 write, 28 B,
    # the oracle's. Was 40 B, above that hand minimum: every element of both inputs. Its FLOPs
    # (3 a position, 27) are those of the 6 other positions, 18, the oracle's too (it counts
    # the positions whose inputs ever differ); were all 27, the 0s computed
    found = figures(lambda x: F.mse_loss(x, x.flip(1)), torch.randn(3, 3))
    assert found.result.compulsory_bytes == found.proven.bytes(FLOAT_BYTES) == 7 * FLOAT_BYTES
    assert found.result.flops == 6 * 3
    assert_tight(found)
    # per element, row 0 kept: x[0, 1] against itself needs nothing, x[0, 0] and x[0, 2] each
    # other: 2 reads and 3 writes, 2 positions' FLOPs (6)
    found = figures(lambda x: F.mse_loss(x.flip(1), x, reduction="none")[0], torch.randn(3, 3))
    assert found.result.compulsory_bytes == found.proven.bytes(FLOAT_BYTES) == 5 * FLOAT_BYTES
    assert found.result.flops == 2 * 3
    assert_tight(found)
    # written out: (x − x.flip(1)).abs().sum(), the same 28 B (the sub leaves out the middle
    # column) and 6 subtractions; rows 1.. of x − x.flip(1): 4 reads, 6 writes, 4 subtractions
    # (the middle column's 0s need none: were 6)
    found = figures(lambda x: (x - x.flip(1)).abs().sum(), torch.randn(3, 3))
    assert found.result.compulsory_bytes == found.proven.bytes(FLOAT_BYTES) == 7 * FLOAT_BYTES
    assert found.result.flops == 6 + 9 + 9  # sub, abs, sum (the bound's count: one add each)
    found = figures(lambda x: (x - x.flip(1))[1:], torch.randn(3, 3))
    assert found.result.compulsory_bytes == found.proven.bytes(FLOAT_BYTES) == 10 * FLOAT_BYTES
    assert found.result.flops == 4
    assert_tight(found)
    # against a roll no element meets itself: every element (36 + 4 B)
    found = figures(lambda x: F.mse_loss(x, x.roll(1, 1)), torch.randn(3, 3))
    assert found.result.compulsory_bytes == 10 * FLOAT_BYTES
