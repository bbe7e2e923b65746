#!/usr/bin/env python3
"""A small HTTP/1.1 upstream for the proxy tests (stdlib only).

Usage: app.py NAME [SOCKET]  -- listens on 127.0.0.1, port 0 (or on the
Unix socket SOCKET), prints "PORT\n" ("0\n" for a socket) on stdout, then
serves until killed. Paths:
  /echo...        JSON: method, path, headers, body length and sha256
  /name           the NAME given on the command line
  /count          requests served so far (this one not included)
  /health         200, or 503 when NAME starts with "sick"
  /ws             a WebSocket (RFC 6455) that echoes text frames
  /early          103 Early Hints, then 200 "final"
  /http10         an HTTP/1.0 answer without keep-alive (the connection is
                  left open: a proxy must not reuse it, RFC 9112 §9.3)
  /served-here    how many requests this connection served before this one
  /conn-date      Date, and Connection naming it (Date is then hop-by-hop)
  /odd-fields?lf=1  fields in every form RFC 9112 allows (no space after the
                  colon, trailing spaces, an empty value, mixed case, a
                  repeated field, Server and Date); lf=1: bare-LF line ends
  /switch         101 Switching Protocols though nobody asked
When NAME starts with "rude", a connection's second request gets no answer:
the connection closes (a kept-alive connection the server dropped).
  /slow?s=N       answers after N seconds (a slow back end)
  /big?n=BYTES    BYTES bytes of 'x', with Content-Length
  /die            Content-Length 1000000, 1000 bytes, then the process exits
  /die-chunked    chunked, one 1000-byte chunk, then the process exits
"""
import base64
import hashlib
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs

NAME = sys.argv[1] if len(sys.argv) > 1 else "app"
COUNT = [0]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def read_body(self):
        h = hashlib.sha256()
        n = 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                line = self.rfile.readline()
                if not line:
                    raise ConnectionResetError("the chunked body was cut off")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                left = size
                while left:
                    b = self.rfile.read(min(left, 1 << 16))
                    h.update(b)
                    n += len(b)
                    left -= len(b)
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length", "0"))
            while left:
                b = self.rfile.read(min(left, 1 << 16))
                if not b:
                    break
                h.update(b)
                n += len(b)
                left -= len(b)
        return n, h.hexdigest()

    def send(self, status, body, ctype="text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "keep-alive, X-Hop")
        self.send_header("X-Hop", "must-not-pass")
        self.send_header("Keep-Alive", "timeout=5")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        url = urlsplit(self.path)
        q = parse_qs(url.query)
        served_here = getattr(self, "served_here", 0)
        self.served_here = served_here + 1
        if NAME.startswith("rude") and served_here >= 1:
            self.close_connection = True
            return
        served = COUNT[0]
        COUNT[0] += 1
        if url.path.startswith("/echo"):
            n, digest = self.read_body()
            body = json.dumps({
                "method": self.command,
                "path": self.path,
                "headers": [[k.lower(), v] for k, v in self.headers.items()],
                "length": n,
                "sha256": digest,
                "name": NAME,
            }).encode()
            self.send(200, body, "application/json")
        elif url.path == "/name":
            self.read_body()
            self.send(200, NAME.encode())
        elif url.path == "/early":
            # the interim and the final answer in one write: a proxy must
            # parse what it has before reading more
            self.wfile.write(b"HTTP/1.1 103 Early Hints\r\nLink: </x.css>; rel=preload\r\n\r\n"
                             b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal")
        elif url.path == "/http10":
            self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
        elif url.path == "/served-here":
            body = str(served_here).encode()
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        elif url.path == "/conn-date":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nDate: Mon, 01 Jan 2001 00:00:00 GMT\r\n"
                             b"Connection: Date\r\nX-Keep: 1\r\nContent-Length: 2\r\n\r\nok")
        elif url.path == "/odd-fields":
            eol = b"\n" if q.get("lf") else b"\r\n"
            lines = [b"HTTP/1.1 200 OK", b"server: upstream/1", b"X-Tight:tight",
                     b"X-Padded:   padded value   ", b"X-Empty:", b"Content-Length: 2",
                     b"x-MiXeD: Case", b"Connection: keep-alive, X-Named",
                     b"X-Named: must-not-pass", b"Set-Cookie: a=1", b"DATE: Thu, 01 Jan 2026 00:00:00 GMT",
                     b"Set-Cookie: b=2", b"Keep-Alive: timeout=5"]
            self.wfile.write(eol.join(lines) + eol + eol + b"ok")
        elif url.path == "/switch":
            self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\nConnection: upgrade\r\n\r\n")
            self.wfile.flush()
            self.close_connection = True
        elif url.path == "/ws":
            self.websocket_echo()
        elif url.path == "/health":
            self.send(503 if NAME.startswith("sick") else 200, b"health")
        elif url.path == "/count":
            self.send(200, str(served).encode())
        elif url.path == "/slow":
            time.sleep(float(q.get("s", ["5"])[0]))
            self.send(200, b"slow")
        elif url.path == "/big":
            n = int(q.get("n", ["0"])[0])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * (1 << 16)
            while n:
                k = min(n, len(chunk))
                self.wfile.write(chunk[:k])
                n -= k
        elif url.path == "/bad-framing":
            # a response whose framing a proxy must refuse (RFC 9112 §6.3)
            field = {"list": b"Content-Length: 2, 2", "sign": b"Content-Length: +2",
                     "gzip": b"Transfer-Encoding: gzip, chunked"}[q.get("f", ["list"])[0]]
            self.wfile.write(b"HTTP/1.1 200 OK\r\n" + field + b"\r\n\r\nok")
            self.wfile.flush()
            self.close_connection = True
        elif url.path == "/die":
            self.send_response(200)
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.write(b"d" * 1000)
            self.wfile.flush()
            os._exit(0)
        elif url.path == "/die-chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"3e8\r\n" + b"d" * 1000 + b"\r\n")
            self.wfile.flush()
            os._exit(0)
        else:
            self.send(404, b"no such path")

    def websocket_echo(self):
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        while True:
            hdr = self.rfile.read(2)
            if len(hdr) < 2:
                return
            opcode, n = hdr[0] & 0x0F, hdr[1] & 0x7F
            if n == 126:
                n = int.from_bytes(self.rfile.read(2), "big")
            mask = self.rfile.read(4) if hdr[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if opcode == 8:
                self.wfile.write(b"\x88\x00")
                self.wfile.flush()
                return
            self.wfile.write(bytes([0x80 | opcode, len(data)]) + data)
            self.wfile.flush()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any
    # WebDAV's extension methods (RFC 4918), for the proxy to pass on
    do_PROPFIND = do_MKCOL = handle_any


def handle_error(server, request, client_address):
    # a connection the test (or the proxy) cut on purpose is no error here
    if not isinstance(sys.exc_info()[1], ConnectionError):
        type(server).__mro__[1].handle_error(server, request, client_address)


if len(sys.argv) > 2:
    import socketserver

    class UnixServer(socketserver.ThreadingUnixStreamServer):
        daemon_threads = True
        handle_error = handle_error

        def get_request(self):
            conn, _ = super().get_request()
            return conn, ("unix", 0)

    server = UnixServer(sys.argv[2], Handler)
    print(0, flush=True)
else:
    class QuietServer(ThreadingHTTPServer):
        daemon_threads = True
        handle_error = handle_error

    server = QuietServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
server.serve_forever()
