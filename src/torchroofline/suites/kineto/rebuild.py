"""Rebuild a traced op as a one-op program on shape-only tensors, from its record_shapes fields.

``record_shapes=True`` writes, per ``cpu_op``, one entry per schema argument in four parallel
lists: ``Input Dims`` (a tensor's sizes, a tensor list's sizes per tensor), ``Input type``
(the dtype's C++ name, or ``Scalar``, ``ScalarList``, ``TensorList``, ``""`` for None),
``Input Strides`` and ``Concrete Inputs`` (a scalar's value as text). From them we pick the
aten overload whose schema they fit, make each tensor as a ``meta`` tensor of those sizes,
strides and dtype, and parse each scalar by its schema type. What the trace leaves out is
assumed and said: contiguous strides where it has none, the schema default where a scalar's
value is missing, the trace's main float dtype for the tensors of a list (their dtypes are not
recorded).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

aten = torch.ops.aten

#: ``Input type`` names of tensor dtypes (the C++ names record_shapes writes) → dtype.
TENSOR_TYPES: dict[str, torch.dtype] = {
    "float": torch.float32,
    "double": torch.float64,
    "c10::Half": torch.float16,
    "c10::BFloat16": torch.bfloat16,
    "c10::Float8_e4m3fn": torch.float8_e4m3fn,
    "c10::Float8_e5m2": torch.float8_e5m2,
    "c10::Float8_e4m3fnuz": torch.float8_e4m3fnuz,
    "c10::Float8_e5m2fnuz": torch.float8_e5m2fnuz,
    "c10::complex<float>": torch.complex64,
    "c10::complex<double>": torch.complex128,
    "bool": torch.bool,
    "unsigned char": torch.uint8,
    "signed char": torch.int8,
    "short int": torch.int16,
    "int": torch.int32,
    "long int": torch.int64,
    "long": torch.int64,  # as some releases record it (HTA's A100 trace)
}

#: c10::ScalarType codes (the order of ``AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS`` in
#: c10/core/ScalarType.h): a dtype argument is recorded as its code (``Scalar`` "15": bf16).
SCALAR_TYPE_CODES: dict[int, torch.dtype] = {
    0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64,
    5: torch.float16, 6: torch.float32, 7: torch.float64, 9: torch.complex64,
    10: torch.complex128, 11: torch.bool, 15: torch.bfloat16, 23: torch.float8_e5m2,
    24: torch.float8_e4m3fn, 25: torch.float8_e5m2fnuz, 26: torch.float8_e4m3fnuz,
}

def _convolution(transposed: bool, has_bias: bool) -> Callable[..., Any]:
    """A cuDNN or MIOpen convolution spelled as ``aten.convolution`` (those backend ops have
    no meta kernel; the work is the same). The backend schemas order padding before stride."""

    def call(input_: Any, weight: Any, *rest: Any) -> Any:
        bias, rest = (rest[0], rest[1:]) if has_bias else (None, rest)
        padding, rest = rest[0], rest[1:]
        output_padding, rest = (rest[0], rest[1:]) if transposed else (None, rest)
        stride, dilation, groups = rest[:3]
        return aten.convolution.default(
            input_, weight, bias, stride, padding, dilation, transposed,
            output_padding or [0] * len(stride), groups,
        )

    return call


def _no_window(*sizes: int | None) -> bool:
    return all(size is None or size < 0 for size in sizes)


def _flash_attention(query: Any, key: Any, value: Any, cum_seq_q: Any, cum_seq_k: Any,
                     *rest: Any, **options: Any) -> Any:
    """``aten::_flash_attention_forward`` (batch, length, heads, E) as the SDPA call it serves,
    whose rule counts both matmuls in (batch, heads, length, E) and keeps a causal mask's half;
    packed variable-length batches and sliding windows keep their own op."""
    max_q, max_k, dropout_p, is_causal = rest[:4]
    if cum_seq_q is not None or not _no_window(options.get("window_size_left"),
                                                options.get("window_size_right")):
        return aten._flash_attention_forward.default(
            query, key, value, cum_seq_q, cum_seq_k, *rest, **options
        )
    return F.scaled_dot_product_attention(
        query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
        dropout_p=dropout_p, is_causal=is_causal, scale=options.get("scale"),
    )


def _efficient_attention(query: Any, key: Any, value: Any, bias: Any, cu_seqlens_q: Any,
                         *rest: Any, **options: Any) -> Any:
    """``aten::_efficient_attention_forward`` likewise (``custom_mask_type`` 1 and 2 are causal
    masks, top-left and bottom-right aligned; the SDPA rule keeps the top-left one's entries,
    no more than either keeps)."""
    custom_mask_type, dropout_p = rest[4], rest[3]
    if cu_seqlens_q is not None or not _no_window(options.get("window_size")):
        return aten._efficient_attention_forward.default(
            query, key, value, bias, cu_seqlens_q, *rest, **options
        )
    return F.scaled_dot_product_attention(
        query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), attn_mask=bias,
        dropout_p=dropout_p, is_causal=bool(custom_mask_type), scale=options.get("scale"),
    )


#: Ops rebuilt through another call than their own aten overload, and why.
#: ``aten::scaled_dot_product_attention`` is one fused kernel on a GPU, which the tracer records
#: only when it sees the ``F.scaled_dot_product_attention`` call (on a CPU build the aten op
#: decomposes into the math path's matmuls and softmax); same argument order as the schema.
#: The flash and memory-efficient attention kernels' own ops likewise (:func:`_flash_attention`).
#: The cuDNN and MIOpen convolutions have no meta kernel: see :func:`_convolution`.
SUBSTITUTES: dict[str, Callable[..., Any]] = {
    "aten::scaled_dot_product_attention": F.scaled_dot_product_attention,
    "aten::_flash_attention_forward": _flash_attention,
    "aten::_efficient_attention_forward": _efficient_attention,
    "aten::cudnn_convolution": _convolution(transposed=False, has_bias=False),
    "aten::cudnn_convolution_transpose": _convolution(transposed=True, has_bias=False),
    "aten::miopen_convolution": _convolution(transposed=False, has_bias=True),
    "aten::miopen_depthwise_convolution": _convolution(transposed=False, has_bias=True),
    "aten::miopen_convolution_transpose": _convolution(transposed=True, has_bias=True),
}


class RebuildError(Exception):
    """Why an op cannot be rebuilt (one line, shown beside the op in the report)."""


@dataclass(frozen=True)
class Rebuilt:
    """An op as a callable with its tensors: ``module(*tensors)`` runs it once."""

    overload: str  #: e.g. ``"aten.addmm.default"``
    module: nn.Module
    tensors: tuple[torch.Tensor, ...]
    assumed: tuple[str, ...]  #: what the trace did not say, each as a short phrase


@dataclass(frozen=True)
class _Kind:
    """An argument's schema type, as the trace must record it."""

    recorded: str  #: "tensor", "tensors", "scalars" or "scalar"
    parse: Callable[[str], Any]
    optional: bool


def _boolean(text: str) -> bool:
    if text not in ("True", "False", "1", "0", "true", "false"):
        raise ValueError(text)
    return text in ("True", "1", "true")


def _number(text: str) -> int | float | bool:
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        return float(text)


def _dtype(text: str) -> torch.dtype:
    return SCALAR_TYPE_CODES[int(text)]


def _literal_list(text: str) -> list:
    value = ast.literal_eval(text)
    if not isinstance(value, (list, tuple)):
        raise ValueError(text)
    return list(value)


#: c10::Layout and c10::MemoryFormat codes (c10/core/Layout.h, MemoryFormat.h) as recorded.
LAYOUT_CODES = {0: torch.strided}
MEMORY_FORMAT_CODES = {
    0: torch.contiguous_format, 1: torch.preserve_format, 2: torch.channels_last,
    3: torch.channels_last_3d,
}


def _unparsed(text: str) -> Any:
    raise ValueError(f"no value of this type is rebuilt from text ({text!r})")


#: Schema scalar types → how their recorded text is parsed.
_SCALAR_PARSERS: dict[str, Callable[[str], Any]] = {
    "int": int, "SymInt": int, "float": float, "bool": _boolean, "Scalar": _number,
    "number": _number, "str": str, "ScalarType": _dtype,
    "Layout": lambda text: LAYOUT_CODES[int(text)],
    "MemoryFormat": lambda text: MEMORY_FORMAT_CODES[int(text)],
    "Device": torch.device,
}


def _kind(type_text: str) -> _Kind:
    optional = type_text.startswith("Optional[")
    inner = type_text[len("Optional["):-1] if optional else type_text
    if inner == "Tensor":
        return _Kind("tensor", _unparsed, optional)
    if inner.startswith("List[") and "Tensor" in inner:
        return _Kind("tensors", _unparsed, optional)
    if inner.startswith("List["):
        return _Kind("scalars", _literal_list, optional)
    return _Kind("scalar", _SCALAR_PARSERS.get(inner, _unparsed), optional)


def _recorded_kind(type_name: str) -> str | None:
    """What the trace says an input is: a tensor, a list, a scalar, or None (``""``)."""
    if type_name in ("Scalar",):
        return "scalar"
    if type_name in ("ScalarList", "GenericList"):
        return "scalars"
    if type_name == "TensorList":
        return "tensors"
    return None if type_name == "" else "tensor"


@dataclass(frozen=True)
class _Inputs:
    """One op's record_shapes fields, padded to one entry per recorded input."""

    dims: tuple
    types: tuple[str, ...]
    strides: tuple | None
    concrete: tuple[str, ...] | None

    @classmethod
    def of(cls, args: Mapping[str, Any]) -> _Inputs:
        if "Input Dims" not in args:
            raise RebuildError("no Input Dims: the trace was recorded without record_shapes")
        dims = tuple(args["Input Dims"])
        types = tuple(args.get("Input type") or [""] * len(dims))
        strides = args.get("Input Strides")
        concrete = args.get("Concrete Inputs")
        return cls(
            dims, types,
            tuple(strides) if strides and len(strides) == len(dims) else None,
            tuple(concrete) if concrete and len(concrete) == len(dims) else None,
        )


def _fits(schema: Any, inputs: _Inputs) -> bool:
    arguments = schema.arguments
    if len(inputs.types) > len(arguments):
        return False
    for position, argument in enumerate(arguments):
        kind = _kind(str(argument.real_type))
        if position >= len(inputs.types):
            if not (argument.has_default_value() or kind.optional):
                return False
            continue
        recorded = _recorded_kind(inputs.types[position])
        if recorded is None:  # None, or a value record_shapes leaves blank (a str)
            if not (kind.optional or argument.has_default_value()):
                return False
        elif recorded != kind.recorded:
            return False
    return True


def _overloads(name: str, inputs: _Inputs) -> list[Any]:
    """The aten overloads whose schemas the recorded inputs fit: those with as many arguments
    as were recorded first, ``out=`` variants (an op called with ``out=`` records its output
    among its inputs) last, each group in torch's order."""
    namespace, _, op_name = name.partition("::")
    packet = getattr(getattr(torch.ops, namespace, None), op_name, None) if op_name else None
    if packet is None:
        raise RebuildError(f"{name} is no op of the installed PyTorch")
    fitting = [getattr(packet, overload) for overload in packet.overloads()]
    fitting = [overload for overload in fitting if _fits(overload._schema, inputs)]
    if not fitting:
        raise RebuildError(f"no schema of {name} fits its recorded inputs {list(inputs.types)}")
    return sorted(fitting, key=lambda overload: (
        any(argument.is_out for argument in overload._schema.arguments),
        len(overload._schema.arguments) != len(inputs.types),
    ))


def _strides(sizes: Sequence[int], strides: Any, assumed: list[str]) -> tuple[int, ...] | None:
    if isinstance(strides, (list, tuple)) and len(strides) == len(sizes) and all(
        isinstance(s, int) for s in strides
    ):
        return tuple(strides)
    assumed.append("contiguous strides")
    return None


def _tensor(sizes: Sequence[int], strides: Any, dtype: torch.dtype, assumed: list[str]
            ) -> torch.Tensor:
    if not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise RebuildError(f"tensor sizes {sizes} are not whole numbers")
    kept = _strides(sizes, strides, assumed)
    if kept is None:
        return torch.empty(tuple(sizes), dtype=dtype, device="meta")
    return torch.empty_strided(tuple(sizes), kept, dtype=dtype, device="meta")


class _OneOp(nn.Module):
    """``forward(*tensors)`` calls the op with its arguments, the tensors put back in place."""

    def __init__(self, call: Callable[..., Any], layout: tuple, keywords: dict[str, Any]) -> None:
        super().__init__()
        self.call, self.layout, self.keywords = call, layout, keywords

    def forward(self, *tensors: torch.Tensor) -> Any:
        taken = iter(tensors)

        def placed(slot: Any) -> Any:
            if isinstance(slot, _Slot):
                return next(taken)
            if isinstance(slot, list):
                return [placed(item) for item in slot]
            return slot

        positional = [placed(slot) for slot in self.layout]  # schema order: these first
        keywords = {name: placed(slot) for name, slot in self.keywords.items()}
        return self.call(*positional, **keywords)


class _Slot:
    """Where one input tensor goes among the arguments."""


def rebuild(name: str, args: Mapping[str, Any], list_dtype: torch.dtype) -> Rebuilt:
    """The op ``name`` (e.g. ``"aten::addmm"``) as a one-op module and its meta tensors, from
    its record_shapes ``args``. ``list_dtype``: the dtype assumed for the tensors of a tensor
    list (the trace writes none). Raises :class:`RebuildError` where that cannot be done."""
    inputs = _Inputs.of(args)
    failures = []
    for overload in _overloads(name, inputs):
        try:
            return _rebuilt(name, overload, inputs, list_dtype)
        except RebuildError as error:  # a value this schema cannot take: try the next one
            failures.append(error)
    raise failures[0]


def _rebuilt(name: str, overload: Any, inputs: _Inputs, list_dtype: torch.dtype) -> Rebuilt:
    assumed: list[str] = [] if inputs.concrete is not None else ["no Concrete Inputs"]
    layout: list[Any] = []
    keywords: dict[str, Any] = {}
    tensors: list[torch.Tensor] = []
    for position, argument in enumerate(overload._schema.arguments):
        value = _argument(position, argument, inputs, list_dtype, tensors, assumed)
        if argument.kwarg_only:
            keywords[argument.name] = value
        else:
            layout.append(value)
    call = SUBSTITUTES.get(name, overload)
    return Rebuilt(
        overload=str(overload),
        module=_OneOp(call, tuple(layout), keywords),
        tensors=tuple(tensors),
        assumed=tuple(dict.fromkeys(assumed)),
    )


def _argument(position: int, argument: Any, inputs: _Inputs, list_dtype: torch.dtype,
              tensors: list[torch.Tensor], assumed: list[str]) -> Any:
    """One argument's value: a slot for a tensor (its meta tensor appended to ``tensors``),
    a parsed scalar, or the schema default."""
    kind = _kind(str(argument.real_type))
    if position >= len(inputs.types):  # an argument newer than the release that recorded
        return _default(argument, [])  # the trace: its default is what that release ran
    type_name, sizes = inputs.types[position], inputs.dims[position]
    strides = inputs.strides[position] if inputs.strides else None
    recorded = _recorded_kind(type_name)
    if recorded is None:
        return None if kind.optional else _default(argument, assumed)
    if recorded == "tensor":
        tensors.append(_tensor(sizes, strides, _tensor_dtype(type_name), assumed))
        return _Slot()
    if recorded == "tensors":
        if not sizes:  # the op launched GPU work, so its list held tensors the trace left out
            raise RebuildError("the trace records no shapes for its tensor lists")
        if list_dtype is not None:
            assumed.append(f"list tensors in {str(list_dtype).removeprefix('torch.')}")
        tensors.extend(
            _tensor(s, (strides or [None] * len(sizes))[i], list_dtype, assumed)
            for i, s in enumerate(sizes)
        )
        return [_Slot() for _ in sizes]
    text = inputs.concrete[position] if inputs.concrete else ""
    if text == "":
        return _default(argument, assumed)
    try:
        return kind.parse(text)
    except (ValueError, KeyError, SyntaxError):
        raise RebuildError(
            f"argument {argument.name} = {text!r} is not a {argument.real_type}"
        ) from None


def _tensor_dtype(type_name: str) -> torch.dtype:
    dtype = TENSOR_TYPES.get(type_name)
    if dtype is None:
        raise RebuildError(f"tensor dtype {type_name!r} is not one we rebuild")
    return dtype


def _default(argument: Any, assumed: list[str]) -> Any:
    if argument.has_default_value():
        # "approximate at its default" left the reader to look the default up
        assumed.append(f"{argument.name}={argument.default_value!r}, its default")
        return argument.default_value
    if _kind(str(argument.real_type)).optional:
        return None
    raise RebuildError(f"the trace gives no value for {argument.name}, which has no default")
