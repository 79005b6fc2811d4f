#!/usr/bin/python3
"""Independent check of a prepared conversion against the modelopt conversion of the same
source (Python standard library only; the layout formulas are typed here from SPEC section 5,
not taken from the tool).

  check_prepared.py compare PREP MODELOPT --precision w4a16|w4a4 --layout 128x4|8x4
      PREP is one rank directory (or an --ep 1 DST). Every expert tensor of the rank is checked
      against MODELOPT's per-expert linears: w13 rows one by one (up/gate in 64-row groups),
      scales un-swizzled and compared, padding bytes zero, alpha, input scales; every other
      tensor of MODELOPT must be in PREP with the same bytes (dense converted linears: weight
      equal, scales laid out, alpha); PREP holds nothing else.
  check_prepared.py ranks EP1 EPN N
      The N rank directories of EPN concatenated along the expert dimension equal EP1; every
      other tensor is the same in every rank.
"""
import json
import os
import struct
import sys

SIZES = {'BF16': 2, 'F16': 2, 'F32': 4, 'U8': 1, 'F8_E4M3': 1, 'I32': 4, 'I64': 8}


def fail(msg):
    sys.exit('check_prepared: ' + msg)


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


def read_dir(d):
    idx = json.load(open(os.path.join(d, 'model.safetensors.index.json')))
    tensors = {}
    total = 0
    for shard in sorted(set(idx['weight_map'].values())):
        for k, v in st_read(os.path.join(d, shard)).items():
            if k in tensors:
                fail('%s: tensor %s in two shards' % (d, k))
            if idx['weight_map'].get(k) != shard:
                fail('%s: index puts %s in %s, not %s' % (d, k, idx['weight_map'].get(k), shard))
            tensors[k] = v
            total += len(v[2])
    if set(idx['weight_map']) != set(tensors):
        fail('%s: index and shards name different tensors' % d)
    if idx['metadata']['total_size'] != total:
        fail('%s: total_size %d, tensors hold %d bytes' % (d, idx['metadata']['total_size'], total))
    return tensors


def f32(b, i=0):
    return struct.unpack_from('<f', b, 4 * i)[0]


def f32_round(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


def pad(x, t):
    return (x + t - 1) // t * t


def tile_rows(layout):
    return 128 if layout == '128x4' else 8


def offset(layout, m, k, kcols):
    """SPEC section 5: 128x4 and 8x4 swizzled offsets of scale (m, k)."""
    kt = (kcols + 3) // 4
    if layout == '128x4':
        return (m // 128) * kt * 512 + (k // 4) * 512 + (m % 32) * 16 + ((m % 128) // 32) * 4 + k % 4
    return (m // 8) * kt * 32 + (k // 4) * 32 + (m % 8) * 4 + k % 4


def check_scales(what, got, rows, kcols, layout, row_scale):
    """got: one matrix's laid-out scales; row_scale(m): the kcols linear scale bytes of row m."""
    want_len = pad(rows, tile_rows(layout)) * pad(kcols, 4)
    if len(got) != want_len:
        fail('%s: %d scale bytes, expected %d' % (what, len(got), want_len))
    used = bytearray(len(got))
    for m in range(rows):
        src = row_scale(m)
        for k in range(kcols):
            o = offset(layout, m, k, kcols)
            if got[o] != src[k]:
                fail('%s: scale (%d, %d) at offset %d is 0x%02x, expected 0x%02x'
                     % (what, m, k, o, got[o], src[k]))
            used[o] = 1
    for o in range(len(got)):
        if not used[o] and got[o] != 0:
            fail('%s: padding byte %d is 0x%02x' % (what, o, got[o]))


def w13_source(r):
    """SPEC section 5: rows [up 0:64, gate 0:64, up 64:128, ...]: (proj, row)."""
    g = r // 64
    return ('up' if g % 2 == 0 else 'gate'), (g // 2) * 64 + r % 64


def names_of(mo, base, e):
    for gate, up, down in (('gate_proj', 'up_proj', 'down_proj'), ('w1', 'w3', 'w2')):
        if '%s.%d.%s.weight' % (base, e, gate) in mo:
            return {'gate': '%s.%d.%s' % (base, e, gate), 'up': '%s.%d.%s' % (base, e, up),
                    'down': '%s.%d.%s' % (base, e, down)}
    fail('modelopt output has no expert %d under %s' % (e, base))


def compare(prep_dir, mo_dir, precision, layout):
    prep, mo = read_dir(prep_dir), read_dir(mo_dir)
    cfg = json.load(open(os.path.join(prep_dir, 'config.json')))
    q = cfg['quantization_config']
    if q['quant_method'] != 'nvfp4tool-prepared' or q['layout'] != 'flashinfer-cutedsl-nvfp4-v1' \
            or q['precision'] != precision or q['scale_layout'] != layout or q['group_size'] != 16:
        fail('%s: config.json quantization_config %r' % (prep_dir, q))
    first, count = q['expert_range']
    if os.path.exists(os.path.join(prep_dir, 'hf_quant_config.json')):
        fail('%s: a prepared checkpoint has no hf_quant_config.json' % prep_dir)
    w4a4 = precision == 'w4a4'
    seen = set()
    layers = [k[:-len('.w13_weight')] for k in prep if k.endswith('.w13_weight')]
    if not layers:
        fail('%s: no w13_weight' % prep_dir)
    for P in sorted(layers):
        _, sh13, w13 = prep[P + '.w13_weight']
        Er, I2, Hh = sh13
        I, H = I2 // 2, Hh * 2
        if Er != count:
            fail('%s: %d experts, config says %d' % (P, Er, count))
        names = [P + s for s in ('.w13_weight', '.w13_weight_scale', '.w13_alpha', '.w2_weight',
                                 '.w2_weight_scale', '.w2_alpha')]
        if w4a4:
            names += [P + '.w13_input_scale', P + '.fc2_input_scale']
        for n in names:
            if n not in prep:
                fail('%s missing' % n)
            seen.add(n)
        dt, sh, s13 = prep[P + '.w13_weight_scale']
        if dt != 'F8_E4M3' or sh != [Er, pad(I2, tile_rows(layout)), pad(H // 16, 4)]:
            fail('%s.w13_weight_scale: %s %r' % (P, dt, sh))
        dt, sh, s2 = prep[P + '.w2_weight_scale']
        if dt != 'F8_E4M3' or sh != [Er, pad(H, tile_rows(layout)), pad(I // 16, 4)]:
            fail('%s.w2_weight_scale: %s %r' % (P, dt, sh))
        if prep[P + '.w2_weight'][1] != [Er, H, I // 2]:
            fail('%s.w2_weight shape %r' % (P, prep[P + '.w2_weight'][1]))
        if prep[P + '.w13_alpha'][1] != [Er] or prep[P + '.w2_alpha'][1] != [Er]:
            fail('%s: alpha shapes' % P)
        a13, a2 = prep[P + '.w13_alpha'][2], prep[P + '.w2_alpha'][2]
        s13_per, s2_per = len(s13) // Er, len(s2) // Er
        fc2 = 0.0
        for k in range(Er):
            e = first + k
            nm = names_of(mo, P, e)
            mw = {p: mo[nm[p] + '.weight'][2] for p in nm}
            ms = {p: mo[nm[p] + '.weight_scale'][2] for p in nm}
            ws2 = {p: f32(mo[nm[p] + '.weight_scale_2'][2]) for p in nm}
            ins = {p: f32(mo[nm[p] + '.input_scale'][2]) for p in nm}
            if ws2['gate'] != ws2['up']:
                fail('%s expert %d: modelopt gate/up weight_scale_2 differ' % (P, e))
            base = k * I2 * Hh
            for r in range(I2):
                proj, i = w13_source(r)
                got = w13[base + r * Hh: base + (r + 1) * Hh]
                if got != mw[proj][i * Hh:(i + 1) * Hh]:
                    fail('%s expert %d: w13 row %d is not %s row %d' % (P, e, r, proj, i))
            kc = H // 16
            check_scales('%s.w13_weight_scale[%d]' % (P, k), s13[k * s13_per:(k + 1) * s13_per],
                         I2, kc, layout,
                         lambda m: (lambda pr, i: ms[pr][i * kc:(i + 1) * kc])(*w13_source(m)))
            w2 = prep[P + '.w2_weight'][2]
            if w2[k * H * (I // 2):(k + 1) * H * (I // 2)] != mw['down']:
                fail('%s expert %d: w2_weight differs from %s.weight' % (P, e, nm['down']))
            kd = I // 16
            check_scales('%s.w2_weight_scale[%d]' % (P, k), s2[k * s2_per:(k + 1) * s2_per],
                         H, kd, layout, lambda m: ms['down'][m * kd:(m + 1) * kd])
            want13 = f32_round(ins['gate'] * ws2['gate']) if w4a4 else ws2['gate']
            want2 = f32_round(ins['down'] * ws2['down']) if w4a4 else ws2['down']
            if f32(a13, k) != want13 or f32(a2, k) != want2:
                fail('%s expert %d: alpha %r %r, expected %r %r'
                     % (P, e, f32(a13, k), f32(a2, k), want13, want2))
            if w4a4 and f32(prep[P + '.w13_input_scale'][2], k) != ins['gate']:
                fail('%s expert %d: w13_input_scale' % (P, e))
            fc2 = max(fc2, ins['down'])
            for p in nm:
                for suf in ('.weight', '.weight_scale', '.weight_scale_2', '.input_scale'):
                    seen.add(('mo', nm[p] + suf))
        if w4a4 and (prep[P + '.fc2_input_scale'][1] != [1] or
                     f32(prep[P + '.fc2_input_scale'][2]) != fc2):
            fail('%s.fc2_input_scale is not the largest down input_scale %r' % (P, fc2))
    # Everything else: dense converted linears, and tensors kept as modelopt writes them.
    for name, (dt, sh, data) in mo.items():
        if ('mo', name) in seen:
            continue
        if '.experts.' in name and any(name.startswith(P + '.') for P in layers):
            continue  # another rank's expert
        if name.endswith('.weight_scale_2') or name.endswith('.input_scale') or \
                name.endswith('.weight_scale'):
            continue  # checked with their weight below
        if name[:-len('.weight')] + '.weight_scale_2' in mo:
            X = name[:-len('.weight')]
            for n in (X + '.weight', X + '.weight_scale', X + '.alpha'):
                if n not in prep:
                    fail('%s missing' % n)
                seen.add(n)
            if prep[X + '.weight'][2] != data:
                fail('%s.weight differs' % X)
            rows, kc = sh[0], sh[1] * 2 // 16
            ms = mo[X + '.weight_scale'][2]
            check_scales(X + '.weight_scale', prep[X + '.weight_scale'][2], rows, kc, layout,
                         lambda m: ms[m * kc:(m + 1) * kc])
            ws2, ins = f32(mo[X + '.weight_scale_2'][2]), f32(mo[X + '.input_scale'][2])
            want = f32_round(ins * ws2) if w4a4 else ws2
            if prep[X + '.alpha'][1] != [1] or f32(prep[X + '.alpha'][2]) != want:
                fail('%s.alpha' % X)
            if w4a4:
                seen.add(X + '.input_scale')
                if f32(prep[X + '.input_scale'][2]) != ins:
                    fail('%s.input_scale' % X)
            continue
        if name not in prep or prep[name] != (dt, sh, data):
            fail('%s: not as modelopt writes it' % name)
        seen.add(name)
    extra = sorted(set(prep) - seen)
    if extra:
        fail('%s holds tensors not checked: %s' % (prep_dir, extra[:5]))
    return len(layers)


def ranks(ep1, epn, n):
    one = read_dir(ep1)
    parts = [read_dir(os.path.join(epn, 'rank-%05d-of-%05d' % (r, n))) for r in range(n)]
    for name, (dt, sh, data) in one.items():
        got = [p.get(name) for p in parts]
        if any(g is None for g in got):
            fail('%s missing in a rank' % name)
        if name.endswith('.fc2_input_scale'):
            if max(f32(g[2]) for g in got) != f32(data):
                fail('%s: ranks do not give the --ep 1 value' % name)
            continue
        per_expert = any(name.endswith(s) for s in (
            '.w13_weight', '.w13_weight_scale', '.w13_alpha', '.w13_input_scale', '.w2_weight',
            '.w2_weight_scale', '.w2_alpha'))
        if per_expert:
            if [g[1][0] for g in got] != [sh[0] // n] * n or any(g[1][1:] != sh[1:] for g in got):
                fail('%s: rank shapes %r for %r' % (name, [g[1] for g in got], sh))
            if b''.join(g[2] for g in got) != data:
                fail('%s: ranks concatenated differ from --ep 1' % name)
        elif any(g != (dt, sh, data) for g in got):
            fail('%s differs between a rank and --ep 1' % name)
    for r, p in enumerate(parts):
        if set(p) != set(one):
            fail('rank %d names other tensors than --ep 1' % r)
        q = json.load(open(os.path.join(epn, 'rank-%05d-of-%05d' % (r, n), 'config.json')))
        q = q['quantization_config']
        if q['ep_size'] != n or q['ep_rank'] != r:
            fail('rank %d config: %r' % (r, q))


def main():
    a = sys.argv[1:]
    if len(a) >= 3 and a[0] == 'compare':
        prec = a[a.index('--precision') + 1]
        layout = a[a.index('--layout') + 1]
        n = compare(a[1], a[2], prec, layout)
        print('%s: %d MoE layers match the modelopt conversion' % (a[1], n))
    elif len(a) == 4 and a[0] == 'ranks':
        ranks(a[1], a[2], int(a[3]))
        print('%s: %s ranks concatenated equal %s' % (a[2], a[3], a[1]))
    else:
        fail('usage: see the docstring')


if __name__ == '__main__':
    main()
