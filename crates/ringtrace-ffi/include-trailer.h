/* Typed events and spans, from C (C99 and later) and C++ (C++11 and later).
 *
 *   #define RINGTRACE_TARGET "myservice"   (optional, before including: the target
 *                                           `ringtrace decode` shows; default "c")
 *   #include <ringtrace.h>
 *
 *   ringtrace_recorder *rec;
 *   ringtrace_recorder_flight("/run/myservice/trace", NULL, &rec);
 *   RINGTRACE_SPAN_ENTER(rec, req, RINGTRACE_LEVEL_INFO, "request", RINGTRACE_U64("id", id));
 *   RINGTRACE_WARN(rec, "slow write", RINGTRACE_U64("bytes", n), RINGTRACE_STR("path", path));
 *   ringtrace_span_exit(rec, req);
 *
 * RINGTRACE_EVENT(rec, level, "message", fields...) records an event: its message (a
 * string literal) and up to 32 fields, each RINGTRACE_U64, _I64, _F64, _BOOL, _STR
 * (NUL-terminated), _STRN (pointer and length) or _BYTES (pointer and length, shown
 * in hexadecimal), each with a name that is a string literal. RINGTRACE_TRACE, _DEBUG,
 * _INFO, _WARN and _ERROR are it at one level.
 *
 * RINGTRACE_SPAN_ENTER(rec, var, level, "name", fields...) declares `uint64_t var`, the
 * id of a new span entered on this thread: events the thread records until
 * `ringtrace_span_exit(rec, var)` are in it. It is a declaration: one per scope for a
 * given `var`, not the sole statement of an `if`. In C++, RINGTRACE_SPAN_SCOPE does the
 * same and exits the span when the scope ends.
 *
 * Each use of a macro has a static callsite: its first record registers its metadata
 * (message or name, level, file, line, field names and types) in the recorder's
 * catalog, once, and every later record holds only the callsite's number and the
 * values. A callsite's fields are the same at every call (they are written at the
 * macro's use), and so is its level: a constant expression (a RINGTRACE_LEVEL_*),
 * checked at compile time. Calling ringtrace_event and ringtrace_span_enter directly
 * (a wrapper, another language's binding), a record whose fields differ from its
 * callsite's first record in the recorder (count, names, types), a NULL field name, a
 * span callsite with a NULL name, or a callsite used with the other kind's function is
 * refused with -EINVAL (a span: id 0) and records nothing: ringtrace_event says what is
 * compared. The macros evaluate `rec` and each value once.
 */
#ifndef RINGTRACE_EVENTS_H
#define RINGTRACE_EVENTS_H

#ifndef RINGTRACE_TARGET
#define RINGTRACE_TARGET "c"
#endif

static inline ringtrace_field ringtrace_field_u64(const char *name, uint64_t v)
{
    ringtrace_field f;
    f.name = name;
    f.type = RINGTRACE_FIELD_U64;
    f.len = 0;
    f.value.u = v;
    return f;
}

static inline ringtrace_field ringtrace_field_i64(const char *name, int64_t v)
{
    ringtrace_field f;
    f.name = name;
    f.type = RINGTRACE_FIELD_I64;
    f.len = 0;
    f.value.i = v;
    return f;
}

static inline ringtrace_field ringtrace_field_f64(const char *name, double v)
{
    ringtrace_field f;
    f.name = name;
    f.type = RINGTRACE_FIELD_F64;
    f.len = 0;
    f.value.f = v;
    return f;
}

static inline ringtrace_field ringtrace_field_bool(const char *name, int v)
{
    ringtrace_field f;
    f.name = name;
    f.type = RINGTRACE_FIELD_BOOL;
    f.len = 0;
    f.value.u = v ? 1u : 0u;
    return f;
}

static inline ringtrace_field ringtrace_field_str(const char *name, const char *s)
{
    ringtrace_field f;
    f.name = name;
    f.type = RINGTRACE_FIELD_STR;
    f.len = 0;
    f.value.p = s;
    return f;
}

/* A length past 4 GiB is taken as 4 GiB - 1: values are cut far below it. */
static inline ringtrace_field ringtrace_field_sized_(const char *name, uint32_t type, const void *p, size_t len)
{
    ringtrace_field f;
    f.name = name;
    f.type = type;
    f.len = len > 0xffffffffu ? 0xffffffffu : (uint32_t)len;
    f.value.p = p;
    return f;
}

static inline ringtrace_field ringtrace_field_strn(const char *name, const char *s, size_t len)
{
    return ringtrace_field_sized_(name, RINGTRACE_FIELD_STRN, s, len);
}

static inline ringtrace_field ringtrace_field_bytes(const char *name, const void *p, size_t len)
{
    return ringtrace_field_sized_(name, RINGTRACE_FIELD_BYTES, p, len);
}

#define RINGTRACE_U64(name, v) ringtrace_field_u64("" name, (uint64_t)(v))
#define RINGTRACE_I64(name, v) ringtrace_field_i64("" name, (int64_t)(v))
#define RINGTRACE_F64(name, v) ringtrace_field_f64("" name, (double)(v))
#define RINGTRACE_BOOL(name, v) ringtrace_field_bool("" name, (v) ? 1 : 0)
#define RINGTRACE_STR(name, s) ringtrace_field_str("" name, (s))
#define RINGTRACE_STRN(name, s, len) ringtrace_field_strn("" name, (s), (len))
#define RINGTRACE_BYTES(name, p, len) ringtrace_field_bytes("" name, (p), (len))

/* The preprocessor's part: the first of the arguments, and the rest after a comma
 * (nothing if there is only one), for up to 33 arguments. ISO C99 and C++11. */
#define RINGTRACE_PP_CAT_(a, b) a##b
#define RINGTRACE_PP_CAT(a, b) RINGTRACE_PP_CAT_(a, b)
#define RINGTRACE_PP_FIRST(...) RINGTRACE_PP_FIRST_(__VA_ARGS__, ringtrace_unused_)
#define RINGTRACE_PP_FIRST_(first, ...) first
#define RINGTRACE_PP_SELECT_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, \
    a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, n, ...) n
#define RINGTRACE_PP_ONE_OR_MORE(...) RINGTRACE_PP_SELECT_(__VA_ARGS__, MORE, MORE, MORE, MORE, MORE, MORE, MORE, \
    MORE, MORE, MORE, MORE, MORE, MORE, MORE, MORE, MORE, MORE, MORE, MORE, MORE, MORE, MORE, MORE, MORE, MORE, \
    MORE, MORE, MORE, MORE, MORE, MORE, MORE, ONE, ringtrace_unused_)
#define RINGTRACE_PP_REST(...) RINGTRACE_PP_CAT(RINGTRACE_PP_REST_, RINGTRACE_PP_ONE_OR_MORE(__VA_ARGS__))(__VA_ARGS__)
#define RINGTRACE_PP_REST_ONE(first)
#define RINGTRACE_PP_REST_MORE(first, ...) , __VA_ARGS__

/* The static callsite of one macro use. */
#define RINGTRACE_CALLSITE_(var, name, level, kind) \
    static ringtrace_callsite var = { name, RINGTRACE_TARGET, __FILE__, __LINE__, (level), (kind), 0, 0 }

#define RINGTRACE_EVENT(rec, level, ...)                                                                      \
    do {                                                                                                      \
        enum { ringtrace_level_is_constant_ = (level) };                                                      \
        RINGTRACE_CALLSITE_(ringtrace_cs_, NULL, level, RINGTRACE_CALLSITE_EVENT);                            \
        const ringtrace_field ringtrace_fields_[] = {                                                         \
            ringtrace_field_strn("message", "" RINGTRACE_PP_FIRST(__VA_ARGS__),                               \
                                 sizeof(RINGTRACE_PP_FIRST(__VA_ARGS__)) - 1) RINGTRACE_PP_REST(__VA_ARGS__)}; \
        (void)ringtrace_event((rec), &ringtrace_cs_, ringtrace_fields_,                                       \
                              sizeof(ringtrace_fields_) / sizeof(ringtrace_fields_[0]));                      \
    } while (0)

#define RINGTRACE_TRACE(rec, ...) RINGTRACE_EVENT(rec, RINGTRACE_LEVEL_TRACE, __VA_ARGS__)
#define RINGTRACE_DEBUG(rec, ...) RINGTRACE_EVENT(rec, RINGTRACE_LEVEL_DEBUG, __VA_ARGS__)
#define RINGTRACE_INFO(rec, ...) RINGTRACE_EVENT(rec, RINGTRACE_LEVEL_INFO, __VA_ARGS__)
#define RINGTRACE_WARN(rec, ...) RINGTRACE_EVENT(rec, RINGTRACE_LEVEL_WARN, __VA_ARGS__)
#define RINGTRACE_ERROR(rec, ...) RINGTRACE_EVENT(rec, RINGTRACE_LEVEL_ERROR, __VA_ARGS__)

/* The fields array starts with a placeholder, so that it is never empty (C before C23
 * has no empty initializer); the placeholder is not passed. */
#define RINGTRACE_SPAN_ENTER(rec, var, level, ...)                                                           \
    enum { RINGTRACE_PP_CAT(ringtrace_level_is_constant_, var) = (level) };                                  \
    RINGTRACE_CALLSITE_(RINGTRACE_PP_CAT(ringtrace_cs_, var), "" RINGTRACE_PP_FIRST(__VA_ARGS__), level,     \
                        RINGTRACE_CALLSITE_SPAN);                                                            \
    const ringtrace_field RINGTRACE_PP_CAT(ringtrace_fields_, var)[] = {                                     \
        ringtrace_field_u64("", 0) RINGTRACE_PP_REST(__VA_ARGS__)};                                          \
    uint64_t var = ringtrace_span_enter(                                                                     \
        (rec), &RINGTRACE_PP_CAT(ringtrace_cs_, var), RINGTRACE_PP_CAT(ringtrace_fields_, var) + 1,          \
        sizeof(RINGTRACE_PP_CAT(ringtrace_fields_, var)) / sizeof(RINGTRACE_PP_CAT(ringtrace_fields_, var)[0]) - 1)

#ifdef __cplusplus
namespace ringtrace {
/* Exits a span when the scope that entered it ends (RINGTRACE_SPAN_SCOPE). */
class span_scope {
  public:
    span_scope(const ringtrace_recorder *rec, uint64_t id) noexcept : rec_(rec), id_(id) {}
    ~span_scope() { (void)ringtrace_span_exit(rec_, id_); }
    span_scope(const span_scope &) = delete;
    span_scope &operator=(const span_scope &) = delete;

  private:
    const ringtrace_recorder *rec_;
    uint64_t id_;
};
} /* namespace ringtrace */

#define RINGTRACE_SPAN_SCOPE(rec, var, level, ...)                                      \
    const ringtrace_recorder *const RINGTRACE_PP_CAT(ringtrace_rec_, var) = (rec);      \
    RINGTRACE_SPAN_ENTER(RINGTRACE_PP_CAT(ringtrace_rec_, var), var, level, __VA_ARGS__); \
    ::ringtrace::span_scope RINGTRACE_PP_CAT(ringtrace_scope_, var)(RINGTRACE_PP_CAT(ringtrace_rec_, var), var)
#endif

#endif /* RINGTRACE_EVENTS_H */
