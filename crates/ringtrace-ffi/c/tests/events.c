/* Typed events from C at their edges: every field type and its bounds, text that is not
 * UTF-8, NULL strings, no fields and the most fields, one callsite in two recorders,
 * misuse refused with nothing recorded, a stream recorder, options structs, and the
 * signal dump's refusals. What was recorded is read back with `ringtrace decode
 * --format json` (RINGTRACE_CLI names the command). Written in C99 (test-c.sh also
 * compiles it with -std=c99 -pedantic). */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* Runs `ringtrace decode --format json PATH` into a buffer (NUL-terminated). */
static char *decode(const char *path) {
    const char *cli = getenv("RINGTRACE_CLI");
    if (cli == NULL) {
        fprintf(stderr, "RINGTRACE_CLI is not set: it names the ringtrace command this test runs\n");
        exit(1);
    }
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' decode --format json '%s'", cli, path);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    size_t cap = 1 << 20, len = 0, n;
    char *buf = malloc(cap);
    CHECK(buf != NULL);
    while ((n = fread(buf + len, 1, cap - 1 - len, p)) > 0) {
        len += n;
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            CHECK(buf != NULL);
        }
    }
    buf[len] = 0;
    CHECK(pclose(p) == 0);
    return buf;
}

static void sleep_1ms(void) {
    struct timespec ts = {0, 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits for a file to appear: 60 s at most (a dump is synced; the machine may be busy). */
static void wait_for(const char *path) {
    long long deadline = now_ms() + 60000;
    while (access(path, F_OK) != 0 && now_ms() < deadline)
        sleep_1ms();
    if (access(path, F_OK) != 0) {
        fprintf(stderr, "%s did not appear in 60 s\n", path);
        exit(1);
    }
}

static void has(const char *text, const char *what) {
    if (strstr(text, what) == NULL) {
        fprintf(stderr, "the decoded trace lacks %s:\n%s\n", what, text);
        exit(1);
    }
}

static void lacks(const char *text, const char *what) {
    if (strstr(text, what) != NULL) {
        fprintf(stderr, "the decoded trace has %s:\n%s\n", what, text);
        exit(1);
    }
}

/* One callsite used with two recorders: its cached number is per recorder. */
static void shared_site(ringtrace_recorder *rec, int n) {
    RINGTRACE_INFO(rec, "shared site", RINGTRACE_I64("n", n));
}

static void fields_and_bounds(void) {
    struct ringtrace_recorder_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.sz = sizeof opts;
    opts.per_thread_bytes = 64 << 10;
    opts.max_value_bytes = 12;
    ringtrace_recorder *rec = NULL;
    CHECK_EQ(ringtrace_recorder_flight(NULL, &opts, &rec), 0);

    const char bad_utf8[] = {'o', 'k', (char)0xff, 0};
    const unsigned char raw[3] = {0, 0x7f, 0xff};
    RINGTRACE_INFO(rec, "types", RINGTRACE_U64("u", UINT64_MAX), RINGTRACE_I64("i", INT64_MIN),
                   RINGTRACE_F64("f", -0.5), RINGTRACE_BOOL("b", 2), RINGTRACE_STR("s", "text"),
                   RINGTRACE_STR("null", NULL), RINGTRACE_STR("notutf8", bad_utf8), RINGTRACE_STRN("strn", "abcdef", 3),
                   RINGTRACE_BYTES("raw", raw, sizeof raw), RINGTRACE_BYTES("empty", NULL, 0),
                   RINGTRACE_STR("long", "0123456789abcdef"));
    RINGTRACE_ERROR(rec, "no fields");
    RINGTRACE_DEBUG(rec, "most fields", RINGTRACE_U64("f1", 1), RINGTRACE_U64("f2", 2), RINGTRACE_U64("f3", 3),
                    RINGTRACE_U64("f4", 4), RINGTRACE_U64("f5", 5), RINGTRACE_U64("f6", 6), RINGTRACE_U64("f7", 7),
                    RINGTRACE_U64("f8", 8), RINGTRACE_U64("f9", 9), RINGTRACE_U64("f10", 10), RINGTRACE_U64("f11", 11),
                    RINGTRACE_U64("f12", 12), RINGTRACE_U64("f13", 13), RINGTRACE_U64("f14", 14),
                    RINGTRACE_U64("f15", 15), RINGTRACE_U64("f16", 16), RINGTRACE_U64("f17", 17),
                    RINGTRACE_U64("f18", 18), RINGTRACE_U64("f19", 19), RINGTRACE_U64("f20", 20),
                    RINGTRACE_U64("f21", 21), RINGTRACE_U64("f22", 22), RINGTRACE_U64("f23", 23),
                    RINGTRACE_U64("f24", 24), RINGTRACE_U64("f25", 25), RINGTRACE_U64("f26", 26),
                    RINGTRACE_U64("f27", 27), RINGTRACE_U64("f28", 28), RINGTRACE_U64("f29", 29),
                    RINGTRACE_U64("f30", 30), RINGTRACE_U64("f31", 31), RINGTRACE_U64("f32", 32));

    /* Misuse: refused, nothing recorded. */
    static ringtrace_callsite site = {NULL, "c", "events.c", 1, RINGTRACE_LEVEL_INFO, RINGTRACE_CALLSITE_EVENT, 0, 0};
    ringtrace_field bad = ringtrace_field_u64("x", 1);
    bad.type = 99;
    CHECK_EQ(ringtrace_event(rec, &site, &bad, 1), -EINVAL);
    CHECK(strstr(ringtrace_last_error(), "field type 99") != NULL);
    ringtrace_field dangling = ringtrace_field_bytes("x", NULL, 4);
    CHECK_EQ(ringtrace_event(rec, &site, &dangling, 1), -EINVAL);
    CHECK_EQ(ringtrace_event(NULL, &site, NULL, 0), -EINVAL);
    CHECK_EQ(ringtrace_event(rec, NULL, NULL, 0), -EINVAL);
    CHECK_EQ(ringtrace_event(rec, &site, NULL, 1), -EINVAL);
    CHECK_EQ(ringtrace_event(rec, &site, &bad, 256), -EINVAL);
    static ringtrace_callsite bad_level = {NULL, "c", "events.c", 2, 9, RINGTRACE_CALLSITE_EVENT, 0, 0};
    CHECK_EQ(ringtrace_event(rec, &bad_level, NULL, 0), -EINVAL);
    CHECK(ringtrace_span_enter(rec, &site, &bad, 1) == 0);
    CHECK_EQ(ringtrace_span_exit(rec, 12345), -EINVAL);
    CHECK_EQ(ringtrace_span_exit(rec, 0), 0);
    {
        RINGTRACE_SPAN_ENTER(rec, outer, RINGTRACE_LEVEL_INFO, "outer");
        RINGTRACE_SPAN_ENTER(rec, inner, RINGTRACE_LEVEL_INFO, "inner", RINGTRACE_STR("k", "v"));
        RINGTRACE_INFO(rec, "nested");
        CHECK_EQ(ringtrace_span_exit(rec, inner), 0);
        CHECK_EQ(ringtrace_span_exit(rec, inner), -EINVAL);
        CHECK_EQ(ringtrace_span_exit(rec, outer), 0);
    }

    /* A call refused does not register its callsite: the next call's names are kept. */
    static ringtrace_callsite late = {NULL, "c", "events.c", 3, RINGTRACE_LEVEL_INFO, RINGTRACE_CALLSITE_EVENT, 0, 0};
    ringtrace_field wrong = ringtrace_field_u64("wrong_name", 1);
    wrong.type = 99;
    CHECK_EQ(ringtrace_event(rec, &late, &wrong, 1), -EINVAL);
    ringtrace_field right = ringtrace_field_u64("right_name", 7);
    CHECK_EQ(ringtrace_event(rec, &late, &right, 1), 0);

    ringtrace_recorder *other = NULL;
    CHECK_EQ(ringtrace_recorder_flight(NULL, NULL, &other), 0);
    RINGTRACE_INFO(other, "only in the other");
    for (int n = 0; n < 3; n++) {
        shared_site(n % 2 ? other : rec, n);
    }

    struct ringtrace_recorder_stats stats;
    CHECK_EQ(ringtrace_recorder_get_stats(rec, &stats), 0);
    /* types, no fields, most fields, 2 spans (2 records each: open, done), nested, late,
       shared twice. */
    CHECK(stats.written == 3 + 4 + 1 + 1 + 2);
    CHECK(stats.cut == 1 && stats.lost == 0);
    CHECK_EQ(ringtrace_recorder_dump(rec, "events.rtt", NULL), 0);
    CHECK_EQ(ringtrace_recorder_dump(other, "other.rtt", NULL), 0);

    char *t = decode("events.rtt");
    has(t, "\"u\":\"18446744073709551615\"");
    has(t, "\"i\":\"-9223372036854775808\"");
    has(t, "\"f\":-0.5");
    has(t, "\"b\":true");
    has(t, "\"s\":\"text\"");
    has(t, "\"null\":\"(null)\"");
    has(t, "\"notutf8\":\"6f6bff\""); /* not UTF-8: kept as bytes, shown in hex */
    has(t, "\"strn\":\"abc\"");
    has(t, "\"raw\":\"007fff\"");
    has(t, "\"empty\":\"\"");
    has(t, "\"long\":\"0123456789ab\""); /* cut at max_value_bytes */
    has(t, "\"cut\":[\"long\"]");
    has(t, "\"message\":\"no fields\"}");
    has(t, "\"level\":\"ERROR\"");
    has(t, "\"f32\":32");
    has(t, "\"spans\":[{\"name\":\"outer\"");
    has(t, "{\"name\":\"inner\",");
    has(t, "\"fields\":{\"k\":\"v\"}");
    has(t, "\"right_name\":7");
    lacks(t, "wrong_name");
    has(t, "\"shared site\",\"n\":0");
    has(t, "\"shared site\",\"n\":2");
    lacks(t, "\"n\":1");
    lacks(t, "only in the other");
    free(t);
    t = decode("other.rtt");
    has(t, "\"shared site\",\"n\":1");
    has(t, "only in the other");
    lacks(t, "\"n\":0");
    free(t);

    ringtrace_recorder_free(other);
    ringtrace_recorder_free(rec);
    ringtrace_recorder_free(NULL);
}

static void stream_and_refusals(void) {
    unlink("stream.rtt");
    ringtrace_recorder *rec = NULL;
    CHECK_EQ(ringtrace_recorder_stream("stream.rtt", NULL, &rec), 0);
    for (int i = 0; i < 1000; i++)
        RINGTRACE_INFO(rec, "streamed", RINGTRACE_I64("i", i));
    /* A stream has no rings to dump. */
    CHECK_EQ(ringtrace_recorder_dump(rec, "x.rtt", NULL), -EINVAL);
    CHECK_EQ(ringtrace_recorder_dump_on_signal(rec, SIGUSR2, "x.rtt"), -EINVAL);
    struct ringtrace_recorder_stats stats;
    CHECK_EQ(ringtrace_recorder_finish(rec, &stats), 0);
    CHECK(stats.written == 1000 && stats.drained == 1000 && stats.lost == 0);
    char *t = decode("stream.rtt");
    has(t, "\"i\":999");
    free(t);
    /* The file exists now: a second stream there is refused, naming it. */
    CHECK_EQ(ringtrace_recorder_stream("stream.rtt", NULL, &rec), -EEXIST);
    CHECK(strstr(ringtrace_last_error(), "stream.rtt") != NULL);

    /* Options: a larger struct with an unknown byte set is refused; bad values too. */
    unsigned char big[sizeof(struct ringtrace_recorder_opts) + 8];
    memset(big, 0, sizeof big);
    size_t sz = sizeof big;
    memcpy(big, &sz, sizeof sz);
    big[sizeof big - 1] = 1;
    CHECK_EQ(ringtrace_recorder_flight(NULL, (const struct ringtrace_recorder_opts *)(void *)big, &rec), -EINVAL);
    big[sizeof big - 1] = 0;
    CHECK_EQ(ringtrace_recorder_flight(NULL, (const struct ringtrace_recorder_opts *)(void *)big, &rec), 0);
    ringtrace_recorder_free(rec);
    struct ringtrace_recorder_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.sz = sizeof opts;
    opts.per_thread_bytes = 1000;
    CHECK_EQ(ringtrace_recorder_flight(NULL, &opts, &rec), -EINVAL);
    opts.per_thread_bytes = 0;
    opts.max_record_bytes = 10;
    CHECK_EQ(ringtrace_recorder_flight(NULL, &opts, &rec), -EINVAL);
    CHECK_EQ(ringtrace_recorder_flight(NULL, NULL, NULL), -EINVAL);

    /* Signal dumps: faults refused, one at a time. */
    CHECK_EQ(ringtrace_recorder_flight(NULL, NULL, &rec), 0);
    CHECK_EQ(ringtrace_recorder_dump_on_signal(rec, SIGSEGV, "x.rtt"), -EINVAL);
    CHECK(strstr(ringtrace_last_error(), "directory") != NULL);
    CHECK_EQ(ringtrace_recorder_dump_on_signal(rec, SIGKILL, "x.rtt"), -EINVAL);
    CHECK_EQ(ringtrace_recorder_dump_on_signal(rec, SIGUSR2, "sig.rtt"), 0);
    CHECK_EQ(ringtrace_recorder_dump_on_signal(rec, SIGUSR1, "sig.rtt"), -EBUSY);
    RINGTRACE_INFO(rec, "before the signal");
    unlink("sig.rtt");
    unlink("sig.rtt.1");
    CHECK(raise(SIGUSR2) == 0);
    wait_for("sig.rtt");
    t = decode("sig.rtt");
    has(t, "before the signal");
    free(t);
    CHECK(raise(SIGUSR2) == 0); /* a second dump goes to a new file */
    wait_for("sig.rtt.1");
    ringtrace_recorder_free(rec);
    /* Freed: the handler before is back (SIGUSR2's default would end the process, so
     * check the action instead), and another recorder may install one. */
    struct sigaction now;
    CHECK(sigaction(SIGUSR2, NULL, &now) == 0);
    CHECK(now.sa_handler == SIG_DFL);
    CHECK_EQ(ringtrace_recorder_flight(NULL, NULL, &rec), 0);
    CHECK_EQ(ringtrace_recorder_dump_on_signal(rec, SIGUSR1, "sig2.rtt"), 0);
    ringtrace_recorder_free(rec);
}

/* A burst of signals, more than the pipe holds while the thread is busy writing dumps
 * of a full 1 MiB ring: each wake-up of the thread makes one dump, however many
 * signals it counts, and freeing the recorder then returns (its stop is not lost in a
 * full pipe). */
static void signal_burst(void) {
    struct ringtrace_recorder_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.sz = sizeof opts;
    opts.per_thread_bytes = 1 << 20;
    ringtrace_recorder *rec = NULL;
    CHECK_EQ(ringtrace_recorder_flight(NULL, &opts, &rec), 0);
    for (int i = 0; i < 40000; i++)
        RINGTRACE_INFO(rec, "burst", RINGTRACE_I64("i", i));
    int dumps = 0;
    char name[64];
    for (int i = 0; i < 1000; i++) {
        if (i == 0)
            snprintf(name, sizeof name, "burst.rtt");
        else
            snprintf(name, sizeof name, "burst.rtt.%d", i);
        unlink(name);
    }
    CHECK_EQ(ringtrace_recorder_dump_on_signal(rec, SIGUSR2, "burst.rtt"), 0);
    for (int i = 0; i < 100000; i++)
        CHECK(raise(SIGUSR2) == 0);
    wait_for("burst.rtt");
    ringtrace_recorder_free(rec); /* must return */
    for (int i = 0; i < 1000; i++) {
        if (i == 0)
            snprintf(name, sizeof name, "burst.rtt");
        else
            snprintf(name, sizeof name, "burst.rtt.%d", i);
        if (unlink(name) == 0)
            dumps++;
    }
    printf("100000 signals in a burst: %d dumps\n", dumps);
    CHECK(dumps >= 1 && dumps < 1000);
}

/* A recorder made in the child (the parent's is freed there). */
static ringtrace_recorder *rec2_for_child(void) {
    ringtrace_recorder *r = NULL;
    CHECK_EQ(ringtrace_recorder_flight(NULL, NULL, &r), 0);
    RINGTRACE_INFO(r, "child");
    return r;
}

/* A child made by fork inherits the handler but not the dumping thread: a signal to
 * the child dumps nothing in the parent, the child freeing its copy of the recorder
 * leaves the parent's dumps working. */
static void signal_after_fork(void) {
    ringtrace_recorder *rec = NULL;
    CHECK_EQ(ringtrace_recorder_flight(NULL, NULL, &rec), 0);
    RINGTRACE_INFO(rec, "parent");
    unlink("fork.rtt");
    CHECK_EQ(ringtrace_recorder_dump_on_signal(rec, SIGUSR2, "fork.rtt"), 0);
    fflush(NULL);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        /* In the child: the inherited handler does nothing; a dump of its own works
         * (through a pipe of its own) and does not take the parent's wake-ups. */
        raise(SIGUSR2);
        ringtrace_recorder_free(rec);
        unlink("child.rtt");
        if (ringtrace_recorder_dump_on_signal(rec2_for_child(), SIGUSR2, "child.rtt") != 0)
            _exit(2);
        raise(SIGUSR2);
        long long deadline = now_ms() + 60000;
        while (access("child.rtt", F_OK) != 0 && now_ms() < deadline)
            sleep_1ms();
        _exit(access("child.rtt", F_OK) == 0 ? 0 : 3);
    }
    int status;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct timespec pause = {0, 300000000L}; /* a dump the child's signal made would be here by now */
    nanosleep(&pause, NULL);
    CHECK(access("fork.rtt", F_OK) != 0);
    CHECK(raise(SIGUSR2) == 0);
    wait_for("fork.rtt");
    char *t = decode("child.rtt");
    has(t, "\"message\":\"child\"");
    free(t);
    ringtrace_recorder_free(rec); /* returns: the parent's thread got its stop */
}

int main(void) {
    fields_and_bounds();
    stream_and_refusals();
    signal_burst();
    signal_after_fork();
    printf("typed events: every check passed\n");
    return 0;
}
