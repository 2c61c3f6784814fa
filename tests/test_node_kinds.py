"""Node kinds own their behaviour (issue 53, point 1): each kind of node answers lookups,
children, attributes and what open, truncate and unlink do for itself, so no code outside
the modules that build nodes asks which kind a node is. Read from the source with ``ast``:
an ``isinstance`` on a node kind (or on a tuple or union of them) counts wherever it is."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "zarrfuse"
NODES = PACKAGE / "filesystem" / "tree" / "nodes.py"

ALLOWED = {"fuse/mount.py": 1}
"""Where an ``isinstance`` on a node kind may stay: ``fuse.mount`` builds the root node and
reads its group back for the left-out note."""


def _kind_names() -> set[str]:
    """Every class ``nodes.py`` defines and every name it binds at module level (a tuple or
    union of kinds)."""
    names: set[str] = set()
    for statement in ast.parse(NODES.read_text()).body:
        if isinstance(statement, ast.ClassDef):
            names.add(statement.name)
        elif isinstance(statement, ast.Assign):
            names.update(t.id for t in statement.targets if isinstance(t, ast.Name))
    return names


def _kind_checks(path: Path, kinds: set[str]) -> int:
    count = 0
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance" and len(node.args) == 2):
            named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            named |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
            count += bool(named & kinds)
    return count


def test_the_kinds_are_found():
    assert {"ChunkFile", "GroupDir", "FanoutDir", "MetadataFile", "ScratchFile"} <= _kind_names()


def test_no_code_asks_which_kind_a_node_is():
    kinds = _kind_names()
    found = {
        path.relative_to(PACKAGE).as_posix(): count
        for path in sorted(PACKAGE.rglob("*.py"))
        if (count := _kind_checks(path, kinds))
    }
    over = {module: n for module, n in found.items() if n > ALLOWED.get(module, 0)}
    assert not over, f"isinstance on node kinds (a kind should answer for itself): {over}"
    assert sum(found.values()) <= sum(ALLOWED.values()) == 1
