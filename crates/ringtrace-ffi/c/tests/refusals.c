/* Calls the C API refuses, and what a refusal leaves: nothing.
 *
 * A constructor (rings, channels, recorders, streams) given an invalid option returns
 * -EINVAL and creates no file or directory, so that the corrected call then succeeds.
 * A record whose callsite is misused (a field whose type or name changed since the
 * callsite's first record, a field added or dropped, a NULL field name, a span callsite
 * with a NULL name, an event callsite used for a span or the reverse) returns -EINVAL
 * (a span: id 0) and records nothing: checked by the recorder's counters and by the
 * decoded dump (`ringtrace decode --format json`; RINGTRACE_CLI names the command). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
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
    size_t cap = 1 << 16, len = 0, n;
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

/* How many times `what` occurs in `text`. */
static int count(const char *text, const char *what) {
    int n = 0;
    for (const char *at = strstr(text, what); at != NULL; at = strstr(at + 1, what))
        n++;
    return n;
}

static void occurs(const char *text, const char *what, int times) {
    if (count(text, what) != times) {
        fprintf(stderr, "the decoded trace has %s %d times, not %d:\n%s\n", what, count(text, what), times, text);
        exit(1);
    }
}

/* The entries of directory `dir` other than . and ..; -1 if it does not exist. */
static int entries(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static const char *in(const char *base, const char *name) {
    static char paths[8][512];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", base, name);
    return p;
}

static struct ringtrace_recorder_opts recorder_opts(void) {
    struct ringtrace_recorder_opts o;
    memset(&o, 0, sizeof o);
    o.sz = sizeof o;
    o.per_thread_bytes = 64 << 10;
    return o;
}

/* A refused recorder call: -EINVAL, its message naming `what`, and `base` still empty. */
#define REFUSED(call, what, base)                                                                          \
    do {                                                                                                   \
        CHECK_EQ(call, -EINVAL);                                                                           \
        if (strstr(ringtrace_last_error(), what) == NULL) {                                                \
            fprintf(stderr, "%s:%d: the message does not name %s: %s\n", __FILE__, __LINE__, what,          \
                    ringtrace_last_error());                                                               \
            exit(1);                                                                                       \
        }                                                                                                  \
        if (entries(base) != 0) {                                                                          \
            fprintf(stderr, "%s:%d: %s refused, and %s holds %d entries\n", __FILE__, __LINE__, #call,      \
                    base, entries(base));                                                                  \
            exit(1);                                                                                       \
        }                                                                                                  \
    } while (0)

static void recorders(const char *base) {
    ringtrace_recorder *rec = NULL;
    struct ringtrace_recorder_opts o = recorder_opts();
    const char *dir = in(base, "rec");

    /* A directory that does not exist: refused without making it (or its parents). */
    o.max_threads = 4097;
    REFUSED(ringtrace_recorder_flight(dir, &o, &rec), "max_threads", base);
    REFUSED(ringtrace_recorder_flight(in(base, "a/b/rec"), &o, &rec), "max_threads", base);
    o.max_threads = 0;
    o.per_thread_bytes = 1000;
    REFUSED(ringtrace_recorder_flight(dir, &o, &rec), "capacity", base);
    REFUSED(ringtrace_recorder_flight(in(base, "a/b/rec"), &o, &rec), "capacity", base);
    o = recorder_opts();
    o.max_record_bytes = 1 << 20; /* over what a 64 KiB ring holds */
    REFUSED(ringtrace_recorder_flight(dir, &o, &rec), "max_record_bytes", base);
    o = recorder_opts();
    o.max_value_bytes = 70000;
    REFUSED(ringtrace_recorder_flight(dir, &o, &rec), "max_value_bytes", base);
    o = recorder_opts();
    o.max_record_bytes = 10;
    REFUSED(ringtrace_recorder_flight(dir, &o, &rec), "max_record_bytes", base);
    CHECK(rec == NULL);

    /* The same in a directory that exists (empty, the recorder's own): it stays empty. */
    CHECK(mkdir(dir, 0700) == 0);
    o = recorder_opts();
    o.max_threads = 4097;
    REFUSED(ringtrace_recorder_flight(dir, &o, &rec), "max_threads", dir);
    o.max_threads = 0;
    o.per_thread_bytes = 1000;
    REFUSED(ringtrace_recorder_flight(dir, &o, &rec), "capacity", dir);
    o = recorder_opts();
    o.max_record_bytes = 1 << 20;
    REFUSED(ringtrace_recorder_flight(dir, &o, &rec), "max_record_bytes", dir);

    /* The corrected call succeeds: no earlier file is in its way. */
    o = recorder_opts();
    o.max_threads = 4;
    CHECK_EQ(ringtrace_recorder_flight(dir, &o, &rec), 0);
    CHECK(entries(dir) == 2);
    ringtrace_recorder_free(rec);
    rec = NULL;

    /* Streams: no trace file is made. */
    CHECK(unlink(in(dir, "catalog.rtt")) == 0 && unlink(in(dir, "rings.chan")) == 0 && rmdir(dir) == 0);
    const char *stream = in(base, "stream.rtt");
    o = recorder_opts();
    o.per_thread_bytes = 1000;
    REFUSED(ringtrace_recorder_stream(stream, &o, &rec), "capacity", base);
    o = recorder_opts();
    o.max_record_bytes = 1 << 20;
    REFUSED(ringtrace_recorder_stream(stream, &o, &rec), "max_record_bytes", base);
    o = recorder_opts();
    o.max_value_bytes = 70000;
    REFUSED(ringtrace_recorder_stream(stream, &o, &rec), "max_value_bytes", base);
    o = recorder_opts();
    o.max_threads = 4097;
    REFUSED(ringtrace_recorder_stream(stream, &o, &rec), "max_threads", base);
    CHECK(rec == NULL);
    o = recorder_opts();
    CHECK_EQ(ringtrace_recorder_stream(stream, &o, &rec), 0);
    CHECK_EQ(ringtrace_recorder_finish(rec, NULL), 0);
    CHECK(unlink(stream) == 0);

    /* In memory: refused the same (nothing to leave behind). */
    o = recorder_opts();
    o.max_threads = 4097;
    CHECK_EQ(ringtrace_recorder_flight(NULL, &o, &rec), -EINVAL);
    CHECK(strstr(ringtrace_last_error(), "max_threads") != NULL);
}

static void rings_and_channels(const char *base) {
    ringtrace_ring *ring = NULL;
    struct ringtrace_ring_opts o;
    const char *path = in(base, "r.ring");
    memset(&o, 0, sizeof o);
    o.sz = sizeof o;
    o.capacity = 1000;
    REFUSED(ringtrace_ring_create(path, &o, &ring), "capacity", base);
    CHECK_EQ(ringtrace_ring_new(&o, &ring), -EINVAL);
    CHECK_EQ(ringtrace_ring_new_shared(&o, &ring), -EINVAL);
    o.capacity = 4096;
    o.watermark = 8192;
    REFUSED(ringtrace_ring_create(path, &o, &ring), "watermark", base);
    o.watermark = 0;
    o.consumer_batch = 4;
    REFUSED(ringtrace_ring_create(path, &o, &ring), "batch", base);
    o.consumer_batch = 0;
    o.kind = 7;
    REFUSED(ringtrace_ring_create(path, &o, &ring), "kind", base);
    o.kind = RINGTRACE_SPSC;
    o.mode = 7;
    REFUSED(ringtrace_ring_create(path, &o, &ring), "mode", base);
    CHECK(ring == NULL);
    o.mode = RINGTRACE_OVERWRITE;
    CHECK_EQ(ringtrace_ring_create(path, &o, &ring), 0);
    ringtrace_ring_free(ring);
    CHECK(unlink(path) == 0);

    ringtrace_channel *ch = NULL;
    path = in(base, "c.chan");
    REFUSED(ringtrace_channel_create(path, 1000, 4, RINGTRACE_DISCARD, RINGTRACE_CLOCK_MONOTONIC, &ch), "capacity",
            base);
    REFUSED(ringtrace_channel_create(path, 4096, 0, RINGTRACE_DISCARD, RINGTRACE_CLOCK_MONOTONIC, &ch),
            "max_producers", base);
    REFUSED(ringtrace_channel_create(path, 4096, 4097, RINGTRACE_DISCARD, RINGTRACE_CLOCK_MONOTONIC, &ch),
            "max_producers", base);
    REFUSED(ringtrace_channel_create(path, 4096, 4, 7, RINGTRACE_CLOCK_MONOTONIC, &ch), "mode", base);
    REFUSED(ringtrace_channel_create(path, 4096, 4, RINGTRACE_DISCARD, 7, &ch), "clock", base);
    CHECK_EQ(ringtrace_channel_new(1000, RINGTRACE_DISCARD, RINGTRACE_CLOCK_MONOTONIC, &ch), -EINVAL);
    CHECK(ch == NULL);
    CHECK_EQ(ringtrace_channel_create(path, 4096, 4, RINGTRACE_DISCARD, RINGTRACE_CLOCK_MONOTONIC, &ch), 0);
    ringtrace_channel_free(ch);
    CHECK(unlink(path) == 0);
}

/* Callsites that the macros would not make: written out, as a binding of another
 * language or a wrapper function would. */
static ringtrace_callsite event_site = {NULL, "c", "refusals.c", 1, RINGTRACE_LEVEL_INFO, RINGTRACE_CALLSITE_EVENT, 0, 0};
static ringtrace_callsite fresh_site = {NULL, "c", "refusals.c", 2, RINGTRACE_LEVEL_INFO, RINGTRACE_CALLSITE_EVENT, 0, 0};
static ringtrace_callsite null_name_site = {NULL, "c", "refusals.c", 3, RINGTRACE_LEVEL_INFO,
                                            RINGTRACE_CALLSITE_EVENT, 0, 0};
static ringtrace_callsite span_site = {"the_span", "c", "refusals.c", 4, RINGTRACE_LEVEL_INFO,
                                       RINGTRACE_CALLSITE_SPAN, 0, 0};
static ringtrace_callsite unnamed_span = {NULL, "c", "refusals.c", 5, RINGTRACE_LEVEL_INFO, RINGTRACE_CALLSITE_SPAN,
                                          0, 0};

static uint64_t written(const ringtrace_recorder *rec) {
    struct ringtrace_recorder_stats s;
    CHECK_EQ(ringtrace_recorder_get_stats(rec, &s), 0);
    return s.written;
}

/* A record refused: -EINVAL, and the recorder's count of records unchanged. */
#define EVENT_REFUSED(rec, site, fields, n)                                                                   \
    do {                                                                                                      \
        uint64_t before_ = written(rec);                                                                      \
        CHECK_EQ(ringtrace_event(rec, site, fields, n), -EINVAL);                                             \
        CHECK(written(rec) == before_);                                                                       \
    } while (0)

static void callsites(void) {
    ringtrace_recorder *rec = NULL, *other = NULL;
    struct ringtrace_recorder_opts o = recorder_opts();
    CHECK_EQ(ringtrace_recorder_flight(NULL, &o, &rec), 0);
    CHECK_EQ(ringtrace_recorder_flight(NULL, &o, &other), 0);

    /* The first record fixes the callsite's fields: a then b, u64 then text. */
    ringtrace_field first[2] = {ringtrace_field_u64("a", 1), ringtrace_field_str("b", "first")};
    CHECK_EQ(ringtrace_event(rec, &event_site, first, 2), 0);

    ringtrace_field typed[2] = {ringtrace_field_i64("a", -2), ringtrace_field_str("b", "typed")};
    EVENT_REFUSED(rec, &event_site, typed, 2);
    CHECK(strstr(ringtrace_last_error(), "refusals.c:1") != NULL);
    CHECK(strstr(ringtrace_last_error(), "field 0") != NULL);
    ringtrace_field strn[2] = {ringtrace_field_u64("a", 3), ringtrace_field_strn("b", "strn", 4)};
    EVENT_REFUSED(rec, &event_site, strn, 2);
    ringtrace_field renamed[2] = {ringtrace_field_u64("c", 4), ringtrace_field_str("b", "renamed")};
    EVENT_REFUSED(rec, &event_site, renamed, 2);
    ringtrace_field added[3] = {ringtrace_field_u64("a", 5), ringtrace_field_str("b", "added"),
                                ringtrace_field_u64("extra", 77)};
    EVENT_REFUSED(rec, &event_site, added, 3);
    CHECK(strstr(ringtrace_last_error(), "has 2 fields, not 3") != NULL);
    EVENT_REFUSED(rec, &event_site, first, 1); /* b dropped */
    EVENT_REFUSED(rec, &event_site, NULL, 0);
    ringtrace_field null_name[2] = {ringtrace_field_u64(NULL, 6), ringtrace_field_str("b", "null name")};
    EVENT_REFUSED(rec, &event_site, null_name, 2);

    /* The same names at other addresses (made at run time): the same fields. */
    char a_name[2] = "a", b_name[2] = "b";
    ringtrace_field copied[2] = {ringtrace_field_u64(a_name, 8), ringtrace_field_str(b_name, "copied")};
    CHECK_EQ(ringtrace_event(rec, &event_site, copied, 2), 0);

    /* Another recorder learns the callsite afresh (its own catalog); going back to the
     * first one, the callsite's fields there still hold. */
    CHECK_EQ(ringtrace_event(other, &event_site, renamed, 2), 0);
    EVENT_REFUSED(rec, &event_site, renamed, 2);
    CHECK_EQ(ringtrace_event(rec, &event_site, first, 2), 0);
    EVENT_REFUSED(other, &event_site, first, 2);

    /* A NULL field name at the first record: refused, the callsite not registered. */
    ringtrace_field nameless = ringtrace_field_u64(NULL, 9);
    EVENT_REFUSED(rec, &null_name_site, &nameless, 1);
    ringtrace_field named = ringtrace_field_u64("named", 10);
    CHECK_EQ(ringtrace_event(rec, &null_name_site, &named, 1), 0);

    /* Kinds: an event callsite makes no span, a span callsite records no event, at the
     * first record and after it. */
    uint64_t before = written(rec);
    CHECK(ringtrace_span_enter(rec, &fresh_site, NULL, 0) == 0);
    CHECK(strstr(ringtrace_last_error(), "event callsite") != NULL);
    CHECK(ringtrace_span_enter(rec, &event_site, first, 2) == 0);
    CHECK(written(rec) == before);
    EVENT_REFUSED(rec, &span_site, NULL, 0);
    CHECK(strstr(ringtrace_last_error(), "span callsite") != NULL);
    uint64_t span = ringtrace_span_enter(rec, &span_site, NULL, 0);
    CHECK(span != 0);
    ringtrace_field fresh = ringtrace_field_str("fresh", "in the span");
    CHECK_EQ(ringtrace_event(rec, &fresh_site, &fresh, 1), 0);
    CHECK_EQ(ringtrace_span_exit(rec, span), 0);
    EVENT_REFUSED(rec, &span_site, NULL, 0);
    CHECK(ringtrace_span_enter(rec, &span_site, &named, 1) == 0); /* a field added */

    /* A span callsite with a NULL name. */
    before = written(rec);
    CHECK(ringtrace_span_enter(rec, &unnamed_span, NULL, 0) == 0);
    CHECK(strstr(ringtrace_last_error(), "NULL name") != NULL);
    CHECK(written(rec) == before);

    /* first, copied, first again, named, fresh (in the span); the span (2 records: open,
       done). */
    CHECK(written(rec) == 5 + 2);
    CHECK(written(other) == 1);
    CHECK_EQ(ringtrace_recorder_dump(rec, "callsites.rtt", NULL), 0);
    CHECK_EQ(ringtrace_recorder_dump(other, "callsites-other.rtt", NULL), 0);
    char *t = decode("callsites.rtt");
    occurs(t, "\"a\":1,\"b\":\"first\"", 2);
    occurs(t, "\"a\":8,\"b\":\"copied\"", 1);
    occurs(t, "\"named\":10", 1);
    occurs(t, "\"fresh\":\"in the span\"", 1);
    occurs(t, "{\"name\":\"the_span\"", 1);
    occurs(t, "\"b\":", 3);
    /* No value without its name (it would decode as fieldN). */
    occurs(t, "\"field0\"", 0);
    occurs(t, "\"field1\"", 0);
    occurs(t, "\"field2\"", 0);
    occurs(t, "\"c\":", 0);
    free(t);
    t = decode("callsites-other.rtt");
    occurs(t, "\"c\":4,\"b\":\"renamed\"", 1);
    occurs(t, "\"b\":", 1);
    free(t);
    ringtrace_recorder_free(other);
    ringtrace_recorder_free(rec);
}

int main(void) {
    char base[] = "refusals.XXXXXX";
    CHECK(mkdtemp(base) != NULL);
    recorders(base);
    rings_and_channels(base);
    CHECK(entries(base) == 0);
    CHECK(rmdir(base) == 0);
    callsites();
    printf("refusals: every check passed\n");
    return 0;
}
