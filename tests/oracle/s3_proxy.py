#!/usr/bin/python3
"""s3_proxy.py - a verifying front for s3rver, which does not check
AWS Signature Version 4 itself (it answers a wrong secret with 200).
Standard library only (hashlib, hmac): an implementation of SigV4 of its
own, written from AWS's documentation ("Authenticating Requests: Using
the Authorization Header", Amazon S3 API Reference), never from tpload.

    s3_proxy.py selftest
    s3_proxy.py serve UPSTREAM_PORT KEYS REGION PORTFILE LOG [SKEW]

selftest checks the implementation against AWS's published example (the
"GET Object" example of that page, with its expected signature) and
against a wrong secret, and exits 1 on any difference.

serve listens on a free loopback port (written to PORTFILE once it
accepts) and checks every request: an Authorization header of
AWS4-HMAC-SHA256 with a known access key id, a credential scope of
REGION and s3, x-amz-date within 15 minutes of this clock (shifted by
SKEW seconds: a skewed client without changing any clock), every x-amz-*
header signed, x-amz-content-sha256 present, the session token of a
temporary key, and the signature.  A request that passes goes on to
s3rver on UPSTREAM_PORT without its credentials; one that fails gets
S3's 403 answer (AccessDenied, InvalidAccessKeyId, InvalidToken,
RequestTimeTooSkewed, SignatureDoesNotMatch).  KEYS is JSON:
{"AKID": {"secret": "...", "token": "..." or null}}.  Each request is
logged to LOG as "METHOD PATH STATUS CODE BYTES" (the body's bytes sent;
CODE "-" for a request passed on).
"""
import datetime
import hashlib
import hmac
import http.client
import http.server
import json
import os
import re
import socketserver
import sys
import threading
import urllib.parse

UNRESERVED = ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
              "0123456789-_.~")


def uri_encode(s, keep_slash):
    """AWS's UriEncode: every byte but the unreserved ones as %XX."""
    safe = UNRESERVED + ("/" if keep_slash else "")
    return "".join(chr(b) if chr(b) in safe else "%%%02X" % b
                   for b in s.encode("utf-8"))


def canonical_query(query):
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    enc = sorted((uri_encode(k, False), uri_encode(v, False))
                 for k, v in pairs)
    return "&".join("%s=%s" % kv for kv in enc)


def canonical_request(method, path, query, headers, signed, payload):
    """headers: {lowercase name: value}; signed: sorted names."""
    canon_uri = uri_encode(urllib.parse.unquote(path), True)
    lines = ["%s:%s" % (n, " ".join(headers[n].strip().split()))
             for n in signed]
    return "\n".join([method, canon_uri, canonical_query(query)] +
                     lines + ["", ";".join(signed), payload])


def signing_key(secret, date, region, service):
    k = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def signature(secret, amz_date, region, creq):
    scope = "%s/%s/s3/aws4_request" % (amz_date[:8], region)
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    key = signing_key(secret, amz_date[:8], region, "s3")
    return hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()


def selftest():
    """AWS's example: GET /test.txt of examplebucket, bytes 0-9."""
    empty = hashlib.sha256(b"").hexdigest()
    headers = {"host": "examplebucket.s3.amazonaws.com",
               "range": "bytes=0-9", "x-amz-content-sha256": empty,
               "x-amz-date": "20130524T000000Z"}
    creq = canonical_request("GET", "/test.txt", "", headers,
                             sorted(headers), empty)
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    got = signature(secret, "20130524T000000Z", "us-east-1", creq)
    want = "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    wrong = signature(secret + "x", "20130524T000000Z", "us-east-1", creq)
    if got != want or wrong == want:
        print("selftest: expected %s, found %s" % (want, got))
        return 1
    print("selftest: AWS's GET Object example signs as %s" % got)
    return 0


def parse_authorization(value):
    """{"Credential": [...], "SignedHeaders": [...], "Signature": s}."""
    algo, _, rest = value.partition(" ")
    if algo != "AWS4-HMAC-SHA256":
        return None
    out = {}
    for item in rest.split(","):
        k, _, v = item.strip().partition("=")
        out[k] = v
    if set(out) != {"Credential", "SignedHeaders", "Signature"}:
        return None
    out["Credential"] = out["Credential"].split("/")
    out["SignedHeaders"] = out["SignedHeaders"].split(";")
    return out if len(out["Credential"]) == 5 else None


class Verifier:
    def __init__(self, keys, region, skew):
        self.keys, self.region, self.skew = keys, region, skew

    def check(self, method, target, headers):
        """None when the request is signed right, else S3's error code."""
        h = {k.lower(): v for k, v in headers.items()}
        auth = parse_authorization(h.get("authorization", ""))
        if auth is None:
            return "AccessDenied"
        akid, date, region, service, term = auth["Credential"]
        key = self.keys.get(akid)
        if key is None:
            return "InvalidAccessKeyId"
        amz_date = h.get("x-amz-date", "")
        try:
            when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
        except ValueError:
            return "AccessDenied"
        now = datetime.datetime.utcnow() + datetime.timedelta(
            seconds=self.skew)
        if abs((now - when).total_seconds()) > 900:
            return "RequestTimeTooSkewed"
        signed = auth["SignedHeaders"]
        if (date != amz_date[:8] or region != self.region or service != "s3"
                or term != "aws4_request" or signed != sorted(signed)
                or "host" not in signed or "x-amz-date" not in signed
                or any(n not in h for n in signed)):
            return "AccessDenied"
        if any(n.startswith("x-amz-") and n not in signed for n in h):
            return "AccessDenied"
        payload = h.get("x-amz-content-sha256")
        if payload is None:
            return "AccessDenied"
        if key.get("token") is not None and \
                h.get("x-amz-security-token") != key["token"]:
            return "InvalidToken"
        path, _, query = target.partition("?")
        creq = canonical_request(method, path, query, h, signed, payload)
        want = signature(key["secret"], amz_date, self.region, creq)
        if not hmac.compare_digest(want, auth["Signature"]):
            return "SignatureDoesNotMatch"
        return None


MESSAGES = {
    "AccessDenied": "Access Denied",
    "InvalidAccessKeyId": "The AWS Access Key Id you provided does not "
                          "exist in our records.",
    "InvalidToken": "The provided token is malformed or otherwise invalid.",
    "RequestTimeTooSkewed": "The difference between the request time and "
                            "the current time is too large.",
    "SignatureDoesNotMatch": "The request signature we calculated does not "
                             "match the signature you provided.",
}


def trim_to_range(asked, headers, body):
    """s3rver 3.7.1 answers "bytes=0-0" with the rest of the object (its
    range parser takes an end of 0 for none); S3 sends the one byte.  The
    answer is cut to the range asked, its Content-Range with it."""
    m = re.fullmatch(r"bytes=(\d+)-(\d+)", asked)
    cr = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)",
                      headers.get("Content-Range", ""))
    if m is None or cr is None:
        return body
    first, last = int(m.group(1)), int(m.group(2))
    sent_first, total = int(cr.group(1)), int(cr.group(3))
    last = min(last, total - 1)
    if sent_first != first or len(body) <= last - first + 1:
        return body
    headers["Content-Range"] = "bytes %d-%d/%d" % (first, last, total)
    return body[:last - first + 1]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    conns = threading.local()

    def log_message(self, fmt, *args):
        pass

    def log(self, status, code, sent=0):
        with LOCK, open(self.server.log, "a", encoding="utf-8") as f:
            f.write("%s %s %d %s %d\n" % (self.command, self.path, status,
                                           code, sent))

    def refuse(self, code):
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s"
                "</Code><Message>%s</Message></Error>" %
                (code, MESSAGES[code])).encode()
        self.log(403, code)
        self.send_response(403)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def upstream(self):
        c = getattr(self.conns, "c", None)
        if c is None:
            c = http.client.HTTPConnection("127.0.0.1", self.server.up_port)
            self.conns.c = c
        return c

    def forward(self):
        fwd = {"Host": "127.0.0.1:%d" % self.server.up_port}
        if "Range" in self.headers:
            fwd["Range"] = self.headers["Range"]
        try:
            c = self.upstream()
            c.request(self.command, self.path, headers=fwd)
            r = c.getresponse()
        except (OSError, http.client.HTTPException):
            self.conns.c = None
            c = self.upstream()
            c.request(self.command, self.path, headers=fwd)
            r = c.getresponse()
        body = r.read()
        out = {n: r.getheader(n) for n in ("Content-Range", "ETag",
                                          "Last-Modified", "Content-Type",
                                          "Accept-Ranges")
               if r.getheader(n) is not None}
        if r.status == 206:
            body = trim_to_range(self.headers.get("Range", ""), out, body)
        self.log(r.status, "-", len(body))
        self.send_response(r.status)
        for name, value in out.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        code = self.server.verifier.check(self.command, self.path,
                                          self.headers)
        if code is not None:
            self.refuse(code)
        else:
            self.forward()

    do_HEAD = do_GET


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


LOCK = threading.Lock()


def serve(up_port, keys_file, region, portfile, log, skew):
    with open(keys_file, encoding="utf-8") as f:
        keys = json.load(f)
    srv = Server(("127.0.0.1", 0), Handler)
    srv.verifier = Verifier(keys, region, skew)
    srv.up_port, srv.log = up_port, log
    with open(portfile + ".tmp", "w", encoding="utf-8") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(portfile + ".tmp", portfile)
    srv.serve_forever()


def main(argv):
    if argv[1:2] == ["selftest"]:
        return selftest()
    if argv[1:2] == ["serve"] and len(argv) in (7, 8):
        serve(int(argv[2]), argv[3], argv[4], argv[5], argv[6],
              float(argv[7]) if len(argv) == 8 else 0.0)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
