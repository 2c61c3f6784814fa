"""The package's folders are its layers, and imports only point down.

Read from the source with ``ast`` (every import, including the ones inside functions), so a
new upward import or a cycle fails here before anyone has to draw the graph.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "zarrfuse"

# Each layer, bottom first, with the layers (and shared leaf modules) it may import.
LEAVES = {
    "zarrfuse.errors", "zarrfuse.limits", "zarrfuse.progress", "zarrfuse.request_deadline",
    "zarrfuse.zarr_compat",
}
LAYERS = [
    "extensions", "api", "tiff", "storage", "integrity", "filesystem", "fuse", "daemon", "cli",
]
ALLOWED = {
    "extensions": {"extensions"},
    "api": {"extensions", "api"},
    "tiff": {"extensions", "api", "tiff"},
    "storage": {"storage"},
    "integrity": {"extensions", "api", "storage", "integrity"},
    "filesystem": {"extensions", "api", "tiff", "storage", "filesystem"},
    "fuse": {"extensions", "api", "storage", "filesystem", "fuse"},
    "daemon": {"fuse", "daemon"},
    "cli": set(LAYERS),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every zarrfuse module ``path`` imports, resolved to its full dotted name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("zarrfuse"))
        elif (isinstance(node, ast.ImportFrom) and node.module and node.level == 0
              and node.module.startswith("zarrfuse")):
            folder = PACKAGE.parent / node.module.replace(".", "/")
            submodules = {a.name for a in node.names if (folder / f"{a.name}.py").exists()}
            # ``from zarrfuse.daemon import control`` imports the submodule, not the
            # package's face; anything else is taken from the module named.
            found.update(f"{node.module}.{name}" for name in submodules)
            if len(submodules) < len(node.names):
                found.add(node.module)
    return found


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m)))
def test_imports_point_down(module):
    layer = _layer(module)
    wrong = sorted(
        imported
        for imported in _imports(MODULES[module])
        if imported not in LEAVES
        and imported != "zarrfuse"
        and _layer(imported) not in ALLOWED[layer]
    )
    assert not wrong, f"{module} ({layer}) imports {wrong}"


def test_the_package_root_imports_only_what_it_exports():
    """``zarrfuse/__init__`` is the public face: the no-mount API and TIFF arrays."""
    assert _imports(PACKAGE / "__init__.py") <= {
        "zarrfuse.api", "zarrfuse.api.arrays", "zarrfuse.tiff", "zarrfuse.tiff.arrays"
    }


# Inside filesystem/: concerns in sub-packages, bottom first, each with what it may import
# (every filesystem sub-package may use the layers below filesystem). The request layer
# (filesystem/*.py: fs, reading, handles, attributes, page_cache) may import all four.
SUB_LAYERS = ["chunks", "images", "tree", "writes"]
SUB_ALLOWED = {
    "chunks": {"chunks"},
    "images": {"chunks", "images"},
    "tree": {"chunks", "images", "tree"},
    "writes": {"chunks", "images", "tree", "writes"},
}


def _sub_layer(module: str) -> str | None:
    """The filesystem sub-package of a module; "" for the request layer; None outside."""
    parts = module.split(".")
    if parts[:2] != ["zarrfuse", "filesystem"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in SUB_LAYERS else ""


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if _sub_layer(m) not in (None, ""))
)
def test_filesystem_sub_packages_import_only_below(module):
    layer = _sub_layer(module)
    assert layer is not None
    wrong = sorted(
        imported for imported in _imports(MODULES[module])
        if _sub_layer(imported) is not None and _sub_layer(imported) not in SUB_ALLOWED[layer]
    )
    assert not wrong, f"{module} (filesystem/{layer}) imports {wrong}"


def test_leaf_modules_import_nothing_of_the_package():
    for leaf in LEAVES:
        assert _imports(MODULES[leaf]) == set(), leaf


def test_no_import_cycles():
    graph = {m: {i for i in _imports(p) if i in MODULES} for m, p in MODULES.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for nxt in sorted(graph[module]):
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt):], nxt] if nxt in path else [module, nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_the_no_mount_api_loads_neither_pyfuse3_nor_trio():
    """What ``pip install zarrfuse`` promises without the mount extra: the extensions, the
    API, TIFF arrays and the commands that need no mount."""
    code = (
        "import sys, zarrfuse, zarrfuse.extensions.chunk_keys, "
        "zarrfuse.extensions.concat_parts_store, zarrfuse.api, zarrfuse.tiff.arrays, "
        "zarrfuse.cli.commands, zarrfuse.cli.info, zarrfuse.integrity, "
        "zarrfuse.cli.mount_helper, zarrfuse.cli.extras\n"
        "print(sorted(m for m in ('pyfuse3', 'trio') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"
