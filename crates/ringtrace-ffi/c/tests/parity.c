/* What libbpf and LTTng-UST users reach for, from C: a zero-copy reserve that waits for
 * room (ringtrace_reserve_wait) woken as a consumer drains, timing out without one and
 * told when the consumer is gone; a snapshot file read back (ringtrace_snapshot_read),
 * record for record, and a damaged one refused with its name; several reservations
 * open at once (a producer handle each), committed out of order, delivered in
 * reservation order. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sys/stat.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

#define RECORDS 20000

struct drain {
    ringtrace_consumer *c;
    uint64_t next;
};

static int check_record(void *ctx, const void *data, size_t len) {
    struct drain *d = ctx;
    uint64_t v;
    CHECK_EQ(len, 64);
    memcpy(&v, data, sizeof v);
    CHECK_EQ(v, d->next);
    CHECK_EQ(fnv1a(data, 60), *(const uint32_t *)((const char *)data + 60));
    d->next++;
    return 0;
}

static void *drain(void *arg) {
    struct drain *d = arg;
    long long deadline = now_ms() + 60000;
    while (d->next < RECORDS && now_ms() < deadline) {
        int rc = ringtrace_poll(d->c, 100, check_record, d);
        CHECK(rc >= 0 || rc == -ETIMEDOUT);
    }
    return NULL;
}

static int count_records(void *ctx, const void *data, size_t len) {
    (void)data;
    (void)len;
    (*(size_t *)ctx)++;
    return 0;
}

/* Checks that each record is the 8-byte index that follows the last. */
static int in_order(void *ctx, const void *data, size_t len) {
    struct drain *d = ctx;
    uint64_t v;
    CHECK_EQ(len, 8);
    memcpy(&v, data, sizeof v);
    CHECK_EQ(v, d->next);
    d->next++;
    return 0;
}

/* Keeps the first record's length and stops there (nonzero). */
static int first_len(void *ctx, const void *data, size_t len) {
    (void)data;
    *(size_t *)ctx = len;
    return 1;
}

int main(void) {
    /* A 4 KiB ring, far smaller than the 20,000 records of 64 bytes that pass through it:
     * the producer waits for room in place, the consumer thread checks every record. */
    struct ringtrace_ring_opts o = {0};
    o.sz = sizeof o;
    o.capacity = 4096;
    ringtrace_ring *ring = NULL;
    CHECK_EQ(ringtrace_ring_new(&o, &ring), 0);
    ringtrace_producer *p = NULL;
    CHECK_EQ(ringtrace_producer_new(ring, &p), 0);
    struct drain d = {NULL, 0};
    CHECK_EQ(ringtrace_consumer_new(ring, &d.c), 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, drain, &d), 0);
    for (uint64_t i = 0; i < RECORDS; i++) {
        void *data = NULL;
        CHECK_EQ(ringtrace_reserve_wait(p, 64, 30000, &data), 0);
        memcpy(data, &i, sizeof i);
        memset((char *)data + 8, (int)(i & 0xff), 52);
        uint32_t sum = fnv1a(data, 60);
        memcpy((char *)data + 60, &sum, sizeof sum);
        CHECK_EQ(ringtrace_commit(p, RINGTRACE_WAKEUP_DEFAULT), 0);
    }
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(d.next, RECORDS);
    struct ringtrace_stats st;
    CHECK_EQ(ringtrace_ring_stats(ring, &st), 0);
    CHECK_EQ(st.lost, 0);

    /* Full, and nobody drains: the wait ends at its timeout, counted lost. */
    void *data = NULL;
    while (ringtrace_reserve(p, 64, &data) == 0) {
        CHECK_EQ(ringtrace_commit(p, RINGTRACE_WAKEUP_DEFAULT), 0);
    }
    long long t0 = now_ms();
    CHECK_EQ(ringtrace_reserve_wait(p, 64, 50, &data), -ETIMEDOUT);
    CHECK(now_ms() - t0 >= 40);
    /* The consumer gone: told at once rather than at the timeout. */
    ringtrace_consumer_free(d.c);
    t0 = now_ms();
    CHECK_EQ(ringtrace_reserve_wait(p, 64, 30000, &data), -EPIPE);
    CHECK(now_ms() - t0 < 20000);
    ringtrace_producer_free(p);
    ringtrace_ring_free(ring);

    /* Three reservations open at once on one ring, committed last first: the consumer
     * sees none until the oldest is committed, then all three in reservation order. */
    CHECK_EQ(ringtrace_ring_new(&o, &ring), 0);
    ringtrace_producer *ps[3];
    void *slots[3];
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(ringtrace_producer_new(ring, &ps[i]), 0);
        CHECK_EQ(ringtrace_reserve(ps[i], 8, &slots[i]), 0);
        uint64_t v = (uint64_t)i;
        memcpy(slots[i], &v, sizeof v);
    }
    struct drain order = {NULL, 0};
    CHECK_EQ(ringtrace_consumer_new(ring, &order.c), 0);
    CHECK_EQ(ringtrace_commit(ps[2], RINGTRACE_WAKEUP_DEFAULT), 0);
    CHECK_EQ(ringtrace_commit(ps[1], RINGTRACE_WAKEUP_DEFAULT), 0);
    size_t seen = 0;
    CHECK_EQ(ringtrace_consume(order.c, count_records, &seen), 0);
    CHECK_EQ(seen, 0);
    CHECK_EQ(ringtrace_commit(ps[0], RINGTRACE_WAKEUP_DEFAULT), 0);
    CHECK_EQ(ringtrace_consume(order.c, in_order, &order), 3);
    CHECK_EQ(order.next, 3);
    for (int i = 0; i < 3; i++) {
        ringtrace_producer_free(ps[i]);
    }
    ringtrace_consumer_free(order.c);
    ringtrace_ring_free(ring);

    /* A flight recorder's snapshot written to a file and read back: the same records. */
    struct ringtrace_ring_opts fo = {0};
    fo.sz = sizeof fo;
    fo.capacity = 1 << 16;
    fo.mode = RINGTRACE_OVERWRITE;
    CHECK_EQ(ringtrace_ring_new(&fo, &ring), 0);
    CHECK_EQ(ringtrace_producer_new(ring, &p), 0);
    char rec[200];
    for (size_t i = 0; i < 3000; i++) {
        size_t len = 1 + i % 200;
        memset(rec, (int)i, len);
        CHECK_EQ(ringtrace_output(p, rec, len, RINGTRACE_WAKEUP_DEFAULT), 0);
    }
    ringtrace_snapshot *snap = NULL, *back = NULL;
    CHECK_EQ(ringtrace_snapshot_take(ring, &snap), 0);
    CHECK_EQ(ringtrace_snapshot_write(snap, "fr.snap"), 0);
    CHECK_EQ(ringtrace_snapshot_read("fr.snap", &back), 0);
    size_t n = ringtrace_snapshot_len(snap);
    CHECK(n > 0);
    CHECK_EQ(ringtrace_snapshot_len(back), n);
    size_t counted = 0;
    CHECK_EQ(ringtrace_snapshot_foreach(back, 0, count_records, &counted), (int)n);
    CHECK_EQ(counted, n);
    /* Newest first, the first record read back is the last written (1 + 2999 % 200
     * bytes); oldest first, the snapshot's oldest, as the ring's own snapshot has it. */
    size_t first = 0, first_live = 0;
    CHECK_EQ(ringtrace_snapshot_foreach(back, 1, first_len, &first), -ECANCELED);
    CHECK_EQ(first, 1 + 2999 % 200);
    CHECK_EQ(ringtrace_snapshot_foreach(back, 0, first_len, &first), -ECANCELED);
    CHECK_EQ(ringtrace_snapshot_foreach(snap, 0, first_len, &first_live), -ECANCELED);
    CHECK_EQ(first, first_live);
    ringtrace_snapshot_free(back);
    back = NULL;

    /* A damaged file (one byte changed in the middle) is refused, its name said. */
    FILE *f = fopen("fr.snap", "r+b");
    CHECK(f != NULL);
    CHECK_EQ(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    CHECK(size > 200);
    CHECK_EQ(fseek(f, size / 2, SEEK_SET), 0);
    int byte = fgetc(f);
    CHECK_EQ(fseek(f, size / 2, SEEK_SET), 0);
    fputc(byte ^ 0x20, f);
    fclose(f);
    CHECK_EQ(ringtrace_snapshot_read("fr.snap", &back), -EBADMSG);
    CHECK(back == NULL);
    CHECK(strstr(ringtrace_last_error(), "fr.snap") != NULL);
    CHECK_EQ(ringtrace_snapshot_read("no-such.snap", &back), -ENOENT);
    CHECK(strstr(ringtrace_last_error(), "no-such.snap") != NULL);
    /* A FIFO is refused at once, not waited on. */
    CHECK_EQ(mkfifo("a.fifo", 0600), 0);
    CHECK_EQ(ringtrace_snapshot_read("a.fifo", &back), -EINVAL);
    CHECK(strstr(ringtrace_last_error(), "a.fifo") != NULL);
    remove("a.fifo");
    remove("fr.snap");
    ringtrace_snapshot_free(snap);
    ringtrace_producer_free(p);
    ringtrace_ring_free(ring);
    puts("parity: ok");
    return 0;
}
