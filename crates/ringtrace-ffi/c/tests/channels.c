/* Channels through the C API: threads write through ringtrace_channel_output (each gets
 * its own ring) or a producer handle of their own, the reader delivers every record once, merged in timestamp order, each
 * thread's records in its order; an overwrite channel's snapshot is in time order both
 * ways. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

#define WRITERS 3
#define PER_WRITER 3000

struct rec {
    uint32_t writer, seq;
};

struct writer_arg {
    ringtrace_channel *ch;
    uint32_t id;
};

/* Writer 0 holds a producer handle of its own (ringtrace_channel_producer_output); the
 * others write through the calling thread's ring (ringtrace_channel_output). */
static void *write_records(void *arg) {
    struct writer_arg *a = arg;
    ringtrace_channel_producer *p = NULL;
    if (a->id == 0) CHECK_EQ(ringtrace_channel_producer_new(a->ch, &p), 0);
    long long deadline = now_ms() + 60000;
    for (uint32_t seq = 0; seq < PER_WRITER; seq++) {
        struct rec r = {a->id, seq};
        int rc;
        for (;;) {
            rc = p ? ringtrace_channel_producer_output(p, &r, sizeof r, RINGTRACE_WAKEUP_DEFAULT)
                   : ringtrace_channel_output(a->ch, &r, sizeof r, RINGTRACE_WAKEUP_DEFAULT);
            if (rc != -ENOSPC) break;
            CHECK(now_ms() < deadline); /* the reader frees room */
            sched_yield();
        }
        CHECK_EQ(rc, 0);
    }
    CHECK_EQ(ringtrace_channel_producer_output(NULL, &deadline, 1, 0), -EINVAL);
    ringtrace_channel_producer_free(p);
    return NULL;
}

struct merged {
    uint64_t last_ts, records, late;
    uint64_t writer_ts[WRITERS];
    uint32_t next[WRITERS];
    int newest_first;
};

static int on_record(void *ctx, uint32_t producer, uint64_t ts, const void *data, size_t len) {
    (void)producer;
    struct merged *m = ctx;
    struct rec r;
    CHECK_EQ(len, sizeof r);
    memcpy(&r, data, sizeof r);
    CHECK(r.writer < WRITERS);
    CHECK(ts > 0);
    if (m->newest_first) {
        /* a snapshot is merged in time order */
        if (m->records > 0) CHECK(ts <= m->last_ts);
    } else {
        /* a live reader: each writer's records in order; across writers, in time order
         * but for records its slack let through late (a busy machine) */
        CHECK_EQ(r.seq, m->next[r.writer]);
        CHECK(ts >= m->writer_ts[r.writer]);
        m->writer_ts[r.writer] = ts;
        m->next[r.writer]++;
        if (m->records > 0 && ts < m->last_ts) m->late++;
    }
    m->last_ts = ts;
    m->records++;
    return 0;
}

static void run(int mode) {
    ringtrace_channel *ch = NULL;
    CHECK_EQ(ringtrace_channel_new(1 << 14, mode, RINGTRACE_CLOCK_MONOTONIC, &ch), 0);
    ringtrace_channel_reader *r = NULL;
    if (mode == RINGTRACE_DISCARD) CHECK_EQ(ringtrace_channel_reader_new(ch, &r), 0);
    struct writer_arg args[WRITERS];
    pthread_t t[WRITERS];
    for (uint32_t i = 0; i < WRITERS; i++) {
        args[i] = (struct writer_arg){ch, i};
        CHECK_EQ(pthread_create(&t[i], NULL, write_records, &args[i]), 0);
    }
    struct merged m;
    memset(&m, 0, sizeof m);
    if (mode == RINGTRACE_DISCARD) {
        long long deadline = now_ms() + 60000;
        while (m.records < (uint64_t)WRITERS * PER_WRITER) {
            CHECK(now_ms() < deadline);
            int n = ringtrace_channel_poll(r, 100, on_record, &m);
            CHECK(n >= 0);
        }
    }
    for (uint32_t i = 0; i < WRITERS; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
    if (mode == RINGTRACE_DISCARD) {
        CHECK_EQ(ringtrace_channel_drain(r, on_record, &m), 0);
        CHECK_EQ(m.records, (uint64_t)WRITERS * PER_WRITER);
        CHECK(m.late < m.records / 10);
        CHECK_EQ(ringtrace_channel_snapshot_foreach(ch, 0, on_record, &m), -EINVAL);
        ringtrace_channel_reader_free(r);
    } else {
        struct merged back;
        memset(&back, 0, sizeof back);
        back.newest_first = 1;
        /* overwrite: the oldest records are gone, so only time order is checked */
        int n = ringtrace_channel_snapshot_foreach(ch, 1, on_record, &back);
        CHECK(n > 0);
        CHECK_EQ(back.records, (uint64_t)n);
        printf("channels: overwrite snapshot of %d records in time order\n", n);
    }
    ringtrace_channel_free(ch);
}

int main(void) {
    ringtrace_channel *ch = NULL;
    CHECK_EQ(ringtrace_channel_new(1000, RINGTRACE_DISCARD, RINGTRACE_CLOCK_NONE, &ch), -EINVAL);
    CHECK_EQ(ringtrace_channel_new(4096, 7, RINGTRACE_CLOCK_NONE, &ch), -EINVAL);
    CHECK_EQ(ringtrace_channel_new(4096, RINGTRACE_DISCARD, 9, &ch), -EINVAL);
    CHECK_EQ(ringtrace_channel_output(NULL, "x", 1, 0), -EINVAL);
    CHECK_EQ(ringtrace_channel_poll(NULL, 0, NULL, NULL), -EINVAL);
    run(RINGTRACE_DISCARD);
    run(RINGTRACE_OVERWRITE);
    printf("channels: %d records from %d threads merged by time\n", WRITERS * PER_WRITER, WRITERS);
    return 0;
}
