#!/usr/bin/python3
"""Runs a command with io_uring refused (EPERM), as the default seccomp profiles of
container runtimes do (Kubernetes RuntimeDefault on containerd >= 2.0, Docker >= 25).
With --no-aio, Linux AIO (io_setup, io_submit, ...) is refused too, as stricter
profiles may.

    /usr/bin/python3 no_io_uring.py [--no-aio] PROGRAM [ARGS...]

Needs Debian's python3-seccomp (libseccomp's bindings; scripts/install-deps.sh installs it).
"""
import errno
import os
import sys

import seccomp

args = sys.argv[1:]
calls = ["io_uring_setup", "io_uring_enter", "io_uring_register"]
if args and args[0] == "--no-aio":
    args = args[1:]
    calls += ["io_setup", "io_submit", "io_getevents", "io_pgetevents", "io_destroy", "io_cancel"]
f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
for call in calls:
    f.add_rule(seccomp.ERRNO(errno.EPERM), call)
f.load()
os.execvp(args[0], args)
