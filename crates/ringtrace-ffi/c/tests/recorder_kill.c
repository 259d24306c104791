/* A C program's recorder directory read from outside, live and after SIGKILL: a child
 * process runs the typed_events example with its three workers recording forever, each
 * publishing its newest sequence number in shared memory after each event. The parent
 * runs `ringtrace decode --format json DIR` while they run (every worker's newest
 * event there is at least as new as what it had published before, with every field),
 * SIGKILLs the child, and decodes again: each worker's newest event is the one it
 * published last, or the one after (recorded, killed before publishing it). Then
 * `ringtrace stat DIR` and `ringtrace snapshot DIR` read it.
 *
 * RINGTRACE_CLI names the `ringtrace` command (scripts/test-c.sh sets it). */
#define TYPED_EVENTS_NO_MAIN
#include "../examples/typed_events.c"

#include <sys/mman.h>
#include <sys/wait.h>

#define DIR_NAME "kill.d"

static const char *cli(void) {
    const char *p = getenv("RINGTRACE_CLI");
    if (p == NULL) {
        fprintf(stderr, "RINGTRACE_CLI is not set: it names the ringtrace command this test runs\n");
        exit(1);
    }
    return p;
}

/* Runs `ringtrace ARGS > out`, which must succeed. */
static void run_cli(const char *args, const char *out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s > '%s'", cli(), args, out);
    int rc = system(cmd);
    if (rc != 0) {
        fprintf(stderr, "`%s` failed (status %d)\n", cmd, rc);
        exit(1);
    }
}

/* Each worker's newest `seq` in a decode's JSON lines; checks the fields of every
 * `tick` event of a worker. */
static void newest(const char *path, uint64_t out[WORKERS]) {
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    memset(out, 0, sizeof(uint64_t) * WORKERS);
    char *line = NULL;
    size_t cap = 0;
    long ticks = 0;
    while (getline(&line, &cap, f) > 0) {
        const char *t = strstr(line, "\"thread\":\"worker-");
        const char *s = strstr(line, "\"seq\":");
        if (t == NULL || s == NULL || strstr(line, "\"message\":\"tick\"") == NULL)
            continue;
        int w = t[strlen("\"thread\":\"worker-")] - '0';
        CHECK(w >= 0 && w < WORKERS);
        char who[64];
        snprintf(who, sizeof who, "\"who\":\"worker-%d\"", w);
        char blob[64];
        snprintf(blob, sizeof blob, "\"blob\":\"%02xab", w);
        int ok = strstr(line, who) && strstr(line, blob) && strstr(line, "\"ratio\":") && strstr(line, "\"even\":") &&
                 strstr(line, "\"delta\":") && strstr(line, "\"level\":\"INFO\"") &&
                 strstr(line, "\"spans\":[{\"name\":\"batch\"") && strstr(line, "\"target\":\"typed_events\"");
        if (!ok) {
            fprintf(stderr, "a tick event lacks a field: %s", line);
            exit(1);
        }
        uint64_t seq = strtoull(s + strlen("\"seq\":"), NULL, 10);
        if (seq > out[w])
            out[w] = seq;
        ticks++;
    }
    free(line);
    fclose(f);
    CHECK(ticks > 0);
}

int main(void) {
    _Atomic uint64_t *published =
        mmap(NULL, sizeof(uint64_t) * WORKERS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(published != MAP_FAILED);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        char *args[] = {"typed_events", DIR_NAME, "kill.rtt", NULL};
        typed_events_main(3, args, published);
        _exit(1); /* never returns */
    }

    /* Every worker well under way. */
    long long deadline = now_ms() + 30000;
    for (int w = 0; w < WORKERS; w++) {
        while (atomic_load(&published[w]) < 2000) {
            if (now_ms() > deadline) {
                kill(child, SIGKILL);
                fprintf(stderr, "worker %d published %llu events in 30 s\n", w,
                        (unsigned long long)atomic_load(&published[w]));
                return 1;
            }
            usleep(1000);
        }
    }

    /* Live: every worker's newest decoded event is at least what it published before. */
    uint64_t before[WORKERS], seen[WORKERS];
    for (int w = 0; w < WORKERS; w++)
        before[w] = atomic_load(&published[w]);
    run_cli("decode --format json " DIR_NAME, "live.jsonl");
    newest("live.jsonl", seen);
    for (int w = 0; w < WORKERS; w++) {
        printf("live: worker-%d newest %llu (had published %llu)\n", w, (unsigned long long)seen[w],
               (unsigned long long)before[w]);
        CHECK(seen[w] >= before[w]);
    }

    /* Killed: the newest is the last published, or the one recorded after it. */
    CHECK(kill(child, SIGKILL) == 0);
    int status;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    uint64_t last[WORKERS];
    for (int w = 0; w < WORKERS; w++)
        last[w] = atomic_load(&published[w]);
    run_cli("decode --format json " DIR_NAME, "killed.jsonl");
    newest("killed.jsonl", seen);
    for (int w = 0; w < WORKERS; w++) {
        printf("killed: worker-%d newest %llu (published %llu)\n", w, (unsigned long long)seen[w],
               (unsigned long long)last[w]);
        CHECK(seen[w] == last[w] || seen[w] == last[w] + 1);
    }
    run_cli("stat " DIR_NAME, "stat.txt");
    run_cli("snapshot " DIR_NAME, "snapshot.txt");
    return 0;
}
