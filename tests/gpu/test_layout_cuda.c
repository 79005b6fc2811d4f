/*
 * The CUDA backend's layout operation against the CPU backend's (nvf_backend_layout), byte for
 * byte: every pair of layouts (linear, 128x4, 8x4, both ways and onto themselves) on random
 * bytes (the source's padding random too: never read), awkward shapes (rows 1, 127, 128, 129,
 * 263; kcols 1, 3, 4, 5, 9, 15), n = 1..3 matrices, destinations filled with different garbage
 * beforehand (every byte must be written); the default staging chunk, a 4 KiB one (one matrix
 * per chunk, a matrix larger than the chunk) and a 64 KiB one (several matrices per chunk, a
 * short last chunk); then the MoE-sized case of 256 experts x 4096 rows x 448 scale columns
 * (H = 7168) to 128x4 and back, and an awkward 37 x 1000 x 129 through every pair. The first
 * mismatching bytes are printed in hex (at most 10). Exit 77 (skip) without a GPU.
 */
#include "check.h"

#include "nvfp4/backend.h"
#include "nvfp4/device.h"
#include "nvfp4/layout.h"
#include "nvfp4/status.h"

#include <stdlib.h>

#define SEED 0xD1B54A32D192ED03ull

static uint64_t g_rng = SEED;
static nvf_backend *g_cpu, *g_gpu;
static int g_shown;

static const nvf_layout k_layouts[] = {NVF_LAYOUT_LINEAR, NVF_LAYOUT_128X4, NVF_LAYOUT_8X4};

static void fill(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        g_rng ^= g_rng << 13;
        g_rng ^= g_rng >> 7;
        g_rng ^= g_rng << 17;
        p[i] = (uint8_t)(g_rng >> 32);
    }
}

/* Both backends on the same source; the outputs compared byte for byte. */
static void compare(nvf_layout from, nvf_layout to, int64_t rows, int64_t kcols, size_t n,
                    const uint8_t *src) {
    size_t db = (size_t)nvf_layout_bytes(to, rows, kcols) * n;
    uint8_t *a = malloc(db ? db : 1), *b = malloc(db ? db : 1);
    if (!a || !b) {
        CHECK_MSG(0, "no memory for %zu bytes", db);
        free(a);
        free(b);
        return;
    }
    memset(a, 0xAA, db);
    memset(b, 0x55, db);
    int rc = nvf_backend_layout(g_cpu, a, to, src, from, rows, kcols, n);
    CHECK_MSG(rc == 0, "cpu: %s", nvf_error_last());
    int rg = nvf_backend_layout(g_gpu, b, to, src, from, rows, kcols, n);
    CHECK_MSG(rg == 0, "cuda: %s", nvf_error_last());
    int same = rc == 0 && rg == 0 && memcmp(a, b, db) == 0;
    CHECK_MSG(same, "%s -> %s, %zu x %lldx%lld", nvf_layout_name(from), nvf_layout_name(to), n,
              (long long)rows, (long long)kcols);
    for (size_t i = 0; !same && i < db && g_shown < 10; i++)
        if (a[i] != b[i]) {
            size_t per = db / n;
            int64_t m, k;
            nvf_layout_coord(to, (int64_t)(i % per), kcols, &m, &k);
            fprintf(stderr, "  matrix %zu byte %zu (m %lld, k %lld): cpu %02x cuda %02x\n", i / per,
                    i % per, (long long)m, (long long)k, a[i], b[i]);
            g_shown++;
        }
    free(a);
    free(b);
}

/* Every pair of layouts on `n` random matrices of rows x kcols. */
static void all_pairs(int64_t rows, int64_t kcols, size_t n) {
    for (size_t f = 0; f < 3; f++) {
        size_t sb = (size_t)nvf_layout_bytes(k_layouts[f], rows, kcols) * n;
        uint8_t *src = malloc(sb);
        if (!src) {
            CHECK_MSG(0, "no memory for %zu bytes", sb);
            return;
        }
        fill(src, sb);
        for (size_t t = 0; t < 3; t++)
            compare(k_layouts[f], k_layouts[t], rows, kcols, n, src);
        free(src);
    }
}

static void small_cases(void) {
    static const int64_t rows[] = {1, 127, 128, 129, 263};
    static const int64_t kcols[] = {1, 3, 4, 5, 9, 15};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        for (size_t c = 0; c < sizeof kcols / sizeof kcols[0]; c++)
            for (size_t n = 1; n <= 3; n++)
                all_pairs(rows[r], kcols[c], n);
}

/* 256 experts of a 4096-row, H = 7168 projection (448 scale columns): linear -> 128x4 -> linear
 * (471 MB each way, many default chunks) and the CUDA round trip equal to the source. */
static void moe_case(void) {
    const int64_t rows = 4096, kcols = 448;
    const size_t n = 256, bytes = (size_t)(rows * kcols) * n;
    uint8_t *lin = malloc(bytes), *cpu = malloc(bytes), *gpu = malloc(bytes);
    if (!lin || !cpu || !gpu) {
        printf("test_layout_cuda: no host memory for the MoE case, skipped\n");
        goto done;
    }
    fill(lin, bytes);
    CHECK(nvf_backend_layout(g_cpu, cpu, NVF_LAYOUT_128X4, lin, NVF_LAYOUT_LINEAR, rows, kcols,
                             n) == 0);
    CHECK(nvf_backend_layout(g_gpu, gpu, NVF_LAYOUT_128X4, lin, NVF_LAYOUT_LINEAR, rows, kcols,
                             n) == 0);
    CHECK_MSG(memcmp(cpu, gpu, bytes) == 0, "256 x 4096x448 linear -> 128x4");
    CHECK(nvf_backend_layout(g_gpu, cpu, NVF_LAYOUT_LINEAR, gpu, NVF_LAYOUT_128X4, rows, kcols,
                             n) == 0);
    CHECK_MSG(memcmp(cpu, lin, bytes) == 0, "256 x 4096x448 128x4 -> linear on the GPU");
done:
    free(lin);
    free(cpu);
    free(gpu);
}

int main(void) {
    if (nvf_cuda_device_count() == 0) {
        printf("test_layout_cuda: no CUDA device, skipped\n");
        return 77;
    }
    nvf_device cpu, gpu;
    CHECK(nvf_device_select(&cpu, "cpu") == 0);
    CHECK(nvf_device_select(&gpu, "cuda:0") == 0);
    int rc = nvf_backend_open(&g_cpu, &cpu, 0);
    CHECK_MSG(rc == 0, "open cpu: %s", nvf_error_last());
    int rg = nvf_backend_open(&g_gpu, &gpu, 0);
    CHECK_MSG(rg == 0, "open cuda:0: %s", nvf_error_last());
    if (rc != 0 || rg != 0)
        return check_summary("test_layout_cuda");
    printf("test_layout_cuda: seed 0x%016llx\n", (unsigned long long)SEED);
    const size_t chunks[] = {0, 4096, 65536};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        printf("chunk %zu\n", chunks[k]);
        CHECK(nvf_backend_set_config(g_gpu, -1, chunks[k]) == 0);
        small_cases();
        all_pairs(1000, 129, 37);
    }
    CHECK(nvf_backend_set_config(g_gpu, -1, 0) == 0);
    moe_case();
    nvf_backend_close(g_gpu);
    nvf_backend_close(g_cpu);
    return check_summary("test_layout_cuda");
}
