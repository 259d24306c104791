/* Two processes sharing a ring, through the C API: a ring file opened by path in an
 * exec'd child (its kind and mode read from the file), and a sealed memfd inherited by
 * two exec'd children that attach with ringtrace_ring_from_fd. The parent consumes and
 * checks every record (per-producer order, checksum) and the counters. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define RECORDS 5000
#define MAX_CHILDREN 2

struct rec {
    uint32_t child, seq, sum, pad;
};

static int produce(ringtrace_ring *ring, uint32_t child) {
    ringtrace_producer *p = NULL;
    CHECK_EQ(ringtrace_producer_new(ring, &p), 0);
    for (uint32_t seq = 0; seq < RECORDS; seq++) {
        struct rec r = {child, seq, 0, 0};
        r.sum = fnv1a(&r, 8);
        CHECK_EQ(ringtrace_output_wait(p, &r, sizeof r, RINGTRACE_WAKEUP_DEFAULT, 30000), 0);
    }
    ringtrace_producer_free(p);
    return 0;
}

static int child_main(int argc, char **argv) {
    ringtrace_ring *ring = NULL;
    CHECK(argc == 4);
    uint32_t id = (uint32_t)atoi(argv[3]);
    if (strcmp(argv[1], "file") == 0) {
        CHECK_EQ(ringtrace_ring_open(argv[2], RINGTRACE_ACCESS_FULL, &ring), 0);
    } else {
        int fd = atoi(argv[2]);
        CHECK_EQ(ringtrace_ring_from_fd(fd, RINGTRACE_ACCESS_FULL, &ring), 0);
        close(fd); /* the ring keeps its own duplicate */
    }
    produce(ring, id);
    ringtrace_ring_free(ring);
    return 0;
}

static pid_t spawn(const char *exe, const char *how, const char *where, uint32_t id) {
    char idbuf[16];
    snprintf(idbuf, sizeof idbuf, "%u", id);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execl(exe, exe, how, where, idbuf, (char *)NULL);
        _exit(127);
    }
    return pid;
}

struct seen {
    uint32_t next[MAX_CHILDREN];
    uint64_t records;
};

static int on_record(void *ctx, const void *data, size_t len) {
    struct seen *s = ctx;
    struct rec r;
    CHECK_EQ(len, sizeof r);
    memcpy(&r, data, sizeof r);
    CHECK(r.child < MAX_CHILDREN);
    CHECK_EQ(r.seq, s->next[r.child]);
    CHECK_EQ(fnv1a(&r, 8), r.sum);
    s->next[r.child]++;
    s->records++;
    return 0;
}

static void consume_all(ringtrace_ring *ring, uint64_t want) {
    ringtrace_consumer *c = NULL;
    CHECK_EQ(ringtrace_consumer_new(ring, &c), 0);
    struct seen s = {{0}, 0};
    long long deadline = now_ms() + 120000;
    while (s.records < want) {
        CHECK(now_ms() < deadline);
        int n = ringtrace_poll(c, 200, on_record, &s);
        CHECK(n >= 0 || n == -EPIPE); /* -EPIPE: no producer attached at this moment */
    }
    struct ringtrace_stats st;
    CHECK_EQ(ringtrace_ring_stats(ring, &st), 0);
    CHECK_EQ(st.committed, want);
    CHECK_EQ(st.consumed, want);
    ringtrace_consumer_free(c);
}

static void wait_ok(pid_t pid) {
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv) {
    if (argc > 1) return child_main(argc, argv);
    const char *exe = getenv("RINGTRACE_TEST_EXE") ? getenv("RINGTRACE_TEST_EXE") : argv[0];

    /* 1. A ring file, opened by path in the child. */
    char path[64];
    snprintf(path, sizeof path, "ringtrace-c-test-%d.ring", (int)getpid());
    unlink(path);
    struct ringtrace_ring_opts opts = {.sz = sizeof opts, .capacity = 1 << 14, .kind = RINGTRACE_SPSC};
    ringtrace_ring *ring = NULL;
    CHECK_EQ(ringtrace_ring_create(path, &opts, &ring), 0);
    ringtrace_ring *again = NULL;
    CHECK_EQ(ringtrace_ring_create(path, &opts, &again), -EEXIST);
    /* a consumer-only handle refuses producers */
    ringtrace_ring *ro = NULL;
    ringtrace_producer *p = NULL;
    CHECK_EQ(ringtrace_ring_open(path, RINGTRACE_ACCESS_CONSUMER, &ro), 0);
    CHECK_EQ(ringtrace_producer_new(ro, &p), -EPERM);
    ringtrace_ring_free(ro);
    pid_t child = spawn(exe, "file", path, 0);
    consume_all(ring, RECORDS);
    wait_ok(child);
    ringtrace_ring_free(ring);
    unlink(path);

    /* 2. A sealed memfd inherited by two children. */
    opts.kind = RINGTRACE_MPSC;
    CHECK_EQ(ringtrace_ring_new_shared(&opts, &ring), 0);
    int memfd = ringtrace_ring_memfd(ring);
    CHECK(memfd >= 0);
    int inherit = dup(memfd); /* dup clears close-on-exec */
    CHECK(inherit >= 0);
    char fdbuf[16];
    snprintf(fdbuf, sizeof fdbuf, "%d", inherit);
    pid_t a = spawn(exe, "fd", fdbuf, 0);
    pid_t b = spawn(exe, "fd", fdbuf, 1);
    close(inherit);
    consume_all(ring, 2 * RECORDS);
    wait_ok(a);
    wait_ok(b);
    ringtrace_ring_free(ring);
    puts("processes: ring file and memfd shared with exec'd children, every record checked");
    return 0;
}
