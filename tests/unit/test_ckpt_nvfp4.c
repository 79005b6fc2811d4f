/*
 * The NVFP4 weight view of lib/ckpt (nvfp4/ckpt_nvfp4.h) on checkpoints built here byte by
 * byte: decoded values worked out by hand from SPEC section 4's tables, and every malformation
 * the view rejects, with its status and the tensor named in the message.
 */
#include "check.h"

#include "nvfp4/checkpoint.h"
#include "nvfp4/ckpt_nvfp4.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"
#include "nvfp4/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct tdef {
    const char *name;
    nvf_dtype dtype;
    int32_t ndim;
    int64_t shape[3];
    const void *data; /* NULL: zeros */
} tdef;

#define MAX_DEFS 16
#define W        "model.layers.0.mlp.experts.0.gate_proj.weight"
#define F        "model.layers.0.mlp.experts.gate_up_proj"

static const char *const k_modelopt_config =
    "{\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\"}}";
static const char *const k_ct_config =
    "{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": "
    "\"nvfp4-pack-quantized\"}}";

static char g_root[256];
static int g_case;

/* Write DIR/model.safetensors of `defs` and DIR/config.json; @return the directory (static). */
static const char *write_ckpt(const tdef *defs, size_t n, const char *config) {
    static char dir[300];
    char p[400];
    snprintf(dir, sizeof dir, "%s/c%d", g_root, g_case++);
    mkdir(dir, 0755);
    nvf_st_entry entries[MAX_DEFS];
    const void *data[MAX_DEFS];
    void *bufs[MAX_DEFS];
    for (size_t i = 0; i < n; i++) {
        entries[i].name = defs[i].name;
        entries[i].dtype = defs[i].dtype;
        entries[i].ndim = defs[i].ndim;
        uint64_t numel = 1;
        for (int d = 0; d < defs[i].ndim; d++) {
            entries[i].shape[d] = defs[i].shape[d];
            numel *= (uint64_t)defs[i].shape[d];
        }
        uint64_t bytes = numel * nvf_dtype_bits(defs[i].dtype) / 8;
        bufs[i] = calloc(bytes ? bytes : 1, 1);
        if (defs[i].data && bufs[i])
            memcpy(bufs[i], defs[i].data, bytes);
        data[i] = bufs[i];
    }
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    int rc = nvf_st_write_file(p, entries, data, n);
    CHECK_MSG(rc == 0, "write %s: %s", p, nvf_error_last());
    for (size_t i = 0; i < n; i++)
        free(bufs[i]);
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(config, f);
        fclose(f);
    }
    return dir;
}

/* Open `dir` and view `weight` (slice `expert`): the status, and the view in *out. */
static int view_of(nvf_nvfp4_view *out, nvf_ckpt **ck, const char *dir, const char *weight,
                   int64_t expert) {
    *ck = NULL;
    int rc = nvf_ckpt_open(ck, dir);
    CHECK_MSG(rc == 0, "open %s: %s", dir, nvf_error_last());
    if (rc != 0)
        return rc;
    size_t i = nvf_ckpt_find_index(*ck, weight);
    CHECK_MSG(i != NVF_CKPT_NONE, "no tensor %s", weight);
    nvf_error_clear();
    return i == NVF_CKPT_NONE ? NVF_E_INVALID : nvf_ckpt_nvfp4_view(out, *ck, i, expert);
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/*
 * The base linear: [2, 32] (packed [2, 16], scales [2, 2]). Byte 0 = 0xa6: element 0 is code 6
 * (+4.0), element 1 code 0xa (sign, index 2: -1.0). Scale byte 0x7a: exponent 15 - 7 = 8,
 * mantissa 2/8: 256 * 1.25 = 320. Byte 17 (row 1, elements 2, 3) = 0x71: code 1 (+0.5) then
 * code 7 (+6.0), block scale [1][0] = 0x38 (exponent 7 - 7 = 0: 1.0). weight_scale_2 = 0.5.
 */
static uint8_t g_packed[32], g_scales[4];
static float g_ws2 = 0.5f, g_in = 2.0f;

static void base_linear(tdef *d, const char *wname, const char *sname, const char *s2name,
                        const char *inname) {
    memset(g_packed, 0, sizeof g_packed);
    g_packed[0] = 0xa6;
    g_packed[17] = 0x71;
    g_scales[0] = 0x7a;
    g_scales[1] = 0x38;
    g_scales[2] = 0x38;
    g_scales[3] = 0x00;
    d[0] = (tdef){wname, NVF_DTYPE_U8, 2, {2, 16}, g_packed};
    d[1] = (tdef){sname, NVF_DTYPE_F8_E4M3, 2, {2, 2}, g_scales};
    d[2] = (tdef){s2name, NVF_DTYPE_F32, 0, {0}, &g_ws2};
    d[3] = (tdef){inname, NVF_DTYPE_F32, 0, {0}, &g_in};
}

static void modelopt_linear(tdef *d) {
    base_linear(d, W, W "_scale", W "_scale_2",
                "model.layers.0.mlp.experts.0.gate_proj.input_scale");
}

static void test_decode(void) {
    tdef d[4];
    modelopt_linear(d);
    nvf_nvfp4_view v;
    nvf_ckpt *ck;
    int rc = view_of(&v, &ck, write_ckpt(d, 4, k_modelopt_config), W, -1);
    CHECK_MSG(rc == 0, "%s", nvf_error_last());
    if (rc == 0) {
        CHECK(v.format == NVF_CKPT_FORMAT_NVFP4_MODELOPT);
        CHECK(v.rows == 2 && v.cols == 32 && v.expert == -1);
        CHECK(v.decode_scale == 0.5f && v.input_scale == 2.0f);
        CHECK(nvf_nvfp4_view_code(&v, 0, 0) == 0x6);
        CHECK(nvf_nvfp4_view_code(&v, 0, 1) == 0xa);
        CHECK(nvf_nvfp4_view_code(&v, 1, 2) == 0x1 && nvf_nvfp4_view_code(&v, 1, 3) == 0x7);
        CHECK(nvf_nvfp4_view_scale(&v, 0, 15) == 0x7a && nvf_nvfp4_view_scale(&v, 0, 16) == 0x38);
        float row[32];
        nvf_nvfp4_view_dequant_row(row, &v, 0);
        CHECK_MSG(row[0] == 640.0f, "4 * 320 * 0.5 = %g", (double)row[0]);   /* 4 * 320 * 0.5 */
        CHECK_MSG(row[1] == -160.0f, "-1 * 320 * 0.5 = %g", (double)row[1]); /* -1 * 320 * 0.5 */
        CHECK(row[2] == 0.0f && row[16] == 0.0f);
        nvf_nvfp4_view_dequant_row(row, &v, 1);
        CHECK(row[2] == 0.25f && row[3] == 3.0f); /* 0.5 * 1 * 0.5, 6 * 1 * 0.5 */
        nvf_nvfp4_view r1;
        CHECK(nvf_nvfp4_view_rows(&r1, &v, 1, 1) == 0);
        CHECK(r1.rows == 1 && nvf_nvfp4_view_code(&r1, 0, 3) == 0x7);
        CHECK(nvf_nvfp4_view_rows(&r1, &v, 1, 2) == NVF_E_INVALID);
        CHECK(nvf_ckpt_nvfp4_view(&r1, ck, ck->n_tensors, -1) == NVF_E_INVALID);
        CHECK(nvf_ckpt_nvfp4_view(&r1, ck, nvf_ckpt_find_index(ck, W), 0) == NVF_E_SHAPE);
    }
    nvf_ckpt_close(ck);

    /* Without input_scale: 1.0. */
    nvf_ckpt *ck2;
    rc = view_of(&v, &ck2, write_ckpt(d, 3, k_modelopt_config), W, -1);
    CHECK(rc == 0 && v.input_scale == 1.0f);
    nvf_ckpt_close(ck2);
}

/* compressed-tensors: weight_global_scale 4 -> decode 0.25; input_global_scale 8 -> 0.125. */
static void test_ct(void) {
    static const char *const P = "model.layers.0.mlp.experts.0.gate_proj.";
    char wn[96], sn[96], gn[96], in[96];
    snprintf(wn, sizeof wn, "%sweight_packed", P);
    snprintf(sn, sizeof sn, "%sweight_scale", P);
    snprintf(gn, sizeof gn, "%sweight_global_scale", P);
    snprintf(in, sizeof in, "%sinput_global_scale", P);
    tdef d[4];
    base_linear(d, wn, sn, gn, in);
    static float gs = 4.0f, igs = 8.0f;
    d[2].data = &gs;
    d[2].ndim = 1;
    d[2].shape[0] = 1;
    d[3].data = &igs;
    nvf_nvfp4_view v;
    nvf_ckpt *ck;
    int rc = view_of(&v, &ck, write_ckpt(d, 4, k_ct_config), wn, -1);
    CHECK_MSG(rc == 0, "%s", nvf_error_last());
    if (rc == 0) {
        CHECK(v.format == NVF_CKPT_FORMAT_NVFP4_CT);
        CHECK(v.decode_scale == 0.25f && v.input_scale == 0.125f);
        float row[32];
        nvf_nvfp4_view_dequant_row(row, &v, 0);
        CHECK(row[0] == 320.0f && row[1] == -80.0f); /* 4 * 320 / 4, -1 * 320 / 4 */
    }
    nvf_ckpt_close(ck);
    /* A global scale of 0 has no reciprocal. */
    static float zero = 0.0f;
    d[2].data = &zero;
    rc = view_of(&v, &ck, write_ckpt(d, 4, k_ct_config), wn, -1);
    CHECK(rc == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), gn);
    nvf_ckpt_close(ck);
}

/* ModelOpt fused experts: [2, 4, 8] packed, [2, 4, 1] scales, weight_scale_2 [2] per expert. */
static void test_fused(void) {
    static uint8_t packed[64], scales[8];
    static float ws2[2] = {0.5f, 2.0f}, ins[1] = {3.0f};
    memset(packed, 0, sizeof packed);
    packed[32] = 0xa6; /* expert 1, row 0, elements 0 and 1 */
    for (int i = 0; i < 8; i++)
        scales[i] = 0x38;
    scales[4] = 0x7a; /* expert 1, row 0 */
    tdef d[] = {
        {F, NVF_DTYPE_U8, 3, {2, 4, 8}, packed},
        {F "_weight_scale", NVF_DTYPE_F8_E4M3, 3, {2, 4, 1}, scales},
        {F "_weight_scale_2", NVF_DTYPE_F32, 1, {2}, ws2},
        {F "_input_scale", NVF_DTYPE_F32, 0, {0}, ins},
    };
    nvf_nvfp4_view v;
    nvf_ckpt *ck;
    int rc = view_of(&v, &ck, write_ckpt(d, 4, k_modelopt_config), F, 1);
    CHECK_MSG(rc == 0, "%s", nvf_error_last());
    if (rc == 0) {
        CHECK(v.expert == 1 && v.rows == 4 && v.cols == 16);
        CHECK(v.decode_scale == 2.0f && v.input_scale == 3.0f);
        float row[16];
        nvf_nvfp4_view_dequant_row(row, &v, 0);
        CHECK(row[0] == 2560.0f && row[1] == -640.0f); /* 4 * 320 * 2, -1 * 320 * 2 */
        CHECK(nvf_ckpt_nvfp4_view(&v, ck, nvf_ckpt_find_index(ck, F), 2) == NVF_E_INVALID);
        CHECK(nvf_ckpt_nvfp4_view(&v, ck, nvf_ckpt_find_index(ck, F), -1) == NVF_E_SHAPE);
    }
    nvf_ckpt_close(ck);
    /* the dotted form of the same names (F.weight_scale of a fused F without ".weight") */
    tdef dotted[4];
    memcpy(dotted, d, sizeof dotted);
    dotted[1].name = F ".weight_scale";
    dotted[2].name = F ".weight_scale_2";
    dotted[3].name = F ".input_scale";
    rc = view_of(&v, &ck, write_ckpt(dotted, 4, k_modelopt_config), F, 1);
    CHECK_MSG(rc == 0, "%s", nvf_error_last());
    CHECK(rc != 0 || (v.decode_scale == 2.0f && v.input_scale == 3.0f));
    if (ck) {
        const nvf_ckpt_tensor *t = nvf_ckpt_find(ck, F);
        CHECK(t && t->scale != NVF_CKPT_NONE && t->scale_2 != NVF_CKPT_NONE &&
              t->input_scale != NVF_CKPT_NONE);
        CHECK(ck->n_warnings == 0);
    }
    nvf_ckpt_close(ck);
    /* weight_scale_2 of 3 elements for 2 experts */
    static float ws3[3] = {1, 1, 1};
    d[2].data = ws3;
    d[2].shape[0] = 3;
    rc = view_of(&v, &ck, write_ckpt(d, 4, k_modelopt_config), F, 0);
    CHECK(rc == NVF_E_SHAPE);
    CHECK_CONTAINS(nvf_error_last(), F "_weight_scale_2");
    nvf_ckpt_close(ck);
    /* a NaN block scale in expert 1 only: expert 0 reads, expert 1 is rejected */
    d[2].data = ws2;
    d[2].shape[0] = 2;
    scales[6] = 0x7F;
    rc = view_of(&v, &ck, write_ckpt(d, 4, k_modelopt_config), F, 0);
    CHECK(rc == 0);
    CHECK(nvf_ckpt_nvfp4_view(&v, ck, nvf_ckpt_find_index(ck, F), 1) == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), "[1, 2, 0] is 0x7f (NaN)");
    nvf_ckpt_close(ck);
}

/* One malformation: the view fails with `code` and a message holding `needle` and `tensor`. */
static void expect_bad(const tdef *d, size_t n, int code, const char *tensor, const char *needle) {
    nvf_nvfp4_view v;
    nvf_ckpt *ck;
    int rc = view_of(&v, &ck, write_ckpt(d, n, k_modelopt_config), W, -1);
    CHECK_MSG(rc == code, "%s: status %d, expected %d (%s)", needle, rc, code, nvf_error_last());
    CHECK_CONTAINS(nvf_error_last(), tensor);
    CHECK_CONTAINS(nvf_error_last(), needle);
    CHECK_CONTAINS(nvf_error_last(), "model.safetensors"); /* the file */
    nvf_ckpt_close(ck);
}

static void test_malformed(void) {
    tdef d[4];
    /* packed width 15: odd */
    modelopt_linear(d);
    d[0].shape[1] = 15;
    expect_bad(d, 4, NVF_E_SHAPE, W, "packed width 15");
    /* packed width 12: even, but not 16-value blocks */
    modelopt_linear(d);
    d[0].shape[1] = 12;
    expect_bad(d, 4, NVF_E_SHAPE, W, "not a multiple of 8");
    /* scale [2, 1] for 32 inputs */
    modelopt_linear(d);
    d[1].shape[1] = 1;
    expect_bad(d, 4, NVF_E_SHAPE, W "_scale", "must be [2, 2]");
    /* scale [1, 4]: the element count fits, the shape does not */
    modelopt_linear(d);
    d[1].shape[0] = 1;
    d[1].shape[1] = 4;
    expect_bad(d, 4, NVF_E_SHAPE, W "_scale", "has shape [1, 4]");
    /* scale dtype U8 */
    modelopt_linear(d);
    d[1].dtype = NVF_DTYPE_U8;
    expect_bad(d, 4, NVF_E_FORMAT, W "_scale", "expected F8_E4M3");
    /* missing weight_scale (keep weight_scale_2 so the format is still NVFP4) */
    modelopt_linear(d);
    d[1] = d[3];
    expect_bad(d, 3, NVF_E_FORMAT, W, "no block scale");
    /* missing weight_scale_2 */
    modelopt_linear(d);
    d[2] = d[3];
    expect_bad(d, 3, NVF_E_FORMAT, W, "no weight_scale_2");
    /* weight_scale_2: negative, zero, NaN, infinity */
    static const float bad[] = {-0.5f, 0.0f, NAN, INFINITY};
    static const char *const text[] = {"is -0.5 (0xbf000000)", "is 0 (0x00000000)", "(0x7fc00000)",
                                       "(0x7f800000)"};
    for (int i = 0; i < 4; i++) {
        modelopt_linear(d);
        d[2].data = &bad[i];
        expect_bad(d, 4, NVF_E_FORMAT, W "_scale_2", text[i]);
    }
    CHECK(bits(bad[2]) == 0x7fc00000u);
    /* input_scale of 0: loaders divide by it */
    static const float zero = 0.0f;
    modelopt_linear(d);
    d[3].data = &zero;
    expect_bad(d, 4, NVF_E_FORMAT, "gate_proj.input_scale", "must be finite and positive");
    /* weight_scale_2 of dtype BF16 */
    modelopt_linear(d);
    d[2].dtype = NVF_DTYPE_BF16;
    expect_bad(d, 4, NVF_E_FORMAT, W "_scale_2", "expected F32");
    /* block scale bytes: negative (sign bit, also -0) and the two NaNs, at [1, 1] */
    static const uint8_t bytes[] = {0xb8, 0x80, 0x7f, 0xff};
    static const char *const what[] = {"[1, 1] is 0xb8 (negative)", "[1, 1] is 0x80 (negative)",
                                       "[1, 1] is 0x7f (NaN)", "[1, 1] is 0xff (NaN)"};
    for (int i = 0; i < 4; i++) {
        modelopt_linear(d);
        g_scales[3] = bytes[i];
        expect_bad(d, 4, NVF_E_FORMAT, W "_scale", what[i]);
    }
    /* a weight that is not U8 */
    modelopt_linear(d);
    d[0].dtype = NVF_DTYPE_I8;
    expect_bad(d, 4, NVF_E_FORMAT, W, "dtype I8");
    /* not an NVFP4 checkpoint */
    tdef b = {W, NVF_DTYPE_BF16, 2, {2, 32}, NULL};
    nvf_nvfp4_view v;
    nvf_ckpt *ck;
    CHECK(view_of(&v, &ck, write_ckpt(&b, 1, "{}"), W, -1) == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), "not NVFP4");
    nvf_ckpt_close(ck);
}

/*
 * The two forms of one synthetic checkpoint (synth nvfp4 and nvfp4-ct) through the view: every
 * expert weight gives the same rows, the same decode scale bits (the CT one through its
 * reciprocal) and the same codes; gate and up share their decode scale.
 */
static void test_synth_forms(void) {
    char mo[400], ct[400];
    snprintf(mo, sizeof mo, "%s/synth_mo", g_root);
    snprintf(ct, sizeof ct, "%s/synth_ct", g_root);
    nvf_synth_options o;
    nvf_synth_options_init(&o);
    o.layers = 2;
    o.experts = 2;
    o.hidden = 64;
    o.moe_intermediate = 64;
    o.threads = 1;
    o.dtype = NVF_SYNTH_DTYPE_NVFP4;
    CHECK_MSG(nvf_synth_write(NULL, mo, &o) == 0, "%s", nvf_error_last());
    o.dtype = NVF_SYNTH_DTYPE_NVFP4_CT;
    CHECK_MSG(nvf_synth_write(NULL, ct, &o) == 0, "%s", nvf_error_last());
    nvf_ckpt *a = NULL, *b = NULL;
    CHECK(nvf_ckpt_open(&a, mo) == 0 && nvf_ckpt_open(&b, ct) == 0);
    size_t seen = 0;
    for (size_t i = 0; a && b && i < a->n_tensors; i++) {
        const char *name = a->tensors[i].st->name;
        nvf_ckpt_name n;
        nvf_ckpt_name_parse(&n, name, a->tensors[i].st->ndim);
        if (n.kind != NVF_NAME_EXPERT)
            continue;
        char ctname[256];
        CHECK(nvf_ckpt_ct_name(ctname, sizeof ctname, name) == 1);
        size_t j = nvf_ckpt_find_index(b, ctname);
        nvf_nvfp4_view va, vb;
        int ra = nvf_ckpt_nvfp4_view(&va, a, i, -1);
        int rb = j == NVF_CKPT_NONE ? NVF_E_INVALID : nvf_ckpt_nvfp4_view(&vb, b, j, -1);
        CHECK_MSG(ra == 0 && rb == 0, "%s: %d %d %s", name, ra, rb, nvf_error_last());
        if (ra != 0 || rb != 0)
            continue;
        seen++;
        CHECK(va.format == NVF_CKPT_FORMAT_NVFP4_MODELOPT && vb.format == NVF_CKPT_FORMAT_NVFP4_CT);
        CHECK_MSG(bits(va.decode_scale) == bits(vb.decode_scale), "%s: %08x vs %08x", name,
                  (unsigned)bits(va.decode_scale), (unsigned)bits(vb.decode_scale));
        CHECK(va.rows == vb.rows && va.cols == vb.cols && va.input_scale == vb.input_scale);
        float *ra_row = malloc((size_t)va.cols * sizeof *ra_row);
        float *rb_row = malloc((size_t)va.cols * sizeof *rb_row);
        for (int64_t r = 0; ra_row && rb_row && r < va.rows; r++) {
            nvf_nvfp4_view_dequant_row(ra_row, &va, r);
            nvf_nvfp4_view_dequant_row(rb_row, &vb, r);
            CHECK(memcmp(ra_row, rb_row, (size_t)va.cols * sizeof *ra_row) == 0);
        }
        free(ra_row);
        free(rb_row);
        if (n.proj == NVF_PROJ_GATE) {
            char up[256];
            snprintf(up, sizeof up, "%.*s%lld.up_proj.weight", (int)n.experts_len, name,
                     (long long)n.expert);
            nvf_nvfp4_view vu;
            CHECK(nvf_ckpt_nvfp4_view(&vu, a, nvf_ckpt_find_index(a, up), -1) == 0);
            CHECK(bits(vu.decode_scale) == bits(va.decode_scale));
        }
    }
    CHECK_EQ_U64(seen, 2 * 2 * 3);
    nvf_ckpt_close(a);
    nvf_ckpt_close(b);
}

static void rm_tree(const char *root) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
}

int main(void) {
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(g_root, sizeof g_root, "%s/test_ckpt_nvfp4.%d", base, (int)getpid());
    mkdir(g_root, 0755);
    test_decode();
    test_ct();
    test_fused();
    test_malformed();
    test_synth_forms();
    rm_tree(g_root);
    return check_summary("test_ckpt_nvfp4");
}
