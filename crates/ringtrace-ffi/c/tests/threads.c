/* Multi-threaded producers and one consumer on a multi-producer ring, through the C API:
 * every record is checksummed and numbered per producer, each producer's records arrive
 * in order, and the ring's counters account for every record exactly (committed =
 * consumed, lost = the refusals the producers saw). The ring handle is freed while the
 * producers and the consumer are still running: they hold their own references. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

#define PRODUCERS 4
#define PER_PRODUCER 20000
#define MAX_PAYLOAD 200

struct header {
    uint32_t producer, seq, len, sum; /* sum: FNV-1a of the payload after the header */
};

struct producer_arg {
    ringtrace_producer *p;
    uint32_t id;
    uint64_t refused; /* -ENOSPC returns */
};

static void fill(unsigned char *buf, uint32_t id, uint32_t seq, uint32_t len) {
    struct header h = {id, seq, len, 0};
    for (uint32_t i = 0; i < len; i++) buf[sizeof h + i] = (unsigned char)(id * 31 + seq * 7 + i);
    h.sum = fnv1a(buf + sizeof h, len);
    memcpy(buf, &h, sizeof h);
}

static void *produce(void *arg) {
    struct producer_arg *a = arg;
    unsigned char buf[sizeof(struct header) + MAX_PAYLOAD];
    long long deadline = now_ms() + 60000;
    for (uint32_t seq = 0; seq < PER_PRODUCER; seq++) {
        uint32_t len = (seq * 13 + a->id) % MAX_PAYLOAD;
        size_t total = sizeof(struct header) + len;
        fill(buf, a->id, seq, len);
        if (seq % 2 == 0) {
            /* zero-copy: reserve, write in place, commit; retry while full */
            void *data = NULL;
            int rc;
            while ((rc = ringtrace_reserve(a->p, total, &data)) == -ENOSPC) {
                a->refused++;
                CHECK(now_ms() < deadline);
                sched_yield();
            }
            CHECK_EQ(rc, 0);
            CHECK(data != NULL);
            memcpy(data, buf, total);
            CHECK_EQ(ringtrace_commit(a->p, RINGTRACE_WAKEUP_DEFAULT), 0);
        } else {
            /* copying, waiting for room */
            CHECK_EQ(ringtrace_output_wait(a->p, buf, total, RINGTRACE_WAKEUP_DEFAULT, 30000), 0);
        }
    }
    return NULL;
}

struct consumer_state {
    uint32_t next_seq[PRODUCERS];
    uint64_t records;
};

static int on_record(void *ctx, const void *data, size_t len) {
    struct consumer_state *s = ctx;
    struct header h;
    CHECK(len >= sizeof h);
    memcpy(&h, data, sizeof h);
    CHECK(h.producer < PRODUCERS);
    CHECK_EQ(h.seq, s->next_seq[h.producer]);
    CHECK_EQ(len, sizeof h + h.len);
    CHECK_EQ(fnv1a((const unsigned char *)data + sizeof h, h.len), h.sum);
    s->next_seq[h.producer]++;
    s->records++;
    return 0;
}

int main(void) {
    struct ringtrace_ring_opts opts = {.sz = sizeof opts, .capacity = 1 << 16, .kind = RINGTRACE_MPSC};
    ringtrace_ring *ring = NULL;
    CHECK_EQ(ringtrace_ring_new(&opts, &ring), 0);
    size_t max = 0;
    CHECK_EQ(ringtrace_ring_max_record_len(ring, &max), 0);
    CHECK(max >= sizeof(struct header) + MAX_PAYLOAD);

    ringtrace_consumer *c = NULL;
    CHECK_EQ(ringtrace_consumer_new(ring, &c), 0);
    ringtrace_consumer *second = NULL;
    CHECK_EQ(ringtrace_consumer_new(ring, &second), -EBUSY); /* one consumer per ring */

    struct producer_arg args[PRODUCERS];
    pthread_t threads[PRODUCERS];
    for (uint32_t i = 0; i < PRODUCERS; i++) {
        args[i] = (struct producer_arg){.id = i};
        CHECK_EQ(ringtrace_producer_new(ring, &args[i].p), 0);
    }
    struct ringtrace_stats st;
    CHECK_EQ(ringtrace_ring_stats(ring, &st), 0);
    CHECK_EQ(st.capacity, 1 << 16);
    for (uint32_t i = 0; i < PRODUCERS; i++) CHECK_EQ(pthread_create(&threads[i], NULL, produce, &args[i]), 0);

    struct consumer_state s = {{0}, 0};
    const uint64_t total = (uint64_t)PRODUCERS * PER_PRODUCER;
    long long deadline = now_ms() + 120000;
    int fd = ringtrace_consumer_fd(c);
    CHECK(fd >= 0);
    int round = 0;
    while (s.records < total) {
        CHECK(now_ms() < deadline);
        if (round++ % 2 == 0) {
            /* wait on the descriptor, as an epoll loop would */
            int armed = ringtrace_consumer_arm(c);
            CHECK(armed == 0 || armed == 1);
            if (armed == 1) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                CHECK(poll(&pfd, 1, 100) >= 0);
            }
            int n = ringtrace_consume_n(c, 1000, on_record, &s);
            CHECK(n >= 0);
        } else {
            int n = ringtrace_poll(c, 100, on_record, &s);
            CHECK(n >= 0);
        }
    }
    for (uint32_t i = 0; i < PRODUCERS; i++) CHECK_EQ(pthread_join(threads[i], NULL), 0);

    /* Counters: every record committed and consumed, every refusal counted as lost. */
    uint64_t refused = 0;
    for (uint32_t i = 0; i < PRODUCERS; i++) refused += args[i].refused;
    CHECK_EQ(ringtrace_ring_stats(ring, &st), 0);
    CHECK_EQ(st.committed, total);
    CHECK_EQ(st.consumed, total);
    CHECK_EQ(st.lost, refused);
    CHECK_EQ(st.discarded, 0);
    CHECK_EQ(st.too_large, 0);
    for (uint32_t i = 0; i < PRODUCERS; i++) CHECK_EQ(s.next_seq[i], PER_PRODUCER);

    /* The ring handle goes first; the producers and the consumer still work. */
    ringtrace_ring_free(ring);
    CHECK_EQ(ringtrace_output(args[0].p, "late", 4, RINGTRACE_WAKEUP_FORCE), 0);
    for (uint32_t i = 0; i < PRODUCERS; i++) ringtrace_producer_free(args[i].p);
    CHECK_EQ(ringtrace_poll(c, 1000, NULL, NULL), 1);
    /* Every producer gone and everything read: -EPIPE. */
    CHECK_EQ(ringtrace_poll(c, 1000, NULL, NULL), -EPIPE);
    ringtrace_consumer_free(c);
    printf("threads: %llu records from %d producers, %llu refusals counted as lost\n",
           (unsigned long long)total, PRODUCERS, (unsigned long long)refused);
    return 0;
}
