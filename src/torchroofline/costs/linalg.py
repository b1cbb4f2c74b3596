"""Rules of dense linear algebra (cuSOLVER / MAGMA): LAPACK Working Note 41's operation counts."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..trace.aten_ops import aten
from ..trace.refs import TracedOp
from ._core import (
    Category,
    FlopCount,
    FlopFormula,
    MatmulKind,
    NoArithmetic,
    _numel,
    register,
)

# --- Dense linear algebra: cuSOLVER / MAGMA ---------------------------------------------------
# FLOPs are LAPACK Working Note 41's operation counts (Dongarra et al., "Installation guide for
# LAPACK", Appendix C), multiplications plus additions; where methods differ the lower count.
# Blocked factorisations do their O(n³) work in GEMM updates, so the FLOPs are charged at the
# matmul unit: the faster unit keeps a bound.


def _matrices(tensor: torch.Tensor) -> tuple[int, int, int]:
    """(batch, rows, columns) of a (…, m, n) matrix argument."""
    rows, columns = tensor.shape[-2:]
    return math.prod(tensor.shape[:-2]), rows, columns


def lu_flops(rows: int, columns: int) -> int:
    """getrf of an m×n matrix, k = min(m, n), M = max(m, n): M·k² − k³/3 − k²/2 + 5k/6."""
    k, big = min(rows, columns), max(rows, columns)
    return (6 * big * k * k - 2 * k**3 - 3 * k * k + 5 * k) // 6


def lu_solve_flops(n: int, rhs: int) -> int:
    """getrs: forward and back substitution with the LU factors, 2·n²·k − n·k."""
    return 2 * n * n * rhs - n * rhs


def _linalg(formula: Callable[[TracedOp], int]) -> FlopFormula:
    return lambda op: FlopCount(tensor=formula(op), kind=MatmulKind.MATMUL)


def _rhs(op: TracedOp) -> int:
    """Right-hand sides per system of a solve with A (…, n, n) and B (…, n, k) or (…, n);
    (…, k, n) for ``left=False`` (X·A = B)."""
    matrix, rhs = op.args[0], op.args[1]
    if rhs.dim() == matrix.dim() - 1:
        return 1
    return rhs.shape[-2] if op.argument("left") is False else rhs.shape[-1]


@register([aten.linalg_lu_factor_ex, aten.linalg_lu, aten._linalg_det, aten._linalg_slogdet],
          Category.COMPUTE, fusible=False)
@_linalg
def lu_factor_flops(op: TracedOp) -> int:
    """LU with partial pivoting (a determinant is its diagonal's product: n more multiplies,
    not counted)."""
    batch, rows, columns = _matrices(op.args[0])
    return batch * lu_flops(rows, columns)


@register([aten._linalg_solve_ex], Category.COMPUTE, fusible=False)
@_linalg
def solve_flops(op: TracedOp) -> int:
    """gesv: LU of A then substitution for each right-hand side."""
    batch, n, _ = _matrices(op.args[0])
    return batch * (lu_flops(n, n) + lu_solve_flops(n, _rhs(op)))


def _substitution_flops(factor: torch.Tensor, rhs: torch.Tensor) -> int:
    """A solve with factors already computed (LU or Cholesky): forward and back substitution,
    2·n²·k − n·k per system."""
    n = factor.shape[-1]
    return math.prod(rhs.shape) // n * lu_solve_flops(n, 1)


@register([aten.linalg_lu_solve], Category.COMPUTE, fusible=False)
@_linalg
def lu_factored_solve_flops(op: TracedOp) -> int:
    """``linalg_lu_solve(LU, pivots, B)``: substitution with the LU factors."""
    return _substitution_flops(op.args[0], op.args[2])


@register([aten.cholesky_solve, aten._cholesky_solve_helper], Category.COMPUTE, fusible=False)
@_linalg
def cholesky_factored_solve_flops(op: TracedOp) -> int:
    """``cholesky_solve(B, L)``: substitution with the Cholesky factor."""
    return _substitution_flops(op.args[1], op.args[0])


@register([aten.cholesky_inverse], Category.COMPUTE, fusible=False)
@_linalg
def cholesky_inverse_flops(op: TracedOp) -> int:
    """potri, the inverse from a Cholesky factor: 2n³/3 + n²/2 + 5n/6."""
    batch, n, _ = _matrices(op.args[0])
    return batch * ((4 * n**3 + 3 * n * n + 5 * n) // 6)


@register([aten.linalg_eig], Category.COMPUTE, fusible=False)
@_linalg
def eig_flops(op: TracedOp) -> int:
    """General eigendecomposition: every dense method first reduces to Hessenberg form, gehrd,
    10n³/3 (Golub & Van Loan §7.4.3; the QR iterations and eigenvectors are not counted)."""
    batch, n, _ = _matrices(op.args[0])
    return batch * (10 * n**3) // 3


@register([aten.linalg_inv_ex], Category.COMPUTE, fusible=False)
@_linalg
def inverse_flops(op: TracedOp) -> int:
    """getrf + getri (inverse from the LU factors): 2·n³ − 3n²/2 + 5n/2 in all, less than
    solving against the identity (8n³/3)."""
    batch, n, _ = _matrices(op.args[0])
    return batch * ((4 * n**3 - 3 * n * n + 5 * n) // 2)


@register([aten.linalg_cholesky_ex, aten.cholesky], Category.COMPUTE, fusible=False)
@_linalg
def cholesky_flops(op: TracedOp) -> int:
    """potrf: n³/3 + n²/2 + n/6."""
    batch, n, _ = _matrices(op.args[0])
    return batch * ((2 * n**3 + 3 * n * n + n) // 6)


@register([aten.triangular_solve, aten.linalg_solve_triangular], Category.COMPUTE, fusible=False)
@_linalg
def triangular_solve_flops(op: TracedOp) -> int:
    """trsm: n²·k for an n×n triangle and k right-hand sides (n·(n − 1)·k when unitriangular:
    no divides). Every right-hand-side column (or row, ``left=False``) costs the same, so the
    count is n (or n − 1) per element of the solution."""
    triangle = op.argument("A")  # triangular_solve(B, A); linalg_solve_triangular(A, B)
    triangle = op.args[0] if triangle is None else triangle
    n = triangle.shape[-1]
    per_element = n - 1 if op.argument("unitriangular") else n
    solution = op.output[0] if isinstance(op.output, (tuple, list)) else op.output
    return solution.numel() * per_element


@register([aten.linalg_qr, aten.geqrf, aten.linalg_lstsq], Category.COMPUTE, fusible=False)
@_linalg
def qr_flops(op: TracedOp) -> int:
    """geqrf, Householder QR of an m×n matrix: 2·M·k² − 2k³/3 (k = min, M = max; the lower-order
    terms are positive). Forming Q explicitly costs more and is not counted; a least-squares
    solve (``linalg_lstsq``) is charged its QR alone."""
    batch, rows, columns = _matrices(op.args[0])
    k, big = min(rows, columns), max(rows, columns)
    return batch * (2 * big * k * k - (2 * k**3) // 3)


@register([aten._linalg_eigh], Category.COMPUTE, fusible=False)
@_linalg
def eigh_flops(op: TracedOp) -> int:
    """Symmetric eigendecomposition: every dense method first reduces to tridiagonal form, sytrd,
    4n³/3 (eigenvectors cost more and are not counted)."""
    batch, n, _ = _matrices(op.args[0])
    return batch * (4 * n**3) // 3


@register([aten._linalg_svd], Category.COMPUTE, fusible=False)
@_linalg
def svd_flops(op: TracedOp) -> int:
    """SVD: reduction to bidiagonal form, the cheaper of gebrd on the m×n matrix (4·M·k² −
    4k³/3) and a QR first then gebrd on the k×k factor (2·M·k² + 2k³), less M·k for the
    negative lower-order term of gebrd; singular vectors are not counted."""
    batch, rows, columns = _matrices(op.args[0])
    k, big = min(rows, columns), max(rows, columns)
    direct = 4 * big * k * k - (4 * k**3) // 3
    qr_first = 2 * big * k * k + 2 * k**3
    return batch * max(0, min(direct, qr_first) - big * k)


@register([aten.affine_grid_generator], Category.COMPUTE, fusible=False)
def affine_grid_flops(op: TracedOp) -> FlopCount:
    """Each grid point is θ (2×3 or 3×4) times (x, y[, z], 1): per output coordinate one multiply-
    add per spatial input and one add for the translation, 2·s FLOPs for s spatial dims (4 in
    2-D). Run as a batched matmul in PyTorch, so charged at the matmul unit."""
    spatial = op.output.shape[-1]
    return FlopCount(tensor=2 * spatial * _numel(op.output), kind=MatmulKind.MATMUL)


#: a linalg op's error check: reads one int32 status per matrix
register([aten._linalg_check_errors], Category.DATA_MOVEMENT, fusible=False)(
    NoArithmetic("checks one status per matrix: no arithmetic")
)
