#!/usr/bin/env python3
"""Writes the malformed safetensors files of tests/data/invalid/ (stdlib only).

Each file breaks exactly one rule of SPEC section 3; tests/unit/test_safetensors.c holds the
table of the phrase the reader's message must contain for each. The cases follow the
safetensors reference implementation's own tests (header too small/large, past the end,
not UTF-8, not JSON, not an object, overlapping/gapped/reversed offsets, trailing/missing
bytes, shape overflow, size mismatch) plus the stricter rules of this project.

    python3 make_invalid.py            # (re)write the files next to this script
    python3 make_invalid.py --corpus D # also write valid seeds and copies into fuzz corpus D
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def st(header, data=b"", n=None):
    """A file: 8-byte little-endian length, header bytes (str or bytes), data."""
    if isinstance(header, str):
        header = header.encode("utf-8")
    return struct.pack("<Q", len(header) if n is None else n) + header + data


def t(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def js(obj):
    return json.dumps(obj, separators=(",", ":"))


CASES = {
    # The reference implementation's cases.
    "header_too_small": b"\x05\x00\x00\x00\x00",
    "header_too_large": st(b"{}", n=100_000_001),
    "header_past_eof": st(b"{}" + b" " * 90, n=512),
    "header_not_utf8": st(b'{"a\xff":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'),
    "header_not_json": st("{not json}"),
    "header_not_object": st("[1, 2]"),
    "offsets_overlap": st(js({"a": t("U8", [8], 0, 8), "b": t("U8", [8], 4, 12)}), bytes(12)),
    "offsets_gap": st(js({"a": t("U8", [8], 0, 8), "b": t("U8", [4], 12, 16)}), bytes(16)),
    "offsets_reversed": st(js({"a": t("U8", [4], 8, 4)}), bytes(8)),
    "trailing_bytes": st(js({"a": t("U8", [4], 0, 4)}), bytes(8)),
    "missing_bytes": st(js({"a": t("U8", [8], 0, 8), "b": t("U8", [8], 8, 16)}), bytes(8)),
    "shape_overflow": st(js({"a": t("BF16", [2**40, 2**40], 0, 2)}), bytes(2)),
    "size_mismatch": st(js({"a.weight": t("BF16", [2, 3], 0, 10)}), bytes(10)),
    # UTF-8 details: an overlong '/', a UTF-16 surrogate, a code point above U+10FFFF.
    "utf8_overlong": st(b'{"\xc0\xaf":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'),
    "utf8_surrogate": st(b'{"\xed\xa0\x80":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'),
    "utf8_above_max": st(b'{"\xf4\x90\x80\x80":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'),
    # JSON text details that a lenient parser accepts.
    "header_nul_byte": st(b"{}\x00 "),
    "header_control_char": st(b"\x0c{}"),
    "header_escaped_nul": st(js({"a\u0000b": t("U8", [0], 0, 0)})),
    "header_trailing_garbage": st("{} x"),
    "header_empty": st(""),
    # Entries.
    "duplicate_name": st('{"x":%s,"x":%s}' % (js(t("U8", [4], 0, 4)), js(t("U8", [4], 4, 8))),
                         bytes(8)),
    "duplicate_metadata": st('{"__metadata__":{"a":"1"},"__metadata__":{"b":"2"}}'),
    "duplicate_metadata_key": st('{"__metadata__":{"a":"1","a":"2"}}'),
    "duplicate_field": st('{"x":{"dtype":"U8","dtype":"I8","shape":[4],"data_offsets":[0,4]}}',
                          bytes(4)),
    "unknown_dtype": st(js({"x": t("F128", [1], 0, 16)}), bytes(16)),
    "metadata_not_string": st(js({"__metadata__": {"format": 1}})),
    "metadata_not_object": st(js({"__metadata__": ["pt"]})),
    "entry_not_object": st(js({"x": 5})),
    "dtype_not_string": st(js({"x": {"dtype": 8, "shape": [1], "data_offsets": [0, 1]}}),
                           bytes(1)),
    "shape_not_array": st(js({"x": {"dtype": "U8", "shape": 4, "data_offsets": [0, 4]}}),
                          bytes(4)),
    "missing_field": st(js({"x": {"dtype": "U8", "shape": [4]}}), bytes(4)),
    "extra_field": st(js({"x": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4],
                                "extra": 1}}), bytes(4)),
    "offsets_not_pair": st(js({"x": {"dtype": "U8", "shape": [4], "data_offsets": [4]}}),
                           bytes(4)),
    "too_many_dims": st(js({"x": t("U8", [1] * 9, 0, 1)}), bytes(1)),
    # Numbers: negative, fractional, above 2^53, and integral values not written as integers.
    "negative_dim": st(js({"x": t("U8", [-1], 0, 0)})),
    "negative_offset": st(js({"x": t("U8", [0], -1, 0)})),
    "fractional_dim": st('{"x":{"dtype":"U8","shape":[2.5],"data_offsets":[0,2]}}', bytes(2)),
    "number_too_large": st('{"x":{"dtype":"U8","shape":[18446744073709551616],'
                           '"data_offsets":[0,0]}}'),
    "number_above_2p53": st('{"x":{"dtype":"U8","shape":[9007199254740993],'
                            '"data_offsets":[0,9007199254740992]}}'),
    "number_with_fraction": st('{"x":{"dtype":"U8","shape":[2.0],"data_offsets":[0,2]}}',
                               bytes(2)),
    "number_with_exponent": st('{"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2e0]}}',
                               bytes(2)),
    # Sizes.
    "f4_odd_count": st(js({"x": t("F4", [3], 0, 2)}), bytes(2)),
    "bytes_overflow": st(js({"x": t("F32", [2**32, 2**31], 0, 4)}), bytes(4)),
    "empty_with_trailing": st("{}", bytes(4)),
    # The rest of issue 14's list: a header length that overflows 8 + N, offsets that are
    # fractional, above 2^53 or past the end of the file, and a well-formed file cut short.
    "header_length_max": st(b"{}", n=2**64 - 1),
    "offset_fractional": st('{"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2.5]}}', bytes(2)),
    # (the shape makes the end's double value, 2^53, consistent: only its text is wrong)
    "offset_above_2p53": st('{"x":{"dtype":"U8","shape":[9007199254740992],'
                            '"data_offsets":[0,9007199254740993]}}', bytes(1)),
    "offsets_past_eof": st(js({"x": t("U8", [64], 0, 64)}), bytes(16)),
    "truncated_file": st(js({"__metadata__": {"format": "pt"}, "a": t("BF16", [4], 0, 8),
                             "b": t("F32", [4], 8, 24)}), bytes(range(24)))[:-3],
}


def valid_seeds():
    """Small well-formed files for the fuzz corpus."""
    hdr = js({"__metadata__": {"format": "pt"}, "w": t("BF16", [2, 2], 0, 8),
              "s": t("F32", [], 8, 12), "z": t("F4", [0, 4], 12, 12), "b": t("BOOL", [4], 12, 16)})
    hdr += " " * (-(8 + len(hdr)) % 8)
    return {
        "valid_small": st(hdr, bytes(range(16))),
        "valid_empty": st("{}"),
        "valid_spaces": st("  {\"a\":%s}\n\t" % js(t("U8", [1], 0, 1)), b"\x07"),
    }


def main():
    for name, blob in CASES.items():
        with open(os.path.join(HERE, name + ".safetensors"), "wb") as f:
            f.write(blob)
    if len(sys.argv) == 3 and sys.argv[1] == "--corpus":
        os.makedirs(sys.argv[2], exist_ok=True)
        for name, blob in list(CASES.items()) + list(valid_seeds().items()):
            with open(os.path.join(sys.argv[2], name), "wb") as f:
                f.write(blob)


if __name__ == "__main__":
    main()
