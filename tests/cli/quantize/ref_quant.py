#!/usr/bin/python3
"""Second implementation of the NVFP4 arithmetic of SPEC section 4, Python stdlib only.

Written independently of lib/quant: every binary32 operation is computed in binary64 and then
rounded to binary32 with struct. For one +, -, *, / of two binary32 values this gives exactly
the RN binary32 result (binary64 has more than 2 * 24 + 2 bits, so the double rounding is
innocuous). E4M3 is encoded by searching the table of all finite E4M3 values, not with bit
operations.

Usage:
  ref_quant.py make IN.safetensors          write a small test input (several dtypes, hard cases)
  ref_quant.py check IN OUT METHOD ERROR DOMAIN E4M3_MAX
                                            recompute every quantized tensor of IN and compare
                                            OUT byte for byte (tensors, dtypes, shapes, scales);
                                            METHOD rtn, 4over6 or modelopt (RTN in ModelOpt's
                                            export arithmetic, SPEC section 4)
"""
import json
import math
import random
import struct
import sys

FLT_MAX = struct.unpack('<f', b'\xff\xff\x7f\x7f')[0]


def f32(x):
    """Round a Python float (binary64) to binary32, RN-even; overflow gives inf."""
    try:
        return struct.unpack('<f', struct.pack('<f', x))[0]
    except OverflowError:
        # struct refuses values beyond FLT_MAX that would round to inf
        return math.copysign(math.inf, x)


def f32_bits(x):
    return struct.unpack('<I', struct.pack('<f', x))[0]


def bf16_decode(h):
    return struct.unpack('<f', struct.pack('<I', h << 16))[0]


def bf16_encode(x):
    b = f32_bits(f32(x))
    if (b & 0x7FFFFFFF) > 0x7F800000:
        return (b >> 16) | 0x40
    lower = b & 0xFFFF
    hi = b >> 16
    if lower > 0x8000 or (lower == 0x8000 and (hi & 1)):
        hi += 1
    return hi


def e4m3_decode(b):
    s = -1.0 if b & 0x80 else 1.0
    e = (b >> 3) & 0xF
    m = b & 7
    if e == 15 and m == 7:
        return math.nan
    if e == 0:
        return s * m * 2.0 ** -9
    return s * (1 + m / 8.0) * 2.0 ** (e - 7)


E4M3_POS = [(e4m3_decode(b), b) for b in range(0x7F)]  # 0 .. 448, increasing


def e4m3_encode(x):
    """RN-even with saturation to 448, by nearest-value search."""
    if math.isnan(x):
        return 0x7F
    sign = 0x80 if x < 0 or (x == 0 and math.copysign(1, x) < 0) else 0
    a = abs(x)
    if a >= 448:
        return sign | 0x7E
    best = None
    for v, b in E4M3_POS:
        d = abs(v - a)
        if best is None or d < best[0] or (d == best[0] and b % 2 == 0):
            best = (d, b)
    return sign | best[1]


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def e2m1_encode(x):
    a = min(abs(x), 6.0)
    if a <= 0.25:
        i = 0
    elif a < 0.75:
        i = 1
    elif a <= 1.25:
        i = 2
    elif a < 1.75:
        i = 3
    elif a <= 2.5:
        i = 4
    elif a < 3.5:
        i = 5
    elif a <= 5:
        i = 6
    else:
        i = 7
    return i | (8 if x < 0 else 0)


def e2m1_decode(c):
    v = E2M1[c & 7]
    return -v if c & 8 else v


def global_scale(amax, emax):
    if amax == 0:
        return FLT_MAX
    gs = min(f32(emax * 6.0 / amax), FLT_MAX)
    return 1.0 if gs == 0 else gs


def group_scale(amax, method, emax):
    """(scale the blocks take, the method they are quantized with, weight_scale_2) of a group.
    modelopt: sf2 = RN(amax / 2688) for both, stored as it is; an all-zero group (sf2 = 0) is
    written as the default arithmetic's RTN writes it (gs = FLT_MAX)."""
    if method == 'modelopt':
        sf2 = f32(amax / 2688.0)
        if sf2 != 0:
            return sf2, method, sf2
        method = 'rtn'
    gs = global_scale(amax, emax)
    return gs, method, f32(1.0 / gs)


def enc_of(sf_byte, rcp_gs):
    d = f32(e4m3_decode(sf_byte) * rcp_gs)
    e = f32(1.0 / d) if d != 0 else math.inf
    return min(e, FLT_MAX)


def modelopt_block(x, sf2):
    """ModelOpt's export: s = RN(vmax / RN(6 sf2)), 1 where 0, at least 2^-9; codes of
    RN(x / RN(f32(sf) sf2)), true divisions."""
    vmax = max(abs(v) for v in x)
    s = f32(vmax / f32(6.0 * sf2))
    if s == 0:
        s = 1.0
    s = max(s, 2.0 ** -9)
    sf = e4m3_encode(min(s, 448.0))
    dec = f32(e4m3_decode(sf) * sf2)
    return [e2m1_encode(f32(v / dec)) for v in x], sf


def quant_block(x, gs, method, error, domain):
    """Returns (codes[16], scale byte). For method modelopt, gs is sf2."""
    if method == 'modelopt':
        return modelopt_block(x, gs)
    vmax = max(abs(v) for v in x)
    rcp = f32(1.0 / gs)
    if method == 'rtn':
        mul = f32(gs * f32(1.0 / 6.0))
        sf = e4m3_encode(min(f32(vmax * mul), 448.0))
        enc = enc_of(sf, rcp)
        return [e2m1_encode(f32(v * enc)) for v in x], sf
    sf6h = 0.0 if vmax == 0 else f32(f32(vmax / 6.0) * gs)
    sf4h = f32(sf6h * 1.5)
    cands = []
    for sfh in (sf4h, sf6h):
        sf = e4m3_encode(min(sfh, 448.0))
        enc = enc_of(sf, rcp)
        codes = [e2m1_encode(f32(v * enc)) for v in x]
        sff = e4m3_decode(sf)
        err = 0.0
        for v, c in zip(x, codes):
            if domain == 'scaled':
                cv = e2m1_decode(c) * sff
                d = f32(cv - f32(v * gs))
            else:
                cv = f32(f32(e2m1_decode(c) * sff) * rcp)
                d = f32(cv - v)
            term = f32(d * d) if error == 'mse' else abs(d)
            err = f32(err + term)
        cands.append((err, codes, sf))
    (e4, c4, s4), (e6, c6, s6) = cands
    return (c4, s4) if e4 < e6 else (c6, s6)


def quantize(rows, gs, method, error, domain):
    packed = bytearray()
    scales = bytearray()
    for row in rows:
        for b in range(0, len(row), 16):
            codes, sf = quant_block(row[b:b + 16], gs, method, error, domain)
            for j in range(8):
                packed.append(codes[2 * j] | (codes[2 * j + 1] << 4))
            scales.append(sf)
    return bytes(packed), bytes(scales)


# safetensors --------------------------------------------------------------------------------

SIZES = {'BF16': 2, 'F16': 2, 'F32': 4, 'U8': 1, 'F8_E4M3': 1, 'I32': 4}


def st_read(path):
    with open(path, 'rb') as f:
        data = f.read()
    n = struct.unpack('<Q', data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    hdr.pop('__metadata__', None)
    out = {}
    for name, t in hdr.items():
        b, e = t['data_offsets']
        out[name] = (t['dtype'], t['shape'], data[8 + n + b:8 + n + e])
    return out


def st_write(path, tensors):
    hdr, off, blobs = {}, 0, []
    for name, (dtype, shape, raw) in tensors.items():
        hdr[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(hdr).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))


def decode_values(dtype, raw):
    if dtype == 'BF16':
        return [bf16_decode(h) for h in struct.unpack('<%dH' % (len(raw) // 2), raw)]
    if dtype == 'F32':
        return list(struct.unpack('<%df' % (len(raw) // 4), raw))
    if dtype == 'F16':
        return list(struct.unpack('<%de' % (len(raw) // 2), raw))
    if dtype == 'F8_E4M3':
        return [e4m3_decode(b) for b in raw]
    raise ValueError(dtype)


def make(path):
    rng = random.Random(1234)

    def bf16_raw(vals):
        return struct.pack('<%dH' % len(vals), *[bf16_encode(v) for v in vals])

    t = {}
    # 1. BF16 expert weights: gate and up share one global scale; different magnitudes.
    pre = 'model.layers.0.mlp.experts.0.'
    gate = [rng.gauss(0, 0.02) for _ in range(8 * 64)]
    up = [rng.gauss(0, 0.05) for _ in range(8 * 64)]
    t[pre + 'gate_proj.weight'] = ('BF16', [8, 64], bf16_raw(gate))
    t[pre + 'up_proj.weight'] = ('BF16', [8, 64], bf16_raw(up))
    # 2. Hard cases in one F32 tensor: zeros, ties, tiny blocks (subnormal scales), -0.0.
    hard = []
    hard += [0.0] * 16
    hard += [-0.0] * 16
    hard += [0.25, -0.25, 0.75, -0.75, 1.25, 1.75, 2.5, 3.5, 5, -5, 6, -6, 0.5, 1, 2, 3]
    hard += [v * 1e-4 for v in range(-8, 8)]
    hard += [rng.uniform(-1, 1) * 1e-6 for _ in range(16)]
    hard += [rng.uniform(-6, 6) for _ in range(16 * 3)]
    t['model.layers.0.mlp.experts.0.down_proj.weight'] = (
        'F32', [4, 32], struct.pack('<%df' % len(hard), *hard))
    # 3. F16 tensor, odd row count.
    h16 = [rng.gauss(0, 1) for _ in range(3 * 48)]
    t['model.layers.0.self_attn.o_proj.weight'] = ('F16', [3, 48],
                                                   struct.pack('<%de' % len(h16), *h16))
    # 4. FP8-block source, 2 x 2 blocks of 128 x 128 with a squeezed [4] scale tensor.
    fp8 = bytes(rng.choice([b for b in range(256) if b not in (0x7F, 0xFF)])
                for _ in range(130 * 144))
    t['model.layers.1.mlp.experts.3.down_proj.weight'] = ('F8_E4M3', [130, 144], fp8)
    t['model.layers.1.mlp.experts.3.down_proj.weight_scale_inv'] = (
        'F32', [4], struct.pack('<4f', 1.5e-3, 2.5e-4, 3.0e-2, 7.0e-5))
    # 5. Tensors kept as they are: a 1-D norm, an I32 tensor, a 2-D tensor with 100 columns.
    t['model.norm.weight'] = ('BF16', [64], bf16_raw([1.0 + i / 64 for i in range(64)]))
    t['model.layers.0.mlp.gate.bias'] = ('I32', [4], struct.pack('<4i', 1, -2, 3, -4))
    t['model.embed_tokens.weight'] = ('BF16', [2, 100], bf16_raw([i / 7 for i in range(200)]))
    st_write(path, t)


def groups_of(names):
    """Gate/up (and w1/w3, q/k/v) of one module share a global scale (SPEC section 5)."""
    groups = {}
    for n in names:
        key = n
        for part, g in (('.gate_proj.', '.GU.'), ('.up_proj.', '.GU.'), ('.w1.', '.W13.'),
                        ('.w3.', '.W13.'), ('.q_proj.', '.QKV.'), ('.k_proj.', '.QKV.'),
                        ('.v_proj.', '.QKV.')):
            i = n.rfind(part)
            if i > 0:
                key = n[:i] + g + n[i + len(part):]
                break
        groups.setdefault(key, []).append(n)
    return groups


def check(inp, outp, method, error, domain, emax):
    src = st_read(inp)
    out = st_read(outp)
    emax = float(emax)
    values = {}
    for name, (dtype, shape, raw) in src.items():
        if name.endswith('_scale_inv') or len(shape) != 2 or shape[1] % 16 != 0:
            continue
        if dtype not in ('BF16', 'F16', 'F32', 'F8_E4M3'):
            continue
        vals = decode_values(dtype, raw)
        if dtype == 'F8_E4M3' and name + '_scale_inv' in src:
            sraw = src[name + '_scale_inv'][2]
            s = list(struct.unpack('<%df' % (len(sraw) // 4), sraw))
            r, c = shape
            ncb = (c + 127) // 128
            vals = [bf16_decode(bf16_encode(f32(vals[i] * s[(i // c // 128) * ncb + (i % c) // 128])))
                    for i in range(r * c)]
        values[name] = (shape, vals)
    expected_names = set()
    for key, members in groups_of(sorted(values)).items():
        amax = max(abs(v) for m in members for v in values[m][1])
        gs, meth, s2 = group_scale(amax, method, emax)
        for m in members:
            shape, vals = values[m]
            r, c = shape
            rows = [vals[i * c:(i + 1) * c] for i in range(r)]
            packed, scales = quantize(rows, gs, meth, error, domain)
            want = {m: ('U8', [r, c // 2], packed), m + '_scale': ('F8_E4M3', [r, c // 16], scales),
                    m + '_scale_2': ('F32', [], struct.pack('<f', s2))}
            for n, w in want.items():
                expected_names.add(n)
                if n not in out:
                    sys.exit('missing tensor %s' % n)
                got = out[n]
                if got[0] != w[0] or list(got[1]) != w[1]:
                    sys.exit('%s: dtype/shape %s %s, expected %s %s' % (n, got[0], got[1], w[0], w[1]))
                if got[2] != w[2]:
                    bad = next(i for i in range(len(w[2])) if got[2][i] != w[2][i])
                    sys.exit('%s: byte %d is %02x, expected %02x' % (n, bad, got[2][bad], w[2][bad]))
    for name, t in src.items():
        if name in values or (name.endswith('_scale_inv') and name[:-10] in values):
            continue
        expected_names.add(name)
        if name not in out or out[name][0] != t[0] or list(out[name][1]) != t[1] or out[name][2] != t[2]:
            sys.exit('kept tensor %s differs' % name)
    extra = set(out) - expected_names
    if extra:
        sys.exit('unexpected tensors %s' % sorted(extra))
    print('ok: %d quantized, %d kept' % (len(values), len(src) - len(values)))


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == 'make':
        make(sys.argv[2])
    elif len(sys.argv) == 8 and sys.argv[1] == 'check':
        check(*sys.argv[2:])
    else:
        sys.exit(__doc__)
