// Typed events and spans from C++17, with the header's macros: two std::threads record
// requests (a span each, closed by RINGTRACE_SPAN_SCOPE at the end of its scope) and
// events with fields into an in-memory flight recorder, which is then dumped.
//
//   c++ -std=c++17 typed_events.cpp $(pkg-config --cflags --libs ringtrace) -lpthread
//   ./a.out [DUMP]            (default ./typed-events-cpp.rtt)
//   ringtrace decode typed-events-cpp.rtt
#define RINGTRACE_TARGET "cpp_example"
#include <ringtrace.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

void check(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "check failed: %s (last error: %s)\n", what, ringtrace_last_error());
        std::exit(1);
    }
}

void serve(ringtrace_recorder *rec, int worker) {
    for (uint64_t id = 0; id < 100; id++) {
        const std::string path = "/item/" + std::to_string(id);
        RINGTRACE_SPAN_SCOPE(rec, request, RINGTRACE_LEVEL_INFO, "request", RINGTRACE_U64("id", id),
                             RINGTRACE_STRN("path", path.data(), path.size()));
        check(request != 0, "a span entered");
        RINGTRACE_DEBUG(rec, "lookup", RINGTRACE_I64("worker", worker), RINGTRACE_BOOL("hit", id % 3 == 0));
        if (id % 10 == 9) {
            RINGTRACE_WARN(rec, "slow request", RINGTRACE_F64("ms", 12.5), RINGTRACE_STR("path", path.c_str()));
        }
    }  // each request's span exits here
}

}  // namespace

int main(int argc, char **argv) {
    const char *dump = argc > 1 ? argv[1] : "typed-events-cpp.rtt";
    ringtrace_recorder_opts opts{};
    opts.sz = sizeof opts;
    opts.per_thread_bytes = 64 << 10;
    ringtrace_recorder *rec = nullptr;
    check(ringtrace_recorder_flight(nullptr, &opts, &rec) == 0, "a recorder made");

    std::vector<std::thread> threads;
    for (int w = 0; w < 2; w++) {
        threads.emplace_back(serve, rec, w);
    }
    for (auto &t : threads) {
        t.join();
    }
    RINGTRACE_INFO(rec, "done", RINGTRACE_U64("requests", 200));

    uint64_t records = 0;
    check(ringtrace_recorder_dump(rec, dump, &records) == 0, "the dump written");
    ringtrace_recorder_stats stats{};
    check(ringtrace_recorder_finish(rec, &stats) == 0, "the recorder finished");
    // Each request: a span (open: made and entered; done: exited and closed), a lookup;
    // every tenth a warning.
    check(stats.written == 2 * (100 * 3 + 10) + 1, "every record written");
    check(stats.lost == 0 && stats.cut == 0, "nothing lost or cut");
    std::printf("%llu records in %s: ringtrace decode %s\n", static_cast<unsigned long long>(records), dump, dump);
    return 0;
}
