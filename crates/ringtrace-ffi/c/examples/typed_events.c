/* Typed events and spans from C into a flight recorder in a directory, as a Rust
 * program records them through ringtrace-tracing's layer: `ringtrace decode DIR` reads
 * them from outside while the program runs and after it died, `ringtrace export
 * --format perfetto|chrome|ctf` writes its dumps for the viewers.
 *
 * Three threads (named worker-0..2) each record batches: a span `batch` with its
 * number, and in it events with a field of every type. Then the program dumps the
 * recorder on SIGUSR1 (sent to itself), dumps it again on demand, and checks its
 * counters.
 *
 *   cc -std=c11 typed_events.c $(pkg-config --cflags --libs ringtrace) -lpthread
 *   ./a.out [DIR [DUMP]]        (default: ./typed-events.d and ./typed-events.rtt)
 *   ringtrace decode typed-events.d
 *
 * The C test recorder_kill.c runs typed_events_main in a child process with its
 * workers never stopping, each publishing its newest sequence number in shared memory,
 * decodes the directory while they run, SIGKILLs the child and decodes it again. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RINGTRACE_TARGET "typed_events"
#include "../tests/check.h"

#define WORKERS 3
#define BATCHES 200
#define PER_BATCH 10

struct worker {
    pthread_t thread;
    int index;
    ringtrace_recorder *rec;
    /* Forever mode: the newest sequence number recorded (shared with a parent). */
    _Atomic uint64_t *published;
    int forever;
};

static void *work(void *arg) {
    struct worker *w = arg;
    char name[16];
    snprintf(name, sizeof name, "worker-%d", w->index);
    pthread_setname_np(pthread_self(), name);
    uint64_t seq = 0;
    for (uint64_t batch = 0; w->forever || batch < BATCHES; batch++) {
        RINGTRACE_SPAN_ENTER(w->rec, span, RINGTRACE_LEVEL_INFO, "batch", RINGTRACE_U64("batch", batch),
                             RINGTRACE_I64("worker", w->index));
        CHECK(span != 0);
        for (int i = 0; i < PER_BATCH; i++) {
            seq++;
            unsigned char blob[4] = {(unsigned char)w->index, 0xab, (unsigned char)(seq >> 8), (unsigned char)seq};
            RINGTRACE_INFO(w->rec, "tick", RINGTRACE_U64("seq", seq), RINGTRACE_I64("delta", -(int64_t)i),
                           RINGTRACE_F64("ratio", (double)i / 4.0), RINGTRACE_BOOL("even", seq % 2 == 0),
                           RINGTRACE_STR("who", name), RINGTRACE_BYTES("blob", blob, sizeof blob));
            if (w->published)
                atomic_store_explicit(w->published, seq, memory_order_release);
        }
        if (batch % 50 == 49)
            RINGTRACE_WARN(w->rec, "slow batch", RINGTRACE_U64("batch", batch), RINGTRACE_STRN("unit", "msXX", 2));
        CHECK_EQ(ringtrace_span_exit(w->rec, span), 0);
    }
    return NULL;
}

/* `published` NULL: record BATCHES batches a worker, dump and check. Else: record
 * forever, worker i publishing its newest sequence number in published[i]. */
static int typed_events_main(int argc, char **argv, _Atomic uint64_t *published) {
    const char *dir = argc > 1 ? argv[1] : "typed-events.d";
    const char *dump = argc > 2 ? argv[2] : "typed-events.rtt";
    int forever = published != NULL;

    struct ringtrace_recorder_opts opts = {.sz = sizeof opts, .per_thread_bytes = 256 << 10, .replace_existing = 1};
    ringtrace_recorder *rec = NULL;
    CHECK_EQ(ringtrace_recorder_flight(dir, &opts, &rec), 0);
    /* SIGUSR1 dumps to DUMP.signal (then .signal.1, ...), from the library's thread. */
    char on_signal[4096];
    snprintf(on_signal, sizeof on_signal, "%s.signal", dump);
    CHECK_EQ(ringtrace_recorder_dump_on_signal(rec, SIGUSR1, on_signal), 0);

    RINGTRACE_INFO(rec, "started", RINGTRACE_I64("workers", WORKERS), RINGTRACE_STR("dir", dir));
    struct worker w[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        w[i] = (struct worker){.index = i, .rec = rec, .published = published ? &published[i] : NULL, .forever = forever};
        CHECK(pthread_create(&w[i].thread, NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < WORKERS; i++)
        CHECK(pthread_join(w[i].thread, NULL) == 0);

    /* A dump from a signal: the handler writes a byte to a pipe, a thread dumps. */
    CHECK(kill(getpid(), SIGUSR1) == 0);
    long long deadline = now_ms() + 60000; /* a dump is synced: a busy machine may take long */
    struct stat st;
    while (stat(on_signal, &st) != 0 && now_ms() < deadline)
        usleep(1000);
    CHECK(stat(on_signal, &st) == 0 && st.st_size > 0);

    uint64_t records = 0;
    CHECK_EQ(ringtrace_recorder_dump(rec, dump, &records), 0);
    CHECK(records > 0);
    struct ringtrace_recorder_stats stats;
    CHECK_EQ(ringtrace_recorder_get_stats(rec, &stats), 0);
    /* 3 workers and the main thread; a span is 2 records (open: made and entered;
       done: exited and closed). */
    CHECK(stats.threads == WORKERS + 1);
    uint64_t per_worker = BATCHES * (PER_BATCH + 2) + BATCHES / 50;
    CHECK(stats.written == WORKERS * per_worker + 1);
    CHECK(stats.lost == 0 && stats.no_ring == 0 && stats.cut == 0);
    printf("%llu records written, %llu overwritten; the dump holds %llu: ringtrace decode %s\n",
           (unsigned long long)stats.written, (unsigned long long)stats.overwritten, (unsigned long long)records,
           dump);
    CHECK_EQ(ringtrace_recorder_finish(rec, &stats), 0);
    return 0;
}

#ifndef TYPED_EVENTS_NO_MAIN
int main(int argc, char **argv) {
    return typed_events_main(argc, argv, NULL);
}
#endif
