/*
 * The programs of podscope's stand-ins for critest's images, in one
 * static binary that acts by the name it is run as (tests/images/build.sh
 * compiles it with `gcc -static` and installs it under each name):
 *
 *   pause             the sandbox image's process: sleeps until SIGTERM or
 *                     SIGINT (then exits 0) and reaps the orphans it
 *                     inherits as the pod's PID 1.
 *   nginx             a web server posing as nginx's master process:
 *                     process name "nginx", command line
 *                     "nginx: master process ...", pid in /var/run/nginx.pid,
 *                     HTTP 200 on the port of the first "listen N;" in
 *                     /etc/nginx/conf.d/default.conf (80 without one).
 *   httpd-foreground  a web server on port 80 whose log names the command
 *                     line "httpd -D FOREGROUND", as Apache's image logs it.
 *   nnp               prints "Effective uid: N" (installed setuid root:
 *                     N is 0 unless no_new_privs kept the caller's uid).
 *
 * Each exits 0 on SIGTERM, SIGINT or SIGQUIT: as a container's PID 1 a
 * signal without a handler would be ignored and stopping it would take the
 * runtime's whole grace period.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *prog = "standin";

static void die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
    exit(1);
}

/* The signals that end a server or the pause process, blocked so that
 * they are read (signalfd, sigwaitinfo) instead of delivered. */
static sigset_t stop_signals(int with_chld)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    if (with_chld)
        sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
        die("sigprocmask");
    return set;
}

static int pause_main(void)
{
    sigset_t set = stop_signals(1);
    for (;;) {
        int sig = sigwaitinfo(&set, NULL);
        if (sig < 0) {
            if (errno == EINTR)
                continue;
            die("sigwaitinfo");
        }
        if (sig == SIGCHLD) {
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
            continue;
        }
        return 0;
    }
}

/* A listening TCP socket on every address: IPv6 with IPv4 mapped where
 * the network namespace has IPv6, else IPv4 alone. */
static int listen_on(int port)
{
    int one = 1, zero = 0;
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(port),
                                  .sin6_addr = IN6ADDR_ANY_INIT};
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        if (bind(fd, (struct sockaddr *)&a6, sizeof a6) == 0 && listen(fd, 64) == 0)
            return fd;
        close(fd);
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr = {htonl(INADDR_ANY)}};
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&a4, sizeof a4) != 0)
        die("bind");
    if (listen(fd, 64) != 0)
        die("listen");
    return fd;
}

/* One request: read its head (a slow client gets 2 s), answer 200 with a
 * small page, close. Requests are served one at a time. */
static void answer(int conn, const char *server)
{
    struct timeval tv = {.tv_sec = 2};
    setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char req[8192];
    size_t got = 0;
    while (got < sizeof req - 1) {
        ssize_t n = read(conn, req + got, sizeof req - 1 - got);
        if (n <= 0)
            break;
        got += n;
        req[got] = 0;
        if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
            break;
    }
    char body[256], head[512];
    int blen = snprintf(body, sizeof body,
                        "<!DOCTYPE html>\n<html><body><h1>%s</h1>"
                        "<p>podscope's stand-in for critest's web server image.</p></body></html>\n",
                        server);
    int hlen = snprintf(head, sizeof head,
                        "HTTP/1.1 200 OK\r\nServer: %s\r\nContent-Type: text/html\r\n"
                        "Content-Length: %d\r\nConnection: close\r\n\r\n",
                        server, blen);
    int is_head = got >= 5 && strncmp(req, "HEAD ", 5) == 0;
    if (write(conn, head, hlen) == hlen && !is_head)
        (void)!write(conn, body, blen);
    shutdown(conn, SHUT_WR);
    close(conn);
}

/* Serve until a stop signal; returns 0 then. */
static int serve(int port, const char *server, const char *pidfile)
{
    sigset_t set = stop_signals(0);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0)
        die("signalfd");
    int lfd = listen_on(port);
    if (pidfile) {
        FILE *f = fopen(pidfile, "w");
        if (!f)
            die(pidfile);
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        if (p[1].revents)
            break;
        if (p[0].revents) {
            int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (conn >= 0)
                answer(conn, server);
        }
    }
    if (pidfile)
        unlink(pidfile);
    return 0;
}

/* The port of the first "listen N;" in nginx's site config. */
static int nginx_port(void)
{
    FILE *f = fopen("/etc/nginx/conf.d/default.conf", "r");
    if (!f)
        return 80;
    char line[512];
    int port = 80;
    while (fgets(line, sizeof line, f)) {
        char *l = line + strspn(line, " \t");
        if (strncmp(l, "listen", 6) == 0 && (l[6] == ' ' || l[6] == '\t')) {
            int p = atoi(l + 6 + strspn(l + 6, " \t"));
            if (p > 0 && p < 65536) {
                port = p;
                break;
            }
        }
    }
    fclose(f);
    return port;
}

#define NGINX_TITLE "nginx: master process nginx -g daemon off;"

static int nginx_main(char **argv)
{
    /* nginx rewrites its command line to name the master process (critest
     * greps /proc/1/cmdline for "master process"): run again with that as
     * argv[0], from our own path so that the process name stays "nginx". */
    if (strcmp(argv[0], NGINX_TITLE) != 0) {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n < 0)
            die("readlink /proc/self/exe");
        self[n] = 0;
        char *args[] = {NGINX_TITLE, NULL};
        execv(self, args);
        die(self);
    }
    return serve(nginx_port(), "nginx", "/var/run/nginx.pid");
}

static int httpd_main(void)
{
    fprintf(stderr, "[pid %d] httpd stand-in (podscope test image), command line: "
                    "'httpd -D FOREGROUND', serving port 80\n",
            (int)getpid());
    return serve(80, "httpd", NULL);
}

static int nnp_main(void)
{
    printf("Effective uid: %d\n", (int)geteuid());
    return 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *slash = strrchr(argv[0], '/');
    const char *name = slash ? slash + 1 : argv[0];
    prog = name;
    if (strcmp(name, "pause") == 0)
        return pause_main();
    if (strcmp(name, "nginx") == 0 || strcmp(argv[0], NGINX_TITLE) == 0)
        return nginx_main(argv);
    if (strcmp(name, "httpd-foreground") == 0)
        return httpd_main();
    if (strcmp(name, "nnp") == 0)
        return nnp_main();
    fprintf(stderr, "%s: run me as pause, nginx, httpd-foreground or nnp\n", argv[0]);
    return 2;
}
