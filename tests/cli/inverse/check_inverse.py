#!/usr/bin/python3
"""Independent checks of the inverse of the prepared targets (Python standard library only).

  check_inverse.py tensors A B [EXCEPT...]
      The checkpoints A and B (directories: index and shards) hold the same tensors: names,
      dtypes, shapes and data bytes (the tensors EXCEPT: names, dtypes and shapes only).
  check_inverse.py same A NAME1 NAME2
      Tensors NAME1 and NAME2 of A have the same dtype, shape and bytes.
  check_inverse.py files A B
      Every file of A but nvfp4-manifest.json (which records the source it was made from) is in
      B with the same bytes, and B has no other file but its manifest.
  check_inverse.py mixtral SRC DST
      A copy of the Qwen-named checkpoint SRC with Mixtral's names: mlp.experts.{e}.gate_proj /
      up_proj / down_proj -> block_sparse_moe.experts.{e}.w1 / w3 / w2, mlp.gate ->
      block_sparse_moe.gate (tensors, index, module lists of the configs); model_type mixtral.
  check_inverse.py tamper PREP
      Change one recorded weight_scale_2 of PREP's nvfp4-inverse.json (its lowest bit).
  check_inverse.py downgrade PREP
      Make PREP's nvfp4-inverse.json a record_version 1 record (no "modelopt_jobs").
  check_inverse.py misorder PREP
      Drop the last tensor name of the last job of PREP's "modelopt_jobs".
  check_inverse.py forget PREP [INPUT_HEX]
      Make every recorded weight_scale_2 of PREP null (what a record of an earlier version kept for
      shards it did not compute); with INPUT_HEX, also set expert 0's down input_scale.
"""
import json
import os
import re
import struct
import sys


def fail(msg):
    sys.exit('check_inverse: ' + msg)


def st_read(path):
    with open(path, 'rb') as f:
        data = f.read()
    n = struct.unpack('<Q', data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    meta = hdr.pop('__metadata__', None)
    out = {}
    for name, t in hdr.items():
        b, e = t['data_offsets']
        out[name] = (t['dtype'], t['shape'], data[8 + n + b:8 + n + e])
    return out, meta


def ckpt(d):
    idx = json.load(open(os.path.join(d, 'model.safetensors.index.json')))
    out = {}
    for f in sorted(set(idx['weight_map'].values())):
        t, _ = st_read(os.path.join(d, f))
        for k, v in t.items():
            if k in out:
                fail('%s: %s twice' % (d, k))
            if idx['weight_map'].get(k) != f:
                fail('%s: index puts %s elsewhere than %s' % (d, k, f))
            out[k] = v
    if set(out) != set(idx['weight_map']):
        fail('%s: index and shards differ' % d)
    return out


def tensors(a, b, *skip):
    ta, tb = ckpt(a), ckpt(b)
    if set(ta) != set(tb):
        fail('tensor names differ: only in %s: %s; only in %s: %s' % (
            a, sorted(set(ta) - set(tb))[:5], b, sorted(set(tb) - set(ta))[:5]))
    for k in sorted(ta):
        if ta[k][:2] != tb[k][:2]:
            fail('%s: %s %s in %s, %s %s in %s' % (k, *ta[k][:2], a, *tb[k][:2], b))
        if ta[k][2] != tb[k][2] and k not in skip:
            i = next(i for i in range(len(ta[k][2])) if ta[k][2][i] != tb[k][2][i])
            fail('%s: bytes differ at %d' % (k, i))
    print('%d tensors equal' % len(ta))


def files(a, b):
    fa = sorted(f for f in os.listdir(a) if f != 'nvfp4-manifest.json')
    fb = sorted(f for f in os.listdir(b) if f != 'nvfp4-manifest.json')
    if fa != fb:
        fail('files differ: %s vs %s' % (fa, fb))
    for f in fa:
        if open(os.path.join(a, f), 'rb').read() != open(os.path.join(b, f), 'rb').read():
            fail('%s differs' % f)
    print('%d files equal' % len(fa))


MIX = [(r'\.mlp\.experts\.(\d+)\.gate_proj', r'.block_sparse_moe.experts.\1.w1'),
       (r'\.mlp\.experts\.(\d+)\.up_proj', r'.block_sparse_moe.experts.\1.w3'),
       (r'\.mlp\.experts\.(\d+)\.down_proj', r'.block_sparse_moe.experts.\1.w2'),
       (r'\.mlp\.gate\b', r'.block_sparse_moe.gate')]


def rename(s):
    for a, b in MIX:
        s = re.sub(a, b, s)
    return s


def rename_doc(x):
    if isinstance(x, str):
        return rename(x)
    if isinstance(x, list):
        return [rename_doc(v) for v in x]
    if isinstance(x, dict):
        return {k: rename_doc(v) for k, v in x.items()}
    return x


def st_write(path, tensors):
    hdr, off = {'__metadata__': {'format': 'pt'}}, 0
    for k in sorted(tensors):
        dt, shape, data = tensors[k]
        hdr[k] = {'dtype': dt, 'shape': shape, 'data_offsets': [off, off + len(data)]}
        off += len(data)
    h = json.dumps(hdr, separators=(',', ':')).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h)
        for k in sorted(tensors):
            f.write(tensors[k][2])


def mixtral(src, dst):
    os.makedirs(dst)
    t = {rename(k): v for k, v in ckpt(src).items()}
    st_write(os.path.join(dst, 'model.safetensors'), t)
    json.dump({'metadata': {'total_size': sum(len(v[2]) for v in t.values())},
               'weight_map': {k: 'model.safetensors' for k in sorted(t)}},
              open(os.path.join(dst, 'model.safetensors.index.json'), 'w'), indent=2)
    for f in ('config.json', 'hf_quant_config.json'):
        p = os.path.join(src, f)
        if os.path.exists(p):
            doc = rename_doc(json.load(open(p)))
            if f == 'config.json':
                doc['model_type'] = 'mixtral'
                doc['architectures'] = ['MixtralForCausalLM']
                doc['num_local_experts'] = doc.get('num_experts')
                doc['num_experts_per_tok'] = doc.get('num_experts_per_tok', 2)
            json.dump(doc, open(os.path.join(dst, f), 'w'), indent=2)
    n = sum(1 for k in t if '.block_sparse_moe.experts.' in k and k.endswith('.w1.weight'))
    print('%d Mixtral-named experts' % n)


def same(a, n1, n2):
    t = ckpt(a)
    if t[n1] != t[n2]:
        fail('%s and %s differ' % (n1, n2))
    print('%s = %s' % (n1, n2))


def tamper(prep):
    p = os.path.join(prep, 'nvfp4-inverse.json')
    doc = json.load(open(p))
    m = doc['layers'][0]['experts'][0]['down']
    m['weight_scale_2'] = '0x%08x' % (int(m['weight_scale_2'], 16) ^ 1)
    json.dump(doc, open(p, 'w'))
    print('tampered %s' % m['module'])


def downgrade(prep):
    p = os.path.join(prep, 'nvfp4-inverse.json')
    doc = json.load(open(p))
    if doc.get('record_version') != 2 or 'modelopt_jobs' not in doc:
        fail('%s is not a record_version 2 record' % p)
    del doc['modelopt_jobs']
    doc['record_version'] = 1
    json.dump(doc, open(p, 'w'))
    print('downgraded %s' % p)


def misorder(prep):
    p = os.path.join(prep, 'nvfp4-inverse.json')
    doc = json.load(open(p))
    jobs = [j for j in doc['modelopt_jobs'] if len(j) > 1]
    if not jobs:
        fail('%s: no job with two tensors' % p)
    print('dropped %s' % jobs[-1].pop())
    json.dump(doc, open(p, 'w'))


def forget(prep, input_hex=None):
    p = os.path.join(prep, 'nvfp4-inverse.json')
    doc = json.load(open(p))
    n = 0
    for layer in doc['layers']:
        for x in layer['experts']:
            for m in x.values():
                m['weight_scale_2'] = None
                n += 1
    for m in doc['dense']:
        m['weight_scale_2'] = None
        n += 1
    if input_hex:
        doc['layers'][0]['experts'][0]['down']['input_scale'] = input_hex
    json.dump(doc, open(p, 'w'))
    print('%d weight_scale_2 forgotten' % n)


def main(argv):
    cmds = {'tensors': (tensors, 2), 'files': (files, 2), 'mixtral': (mixtral, 2),
            'tamper': (tamper, 1), 'forget': (forget, 1), 'downgrade': (downgrade, 1),
            'misorder': (misorder, 1)}
    if argv[1:2] == ['forget'] and len(argv) == 4:
        return forget(argv[2], argv[3])
    if argv[1:2] == ['tensors'] and len(argv) > 4:
        return tensors(*argv[2:])
    if argv[1:2] == ['same'] and len(argv) == 5:
        return same(*argv[2:])
    if len(argv) < 2 or argv[1] not in cmds or len(argv) != 2 + cmds[argv[1]][1]:
        fail(__doc__)
    cmds[argv[1]][0](*argv[2:])


if __name__ == '__main__':
    main(sys.argv)
