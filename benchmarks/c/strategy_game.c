/* Plain C baseline of the memory-H strategy-table game (normlab.theory.strategy_game).
 *
 * Same rules, same xoshiro256** stream (seed words read from a file, one run per 4 words) and
 * the same observables as the Numba kernel (per-round successes, N_w and distinct names,
 * consensus, 95% window, streak, flip), so benchmarks/bench_theory.py can check it run for run
 * against normlab and report the throughput ratio from one process.
 *
 * Strategy: a table p(name | memory state) (row-major float64, n_states(W, H) x W, states coded
 * as in normlab.theory.strategies) or best response (table file "-").
 *
 * Build: cc -O3 -march=native -o strategy_game strategy_game.c
 * Usage: strategy_game N W H T STOP CWORD N_COMMITTED INIT TABLE|- SEEDS OUT
 *   STOP: 0 max, 1 consensus, 2 success95, 3 streak, 4 flip; CWORD: committed name or -1;
 *   the last N_COMMITTED agents are committed; INIT: -1 empty memories or a consensus name;
 *   SEEDS: binary uint64 words (4 per run); OUT: per-run scalars (text).
 *   Prints "interactions cpu_seconds" (CPU time of the runs only) on stdout.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t s[4];
static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static inline uint64_t next(void) {
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
    return result;
}
static inline int64_t randbelow(uint64_t n) { return (int64_t)(((next() >> 32) * n) >> 32); }
static inline double uniform(void) { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }

/* game state */
static int64_t N, W, H, B, top_pow, *offsets;
static int64_t *ring_o, *ring_p, *head, *mlen, *code, *cnt, *pcnt, *glob, *srun, *sname, *settled;
static int64_t nw, nd;

static void count_in(int64_t a, int64_t w) {
    if (++cnt[a * W + w] == 1) { nw++; if (++glob[w] == 1) nd++; }
}
static void count_out(int64_t a, int64_t w) {
    if (--cnt[a * W + w] == 0) { nw--; if (--glob[w] == 0) nd--; }
}

/* record (own x, partner y) in agent a's memory; return the name a is settled on (-1: none) */
static int64_t push(int64_t a, int64_t x, int64_t y) {
    int64_t k = mlen[a], e = x * W + y;
    if (k < H) {
        ring_o[a * H + k] = x; ring_p[a * H + k] = y; mlen[a] = k + 1; code[a] = code[a] * B + e;
    } else {
        int64_t at = a * H + head[a], ox = ring_o[at], oy = ring_p[at];
        ring_o[at] = x; ring_p[at] = y;
        head[a] = head[a] + 1 == H ? 0 : head[a] + 1;
        code[a] = (code[a] - (ox * W + oy) * top_pow) * B + e;
        count_out(a, ox); count_out(a, oy); pcnt[a * W + oy]--;
    }
    count_in(a, x); count_in(a, y); pcnt[a * W + y]++;
    int64_t before = srun[a] >= H ? sname[a] : -1;
    if (x == y) {
        if (sname[a] == x) srun[a]++; else { sname[a] = x; srun[a] = 1; }
    } else { sname[a] = -1; srun[a] = 0; }
    int64_t after = srun[a] >= H ? sname[a] : -1;
    if (before != after) { if (before >= 0) settled[before]--; if (after >= 0) settled[after]++; }
    return after;
}

static int64_t choose_table(const double *row, double u) {
    double acc = 0.0; int64_t choice = -1;
    for (int64_t q = 0; q < W; q++)
        if (row[q] > 0.0) { choice = q; acc += row[q]; if (u < acc) break; }
    return choice;
}

static int64_t choose_best_response(int64_t a, double u) {
    int64_t k = mlen[a], top = 0, n_top = W;
    const int64_t *c = pcnt + a * W;
    if (k > 0) {
        for (int64_t q = 0; q < W; q++) if (c[q] > top) top = c[q];
        n_top = 0;
        for (int64_t q = 0; q < W; q++) if (c[q] == top) n_top++;
    }
    double p = 1.0 / n_top, acc = 0.0; int64_t choice = -1;
    for (int64_t q = 0; q < W; q++)
        if (k == 0 || c[q] == top) { choice = q; acc += p; if (u < acc) break; }
    return choice;
}

int main(int argc, char **argv) {
    if (argc != 12) { fprintf(stderr, "usage: strategy_game N W H T STOP CWORD N_COMMITTED INIT TABLE|- SEEDS OUT\n"); return 2; }
    N = atoll(argv[1]); W = atoll(argv[2]); H = atoll(argv[3]);
    int64_t T = atoll(argv[4]), stop_code = atoll(argv[5]), cword = atoll(argv[6]), n_comm = atoll(argv[7]),
            init = atoll(argv[8]);
    double flip_thr = 2.849 / 3.0;
    B = W * W;
    offsets = malloc(sizeof(int64_t) * (H + 1));
    offsets[0] = 0;
    int64_t pw = 1;
    for (int64_t k = 1; k <= H; k++) { offsets[k] = offsets[k - 1] + pw; pw *= B; }
    top_pow = pw / B;
    int64_t n_states = offsets[H] + pw;
    double *table = NULL;
    if (strcmp(argv[9], "-") != 0) {
        FILE *f = fopen(argv[9], "rb");
        table = malloc(sizeof(double) * n_states * W);
        if (!f || fread(table, sizeof(double), n_states * W, f) != (size_t)(n_states * W)) { fprintf(stderr, "bad table\n"); return 2; }
        fclose(f);
    }
    FILE *fs = fopen(argv[10], "rb");
    fseek(fs, 0, SEEK_END);
    long runs = ftell(fs) / 32;
    fseek(fs, 0, SEEK_SET);
    uint64_t *seeds = malloc(32 * runs);
    if (fread(seeds, 32, runs, fs) != (size_t)runs) return 2;
    fclose(fs);
    int64_t *out = malloc(sizeof(int64_t) * 10 * runs);
    char *committed = calloc(N, 1);
    for (int64_t a = N - n_comm; a < N; a++) committed[a] = 1;
    ring_o = malloc(sizeof(int64_t) * N * H); ring_p = malloc(sizeof(int64_t) * N * H);
    head = malloc(sizeof(int64_t) * N); mlen = malloc(sizeof(int64_t) * N); code = malloc(sizeof(int64_t) * N);
    cnt = malloc(sizeof(int64_t) * N * W); pcnt = malloc(sizeof(int64_t) * N * W);
    glob = malloc(sizeof(int64_t) * W); srun = malloc(sizeof(int64_t) * N); sname = malloc(sizeof(int64_t) * N);
    settled = malloc(sizeof(int64_t) * W);
    char *window = malloc(3 * N);
    int64_t *prod = malloc(sizeof(int64_t) * W), *produ = malloc(sizeof(int64_t) * W);
    int64_t total = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    for (long run = 0; run < runs; run++) {
        memcpy(s, seeds + 4 * run, 32);
        memset(head, 0, sizeof(int64_t) * N); memset(mlen, 0, sizeof(int64_t) * N); memset(code, 0, sizeof(int64_t) * N);
        memset(cnt, 0, sizeof(int64_t) * N * W); memset(pcnt, 0, sizeof(int64_t) * N * W);
        memset(glob, 0, sizeof(int64_t) * W); memset(srun, 0, sizeof(int64_t) * N); memset(settled, 0, sizeof(int64_t) * W);
        for (int64_t a = 0; a < N; a++) sname[a] = -1;
        nw = nd = 0;
        int64_t n_unc = 0;
        for (int64_t a = 0; a < N; a++) {
            if (committed[a]) { if (++glob[cword] == 1) nd++; nw++; }
            else { n_unc++; if (init >= 0) for (int64_t i = 0; i < H; i++) push(a, init, init); }
        }
        int64_t L = 3 * N, widx = 0, wsum = 0, streak = 0, ring_c[3] = {0}, ring_u[3] = {0}, slot = 0, cur_c = 0, cur_u = 0;
        int64_t t_cons = -1, winner = -1, t_s95 = -1, t_streak = -1, t_flip = -1, nwmax = nw, tmax = 0, ndmax = nd;
        int64_t stop_reason = 0, t = 0, r = 0, in_round = 0, succ = 0, succ_total = 0, checksum = 0;
        memset(window, 0, L);
        while (t < T) {
            if (in_round == 0) { memset(prod, 0, sizeof(int64_t) * W); memset(produ, 0, sizeof(int64_t) * W); }
            int64_t i = randbelow(N), j = randbelow(N - 1);
            if (j >= i) j++;
            int64_t ci = cword, cj = cword;
            if (!committed[i]) {
                double u = uniform();
                ci = table ? choose_table(table + (offsets[mlen[i]] + code[i]) * W, u) : choose_best_response(i, u);
            }
            if (!committed[j]) {
                double u = uniform();
                cj = table ? choose_table(table + (offsets[mlen[j]] + code[j]) * W, u) : choose_best_response(j, u);
            }
            prod[ci]++; prod[cj]++;
            if (!committed[i]) { produ[ci]++; cur_u++; if (ci == cword) cur_c++; }
            if (!committed[j]) { produ[cj]++; cur_u++; if (cj == cword) cur_c++; }
            int success = ci == cj;
            succ += success;
            int64_t new_settled = -1;
            if (!committed[i]) new_settled = push(i, ci, cj);
            if (!committed[j]) { int64_t sj = push(j, cj, ci); if (sj >= 0) new_settled = sj; }
            t++; in_round++;
            if (nw > nwmax) { nwmax = nw; tmax = t; }
            if (nd > ndmax) ndmax = nd;
            if (t_cons < 0 && new_settled >= 0 && settled[new_settled] == n_unc && (cword < 0 || cword == new_settled)) {
                t_cons = t; winner = new_settled; if (stop_code == 1) stop_reason = 1;
            }
            wsum += success - window[widx]; window[widx] = (char)success;
            if (++widx == L) widx = 0;
            if (t_s95 < 0 && t >= L && 100 * wsum >= 95 * L) { t_s95 = t; if (stop_code == 2) stop_reason = 2; }
            if (success) { if (++streak >= L && t_streak < 0) { t_streak = t; if (stop_code == 3) stop_reason = 3; } }
            else streak = 0;
            if (in_round == N) {
                checksum += succ * (r + 1) + nw + 7 * nd + 11 * prod[W - 1] + 13 * produ[0];
                ring_c[slot] = cur_c; ring_u[slot] = cur_u; slot = slot == 2 ? 0 : slot + 1;
                cur_c = cur_u = 0;
                if (cword >= 0 && t_flip < 0 && r >= 2) {
                    int64_t tu = ring_u[0] + ring_u[1] + ring_u[2];
                    if (tu > 0 && ring_c[0] + ring_c[1] + ring_c[2] >= flip_thr * tu) { t_flip = t; if (stop_code == 4) stop_reason = 4; }
                }
                succ_total += succ;
                r++; in_round = 0; succ = 0;
            }
            if (stop_reason) break;
        }
        succ_total += succ;
        int64_t *o = out + 10 * run;
        o[0] = t; o[1] = t_cons; o[2] = winner; o[3] = tmax; o[4] = nwmax; o[5] = ndmax; o[6] = t_s95; o[7] = t_streak;
        o[8] = t_flip; o[9] = succ_total + 1000003 * (checksum % 1000003);
        total += t;
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    FILE *fo = fopen(argv[11], "w");
    for (long run = 0; run < runs; run++) {
        for (int q = 0; q < 10; q++) fprintf(fo, q ? " %lld" : "%lld", (long long)out[10 * run + q]);
        fprintf(fo, "\n");
    }
    fclose(fo);
    printf("%lld %.6f\n", (long long)total, (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
    return 0;
}
