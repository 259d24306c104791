/* Helpers shared by the C tests: CHECK stops the test with a message. */
#ifndef RINGTRACE_TEST_CHECK_H
#define RINGTRACE_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <ringtrace.h>

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__,        \
                    __LINE__, #cond, ringtrace_last_error());                            \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* CHECK that a call returns exactly `want`. */
#define CHECK_EQ(call, want)                                                             \
    do {                                                                                 \
        long long got_ = (long long)(call);                                              \
        long long want_ = (long long)(want);                                             \
        if (got_ != want_) {                                                             \
            fprintf(stderr, "%s:%d: %s returned %lld, expected %lld (%s; last error: %s)\n", \
                    __FILE__, __LINE__, #call, got_, want_, ringtrace_strerror((int)got_), \
                    ringtrace_last_error());                                             \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* Monotonic milliseconds, for deadlines. */
static inline long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* FNV-1a, the records' checksum. */
static inline uint32_t fnv1a(const void *data, size_t len) {
    const unsigned char *p = data;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

#endif
