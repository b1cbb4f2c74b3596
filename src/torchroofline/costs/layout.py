"""Rules of the layout ops: views and metadata (no kernel), and the copies that move elements to
new positions (concatenation, padding, repeats, flips, shuffles)."""

from __future__ import annotations

from ..trace.aten_ops import aten
from ._core import (
    LAYOUT_COPIES,
    VIEWS,
    Category,
    _template_unread,
    register,
)

# --- Zero-copy: views, aliases, metadata, allocation without a write --------------------------

register(
    [
        aten.view, aten._unsafe_view, aten.reshape, aten.permute, aten.transpose, aten.t,
        aten.expand, aten.squeeze,
        aten.unsqueeze, aten.slice, aten.select, aten.alias, aten.detach, aten.as_strided,
        aten.unbind, aten.split,
        aten.split_with_sizes, aten.chunk, aten.unsafe_split, aten.unsafe_split_with_sizes,
        aten.narrow, aten.view_as_real, aten.view_as_complex, aten.unfold, aten.diagonal,
        aten.movedim,
        aten.lift_fresh, aten.empty, aten.empty_strided, aten._reshape_alias, aten.unflatten,
        aten.flatten,
        aten.expand_as, aten.view_as, aten.resize, aten.resize_as, aten._resize_output, aten.set,
        aten.sym_size,
        aten.sym_stride, aten.sym_numel, aten._local_scalar_dense, aten.empty_permuted, aten._conj,
        aten._neg_view,
    ],
    Category.ZERO_COPY,
    fusible=False,
)(VIEWS)
register(
    [aten.empty_like, aten.new_empty, aten.new_empty_strided],
    Category.ZERO_COPY,
    fusible=False,
    reads=_template_unread,
)(VIEWS)


register(
    [
        aten.cat, aten.stack, aten._stack, aten._chunk_cat, aten.lu_unpack, aten.constant_pad_nd,
        aten.pad, aten.reflection_pad1d, aten.reflection_pad2d, aten.reflection_pad3d,
        aten.replication_pad1d, aten.replication_pad2d, aten.replication_pad3d,
        aten.repeat, aten.roll, aten.flip, aten.slice_scatter,
        aten.select_scatter, aten.as_strided_scatter, aten.diagonal_scatter,
        aten.pixel_shuffle, aten.pixel_unshuffle, aten.im2col,
        aten.masked_select, aten.repeat_interleave, aten.channel_shuffle,
        aten.native_channel_shuffle, aten.diag_embed, aten.diag, aten.diagflat, aten.rot90,
        aten.block_diag,
    ],
    Category.DATA_MOVEMENT,
    fusible=True,
)(LAYOUT_COPIES)

#: Views made copies (functionalised programs, ``narrow_copy``, ``unfold_copy``): each output
#: element copies one element of the first argument, read once whatever the views overlap.
VIEW_COPIES = [
    aten.narrow_copy, aten.unfold_copy, aten.slice_copy, aten.select_copy, aten.permute_copy,
    aten.transpose_copy, aten.t_copy, aten.expand_copy, aten.view_copy, aten._reshape_copy,
    aten.squeeze_copy, aten.unsqueeze_copy, aten.alias_copy, aten.detach_copy,
    aten.split_copy, aten.split_with_sizes_copy, aten.unbind_copy,
]
register(VIEW_COPIES, Category.DATA_MOVEMENT, fusible=True)(LAYOUT_COPIES)
