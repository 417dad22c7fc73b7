/* probe.c - a fixed amount of CPU work, timed: how fast one CPU of this machine runs at
 * this moment. benches/run_all.sh runs it pinned to each CPU before and after the cases,
 * so that a table can be read with the machine's state at the time: on a shared host
 * (other guests on the same cores) the same work takes up to ~2.4x longer than when the
 * host is quiet, and profconv's two threads slow down more than a single-threaded
 * reference does.
 *
 *   gcc -O2 -o probe benches/probe.c && taskset -c 0 ./probe    # prints e.g. "190.3"
 *
 * Prints the milliseconds taken by 400 M dependent additions through memory (a volatile
 * counter: the loop cannot be folded away). */
#include <stdio.h>
#include <time.h>

int main(void)
{
    struct timespec start, end;
    volatile unsigned long sum = 0;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (unsigned long i = 0; i < 400000000UL; i++)
        sum += i;
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("%.1f\n", (end.tv_sec - start.tv_sec) * 1e3 + (end.tv_nsec - start.tv_nsec) / 1e6);
    return 0;
}
