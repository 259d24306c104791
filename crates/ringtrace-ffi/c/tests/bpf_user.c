/* A producer into a kernel BPF user ring buffer map through the C API (libbpf's
 * user_ring_buffer__*). The test makes the map with bpf(2)
 * (BPF_MAP_TYPE_USER_RINGBUF), attaches by pinned path in a private bpffs mount when it
 * can (by descriptor otherwise), and with no BPF program draining it: produces samples
 * of several lengths until the map is full, and checks through a read-only mapping of
 * the map's pages what the kernel's drain would see (each header's length, no BUSY
 * bit, a discarded sample's DISCARD bit, 8-byte alignment, the payloads, the producer
 * position); then the refusals (E2BIG, EINVAL, ENOSPC, ETIMEDOUT, a second producer,
 * a ring buffer map) and a bogus sample handed to submit and discard.
 * Skipped (exit 0, with the reason) when not root or when the kernel refuses BPF. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/bpf.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"

#define SIZE (1u << 14)
#define BUSY_BIT (1u << 31)
#define DISCARD_BIT (1u << 30)
#define HDR 8u

#ifndef BPF_MAP_TYPE_USER_RINGBUF
#define BPF_MAP_TYPE_USER_RINGBUF 31
#endif

static long sys_bpf(int cmd, union bpf_attr *attr) {
    return syscall(SYS_bpf, cmd, attr, sizeof *attr);
}

static int skip(const char *why) {
    printf("bpf_user: skipped: %s\n", why);
    return 0;
}

static int create_map(uint32_t type, uint32_t size) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = type;
    attr.max_entries = size;
    return (int)sys_bpf(BPF_MAP_CREATE, &attr);
}

/* The map's pages as the kernel's drain reads them, mapped read-only: the consumer
 * position (page 0), the producer position (page 1), the data (from page 2). */
struct view {
    const uint64_t *consumer;
    const uint64_t *producer;
    const unsigned char *data;
    size_t page, len;
    void *cons_map, *prod_map;
};

static struct view map_view(int fd, uint32_t size) {
    struct view v;
    v.page = (size_t)sysconf(_SC_PAGESIZE);
    v.len = v.page + size;
    v.cons_map = mmap(NULL, v.page, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(v.cons_map != MAP_FAILED);
    v.prod_map = mmap(NULL, v.len, PROT_READ, MAP_SHARED, fd, (off_t)v.page);
    CHECK(v.prod_map != MAP_FAILED);
    v.consumer = v.cons_map;
    v.producer = v.prod_map;
    v.data = (const unsigned char *)v.prod_map + v.page;
    return v;
}

static void unmap_view(struct view *v) {
    munmap(v->cons_map, v->page);
    munmap(v->prod_map, v->len);
}

static uint64_t load64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

static uint32_t header_at(const struct view *v, uint64_t pos) {
    return __atomic_load_n((const uint32_t *)(v->data + (pos % SIZE)), __ATOMIC_ACQUIRE);
}

static uint64_t footprint(uint32_t len) { return ((uint64_t)len + HDR + 7) & ~(uint64_t)7; }

static unsigned char byte_of(unsigned sample, uint32_t i) { return (unsigned char)(sample * 31u + i * 7u + 1u); }

/* Samples of these lengths in turn; every fifth is discarded. */
static const uint32_t LENS[] = {1, 7, 8, 13, 100, 333, 64, 2};
#define NLENS (sizeof LENS / sizeof LENS[0])

struct produced {
    unsigned count, discarded;
    uint64_t bytes; /* footprints: what producer_pos moved by */
};

static struct produced fill(ringtrace_bpf_user_ringbuf *rb, const struct view *v) {
    struct produced p = {0, 0, 0};
    for (;;) {
        uint32_t len = LENS[p.count % NLENS];
        uint64_t pos = load64(v->producer);
        errno = 0;
        unsigned char *s = ringtrace_bpf_user_ringbuf_reserve(rb, len);
        if (s == NULL) {
            CHECK_EQ(errno, ENOSPC);
            CHECK_EQ(load64(v->producer), pos);
            CHECK(pos + footprint(len) > SIZE);
            break;
        }
        CHECK_EQ((uintptr_t)s % 8, 0);
        /* Reserved: published past the sample, its header BUSY until submitted. */
        CHECK_EQ(load64(v->producer), pos + footprint(len));
        CHECK_EQ(header_at(v, pos), len | BUSY_BIT);
        for (uint32_t i = 0; i < len; i++) s[i] = byte_of(p.count, i);
        if (p.count % 5 == 4) {
            ringtrace_bpf_user_ringbuf_discard(rb, s);
            CHECK_EQ(header_at(v, pos), len | DISCARD_BIT);
            p.discarded++;
        } else {
            ringtrace_bpf_user_ringbuf_submit(rb, s);
            CHECK_EQ(header_at(v, pos), len);
        }
        p.count++;
        p.bytes += footprint(len);
    }
    return p;
}

/* Walks the headers from position 0 as the kernel's drain would. */
static void check_samples(const struct view *v, const struct produced *p) {
    CHECK_EQ(load64(v->consumer), 0);
    CHECK_EQ(load64(v->producer), p->bytes);
    uint64_t pos = 0;
    for (unsigned n = 0; n < p->count; n++) {
        uint32_t len = LENS[n % NLENS];
        uint32_t hdr = header_at(v, pos);
        CHECK_EQ(hdr & BUSY_BIT, 0);
        CHECK_EQ(hdr & ~(BUSY_BIT | DISCARD_BIT), len);
        CHECK_EQ((hdr & DISCARD_BIT) != 0, n % 5 == 4);
        const unsigned char *payload = v->data + pos + HDR;
        for (uint32_t i = 0; i < len; i++) CHECK_EQ(payload[i], byte_of(n, i));
        pos += footprint(len);
        CHECK_EQ(pos % 8, 0);
    }
    CHECK_EQ(pos, p->bytes);
}

/* The refusals, on a full map. */
static void refusals(ringtrace_bpf_user_ringbuf *rb, int map_fd, const struct view *v) {
    uint64_t pos = load64(v->producer);
    errno = 0;
    CHECK(ringtrace_bpf_user_ringbuf_reserve(rb, SIZE) == NULL);
    CHECK_EQ(errno, E2BIG);
    errno = 0;
    CHECK(ringtrace_bpf_user_ringbuf_reserve(rb, UINT32_MAX) == NULL);
    CHECK_EQ(errno, E2BIG);
    errno = 0;
    CHECK(ringtrace_bpf_user_ringbuf_reserve(rb, 0) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(ringtrace_bpf_user_ringbuf_reserve(NULL, 8) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(ringtrace_bpf_user_ringbuf_reserve(rb, SIZE - HDR) == NULL);
    CHECK_EQ(errno, ENOSPC);

    /* No BPF program drains the map: the blocking reserve waits its timeout out. */
    long long start = now_ms();
    errno = 0;
    CHECK(ringtrace_bpf_user_ringbuf_reserve_blocking(rb, 512, 300) == NULL);
    long long took = now_ms() - start;
    CHECK_EQ(errno, ETIMEDOUT);
    CHECK(took >= 290);
    CHECK(took < 3000);
    errno = 0;
    CHECK(ringtrace_bpf_user_ringbuf_reserve_blocking(rb, 512, 0) == NULL);
    CHECK_EQ(errno, ETIMEDOUT);
    /* libbpf's -1 (no limit) is refused: every wait here is bounded. */
    errno = 0;
    CHECK(ringtrace_bpf_user_ringbuf_reserve_blocking(rb, 512, -1) == NULL);
    CHECK_EQ(errno, EINVAL);
    CHECK(strstr(ringtrace_last_error(), "negative timeout") != NULL);
    errno = 0;
    CHECK(ringtrace_bpf_user_ringbuf_reserve_blocking(rb, SIZE, 100) == NULL);
    CHECK_EQ(errno, E2BIG);

    /* Samples that are not reserved: nothing changes, errno says EINVAL. */
    uint32_t first = header_at(v, 0);
    unsigned char bogus[16];
    void *not_samples[] = {bogus, (void *)(uintptr_t)0x1000, NULL, (void *)(v->data + HDR)};
    for (size_t i = 0; i < sizeof not_samples / sizeof not_samples[0]; i++) {
        errno = 0;
        ringtrace_bpf_user_ringbuf_submit(rb, not_samples[i]);
        CHECK_EQ(errno, EINVAL);
        CHECK(strstr(ringtrace_last_error(), "not a sample reserved") != NULL);
        errno = 0;
        ringtrace_bpf_user_ringbuf_discard(rb, not_samples[i]);
        CHECK_EQ(errno, EINVAL);
    }
    errno = 0;
    ringtrace_bpf_user_ringbuf_submit(NULL, bogus);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(header_at(v, 0), first);
    CHECK_EQ(load64(v->producer), pos);

    /* One producer per map: a second handle is refused while the first lives. */
    ringtrace_bpf_user_ringbuf *second = NULL;
    CHECK_EQ(ringtrace_bpf_user_ringbuf_from_fd(map_fd, &second), -EBUSY);
    CHECK(second == NULL);
    CHECK(strstr(ringtrace_last_error(), "already has a producer") != NULL);
}

/* A sample submitted twice, and one left reserved when its handle is freed: the second
 * submit changes nothing; the free discards the sample left, so that the drain goes
 * past it. */
static void left_reserved(void) {
    int fd = create_map(BPF_MAP_TYPE_USER_RINGBUF, SIZE);
    CHECK(fd >= 0);
    struct view v = map_view(fd, SIZE);
    ringtrace_bpf_user_ringbuf *rb = NULL;
    CHECK_EQ(ringtrace_bpf_user_ringbuf_from_fd(fd, &rb), 0);
    char *a = ringtrace_bpf_user_ringbuf_reserve(rb, 5);
    CHECK(a != NULL);
    memcpy(a, "hello", 5);
    ringtrace_bpf_user_ringbuf_submit(rb, a);
    errno = 0;
    ringtrace_bpf_user_ringbuf_submit(rb, a);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    ringtrace_bpf_user_ringbuf_discard(rb, a);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(header_at(&v, 0), 5);
    CHECK(memcmp(v.data + HDR, "hello", 5) == 0);
    /* Reserved by one call, submitted out of order with another. */
    char *b = ringtrace_bpf_user_ringbuf_reserve(rb, 40);
    char *c = ringtrace_bpf_user_ringbuf_reserve_blocking(rb, 3, 100);
    CHECK(b != NULL && c != NULL);
    CHECK_EQ(c - b, (long)footprint(40));
    memcpy(c, "abc", 3);
    ringtrace_bpf_user_ringbuf_submit(rb, c);
    CHECK_EQ(header_at(&v, 16), 40 | BUSY_BIT);
    CHECK_EQ(header_at(&v, 16 + footprint(40)), 3);
    ringtrace_bpf_user_ringbuf_free(rb);
    CHECK_EQ(header_at(&v, 16), 40 | DISCARD_BIT);
    /* The lock went with the handle. */
    CHECK_EQ(ringtrace_bpf_user_ringbuf_from_fd(fd, &rb), 0);
    ringtrace_bpf_user_ringbuf_free(rb);
    unmap_view(&v);
    close(fd);
}

int main(void) {
    if (geteuid() != 0) return skip("not root");
    int map_fd = create_map(BPF_MAP_TYPE_USER_RINGBUF, SIZE);
    if (map_fd < 0) return skip("the kernel refused to create a user ring buffer map");

    /* Pin in a private bpffs mount if this process may make one. */
    char dir[] = "/tmp/ringtrace-bpffs-XXXXXX";
    char pin[64] = "";
    int mounted = 0;
    if (unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
        mkdtemp(dir) != NULL) {
        if (mount("bpf", dir, "bpf", 0, NULL) == 0) {
            mounted = 1;
            snprintf(pin, sizeof pin, "%s/user", dir);
            union bpf_attr attr;
            memset(&attr, 0, sizeof attr);
            attr.pathname = (uint64_t)(uintptr_t)pin;
            attr.bpf_fd = (uint32_t)map_fd;
            if (sys_bpf(BPF_OBJ_PIN, &attr) != 0) pin[0] = '\0';
        }
    }

    ringtrace_bpf_user_ringbuf *rb = NULL;
    if (pin[0]) {
        CHECK_EQ(ringtrace_bpf_user_ringbuf_open_pinned(pin, &rb), 0);
    } else {
        printf("bpf_user: could not pin in a private bpffs; attaching by descriptor\n");
        CHECK_EQ(ringtrace_bpf_user_ringbuf_from_fd(map_fd, &rb), 0);
    }
    CHECK(ringtrace_bpf_user_ringbuf_fd(rb) >= 0);
    CHECK_EQ(ringtrace_bpf_user_ringbuf_fd(NULL), -EINVAL);

    struct view v = map_view(map_fd, SIZE);
    struct produced p = fill(rb, &v);
    CHECK(p.count > 50);
    check_samples(&v, &p);
    refusals(rb, map_fd, &v);
    check_samples(&v, &p);
    ringtrace_bpf_user_ringbuf_free(rb);
    ringtrace_bpf_user_ringbuf_free(NULL);

    /* Maps of other types: a ring buffer map (the kernel writes it), not a map. */
    int ring_fd = create_map(BPF_MAP_TYPE_RINGBUF, SIZE);
    CHECK(ring_fd >= 0);
    ringtrace_bpf_user_ringbuf *bad = NULL;
    CHECK_EQ(ringtrace_bpf_user_ringbuf_from_fd(ring_fd, &bad), -EINVAL);
    CHECK(strstr(ringtrace_last_error(), "not a user ring buffer") != NULL);
    CHECK_EQ(ringtrace_bpf_user_ringbuf_from_fd(-1, &bad), -EBADF);
    CHECK(ringtrace_bpf_user_ringbuf_open_pinned("/nonexistent/user", &bad) < 0);
    CHECK_EQ(ringtrace_bpf_user_ringbuf_from_fd(map_fd, NULL), -EINVAL);
    CHECK(bad == NULL);
    close(ring_fd);

    left_reserved();
    unmap_view(&v);
    close(map_fd);
    if (mounted) {
        if (pin[0]) unlink(pin);
        umount(dir);
        rmdir(dir);
    }
    printf("bpf_user: %u samples (%u discarded, %llu bytes) produced %s\n", p.count, p.discarded,
           (unsigned long long)p.bytes, pin[0] ? "by pinned path" : "by descriptor");
    return 0;
}
