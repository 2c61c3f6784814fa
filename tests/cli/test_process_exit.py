"""The ``zarrfuse`` processes end through ``process_exit``: the status and every line
written (stdout buffered into a pipe, log records) reach the caller."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(body: str) -> subprocess.CompletedProcess[str]:
    program = textwrap.dedent("""
        import logging, sys
        from zarrfuse.cli.process_exit import run_and_leave
        logging.basicConfig(stream=sys.stderr, format="%(message)s")
        def main():
    """) + textwrap.indent(textwrap.dedent(body), "    ") + "\nrun_and_leave(main)\n"
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60, check=False)


def test_the_status_and_buffered_output_reach_the_caller():
    result = _run("""
        print("x" * 100_000, end="")
        logging.getLogger("t").warning("logged last")
        return 3
    """)
    assert result.returncode == 3
    assert result.stdout == "x" * 100_000
    assert result.stderr == "logged last\n"


def test_a_system_exit_gives_its_status_or_its_message():
    assert _run("sys.exit(4)").returncode == 4
    assert _run("return None").returncode == 0
    text = _run("sys.exit('zarrfuse: no')")
    assert (text.returncode, text.stderr) == (1, "zarrfuse: no\n")


def test_python_m_zarrfuse_exits_with_the_commands_status():
    ok = subprocess.run([sys.executable, "-m", "zarrfuse", "--version"], capture_output=True,
                        text=True, timeout=60, check=False)
    assert ok.returncode == 0 and ok.stdout.strip()
    bad = subprocess.run([sys.executable, "-m", "zarrfuse", "no-such-command"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
