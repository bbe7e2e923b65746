/*
 * floor: the least work an HTTP/1.1 static-file server can do on Linux, run
 * beside the real servers by benches/harness.py (server "floor") to show what
 * the load generator, sharing this machine's cores, leaves possible.
 *
 * Not a server to use: no Range, no conditionals, no escaping, no timeouts,
 * no error pages beyond 404, paths taken as they come (but no "..").
 * What it does is what every real server must do at least, as cheaply as
 * nginx does it: one process per core, each with its own SO_REUSEPORT
 * listener and epoll (nginx `reuseport`); one recv per request; the head
 * and a small body in one send; larger bodies by sendfile(2) behind a
 * corked head (nginx `sendfile on; tcp_nopush on`); open descriptors and
 * sizes cached per path (nginx `open_file_cache`, never revalidated here);
 * accept deferred until the request's bytes arrive (TCP_DEFER_ACCEPT, 1 s:
 * nginx `listen ... deferred`, h2o's and Tessera's default);
 * `Date` formatted once a second; keep-alive by HTTP/1.1 rules and HTTP/1.0
 * `Connection: keep-alive` (ab -k); close without lingering.
 *
 * With "shared" as its fourth argument it opens one listener before the
 * workers start and each worker waits on it with EPOLLEXCLUSIVE, as nginx
 * 1.22 does without `reuseport`: the kernel hands each connection to a
 * worker that is idle in epoll_wait, where SO_REUSEPORT hashes it to one.
 *
 * Usage: floor PORT DOCUMENT-ROOT [WORKERS [reuseport|shared]]
 *        (127.0.0.1 only; SIGTERM ends it)
 * Build: cc -O2 -o floor benches/floor.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FD 70000      /* connections per worker: the 10,000-connection test and more */
#define BUF 8192          /* request bytes held per connection */
#define SMALL (128 << 10) /* bodies up to this size are kept in memory and sent with the head */
#define CACHE 16384       /* open-file cache slots per worker (power of two) */

struct file {
    char *path;  /* NULL: empty slot */
    int fd;      /* open descriptor; -1 for a missing file (404) */
    off_t size;
    char *body;  /* the bytes of a small file, else NULL */
    const char *type;
};

struct conn {
    char buf[BUF];
    int len;        /* bytes in buf */
    struct file *f; /* a body being sent by sendfile, else NULL */
    off_t off, end;
    int close_after;
};

static const char *root;
static struct conn *conns[MAX_FD];
static struct file cache[CACHE];
static char date[64];
static time_t date_at;
static char out[SMALL + 1024];

static const char *mime(const char *p) {
    const char *dot = strrchr(p, '.');
    if (!dot) return "application/octet-stream";
    if (!strcmp(dot, ".html")) return "text/html";
    if (!strcmp(dot, ".css")) return "text/css";
    if (!strcmp(dot, ".js")) return "text/javascript";
    if (!strcmp(dot, ".png")) return "image/png";
    if (!strcmp(dot, ".jpg")) return "image/jpeg";
    return "application/octet-stream";
}

static unsigned long hash(const char *s, size_t n) {
    unsigned long h = 1469598103934665603UL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211UL;
    return h;
}

/* The cached file for the path s[0..n) (an open-addressing table that is never
 * emptied: the benchmark's document root is fixed). */
static struct file *lookup(const char *s, size_t n) {
    unsigned long h = hash(s, n);
    for (unsigned long i = 0; i < CACHE; i++) {
        struct file *f = &cache[(h + i) & (CACHE - 1)];
        if (f->path && strlen(f->path) == n && !memcmp(f->path, s, n)) return f;
        if (!f->path) {
            char full[4096];
            f->path = strndup(s, n);
            f->fd = -1;
            f->body = NULL;
            f->type = mime(f->path);
            if (!memmem(s, n, "..", 2) && snprintf(full, sizeof full, "%s%s", root, f->path) < (int)sizeof full) {
                struct stat st;
                int fd = open(full, O_RDONLY | O_CLOEXEC);
                if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
                    f->fd = fd;
                    f->size = st.st_size;
                    if (st.st_size <= SMALL) {
                        f->body = malloc(st.st_size + 1);
                        if (pread(fd, f->body, st.st_size, 0) != st.st_size) { free(f->body); f->body = NULL; }
                    }
                } else if (fd >= 0) {
                    close(fd);
                }
            }
            return f;
        }
    }
    return NULL;
}

static void refresh_date(void) {
    time_t now = time(NULL);
    if (now != date_at) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        date_at = now;
    }
}

static void drop(int ep, int fd) {
    (void)ep;
    close(fd); /* close removes it from the epoll set (nginx does not EPOLL_CTL_DEL either) */
    free(conns[fd]);
    conns[fd] = NULL;
}

/* Sends what is left of a sendfile body; 1: done, 0: would block, -1: error. */
static int pump(int fd, struct conn *c) {
    while (c->off < c->end) {
        ssize_t n = sendfile(fd, c->f->fd, &c->off, c->end - c->off);
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        if (n == 0) return -1;
    }
    c->f = NULL;
    return 1;
}

/* Answers every whole request in c->buf; 1: keep reading, 0: waiting for
 * EPOLLOUT, -1: close. */
static int answer(int ep, int fd, struct conn *c) {
    for (;;) {
        c->buf[c->len] = 0;
        char *end = strstr(c->buf, "\r\n\r\n");
        if (!end) return c->len < BUF - 1 ? 1 : -1;
        end += 4;
        char *sp1 = memchr(c->buf, ' ', end - c->buf);
        char *sp2 = sp1 ? memchr(sp1 + 1, ' ', end - sp1 - 1) : NULL;
        if (!sp1 || !sp2 || sp1[1] != '/') return -1;
        int head_only = sp1 - c->buf == 4 && !memcmp(c->buf, "HEAD", 4);
        int http10 = !memcmp(sp2 + 1, "HTTP/1.0", 8);
        char next = *end; /* the first byte of a pipelined request, if any */
        *end = 0;         /* field search within this request only */
        int keep = http10 ? strcasestr(sp2, "\nconnection: keep-alive") != NULL
                          : strcasestr(sp2, "\nconnection: close") == NULL;
        *end = next;
        char *q = memchr(sp1 + 1, '?', sp2 - sp1 - 1);
        struct file *f = lookup(sp1 + 1, (q ? q : sp2) - sp1 - 1);
        refresh_date();
        int n;
        if (!f || f->fd < 0) {
            n = snprintf(out, sizeof out, "HTTP/1.1 404 Not Found\r\nServer: floor\r\nDate: %s\r\n"
                         "Content-Length: 0\r\n%s\r\n", date, keep ? (http10 ? "Connection: keep-alive\r\n" : "") : "Connection: close\r\n");
        } else {
            n = snprintf(out, sizeof out, "HTTP/1.1 200 OK\r\nServer: floor\r\nDate: %s\r\n"
                         "Content-Type: %s\r\nContent-Length: %lld\r\nAccept-Ranges: bytes\r\n%s\r\n",
                         date, f->type, (long long)f->size,
                         keep ? (http10 ? "Connection: keep-alive\r\n" : "") : "Connection: close\r\n");
        }
        c->close_after = !keep;
        int rest = c->len - (int)(end - c->buf);
        memmove(c->buf, end, rest);
        c->len = rest;
        if (f && f->fd >= 0 && !head_only && f->body) {
            memcpy(out + n, f->body, f->size);
            n += f->size;
        }
        int big = f && f->fd >= 0 && !head_only && !f->body;
        if (send(fd, out, n, MSG_NOSIGNAL | (big ? MSG_MORE : 0)) != n) return -1; /* a full buffer at a head: give up */
        if (big) {
            c->f = f;
            c->off = 0;
            c->end = f->size;
            int r = pump(fd, c);
            if (r < 0) return -1;
            if (r == 0) {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.fd = fd};
                epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
                return 0;
            }
        }
        if (c->close_after) return -1;
    }
}

static int listener(int port, int reuseport) {
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport) setsockopt(ls, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    setsockopt(ls, IPPROTO_TCP, TCP_DEFER_ACCEPT, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (void *)&a, sizeof a) || listen(ls, 4096)) {
        perror("floor: bind");
        exit(1);
    }
    return ls;
}

/* One worker: its own listener (shared < 0) or the shared one. */
static void serve(int port, int shared) {
    int ls = shared >= 0 ? shared : listener(port, 1);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN | (shared >= 0 ? EPOLLEXCLUSIVE : 0), .data.fd = ls};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    struct epoll_event evs[512];
    for (;;) {
        int n = epoll_wait(ep, evs, 512, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == ls) {
                for (;;) {
                    int c = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (c < 0) break;
                    if (c >= MAX_FD) { close(c); continue; }
                    conns[c] = calloc(1, sizeof(struct conn));
                    struct epoll_event ce = {.events = EPOLLIN | EPOLLET, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
                }
                continue;
            }
            struct conn *c = conns[fd];
            if (!c) continue;
            if (c->f) { /* writable again: the rest of a sendfile body */
                int r = pump(fd, c);
                if (r < 0 || (r == 1 && c->close_after)) { drop(ep, fd); continue; }
                if (r == 0) continue;
                struct epoll_event ce = {.events = EPOLLIN | EPOLLET, .data.fd = fd};
                epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ce);
            }
            for (;;) { /* edge-triggered: read until EAGAIN */
                ssize_t r = recv(fd, c->buf + c->len, BUF - 1 - c->len, 0);
                if (r < 0 && errno == EAGAIN) break;
                if (r <= 0) { drop(ep, fd); break; }
                c->len += r;
                int a = answer(ep, fd, c);
                if (a < 0) { drop(ep, fd); break; }
                if (a == 0) break;
            }
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: floor PORT DOCUMENT-ROOT [WORKERS [reuseport|shared]]\n");
        return 2;
    }
    int port = atoi(argv[1]), workers = argc > 3 ? atoi(argv[3]) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    root = argv[2];
    int shared = argc > 4 && !strcmp(argv[4], "shared") ? listener(port, 0) : -1;
    signal(SIGPIPE, SIG_IGN);
    for (int w = 0; w < workers; w++)
        if (fork() == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM); /* SIGTERM to the parent ends all */
            serve(port, shared);
            return 0;
        }
    while (wait(NULL) > 0) {
    }
    return 0;
}
