/*
 * The raw-TCP floor: what answering a request costs a server when nothing but the
 * kernel's TCP path is left. One epoll thread answers fixed-size requests with fixed-size
 * replies, one write per read; its client keeps a fixed number of requests in flight per
 * connection (closed loop) or sends single requests evenly paced over all its connections
 * (open loop). The sizes are a gRPC call's bytes on the wire (benches/floor.py measures
 * them from lab), so the only difference from lab is everything HTTP/2 and gRPC add in
 * user space: lab's distance to the physical limit.
 *
 * Written in C on purpose: a floor must not carry any runtime of its own.
 *
 *   floor server PORT REQUEST_BYTES REPLY_BYTES
 *   floor client PORT REQUEST_BYTES REPLY_BYTES CONNECTIONS IN_FLIGHT WARMUP SECONDS [RATE [BATCH]]
 *
 * The client runs WARMUP + SECONDS and prints one line: "replies N seconds S", the replies
 * received after the warmup and the measured window.
 * With RATE (requests per second over all connections) IN_FLIGHT is ignored: request k is
 * due at k / RATE and goes out on connection k % CONNECTIONS when due. With BATCH,
 * BATCH consecutive requests leave together in one write on one connection when the first
 * of them is due: the arrival pattern of grpclab load's open loop, where a connection takes
 * as many consecutive calls as it has free streams and sends those due together.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "positive.h"

#define MAX_EVENTS 256
#define BUFFER (1 << 20)

static void die(const char *what) {
    perror(what);
    exit(1);
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Writes all of `len` bytes (blocking briefly on a full socket buffer is the floor's
 * honest cost: the kernel is the limit). */
static void write_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            die("write");
        }
        data += n;
        len -= (size_t)n;
    }
}

/* Runs until killed (the benchmark script ends it). */
static _Noreturn void serve(int port, size_t request, size_t reply) {
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind");
    if (listen(listener, 1024) < 0) die("listen");
    int epoll = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener};
    epoll_ctl(epoll, EPOLL_CTL_ADD, listener, &event);
    /* Bytes of a partial request left over per connection (fd-indexed). */
    static size_t partial[65536];
    static char in[BUFFER];
    char *out = calloc(BUFFER, 1);
    size_t most = BUFFER / reply;
    struct epoll_event events[MAX_EVENTS];
    for (;;) {
        int ready = epoll_wait(epoll, events, MAX_EVENTS, -1);
        if (ready < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < ready; i++) {
            int fd = events[i].data.fd;
            if (fd == listener) {
                int client;
                while ((client = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    if (client >= 65536) die("too many connections");
                    partial[client] = 0;
                    struct epoll_event e = {.events = EPOLLIN, .data.fd = client};
                    epoll_ctl(epoll, EPOLL_CTL_ADD, client, &e);
                }
                continue;
            }
            /* Read what is there, then answer every whole request in one write. */
            ssize_t n = read(fd, in, sizeof in);
            if (n <= 0) {
                if (n < 0 && errno == EAGAIN) continue;
                close(fd);
                continue;
            }
            size_t bytes = partial[fd] + (size_t)n;
            size_t whole = bytes / request;
            partial[fd] = bytes % request;
            while (whole > 0) {
                size_t batch = whole < most ? whole : most;
                write_all(fd, out, batch * reply);
                whole -= batch;
            }
        }
    }
}

struct connection {
    int fd;
    size_t partial; /* bytes of a partial reply */
};

static int client(int port, size_t request, size_t reply, int connections, int in_flight,
                  double warmup, double seconds, double rate, double batch_size) {
    struct connection *conns = calloc((size_t)connections, sizeof *conns);
    int epoll = epoll_create1(0);
    int one = 1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int c = 0; c < connections; c++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conns[c].fd = fd;
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)c};
        epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &e);
    }
    char *out = calloc(BUFFER, 1);
    static char in[BUFFER];
    int timer = -1;
    uint64_t start = now_ns();
    uint64_t measure_from = start + (uint64_t)(warmup * 1e9);
    uint64_t end = measure_from + (uint64_t)(seconds * 1e9);
    uint64_t at_warmup_end = UINT64_MAX; /* replies counted when the warmup ended */
    uint64_t interval = rate > 0 ? (uint64_t)(1e9 / rate) : 0;
    uint64_t batch = batch_size >= 1 ? (uint64_t)batch_size : 1;
    uint64_t next = 0; /* open loop: the next request's index */
    if (rate > 0) {
        timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
        epoll_ctl(epoll, EPOLL_CTL_ADD, timer, &e);
    } else {
        for (int c = 0; c < connections; c++)
            write_all(conns[c].fd, out, (size_t)in_flight * request);
    }
    uint64_t replies = 0;
    struct epoll_event events[MAX_EVENTS];
    for (;;) {
        uint64_t now = now_ns();
        if (now >= end) break;
        if (now >= measure_from && at_warmup_end == UINT64_MAX) at_warmup_end = replies;
        if (rate > 0) {
            /* Send every request now due, one write each, then arm the timer for the next. */
            /* Each batch of BATCH consecutive requests leaves in one write on one connection
             * when its first request is due. */
            while (start + next * interval <= now) {
                write_all(conns[(next / batch) % (uint64_t)connections].fd, out, batch * request);
                next += batch;
            }
            uint64_t due = start + next * interval;
            struct itimerspec at = {.it_value = {.tv_sec = (time_t)(due / 1000000000ull),
                                                 .tv_nsec = (long)(due % 1000000000ull)}};
            timerfd_settime(timer, TFD_TIMER_ABSTIME, &at, NULL);
        }
        int ready = epoll_wait(epoll, events, MAX_EVENTS, 100);
        for (int i = 0; i < ready; i++) {
            uint32_t c = events[i].data.u32;
            if (c == UINT32_MAX) {
                uint64_t expirations;
                if (read(timer, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
                    die("timerfd");
                continue;
            }
            ssize_t n = read(conns[c].fd, in, sizeof in);
            if (n <= 0) die("the server closed a connection");
            size_t bytes = conns[c].partial + (size_t)n;
            size_t whole = bytes / reply;
            conns[c].partial = bytes % reply;
            replies += whole;
            /* Closed loop: one new request per reply, in one write. */
            if (rate == 0 && whole > 0) write_all(conns[c].fd, out, whole * request);
        }
    }
    if (at_warmup_end == UINT64_MAX) at_warmup_end = 0;
    printf("replies %llu seconds %.6f\n", (unsigned long long)(replies - at_warmup_end),
           (double)(now_ns() - measure_from) / 1e9);
    return 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 5) {
        positive("floor", argv[2], "PORT");
        positive("floor", argv[3], "REQUEST_BYTES");
        positive("floor", argv[4], "REPLY_BYTES");
    }
    if (argc >= 9) {
        positive("floor", argv[5], "CONNECTIONS");
        positive("floor", argv[6], "IN_FLIGHT");
    }
    if (argc >= 5 && strcmp(argv[1], "server") == 0)
        serve(atoi(argv[2]), (size_t)atol(argv[3]), (size_t)atol(argv[4]));
    if (argc >= 9 && strcmp(argv[1], "client") == 0)
        return client(atoi(argv[2]), (size_t)atol(argv[3]), (size_t)atol(argv[4]), atoi(argv[5]),
                      atoi(argv[6]), atof(argv[7]), atof(argv[8]), argc >= 10 ? atof(argv[9]) : 0,
                      argc >= 11 ? atof(argv[10]) : 0);
    fprintf(stderr,
            "usage: floor server PORT REQUEST_BYTES REPLY_BYTES\n"
            "       floor client PORT REQUEST_BYTES REPLY_BYTES CONNECTIONS IN_FLIGHT WARMUP "
            "SECONDS [RATE [BATCH]]\n");
    return 2;
}
