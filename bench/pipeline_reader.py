#!/usr/bin/env python3
"""Reads keys back from a Redis-protocol server on one connection, either as
pipelined GETs (DEPTH requests per round trip) or as MGETs of DEPTH keys, and
prints the keys read per second. Used by bench/tier-pipeline.sh; every reply
is checked (all keys must exist and hold VALUE bytes).

usage: pipeline_reader.py PORT KEYS get|mget DEPTH VALUE COUNT SEED [PREFIX]
  reads COUNT distinct keys PREFIX<n>, n drawn without repetition from
  [0, KEYS) by SEED; prints "<keys/s> <seconds>".
"""
import random
import socket
import sys
import time


def command(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def main():
    port, keys, mode, depth, value, count, seed = sys.argv[1:8]
    prefix = sys.argv[8] if len(sys.argv) > 8 else "memtier-"
    keys, depth, value, count = int(keys), int(depth), int(value), int(count)
    picked = random.Random(int(seed)).sample(range(keys), count)
    conn = socket.create_connection(("127.0.0.1", int(port)))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    bulk = len(b"$%d\r\n" % value) + value + 2
    started = time.monotonic()
    for at in range(0, count, depth):
        chunk = picked[at:at + depth]
        names = [f"{prefix}{k}" for k in chunk]
        if mode == "get":
            request = b"".join(command("GET", n) for n in names)
            want = bulk * len(chunk)
        else:
            request = command("MGET", *names)
            want = len(b"*%d\r\n" % len(chunk)) + bulk * len(chunk)
        conn.sendall(request)
        got = 0
        while got < want:
            data = conn.recv(1 << 20)
            if not data:
                sys.exit("the server closed the connection")
            got += len(data)
        if got != want:
            sys.exit(f"reply of {got} bytes, {want} expected: a key is missing or has another size")
    elapsed = time.monotonic() - started
    print(f"{count / elapsed:.0f} {elapsed:.3f}")


if __name__ == "__main__":
    main()
