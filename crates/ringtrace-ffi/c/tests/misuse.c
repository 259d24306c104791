/* Misuse that C cannot prevent returns the documented errors, never crashes: null
 * handles and pointers, a second commit, a reserve while one is open, oversize records,
 * writes past a reservation, bad options and flags, a second single producer, a handle
 * of the wrong type (refused by its tag: every type passed to a function of every other
 * type, and to its free function), and the error strings. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/bpf.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"

/* The handle types, for passing each to the functions of the others. */
enum kind {
    RING, PRODUCER, CONSUMER, SNAPSHOT, CHANNEL, CHANNEL_PRODUCER, CHANNEL_READER, BPF_RINGBUF,
    KINDS
};

/* Each type's name in the guard's message ("invalid <name> handle"). */
static const char *const kind_name[KINDS] = {
    "ring", "producer", "consumer", "snapshot", "channel", "channel producer", "channel reader",
    "BPF ring buffer",
};

/* Calls a function that takes a handle of type `kind` with `h`, which may be of another
 * type; returns what it returns. None of these changes a handle of its own type beyond
 * what the test expects (one record at most). */
static int call_as(enum kind kind, void *h) {
    struct ringtrace_stats st;
    switch (kind) {
    case RING: return ringtrace_ring_stats(h, &st);
    case PRODUCER: return ringtrace_output(h, "x", 1, RINGTRACE_WAKEUP_NONE);
    case CONSUMER: return ringtrace_consumer_arm(h);
    case SNAPSHOT: return ringtrace_snapshot_foreach(h, 0, NULL, NULL);
    case CHANNEL: return ringtrace_channel_output(h, "x", 1, RINGTRACE_WAKEUP_NONE);
    case CHANNEL_PRODUCER:
        return ringtrace_channel_producer_output(h, "x", 1, RINGTRACE_WAKEUP_NONE);
    case CHANNEL_READER: return ringtrace_channel_drain(h, NULL, NULL);
    case BPF_RINGBUF: return ringtrace_bpf_ringbuf_fd(h);
    case KINDS: break;
    }
    abort();
}

/* Frees `h` with the free function of type `kind`. */
static void free_as(enum kind kind, void *h) {
    switch (kind) {
    case RING: ringtrace_ring_free(h); return;
    case PRODUCER: ringtrace_producer_free(h); return;
    case CONSUMER: ringtrace_consumer_free(h); return;
    case SNAPSHOT: ringtrace_snapshot_free(h); return;
    case CHANNEL: ringtrace_channel_free(h); return;
    case CHANNEL_PRODUCER: ringtrace_channel_producer_free(h); return;
    case CHANNEL_READER: ringtrace_channel_reader_free(h); return;
    case BPF_RINGBUF: ringtrace_bpf_ringbuf_free(h); return;
    case KINDS: break;
    }
    abort();
}

/* A BPF ring buffer handle, or NULL where the kernel refuses the map (not root). */
static ringtrace_bpf_ringbuf *bpf_ringbuf_or_null(void) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_RINGBUF;
    attr.max_entries = 4096;
    int fd = (int)syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
    if (fd < 0) return NULL;
    ringtrace_bpf_ringbuf *rb = NULL;
    CHECK_EQ(ringtrace_bpf_ringbuf_from_fd(fd, &rb), 0); /* it keeps a duplicate */
    close(fd);
    return rb;
}

/* One live handle of every type passed to a function of every other type, then to every
 * other type's free function: each call is refused by the tag, before anything of the
 * handle but its tag is read (valgrind reports a read past a smaller handle's end), and
 * each handle still works afterwards. */
static void wrong_types(void) {
    struct ringtrace_ring_opts opts = {
        .sz = sizeof opts, .capacity = 4096, .mode = RINGTRACE_OVERWRITE};
    ringtrace_ring *ring = NULL;
    ringtrace_producer *p = NULL;
    ringtrace_consumer *c = NULL;
    ringtrace_snapshot *snap = NULL;
    ringtrace_channel *ch = NULL;
    ringtrace_channel_producer *cp = NULL;
    ringtrace_channel_reader *cr = NULL;
    CHECK_EQ(ringtrace_ring_new(&opts, &ring), 0);
    CHECK_EQ(ringtrace_producer_new(ring, &p), 0);
    CHECK_EQ(ringtrace_consumer_new(ring, &c), 0);
    CHECK_EQ(ringtrace_snapshot_take(ring, &snap), 0);
    CHECK_EQ(ringtrace_channel_new(4096, RINGTRACE_DISCARD, RINGTRACE_CLOCK_MONOTONIC, &ch), 0);
    CHECK_EQ(ringtrace_channel_producer_new(ch, &cp), 0);
    CHECK_EQ(ringtrace_channel_reader_new(ch, &cr), 0);
    ringtrace_bpf_ringbuf *rb = bpf_ringbuf_or_null();
    if (!rb) printf("misuse: no BPF ring buffer map (%s): left out\n", strerror(errno));
    void *h[KINDS] = {ring, p, c, snap, ch, cp, cr, rb};

    int refused = 0;
    for (int round = 0; round < 2; round++) {
        for (int of = 0; of < KINDS; of++) {
            if (!h[of]) continue;
            for (int as = 0; as < KINDS; as++) {
                if (as == of) continue;
                int rc = call_as((enum kind)as, h[of]);
                char want[64];
                snprintf(want, sizeof want, "invalid %s handle", kind_name[as]);
                if (rc != -EINVAL || strstr(ringtrace_last_error(), want) == NULL) {
                    fprintf(stderr,
                            "misuse: a %s handle passed as a %s handle returned %d (%s), "
                            "expected -EINVAL (%s)\n",
                            kind_name[of], kind_name[as], rc, ringtrace_last_error(), want);
                    exit(1);
                }
                refused++;
                /* The wrong free function ignores it (its tag is not that type's). */
                if (round == 1) free_as((enum kind)as, h[of]);
            }
        }
    }
    /* Every handle kept its tag through the wrong calls and frees: its own functions
     * take it. */
    for (int k = 0; k < KINDS; k++) {
        if (!h[k]) continue;
        int rc = call_as((enum kind)k, h[k]);
        if (rc == -EINVAL && strstr(ringtrace_last_error(), "handle") != NULL) {
            fprintf(stderr, "misuse: the %s handle was refused by its own function: %s\n",
                    kind_name[k], ringtrace_last_error());
            exit(1);
        }
    }
    CHECK(refused >= 2 * 7 * 6); /* at least every pair of the types made without BPF */
    for (int k = KINDS - 1; k >= 0; k--) free_as((enum kind)k, h[k]);
}

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
    wrong_types();

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
