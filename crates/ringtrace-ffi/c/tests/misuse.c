/* Misuse that C cannot prevent returns the documented errors, never crashes: null
 * handles and pointers, a second commit, a reserve while one is open, oversize records,
 * writes past a reservation, bad options and flags, a second single producer, a handle
 * of the wrong type (refused by its tag), and the error strings. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <string.h>

#include "check.h"

static int stop_at_first(void *ctx, const void *data, size_t len) {
    (void)data;
    (void)len;
    ++*(int *)ctx;
    return 7; /* nonzero: stop */
}

int main(void) {
    /* null handles and output pointers */
    ringtrace_ring *ring = NULL;
    void *data = NULL;
    struct ringtrace_stats st;
    size_t max = 0;
    CHECK_EQ(ringtrace_ring_new(NULL, NULL), -EINVAL);
    CHECK_EQ(ringtrace_ring_stats(NULL, &st), -EINVAL);
    CHECK(strstr(ringtrace_last_error(), "null") != NULL);
    CHECK_EQ(ringtrace_ring_max_record_len(NULL, &max), -EINVAL);
    CHECK_EQ(ringtrace_producer_new(NULL, NULL), -EINVAL);
    CHECK_EQ(ringtrace_consumer_new(NULL, NULL), -EINVAL);
    CHECK_EQ(ringtrace_reserve(NULL, 8, &data), -EINVAL);
    CHECK_EQ(ringtrace_commit(NULL, 0), -EINVAL);
    CHECK_EQ(ringtrace_discard(NULL, 0), -EINVAL);
    CHECK_EQ(ringtrace_output(NULL, "x", 1, 0), -EINVAL);
    CHECK_EQ(ringtrace_consume(NULL, NULL, NULL), -EINVAL);
    CHECK_EQ(ringtrace_poll(NULL, 0, NULL, NULL), -EINVAL);
    CHECK_EQ(ringtrace_consumer_fd(NULL), -EINVAL);
    CHECK_EQ(ringtrace_consumer_arm(NULL), -EINVAL);
    CHECK_EQ(ringtrace_snapshot_take(NULL, NULL), -EINVAL);
    CHECK_EQ(ringtrace_snapshot_len(NULL), 0);
    CHECK_EQ(ringtrace_pause(NULL, 0), -EINVAL);
    CHECK_EQ(ringtrace_resume(NULL), -EINVAL);
    CHECK_EQ(ringtrace_ring_open(NULL, 0, &ring), -EINVAL);
    CHECK_EQ(ringtrace_ring_from_fd(-1, 0, &ring), -EBADF);
    ringtrace_ring_free(NULL);
    ringtrace_producer_free(NULL);
    ringtrace_consumer_free(NULL);
    ringtrace_snapshot_free(NULL);

    /* bad options */
    struct ringtrace_ring_opts opts = {.sz = sizeof opts, .capacity = 5000};
    CHECK_EQ(ringtrace_ring_new(&opts, &ring), -EINVAL); /* not a power of two */
    CHECK(strstr(ringtrace_last_error(), "power of two") != NULL);
    opts.capacity = 4096;
    opts.kind = 9;
    CHECK_EQ(ringtrace_ring_new(&opts, &ring), -EINVAL);
    opts.kind = RINGTRACE_MPSC;
    opts.sz = 2;
    CHECK_EQ(ringtrace_ring_new(&opts, &ring), -EINVAL);
    opts.sz = sizeof opts;
    CHECK_EQ(ringtrace_ring_new(&opts, &ring), 0);
    CHECK_EQ(ringtrace_ring_memfd(ring), -EINVAL); /* a private ring has no descriptor */

    ringtrace_producer *p = NULL;
    CHECK_EQ(ringtrace_producer_new(ring, &p), 0);
    CHECK_EQ(ringtrace_reserve(p, 8, NULL), -EINVAL);

    /* commit with nothing open, a second commit, a reserve while one is open */
    CHECK_EQ(ringtrace_commit(p, RINGTRACE_WAKEUP_DEFAULT), -EINVAL);
    CHECK_EQ(ringtrace_reserve(p, 8, &data), 0);
    CHECK(data != NULL);
    memcpy(data, "12345678", 8);
    void *again = NULL;
    CHECK_EQ(ringtrace_reserve(p, 8, &again), -EINVAL);
    CHECK(strstr(ringtrace_last_error(), "open reservation") != NULL);
    CHECK_EQ(ringtrace_output(p, "x", 1, 0), -EINVAL); /* output would need the producer */
    CHECK_EQ(ringtrace_commit(p, 99), -EINVAL);        /* bad flag: still open */
    CHECK_EQ(ringtrace_reservation_write(p, 4, "abcd", 4), 0);
    CHECK_EQ(ringtrace_reservation_write(p, 5, "abcd", 4), -EINVAL); /* past the end */
    CHECK_EQ(ringtrace_reservation_write(p, SIZE_MAX, "abcd", 4), -EINVAL);
    CHECK_EQ(ringtrace_reservation_write(p, 0, NULL, 4), -EINVAL);
    CHECK_EQ(ringtrace_commit(p, RINGTRACE_WAKEUP_DEFAULT), 0);
    CHECK_EQ(ringtrace_commit(p, RINGTRACE_WAKEUP_DEFAULT), -EINVAL); /* double commit */
    CHECK_EQ(ringtrace_discard(p, RINGTRACE_WAKEUP_DEFAULT), -EINVAL);
    CHECK_EQ(ringtrace_reservation_write(p, 0, "a", 1), -EINVAL);

    /* oversize records, counted as too_large */
    CHECK_EQ(ringtrace_ring_max_record_len(ring, &max), 0);
    CHECK_EQ(ringtrace_reserve(p, max + 1, &data), -EMSGSIZE);
    CHECK_EQ(ringtrace_reserve(p, SIZE_MAX, &data), -EMSGSIZE);
    static char big[8192];
    CHECK_EQ(ringtrace_output(p, big, sizeof big, 0), -EMSGSIZE);
    CHECK_EQ(ringtrace_output(p, NULL, 3, 0), -EINVAL);
    CHECK_EQ(ringtrace_output(p, NULL, 0, 0), 0); /* an empty record needs no bytes */

    /* a full ring: -ENOSPC, counted as lost */
    int full = 0;
    for (int i = 0; i < 1000 && !full; i++) {
        int rc = ringtrace_output(p, big, 1000, 0);
        CHECK(rc == 0 || rc == -ENOSPC);
        full = rc == -ENOSPC;
    }
    CHECK(full);
    CHECK_EQ(ringtrace_output_wait(p, big, 1000, 0, 10), -ETIMEDOUT);
    CHECK_EQ(ringtrace_ring_stats(ring, &st), 0);
    CHECK_EQ(st.too_large, 3);
    CHECK_EQ(st.lost, 2);

    /* a callback that stops: -ECANCELED, and the record counts as consumed */
    ringtrace_consumer *c = NULL;
    CHECK_EQ(ringtrace_consumer_new(ring, &c), 0);
    int calls = 0;
    CHECK_EQ(ringtrace_consume(c, stop_at_first, &calls), -ECANCELED);
    CHECK_EQ(calls, 1);
    CHECK_EQ(ringtrace_consume_n(c, 1, NULL, NULL), 1);

    /* snapshots and pauses need an overwrite ring */
    ringtrace_snapshot *snap = NULL;
    CHECK_EQ(ringtrace_snapshot_take(ring, &snap), -EINVAL);
    CHECK_EQ(ringtrace_pause(ring, 0), -EINVAL);
    CHECK_EQ(ringtrace_resume(ring), -EINVAL);

    /* a reservation left open is discarded by ringtrace_producer_free */
    CHECK_EQ(ringtrace_reserve(p, 16, &data), 0);
    ringtrace_producer_free(p);
    CHECK_EQ(ringtrace_ring_stats(ring, &st), 0);
    CHECK_EQ(st.discarded, 1);

    /* a second producer of a single-producer ring */
    opts.kind = RINGTRACE_SPSC;
    ringtrace_ring *spsc = NULL;
    CHECK_EQ(ringtrace_ring_new(&opts, &spsc), 0);
    ringtrace_producer *p1 = NULL, *p2 = NULL;
    CHECK_EQ(ringtrace_producer_new(spsc, &p1), 0);
    CHECK_EQ(ringtrace_producer_new(spsc, &p2), -EBUSY);
    ringtrace_producer_free(p1);
    CHECK_EQ(ringtrace_producer_new(spsc, &p2), 0);
    ringtrace_producer_free(p2);
    ringtrace_ring_free(spsc);

    /* a handle of the wrong type is refused by its tag (the same check catches a freed
     * handle while its memory is not reused; that case is not run here, since reading
     * freed memory is what ASan reports, rightly) */
    CHECK_EQ(ringtrace_consume((ringtrace_consumer *)(void *)ring, NULL, NULL), -EINVAL);
    CHECK(strstr(ringtrace_last_error(), "invalid consumer handle") != NULL);

    /* error strings */
    CHECK(strcmp(ringtrace_strerror(0), "success") == 0);
    CHECK(strstr(ringtrace_strerror(-ENOSPC), "full") != NULL);
    CHECK(strstr(ringtrace_strerror(-ENOTRECOVERABLE), "panic") != NULL);
    CHECK(ringtrace_strerror(-12345) != NULL);
    CHECK(ringtrace_strerror(-2147483647 - 1) != NULL);

    ringtrace_consumer_free(c);
    ringtrace_ring_free(ring);
    puts("misuse: every misuse returned its documented error");
    return 0;
}
