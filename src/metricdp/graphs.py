"""Road networks from an edge list: the shortest-path metric on a set of labelled nodes.

``metricdp build NODES --graph EDGES.csv`` (Geo-Graph-Indistinguishability, Takagi et al.
2019): NODES (the POINTS file: labels, and coordinates kept for display) names the
nodes; EDGES (CSV or Parquet) has the columns ``source``, ``target`` and optionally
``weight`` (a length, 1 when the column is absent), one undirected edge per row. The
space is :meth:`~metricdp.spaces.MetricSpace.from_graph` of the edges: parallel edges
count once with their shortest length, a disconnected graph is refused naming its
components -- unless ``policy`` (``build --graph EDGES --policy-graph``): the graph is
then a policy graph (Cao et al. 2020), at infinite distance between components, and a
mechanism built on it protects only the pairs connected in the graph: the component of
a value is revealed (docs/proofs/policy_graphs.md).

Every refusal is one :class:`~metricdp.errors.ValidationError` naming the file and the
line (CSV) or row (Parquet): an endpoint that is not a node, a weight that is not a
number (the CSV number rule :func:`metricdp.io.parse_decimal`), NaN, infinite, zero,
negative or subnormal (below 2.2e-308).
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .errors import ValidationError
from .spaces import MetricSpace
from .tabular.formats import read_table, table_format

__all__ = ["EDGE_COLUMNS", "POLICY_HINT", "graph_space", "read_edges"]

EDGE_COLUMNS = ("source", "target", "weight")
_TINY = float(np.finfo(np.float64).tiny)  # 2.2e-308, the smallest normal float


def _columns(header: list[str], where: str) -> tuple[int, int, int | None]:
    lower = [h.strip().lower() for h in header]
    missing = [c for c in EDGE_COLUMNS[:2] if c not in lower]
    if missing:
        raise ValidationError(f"{where}: an edge list needs the columns source,target[,weight]; "
                              f"missing {', '.join(missing)} (got {','.join(header)})")
    extra = [h for h, low in zip(header, lower, strict=True) if low not in EDGE_COLUMNS]
    if extra:
        raise ValidationError(f"{where}: unknown column(s) {', '.join(map(repr, extra))}; "
                              "expected source,target[,weight]")
    w = lower.index("weight") if "weight" in lower else None
    return lower.index("source"), lower.index("target"), w


def read_edges(path: str | PathLike[str], labels: tuple[str, ...] | list[str]) -> tuple[
    NDArray[np.intp], NDArray[np.float64]
]:
    """Edges (m, 2) as indices into ``labels`` and their weights (m,), from a CSV or Parquet edge list.

    Raises
    ------
    ValidationError
        A missing file or column, no edges, an unknown endpoint, a weight that is not a
        finite positive number: each names the file and the line (or row).
    """
    import pyarrow as pa

    from .streaming.numbers import parse_numbers

    p = Path(path)
    where = str(p)
    if not p.is_file():
        raise ValidationError(f"{where}: no such file")
    table = read_table(p, table_format(p, what=f"{where}:"))
    s, t, w = _columns(list(table.names), where)

    def texts(k: int) -> list[str]:  # a text format's values are texts; a typed format's are written as text
        return ["" if v is None else str(v) for v in table.columns[table.names[k]].to_pylist()]

    src = np.array(texts(s), dtype=object)
    dst = np.array(texts(t), dtype=object)
    weights = pa.array([] if w is None else texts(w), pa.string())
    unit, where_no = table.format.unit, table.places
    if len(src) == 0:
        raise ValidationError(f"{where}: no edges")
    edges = np.column_stack([_indices(src, labels, where, unit, where_no, "source"),
                             _indices(dst, labels, where, unit, where_no, "target")])
    if w is None:
        return edges, np.ones(len(src))
    values, not_number = parse_numbers(weights)
    # below the smallest normal float a length loses its precision and ratios of it overflow
    bad = not_number | ~np.isfinite(values) | ~(values >= _TINY)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        text = weights[i].as_py()
        positive = bool(np.isfinite(values[i]) and values[i] > 0)
        why = f"subnormal (below {_TINY:.3g})" if positive else "not finite and > 0"
        why = "not a number" if not_number[i] else why
        raise ValidationError(f"{where}: {unit} {int(where_no[i])}: weight {text!r} is {why} "
                              f"({int(bad.sum())} bad weight(s)); a length must be a finite number > 0 "
                              f"(a normal float, at least {_TINY:.3g})")
    return edges, values


def _indices(names: NDArray[Any], labels: tuple[str, ...] | list[str], where: str, unit: str,
             numbers: NDArray[np.int64], column: str) -> NDArray[np.intp]:
    order = np.argsort(np.asarray(labels, dtype=object))
    sorted_labels = np.asarray(labels, dtype=object)[order]
    pos = np.clip(np.searchsorted(sorted_labels, names), 0, len(labels) - 1)
    known = sorted_labels[pos] == names
    if not known.all():
        i = int(np.flatnonzero(~known)[0])
        raise ValidationError(f"{where}: {unit} {int(numbers[i])}: {column} {names[i]!r} is not a node (not a label "
                              f"of the nodes file; {int((~known).sum())} unknown endpoint(s))")
    return np.asarray(order[pos], dtype=np.intp)


#: What a refusal of a disconnected graph adds: the option that accepts it (the CLI's flag).
POLICY_HINT = "or accept it as a policy graph (cross-component pairs then get no guarantee)"


def graph_space(nodes: MetricSpace, path: str | PathLike[str], *, policy: bool = False,
                hint: str = POLICY_HINT) -> MetricSpace:
    """The shortest-path space on ``nodes``' labels from the edge list at ``path``.

    ``nodes``' coordinates are kept as the space's points (for display and snapping);
    its distances are not used. Refusals: :func:`read_edges`, and a disconnected graph
    (:meth:`MetricSpace.from_graph` names the components, and ``hint`` says how to accept
    it) unless ``policy``: then the space is a policy graph, at infinite distance between
    its components.
    """
    edges, weights = read_edges(path, nodes.labels)
    try:
        graph = MetricSpace.from_graph(edges, weights, n=nodes.n, labels=nodes.labels, policy=policy)
    except ValidationError as ex:
        more = f"; {hint}" if "not connected" in str(ex) else ""
        raise ValidationError(f"{path}: {ex}{more}") from None
    return MetricSpace(graph.distances, graph.labels, "graph", nodes.points)
