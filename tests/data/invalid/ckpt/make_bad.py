#!/usr/bin/env python3
"""Builds the known-bad checkpoint directories of cases.tsv (stdlib + json only).

    python3 make_bad.py --tool NVFP4TOOL OUT [CASE ...]

Writes the good base checkpoints with the tool (OUT/bases/NAME: `synth`, `convert`; built once,
kept when present), then every case of cases.tsv (or only the CASEs named) as OUT/CASE: a copy
of its base with one defect made by this script's own safetensors reader/writer or JSON edits.
Each edit reads its result back and asserts the defect is there (so a case that does not hold
what its name says fails here, not in validate). The table's `manifest` column says what
happens to nvfp4-manifest.json afterwards: keep (as the base had it: the case is about the
manifest, or the defect breaks hashing), rehash (`nvfp4tool hash CASE` rewrites it, so only the
case's own finding shows), drop (removed). Prints one line per case: NAME<TAB>PATH<TAB>NAMED,
NAMED being the tensor, file or module the defect is in (what validate's finding must name;
"-" when no one thing).
"""
import json
import os
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2,
               "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
F32_NAN, F32_INF = struct.pack("<I", 0x7FC00000), struct.pack("<I", 0x7F800000)
INDEX = "model.safetensors.index.json"
MANIFEST = "nvfp4-manifest.json"

# Base checkpoints: small (hidden 64, 4 experts of I=64, 2 layers: ~0.5 MB each).
DIMS = ["--hidden", "64", "--moe-intermediate", "64", "--experts", "4"]
SIZE = ["--preset", "qwen3-moe", "--layers", "2"] + DIMS
RUN = ["--threads", "1", "--quiet"]
CONV = ["--device", "cpu"] + RUN


def base_commands(tool, out):
    """name -> list of argv lists that build OUT/bases/name (sources first)."""
    b = os.path.join(out, "bases")
    src_bf, src_f8 = os.path.join(b, "src-bf16"), os.path.join(b, "src-fp8")
    synth = [tool, "synth"]
    return {
        "src-bf16": [synth + [src_bf] + SIZE + ["--dtype", "bf16"] + RUN],
        "src-fp8": [synth + [src_f8] + SIZE + ["--dtype", "fp8-block"] + RUN],
        # a ModelOpt NVFP4 checkpoint as a third party ships it (one shard)
        "nv": [synth + [os.path.join(b, "nv")] + SIZE + ["--dtype", "nvfp4"] + RUN],
        # DeepSeek-V3 naming: n_routed_experts, a dense first layer, shared experts
        "ds": [synth + [os.path.join(b, "ds"), "--preset", "deepseek-v3", "--layers", "3"] + DIMS
               + ["--dtype", "nvfp4"] + RUN],
        # compressed-tensors NVFP4 (no manifest)
        "ct": [synth + [os.path.join(b, "ct")] + SIZE + ["--dtype", "nvfp4-ct"] + RUN],
        # convert of an FP8-block source into 4 shards, with manifest
        "cv": [[tool, "convert", src_f8, os.path.join(b, "cv"), "--max-shard-size", "200KB"]
               + CONV],
        # FP8 kept outside the experts: quant_algo MIXED_PRECISION with quantized_layers
        "mx": [[tool, "convert", src_f8, os.path.join(b, "mx"), "--keep-source-precision"]
               + CONV],
        # convert with q/k/v converted too (they share one global scale)
        "cva": [[tool, "convert", src_bf, os.path.join(b, "cva"), "--include", "*.mlp.experts.*",
                 "--include", "*.self_attn.[qkv]_proj.*"] + CONV],
        # prepared ranks
        "pr": [[tool, "convert", src_bf, os.path.join(b, "pr"), "--target", "prepared-w4a16",
                "--ep", "2"] + CONV],
    }


BASE_NEEDS = {"cv": ["src-fp8"], "mx": ["src-fp8"], "cva": ["src-bf16"], "pr": ["src-bf16"]}
BASE_DIR_ALIAS = {"bf": "src-bf16", "fp8": "src-fp8"}  # sources are good bases too (no manifest)


def build_base(tool, out, name, done):
    name = BASE_DIR_ALIAS.get(name, name)
    if name in done:
        return os.path.join(out, "bases", name)
    for dep in BASE_NEEDS.get(name, []):
        build_base(tool, out, dep, done)
    path = os.path.join(out, "bases", name)
    if not os.path.exists(os.path.join(path, "config.json")):
        shutil.rmtree(path, ignore_errors=True)
        for argv in base_commands(tool, out)[name]:
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    done.add(name)
    return path


# safetensors ------------------------------------------------------------------------------------
def no_dup_pairs(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), "duplicate keys %r" % keys
    return dict(pairs)


class St:
    """A parsed safetensors file: meta (dict or None) and tensors name -> [dtype, shape, bytes],
    in data order."""

    def __init__(self, path):
        with open(path, "rb") as f:
            blob = f.read()
        n = struct.unpack("<Q", blob[:8])[0]
        assert 8 + n <= len(blob), path
        hdr = json.loads(blob[8:8 + n].decode("utf-8"), object_pairs_hook=no_dup_pairs)
        self.meta = hdr.pop("__metadata__", None)
        data = blob[8 + n:]
        ents = sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"][0])
        self.tensors = {}
        pos = 0
        for name, e in ents:
            b, end = e["data_offsets"]
            assert b == pos and end <= len(data), (path, name)
            count = 1
            for d in e["shape"]:
                count *= d
            assert end - b == count * DTYPE_BYTES[e["dtype"]], (path, name)
            self.tensors[name] = [e["dtype"], list(e["shape"]), data[b:end]]
            pos = end
        assert pos == len(data), "%s: %d trailing bytes" % (path, len(data) - pos)
        self.data_start = 8 + n
        self.offsets = {name: e["data_offsets"][0] for name, e in ents}

    def write(self, path):
        hdr = {}
        if self.meta is not None:
            hdr["__metadata__"] = self.meta
        pos = 0
        for name, (dtype, shape, data) in self.tensors.items():
            hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + len(data)]}
            pos += len(data)
        text = json.dumps(hdr, separators=(",", ":")).encode("utf-8")
        text += b" " * (-(8 + len(text)) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text)
            for _, _, data in self.tensors.values():
                f.write(data)


# checkpoint helpers ----------------------------------------------------------------------------
def rjson(path):
    with open(path) as f:
        return json.load(f, object_pairs_hook=no_dup_pairs)


def wjson(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def index(d):
    return rjson(os.path.join(d, INDEX))


def shard_of(d, name):
    return os.path.join(d, index(d)["weight_map"][name])


def read_tensor(d, name):
    return St(shard_of(d, name)).tensors[name]


def patch(d, name, at, new):
    """Overwrite bytes of tensor NAME in place, from byte AT of its data."""
    path = shard_of(d, name)
    st = St(path)
    assert at + len(new) <= len(st.tensors[name][2])
    with open(path, "r+b") as f:
        f.seek(st.data_start + st.offsets[name] + at)
        f.write(new)
    assert St(path).tensors[name][2][at:at + len(new)] == new


def f32(d, name):
    dtype, shape, data = read_tensor(d, name)
    assert dtype == "F32" and shape == [], (name, dtype, shape)
    return struct.unpack("<f", data)[0]


def set_f32(d, name, value_bytes):
    patch(d, name, 0, value_bytes)


def rewrite(d, name, dtype=None, shape=None, data=None):
    """Give tensor NAME another dtype / shape / data (its shard rewritten, the index's
    total_size kept right)."""
    path = shard_of(d, name)
    st = St(path)
    t = st.tensors[name]
    st.tensors[name] = [dtype or t[0], t[1] if shape is None else shape,
                        t[2] if data is None else data]
    st.write(path)
    back = St(path).tensors[name]
    assert back == st.tensors[name]
    if len(back[2]) != len(t[2]):
        edit_json(os.path.join(d, INDEX), lambda i: i["metadata"].__setitem__(
            "total_size", i["metadata"]["total_size"] + len(back[2]) - len(t[2])))
    assert index(d)["metadata"]["total_size"] == all_tensor_bytes(d)


def remove(d, names, fix_index=True):
    """Delete tensors from their shards and (fix_index) from the index, total_size adjusted."""
    idx = index(d)
    for name in names:
        path = os.path.join(d, idx["weight_map"][name])
        st = St(path)
        dropped = st.tensors.pop(name)
        st.write(path)
        if fix_index:
            del idx["weight_map"][name]
            idx["metadata"]["total_size"] -= len(dropped[2])
    if fix_index:
        wjson(os.path.join(d, INDEX), idx)
    for name in names:
        assert all(name not in St(os.path.join(d, s)).tensors
                   for s in set(idx["weight_map"].values()))
    if fix_index:
        assert index(d)["metadata"]["total_size"] == all_tensor_bytes(d)


def all_tensor_bytes(d):
    idx = index(d)
    return sum(len(t[2]) for s in set(idx["weight_map"].values())
               for t in St(os.path.join(d, s)).tensors.values())


def edit_json(path, fn):
    obj = rjson(path)
    fn(obj)
    wjson(path, obj)
    return rjson(path)


def expert(layer, e, proj, what):
    return "model.layers.%d.mlp.experts.%d.%s_proj.%s" % (layer, e, proj, what)


def quant_configs(d, fn):
    """Apply fn(qc) to config.json's quantization_config and hf_quant_config's quantization."""
    c = edit_json(os.path.join(d, "config.json"), lambda c: fn(c["quantization_config"], "config"))
    h = edit_json(os.path.join(d, "hf_quant_config.json"), lambda h: fn(h["quantization"], "hf"))
    return c["quantization_config"], h["quantization"]


def shards(d):
    return sorted(set(index(d)["weight_map"].values()))


# the cases -------------------------------------------------------------------------------------
def c_good(d, out):
    pass


def c_flipped_byte(d, out):
    name = expert(1, 2, "down", "weight")
    old = read_tensor(d, name)[2][5]
    patch(d, name, 5, bytes([old ^ 0x10]))
    return os.path.basename(shard_of(d, name))


def c_shard_truncated(d, out):
    path = os.path.join(d, shards(d)[1])
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 100)
    assert os.path.getsize(path) == size - 100
    return os.path.basename(path)


def c_shard_missing(d, out):
    shard = shards(d)[2]
    os.remove(os.path.join(d, shard))
    return shard


def c_index_wrong_shard(d, out):
    name = expert(0, 1, "gate", "weight")
    old = index(d)["weight_map"][name]
    other = [s for s in shards(d) if s != old][0]
    idx = edit_json(os.path.join(d, INDEX), lambda i: i["weight_map"].__setitem__(name, other))
    assert name not in St(os.path.join(d, idx["weight_map"][name])).tensors
    return name


def outside_copy(d, out, shard):
    """A copy of SHARD outside the checkpoint (OUT/outside-CASE/SHARD)."""
    where = os.path.join(out, "outside-" + os.path.basename(d))
    os.makedirs(where, exist_ok=True)
    shutil.copy(os.path.join(d, shard), os.path.join(where, shard))
    return os.path.join(where, shard)


def point_index(d, shard, target):
    """Every weight_map entry of SHARD names TARGET instead; SHARD itself removed."""
    def fn(i):
        for k, v in i["weight_map"].items():
            if v == shard:
                i["weight_map"][k] = target
    edit_json(os.path.join(d, INDEX), fn)
    os.remove(os.path.join(d, shard))


def c_index_path_dotdot(d, out):
    shard = shards(d)[3]
    copy = outside_copy(d, out, shard)
    target = os.path.relpath(copy, d)
    assert target.startswith("../")
    point_index(d, shard, target)
    assert os.path.isfile(os.path.join(d, target))
    return target


def c_index_path_absolute(d, out):
    shard = shards(d)[3]
    copy = outside_copy(d, out, shard)
    point_index(d, shard, os.path.abspath(copy))
    return os.path.abspath(copy)


def c_index_path_symlink(d, out):
    shard = shards(d)[3]
    copy = outside_copy(d, out, shard)
    os.remove(os.path.join(d, shard))
    os.symlink(os.path.abspath(copy), os.path.join(d, shard))
    assert St(os.path.join(d, shard)).tensors
    return shard


def c_index_total_size(d, out):
    real = all_tensor_bytes(d)
    idx = edit_json(os.path.join(d, INDEX),
                    lambda i: i["metadata"].__setitem__("total_size", real + 4096))
    assert idx["metadata"]["total_size"] != real
    return INDEX


def c_index_duplicate_tensor(d, out):
    """A tensor of shard 2 also written into shard 3; the index still names shard 2."""
    name = expert(0, 3, "down", "weight_scale")
    src = St(shard_of(d, name))
    other = [s for s in shards(d) if s != index(d)["weight_map"][name]][-1]
    path = os.path.join(d, other)
    st = St(path)
    st.tensors[name] = list(src.tensors[name])
    st.write(path)
    assert name in St(path).tensors and name in St(shard_of(d, name)).tensors
    return name


def c_index_unlisted_tensor(d, out):
    name = expert(1, 0, "up", "weight_scale")
    idx = edit_json(os.path.join(d, INDEX), lambda i: i["weight_map"].pop(name))
    assert name not in idx["weight_map"]
    assert any(name in St(os.path.join(d, s)).tensors for s in os.listdir(d)
               if s.endswith(".safetensors"))
    return name


def c_index_missing(d, out):
    assert len(shards(d)) > 1
    os.remove(os.path.join(d, INDEX))
    return INDEX


def c_index_malformed(d, out):
    with open(os.path.join(d, INDEX), "w") as f:
        f.write('{"metadata": {"total_size": 1}, "weight_map": {"a": "model-00001-of-00004.saf')
    return INDEX


def c_index_unreferenced_shard(d, out):
    """An extra shard-named file (no tensors) that the index never names."""
    st = St(os.path.join(d, shards(d)[0]))
    st.tensors = {}
    st.write(os.path.join(d, "model-00005-of-00005.safetensors"))
    return "model-00005-of-00005.safetensors"


def c_config_missing(d, out):
    os.remove(os.path.join(d, "config.json"))
    return "config.json"


def c_config_malformed(d, out):
    path = os.path.join(d, "config.json")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text[:len(text) // 2])
    return "config.json"


def c_scale_nan_weight_scale_2(d, out):
    name = expert(0, 2, "down", "weight_scale_2")
    set_f32(d, name, F32_NAN)
    return name


def c_scale_inf_input_scale(d, out):
    name = expert(1, 1, "down", "input_scale")
    set_f32(d, name, F32_INF)
    return name


def c_scale_zero_input_scale(d, out):
    name = expert(0, 0, "down", "input_scale")
    set_f32(d, name, struct.pack("<f", 0.0))
    return name


def c_scale_zero_weight_scale_2(d, out):
    name = expert(1, 3, "down", "weight_scale_2")
    set_f32(d, name, struct.pack("<f", 0.0))
    return name


def c_scale_negative_weight_scale_2(d, out):
    name = expert(0, 1, "down", "weight_scale_2")
    set_f32(d, name, struct.pack("<f", -f32(d, name)))
    assert f32(d, name) < 0
    return name


def c_scale_negative_input_scale(d, out):
    name = expert(1, 2, "down", "input_scale")
    set_f32(d, name, struct.pack("<f", -1.0))
    return name


def c_scale_negative_e4m3(d, out):
    name = expert(0, 2, "up", "weight_scale")
    patch(d, name, 9, b"\xb8")  # -1.0
    return name


def c_scale_nan_e4m3(d, out):
    name = expert(1, 0, "gate", "weight_scale")
    patch(d, name, 17, b"\x7f")  # E4M3 NaN
    return name


def c_gate_up_scale_mismatch(d, out):
    g, u = expert(0, 3, "gate", "weight_scale_2"), expert(0, 3, "up", "weight_scale_2")
    assert f32(d, g) == f32(d, u)
    set_f32(d, u, struct.pack("<f", f32(d, u) * 2))
    assert f32(d, g) != f32(d, u) and f32(d, u) > 0
    return u


def c_gate_up_input_scale_mismatch(d, out):
    g, u = expert(1, 2, "gate", "input_scale"), expert(1, 2, "up", "input_scale")
    assert f32(d, g) == f32(d, u)
    set_f32(d, u, struct.pack("<f", f32(d, u) * 0.5))
    assert f32(d, g) != f32(d, u) and f32(d, u) > 0
    return u


def c_qkv_scale_mismatch(d, out):
    q, k = ("model.layers.1.self_attn.%s_proj.weight_scale_2" % p for p in "qk")
    assert f32(d, q) == f32(d, k)
    set_f32(d, k, struct.pack("<f", f32(d, k) * 2))
    return k


def c_linear_missing_input_scale(d, out):
    name = expert(0, 1, "down", "input_scale")
    remove(d, [name])
    return name


def c_linear_missing_weight_scale_2(d, out):
    name = expert(1, 3, "gate", "weight_scale_2")
    remove(d, [name])
    return name


def c_linear_missing_weight_scale(d, out):
    name = expert(0, 2, "up", "weight_scale")
    remove(d, [name])
    return name


def c_linear_scale_shape(d, out):
    """weight_scale [64, 4] stored as [32, 8] (same bytes)."""
    name = expert(1, 1, "up", "weight_scale")
    assert read_tensor(d, name)[1] == [64, 4]
    rewrite(d, name, shape=[32, 8])
    return name


def c_linear_input_scale_shape(d, out):
    """input_scale [2] instead of a scalar."""
    name = expert(0, 0, "gate", "input_scale")
    rewrite(d, name, shape=[2], data=read_tensor(d, name)[2] * 2)
    up = expert(0, 0, "up", "input_scale")
    rewrite(d, up, shape=[2], data=read_tensor(d, up)[2] * 2)  # keeps gate == up
    return name


def c_linear_dtype(d, out):
    """weight_scale stored as U8 instead of F8_E4M3."""
    name = expert(0, 3, "down", "weight_scale")
    rewrite(d, name, dtype="U8")
    return name


def c_linear_scale_2_dtype(d, out):
    """weight_scale_2 stored as F16 (a scalar of 2 bytes) instead of F32."""
    name = expert(1, 0, "down", "weight_scale_2")
    rewrite(d, name, dtype="F16", data=struct.pack("<e", f32(d, name)))
    return name


def c_exclude_modules_empty(d, out):
    def fn(q, which):
        q["ignore" if which == "config" else "exclude_modules"] = []
    c, h = quant_configs(d, fn)
    assert c["ignore"] == [] and h["exclude_modules"] == []
    return "hf_quant_config.json"


def c_config_contradicts_tensors(d, out):
    """Both configs exclude a module that holds NVFP4 tensors."""
    mod = "model.layers.0.mlp.experts.1.gate_proj"
    assert read_tensor(d, mod + ".weight")[0] == "U8"

    def fn(q, which):
        q["ignore" if which == "config" else "exclude_modules"].append(mod)
    quant_configs(d, fn)
    return mod


def c_quant_algo_fp8(d, out):
    def fn(q, which):
        q["quant_algo"] = "FP8"
    quant_configs(d, fn)
    return "hf_quant_config.json"


def c_quant_method(d, out):
    c = edit_json(os.path.join(d, "config.json"),
                  lambda c: c["quantization_config"].__setitem__("quant_method", "nvfp4"))
    assert c["quantization_config"]["quant_method"] == "nvfp4"
    return "config.json"


def c_group_size_32(d, out):
    def fn(q, which):
        q["group_size"] = 32
        for g in q.get("config_groups", {}).values():
            for k in ("weights", "input_activations"):
                if isinstance(g.get(k), dict):
                    g[k]["group_size"] = 32
    quant_configs(d, fn)
    return "hf_quant_config.json"


def c_config_mismatch(d, out):
    """config.json's ignore lacks lm_head; hf_quant_config's exclude_modules has it."""
    c = edit_json(os.path.join(d, "config.json"),
                  lambda c: c["quantization_config"]["ignore"].remove("lm_head"))
    h = rjson(os.path.join(d, "hf_quant_config.json"))
    assert "lm_head" not in c["quantization_config"]["ignore"]
    assert "lm_head" in h["quantization"]["exclude_modules"]
    return "lm_head"


def c_quant_config_missing(d, out):
    os.remove(os.path.join(d, "hf_quant_config.json"))
    c = edit_json(os.path.join(d, "config.json"), lambda c: c.pop("quantization_config"))
    assert "quantization_config" not in c


def expert_tensors(layer, e, projs=("gate", "up", "down")):
    return [expert(layer, e, p, w) for p in projs
            for w in ("weight", "weight_scale", "weight_scale_2", "input_scale")]


def c_moe_missing_expert(d, out):
    remove(d, expert_tensors(1, 3))
    return "model.layers.1"


def c_moe_missing_projection(d, out):
    remove(d, expert_tensors(0, 2, ("down",)))
    return "model.layers.0"


def c_moe_expert_shape(d, out):
    """Expert 2's down_proj of layer 0 has 48 output rows instead of hidden 64 (its four
    tensors consistent with each other)."""
    w, s = expert(0, 2, "down", "weight"), expert(0, 2, "down", "weight_scale")
    wt, stt = read_tensor(d, w), read_tensor(d, s)
    assert wt[1] == [64, 32] and stt[1] == [64, 4]
    rewrite(d, w, shape=[48, 32], data=wt[2][:48 * 32])
    rewrite(d, s, shape=[48, 4], data=stt[2][:48 * 4])
    return w


def c_tensor_nan_bf16(d, out):
    name = "model.layers.0.post_attention_layernorm.weight"
    assert read_tensor(d, name)[0] == "BF16"
    patch(d, name, 6, struct.pack("<H", 0x7FC0))
    return name


def c_tensor_inf_bf16(d, out):
    name = "model.embed_tokens.weight"
    assert read_tensor(d, name)[0] == "BF16"
    patch(d, name, 1000, struct.pack("<H", 0xFF80))  # -Inf
    return name


def c_drop_manifest(d, out):
    os.remove(os.path.join(d, MANIFEST))
    return MANIFEST


def c_manifest_extra_file(d, out):
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("not part of the conversion\n")
    return "notes.txt"


def c_manifest_size(d, out):
    with open(os.path.join(d, "README.md"), "a") as f:
        f.write("one more line\n")
    return "README.md"


def c_manifest_missing_file(d, out):
    os.remove(os.path.join(d, "tokenizer.json"))
    return "tokenizer.json"


def c_manifest_malformed(d, out):
    path = os.path.join(d, MANIFEST)
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text[:len(text) // 3])
    return MANIFEST


def c_manifest_crc32(d, out):
    """The manifest's CRC-32 of one tensor changed (file hashes still right)."""
    name = expert(0, 0, "up", "weight")

    def fn(m):
        for t in m["tensors"]:
            if t["name"] == name:
                t["crc32"] = "%08x" % (int(t["crc32"], 16) ^ 1)
    m = edit_json(os.path.join(d, MANIFEST), fn)
    assert any(t["name"] == name for t in m["tensors"])
    return name


def c_manifest_tensor(d, out):
    """The manifest lists one tensor with another shape."""
    name = expert(1, 1, "gate", "weight_scale")

    def fn(m):
        for t in m["tensors"]:
            if t["name"] == name:
                t["shape"] = [32, 8]
    edit_json(os.path.join(d, MANIFEST), fn)
    return name


def c_ct_scale_nan(d, out):
    """compressed-tensors: a NaN weight_global_scale."""
    name = "model.layers.0.mlp.experts.1.down_proj.weight_global_scale"
    dtype, shape, data = read_tensor(d, name)
    assert dtype == "F32" and len(data) == 4, (dtype, shape)
    patch(d, name, 0, F32_NAN)
    return name


def c_fp8_block_scale_size(d, out):
    """FP8 block: q_proj's weight_scale_inv holds 3 multipliers where [256, 64] needs 2 (an
    element count no shape can make right; lib/ckpt refuses the checkpoint)."""
    name = "model.layers.0.self_attn.q_proj.weight_scale_inv"
    dtype, shape, data = read_tensor(d, name)
    assert dtype == "F32" and shape == [2, 1], (dtype, shape)
    rewrite(d, name, shape=[3], data=data + data[:4])
    return name


def c_ct_scale_zero(d, out):
    """compressed-tensors: a zero weight_global_scale (its decode multiplier 1/0)."""
    name = "model.layers.1.mlp.experts.2.gate_proj.weight_global_scale"
    assert read_tensor(d, name)[1] == [1]
    patch(d, name, 0, struct.pack("<f", 0.0))
    return name


def c_ct_missing_input_scale(d, out):
    """compressed-tensors: a linear without input_global_scale while config_groups quantize the
    input activations (W4A4: loaders need it; only W4A16 exports omit it)."""
    name = "model.layers.0.mlp.experts.3.up_proj.input_global_scale"
    remove(d, [name])
    return name


def c_ct_w4a16(d, out):
    """compressed-tensors W4A16 (a good control): config_groups without input_activations and
    no input_global_scale anywhere."""
    def fn(c):
        for g in c["quantization_config"]["config_groups"].values():
            assert g["input_activations"]["num_bits"] == 4
            g["input_activations"] = None
    edit_json(os.path.join(d, "config.json"), fn)
    remove(d, [k for k in index(d)["weight_map"] if k.endswith(".input_global_scale")])
    assert not any(k.endswith(".input_global_scale") for k in index(d)["weight_map"])


def c_ct_scale_nan_e4m3(d, out):
    """compressed-tensors: an E4M3 NaN byte in weight_scale."""
    name = "model.layers.1.mlp.experts.0.down_proj.weight_scale"
    patch(d, name, 30, b"\xff")
    return name


def c_fp8_scale_inv_nan(d, out):
    """FP8 block: a NaN weight_scale_inv (an F32 tensor)."""
    name = "model.layers.1.mlp.experts.1.up_proj.weight_scale_inv"
    assert read_tensor(d, name)[0] == "F32"
    patch(d, name, 0, F32_NAN)
    return name


def c_ds_missing_expert(d, out):
    """DeepSeek-V3: expert 2 of MoE layer 2 absent (its shared expert still there)."""
    names = expert_tensors(2, 2)
    assert any(k.startswith("model.layers.2.mlp.shared_experts.") for k in index(d)["weight_map"])
    remove(d, names)
    return "model.layers.2"


def mixed_layers(d, fn):
    """Apply fn(quantized_layers dict) in config.json and hf_quant_config.json."""
    def both(q, which):
        fn(q["quantized_layers"])
        assert q["quant_algo"] == "MIXED_PRECISION"
    return quant_configs(d, both)


def c_mixed_layer_unlisted(d, out):
    """MIXED_PRECISION: an NVFP4 linear whose module quantized_layers does not list."""
    mod = "model.layers.1.mlp.experts.2.up_proj"
    assert read_tensor(d, mod + ".weight")[0] == "U8"
    c, h = mixed_layers(d, lambda ql: ql.pop(mod))
    assert mod not in c["quantized_layers"] and mod not in h["quantized_layers"]
    return mod


def c_mixed_no_layers(d, out):
    """MIXED_PRECISION without quantized_layers."""
    def fn(q, which):
        assert q["quant_algo"] == "MIXED_PRECISION"
        del q["quantized_layers"]
    quant_configs(d, fn)
    return "hf_quant_config.json"


def c_prepared_rank_missing(d, out):
    shutil.rmtree(os.path.join(d, "rank-00001-of-00002"))
    return "rank-00001-of-00002"


def c_prepared_expert_split(d, out):
    """Rank 1 claims experts 1..2 (config.json expert_range and the manifest's target): expert 1
    on two ranks, expert 3 on none."""
    cfg = os.path.join(d, "rank-00001-of-00002", "config.json")
    c = edit_json(cfg, lambda c: c["quantization_config"].__setitem__("expert_range", [1, 2]))
    assert c["quantization_config"]["ep_rank"] == 1

    def fn(m):
        ranks = m["target"]["ep"]["ranks"]
        assert ranks[0]["experts"] == [0, 2] and ranks[1]["experts"] == [2, 2], ranks
        ranks[1]["experts"] = [1, 2]
    edit_json(os.path.join(d, MANIFEST), fn)
    return "rank-00001-of-00002"


def swizzle_128x4(m, k, cols):
    """SPEC section 5: byte of scale row m, column k within an expert (cols = pad4 columns)."""
    kt = (cols + 3) // 4
    return (m // 128) * kt * 512 + (k // 4) * 512 + (m % 32) * 16 + ((m % 128) // 32) * 4 + k % 4


def c_prepared_scale_padding(d, out):
    """w2_weight_scale of rank 0, layer 1, expert 1: a padding row (m >= hidden 64) made 1.0."""
    r = os.path.join(d, "rank-00000-of-00002")
    name = "model.layers.1.mlp.experts.w2_weight_scale"
    dtype, shape, data = read_tensor(r, name)
    assert dtype == "F8_E4M3" and shape[1] == 128 and shape[1] > 64, shape
    per_expert = shape[1] * shape[2]
    at = per_expert * 1 + swizzle_128x4(100, 2, shape[2])
    assert data[at] == 0
    patch(r, name, at, b"\x38")
    return name


CASES = {name[2:].replace("_", "-"): fn for name, fn in list(globals().items())
         if name.startswith("c_") and callable(fn)}


def load_table(path=os.path.join(HERE, "cases.tsv")):
    rows = []
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.rstrip("\n").split("\t")
            assert len(cols) == 7, "cases.tsv: %d columns in %r" % (len(cols), line)
            case, base, code, require, options, manifest, edit = cols
            assert manifest in ("keep", "rehash", "drop"), line
            assert edit in CASES, "cases.tsv: %s: no edit '%s' in make_bad.py" % (case, edit)
            rows.append({"case": case, "base": base, "exit": int(code), "edit": edit,
                         "require": [] if require == "-" else require.split(","),
                         "options": [] if options == "-" else options.split(),
                         "manifest": manifest})
    names = [r["case"] for r in rows]
    assert len(names) == len(set(names)), "duplicate case names"
    unused = set(CASES) - {r["edit"] for r in rows}
    assert not unused, "edits no case uses: %s" % sorted(unused)
    return rows


def make_case(tool, out, row, done):
    base = build_base(tool, out, row["base"], done)
    dst = os.path.join(out, row["case"])
    shutil.rmtree(dst, ignore_errors=True)
    shutil.rmtree(os.path.join(out, "outside-" + row["case"]), ignore_errors=True)
    shutil.copytree(base, dst, symlinks=True)
    named = CASES[row["edit"]](dst, out)
    if row["manifest"] == "drop" and os.path.exists(os.path.join(dst, MANIFEST)):
        os.remove(os.path.join(dst, MANIFEST))
    elif row["manifest"] == "rehash":
        assert os.path.exists(os.path.join(dst, MANIFEST)), row["case"] + ": no manifest"
        subprocess.run([tool, "hash", dst] + RUN, check=True, stdout=subprocess.DEVNULL)
    return dst, named or "-"


def main(argv):
    if len(argv) < 3 or argv[0] != "--tool":
        sys.exit(__doc__)
    tool, out, only = argv[1], os.path.abspath(argv[2]), set(argv[3:])
    rows = load_table()
    unknown = only - {r["case"] for r in rows}
    if unknown:
        sys.exit("make_bad.py: unknown cases %s" % sorted(unknown))
    os.makedirs(out, exist_ok=True)
    done = set()
    for row in rows:
        if not only or row["case"] in only:
            print("%s\t%s\t%s" % ((row["case"],) + make_case(tool, out, row, done)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
