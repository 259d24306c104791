/* What a C programmer expects of the header and the library, checked: the -E codes
 * come with ringtrace.h (this file includes no <errno.h> of its own), the header's
 * version is the library's, options structs from a newer header are refused when they
 * set fields this library does not know, reserved pointers are 8-byte aligned, a
 * zero-length record is a record, and a failed file operation's message names the
 * file. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

struct ctx {
    size_t records;
    size_t zero;
};

static int count(void *c, const void *data, size_t len) {
    struct ctx *x = c;
    (void)data;
    x->records++;
    x->zero += len == 0;
    return 0;
}

int main(void) {
    /* Version: the header's macros and the library's function agree. */
    int major = -1, minor = -1, patch = -1;
    int v = ringtrace_version(&major, &minor, &patch);
    CHECK_EQ(major, RINGTRACE_VERSION_MAJOR);
    CHECK_EQ(minor, RINGTRACE_VERSION_MINOR);
    CHECK_EQ(patch, RINGTRACE_VERSION_PATCH);
    CHECK_EQ(v, RINGTRACE_VERSION_MAJOR * 10000 + RINGTRACE_VERSION_MINOR * 100 + RINGTRACE_VERSION_PATCH);
    CHECK_EQ(ringtrace_version(NULL, NULL, NULL), v);

    /* Options from a newer header: a larger struct whose extra bytes are zero is taken;
     * one with a nonzero byte past the known fields is refused, the message says so. */
    struct {
        struct ringtrace_ring_opts opts;
        uint64_t newer_field;
    } bigger;
    memset(&bigger, 0, sizeof bigger);
    bigger.opts.sz = sizeof bigger;
    bigger.opts.capacity = 1 << 16;
    ringtrace_ring *ring = NULL;
    CHECK_EQ(ringtrace_ring_new(&bigger.opts, &ring), 0);
    ringtrace_ring_free(ring);
    ring = NULL;
    bigger.newer_field = 1;
    CHECK_EQ(ringtrace_ring_new(&bigger.opts, &ring), -EINVAL);
    CHECK(ring == NULL);
    CHECK(strstr(ringtrace_last_error(), "newer ringtrace.h") != NULL);
    /* An absurd size (an uninitialized field) is refused before anything is read. */
    bigger.opts.sz = (size_t)1 << 40;
    CHECK_EQ(ringtrace_ring_new(&bigger.opts, &ring), -EINVAL);
    /* A smaller struct (an older header) is fine: the rest take defaults. */
    struct ringtrace_ring_opts small = {0};
    small.sz = offsetof(struct ringtrace_ring_opts, capacity) + sizeof small.capacity;
    small.capacity = 1 << 16;
    CHECK_EQ(ringtrace_ring_new(&small, &ring), 0);

    /* Reserved pointers are 8-byte aligned, whatever the lengths before; a record of
     * 0 bytes is committed and delivered with length 0. */
    ringtrace_producer *p = NULL;
    ringtrace_consumer *c = NULL;
    CHECK_EQ(ringtrace_producer_new(ring, &p), 0);
    CHECK_EQ(ringtrace_consumer_new(ring, &c), 0);
    size_t zeros = 0;
    for (size_t len = 0; len < 40; len++) {
        void *data = NULL;
        CHECK_EQ(ringtrace_reserve(p, len, &data), 0);
        CHECK(data != NULL);
        CHECK(((uintptr_t)data & 7) == 0);
        memset(data, 0x5a, len);
        CHECK_EQ(ringtrace_commit(p, RINGTRACE_WAKEUP_DEFAULT), 0);
        zeros += len == 0;
    }
    CHECK_EQ(ringtrace_output(p, "", 0, RINGTRACE_WAKEUP_DEFAULT), 0);
    zeros++;
    struct ctx x = {0, 0};
    CHECK_EQ(ringtrace_consume(c, count, &x), 41);
    CHECK_EQ(x.records, 41);
    CHECK_EQ(x.zero, zeros);
    /* A snapshot written where no directory is: the message names the file. */
    struct ringtrace_ring_opts flight = {0};
    flight.sz = sizeof flight;
    flight.capacity = 1 << 16;
    flight.mode = RINGTRACE_OVERWRITE;
    ringtrace_ring *fr = NULL;
    CHECK_EQ(ringtrace_ring_new(&flight, &fr), 0);
    ringtrace_snapshot *snap = NULL;
    CHECK_EQ(ringtrace_snapshot_take(fr, &snap), 0);
    const char *nowhere = "/nonexistent-ringtrace-dir/x.snap";
    CHECK_EQ(ringtrace_snapshot_write(snap, nowhere), -ENOENT);
    CHECK(strstr(ringtrace_last_error(), nowhere) != NULL);
    ringtrace_snapshot_free(snap);
    ringtrace_ring_free(fr);
    ringtrace_consumer_free(c);
    ringtrace_producer_free(p);
    ringtrace_ring_free(ring);

    /* Files that cannot be opened, or are not rings: the message names them. */
    ring = NULL;
    const char *missing = "/nonexistent-ringtrace-dir/x.ring";
    CHECK_EQ(ringtrace_ring_open(missing, RINGTRACE_ACCESS_FULL, &ring), -ENOENT);
    CHECK(strstr(ringtrace_last_error(), missing) != NULL);
    CHECK_EQ(ringtrace_ring_create(missing, NULL, &ring), -ENOENT);
    CHECK(strstr(ringtrace_last_error(), missing) != NULL);
    FILE *f = fopen("not-a-ring", "w");
    CHECK(f != NULL);
    fputs("hello", f);
    fclose(f);
    CHECK_EQ(ringtrace_ring_open("not-a-ring", RINGTRACE_ACCESS_FULL, &ring), -EBADMSG);
    CHECK(strstr(ringtrace_last_error(), "not-a-ring") != NULL);
    CHECK(ring == NULL);
    remove("not-a-ring");
    puts("header: ok");
    return 0;
}
