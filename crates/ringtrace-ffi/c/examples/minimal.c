/* The smallest ringtrace program in C: a ring, a producer that writes one record, a
 * consumer that reads it.
 *
 *   scripts/install-c.sh /usr/local
 *   cc minimal.c $(pkg-config --cflags --libs ringtrace) */
#include <stdio.h>
#include <string.h>

#include <ringtrace.h>

static int print_record(void *ctx, const void *data, size_t len) {
    (void)ctx;
    printf("record: %.*s\n", (int)len, (const char *)data);
    return 0;
}

int main(void) {
    struct ringtrace_ring_opts opts = {.sz = sizeof opts, .capacity = 1 << 16};
    ringtrace_ring *ring;
    ringtrace_producer *producer;
    ringtrace_consumer *consumer;
    if (ringtrace_ring_new(&opts, &ring) < 0 || ringtrace_producer_new(ring, &producer) < 0 ||
        ringtrace_consumer_new(ring, &consumer) < 0) {
        fprintf(stderr, "ringtrace: %s\n", ringtrace_last_error());
        return 1;
    }
    const char *msg = "hello from C";
    int err = ringtrace_output(producer, msg, strlen(msg), RINGTRACE_WAKEUP_DEFAULT);
    if (err < 0) fprintf(stderr, "output: %s\n", ringtrace_strerror(err));
    int n = ringtrace_consume(consumer, print_record, NULL); /* records seen, or -errno */
    ringtrace_consumer_free(consumer);
    ringtrace_producer_free(producer);
    ringtrace_ring_free(ring);
    return n == 1 ? 0 : 1;
}
