"""Task results as bytes that cannot run code when read.

A pickle names the functions that rebuild it, so reading one written by someone else runs
their code. A task cache may live on shared storage, so its entries use this format instead:
a ``.npz`` archive (read with ``allow_pickle=False``) holding

* ``tree.json``: the result's structure as JSON, every container tagged with its kind;
* one ``.npy`` member per array (no object dtype), and per data frame or series its Parquet
  bytes (read by pyarrow, which builds columns and never calls Python code named in a file).

What a task may return, and what comes back, value for value and type for type: ``None``,
``bool``, ``int``, ``float``, ``str``, lists, tuples, dicts (any of these as keys), numpy
arrays and scalars, pandas data frames and series, CPU torch tensors. Anything else is
refused by :func:`dumps` with :class:`UnsafeValue`, naming where it sits in the result.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

import numpy as np

TREE = "tree"
_TAG = "$"  # every JSON object in the tree is {"$": kind, ...}: user data never looks like a tag


class UnsafeValue(TypeError):
    """A value this format cannot store without pickling it."""


def _frame_bytes(frame) -> bytes:
    buf = io.BytesIO()
    frame.to_parquet(buf, engine="pyarrow", index=True)
    return buf.getvalue()


def _frame_from(raw: np.ndarray):
    import pandas as pd

    return pd.read_parquet(io.BytesIO(raw.tobytes()), engine="pyarrow")


class _Writer:
    def __init__(self):
        self.members: dict[str, np.ndarray] = {}

    def _member(self, array: np.ndarray) -> str:
        name = f"a{len(self.members)}"
        self.members[name] = array
        return name

    def encode(self, value: Any, where: str) -> Any:
        import pandas as pd

        if isinstance(value, np.generic):  # first: np.float64 and np.str_ subclass float and str
            if value.dtype.kind not in "biufcUS":
                raise UnsafeValue(f"{where}: numpy scalar of dtype {value.dtype} is not stored")
            return {_TAG: "scalar", "array": self._member(np.asarray(value))}
        if value is None or type(value) in (bool, int, str):
            return value
        if type(value) is float:
            return value if math.isfinite(value) else {_TAG: "float", "value": repr(value)}
        if isinstance(value, np.ndarray):
            if value.dtype.hasobject or value.dtype.kind == "V":
                raise UnsafeValue(f"{where}: array of dtype {value.dtype} (Python objects) is not stored")
            return {_TAG: "ndarray", "array": self._member(value)}
        if isinstance(value, pd.DataFrame):
            return {_TAG: "frame", "array": self._member(np.frombuffer(self._parquet(value, where), np.uint8))}
        if isinstance(value, pd.Series):
            frame = value.to_frame(name="values")
            return {_TAG: "series", "name": self.encode(value.name, f"{where}.name"),
                    "array": self._member(np.frombuffer(self._parquet(frame, where), np.uint8))}
        if type(value).__module__.split(".")[0] == "torch" and type(value).__name__ == "Tensor":
            return {_TAG: "tensor", "array": self._member(value.detach().cpu().numpy())}
        if type(value) in (list, tuple):
            items = [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
            return items if type(value) is list else {_TAG: "tuple", "items": items}
        if type(value) is dict:
            return {_TAG: "dict", "items": [[self.encode(k, f"{where} key {k!r:.40}"),
                                             self.encode(v, f"{where}[{k!r:.40}]")] for k, v in value.items()]}
        raise UnsafeValue(f"{where}: a {type(value).__module__}.{type(value).__qualname__} is not stored "
                          "(task results hold numbers, strings, lists, tuples, dicts, numpy arrays, "
                          "pandas frames and torch tensors)")

    @staticmethod
    def _parquet(frame, where: str) -> bytes:
        try:
            return _frame_bytes(frame)
        except Exception as exc:  # pyarrow refuses object columns of mixed Python values
            raise UnsafeValue(f"{where}: data frame not storable as Parquet: {exc}") from None


def dumps(value: Any) -> bytes:
    """The bytes of ``value`` (see the module for what it may hold); :class:`UnsafeValue`
    for anything that would need pickling."""
    writer = _Writer()
    tree = writer.encode(value, "result")
    buf = io.BytesIO()
    members = {TREE: np.frombuffer(json.dumps(tree, allow_nan=False).encode(), np.uint8), **writer.members}
    np.savez(buf, allow_pickle=False, **members)
    return buf.getvalue()


def loads(data: bytes) -> Any:
    """The value :func:`dumps` stored. Never unpickles; a malformed archive raises
    ``ValueError`` (or ``zipfile.BadZipFile``, ``KeyError``), never runs code."""
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        tree = json.loads(archive[TREE].tobytes().decode())
        return _decode(tree, archive)


def _decode(node: Any, archive) -> Any:
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_decode(v, archive) for v in node]
    if not isinstance(node, dict) or _TAG not in node:
        raise ValueError("malformed result tree")
    kind = node[_TAG]
    if kind == "dict":
        return {_key(_decode(k, archive)): _decode(v, archive) for k, v in node["items"]}
    if kind == "tuple":
        return tuple(_decode(v, archive) for v in node["items"])
    if kind == "float":
        return float(node["value"])
    raw = archive[str(node["array"])]
    if kind == "ndarray":
        return raw
    if kind == "scalar":
        return raw[()]
    if kind == "frame":
        return _frame_from(raw)
    if kind == "series":
        series = _frame_from(raw)["values"]
        series.name = _decode(node["name"], archive)
        return series
    if kind == "tensor":
        import torch

        return torch.from_numpy(np.array(raw))
    raise ValueError(f"unknown kind {kind!r} in result tree")


def _key(key: Any) -> Any:
    if isinstance(key, (list, dict)):
        raise ValueError("unhashable key in result tree")
    return key


__all__ = ["UnsafeValue", "dumps", "loads"]
