#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_gguf (fuzz/corpus/): small hand-built GGUF
files covering every metadata value type, nested arrays, versions 1-3, all
block types Nexus knows, a vocab-only file, and a few broken ones.

Usage: fuzz/make_corpus.py [OUT_DIR]   (default: fuzz/corpus next to this file)
Optional: pass --stories PATH to also write a 16 KiB prefix of a real model
(metadata intact, tensor data cut off) as a truncation seed.
The files are committed; rerun only to change the seeds.
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
          F32: "<f", BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
# ggml type id -> (block size, bytes per block)
GGML = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
        8: (32, 34), 9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144),
        13: (256, 176), 14: (256, 210), 15: (256, 292), 20: (32, 18), 23: (256, 136), 24: (1, 1), 25: (1, 2),
        26: (1, 4), 27: (1, 8), 28: (1, 8), 30: (1, 2)}


class Writer:
    def __init__(self, version=3):
        self.version = version
        self.cnt = "<I" if version == 1 else "<Q"

    def count(self, n):
        return struct.pack(self.cnt, n)

    def string(self, s):
        b = s.encode() if isinstance(s, str) else s
        return self.count(len(b)) + b

    def value(self, t, v):
        if t == STR:
            return self.string(v)
        if t == ARR:
            et, items = v
            return struct.pack("<I", et) + self.count(len(items)) + b"".join(self.value(et, x) for x in items)
        return struct.pack(SCALAR[t], v)

    def file(self, kvs, tensors, alignment=32):
        """kvs: [(key, type, value)]; tensors: [(name, ne, ggml_type)]."""
        out = b"GGUF" + struct.pack("<I", self.version) + self.count(len(tensors)) + self.count(len(kvs))
        for k, t, v in kvs:
            out += self.string(k) + struct.pack("<I", t) + self.value(t, v)
        datas, off = [], 0
        for name, ne, gt in tensors:
            bs, ts = GGML[gt]
            n = 1
            for d in ne:
                n *= d
            size = n // bs * ts
            out += self.string(name) + struct.pack("<I", len(ne))
            out += b"".join(self.count(d) for d in ne)
            out += struct.pack("<IQ", gt, off)
            datas.append(bytes((i * 7 + 3) & 0xFF for i in range(size)))
            off += (size + alignment - 1) // alignment * alignment
        out += b"\0" * (-len(out) % alignment)
        for d in datas:
            out += d + b"\0" * (-len(d) % alignment)
        return out


def every_type_kvs():
    return [
        ("general.architecture", STR, "llama"),
        ("test.u8", U8, 200), ("test.i8", I8, -100), ("test.u16", U16, 60000),
        ("test.i16", I16, -30000), ("test.u32", U32, 4000000000), ("test.i32", I32, -2000000000),
        ("test.f32", F32, 1.5), ("test.bool", BOOL, True), ("test.str", STR, "h\u00e9llo\n"),
        ("test.u64", U64, 2**64 - 1), ("test.i64", I64, -2**63), ("test.f64", F64, -2.25),
        ("test.arr_i32", ARR, (I32, [1, -2, 3])),
        ("test.arr_f32", ARR, (F32, [0.5, -0.25])),
        ("test.arr_str", ARR, (STR, ["a", "", "ccc"])),
        ("test.arr_bool", ARR, (BOOL, [True, False])),
        ("test.arr_u64", ARR, (U64, [2**63 + 5])),
        ("test.arr_empty", ARR, (U8, [])),
        ("test.nested", ARR, (ARR, [(I8, [1, 2]), (STR, ["x"]), (ARR, [(F64, [1.0])])])),
    ]


def mini_llama(w, gt=0, dim=32):
    vocab = ["<unk>", "<s>", "</s>"] + [chr(ord("a") + i) for i in range(29)]
    kvs = [
        ("general.architecture", STR, "llama"), ("general.name", STR, "mini"),
        ("llama.context_length", U32, 64), ("llama.embedding_length", U32, dim),
        ("llama.block_count", U32, 1), ("llama.feed_forward_length", U32, 64),
        ("llama.rope.dimension_count", U32, 8), ("llama.attention.head_count", U32, 4),
        ("llama.attention.head_count_kv", U32, 2), ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        ("tokenizer.ggml.model", STR, "llama"), ("tokenizer.ggml.tokens", ARR, (STR, vocab)),
        ("tokenizer.ggml.scores", ARR, (F32, [-float(i) for i in range(len(vocab))])),
        ("tokenizer.ggml.token_type", ARR, (I32, [2, 3, 3] + [1] * 29)),
        ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
    ]
    tensors = [("token_embd.weight", [dim, 32], gt), ("output_norm.weight", [dim], 0),
               ("blk.0.attn_q.weight", [dim, dim], gt), ("blk.0.attn_k.weight", [dim, dim // 2], gt),
               ("blk.0.ffn_up.weight", [dim, 64], gt)]
    return w.file(kvs, tensors)


def main():
    args = sys.argv[1:]
    stories = None
    if "--stories" in args:
        i = args.index("--stories")
        stories = args[i + 1]
        del args[i:i + 2]
    out = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    os.makedirs(out, exist_ok=True)
    w3, w2, w1 = Writer(3), Writer(2), Writer(1)
    all_types = [(f"t{gt}", [256, 2], gt) for gt in sorted(GGML)]
    seeds = {
        "every_value_type_v3.seed": w3.file(every_type_kvs(), [("a", [4], 0), ("b", [32, 2], 8)]),
        "every_value_type_v2.seed": w2.file(every_type_kvs(), [("a", [2, 2, 2, 2], 1)]),
        "every_value_type_v1.seed": w1.file(every_type_kvs(), [("a", [8, 3], 0)]),
        "all_ggml_types.seed": w3.file([("general.alignment", U32, 64)], all_types, alignment=64),
        "mini_llama_f32.seed": mini_llama(w3, 0),
        "mini_llama_q8_0.seed": mini_llama(w3, 8),
        "mini_llama_q4_0_v2.seed": mini_llama(w2, 2),
        "mini_llama_v1.seed": mini_llama(w1, 0),
        # K-quant rows are super-blocks of 256 values: a 256-wide model.
        "mini_llama_q4_k.seed": mini_llama(w3, 12, 256),
        "mini_llama_q6_k.seed": mini_llama(w3, 14, 256),
        "mini_llama_iq4_xs.seed": mini_llama(w3, 23, 256),
        "row_not_superblock_multiple.seed": w3.file([], [("k", [512], 12)]).replace(
            struct.pack("<IQ", 1, 512), struct.pack("<IQ", 1, 384), 1),
        "vocab_only.seed": w3.file(every_type_kvs()[:3], []),
        "empty_header.seed": w3.file([], []),
        "bad_magic.seed": b"GGUX" + w3.file([], [])[4:],
        "version4.seed": b"GGUF" + struct.pack("<I", 4) + w3.file([], [])[8:],
        "huge_kv_count.seed": b"GGUF" + struct.pack("<IQQ", 3, 0, 2**63),
        "huge_string.seed": b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 2**64 - 1) + b"k" * 16,
        "row_not_block_multiple.seed": w3.file([], [("r", [64], 8)]).replace(
            struct.pack("<IQ", 1, 64), struct.pack("<IQ", 1, 48), 1),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    if stories:
        with open(stories, "rb") as f:
            head = f.read(16384)
        with open(os.path.join(out, "stories260K_prefix16k.seed"), "wb") as f:
            f.write(head)


if __name__ == "__main__":
    main()
