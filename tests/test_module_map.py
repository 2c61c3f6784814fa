"""docs/contributing.md maps every module of the package, each under its own folder (issue
30, point 7): a module added without a line there, or a line left after its module went,
fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "zarrfuse"
FOLDER = re.compile(r"^(\s*)([a-z_]+)/(\s|$)")
MODULE = re.compile(r"\b([a-z_0-9]+\.py)\b")


def _layout_block() -> list[str]:
    text = (ROOT / "docs" / "contributing.md").read_text()
    section = text.split("## Layout", 1)[1]
    return section.split("```", 2)[1].splitlines()[1:]


def mapped_modules() -> set[str]:
    """Each module the map names, as a path under the package (``storage/local.py``)."""
    found: set[str] = set()
    stack: list[tuple[int, str]] = []
    for line in _layout_block():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        header = FOLDER.match(line)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if header:
            stack.append((indent, header.group(2)))
            continue
        names = re.split(r"\s{2,}", line.strip())[0]
        folders = [name for _, name in stack][1:]  # below zarrfuse/
        for module in MODULE.findall(names):
            found.add("/".join([*folders, module]))
    return found


def package_modules() -> set[str]:
    return {
        path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
        if path.name not in ("__init__.py", "__main__.py")
    }


def test_every_module_is_mapped_under_its_folder():
    missing = sorted(package_modules() - mapped_modules())
    assert not missing, f"not in docs/contributing.md's map: {missing}"


def test_the_map_names_no_module_that_is_gone():
    stale = sorted(mapped_modules() - package_modules())
    assert not stale, f"docs/contributing.md maps modules that do not exist: {stale}"
