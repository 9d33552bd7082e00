#!/usr/bin/python3
"""Runs a command with io_uring refused (EPERM), as the default seccomp profiles of
container runtimes do (Kubernetes RuntimeDefault on containerd >= 2.0, Docker >= 25).

    /usr/bin/python3 no_io_uring.py PROGRAM [ARGS...]

Needs Debian's python3-seccomp (libseccomp's bindings; scripts/install-deps.sh installs it).
"""
import errno
import os
import sys

import seccomp

f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
for call in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
    f.add_rule(seccomp.ERRNO(errno.EPERM), call)
f.load()
os.execvp(sys.argv[1], sys.argv[1:])
