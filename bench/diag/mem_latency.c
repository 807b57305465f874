/* Load-to-use latency of this machine's memory at growing working sets: a random
 * pointer chase through one pointer per cache line (each load needs the previous one,
 * so nothing overlaps). It explains the simulator's per-packet cost curve (BENCHMARKS.md,
 * "Scaling"): the per-pair state of 10^3 pairs fits the caches, that of 10^4 does not.
 *
 *   cc -O2 -o /tmp/mem_latency bench/diag/mem_latency.c && /tmp/mem_latency
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    const size_t kb[] = {256, 1024, 2048, 4096, 8192, 16384, 65536, 262144};
    uint64_t x = 88172645463325252ull; /* xorshift64: the same permutation every run */
    for (size_t s = 0; s < sizeof kb / sizeof kb[0]; s++) {
        size_t bytes = kb[s] << 10, n = bytes / 64;
        char *buf = aligned_alloc(4096, bytes);
        size_t *perm = malloc(n * sizeof *perm);
        if (!buf || !perm) return 1;
        for (size_t i = 0; i < n; i++) perm[i] = i;
        for (size_t i = n - 1; i > 0; i--) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            size_t j = x % (i + 1), t = perm[i];
            perm[i] = perm[j]; perm[j] = t;
        }
        for (size_t i = 0; i < n; i++) *(void **)(buf + perm[i] * 64) = buf + perm[(i + 1) % n] * 64;
        void *p = buf + perm[0] * 64;
        const size_t loads = 20000000;
        double t0 = now();
        for (size_t i = 0; i < loads; i++) p = *(void **)p;
        double t = now() - t0;
        printf("%7zu KB: %6.1f ns per load%s\n", kb[s], t / loads * 1e9, p ? "" : "!");
        free(buf);
        free(perm);
    }
    return 0;
}
