/*
 * The small files of a synthetic checkpoint: generation config, tokenizer stub (byte-level BPE),
 * tokenizer config, special tokens map and README, each written atomically, and the summary
 * list of every file written.
 */
#include "synth_internal.h"

#include "io/json_build.h"
#include "nvfp4/fileio.h"
#include "nvfp4/status.h"
#include "nvfp4/version.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Special tokens of the tokenizer stub; ids follow the 256 byte-level tokens. */
static const char *const k_qwen3_specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
static const char *const k_deepseek_specials[] = {
    "<\xef\xbd\x9c"
    "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<\xef\xbd\x9c"
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"};

/* Summary ------------------------------------------------------------------------------------ */

int synth_summary_add(nvf_synth_summary *s, const char *name, uint64_t bytes) {
    nvf_synth_file *f = realloc(s->files, (s->n_files + 1) * sizeof *f);
    if (!f)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the synth summary");
    s->files = f;
    f[s->n_files].name = strdup(name);
    if (!f[s->n_files].name)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the synth summary");
    f[s->n_files].bytes = bytes;
    s->n_files++;
    s->file_bytes += bytes;
    return NVF_OK;
}

void nvf_synth_summary_free(nvf_synth_summary *s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->n_files; i++)
        free(s->files[i].name);
    free(s->files);
    memset(s, 0, sizeof *s);
}

/* Side files --------------------------------------------------------------------------------- */

int synth_write_text(nvf_synth_summary *sum, const char *dst, const char *name, const char *text) {
    if (!text)
        return nvf_error_set(NVF_E_NOMEM, "no memory for '%s'", name);
    char *path = nvf_path_join(dst, name);
    if (!path)
        return nvf_error_set(NVF_E_NOMEM, "no memory for '%s'", name);
    size_t len = strlen(text);
    int rc = nvf_file_write_atomic(path, text, len);
    free(path);
    return rc == NVF_OK ? synth_summary_add(sum, name, len) : rc;
}

/* Write a JSON object (consumed) followed by a newline. */
static int write_json(nvf_synth_summary *sum, const char *dst, const char *name, cJSON *obj) {
    char *text = obj ? cJSON_Print(obj) : NULL;
    cJSON_Delete(obj);
    char *line = NULL;
    if (text && (line = malloc(strlen(text) + 2)) != NULL)
        sprintf(line, "%s\n", text);
    free(text);
    int rc = synth_write_text(sum, dst, name, line);
    free(line);
    return rc;
}

/* The GPT-2 byte-level alphabet: byte b as the code point the ByteLevel pre-tokenizer uses
 * (printable Latin-1 bytes map to themselves, the others to 256, 257, ... in order). */
static void byte_level_char(char out[3], int b) {
    int cp = b, n = 0;
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    if (!printable) {
        for (int k = 0; k < b; k++)
            n += !((k >= 33 && k <= 126) || (k >= 161 && k <= 172) || (k >= 174 && k <= 255));
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = '\0';
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = '\0';
    }
}

static cJSON *byte_level(nvf_jb *b) {
    cJSON *o = nvf_jb_take(b, cJSON_CreateObject());
    nvf_jb_bool(b, o, "add_prefix_space", 0);
    nvf_jb_bool(b, o, "trim_offsets", 1);
    nvf_jb_bool(b, o, "use_regex", 1);
    nvf_jb_str(b, o, "type", "ByteLevel");
    return o;
}

/* A minimal but loadable tokenizers-library file: byte-level BPE without merges. */
static cJSON *tokenizer_json(const char *const *specials, size_t n) {
    nvf_jb b = {0};
    cJSON *t = nvf_jb_take(&b, cJSON_CreateObject());
    nvf_jb_str(&b, t, "version", "1.0");
    nvf_jb_null(&b, t, "truncation");
    nvf_jb_null(&b, t, "padding");
    cJSON *added = nvf_jb_arr(&b, t, "added_tokens");
    for (size_t i = 0; added && i < n; i++) {
        cJSON *a = nvf_jb_take(&b, cJSON_CreateObject());
        nvf_jb_num(&b, a, "id", (double)(256 + i));
        nvf_jb_str(&b, a, "content", specials[i]);
        nvf_jb_bool(&b, a, "single_word", 0);
        nvf_jb_bool(&b, a, "lstrip", 0);
        nvf_jb_bool(&b, a, "rstrip", 0);
        nvf_jb_bool(&b, a, "normalized", 0);
        nvf_jb_bool(&b, a, "special", 1);
        nvf_jb_push(&b, added, a);
    }
    nvf_jb_null(&b, t, "normalizer");
    nvf_jb_put(&b, t, "pre_tokenizer", byte_level(&b));
    nvf_jb_null(&b, t, "post_processor");
    nvf_jb_put(&b, t, "decoder", byte_level(&b));
    cJSON *m = nvf_jb_obj(&b, t, "model");
    nvf_jb_str(&b, m, "type", "BPE");
    nvf_jb_null(&b, m, "dropout");
    nvf_jb_null(&b, m, "unk_token");
    nvf_jb_null(&b, m, "continuing_subword_prefix");
    nvf_jb_null(&b, m, "end_of_word_suffix");
    nvf_jb_bool(&b, m, "fuse_unk", 0);
    nvf_jb_bool(&b, m, "byte_fallback", 0);
    cJSON *vocab = nvf_jb_obj(&b, m, "vocab");
    for (int v = 0; vocab && v < 256; v++) {
        char ch[3];
        byte_level_char(ch, v);
        nvf_jb_num(&b, vocab, ch, v);
    }
    for (size_t i = 0; vocab && i < n; i++)
        nvf_jb_num(&b, vocab, specials[i], (double)(256 + i));
    nvf_jb_arr(&b, m, "merges");
    return nvf_jb_done(&b, t);
}

static cJSON *generation_config(int ds) {
    nvf_jb b = {0};
    cJSON *g = nvf_jb_take(&b, cJSON_CreateObject());
    nvf_jb_num(&b, g, "bos_token_id", 256);
    nvf_jb_bool(&b, g, "do_sample", 1);
    if (ds) {
        nvf_jb_num(&b, g, "eos_token_id", 257);
        nvf_jb_num(&b, g, "temperature", 0.6);
        nvf_jb_num(&b, g, "top_p", 0.95);
        nvf_jb_str(&b, g, "transformers_version", "4.46.3");
    } else {
        const int eos_ids[2] = {258, 256};
        nvf_jb_put(&b, g, "eos_token_id", cJSON_CreateIntArray(eos_ids, 2));
        nvf_jb_num(&b, g, "pad_token_id", 256);
        nvf_jb_num(&b, g, "temperature", 0.6);
        nvf_jb_num(&b, g, "top_k", 20);
        nvf_jb_num(&b, g, "top_p", 0.95);
        nvf_jb_str(&b, g, "transformers_version", "4.51.0");
    }
    return nvf_jb_done(&b, g);
}

static cJSON *tokenizer_config(int ds, const char *const *sp, const char *eos) {
    nvf_jb b = {0};
    cJSON *tc = nvf_jb_take(&b, cJSON_CreateObject());
    nvf_jb_bool(&b, tc, "add_bos_token", ds);
    nvf_jb_bool(&b, tc, "add_eos_token", 0);
    if (ds)
        nvf_jb_str(&b, tc, "bos_token", sp[0]);
    else
        nvf_jb_null(&b, tc, "bos_token");
    nvf_jb_str(&b, tc, "eos_token", eos);
    nvf_jb_num(&b, tc, "model_max_length", ds ? 163840 : 40960);
    nvf_jb_str(&b, tc, "pad_token", ds ? eos : sp[0]);
    nvf_jb_str(&b, tc, "tokenizer_class", ds ? "LlamaTokenizerFast" : "Qwen2Tokenizer");
    return nvf_jb_done(&b, tc);
}

static cJSON *special_tokens_map(int ds, const char *const *sp, const char *eos) {
    nvf_jb b = {0};
    cJSON *st = nvf_jb_take(&b, cJSON_CreateObject());
    if (ds)
        nvf_jb_str(&b, st, "bos_token", sp[0]);
    nvf_jb_str(&b, st, "eos_token", eos);
    nvf_jb_str(&b, st, "pad_token", ds ? eos : sp[0]);
    return nvf_jb_done(&b, st);
}

int synth_write_side_files(nvf_synth_summary *sum, const nvf_synth_plan *p, const char *dst,
                           nvf_synth_dtype shown) {
    int ds = p->opt.preset == NVF_SYNTH_PRESET_DEEPSEEK_V3;
    const char *const *sp = ds ? k_deepseek_specials : k_qwen3_specials;
    size_t nsp = ds ? 2 : 3;
    const char *eos = ds ? sp[1] : sp[2];
    int rc;
    if ((rc = write_json(sum, dst, "generation_config.json", generation_config(ds))) != NVF_OK)
        return rc;
    if ((rc = write_json(sum, dst, "tokenizer.json", tokenizer_json(sp, nsp))) != NVF_OK)
        return rc;
    if ((rc = write_json(sum, dst, "tokenizer_config.json", tokenizer_config(ds, sp, eos))) !=
        NVF_OK)
        return rc;
    if ((rc = write_json(sum, dst, "special_tokens_map.json", special_tokens_map(ds, sp, eos))) !=
        NVF_OK)
        return rc;

    const nvf_synth_options *o = &p->opt;
    int nvfp4 = shown != o->dtype;
    char readme[2048];
    snprintf(readme, sizeof readme,
             "# Synthetic %s checkpoint (%s)\n\n"
             "Random weights written by `nvfp4tool synth` %s for tests and demos: the layout,\n"
             "names, shapes and config of a real checkpoint, but **not a trained model**.\n\n"
             "Reproduce byte for byte with:\n\n"
             "    nvfp4tool synth DST --preset %s --dtype %s%s --seed %llu --layers %lld \\\n"
             "        --experts %lld --hidden %lld --intermediate %lld --moe-intermediate %lld \\\n"
             "        --max-shard-size %llu%s\n\n"
             "%s%u shards, %zu tensors, %llu bytes of tensor data.\n",
             nvf_synth_preset_name(o->preset), nvf_synth_dtype_name(shown), nvf_version(),
             nvf_synth_preset_name(o->preset), nvf_synth_dtype_name(shown),
             o->scale_fmt == NVF_SYNTH_SCALE_UE8M0 ? " --scale-fmt ue8m0" : "",
             (unsigned long long)o->seed, (long long)o->layers, (long long)o->experts,
             (long long)o->hidden, (long long)o->intermediate, (long long)o->moe_intermediate,
             (unsigned long long)p->max_shard_size, o->fused_experts ? " --fused-experts" : "",
             nvfp4 ? "The NVFP4 tensors are `nvfp4tool convert` (default recipe) of the bf16\n"
                     "checkpoint of the same options, which had "
                   : "",
             p->n_shards, p->n_tensors, (unsigned long long)p->total_size);
    return synth_write_text(sum, dst, "README.md", readme);
}
