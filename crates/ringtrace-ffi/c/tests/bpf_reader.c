/* A reader of a kernel BPF ring buffer map through the C API. The test makes the map
 * with bpf(2) (BPF_MAP_TYPE_RINGBUF), pins it in a private bpffs mount (in a mount
 * namespace of its own) when it can, loads a hand-assembled socket filter that writes
 * one 8-byte record with bpf_ringbuf_output, runs it with BPF_PROG_TEST_RUN, and
 * reads the records by pinned path (or by descriptor when it could not pin); then two
 * maps behind one descriptor (ringtrace_bpf_ringset_*, libbpf's ring_buffer__add),
 * each record told by its map's index.
 * Skipped (exit 0, with the reason) when not root or when the kernel refuses BPF. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/bpf.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"

#define RUNS 100
#define VALUE 0x11223344

static long sys_bpf(int cmd, union bpf_attr *attr) {
    return syscall(SYS_bpf, cmd, attr, sizeof *attr);
}

static int skip(const char *why) {
    printf("bpf_reader: skipped: %s\n", why);
    return 0;
}

static int load_prog(int map_fd) {
    struct bpf_insn insns[] = {
        /* *(u64 *)(r10 - 8) = VALUE */
        {.code = BPF_ST | BPF_MEM | BPF_DW, .dst_reg = 10, .off = -8, .imm = VALUE},
        /* r1 = map (ld_imm64, pseudo map fd) */
        {.code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = 1, .src_reg = BPF_PSEUDO_MAP_FD, .imm = map_fd},
        {.code = 0},
        /* r2 = r10 - 8; r3 = 8; r4 = 0 */
        {.code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 2, .src_reg = 10},
        {.code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 2, .imm = -8},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 3, .imm = 8},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 4, .imm = 0},
        /* bpf_ringbuf_output(r1, r2, r3, r4) */
        {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_ringbuf_output},
        /* return 0 */
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0},
        {.code = BPF_JMP | BPF_EXIT},
    };
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
    attr.insn_cnt = sizeof insns / sizeof insns[0];
    attr.insns = (uint64_t)(uintptr_t)insns;
    attr.license = (uint64_t)(uintptr_t) "GPL";
    return (int)sys_bpf(BPF_PROG_LOAD, &attr);
}

static int run_prog(int prog_fd, unsigned repeat) {
    unsigned char packet[64];
    memset(packet, 0, sizeof packet);
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.test.prog_fd = (uint32_t)prog_fd;
    attr.test.data_in = (uint64_t)(uintptr_t)packet;
    attr.test.data_size_in = sizeof packet;
    attr.test.repeat = repeat;
    return (int)sys_bpf(BPF_PROG_TEST_RUN, &attr);
}

static int on_record(void *ctx, const void *data, size_t len) {
    uint64_t v;
    CHECK_EQ(len, sizeof v);
    memcpy(&v, data, sizeof v);
    CHECK_EQ(v, VALUE);
    ++*(int *)ctx;
    return 0;
}

struct set_seen {
    int per_map[2];
    int stop_after;
};

static int on_set_record(void *ctx, size_t index, const void *data, size_t len) {
    struct set_seen *s = ctx;
    uint64_t v;
    CHECK_EQ(len, sizeof v);
    memcpy(&v, data, sizeof v);
    CHECK_EQ(v, VALUE);
    CHECK(index < 2);
    s->per_map[index]++;
    return s->stop_after > 0 && s->per_map[0] + s->per_map[1] >= s->stop_after;
}

/* Two maps in one set: 30 records into the first, 50 into the second, each counted
 * under its index; a callback that stops is reported as -ECANCELED. */
static void ringset(int map_fd, int prog_fd) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_RINGBUF;
    attr.max_entries = 1 << 16;
    int map2 = (int)sys_bpf(BPF_MAP_CREATE, &attr);
    CHECK(map2 >= 0);
    int prog2 = load_prog(map2);
    CHECK(prog2 >= 0);
    ringtrace_bpf_ringset *set = NULL;
    CHECK_EQ(ringtrace_bpf_ringset_new(&set), 0);
    CHECK_EQ(ringtrace_bpf_ringset_add(set, map_fd), 0);
    CHECK_EQ(ringtrace_bpf_ringset_add(set, map2), 1);
    CHECK_EQ(ringtrace_bpf_ringset_add(set, prog_fd), -EINVAL);
    CHECK(ringtrace_bpf_ringset_fd(set) >= 0);
    struct set_seen s = {{0, 0}, 0};
    CHECK_EQ(ringtrace_bpf_ringset_poll(set, 0, on_set_record, &s), 0);
    CHECK_EQ(run_prog(prog_fd, 30), 0);
    CHECK_EQ(run_prog(prog2, 50), 0);
    long long deadline = now_ms() + 10000;
    while (s.per_map[0] + s.per_map[1] < 80) {
        CHECK(now_ms() < deadline);
        CHECK(ringtrace_bpf_ringset_poll(set, 100, on_set_record, &s) >= 0);
    }
    CHECK_EQ(s.per_map[0], 30);
    CHECK_EQ(s.per_map[1], 50);
    CHECK_EQ(run_prog(prog2, 5), 0);
    s.stop_after = 82;
    CHECK_EQ(ringtrace_bpf_ringset_consume(set, on_set_record, &s), -ECANCELED);
    s.stop_after = 0;
    CHECK_EQ(ringtrace_bpf_ringset_consume(set, on_set_record, &s), 3);
    CHECK_EQ(s.per_map[1], 55);
    CHECK_EQ(ringtrace_bpf_ringset_consume(NULL, NULL, NULL), -EINVAL);

    /* An event loop as libbpf's users write it: arm, wait on the set's descriptor,
     * consume when it is readable. */
    CHECK_EQ(ringtrace_bpf_ringset_consume(set, on_set_record, &s), 0);
    CHECK_EQ(ringtrace_bpf_ringset_arm(set), 1);
    struct pollfd pfd = {.fd = ringtrace_bpf_ringset_fd(set), .events = POLLIN};
    CHECK_EQ(poll(&pfd, 1, 0), 0);
    CHECK_EQ(run_prog(prog_fd, 4), 0);
    CHECK_EQ(poll(&pfd, 1, 5000), 1);
    CHECK_EQ(ringtrace_bpf_ringset_consume(set, on_set_record, &s), 4);
    CHECK_EQ(s.per_map[0], 34);
    /* Records written while not armed: arm says to consume first. */
    CHECK_EQ(run_prog(prog2, 2), 0);
    CHECK_EQ(ringtrace_bpf_ringset_arm(set), 0);
    CHECK_EQ(ringtrace_bpf_ringset_consume(set, on_set_record, &s), 2);
    CHECK_EQ(ringtrace_bpf_ringset_arm(set), 1);
    ringtrace_bpf_ringset_free(set);
    close(prog2);
    close(map2);
}

int main(void) {
    if (geteuid() != 0) return skip("not root");
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_RINGBUF;
    attr.max_entries = 1 << 16;
    int map_fd = (int)sys_bpf(BPF_MAP_CREATE, &attr);
    if (map_fd < 0) return skip("the kernel refused to create a ring buffer map");
    int prog_fd = load_prog(map_fd);
    if (prog_fd < 0) {
        close(map_fd);
        return skip("the kernel refused the socket filter program");
    }

    /* Pin in a private bpffs mount if this process may make one. */
    char dir[] = "/tmp/ringtrace-bpffs-XXXXXX";
    char pin[64] = "";
    int mounted = 0;
    if (unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
        mkdtemp(dir) != NULL) {
        if (mount("bpf", dir, "bpf", 0, NULL) == 0) {
            mounted = 1;
            snprintf(pin, sizeof pin, "%s/ring", dir);
            memset(&attr, 0, sizeof attr);
            attr.pathname = (uint64_t)(uintptr_t)pin;
            attr.bpf_fd = (uint32_t)map_fd;
            if (sys_bpf(BPF_OBJ_PIN, &attr) != 0) pin[0] = '\0';
        }
    }

    ringtrace_bpf_ringbuf *rb = NULL;
    if (pin[0]) {
        CHECK_EQ(ringtrace_bpf_ringbuf_open_pinned(pin, &rb), 0);
    } else {
        printf("bpf_reader: could not pin in a private bpffs; reading by descriptor\n");
        CHECK_EQ(ringtrace_bpf_ringbuf_from_fd(map_fd, &rb), 0);
    }
    CHECK(ringtrace_bpf_ringbuf_fd(rb) >= 0);
    int seen = 0;
    CHECK_EQ(ringtrace_bpf_ringbuf_consume(rb, on_record, &seen), 0);
    CHECK_EQ(ringtrace_bpf_ringbuf_poll(rb, 0, on_record, &seen), 0);
    CHECK_EQ(run_prog(prog_fd, RUNS), 0);
    long long deadline = now_ms() + 10000;
    while (seen < RUNS) {
        CHECK(now_ms() < deadline);
        CHECK(ringtrace_bpf_ringbuf_poll(rb, 100, on_record, &seen) >= 0);
    }
    CHECK_EQ(seen, RUNS);
    CHECK_EQ(run_prog(prog_fd, 1), 0);
    CHECK_EQ(ringtrace_bpf_ringbuf_consume(rb, on_record, &seen), 1);

    /* One reader per map: a second handle of it may open, but its reads are refused
     * with -EBUSY while the first holds the map's reader lock. */
    ringtrace_bpf_ringbuf *second = NULL;
    CHECK_EQ(ringtrace_bpf_ringbuf_from_fd(map_fd, &second), 0);
    CHECK_EQ(ringtrace_bpf_ringbuf_consume(second, on_record, &seen), -EBUSY);
    ringtrace_bpf_ringbuf_free(second);

    /* misuse: not a map, nothing pinned, null handles */
    ringtrace_bpf_ringbuf *bad = NULL;
    CHECK_EQ(ringtrace_bpf_ringbuf_from_fd(prog_fd, &bad), -EINVAL);
    CHECK_EQ(ringtrace_bpf_ringbuf_from_fd(-1, &bad), -EBADF);
    CHECK(ringtrace_bpf_ringbuf_open_pinned("/nonexistent/ring", &bad) < 0);
    CHECK_EQ(ringtrace_bpf_ringbuf_consume(NULL, NULL, NULL), -EINVAL);
    CHECK_EQ(ringtrace_bpf_ringbuf_fd(NULL), -EINVAL);

    ringtrace_bpf_ringbuf_free(rb);
    ringset(map_fd, prog_fd);
    close(prog_fd);
    close(map_fd);
    if (mounted) {
        if (pin[0]) unlink(pin);
        umount(dir);
        rmdir(dir);
    }
    printf("bpf_reader: %d records of a kernel ring buffer read %s\n", seen, pin[0] ? "by pinned path" : "by descriptor");
    return 0;
}
