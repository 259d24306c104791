/* Channel files from C: a channel whose per-writer rings live in a file, written by
 * two child processes (a slot each) and read by the parent merged by time, every
 * record checked, with the channel's counters; a second reader in another process is
 * refused with a message about channels; a file that is not a channel is refused with
 * its name. */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define PER_CHILD 20000

struct seen {
    uint64_t next[2];
    uint64_t total;
    uint64_t last_ts;
    /* Delivered with a timestamp below the one before: the reader's `late`. */
    uint64_t out_of_order;
};

static int on_record(void *ctx, uint32_t producer, uint64_t ts, const void *data, size_t len) {
    struct seen *s = ctx;
    (void)producer;
    uint64_t v[3];
    CHECK_EQ(len, sizeof v);
    memcpy(v, data, sizeof v);
    CHECK(v[0] < 2);
    CHECK_EQ(v[1], s->next[v[0]]);
    CHECK_EQ(v[2], v[0] * 0x9E3779B97F4A7C15ull ^ v[1]);
    if (ts < s->last_ts) {
        s->out_of_order++;
    } else {
        s->last_ts = ts;
    }
    s->next[v[0]]++;
    s->total++;
    return 0;
}

static void writer(const char *path, uint64_t who) {
    ringtrace_channel *ch = NULL;
    CHECK_EQ(ringtrace_channel_open(path, &ch), 0);
    for (uint64_t i = 0; i < PER_CHILD; i++) {
        uint64_t v[3] = {who, i, who * 0x9E3779B97F4A7C15ull ^ i};
        /* The ring holds every record: none is refused. */
        CHECK_EQ(ringtrace_channel_output(ch, v, sizeof v, RINGTRACE_WAKEUP_DEFAULT), 0);
    }
    ringtrace_channel_free(ch);
}

int main(void) {
    const char *path = "c.chan";
    remove(path);
    ringtrace_channel *ch = NULL;
    /* 1 MiB a writer holds all 20,000 records of 40 bytes (header, stamp, payload): none
     * is refused, whenever the reader gets to them. */
    CHECK_EQ(ringtrace_channel_create(path, 1 << 20, 4, RINGTRACE_DISCARD, RINGTRACE_CLOCK_MONOTONIC, &ch), 0);
    ringtrace_channel *again = NULL;
    CHECK_EQ(ringtrace_channel_create("zero.chan", 1 << 20, 0, RINGTRACE_DISCARD, RINGTRACE_CLOCK_MONOTONIC, &again), -EINVAL);
    CHECK_EQ(ringtrace_channel_create(path, 1 << 20, 4, RINGTRACE_DISCARD, RINGTRACE_CLOCK_MONOTONIC, &again), -EEXIST);
    CHECK(strstr(ringtrace_last_error(), path) != NULL);
    ringtrace_channel_reader *r = NULL;
    CHECK_EQ(ringtrace_channel_reader_new(ch, &r), 0);

    pid_t kids[2];
    for (uint64_t k = 0; k < 2; k++) {
        kids[k] = fork();
        CHECK(kids[k] >= 0);
        if (kids[k] == 0) {
            writer(path, k);
            _exit(0);
        }
    }
    /* Another process's reader is refused while this one reads. */
    pid_t other = fork();
    CHECK(other >= 0);
    if (other == 0) {
        ringtrace_channel *c2 = NULL;
        CHECK_EQ(ringtrace_channel_open(path, &c2), 0);
        ringtrace_channel_reader *r2 = NULL;
        CHECK_EQ(ringtrace_channel_reader_new(c2, &r2), -EBUSY);
        CHECK(strstr(ringtrace_last_error(), "channel") != NULL);
        ringtrace_channel_free(c2);
        _exit(0);
    }
    int status = 0;
    CHECK_EQ(waitpid(other, &status, 0), other);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    struct seen s;
    memset(&s, 0, sizeof s);
    long long deadline = now_ms() + 60000;
    while (s.total < 2 * PER_CHILD) {
        CHECK(now_ms() < deadline);
        CHECK(ringtrace_channel_poll(r, 100, on_record, &s) >= 0);
    }
    for (int k = 0; k < 2; k++) {
        CHECK_EQ(waitpid(kids[k], &status, 0), kids[k]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    CHECK(ringtrace_channel_drain(r, on_record, &s) >= 0);
    CHECK_EQ(s.next[0], PER_CHILD);
    CHECK_EQ(s.next[1], PER_CHILD);
    struct ringtrace_channel_stats st;
    CHECK_EQ(ringtrace_channel_get_stats(ch, &st), 0);
    CHECK_EQ(st.written, 2 * PER_CHILD);
    CHECK_EQ(st.lost, 0);
    CHECK_EQ(st.read, 2 * PER_CHILD);
    CHECK_EQ(st.producers, 4); /* a channel file's slots, used or not */
    CHECK_EQ(st.exited, 4);
    CHECK_EQ(st.late, s.out_of_order);
    CHECK_EQ(ringtrace_channel_get_stats(NULL, &st), -EINVAL);
    ringtrace_channel_reader_free(r);
    ringtrace_channel_free(ch);

    /* Not a channel file: refused, named. */
    ringtrace_channel *bad = NULL;
    FILE *f = fopen("not-a-channel", "w");
    CHECK(f != NULL);
    fputs("hello", f);
    fclose(f);
    CHECK_EQ(ringtrace_channel_open("not-a-channel", &bad), -EBADMSG);
    CHECK(strstr(ringtrace_last_error(), "not-a-channel") != NULL);
    CHECK(bad == NULL);
    CHECK_EQ(ringtrace_channel_open("no-such.chan", &bad), -ENOENT);
    remove("not-a-channel");
    remove(path);
    printf("channel_files: %llu records from 2 processes, %llu producers\n", (unsigned long long)s.total,
           (unsigned long long)st.producers);
    return 0;
}
