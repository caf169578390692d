# conn_holder.py - a same-uid client that takes every connection slot of
# a daemon socket: opens COUNT connections, keeps each alive with a
# health request per second (reading the replies), and writes READY once
# all COUNT are open and answered once.  Runs until killed.
# usage: conn_holder.py SOCKET COUNT READY
import socket
import struct
import sys
import time

HEALTH = struct.pack(">I", 0)  # an empty Request: kind HEALTH


def ask(s):
    s.sendall(HEALTH)
    hdr = b""
    while len(hdr) < 4:
        part = s.recv(4 - len(hdr))
        if not part:
            raise OSError("closed")
        hdr += part
    (n,) = struct.unpack(">I", hdr)
    while n > 0:
        part = s.recv(n)
        if not part:
            raise OSError("closed")
        n -= len(part)


def main():
    path, count, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    held = []
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        ask(s)
        held.append(s)
    with open(ready, "w") as f:
        f.write("%d\n" % len(held))
    while True:
        time.sleep(1)
        for s in held:
            ask(s)


if __name__ == "__main__":
    main()
