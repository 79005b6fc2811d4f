#!/usr/bin/python3
"""Edit a copy of a one-shard ModelOpt NVFP4 checkpoint (standard library only), and check the
re-quantized expert of a prepared conversion independently.

  nvfp4_edit.py rescale DIR TENSOR FACTOR
      Multiply the F32 scalar TENSOR (a weight_scale_2) by FACTOR in place.
  nvfp4_edit.py malform DIR KIND TENSOR
      KIND: odd-width (the U8 weight TENSOR one packed column narrower), scale-shape (the
      weight_scale TENSOR one column narrower), drop (TENSOR removed), neg-scale / nan-scale
      (the first byte of the E4M3 TENSOR set to -1.0 (0xB8) / NaN (0x7F)), neg-f32 / nan-f32
      (the F32 scalar TENSOR set to -1.0 / NaN).
  nvfp4_edit.py requant PREP SRC LAYER EXPERT H I
      PREP (prepared-w4a16, 128x4, ep 1) of SRC, whose expert EXPERT of LAYER had its up_proj's
      weight_scale_2 raised: the manifest reports gate re-quantized from the gate's to the up's
      scale, w13_alpha is the up's scale, the up rows are the stored up bytes, and every gate
      value (decoded with the un-swizzled scales, typed from SPEC section 5, and alpha) is within
      one quantization step (2 * its block's decode scale) of the stored gate value.
"""
import json
import math
import os
import struct
import sys

SIZES = {'BF16': 2, 'F16': 2, 'F32': 4, 'U8': 1, 'F8_E4M3': 1, 'I32': 4, 'I64': 8}
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def shard_of(d):
    idx = json.load(open(os.path.join(d, 'model.safetensors.index.json')))
    shards = sorted(set(idx['weight_map'].values()))
    assert len(shards) == 1, shards
    return idx, os.path.join(d, shards[0])


def st_read(path):
    data = open(path, 'rb').read()
    n = struct.unpack('<Q', data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    meta = hdr.pop('__metadata__', None)
    out = {}
    for name, t in sorted(hdr.items(), key=lambda kv: kv[1]['data_offsets'][0]):
        b, e = t['data_offsets']
        out[name] = [t['dtype'], t['shape'], data[8 + n + b:8 + n + e]]
    return meta, out


def st_write(path, meta, tensors):
    hdr, off = {}, 0
    if meta is not None:
        hdr['__metadata__'] = meta
    for name, (dt, shape, b) in tensors.items():
        hdr[name] = {'dtype': dt, 'shape': shape, 'data_offsets': [off, off + len(b)]}
        off += len(b)
    h = json.dumps(hdr).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(t[2] for t in tensors.values()))


def f32(b, i=0):
    return struct.unpack_from('<f', b, 4 * i)[0]


def e4m3(x):
    s = -1.0 if x & 0x80 else 1.0
    e, m = (x >> 3) & 0xF, x & 7
    return s * (m / 8.0 * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7))


def rescale(d, name, factor):
    idx, path = shard_of(d)
    meta, t = st_read(path)
    t[name][2] = struct.pack('<f', f32(t[name][2]) * float(factor))
    st_write(path, meta, t)


def malform(d, kind, name):
    idx, path = shard_of(d)
    meta, t = st_read(path)
    dt, shape, b = t[name]
    if kind in ('odd-width', 'scale-shape'):
        rows, cols = shape
        t[name] = [dt, [rows, cols - 1], b''.join(b[r * cols:r * cols + cols - 1]
                                                  for r in range(rows))]
    elif kind == 'drop':
        del t[name]
        del idx['weight_map'][name]
        idx['metadata']['total_size'] -= len(b)
        json.dump(idx, open(os.path.join(d, 'model.safetensors.index.json'), 'w'))
    elif kind in ('neg-scale', 'nan-scale'):
        t[name][2] = bytes([0xB8 if kind == 'neg-scale' else 0x7F]) + b[1:]
    elif kind in ('neg-f32', 'nan-f32'):
        t[name][2] = struct.pack('<f', -1.0 if kind == 'neg-f32' else float('nan'))
    else:
        sys.exit('unknown kind ' + kind)
    if kind in ('odd-width', 'scale-shape'):
        idx['metadata']['total_size'] -= len(b) - len(t[name][2])
        json.dump(idx, open(os.path.join(d, 'model.safetensors.index.json'), 'w'))
    st_write(path, meta, t)


def swz(m, k, kc):
    """128x4 offset of scale [m, k] (SPEC section 5)."""
    return (m // 128) * ((kc + 3) // 4) * 512 + (k // 4) * 512 + (m % 32) * 16 + \
        ((m % 128) // 32) * 4 + (k % 4)


def requant(prep, src, layer, expert, H, I):
    fail = lambda msg: sys.exit('nvfp4_edit requant: ' + msg)
    man = json.load(open(os.path.join(prep, 'nvfp4-manifest.json')))
    _, s = st_read(shard_of(src)[1])
    _, p = st_read(shard_of(prep)[1])
    pre = 'model.layers.%d.mlp.experts' % layer
    gname, uname = '%s.%d.gate_proj' % (pre, expert), '%s.%d.up_proj' % (pre, expert)
    g2, u2 = f32(s[gname + '.weight_scale_2'][2]), f32(s[uname + '.weight_scale_2'][2])
    if not g2 < u2:
        fail('the edited up scale %r is not larger than the gate scale %r' % (u2, g2))
    want = [{'layer': 'model.layers.%d' % layer, 'expert': expert, 'member': 'gate',
             'from': g2, 'to': u2}]
    got = man['target'].get('requantized_experts')
    if got is None or len(got) != 1 or got[0]['member'] != 'gate' or \
            got[0]['expert'] != expert or str(layer) not in got[0]['layer'] or \
            struct.pack('<f', got[0]['from']) != struct.pack('<f', g2) or \
            struct.pack('<f', got[0]['to']) != struct.pack('<f', u2):
        fail('manifest reports %r, want %r' % (got, want))
    if man['summary'].get('experts_requantized') != 1:
        fail('summary %r' % man['summary'])
    alpha = p[pre + '.w13_alpha'][2]
    if alpha[4 * expert:4 * expert + 4] != struct.pack('<f', u2):
        fail('w13_alpha[%d] = %r, want the shared %r' % (expert, f32(alpha, expert), u2))
    rb, kc = H // 2, H // 16
    E = p[pre + '.w13_weight'][1][0]
    w = p[pre + '.w13_weight'][2]
    w = w[expert * 2 * I * rb:(expert + 1) * 2 * I * rb]
    sc_all = p[pre + '.w13_weight_scale']
    per = len(sc_all[2]) // E
    sc = sc_all[2][expert * per:(expert + 1) * per]
    gw, gs = s[gname + '.weight'][2], s[gname + '.weight_scale'][2]
    uw = s[uname + '.weight'][2]
    worst = 0.0
    for r in range(2 * I):
        grp, within = r // 64, r % 64
        row = (grp // 2) * 64 + within
        if grp % 2 == 0:  # up
            if w[r * rb:(r + 1) * rb] != uw[row * rb:(row + 1) * rb]:
                fail('up row %d is not the stored up row %d' % (r, row))
            continue
        for c in range(H):
            code_new = (w[r * rb + c // 2] >> (4 * (c % 2))) & 0xF
            code_old = (gw[row * rb + c // 2] >> (4 * (c % 2))) & 0xF
            bnew = e4m3(sc[swz(r, c // 16, kc)]) * u2
            new = (-1 if code_new & 8 else 1) * E2M1[code_new & 7] * bnew
            old = (-1 if code_old & 8 else 1) * E2M1[code_old & 7] * \
                e4m3(gs[row * kc + c // 16]) * g2
            if abs(new - old) > 2 * bnew * (1 + 1e-6):
                fail('gate [%d, %d]: %r re-quantized as %r, more than a step (%r)' %
                     (row, c, old, new, 2 * bnew))
            worst = max(worst, abs(new - old))
    print('requantized gate within one step; worst difference %g' % worst)


if __name__ == '__main__':
    a = sys.argv[1:]
    if a[0] == 'rescale':
        rescale(a[1], a[2], a[3])
    elif a[0] == 'malform':
        malform(a[1], a[2], a[3])
    elif a[0] == 'requant':
        requant(a[1], a[2], int(a[3]), int(a[4]), int(a[5]), int(a[6]))
    else:
        sys.exit(__doc__)
