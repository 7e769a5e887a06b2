/*
 * The raw-TCP floor on io_uring: floor.c's server (fixed-size requests answered with
 * fixed-size replies, everything whole a receive brought answered in one send) driven by
 * completions instead of readiness, with what io_uring offers a server of many small
 * messages: one ring per thread created SINGLE_ISSUER | DEFER_TASKRUN (completions run only
 * when this thread enters the kernel, so no interrupts from task work), multishot accept,
 * multishot receive into a provided buffer ring (no receive posted per read), and every send
 * of a loop turn submitted together with the wait for the next completions (one
 * io_uring_enter per turn, however many connections were served).
 *
 * It answers the question io_uring's promise raises for lab: how much of the kernel's share
 * of a call's CPU does a completion-driven transport remove at each arrival pattern?
 * benches/floor.py runs it beside the epoll floor with the same client (floor.c's), so the
 * two floors differ only in the server's kernel interface.
 *
 * Needs liburing (Debian: liburing-dev) and Linux 6.1 or newer (DEFER_TASKRUN).
 *
 *   floor_uring server PORT REQUEST_BYTES REPLY_BYTES
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "positive.h"

#define RING_ENTRIES 4096
#define BUFFER_GROUP 1
#define BUFFERS 1024 /* provided receive buffers (a power of two) */
#define BUFFER_SIZE 16384
#define MAX_CONNECTIONS 65536
#define OUT (1 << 20)

/* What a completion is for: its kind in the top byte of user_data, the descriptor below. */
enum kind { ACCEPT = 1, RECEIVE = 2, SEND = 3 };

static uint64_t tag(enum kind kind, int fd) { return ((uint64_t)kind << 56) | (uint32_t)fd; }

static void die(const char *what, int error) {
    fprintf(stderr, "floor_uring: %s: %s\n", what, strerror(error));
    exit(1);
}

static struct io_uring ring;
static struct io_uring_buf_ring *buffers;
static char *buffer_memory;
/* Bytes of a partial request left over per connection (fd-indexed). */
static size_t partial[MAX_CONNECTIONS];

/* A free submission entry; when the ring is full, what is queued is submitted first. */
static struct io_uring_sqe *entry(void) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    if (sqe == NULL) {
        io_uring_submit(&ring);
        sqe = io_uring_get_sqe(&ring);
        if (sqe == NULL) die("no submission entry", EBUSY);
    }
    return sqe;
}

static void arm_receive(int fd) {
    struct io_uring_sqe *sqe = entry();
    io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BUFFER_GROUP;
    io_uring_sqe_set_data64(sqe, tag(RECEIVE, fd));
}

static void arm_accept(int listener) {
    struct io_uring_sqe *sqe = entry();
    io_uring_prep_multishot_accept(sqe, listener, NULL, NULL, 0);
    io_uring_sqe_set_data64(sqe, tag(ACCEPT, listener));
}

/* Gives a provided buffer back to the ring once its bytes are counted. */
static void recycle(unsigned id) {
    io_uring_buf_ring_add(buffers, buffer_memory + (size_t)id * BUFFER_SIZE, BUFFER_SIZE, id,
                          io_uring_buf_ring_mask(BUFFERS), 0);
    io_uring_buf_ring_advance(buffers, 1);
}

/* Runs until killed (the benchmark script ends it). */
static _Noreturn void serve(int port, size_t request, size_t reply) {
    struct io_uring_params params = {
        .flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN,
    };
    int error = io_uring_queue_init_params(RING_ENTRIES, &ring, &params);
    if (error < 0) die("io_uring_queue_init_params (Linux 6.1 or newer, io_uring enabled)", -error);

    /* The provided buffer ring: the kernel picks a buffer for each receive it completes. */
    if (posix_memalign((void **)&buffers, 4096, BUFFERS * sizeof(struct io_uring_buf)) != 0)
        die("posix_memalign", ENOMEM);
    buffer_memory = malloc((size_t)BUFFERS * BUFFER_SIZE);
    io_uring_buf_ring_init(buffers);
    struct io_uring_buf_reg registration = {
        .ring_addr = (unsigned long)buffers, .ring_entries = BUFFERS, .bgid = BUFFER_GROUP};
    error = io_uring_register_buf_ring(&ring, &registration, 0);
    if (error < 0) die("io_uring_register_buf_ring", -error);
    for (unsigned id = 0; id < BUFFERS; id++) recycle(id);

    int listener = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind", errno);
    if (listen(listener, 1024) < 0) die("listen", errno);
    arm_accept(listener);

    /* Replies are zeros from one read-only buffer: sends in flight may share it. */
    char *out = calloc(OUT, 1);
    size_t most = OUT / reply;
    for (;;) {
        error = io_uring_submit_and_wait(&ring, 1);
        if (error < 0 && error != -EINTR) die("io_uring_submit_and_wait", -error);
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            seen++;
            uint64_t data = io_uring_cqe_get_data64(cqe);
            int fd = (int)(uint32_t)data;
            int result = cqe->res;
            switch ((enum kind)(data >> 56)) {
            case ACCEPT:
                if (result >= 0) {
                    if (result >= MAX_CONNECTIONS) die("too many connections", EMFILE);
                    setsockopt(result, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    partial[result] = 0;
                    arm_receive(result);
                }
                if (!(cqe->flags & IORING_CQE_F_MORE)) arm_accept(listener);
                break;
            case RECEIVE:
                if (result == -ENOBUFS) { /* every buffer in use: receive again once they are back */
                    arm_receive(fd);
                    break;
                }
                if (result <= 0) { /* the client closed the connection (or it failed) */
                    close(fd);
                    break;
                }
                recycle(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
                size_t bytes = partial[fd] + (size_t)result;
                size_t whole = bytes / request;
                partial[fd] = bytes % request;
                while (whole > 0) {
                    size_t batch = whole < most ? whole : most;
                    struct io_uring_sqe *sqe = entry();
                    /* MSG_WAITALL: io_uring finishes a short send itself, as write_all does. */
                    io_uring_prep_send(sqe, fd, out, batch * reply, MSG_WAITALL | MSG_NOSIGNAL);
                    io_uring_sqe_set_data64(sqe, tag(SEND, fd));
                    whole -= batch;
                }
                if (!(cqe->flags & IORING_CQE_F_MORE)) arm_receive(fd);
                break;
            case SEND:
                /* A failed send means the client went away; its receive sees the close. */
                break;
            }
        }
        io_uring_cq_advance(&ring, seen);
    }
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc == 5 && strcmp(argv[1], "server") == 0)
        serve((int)positive("floor_uring", argv[2], "PORT"), (size_t)positive("floor_uring", argv[3], "REQUEST_BYTES"),
              (size_t)positive("floor_uring", argv[4], "REPLY_BYTES"));
    fprintf(stderr, "usage: floor_uring server PORT REQUEST_BYTES REPLY_BYTES\n");
    return 2;
}
