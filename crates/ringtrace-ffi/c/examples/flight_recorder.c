/* A flight recorder dumped on a signal: a worker thread records events into an
 * overwrite ring all the time; SIGUSR1 (here sent by the program to itself) asks for a
 * dump. The handler only sets a flag (nothing else is async-signal-safe); the main loop
 * sees it, takes a snapshot, writes it to a file that `ringtrace snapshot` reads, and
 * checks it holds the newest events in order. It then pauses the ring, reads the records
 * in place, and resumes, checking that events written meanwhile are counted as lost.
 *
 *   cc -std=c11 flight_recorder.c $(pkg-config --cflags --libs ringtrace) -lpthread */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tests/check.h"

struct event {
    uint64_t seq, sum;
};

static volatile sig_atomic_t dump_requested = 0;
static atomic_int stop = 0;
static atomic_ullong written = 0;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void on_sigusr1(int sig) {
    (void)sig;
    dump_requested = 1; /* async-signal-safe: one store */
}

static void *worker(void *arg) {
    ringtrace_producer *p = arg;
    uint64_t seq = 0;
    while (!atomic_load(&stop)) {
        struct event ev = {seq, seq * 2654435761u};
        void *data = NULL;
        int rc = ringtrace_reserve(p, sizeof ev, &data);
        if (rc == -ENOSPC) continue; /* paused or overtaken: counted as lost */
        CHECK_EQ(rc, 0);
        CHECK(data == NULL); /* overwrite rings are written with reservation_write */
        CHECK_EQ(ringtrace_reservation_write(p, 0, &ev, sizeof ev), 0);
        CHECK_EQ(ringtrace_commit(p, RINGTRACE_WAKEUP_DEFAULT), 0);
        atomic_store(&written, ++seq);
    }
    return NULL;
}

struct order {
    uint64_t prev, count;
    int newest_first;
};

static int check_order(void *ctx, const void *data, size_t len) {
    struct order *o = ctx;
    struct event ev;
    CHECK_EQ(len, sizeof ev);
    memcpy(&ev, data, sizeof ev);
    CHECK_EQ(ev.sum, ev.seq * 2654435761u);
    if (o->count > 0) CHECK_EQ(ev.seq, o->newest_first ? o->prev - 1 : o->prev + 1);
    o->prev = ev.seq;
    o->count++;
    return 0;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);

    struct ringtrace_ring_opts opts = {
        .sz = sizeof opts, .capacity = 1 << 16, .kind = RINGTRACE_MPSC, .mode = RINGTRACE_OVERWRITE};
    ringtrace_ring *ring = NULL;
    CHECK_EQ(ringtrace_ring_new(&opts, &ring), 0);
    ringtrace_producer *p = NULL;
    CHECK_EQ(ringtrace_producer_new(ring, &p), 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, worker, p), 0);

    /* Let the ring wrap a few times, then ask for a dump as an operator would. */
    long long deadline = now_ms() + 60000;
    while (atomic_load(&written) < 50000) CHECK(now_ms() < deadline);
    CHECK_EQ(kill(getpid(), SIGUSR1), 0);

    int dumps = 0;
    while (dumps == 0) {
        CHECK(now_ms() < deadline);
        if (!dump_requested) {
            sleep_ms(1);
            continue;
        }
        dump_requested = 0;
        ringtrace_snapshot *snap = NULL;
        int rc = ringtrace_snapshot_take(ring, &snap);
        if (rc == -EBUSY) continue; /* overwritten while copied: try again */
        CHECK_EQ(rc, 0);
        size_t n = ringtrace_snapshot_len(snap);
        if (!(n > 0 && n <= 65536 / 24)) fprintf(stderr, "snapshot of %zu records\n", n);
        CHECK(n > 0 && n <= 65536 / 24);
        struct order o = {0, 0, 1};
        CHECK_EQ(ringtrace_snapshot_foreach(snap, 1, check_order, &o), (int)n);
        struct order fwd = {0, 0, 0};
        CHECK_EQ(ringtrace_snapshot_foreach(snap, 0, check_order, &fwd), (int)n);
        CHECK(o.prev == fwd.prev - (n - 1)); /* oldest seen last newest-first */
        char path[64];
        snprintf(path, sizeof path, "flight-%d.snap", (int)getpid());
        CHECK_EQ(ringtrace_snapshot_write(snap, path), 0);
        struct stat stt;
        CHECK_EQ(stat(path, &stt), 0);
        CHECK(stt.st_size > (off_t)(n * sizeof(struct event)));
        printf("flight_recorder: dumped %zu events (newest %llu) to %s\n", n, (unsigned long long)fwd.prev, path);
        unlink(path);
        ringtrace_snapshot_free(snap);
        dumps++;
    }

    /* Pause: read the records in place; writes meanwhile are refused and counted. */
    struct ringtrace_stats before, after;
    CHECK_EQ(ringtrace_ring_stats(ring, &before), 0);
    CHECK_EQ(ringtrace_pause(ring, 1000), 0);
    CHECK_EQ(ringtrace_pause(ring, 1000), -EALREADY);
    uint64_t at_pause = atomic_load(&written);
    struct order o = {0, 0, 1};
    int n = ringtrace_paused_foreach(ring, 1, check_order, &o);
    CHECK(n > 0 && n <= 65536 / 24);
    sleep_ms(20);
    CHECK(atomic_load(&written) <= at_pause + 1); /* the worker is refused */
    CHECK_EQ(ringtrace_resume(ring), 0);
    CHECK_EQ(ringtrace_resume(ring), -EINVAL);
    CHECK_EQ(ringtrace_ring_stats(ring, &after), 0);
    CHECK(after.refused_paused > before.refused_paused);
    while (atomic_load(&written) < at_pause + 1000) CHECK(now_ms() < deadline); /* writing again */

    atomic_store(&stop, 1);
    CHECK_EQ(pthread_join(t, NULL), 0);
    ringtrace_producer_free(p);
    ringtrace_ring_free(ring);
    printf("flight_recorder: paused with %d events, %llu writes refused while paused\n", n,
           (unsigned long long)(after.refused_paused - before.refused_paused));
    return 0;
}
