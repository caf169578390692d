#!/usr/bin/python3
"""http_faults.py - a small HTTP server for the faults nginx cannot make,
serving the files under ROOT with byte ranges (standard library only).

    http_faults.py ROOT PORTFILE [LOG]

Listens on a free loopback port and writes it to PORTFILE once it
accepts.  The first segment of a path picks the behaviour (digits after it make
a tag of its own, counted apart: /replace2/F), the rest is the file
under ROOT:

    /ok/F        plain ranged GETs (206), ETag "v1"
    /drop/F      the first ranged GET of F whose range starts at the
                 header's end or later sends half its body, then closes
    /drophead/F  the first ranged GET of F starting at 0 is cut the same way
    /busy/F      the first two requests for F answer 503
    /replace/F   after the first request for F, its ETag is "v2"
    /grow/F      after the first request for F, it is one byte longer
    /stall/F     a ranged GET starting at 0 sends 8 bytes and then
                 nothing (the connection stays open)
    /dropwhole/F the first GET of F without a Range (a JSON document)
                 sends half its body, then closes
    /bighead/F   every answer carries a 200 KB header (X-Padding)
    /gzip/F      every body is gzip-compressed, with Content-Encoding:
                 gzip, though no request asked for it (Accept-Encoding)

A request of several ranges (RFC 9110 14.2) is answered 206 with a
multipart/byteranges body (RFC 9110 14.6, its boundary quoted and with a
space in it, as RFC 2046 allows), except where these modes say:

    /multinone/F   416, as a store that takes one range a GET (OSS)
    /multiwhole/F   200 with the whole object, as one that ignores them
    /multione/F   206 of the first range alone, a plain Content-Range
    /multimerge/F 206 of one range from the first asked byte to the last,
                  a plain Content-Range (ranges coalesced)
    /multicut/F   the first multi-range answer for F sends half its
                  body, then closes
    /multibad/F   a multipart answer whose second part is one byte later
                  than asked

Every request is logged to LOG (one line: method path range status).
"""
import gzip
import http.server
import os
import re
import socketserver
import sys
import threading
import time

ROOT, PORTFILE = sys.argv[1], sys.argv[2]
LOG = sys.argv[3] if len(sys.argv) > 3 else os.devnull
SEEN = {}
LOCK = threading.Lock()


def count(key):
    with LOCK:
        SEEN[key] = SEEN.get(key, 0) + 1
        return SEEN[key]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def log(self, status):
        with LOCK, open(LOG, "a", encoding="utf-8") as f:
            f.write("%s %s %s %d\n" % (self.command, self.path,
                                       self.headers.get("Range", "-"),
                                       status))

    def fail(self, status):
        body = b"no\n"
        self.log(status)
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        m = re.match(r"^/([a-z0-9]+)/(.+)$", self.path)
        if not m:
            return self.fail(404)
        tag, rel = m.groups()
        mode = tag.rstrip("0123456789")  # /replace2/: a fresh count
        path = os.path.join(ROOT, rel)
        if not os.path.isfile(path):
            return self.fail(404)
        n = count((tag, rel))
        with open(path, "rb") as f:
            data = f.read()
        etag = '"v1"'
        if mode == "replace" and n > 1:
            etag = '"v2"'
        if mode == "grow" and n > 1:
            data += b"\0"
        if mode == "busy" and n <= 2:
            return self.fail(503)
        rng = self.headers.get("Range")
        if rng is None:
            self.log(200)
            self.send_response(200)
            self.send_header("ETag", etag)
            self.send_body(mode, data,
                           mode == "dropwhole" and
                           count(("cut", tag, rel)) == 1)
            return
        if "," in rng:
            return self.multi(mode, tag, rel, data, etag, rng)
        r = re.fullmatch(r"bytes=(\d+)-(\d+)", rng)
        first, last = int(r.group(1)), min(int(r.group(2)), len(data) - 1)
        body = data[first:last + 1]
        self.log(206)
        self.send_response(206)
        self.send_header("ETag", etag)
        self.send_header("Content-Range",
                         "bytes %d-%d/%d" % (first, last, len(data)))
        if mode in ("bighead", "gzip"):
            return self.send_body(mode, body, False)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        hlen = 8 + int.from_bytes(data[:8], "little") if len(data) >= 8 \
            else 0
        cut = (mode == "drop" and first >= hlen and
               count(("cut", tag, rel)) == 1 or
               mode == "drophead" and first == 0 and
               count(("cut", tag, rel)) == 1)
        if cut:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if mode == "stall" and first == 0:
            self.wfile.write(body[:8])
            self.wfile.flush()
            time.sleep(3600)
            return
        self.wfile.write(body)

    def multi(self, mode, tag, rel, data, etag, rng):
        """A request of several ranges, answered as `mode` says."""
        rs = [tuple(int(x) for x in p.split("-"))
              for p in rng[len("bytes="):].split(",")]
        if mode == "multinone":
            return self.fail(416)
        if mode in ("multiwhole", "multione", "multimerge"):
            first, last = rs[0]
            if mode == "multimerge":
                last = rs[-1][1]
            status = 200 if mode == "multiwhole" else 206
            body = data if status == 200 else data[first:last + 1]
            self.log(status)
            self.send_response(status)
            self.send_header("ETag", etag)
            if status == 206:
                self.send_header("Content-Range", "bytes %d-%d/%d"
                                 % (first, last, len(data)))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        bnd = "fault boundary 7"
        out = []
        for k, (first, last) in enumerate(rs):
            if mode == "multibad" and k == 1:
                first, last = first + 1, last + 1
            out.append(b"\r\n--" + bnd.encode() +
                       b"\r\nContent-Type: application/octet-stream\r\n"
                       b"Content-Range: bytes %d-%d/%d\r\n\r\n"
                       % (first, last, len(data)) + data[first:last + 1])
        out.append(b"\r\n--" + bnd.encode() + b"--\r\n")
        body = b"".join(out)
        self.log(206)
        self.send_response(206)
        self.send_header("ETag", etag)
        self.send_header("Content-Type",
                         'multipart/byteranges; boundary="%s"' % bnd)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if mode == "multicut" and count(("cut", tag, rel)) == 1:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def send_body(self, mode, body, cut):
        """The rest of an answer's headers and its body: padded,
        compressed or cut as the mode says."""
        if mode == "bighead":
            self.send_header("X-Padding", "p" * 200000)
        if mode == "gzip":
            body = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if cut:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    srv = Server(("127.0.0.1", 0), Handler)
    tmp = PORTFILE + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, PORTFILE)
    srv.serve_forever()


if __name__ == "__main__":
    main()
