/* LTTng-UST tracepoint provider of the `c-api` bench: the same payloads as the
 * ringtrace rows, an 8-byte integer (`rec8`) and a 64-byte array (`rec64`), and a
 * typed event of 4 fields (`event4`: u64, i64, double, string).
 * LTTng-UST 2.13 API (lttng-ust(3), https://lttng.org/man/3/lttng-ust/v2.13/). */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER ringtrace_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./tp.h"

#if !defined(RINGTRACE_BENCH_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define RINGTRACE_BENCH_TP_H

#include <stdint.h>
#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(
    ringtrace_bench, rec8,
    LTTNG_UST_TP_ARGS(uint64_t, v),
    LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(uint64_t, v, v)))

LTTNG_UST_TRACEPOINT_EVENT(
    ringtrace_bench, rec64,
    LTTNG_UST_TP_ARGS(const char *, buf),
    LTTNG_UST_TP_FIELDS(lttng_ust_field_array(char, buf, buf, 64)))

LTTNG_UST_TRACEPOINT_EVENT(
    ringtrace_bench, event4,
    LTTNG_UST_TP_ARGS(uint64_t, seq, int64_t, delta, double, ratio, const char *, path),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, seq, seq)
        lttng_ust_field_integer(int64_t, delta, delta)
        lttng_ust_field_float(double, ratio, ratio)
        lttng_ust_field_string(path, path)))

#endif

#include <lttng/tracepoint-event.h>
