#!/usr/bin/env python3
"""Break a converted checkpoint on purpose, independently of nvfp4tool (safetensors parsed with
struct/json, the prepared layouts from SPEC section 5 typed out here).

    break_ckpt.py SRC DST CASE LAYER EXPERT [OTHER]

copies SRC (a modelopt or prepared-w4a16 conversion) to DST with one defect in layer LAYER:
  nibbles        expert EXPERT's weight bytes with their two nibbles swapped (EXPERT -1: all)
  gate_up        expert EXPERT's gate and up exchanged (modelopt: the tensors; prepared: the 64-row
                 groups of w13_weight and their scale rows)
  scales_linear  prepared: expert EXPERT's w13 scales written in linear order instead of the
                 layout; modelopt: its gate weight_scale transposed block-wise (rows reversed)
  scales_transposed  prepared: expert EXPERT's w13 scales taken from the [rows, K] matrix read
                 column-major (a transposed write), then laid out again
  ws2_inverted   expert EXPERT's weight_scale_2 (prepared: w13_alpha, w2_alpha) replaced by 1/x
  replaced       expert EXPERT's weights, scales and scalars replaced by expert OTHER's
  bias_dropped   the router's e_score_correction_bias of layer LAYER removed (index updated)
"""
import json
import os
import shutil
import struct
import sys

SIZES = {"U8": 1, "F8_E4M3": 1, "BF16": 2, "F16": 2, "F32": 4, "I64": 8, "I32": 4}


def read_st(path):
    b = bytearray(open(path, "rb").read())
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    return hdr, b, 8 + n


def tensor_view(hdr, base, name):
    t = hdr[name]
    s, e = t["data_offsets"]
    return base + s, base + e, t


class Ckpt:
    def __init__(self, d):
        self.dir = d
        self.files = {}
        for f in sorted(os.listdir(d)):
            if f.endswith(".safetensors"):
                self.files[f] = read_st(os.path.join(d, f))
        self.cfg = json.load(open(os.path.join(d, "config.json")))
        q = self.cfg.get("quantization_config", {})
        self.prepared = q.get("quant_method") == "nvfp4tool-prepared"
        self.layout = q.get("scale_layout", "128x4")

    def find(self, name):
        for f, (hdr, b, base) in self.files.items():
            if name in hdr:
                s, e, t = tensor_view(hdr, base, name)
                return f, b, s, e, t
        raise KeyError(name)

    def get(self, name):
        f, b, s, e, t = self.find(name)
        return bytes(b[s:e])

    def put(self, name, data):
        f, b, s, e, t = self.find(name)
        assert len(data) == e - s, (name, len(data), e - s)
        b[s:e] = data

    def save(self):
        for f, (hdr, b, base) in self.files.items():
            open(os.path.join(self.dir, f), "wb").write(bytes(b))


def swap_nibbles(data):
    return bytes(((x & 15) << 4) | (x >> 4) for x in data)


def offset(layout, m, k, kcols):
    kt = (kcols + 3) // 4
    if layout == "128x4":
        return (m // 128) * kt * 512 + (k // 4) * 512 + (m % 32) * 16 + ((m % 128) // 32) * 4 + k % 4
    if layout == "8x4":
        return (m // 8) * kt * 32 + (k // 4) * 32 + (m % 8) * 4 + k % 4
    raise ValueError(layout)


def expert_slice(ck, name, e):
    """bytes range of expert e of a prepared [E, ...] tensor"""
    f, b, s, end, t = ck.find(name)
    per = (end - s) // t["shape"][0]
    return name, e * per, per, t["shape"]


def get_expert(ck, name, e):
    name, off, per, shape = expert_slice(ck, name, e)
    return bytearray(ck.get(name)[off:off + per]), shape


def put_expert(ck, name, e, data):
    name, off, per, shape = expert_slice(ck, name, e)
    whole = bytearray(ck.get(name))
    whole[off:off + per] = data
    ck.put(name, bytes(whole))


def mo_names(P, e):
    return ["%s.experts.%d.%s" % (P, e, p) for p in ("gate_proj", "up_proj", "down_proj")]


def experts_of(ck, P):
    if ck.prepared:
        return ck.find(P + ".experts.w13_weight")[4]["shape"][0]
    n = 0
    while True:
        try:
            ck.find("%s.experts.%d.up_proj.weight" % (P, n))
        except KeyError:
            return n
        n += 1


def nibbles(ck, P, e):
    es = range(experts_of(ck, P)) if e < 0 else [e]
    for x in es:
        if ck.prepared:
            for n in ("w13_weight", "w2_weight"):
                w, _ = get_expert(ck, P + ".experts." + n, x)
                put_expert(ck, P + ".experts." + n, x, swap_nibbles(w))
        else:
            for n in mo_names(P, x):
                ck.put(n + ".weight", swap_nibbles(ck.get(n + ".weight")))


def gate_up(ck, P, e):
    if not ck.prepared:
        g, u = mo_names(P, e)[:2]
        for suf in (".weight", ".weight_scale", ".weight_scale_2", ".input_scale"):
            try:
                a, b = ck.get(g + suf), ck.get(u + suf)
            except KeyError:
                continue
            ck.put(g + suf, b)
            ck.put(u + suf, a)
        return
    w, shape = get_expert(ck, P + ".experts.w13_weight", e)
    rows, rb = shape[1], shape[2]
    out = bytearray(w)
    for r in range(rows):  # row r of group g pairs with the same row of group g ^ 1
        g = r // 64
        r2 = (g ^ 1) * 64 + r % 64
        out[r * rb:(r + 1) * rb] = w[r2 * rb:(r2 + 1) * rb]
    put_expert(ck, P + ".experts.w13_weight", e, bytes(out))
    s, sshape = get_expert(ck, P + ".experts.w13_weight_scale", e)
    kcols = rb * 2 // 16
    so = bytearray(s)
    for r in range(rows):
        r2 = ((r // 64) ^ 1) * 64 + r % 64
        for k in range(kcols):
            so[offset(ck.layout, r, k, kcols)] = s[offset(ck.layout, r2, k, kcols)]
    put_expert(ck, P + ".experts.w13_weight_scale", e, bytes(so))


def scales_linear(ck, P, e):
    if not ck.prepared:
        n = mo_names(P, e)[0] + ".weight_scale"
        f, b, s, end, t = ck.find(n)
        rows, kc = t["shape"]
        d = ck.get(n)
        ck.put(n, b"".join(d[(rows - 1 - r) * kc:(rows - r) * kc] for r in range(rows)))
        return
    s, shape = get_expert(ck, P + ".experts.w13_weight_scale", e)
    rows = ck.find(P + ".experts.w13_weight")[4]["shape"][1]
    kcols = ck.find(P + ".experts.w13_weight")[4]["shape"][2] * 2 // 16
    lin = bytearray(len(s))
    for r in range(rows):
        for k in range(kcols):
            lin[r * kcols + k] = s[offset(ck.layout, r, k, kcols)]
    put_expert(ck, P + ".experts.w13_weight_scale", e, bytes(lin))


def scales_transposed(ck, P, e):
    s, shape = get_expert(ck, P + ".experts.w13_weight_scale", e)
    rows = ck.find(P + ".experts.w13_weight")[4]["shape"][1]
    kcols = ck.find(P + ".experts.w13_weight")[4]["shape"][2] * 2 // 16
    lin = [s[offset(ck.layout, r, k, kcols)] for r in range(rows) for k in range(kcols)]
    out = bytearray(s)
    for r in range(rows):
        for k in range(kcols):
            # element (r, k) of the column-major reading of the same bytes
            out[offset(ck.layout, r, k, kcols)] = lin[k * rows + r]
    put_expert(ck, P + ".experts.w13_weight_scale", e, bytes(out))


def invert_f32(data):
    return struct.pack("<f", 1.0 / struct.unpack("<f", data)[0])


def ws2_inverted(ck, P, e):
    if ck.prepared:
        for n in ("w13_alpha", "w2_alpha"):
            a, _ = get_expert(ck, P + ".experts." + n, e)
            put_expert(ck, P + ".experts." + n, e, invert_f32(bytes(a)))
        return
    for n in mo_names(P, e):
        ck.put(n + ".weight_scale_2", invert_f32(ck.get(n + ".weight_scale_2")))


def replaced(ck, P, e, other):
    if ck.prepared:
        for n in ("w13_weight", "w13_weight_scale", "w13_alpha", "w2_weight", "w2_weight_scale",
                  "w2_alpha"):
            w, _ = get_expert(ck, P + ".experts." + n, other)
            put_expert(ck, P + ".experts." + n, e, bytes(w))
        return
    for a, b in zip(mo_names(P, e), mo_names(P, other)):
        for suf in (".weight", ".weight_scale", ".weight_scale_2", ".input_scale"):
            ck.put(a + suf, ck.get(b + suf))


def bias_dropped(ck, P):
    name = P + ".gate.e_score_correction_bias"
    f, b, s, e, t = ck.find(name)
    hdr, data, base = ck.files[f]
    meta = hdr.get("__metadata__")
    items = sorted(((k, v) for k, v in hdr.items() if k not in ("__metadata__", name)),
                   key=lambda kv: kv[1]["data_offsets"][0])
    new_hdr, blobs, at = {}, [], 0
    if meta is not None:
        new_hdr["__metadata__"] = meta
    for k, v in items:
        s0, e0 = v["data_offsets"]
        blobs.append(bytes(data[base + s0:base + e0]))
        new_hdr[k] = {"dtype": v["dtype"], "shape": v["shape"], "data_offsets": [at, at + e0 - s0]}
        at += e0 - s0
    h = json.dumps(new_hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    out = struct.pack("<Q", len(h)) + h + b"".join(blobs)
    ck.files[f] = read_st_bytes(out)
    idx = os.path.join(ck.dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        j = json.load(open(idx))
        del j["weight_map"][name]
        if "metadata" in j and "total_size" in j["metadata"]:
            j["metadata"]["total_size"] -= e - s
        json.dump(j, open(idx, "w"), indent=2)


def read_st_bytes(b):
    b = bytearray(b)
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b, 8 + n


def main():
    src, dst, case, layer, expert = sys.argv[1:6]
    other = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    manifest = os.path.join(dst, "nvfp4-manifest.json")
    if os.path.exists(manifest):  # the bytes no longer match it
        os.remove(manifest)
    ck = Ckpt(dst)
    P = "model.layers.%s.mlp" % layer
    e = int(expert)
    if case == "nibbles":
        nibbles(ck, P, e)
    elif case == "gate_up":
        gate_up(ck, P, e)
    elif case == "scales_linear":
        scales_linear(ck, P, e)
    elif case == "scales_transposed":
        scales_transposed(ck, P, e)
    elif case == "ws2_inverted":
        ws2_inverted(ck, P, e)
    elif case == "replaced":
        replaced(ck, P, e, other)
    elif case == "bias_dropped":
        bias_dropped(ck, P)
    else:
        sys.exit("unknown case " + case)
    ck.save()


if __name__ == "__main__":
    main()
