"""The servers' configurations for benches/harness.py: a fair production
configuration of nginx, lighttpd, h2o and Tessera for each variant of the test
matrix, and each server's command line. benches/dynamic.py and
benches/resilience.py use them through harness."""

import os

CORES = os.cpu_count() or 1

# The upstream of the proxy runs: nginx, 1 worker process; `location` lines for
# its server block: its connection counters for the report.
UPSTREAM_STATUS = "/upstream-status"


COMBINED = '%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i"'


def nginx_conf(w, port, root, variant, nofile=20000, connections=16384, http_extra="", workers=None,
               upstream=None, status=False, loc=None):
    """`nofile`, `connections` and `http_extra` (lines for the http block) are for benches/resilience.py;
    `workers` (default: cores) and `status` (stub_status at UPSTREAM_STATUS) for the upstream of the
    proxy runs; `upstream` is the upstream's port (variant "proxy"); `loc` the locations of variant "plain"."""
    log = "access_log off;"
    extra = ""
    if variant in ("log", "pipeline"):
        log = f"access_log {w}/access.log combined buffer=64k flush=1s;"
    if variant == "pipeline":
        # The demo configuration of conf/server.toml: two headers on every
        # response, Expires by URL prefix, then by MIME type.
        extra = """
    map $sent_http_content_type $expires_by_type {
        default off;
        ~^text/html 5m;
        ~^text/css 1d;
    }"""
        loc = """
        location / {
            add_header X-Content-Type-Options nosniff always;
            add_header X-Frame-Options SAMEORIGIN always;
            expires $expires_by_type;
        }
        location /img/ {
            add_header X-Content-Type-Options nosniff always;
            add_header X-Frame-Options SAMEORIGIN always;
            expires 30d;
        }"""
    elif variant == "proxy":
        extra = f"""
    upstream u {{
        server 127.0.0.1:{upstream};
        keepalive 64;
    }}"""
        # the fields a production reverse proxy sends, and Tessera's
        # `proxy` by default (`host = "client"`, `forwarded =
        # "x-forwarded"`): both send the upstream the same request (bare
        # `proxy_pass` sends Host `u` and no forwarding fields)
        loc = """
        location / {
            proxy_pass http://u;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Real-IP $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $http_host;
        }"""
    elif not loc:
        loc = "location / { }"
    if status:
        loc += f"\n        location = {UPSTREAM_STATUS} {{ stub_status; }}"
    return f"""
worker_processes {workers or CORES};
worker_rlimit_nofile {nofile};
daemon off;
pid {w}/nginx.pid;
error_log {w}/error.log error;
events {{ worker_connections {connections}; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 10000000;
    open_file_cache max=20000 inactive=20s;
    open_file_cache_valid 1s;
    open_file_cache_min_uses 1;
    open_file_cache_errors on;
    server_tokens off;
    client_body_temp_path {w}/body;
    proxy_temp_path {w}/proxy;
    fastcgi_temp_path {w}/fastcgi;
    uwsgi_temp_path {w}/uwsgi;
    scgi_temp_path {w}/scgi;
    {log}{extra}
    {http_extra}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        root {root};
        index index.html;
        {loc}
    }}
}}
"""


def lighttpd_conf(w, port, root, variant, upstream=None):
    """`upstream`: the upstream's port (variant "proxy")."""
    mods = ["mod_accesslog"] if variant in ("log", "pipeline") else []
    log = ""
    if variant == "proxy":
        # mod_proxy sends HTTP/1.1 unless "force-http10", but lighttpd 1.4.69
        # sends `Connection: close` with every request and has no option to
        # keep a connection to the back end: one connection per request (the
        # upstream table of the report shows it).
        mods = ["mod_proxy"]
        log = (f'proxy.server = ( "" => (( "host" => "127.0.0.1", "port" => {upstream} )) )\n'
               'proxy.header = ( "force-http10" => "disable" )\n')
    if variant in ("log", "pipeline"):
        log = f'accesslog.filename = "{w}/access.log"\naccesslog.format = "{COMBINED.replace(chr(34), chr(92) + chr(34))}"\n'
    return f"""
server.document-root = "{root}"
server.bind = "127.0.0.1"
server.port = {port}
server.pid-file = "{w}/lighttpd.pid"
server.errorlog = "{w}/error.log"
server.modules = ({", ".join('"' + m + '"' for m in mods)})
server.max-worker = {CORES}
server.max-fds = 20000
server.max-connections = 16384
server.max-keep-alive-requests = 10000000
server.max-keep-alive-idle = 65
server.network-backend = "sendfile"
server.stat-cache-engine = "simple"
server.tag = ""
index-file.names = ("index.html")
mimetype.assign = (".html" => "text/html", ".png" => "image/png", ".test" => "application/octet-stream", "" => "application/octet-stream")
{log}"""


def h2o_conf(w, port, root, variant, upstream=None):
    """`upstream`: the upstream's port (variant "proxy"; keep-alive to it is h2o's default)."""
    log = ""
    handler = f"file.dir: {root}"
    if variant == "proxy":
        handler = f"proxy.reverse.url: http://127.0.0.1:{upstream}/"
    if variant in ("log", "pipeline"):
        log = f'access-log:\n  path: {w}/access.log\n  format: \'{COMBINED.replace("%>s", "%s")}\'\n'
    return f"""user: root
num-threads: {CORES}
max-connections: 16384
pid-file: {w}/h2o.pid
error-log: {w}/error.log
http1-request-timeout: 65
listen:
  host: 127.0.0.1
  port: {port}
{log}hosts:
  default:
    paths:
      /:
        {handler}
"""


# Lines added to Tessera's [vhost.static-file] (the harness's --tessera-static).
# nginx gets `open_file_cache_valid 1s`, so Tessera gets the same bound.
TESSERA_STATIC = "open-file-cache-valid = 1000"
TESSERA_B_STATIC = ""  # --tessera-b-static


def tessera_conf(w, port, root, variant, connections=16384, server_extra="", vhost_extra="", modules=None,
                 upstream=None):
    """The keyword arguments are for benches/resilience.py: `server_extra` and
    `vhost_extra` are TOML lines for [server] and after [vhost.static-file];
    `upstream` is the upstream's port (variant "proxy")."""
    server = f"""[server]
listen = ["127.0.0.1:{port}"]
workers = {CORES}
keep-alive = 65
max-connections = {connections}
shutdown-timeout = 1
log-level = "warn"
{server_extra}
"""
    if variant == "proxy":
        return server + f"""
[[upstream]]
name = "u"
servers = ["127.0.0.1:{upstream}"]
keepalive-timeout = 60
keepalive = 64
max-connections = 256

[[vhost]]
server-names = ["127.0.0.1", "localhost"]
default = true
document-root = "{root}"
modules = ["proxy"]

[vhost.proxy]
upstream = "u"
"""
    modules = modules or {
        "plain": '["static-file"]',
        "log": '["access-log", "static-file"]',
        "pipeline": '["access-log", "headers", "expires", "static-file"]',
    }[variant]
    conf = server + f"""
[[vhost]]
server-names = ["127.0.0.1", "localhost"]
default = true
document-root = "{root}"
modules = {modules}

[vhost.static-file]
index-files = ["index.html"]
{TESSERA_STATIC}
{vhost_extra}
"""
    if variant in ("log", "pipeline"):
        conf += f'\n[vhost.access-log]\npath = "{w}/access.log"\nformat = "combined"\n'
    if variant == "pipeline":
        conf += """
[vhost.headers]
set = { "X-Content-Type-Options" = "nosniff", "X-Frame-Options" = "SAMEORIGIN" }

[vhost.expires]
url = { "/img/" = "access plus 30 days" }
mime-types = { "text/css" = "access plus 1 days", "text/html" = "access plus 5 minutes" }
"""
    return conf


def server_cmd(name, conf, tessera_bin):
    return {
        "nginx": ["nginx", "-c", conf],
        "nginx-deferred": ["nginx", "-c", conf],
        "lighttpd": ["lighttpd", "-D", "-f", conf],
        "h2o": ["h2o", "-c", conf],
        "tessera": [tessera_bin, "-c", conf],
        "tessera-actix": [tessera_bin, "-c", conf],
        "tessera-b": [tessera_bin, "-c", conf],
        "floor": [],  # harness.Server builds its command (port, document root)
        "floor-shared": [],
    }[name]


def tessera_actix_conf(w, port, root, variant, **kw):
    """Tessera on actix-http's HTTP/1 engine (`[server] http1-engine`)."""
    kw["server_extra"] = (kw.get("server_extra", "") + '\nhttp1-engine = "actix"').strip()
    return tessera_conf(w, port, root, variant, **kw)


def tessera_b_conf(w, port, root, variant, **kw):
    """Tessera "b": `--tessera-b`'s binary, with `--tessera-b-static` lines
    after [vhost.static-file] (an A/B of two configurations in one run)."""
    kw["vhost_extra"] = (kw.get("vhost_extra", "") + "\n" + TESSERA_B_STATIC).strip()
    return tessera_conf(w, port, root, variant, **kw)


def nginx_deferred_conf(w, port, root, variant, **kw):
    """nginx with `listen ... deferred` (TCP_DEFER_ACCEPT, 1 s)."""
    return nginx_conf(w, port, root, variant, **kw).replace(" backlog=4096;", " backlog=4096 deferred;")


def floor_conf(w, port, root, variant, **kw):
    """benches/floor.c takes no configuration file: its arguments say it all."""
    return f"# floor {port} {root}: no configuration\n"


CONF_WRITERS = {"nginx-deferred": nginx_deferred_conf, "floor": floor_conf, "floor-shared": floor_conf, "nginx": nginx_conf, "lighttpd": lighttpd_conf, "h2o": h2o_conf, "tessera": tessera_conf,
                "tessera-actix": tessera_actix_conf, "tessera-b": tessera_b_conf}
