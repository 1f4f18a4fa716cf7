"""How a case's tensors leave the kernel's process for the judge (see verify/judge.py).

The kernel's process packs each tensor into plain bytes plus its dtype and shape, with functions
bound here at import time, before kernel.py is imported: the C methods of ``torch._C.TensorBase``
(not the patchable attributes of ``torch.Tensor``), under ``torch._C.DisableTorchFunction`` (so a
tensor subclass or a torch function mode cannot answer for the tensor), C pickle and ``os.write``.
A kernel.py that later patches ``torch.Tensor.cpu``, ``torch.save``, ``pickle.dumps`` or
``builtins`` does not change what is sent. The judge unpacks with its own, untouched torch.

Frames on the pipe: one kind byte, an 8-byte little-endian length, the payload.
    b"E"  an event as JSON text, relayed to the parent after the judge has looked at it
    b"C"  a case to judge: a pickled dict of plain values (CaseData.pack)
    b"G"  the GPU gate: the judge passes the parent's next stdin line on once it comes ("the GPU is
          yours": the workers of the run's verification have exited), so that a benchmark started early
          begins timing only then
"""

from __future__ import annotations

import _pickle
import os
import struct
from dataclasses import dataclass, field, fields
from math import prod
from typing import Any

import numpy
import torch

EVENT, CASE, GATE = b"E", b"C", b"G"

# Bound now, before any kernel.py runs in this process.
_TB = torch._C.TensorBase
_detach, _cpu, _contiguous, _reshape, _view = _TB.detach, _TB.cpu, _TB.contiguous, _TB.reshape, _TB.view
_numpy, _size, _numel = _TB.numpy, _TB.size, _TB.numel
_dtype_of = _TB.dtype.__get__
_tobytes = numpy.ndarray.tobytes
_no_torch_function = torch._C.DisableTorchFunction
_dumps, _loads = _pickle.dumps, _pickle.loads
_write, _read = os.write, os.read
_pack_header, _unpack_header = struct.Struct("<cQ").pack, struct.Struct("<cQ").unpack
_type, _tuple, _str, _len, _memoryview, _id = type, tuple, str, len, memoryview, id
_Tensor, _uint8, _int32 = torch.Tensor, torch.uint8, torch.int32
_VF = torch._C._VariableFunctions
_randint, _take, _isnan, _logical_and, _logical_not = (_VF.randint, _VF.take, _VF.isnan, _VF.logical_and,
                                                       _VF.logical_not)
_sum, _item, _to, _narrow = _TB.sum, _TB.item, _TB.to, _TB.narrow
_clone, _stride, _contiguous_format = _TB.clone, _TB.stride, torch.contiguous_format
_device_of = _TB.device.__get__
_Generator, _urandom, _int_from_bytes = torch.Generator, os.urandom, int.from_bytes

SAMPLE_ELEMENTS = 1 << 20  # a benchmark-sized output is judged on this many elements drawn at random


def pack_tensor(t: Any) -> dict[str, Any]:
    """A tensor as plain values: dtype name, shape, raw bytes (a CPU copy), and whether it was a plain Tensor."""
    exact = _type(t) is _Tensor
    with _no_torch_function():
        c = _contiguous(_cpu(_detach(t)))
        shape = _tuple(_size(c))
        flat = _reshape(c, (-1,))
        if _stride(flat)[0] != 1:  # one element, any stride: "contiguous" as it is, yet no byte view of it
            flat = _clone(flat, memory_format=_contiguous_format)
        data = _tobytes(_numpy(_view(flat, _uint8))) if _numel(c) else b""
        return {"dtype": _str(_dtype_of(c)).replace("torch.", ""), "shape": shape, "data": data, "exact": exact}


def unpack_tensor(packed: dict[str, Any]) -> torch.Tensor:
    dtype = getattr(torch, packed["dtype"])
    if not packed["data"]:
        return torch.empty(packed["shape"], dtype=dtype)
    return torch.frombuffer(bytearray(packed["data"]), dtype=torch.uint8).view(dtype).reshape(packed["shape"])


@dataclass
class ExtraRun:
    """One more call of kernel_fn, judged against its own reference (fresh inputs, recycled addresses,
    torch.compile, CUDA-graph replay). `error` says why it produced no outputs."""

    name: str
    hint: str = ""  # what a failure here suggests
    key: str = ""  # a compatibility check's: what its finding depends on (compat.finding_key); kept when it passes
    kept: str = ""  # ... passed in an earlier run with the same key, not run again: when (compat.KeptFindings)
    outputs: list[Any] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    reference: list[Any] = field(default_factory=list)
    reference_names: list[str] = field(default_factory=list)  # the reference's output names (CaseData's)
    native: list[Any] = field(default_factory=list)  # reference_fn on the inputs' own dtype (CaseData.native)
    rounded: list[Any] = field(default_factory=list)  # ... in float64 on them rounded once more (CaseData.rounded)
    error: str = ""
    skipped: str = ""  # why it did not run
    compat: bool = False  # a compatibility check (verify/compat.py): a finding beside the verdict
    required: bool = False  # ... that fails the verdict all the same ([verify] <name> = "require")
    detail: str = ""  # the whole error, where `error` is its line
    refused: str = ""  # kernel_fn refused what this run handed it, before any launch (verify/layouts.py)
    notes: list[str] = field(default_factory=list)  # what the run noticed beside its outcome (compiled_context.py)
    # The torch.compile check left to its own process (verify/compat_beside.Pending): taken in before the case
    # goes to the judge (compat.finish_beside), so never part of what is handed over
    pending: Any = None


TENSOR_LISTS = ("first", "second", "reference", "native", "rounded", "before", "after", "sample_index")
RUN_TENSOR_LISTS = ("outputs", "reference", "native", "rounded")


@dataclass
class CaseData:
    """Everything the judge needs to give one case (under one config) its verdict."""

    case_index: int
    label: str
    config: str = ""
    generated: bool = False
    phase: str = ""  # CaseResult.phase
    stress: str = ""  # the value stress on the inputs (verify/value_stress.py), said in a failure's notes
    status: str = "compare"  # compare | error | skipped (the last two carry their messages)
    messages: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # said beside the verdict, never failing it (CaseResult's)
    first: list[Any] = field(default_factory=list)  # outputs of the first run (allocations NaN-filled)
    second: list[Any] = field(default_factory=list)  # of the second run (sentinel-filled); [] for one run
    names: list[str] = field(default_factory=list)
    reference: list[Any] = field(default_factory=list)  # reference_fn on upcast inputs
    # the reference's output names (tensors.flatten_outputs): a kernel's output is matched to the reference's of
    # the same name (a dict key); [] pairs them by position
    reference_names: list[str] = field(default_factory=list)
    # reference_fn on the inputs as given: its distance from `reference` is torch's own error in the inputs'
    # dtype, the error model's measure (verify/error_model.py); [] when not run
    native: list[Any] = field(default_factory=list)
    # reference_fn in float64 on the inputs rounded once more: its distance from `reference` is what one more
    # rounding in the inputs' dtype costs (error_model.rounded_once_more); [] when not run
    rounded: list[Any] = field(default_factory=list)
    expected_dtypes: list[str] = field(default_factory=list)  # reference_fn's output dtypes on the inputs as given
    before: list[Any] = field(default_factory=list)  # input tensors before the kernel ran (None for scalars)
    after: list[Any] = field(default_factory=list)  # the same inputs after the first run
    aliases: list[str] = field(default_factory=list)  # "output[0] and input #1": outputs sharing an input's memory
    launches: int | None = None  # Triton kernel launches in one call of kernel_fn (None: not counted)
    # outputs torch computed with no Triton kernel's data in them: "output[0]: aten.add.Tensor, aten.mul.Tensor"
    # (verify/torchops.py); torch_ops_unknown: why they were not followed ("": they were, or not asked)
    torch_ops: list[str] = field(default_factory=list)
    out_of_bounds: list[str] = field(default_factory=list)  # stores found in the guard margins (verify/guards.py)
    torch_ops_unknown: str = ""
    # a check's own evidence, by its key: plain data (what json.dumps takes) its unit gathered (verify/checks/)
    evidence: dict[str, Any] = field(default_factory=dict)
    # the checks plugins add that ran on this case, for the judge to decide: {key: "module:attribute"}
    added_checks: dict[str, str] = field(default_factory=dict)
    extra_runs: list[ExtraRun] = field(default_factory=list)
    mutation_hints: list[str] = field(default_factory=list)  # notes for a case that fails having changed an input
    # kernel.py's @triton.jit code calls tl.dot, which multiplies float32 in TF32 by default: a float32 output
    # failing by TF32-sized errors is said to be that (checks/outputs.OutputsCompared.tf32_hint)
    dot_may_use_tf32: bool = False
    checks: dict[str, str] = field(default_factory=dict)  # outcomes decided in the kernel's process (skips)
    duration_s: float = 0.0
    not_plain: list[int] = field(default_factory=list)  # outputs that were no plain torch.Tensor (also set on unpack)
    # A benchmark-sized case is judged on a sample (sample()): the whole tensors' shapes, and their NaN
    # where the reference has a number, come beside it; empty lists: `first` and `reference` are whole.
    output_shapes: list[tuple[int, ...]] = field(default_factory=list)
    reference_shapes: list[tuple[int, ...]] = field(default_factory=list)
    nan_where_reference_has_none: list[int] = field(default_factory=list)
    sample_index: list[Any] = field(default_factory=list)  # per output: the flat indices judged, or None (whole)

    @property
    def sampled_from(self) -> int:
        """Elements of the largest output judged on a sample (0: every output was judged whole)."""
        return max((prod(shape) for shape, index in zip(self.output_shapes, self.sample_index) if index is not None),
                   default=0)

    def sample(self, outputs: list[Any], reference: list[Any], limit: int = SAMPLE_ELEMENTS,
               native: list[Any] | None = None, rounded: list[Any] | None = None) -> None:
        """Set `first`, `reference`, `native` and `rounded` to same-index random samples of each output and its
        references (the whole tensors when small), with the whole tensors' shapes and NaN count beside them;
        computed with the functions bound above, on the outputs' device."""
        native, rounded = list(native or []), list(rounded or [])
        with _no_torch_function():
            self.output_shapes = [_tuple(_size(t)) for t in outputs]
            self.reference_shapes = [_tuple(_size(t)) for t in reference]
            self.not_plain = [i for i, t in enumerate(outputs) if _type(t) is not _Tensor]
            self.first, self.reference, self.native, self.rounded = [], [], [], []
            self.nan_where_reference_has_none, self.sample_index = [], []
            for i, out in enumerate(outputs):
                ref = reference[i] if i < _len(reference) else None
                own = native[i] if i < _len(native) else None
                moved = rounded[i] if i < _len(rounded) else None
                index = None
                if ref is None or self.reference_shapes[i] != self.output_shapes[i]:
                    # the judge reports the count or the shapes from the fields above; no values to compare
                    nan, out = 0, _narrow(_reshape(out, (-1,)), 0, 0, 0)
                    ref = None if ref is None else _narrow(_reshape(ref, (-1,)), 0, 0, 0)
                    own = moved = None
                else:
                    ref = _to(ref, _device_of(out))
                    shape = self.output_shapes[i]
                    own, moved = (_to(t, _device_of(out)) if t is not None and _tuple(_size(t)) == shape else None
                                  for t in (own, moved))
                    nan = _item(_sum(_logical_and(_isnan(out), _logical_not(_isnan(ref)))))
                    if _numel(out) > limit:
                        generator = _Generator(device=_device_of(out))
                        generator.manual_seed(_int_from_bytes(_urandom(8), "little") >> 1)
                        index = _randint(_numel(out), (limit,), generator=generator, device=_device_of(out))
                        own = None if own is None else _take(own, index)
                        moved = None if moved is None else _take(moved, index)
                        if _numel(out) < 2 ** 31:  # an int32 index: half the bytes to hand over
                            out, ref, index = _take(out, index), _take(ref, index), _to(index, _int32)
                        else:
                            out, ref = _take(out, index), _take(ref, index)
                self.first.append(out)
                if ref is not None:
                    self.reference.append(ref)
                    self.native.append(own)
                    self.rounded.append(moved)
                self.nan_where_reference_has_none.append(nan)
                self.sample_index.append(index)
            self.reference += reference[_len(outputs):]
            if not any(t is not None for t in self.native):
                self.native = []
            if not any(t is not None for t in self.rounded):
                self.rounded = []

    def to_host(self) -> None:
        """Copy the sampled tensors to host memory now (the bound functions above), so that packing them
        later, on another thread, moves nothing on the GPU (a benchmark times the kernel meanwhile)."""
        with _no_torch_function():
            for name in ("first", "reference", "native", "rounded", "sample_index"):
                setattr(self, name, [None if t is None else _cpu(_detach(t)) for t in getattr(self, name)])

    # -- the wire ---------------------------------------------------------------------

    def pack(self) -> bytes:
        """Plain values for the pipe. A tensor held in several places (the fresh inputs' reference of the
        repeat calls and of the compatibility runs) is copied and sent once: pickle keeps shared objects shared."""
        packed: dict[int, dict[str, Any]] = {}

        def one(t: Any) -> Any:
            if t is None:
                return None
            if _id(t) not in packed:
                packed[_id(t)] = pack_tensor(t)
            return packed[_id(t)]

        plain: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in TENSOR_LISTS:
                value = [one(t) for t in value]
            elif f.name == "extra_runs":
                value = [{**vars(r), **{k: [one(t) for t in getattr(r, k)] for k in RUN_TENSOR_LISTS}}
                         for r in value]
            plain[f.name] = value
        return _dumps(plain, 4)

    @classmethod
    def unpack(cls, payload: bytes) -> "CaseData":
        plain = _loads(payload)
        plain["not_plain"] = sorted(set(plain.get("not_plain") or [])
                                    | {i for i, t in enumerate(plain["first"]) if t is not None and not t["exact"]})
        unpacked: dict[int, torch.Tensor] = {}

        def one(t: dict[str, Any] | None) -> torch.Tensor | None:
            if t is None:
                return None
            if id(t) not in unpacked:
                unpacked[id(t)] = unpack_tensor(t)
            return unpacked[id(t)]

        for name in TENSOR_LISTS:
            plain[name] = [one(t) for t in plain[name]]
        plain["extra_runs"] = [ExtraRun(**{**r, **{k: [one(t) for t in r[k]] for k in RUN_TENSOR_LISTS}})
                               for r in plain["extra_runs"]]
        return cls(**plain)


def write_frame(fd: int, kind: bytes, payload: bytes) -> None:
    for part in (_pack_header(kind, _len(payload)), payload):  # two writes: a case's payload is megabytes, not copied
        view = _memoryview(part)
        while _len(view):
            view = view[_write(fd, view):]


def read_exactly(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = _read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> tuple[bytes, bytes] | None:
    """The next frame, or None at the end of the pipe (or a torn frame)."""
    header = read_exactly(fd, 9)
    if header is None:
        return None
    kind, length = _unpack_header(header)
    payload = read_exactly(fd, length)
    return None if payload is None else (kind, payload)
