# fake_daemon.py - an impostor for the trust tests: listens on a Unix
# socket and answers every request with a well-formed "ok" reply (a
# tpload.Response with ok = true: protobuf field 1, varint 1), which is
# all `tpload status --health` needs to say 0.
#
# usage: fake_daemon.py SOCKET READY [UID]
# Binds SOCKET, then (when UID is given, running as root) drops to UID
# before listen(): SO_PEERCRED reports the credentials of listen()'s
# caller, so this is a socket in a root-made place served by another
# user.  Writes READY once it listens; serves until killed.
import os
import socket
import struct
import sys

OK_REPLY = struct.pack(">I", 2) + b"\x08\x01"


def read_exact(conn, n):
    buf = b""
    while len(buf) < n:
        part = conn.recv(n - len(buf))
        if not part:
            return None
        buf += part
    return buf


def serve_one(conn):
    while True:
        hdr = read_exact(conn, 4)
        if hdr is None:
            return
        (length,) = struct.unpack(">I", hdr)
        if length > 65536 or read_exact(conn, length) is None:
            return
        conn.sendall(OK_REPLY)


def main():
    path, ready = sys.argv[1], sys.argv[2]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o777)
    out = open(ready, "w")  # before dropping privileges
    if len(sys.argv) > 3:
        uid = int(sys.argv[3])
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    s.listen(16)
    out.write("%d\n" % os.getpid())
    out.close()
    while True:
        conn, _ = s.accept()
        try:
            serve_one(conn)
        except OSError:
            pass
        conn.close()


if __name__ == "__main__":
    main()
