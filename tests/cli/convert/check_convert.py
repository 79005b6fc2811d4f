#!/usr/bin/python3
"""Independent check of a `convert` output directory, Python standard library only.

Recomputes every output tensor from the source checkpoint: FP8 weights dequantized by hand
(bf16(RN(f32(fp8) * scale))), NVFP4 bytes from the second implementation in
tests/cli/quantize/ref_quant.py, gate/up sharing one global scale, fused 3-D experts split per
expert; then compares names, dtypes, shapes and bytes of every tensor, the index (every tensor
once, total_size), config.json and hf_quant_config.json.

Usage: check_convert.py SRC DST [--method M --error E --domain D --emax N]   (M: rtn, 4over6,
                                 or modelopt: RTN in ModelOpt's arithmetic)
                                [--include GLOB]... [--exclude GLOB]... [--keep-source-precision]
                                [--input-amax FILE]
"""
import argparse
import fnmatch
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'quantize'))
import ref_quant as rq  # noqa: E402

SIZES = {'BF16': 2, 'F16': 2, 'F32': 4, 'U8': 1, 'F8_E4M3': 1, 'F8_E8M0': 1, 'I32': 4, 'I64': 8}


def fail(msg):
    sys.exit('check_convert: ' + msg)


def st_read(path):
    with open(path, 'rb') as f:
        data = f.read()
    n = struct.unpack('<Q', data[:8])[0]
    if (8 + n) % 8:
        fail('%s: data area not 8-byte aligned' % path)
    hdr = json.loads(data[8:8 + n])
    meta = hdr.pop('__metadata__', None)
    out, end = {}, 0
    for name, t in hdr.items():
        b, e = t['data_offsets']
        out[name] = (t['dtype'], t['shape'], data[8 + n + b:8 + n + e])
        end = max(end, e)
    if 8 + n + end != len(data):
        fail('%s: trailing or missing bytes' % path)
    return meta, out


def read_dir(d, ours=True):
    idx = json.load(open(os.path.join(d, 'model.safetensors.index.json')))
    tensors, where = {}, {}
    for shard in sorted(set(idx['weight_map'].values())):
        meta, ts = st_read(os.path.join(d, shard))
        if ours and meta != {'format': 'pt'}:
            fail('%s: __metadata__ is %r' % (shard, meta))
        for k, v in ts.items():
            if k in tensors:
                fail('tensor %s in two shards' % k)
            tensors[k] = v
            where[k] = shard
    return idx, tensors, where


def scale_values(dtype, raw):
    if dtype == 'F8_E8M0':
        return [2.0 ** (b - 127) for b in raw]
    return rq.decode_values(dtype, raw)


def fp8_matrix(vals, r, c, scales, nsc):
    """bf16(RN(fp8 * scale)) for one [r, c] matrix whose scale list has nsc entries."""
    if nsc == 1:
        return [rq.bf16_decode(rq.bf16_encode(rq.f32(v * scales[0]))) for v in vals]
    ncb = (c + 127) // 128
    return [rq.bf16_decode(rq.bf16_encode(rq.f32(vals[i] * scales[(i // c // 128) * ncb + (i % c) // 128])))
            for i in range(r * c)]


def matrices(src, name):
    """The source tensor as a list of (rows, cols, f32 values) matrices (3-D: one per expert)."""
    dtype, shape, raw = src[name]
    vals = rq.decode_values(dtype, raw)
    mats = shape[0] if len(shape) == 3 else 1
    r, c = shape[-2], shape[-1]
    scale = None
    for sname in (name + '_scale_inv', name[:-len('weight')] + 'weight_scale' if name.endswith('weight') else None):
        if sname and sname in src and dtype == 'F8_E4M3':
            scale = scale_values(src[sname][0], src[sname][2])
    out = []
    for e in range(mats):
        v = vals[e * r * c:(e + 1) * r * c]
        if scale is not None:
            per = len(scale) // mats
            v = fp8_matrix(v, r, c, scale[e * per:(e + 1) * per], per)
        out.append((r, c, v))
    return out


def is_fused(name):
    return any(name.endswith(s) for s in ('.experts.gate_up_proj', '.experts.down_proj',
                                          '.experts.gate_up_proj.weight', '.experts.down_proj.weight'))


def quantizable(name, shape, dtype, a):
    if not any(fnmatch.fnmatch(name, g) for g in a.include):
        return False
    if any(fnmatch.fnmatch(name, g) for g in a.exclude):
        return False
    if dtype not in ('BF16', 'F16', 'F32', 'F8_E4M3') or shape[-1] % 16:
        return False
    return (len(shape) == 2 and name.endswith('.weight') and 'norm' not in name) or \
        (len(shape) == 3 and is_fused(name))


def bf16_bytes(vals):
    return struct.pack('<%dH' % len(vals), *[rq.bf16_encode(v) for v in vals])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('src')
    ap.add_argument('dst')
    ap.add_argument('--method', default='4over6')
    ap.add_argument('--error', default='mse')
    ap.add_argument('--domain', default='scaled')
    ap.add_argument('--emax', type=float, default=256.0)
    ap.add_argument('--include', action='append')
    ap.add_argument('--exclude', action='append', default=[])
    ap.add_argument('--keep-source-precision', action='store_true')
    ap.add_argument('--input-amax')
    a = ap.parse_args()
    a.include = a.include or ['*.mlp.experts.*']
    amax_in = json.load(open(a.input_amax)) if a.input_amax else {}

    _, src, _ = read_dir(a.src, ours=False)
    idx, out, where = read_dir(a.dst)
    want = {}
    linears = {}  # group key -> list of (module, rows, cols, values)
    consumed = set()
    exclude_modules = set()
    for name in sorted(src):
        dtype, shape, raw = src[name]
        if name.endswith('_scale_inv') or (name.endswith('.weight_scale') and name[:-6] in src and
                                           src[name[:-6]][0] == 'F8_E4M3'):
            continue
        if quantizable(name, shape, dtype, a):
            consumed.update({name + '_scale_inv', name + '_scale'})
            if len(shape) == 3:
                pre = name[:name.index('.experts.') + len('.experts.')]
                gate_up = 'gate_up_proj' in name
                for e, (r, c, v) in enumerate(matrices(src, name)):
                    if gate_up:
                        h = r // 2
                        linears['%s%d.fused' % (pre, e)] = [
                            ('%s%d.gate_proj' % (pre, e), h, c, v[:h * c]),
                            ('%s%d.up_proj' % (pre, e), h, c, v[h * c:])]
                    else:
                        linears['%s%d.down' % (pre, e)] = [('%s%d.down_proj' % (pre, e), r, c, v)]
            else:
                r, c, v = matrices(src, name)[0]
                key = list(rq.groups_of([name]))[0]
                linears.setdefault(key, []).append((name[:-len('.weight')], r, c, v))
            continue
        has_scale = name + '_scale_inv' in src or (name.endswith('.weight') and name + '_scale' in src)
        if dtype == 'F8_E4M3' and has_scale and not a.keep_source_precision:
            consumed.update({name + '_scale_inv', name + '_scale', name[:-6] + 'input_scale'})
            vals = [x for _, _, v in matrices(src, name) for x in v]
            want[name] = ('BF16', shape, bf16_bytes(vals))
        else:
            want[name] = (dtype, shape, raw)
        if name.endswith('.weight') and len(shape) == 2 and 'norm' not in name and \
                'embed' not in name and not (dtype == 'F8_E4M3' and has_scale):
            exclude_modules.add(name[:-len('.weight')])
    for name in src:
        if name not in want and name not in consumed and (name.endswith('_scale_inv') or name.endswith('.weight_scale')):
            want[name] = src[name]
    for key, members in linears.items():
        amax = max(abs(x) for m in members for x in m[3])
        gs, meth, s2 = rq.group_scale(amax, a.method, a.emax)
        s2 = struct.pack('<f', s2)
        ia = max([amax_in[m[0]] for m in members if m[0] in amax_in] or [0])
        isc = struct.pack('<f', rq.f32(rq.f32(ia) / 2688.0) if ia else 1.0)
        for module, r, c, v in members:
            packed, scales = rq.quantize([v[i * c:(i + 1) * c] for i in range(r)], gs, meth,
                                         a.error, a.domain)
            want[module + '.weight'] = ('U8', [r, c // 2], packed)
            want[module + '.weight_scale'] = ('F8_E4M3', [r, c // 16], scales)
            want[module + '.weight_scale_2'] = ('F32', [], s2)
            want[module + '.input_scale'] = ('F32', [], isc)

    if set(want) != set(out):
        fail('tensor sets differ: missing %s, extra %s' % (sorted(set(want) - set(out))[:5],
                                                           sorted(set(out) - set(want))[:5]))
    for n in sorted(want):
        if list(want[n][1]) != list(out[n][1]) or want[n][0] != out[n][0]:
            fail('%s: %s %s, expected %s %s' % (n, out[n][0], out[n][1], want[n][0], want[n][1]))
        if want[n][2] != out[n][2]:
            fail('%s: bytes differ' % n)
    # index
    wm = idx['weight_map']
    if set(wm) != set(out) or any(wm[k] != where[k] for k in wm):
        fail('index weight_map does not name every tensor once with its shard')
    total = sum(len(t[2]) for t in out.values())
    if idx['metadata']['total_size'] != total:
        fail('total_size %s, expected %d' % (idx['metadata']['total_size'], total))
    # configs
    hq = json.load(open(os.path.join(a.dst, 'hf_quant_config.json')))
    q = hq['quantization']
    mixed = a.keep_source_precision and any(t[0] == 'F8_E4M3' for t in out.values())
    if q['quant_algo'] != ('MIXED_PRECISION' if mixed else 'NVFP4') or q['group_size'] != 16 or \
            q['kv_cache_quant_algo'] is not None or hq['producer']['name'] != 'nvfp4tool':
        fail('hf_quant_config.json: %r' % hq)
    if not q['exclude_modules'] or not exclude_modules <= set(q['exclude_modules']):
        fail('exclude_modules %r lacks %r' % (q['exclude_modules'],
                                              sorted(exclude_modules - set(q['exclude_modules']))))
    converted = {n[:-len('.weight_scale_2')] for n in out if n.endswith('.weight_scale_2')}
    if converted & set(q['exclude_modules']):
        fail('a converted module is excluded')
    if mixed and set(q['quantized_layers']) < converted:
        fail('quantized_layers lacks converted modules')
    cfg = json.load(open(os.path.join(a.dst, 'config.json')))
    scfg = json.load(open(os.path.join(a.src, 'config.json')))
    qc = cfg['quantization_config']
    if qc['quant_method'] != 'modelopt' or qc['quant_algo'] != q['quant_algo'] or \
            qc['group_size'] != 16 or qc['ignore'] != q['exclude_modules'] or \
            qc['config_groups']['group_0']['weights']['num_bits'] != 4 or 'producer' not in qc:
        fail('config.json quantization_config: %r' % qc)
    def expected(c):
        # parallelism plans lose the entries naming FP8 scale parameters unless FP8 is kept
        e = {}
        for k, v in c.items():
            if k == 'text_config' and isinstance(v, dict):
                v = expected(v)
            elif k.endswith('_plan') and isinstance(v, dict) and not mixed:
                v = {pk: pv for pk, pv in v.items() if not pk.endswith('_scale_inv')}
            e[k] = v
        return e
    for k, v in expected(scfg).items():
        if k != 'quantization_config' and cfg.get(k) != v:
            fail('config.json: %s is %r, expected %r' % (k, cfg.get(k), v))
    for k in cfg:
        if k not in scfg and k != 'quantization_config':
            fail('config.json: %s added' % k)
    print('ok: %d tensors, %d converted linears' % (len(out), len(converted)))


if __name__ == '__main__':
    main()
