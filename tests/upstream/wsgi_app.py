"""A small WSGI application for the uwsgi and scgi tests (tests/uwsgi.rs,
tests/scgi.rs), run by Debian's uwsgi with its python3 plugin:

  uwsgi --plugin python3 --uwsgi-socket 127.0.0.1:PORT --wsgi-file wsgi_app.py
  uwsgi --plugin python3 --scgi-socket 127.0.0.1:PORT --wsgi-file wsgi_app.py

Paths (PATH_INFO, after the SCRIPT_NAME the server gives):
  /env...     text/plain, one VAR=value line per CGI variable of interest
  /post       the body's length and sha256 ("LEN HEX")
  /status     418 with X-App: teapot
  /redirect   302 to https://example.org/there
  /big?n=N    N bytes of 'x', with Content-Length
  other       404
"""
import hashlib
import sys

VARS = ["SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "REQUEST_METHOD",
        "CONTENT_LENGTH", "CONTENT_TYPE", "REQUEST_URI", "SERVER_PROTOCOL",
        "REMOTE_ADDR", "HTTP_X_TEST", "HTTP_PROXY", "HTTP_HOST", "APP_ENV",
        "SCGI"]


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path.startswith("/env"):
        body = "".join("%s=%s\n" % (k, environ[k]) for k in VARS if k in environ)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [body.encode()]
    if path == "/post":
        n = int(environ.get("CONTENT_LENGTH") or 0)
        data = environ["wsgi.input"].read(n) if n else b""
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [("%d %s" % (len(data), hashlib.sha256(data).hexdigest())).encode()]
    if path == "/status":
        start_response("418 I'm a teapot", [("Content-Type", "text/plain"), ("X-App", "teapot")])
        return [b"tea"]
    if path == "/redirect":
        start_response("302 Found", [("Location", "https://example.org/there")])
        return [b""]
    if path == "/big":
        n = int(environ.get("QUERY_STRING", "n=0").split("=")[1])
        start_response("200 OK", [("Content-Length", str(n))])
        return [b"x" * n]
    if path == "/stderr":
        print("oops from wsgi", file=sys.stderr, flush=True)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"no such path"]
