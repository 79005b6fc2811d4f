/*
 * The small files of a synthetic checkpoint: generation config, tokenizer stub (byte-level BPE),
 * tokenizer config, special tokens map and README, each written atomically, and the summary
 * list of every file written.
 */
#include "synth_internal.h"

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

static cJSON *byte_level(void) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "add_prefix_space", 0);
    cJSON_AddBoolToObject(o, "trim_offsets", 1);
    cJSON_AddBoolToObject(o, "use_regex", 1);
    cJSON_AddStringToObject(o, "type", "ByteLevel");
    return o;
}

/* A minimal but loadable tokenizers-library file: byte-level BPE without merges. */
static cJSON *tokenizer_json(const char *const *specials, size_t n) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "version", "1.0");
    cJSON_AddNullToObject(t, "truncation");
    cJSON_AddNullToObject(t, "padding");
    cJSON *added = cJSON_AddArrayToObject(t, "added_tokens");
    for (size_t i = 0; added && i < n; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", (double)(256 + i));
        cJSON_AddStringToObject(a, "content", specials[i]);
        cJSON_AddBoolToObject(a, "single_word", 0);
        cJSON_AddBoolToObject(a, "lstrip", 0);
        cJSON_AddBoolToObject(a, "rstrip", 0);
        cJSON_AddBoolToObject(a, "normalized", 0);
        cJSON_AddBoolToObject(a, "special", 1);
        cJSON_AddItemToArray(added, a);
    }
    cJSON_AddNullToObject(t, "normalizer");
    cJSON_AddItemToObject(t, "pre_tokenizer", byte_level());
    cJSON_AddNullToObject(t, "post_processor");
    cJSON_AddItemToObject(t, "decoder", byte_level());
    cJSON *m = cJSON_AddObjectToObject(t, "model");
    if (m) {
        cJSON_AddStringToObject(m, "type", "BPE");
        cJSON_AddNullToObject(m, "dropout");
        cJSON_AddNullToObject(m, "unk_token");
        cJSON_AddNullToObject(m, "continuing_subword_prefix");
        cJSON_AddNullToObject(m, "end_of_word_suffix");
        cJSON_AddBoolToObject(m, "fuse_unk", 0);
        cJSON_AddBoolToObject(m, "byte_fallback", 0);
        cJSON *vocab = cJSON_AddObjectToObject(m, "vocab");
        for (int b = 0; vocab && b < 256; b++) {
            char ch[3];
            byte_level_char(ch, b);
            cJSON_AddNumberToObject(vocab, ch, b);
        }
        for (size_t i = 0; vocab && i < n; i++)
            cJSON_AddNumberToObject(vocab, specials[i], (double)(256 + i));
        cJSON_AddArrayToObject(m, "merges");
    }
    return t;
}

int synth_write_side_files(nvf_synth_summary *sum, const nvf_synth_plan *p, const char *dst) {
    int ds = p->opt.preset == NVF_SYNTH_PRESET_DEEPSEEK_V3;
    const char *const *sp = ds ? k_deepseek_specials : k_qwen3_specials;
    size_t nsp = ds ? 2 : 3;
    const char *eos = ds ? sp[1] : sp[2];
    int rc;

    cJSON *g = cJSON_CreateObject();
    cJSON_AddNumberToObject(g, "bos_token_id", 256);
    cJSON_AddBoolToObject(g, "do_sample", 1);
    if (ds) {
        cJSON_AddNumberToObject(g, "eos_token_id", 257);
        cJSON_AddNumberToObject(g, "temperature", 0.6);
        cJSON_AddNumberToObject(g, "top_p", 0.95);
        cJSON_AddStringToObject(g, "transformers_version", "4.46.3");
    } else {
        const int eos_ids[2] = {258, 256};
        cJSON_AddItemToObject(g, "eos_token_id", cJSON_CreateIntArray(eos_ids, 2));
        cJSON_AddNumberToObject(g, "pad_token_id", 256);
        cJSON_AddNumberToObject(g, "temperature", 0.6);
        cJSON_AddNumberToObject(g, "top_k", 20);
        cJSON_AddNumberToObject(g, "top_p", 0.95);
        cJSON_AddStringToObject(g, "transformers_version", "4.51.0");
    }
    if ((rc = write_json(sum, dst, "generation_config.json", g)) != NVF_OK)
        return rc;
    if ((rc = write_json(sum, dst, "tokenizer.json", tokenizer_json(sp, nsp))) != NVF_OK)
        return rc;

    cJSON *tc = cJSON_CreateObject();
    cJSON_AddBoolToObject(tc, "add_bos_token", ds);
    cJSON_AddBoolToObject(tc, "add_eos_token", 0);
    if (ds)
        cJSON_AddStringToObject(tc, "bos_token", sp[0]);
    else
        cJSON_AddNullToObject(tc, "bos_token");
    cJSON_AddStringToObject(tc, "eos_token", eos);
    cJSON_AddNumberToObject(tc, "model_max_length", ds ? 163840 : 40960);
    cJSON_AddStringToObject(tc, "pad_token", ds ? eos : sp[0]);
    cJSON_AddStringToObject(tc, "tokenizer_class", ds ? "LlamaTokenizerFast" : "Qwen2Tokenizer");
    if ((rc = write_json(sum, dst, "tokenizer_config.json", tc)) != NVF_OK)
        return rc;

    cJSON *st = cJSON_CreateObject();
    if (ds)
        cJSON_AddStringToObject(st, "bos_token", sp[0]);
    cJSON_AddStringToObject(st, "eos_token", eos);
    cJSON_AddStringToObject(st, "pad_token", ds ? eos : sp[0]);
    if ((rc = write_json(sum, dst, "special_tokens_map.json", st)) != NVF_OK)
        return rc;

    const nvf_synth_options *o = &p->opt;
    char readme[2048];
    snprintf(readme, sizeof readme,
             "# Synthetic %s checkpoint (%s)\n\n"
             "Random weights written by `nvfp4tool synth` %s for tests and demos: the layout,\n"
             "names, shapes and config of a real checkpoint, but **not a trained model**.\n\n"
             "Reproduce byte for byte with:\n\n"
             "    nvfp4tool synth DST --preset %s --dtype %s%s --seed %llu --layers %lld \\\n"
             "        --experts %lld --hidden %lld --intermediate %lld --moe-intermediate %lld \\\n"
             "        --max-shard-size %llu%s\n\n"
             "%u shards, %zu tensors, %llu bytes of tensor data.\n",
             nvf_synth_preset_name(o->preset), nvf_synth_dtype_name(o->dtype), nvf_version(),
             nvf_synth_preset_name(o->preset), nvf_synth_dtype_name(o->dtype),
             o->scale_fmt == NVF_SYNTH_SCALE_UE8M0 ? " --scale-fmt ue8m0" : "",
             (unsigned long long)o->seed, (long long)o->layers, (long long)o->experts,
             (long long)o->hidden, (long long)o->intermediate, (long long)o->moe_intermediate,
             (unsigned long long)p->max_shard_size, o->fused_experts ? " --fused-experts" : "",
             p->n_shards, p->n_tensors, (unsigned long long)p->total_size);
    return synth_write_text(sum, dst, "README.md", readme);
}
