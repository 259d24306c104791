/* lttng_vs_ringtrace: the cost of one trace record from C, ringtrace's
 * `ringtrace_channel_producer_output` (a producer handle per writer thread, TSC
 * timestamps, overwrite mode: a flight
 * recorder) against an LTTng-UST tracepoint of the same payload recorded into a
 * flight-recorder session (snapshot mode, overwrite channel), in the same run.
 *
 * Rows: 8-byte and 64-byte records from 1 and 2 writer threads; and `event4`, a typed
 * event of 4 fields (u64, i64, double, a 9-byte string): `RINGTRACE_INFO` with its
 * message into a flight recorder made with `ringtrace_recorder_flight` (in memory,
 * 1 MiB a thread), against the LTTng-UST tracepoint `ringtrace_bench:event4` of the
 * same fields. Each measurement is
 * the `channel-scaling` bench's (crates/ringtrace-bench/src/channel.rs): writers start
 * together on a barrier, write through a warmup, then count from the first time they
 * see the window open until they see it closed, reading their thread CPU clock
 * (CLOCK_THREAD_CPUTIME_ID) at both ends. `ns_per_rec` and `cpu_ns_per_rec`: the
 * writers' CPU time summed over writers, divided by the records they wrote;
 * `wall_ns_per_rec`: the window's wall time divided by all writers' records.
 *
 * In each round the two implementations of a row run back to back; which goes first
 * alternates from round to round. Output: one JSON object per row and round on stdout,
 * in the shape of the Rust bench's rows (crates/ringtrace-bench/src/report.rs `Row`).
 *
 * The LTTng rows need a session with the `ringtrace_bench:*` events enabled before the
 * program starts (scripts/run-c-bench.sh, or the Rust bench's `c-api` rows, make one);
 * without one the tracepoints are disabled and the LTTng rows are left out, with one
 * line on stderr.
 *
 * Usage: lttng_vs_ringtrace [--quick] [--rounds N] [--round K] [--only lttng|ringtrace]
 *                           [--warmup-ms MS] [--window-ms MS]
 *   --round K: run one round, numbered K (its order is round K's);
 *   --warmup-ms, --window-ms: each measurement's warmup and window (default 30 and
 *   100 ms; --quick: 20 and 50 ms, 3 rounds).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ringtrace.h"
#include "tp.h"

/* Each writer's ring: 1 MiB, as the LTTng channel's 4 sub-buffers of 256 KiB per CPU. */
#define RING_BYTES (1u << 20)
/* Writes between two looks at the phase flag. */
#define CHUNK 1024

enum impl { LTTNG = 0, RINGTRACE = 1 };
static const char *const IMPL_NAME[] = { "lttng-ust", "ringtrace-c" };

enum { WARMUP = 0, MEASURE = 1, STOP = 2 };

struct run {
    _Alignas(128) atomic_int phase;
    pthread_barrier_t barrier;
    enum impl impl;
    size_t bytes; /* 0: the typed event of 4 fields */
    ringtrace_channel *ch;
    ringtrace_recorder *rec;
};

struct writer_out {
    uint64_t recs, fails, cpu_ns;
    int err;
};

struct writer {
    pthread_t thread;
    struct run *run;
    struct writer_out out;
};

static uint64_t clock_ns(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
    /* Absolute deadline on the monotonic clock: a signal cannot stretch or cut it. */
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t end = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec + ns;
    t.tv_sec = (time_t)(end / 1000000000u);
    t.tv_nsec = (long)(end % 1000000000u);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {
    }
}

/* One record of `bytes` bytes whose first 8 bytes are `v`. */
static inline int write_one(struct run *r, ringtrace_channel_producer *p, char *buf, uint64_t v)
{
    if (r->bytes == 0) {
        if (r->impl == LTTNG)
            lttng_ust_tracepoint(ringtrace_bench, event4, v, -(int64_t)v, (double)v * 0.5, "GET /item");
        else
            RINGTRACE_INFO(r->rec, "tick", RINGTRACE_U64("seq", v), RINGTRACE_I64("delta", -(int64_t)v),
                           RINGTRACE_F64("ratio", (double)v * 0.5), RINGTRACE_STR("path", "GET /item"));
        return 0;
    }
    memcpy(buf, &v, sizeof v);
    if (r->impl == LTTNG) {
        if (r->bytes == 8)
            lttng_ust_tracepoint(ringtrace_bench, rec8, v);
        else
            lttng_ust_tracepoint(ringtrace_bench, rec64, buf);
        return 0;
    }
    return ringtrace_channel_producer_output(p, buf, r->bytes, RINGTRACE_WAKEUP_NONE);
}

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    struct run *r = w->run;
    char buf[64];
    memset(buf, 0x5a, sizeof buf);
    /* Each writer thread holds its own producer handle of the channel (its ring), as
     * an LTTng-UST thread writes the buffer of its CPU. */
    ringtrace_channel_producer *p = NULL;
    if (r->impl != LTTNG && r->bytes != 0) {
        int e = ringtrace_channel_producer_new(r->ch, &p);
        if (e < 0)
            w->out.err = e;
    }
    pthread_barrier_wait(&r->barrier);
    uint64_t ok = 0, fail = 0, c0 = 0, ok0 = 0, fail0 = 0;
    int started = 0;
    for (;;) {
        for (int i = 0; i < CHUNK; i++) {
            int e = p || r->impl == LTTNG || r->bytes == 0 ? write_one(r, p, buf, ok) : -EINVAL;
            if (e < 0) {
                fail++;
                if (!w->out.err)
                    w->out.err = e;
            } else {
                ok++;
            }
        }
        int phase = atomic_load_explicit(&r->phase, memory_order_relaxed);
        if (phase == MEASURE && !started) {
            started = 1;
            c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
            ok0 = ok;
            fail0 = fail;
        } else if (phase == STOP) {
            break;
        }
    }
    uint64_t c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    /* A writer that never ran while the window was open counts nothing. */
    if (started) {
        w->out.recs = ok - ok0;
        w->out.fails = fail - fail0;
        w->out.cpu_ns = c1 - c0;
    }
    ringtrace_channel_producer_free(p);
    return NULL;
}

struct cfg {
    uint64_t warmup_ns, window_ns;
};

/* One row of one round: prints its JSON line; returns 0, or -1 (reported) on failure. */
static int measure(const struct cfg *cfg, enum impl impl, size_t bytes, int writers, int round)
{
    struct run r = { .impl = impl, .bytes = bytes, .ch = NULL, .rec = NULL };
    atomic_init(&r.phase, WARMUP);
    if (impl == RINGTRACE && bytes == 0) {
        struct ringtrace_recorder_opts opts = { .sz = sizeof opts, .per_thread_bytes = RING_BYTES };
        int e = ringtrace_recorder_flight(NULL, &opts, &r.rec);
        if (e < 0) {
            fprintf(stderr, "lttng_vs_ringtrace: ringtrace_recorder_flight: %s (%s)\n", ringtrace_strerror(e),
                    ringtrace_last_error());
            return -1;
        }
    } else if (impl == RINGTRACE) {
        int e = ringtrace_channel_new(RING_BYTES, RINGTRACE_OVERWRITE, RINGTRACE_CLOCK_TSC, &r.ch);
        if (e < 0) {
            fprintf(stderr, "lttng_vs_ringtrace: ringtrace_channel_new: %s (%s)\n", ringtrace_strerror(e),
                    ringtrace_last_error());
            return -1;
        }
    }
    struct writer w[2];
    memset(w, 0, sizeof w);
    pthread_barrier_init(&r.barrier, NULL, (unsigned)writers + 1);
    for (int i = 0; i < writers; i++) {
        w[i].run = &r;
        if (pthread_create(&w[i].thread, NULL, writer_main, &w[i]) != 0) {
            fprintf(stderr, "lttng_vs_ringtrace: pthread_create failed\n");
            exit(1);
        }
    }
    pthread_barrier_wait(&r.barrier);
    sleep_ns(cfg->warmup_ns);
    uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
    atomic_store_explicit(&r.phase, MEASURE, memory_order_relaxed);
    sleep_ns(cfg->window_ns);
    atomic_store_explicit(&r.phase, STOP, memory_order_relaxed);
    uint64_t elapsed = clock_ns(CLOCK_MONOTONIC) - t0;
    uint64_t recs = 0, fails = 0, cpu = 0;
    int err = 0;
    for (int i = 0; i < writers; i++) {
        pthread_join(w[i].thread, NULL);
        recs += w[i].out.recs;
        fails += w[i].out.fails;
        cpu += w[i].out.cpu_ns;
        if (w[i].out.err && !err)
            err = w[i].out.err;
    }
    pthread_barrier_destroy(&r.barrier);
    ringtrace_channel_free(r.ch);
    ringtrace_recorder_free(r.rec);
    if (err)
        fprintf(stderr, "lttng_vs_ringtrace: %s %zu bytes: %llu failed writes, first: %s\n", IMPL_NAME[impl], bytes,
                (unsigned long long)fails, ringtrace_strerror(err));
    double secs = (double)elapsed / 1e9;
    double cpu_per = recs ? (double)cpu / (double)recs : -1.0;
    double wall_per = recs ? (double)elapsed / (double)recs : -1.0;
    /* JSON has no infinity: a row with no records says null. */
    char cpu_s[32], wall_s[32];
    if (recs) {
        snprintf(cpu_s, sizeof cpu_s, "%.3f", cpu_per);
        snprintf(wall_s, sizeof wall_s, "%.3f", wall_per);
    } else {
        strcpy(cpu_s, "null");
        strcpy(wall_s, "null");
    }
    char variant[32];
    if (bytes)
        snprintf(variant, sizeof variant, "%zuB", bytes);
    else
        strcpy(variant, "event4");
    printf("{\"bench\":\"c-api\",\"impl\":\"%s\",\"variant\":\"%s\",\"producers\":%d,\"record_bytes\":%zu,"
           "\"mrec_per_s\":%.4f,\"ns_per_rec\":%s,\"drops_per_s\":%.1f,\"round\":%d,\"wall_ns_per_rec\":%s,"
           "\"cpu_ns_per_rec\":%s,\"peak_mib\":null,\"p50_ns\":null,\"p99_ns\":null}\n",
           IMPL_NAME[impl], variant, writers, bytes, (double)recs / secs / 1e6, cpu_s, (double)fails / secs, round,
           wall_s, cpu_s);
    fflush(stdout);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: lttng_vs_ringtrace [--quick] [--rounds N] [--round K] [--only lttng|ringtrace] "
                    "[--warmup-ms MS] [--window-ms MS]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct cfg cfg = { .warmup_ns = 30000000u, .window_ns = 100000000u };
    int rounds = 11, first = 0, one = 0, want[2] = { 1, 1 };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            rounds = 3;
            cfg.warmup_ns = 20000000u;
            cfg.window_ns = 50000000u;
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--round") && i + 1 < argc) {
            first = atoi(argv[++i]);
            one = 1;
        } else if (!strcmp(argv[i], "--warmup-ms") && i + 1 < argc) {
            cfg.warmup_ns = strtoull(argv[++i], NULL, 10) * 1000000u;
        } else if (!strcmp(argv[i], "--window-ms") && i + 1 < argc) {
            cfg.window_ns = strtoull(argv[++i], NULL, 10) * 1000000u;
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            i++;
            want[LTTNG] = !strcmp(argv[i], "lttng");
            want[RINGTRACE] = !strcmp(argv[i], "ringtrace");
            if (!want[LTTNG] && !want[RINGTRACE])
                usage();
        } else {
            usage();
        }
    }
    if (one)
        rounds = 1;
    if (rounds < 1 || first < 0)
        usage();
    /* lttng-ust's constructor has registered with the session daemon (waiting up to
     * LTTNG_UST_REGISTER_TIMEOUT, 3 s by default) before main: enabled events are on. */
    if (want[LTTNG] && !(lttng_ust_tracepoint_enabled(ringtrace_bench, rec8) &&
                         lttng_ust_tracepoint_enabled(ringtrace_bench, rec64) &&
                         lttng_ust_tracepoint_enabled(ringtrace_bench, event4))) {
        fprintf(stderr, "lttng_vs_ringtrace: lttng-ust rows left out: the ringtrace_bench:* tracepoints are not "
                        "enabled (no LTTng session recording them; see scripts/run-c-bench.sh)\n");
        want[LTTNG] = 0;
    }
    static const size_t BYTES[] = { 8, 64, 0 };
    static const int WRITERS[] = { 1, 2 };
    int failed = 0;
    for (int round = first; round < first + rounds; round++) {
        for (int b = 0; b < 3; b++) {
            for (int n = 0; n < 2; n++) {
                for (int k = 0; k < 2; k++) {
                    /* Even rounds: LTTng first; odd rounds: ringtrace first. */
                    enum impl impl = (enum impl)((k + round) % 2);
                    if (want[impl] && measure(&cfg, impl, BYTES[b], WRITERS[n], round) < 0)
                        failed = 1;
                }
            }
        }
    }
    return failed;
}
