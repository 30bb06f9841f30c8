/* What the memory system allows a reader of a shard folder: no stokehold code involved.
 *
 *   cc -O2 -o memprobe bench/shard/memprobe.c && ./memprobe RUNS SHARD_FILE...
 *
 * Maps each shard file (docs/FORMAT.md: the footer's first u64 is the index offset, the second
 * the record count; index entries are 24 bytes, offset u64 then stored length u32), then reads
 * every record once, in file order and in a shuffled order (a Fisher-Yates permutation), touching
 * one byte of every 64-byte line of the record. The same loop serves both orders: the index entry
 * is prefetched 16 records ahead, the record's lines 8 ahead. Nothing is decoded or checksummed,
 * so the shuffled/sequential ratio is about the best any reader of these files can reach on this
 * machine. Prints one JSON line per order and run, in the shape shard_read_bench prints.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const uint8_t *map;
    uint64_t index_offset;
} Shard;

typedef struct {
    uint32_t shard;
    uint32_t local;
} Rec;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t u64_at(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static const uint8_t *entry(const Shard *s, Rec r) {
    return s[r.shard].map + s[r.shard].index_offset + (uint64_t)r.local * 24;
}

static uint64_t pass(const Shard *s, const Rec *order, uint64_t n) {
    uint64_t sum = 0;
    for (uint64_t k = 0; k < n; k++) {
        if (k + 16 < n) __builtin_prefetch(entry(s, order[k + 16]));
        if (k + 8 < n) {
            const uint8_t *e = entry(s, order[k + 8]);
            const uint8_t *rec = s[order[k + 8].shard].map + u64_at(e);
            for (uint32_t b = 0; b < u32_at(e + 8); b += 64) __builtin_prefetch(rec + b);
        }
        const uint8_t *e = entry(s, order[k]);
        const uint8_t *rec = s[order[k].shard].map + u64_at(e);
        for (uint32_t b = 0; b < u32_at(e + 8); b += 64) sum += rec[b];
    }
    return sum;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s RUNS SHARD_FILE...\n", argv[0]);
        return 2;
    }
    int runs = atoi(argv[1]), nshards = argc - 2;
    Shard *shards = calloc(nshards, sizeof(Shard));
    uint64_t n = 0, *counts = calloc(nshards, sizeof(uint64_t));
    for (int i = 0; i < nshards; i++) {
        int fd = open(argv[i + 2], O_RDONLY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 64) {
            fprintf(stderr, "%s: cannot open or too short\n", argv[i + 2]);
            return 1;
        }
        shards[i].map = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (shards[i].map == MAP_FAILED) {
            perror(argv[i + 2]);
            return 1;
        }
        madvise((void *)shards[i].map, st.st_size, MADV_HUGEPAGE); /* as the reader does */
        const uint8_t *footer = shards[i].map + st.st_size - 32;
        shards[i].index_offset = u64_at(footer);
        counts[i] = u64_at(footer + 8);
        n += counts[i];
    }
    Rec *seq = malloc(n * sizeof(Rec)), *shuf = malloc(n * sizeof(Rec));
    for (uint64_t i = 0, at = 0; i < (uint64_t)nshards; i++)
        for (uint64_t j = 0; j < counts[i]; j++, at++) seq[at] = (Rec){(uint32_t)i, (uint32_t)j};
    memcpy(shuf, seq, n * sizeof(Rec));
    uint64_t x = 0x9E3779B97F4A7C15ull; /* xorshift64: a fixed, seeded order */
    for (uint64_t i = n - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t j = x % (i + 1);
        Rec t = shuf[i];
        shuf[i] = shuf[j], shuf[j] = t;
    }
    pass(shards, seq, n); /* warm: page tables and caches as for the later passes */
    for (int r = 0; r < runs; r++) {
        const char *names[2] = {"memory probe (C), sequential", "memory probe (C), shuffled"};
        const Rec *orders[2] = {seq, shuf};
        for (int o = 0; o < 2; o++) {
            double t = now();
            uint64_t sink = pass(shards, orders[o], n);
            printf("{\"case\": \"%s\", \"records\": %llu, \"seconds\": %.6f, \"sink\": %llu}\n",
                   names[o], (unsigned long long)n, now() - t, (unsigned long long)sink);
        }
    }
    return 0;
}
