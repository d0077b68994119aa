"""The call graph the analysis examined, exported as ``dot``, ``json`` (networkx node-link)
or ``graphml``. Nodes are functions; edges say how the step index is passed along each call."""

from __future__ import annotations

import json
from typing import Any

from .dispatch import render_as

FORMATS = ("dot", "json", "graphml")


def render_graph(g: Any, fmt: str) -> str:
    """``g`` (a networkx ``DiGraph``) in format ``fmt``."""
    return render_as({"dot": to_dot, "json": to_json, "graphml": to_graphml}, g, fmt, "graph")


def to_json(g: Any) -> str:
    import networkx as nx

    return json.dumps(nx.node_link_data(g, edges="edges"), indent=1, sort_keys=True, default=str) + "\n"


def to_graphml(g: Any) -> str:
    import networkx as nx

    return "\n".join(nx.generate_graphml(g)) + "\n"


def to_dot(g: Any) -> str:
    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph mtp_audit {", "  node [shape=box, fontsize=10];"]
    for n, data in sorted(g.nodes(data=True)):
        lines.append(f"  {q(n)} [label={q(data.get('function', n))}];")
    for u, v, data in sorted(g.edges(data=True), key=lambda e: (e[0], e[1], e[2].get("line", 0))):
        passing = ",".join(f"{k[5:]}={val}" for k, val in sorted(data.items()) if k.startswith("pass_"))
        label = q(f"L{data.get('line')} {passing}")
        lines.append(f"  {q(u)} -> {q(v)} [label={label}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
