"""The manual stays true: the README is short, the options table is the one the code
declares, every page is in the site's navigation, and ``--help`` says what the docs say.
(``mkdocs build --strict`` itself runs in ``scripts/dev test`` before the suite.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from zarrfuse.cli.option_table import MOUNT_OPTIONS, markdown_table

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def test_the_readme_is_short_and_starts_with_the_two_commands():
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) <= 12 * 1024
    lines = readme.splitlines()
    assert lines[3].startswith("bash scripts/dev demo") and lines[4].startswith(
        "bash scripts/dev test")


def test_the_demo_installs_what_mounting_needs_and_nothing_more():
    """``scripts/dev demo`` (the README's first command): the mounting packages and the
    ``mount`` and ``demo`` extras; the test toolchain (GIMP, GDAL, nginx...) is ``setup``'s."""
    bash = subprocess.run(
        ["bash", "-c", f"source <(sed '/^cmd=/,$d' {REPO}/scripts/dev); declare -f setup_demo; "
         "declare -f need_mount_packages"],
        capture_output=True, text=True, check=True, timeout=30)
    demo = bash.stdout
    assert "need_mount_packages" in demo and "'.[mount,demo]'" in demo
    assert "test" not in demo.split("need_mount_packages ()")[0]  # no test extra, no tools
    installed = set(re.findall(r"need_apt\+=\(([^)]*)\)", demo))
    packages = {p for group in installed for p in group.split()}
    assert packages == {"python3", "python3-venv", "python3-dev", "gcc", "fuse3", "pkg-config",
                        "libfuse3-dev"}
    assert "demo) setup_demo;" in (REPO / "scripts" / "dev").read_text()


def test_the_options_table_is_generated_from_the_declaration():
    page = (DOCS / "configuration.md").read_text()
    start = page.index("<!-- BEGIN options table -->\n") + len("<!-- BEGIN options table -->\n")
    table = page[start : page.index("<!-- END options table -->")]
    assert table == markdown_table(), (
        "docs/configuration.md's table is stale; paste zarrfuse.cli.option_table."
        "markdown_table() between its markers:\n" + markdown_table()
    )


def test_every_page_is_in_the_navigation_and_every_link_resolves():
    nav = (REPO / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert pages and all(f": {name}" in nav for name in pages)
    for page in [REPO / "README.md", *DOCS.glob("*.md")]:
        for target in re.findall(r"\]\(([^)#:]+\.md)", page.read_text()):
            assert (page.parent / target).is_file(), f"{page.name} links to missing {target}"


def test_help_and_docs_describe_each_option_alike():
    help_text = subprocess.run(
        [sys.executable, "-m", "zarrfuse", "mount", "--help"], capture_output=True, text=True,
        check=True, timeout=60, env={"COLUMNS": "10000", "PATH": "/usr/bin:/bin"},
    ).stdout
    flat = " ".join(help_text.split())
    for option in MOUNT_OPTIONS:
        assert " ".join(option.help.split()).replace("%%", "%") in flat, option.flag
