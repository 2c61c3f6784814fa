"""Run a command under a seccomp allow list, as systemd's SystemCallFilter= would.

    /usr/bin/python3 tests/seccomp_exec.py ERRNO SYSCALL_LIST_FILE -- COMMAND ARGS...

Every system call not named in SYSCALL_LIST_FILE (one name a line) fails with ERRNO (a name
such as EPERM, systemd's SystemCallErrorNumber=); then COMMAND is exec'd, and the filter
stays on it and on everything it starts. Needs libseccomp's Python binding (Debian:
python3-seccomp), hence run by the system Python, not the test venv. Names libseccomp does
not know on this architecture are skipped, as systemd skips them.
"""

import contextlib
import errno
import os
import sys

import seccomp


def main() -> None:
    error_name, list_file, dash, *command = sys.argv[1:]
    assert dash == "--" and command, __doc__
    action = seccomp.ERRNO(getattr(errno, error_name))
    allowed = seccomp.SyscallFilter(defaction=action)
    with open(list_file) as f:
        for name in {line.strip() for line in f if line.strip()}:
            # unknown to libseccomp, or not a syscall on this architecture: skipped
            with contextlib.suppress(ValueError, RuntimeError, OSError):
                allowed.add_rule(seccomp.ALLOW, name)
    allowed.load()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
