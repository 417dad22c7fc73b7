/* probe.c - how fast this machine runs at this moment, in three timings of fixed work.
 * benches/run_all.sh runs it pinned to each CPU before and after the cases, so that a
 * table can be read with the machine's state at the time. On a shared host (other
 * guests on the same cores and memory, and this machine's own kdamond) the same work
 * takes up to 2-3x longer than when it is quiet.
 *
 *   gcc -O2 -o probe benches/probe.c && taskset -c 0 ./probe
 *   loop 134.0 ms, memory 442.1 ms, faults 23.5 ms
 *
 *   loop    100 M dependent additions through a volatile counter (the core alone)
 *   memory  2 M dependent loads at random places in 64 MiB (a cycle through a shuffled
 *           array: the caches, the TLB and memory, as profconv's cold runs meet them)
 *   faults  the first write to each 4 KiB page of 32 MiB (8 192 page faults, each a
 *           zeroed page: what a run's fresh memory costs)
 *
 * Of the three, the memory and faults timings follow profconv's own time best: over 60
 * moments of one afternoon, correlations 0.55 and 0.48 with the 3000-function gprof
 * conversion's time, 0.25 for the loop (and none with its ratio to gprof -b, which slows
 * down too). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double loop(void)
{
    volatile unsigned long sum = 0;
    double start = now_ms();
    for (unsigned long i = 0; i < 100000000UL; i++)
        sum += i;
    return now_ms() - start;
}

static double memory(void)
{
    size_t n = (64u << 20) / sizeof(uint32_t);
    uint32_t *next = malloc(n * sizeof *next);
    if (!next)
        return -1;
    /* One random cycle through every slot (Sattolo's shuffle, xorshift64). */
    for (size_t i = 0; i < n; i++)
        next[i] = (uint32_t)i;
    uint64_t x = 88172645463325252ULL;
    for (size_t i = n - 1; i > 0; i--) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t j = x % i;
        uint32_t t = next[i];
        next[i] = next[j];
        next[j] = t;
    }
    volatile uint32_t at = 0;
    uint32_t p = 0;
    double start = now_ms();
    for (int i = 0; i < 2000000; i++)
        p = next[p];
    double took = now_ms() - start;
    at = p;
    (void)at;
    free(next);
    return took;
}

static double faults(void)
{
    size_t len = 32u << 20;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    madvise(m, len, MADV_NOHUGEPAGE);
    double start = now_ms();
    for (size_t at = 0; at < len; at += 4096)
        m[at] = 1;
    double took = now_ms() - start;
    munmap(m, len);
    return took;
}

int main(void)
{
    double l = loop(), m = memory(), f = faults();
    printf("loop %.1f ms, memory %.1f ms, faults %.1f ms\n", l, m, f);
    return 0;
}
