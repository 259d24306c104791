/* Flight-recorder snapshots from C under writers that never stop: every snapshot holds
 * records, each whole (checksummed) and in its writer's order, or the call returns
 * -EBUSY. Never 0 with no record: a crash dump that comes back empty says the program
 * did nothing. Two writer threads and the snapshotting thread share the machine's
 * cores, so writers are preempted inside their writes, the window this looks for.
 *
 * Also: the largest record fits an emptied multi-producer ring wherever its consumer
 * stopped (ringtrace_ring_max_record_len is the true bound). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

#define WRITERS 2
#define SNAPSHOTS 10000

static atomic_int stop;
static atomic_int started;

struct writer {
    ringtrace_ring *ring;
    unsigned char id;
};

struct rec {
    unsigned char writer;
    uint64_t seq;
    uint32_t sum; /* of the bytes before it */
} __attribute__((packed));

static void *write_nonstop(void *arg) {
    struct writer *w = arg;
    ringtrace_producer *p;
    CHECK_EQ(ringtrace_producer_new(w->ring, &p), 0);
    int wrote = 0;
    for (uint64_t seq = 0; !atomic_load_explicit(&stop, memory_order_relaxed); seq++) {
        struct rec r = {.writer = w->id, .seq = seq};
        r.sum = fnv1a(&r, offsetof(struct rec, sum));
        if (ringtrace_output(p, &r, sizeof r, RINGTRACE_WAKEUP_NONE) == 0 && !wrote) {
            wrote = 1;
            atomic_fetch_add(&started, 1);
        }
    }
    ringtrace_producer_free(p);
    return NULL;
}

struct seen {
    uint64_t last[WRITERS];
    int any[WRITERS];
};

static int check_record(void *ctx, const void *data, size_t len) {
    struct seen *s = ctx;
    struct rec r;
    CHECK(len == sizeof r);
    memcpy(&r, data, sizeof r);
    CHECK(r.writer < WRITERS);
    CHECK(r.sum == fnv1a(&r, offsetof(struct rec, sum)));
    CHECK(!s->any[r.writer] || r.seq > s->last[r.writer]);
    s->any[r.writer] = 1;
    s->last[r.writer] = r.seq;
    return 0;
}

static void largest_record_fits_an_emptied_ring(void) {
    struct ringtrace_ring_opts opts = {.sz = sizeof opts, .capacity = 4096};
    ringtrace_ring *ring;
    ringtrace_producer *p;
    ringtrace_consumer *c;
    CHECK_EQ(ringtrace_ring_new(&opts, &ring), 0);
    CHECK_EQ(ringtrace_producer_new(ring, &p), 0);
    CHECK_EQ(ringtrace_consumer_new(ring, &c), 0);
    size_t max;
    CHECK_EQ(ringtrace_ring_max_record_len(ring, &max), 0);
    static unsigned char big[4096];
    for (size_t first = 1; first < 80; first += 7) {
        CHECK_EQ(ringtrace_output(p, big, first, RINGTRACE_WAKEUP_NONE), 0);
        CHECK_EQ(ringtrace_consume(c, NULL, NULL), 1);
        /* Empty now, the consumer at `first` rounded up to 8 bytes past a header. */
        CHECK_EQ(ringtrace_output(p, big, max, RINGTRACE_WAKEUP_NONE), 0);
        CHECK_EQ(ringtrace_consume(c, NULL, NULL), 1);
        CHECK_EQ(ringtrace_output_wait(p, big, max, RINGTRACE_WAKEUP_NONE, 5000), 0);
        CHECK_EQ(ringtrace_consume(c, NULL, NULL), 1);
    }
    CHECK_EQ(ringtrace_output_wait(p, big, max + 1, RINGTRACE_WAKEUP_NONE, 5000), -EMSGSIZE);
    ringtrace_consumer_free(c);
    ringtrace_producer_free(p);
    ringtrace_ring_free(ring);
}

int main(void) {
    largest_record_fits_an_emptied_ring();

    struct ringtrace_ring_opts opts = {.sz = sizeof opts, .capacity = 1 << 16, .mode = RINGTRACE_OVERWRITE};
    ringtrace_ring *ring;
    CHECK_EQ(ringtrace_ring_new(&opts, &ring), 0);
    pthread_t threads[WRITERS];
    struct writer writers[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        writers[i] = (struct writer){.ring = ring, .id = (unsigned char)i};
        CHECK(pthread_create(&threads[i], NULL, write_nonstop, &writers[i]) == 0);
    }
    long long deadline = now_ms() + 60000;
    while (atomic_load(&started) < WRITERS) {
        CHECK(now_ms() < deadline);
        sched_yield();
    }
    int busy = 0;
    size_t held = 0;
    for (int i = 0; i < SNAPSHOTS; i++) {
        ringtrace_snapshot *snap;
        int err = ringtrace_snapshot_take(ring, &snap);
        if (err == -EBUSY) {
            busy++;
            continue;
        }
        CHECK_EQ(err, 0);
        size_t n = ringtrace_snapshot_len(snap);
        if (n == 0) {
            fprintf(stderr, "snapshot %d: 0 records and success under nonstop writers\n", i);
            exit(1);
        }
        struct seen s = {0};
        CHECK_EQ(ringtrace_snapshot_foreach(snap, 0, check_record, &s), n);
        held += n;
        ringtrace_snapshot_free(snap);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < WRITERS; i++) pthread_join(threads[i], NULL);
    ringtrace_ring_free(ring);
    printf("%d snapshots: %d busy, %zu records held\n", SNAPSHOTS, busy, held);
    CHECK(busy * 10 < SNAPSHOTS);
    return 0;
}
