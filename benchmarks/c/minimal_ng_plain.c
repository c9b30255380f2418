/* Plain C of the minimal naming game (unlimited word pool, complete graph, run to consensus),
 * written the straightforward way: int32 inventories in one N x cap block (doubled when an
 * agent's fills up), holder counts per word, the PRNG state in locals.
 *
 * Same rules and the same xoshiro256** stream as normlab's kernel (seed words read from a file,
 * 4 per run), so benchmarks/bench_theory.py checks it run for run against normlab (consensus
 * time, t_max, N_w max, distinct max, successes) and reports the throughput ratio from one
 * process. (benchmarks/c/minimal_ng.c is the older baseline with its own seeding.)
 *
 * Build: cc -O3 -march=native -o minimal_ng_plain minimal_ng_plain.c
 * Usage: minimal_ng_plain N SEEDS OUT   -> prints "interactions cpu_seconds" (runs only) on stdout
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
#define NEXT(out) do { out = rotl(s1 * 5, 7) * 9; uint64_t t_ = s1 << 17; s2 ^= s0; s3 ^= s1; s1 ^= s2; \
                       s0 ^= s3; s2 ^= t_; s3 = rotl(s3, 45); } while (0)

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: minimal_ng_plain N SEEDS OUT\n"); return 2; }
    int64_t N = atoll(argv[1]);
    FILE *fs = fopen(argv[2], "rb");
    fseek(fs, 0, SEEK_END);
    long runs = ftell(fs) / 32;
    fseek(fs, 0, SEEK_SET);
    uint64_t *seeds = malloc(32 * runs);
    if (fread(seeds, 32, runs, fs) != (size_t)runs) return 2;
    fclose(fs);
    int64_t *res = malloc(sizeof(int64_t) * 5 * runs), total = 0;
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    for (long run = 0; run < runs; run++) {
        uint64_t s0 = seeds[4 * run], s1 = seeds[4 * run + 1], s2 = seeds[4 * run + 2], s3 = seeds[4 * run + 3], x;
        int64_t cap = 8, words = N + 2;
        int32_t *inv = malloc(sizeof(int32_t) * N * cap);
        int32_t *ln = calloc(N, sizeof(int32_t));
        int32_t *holders = calloc(words, sizeof(int32_t));
        int64_t nw = 0, nd = 0, nwmax = 0, tmax = 0, ndmax = 0, next_word = 1, t = 0, successes = 0;
        for (;;) {
            NEXT(x);
            int64_t sp = (int64_t)(((x >> 32) * (uint64_t)N) >> 32);
            NEXT(x);
            int64_t h = (int64_t)(((x >> 32) * (uint64_t)(N - 1)) >> 32);
            if (h >= sp) h++;
            int32_t w, k = ln[sp], *is = inv + sp * cap, *ih = inv + h * cap;
            if (k == 0) {
                w = (int32_t)next_word++;
                is[0] = w; ln[sp] = 1; nw++;
                if (++holders[w] == 1) nd++;
            } else if (k == 1) {
                w = is[0];
            } else {
                NEXT(x);
                w = is[((x >> 32) * (uint64_t)k) >> 32];
            }
            int success = 0;
            for (int32_t m = 0; m < ln[h]; m++)
                if (ih[m] == w) { success = 1; break; }
            if (success) {
                successes++;
                for (int32_t m = 0; m < ln[sp]; m++) if (is[m] != w && --holders[is[m]] == 0) nd--;
                for (int32_t m = 0; m < ln[h]; m++) if (ih[m] != w && --holders[ih[m]] == 0) nd--;
                nw -= ln[sp] + ln[h] - 2;
                is[0] = w; ih[0] = w; ln[sp] = 1; ln[h] = 1;
            } else {
                if (ln[h] == cap) { /* grow every inventory */
                    int32_t *nu = malloc(sizeof(int32_t) * N * cap * 2);
                    for (int64_t a = 0; a < N; a++) memcpy(nu + a * cap * 2, inv + a * cap, sizeof(int32_t) * cap);
                    free(inv); inv = nu; cap *= 2; ih = inv + h * cap;
                }
                ih[ln[h]++] = w; nw++;
                if (++holders[w] == 1) nd++;
            }
            t++;
            if (nw > nwmax) { nwmax = nw; tmax = t; }
            if (nd > ndmax) ndmax = nd;
            if (nd == 1 && nw == N) break;
        }
        int64_t *r = res + 5 * run;
        r[0] = t; r[1] = tmax; r[2] = nwmax; r[3] = ndmax; r[4] = successes;
        total += t;
        free(inv); free(ln); free(holders);
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    FILE *fo = fopen(argv[3], "w");
    for (long run = 0; run < runs; run++)
        fprintf(fo, "%lld %lld %lld %lld %lld\n", (long long)res[5 * run], (long long)res[5 * run + 1],
                (long long)res[5 * run + 2], (long long)res[5 * run + 3], (long long)res[5 * run + 4]);
    fclose(fo);
    printf("%lld %.6f\n", (long long)total, (c1.tv_sec - c0.tv_sec) + 1e-9 * (c1.tv_nsec - c0.tv_nsec));
    return 0;
}
