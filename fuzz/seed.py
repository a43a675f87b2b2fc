"""Seeds the fuzz corpora from real msprobe runs (called by scripts/fuzz.sh).

usage: python3 fuzz/seed.py FIXTURES_DIR CORPUS_DIR MAX_LEN

Each target's corpus gets the fixture files of its kind, named by content hash so a second
run adds nothing twice. Files over MAX_LEN bytes are not copied whole (libFuzzer would cut
them and the cut JSON or zip no longer parses); JSON files are also trimmed to their first few
members, re-laid out as msprobe's json.dump writes them, which gives small valid seeds that
run fast. There are no .npy files among the fixtures, so a few are made here.
"""

import hashlib
import json
import os
import struct
import sys

JSON_TARGETS = {"dump.json": "dump_json", "debug.json": "dump_json", "stack.json": "stack_json",
                "construct.json": "construct_json"}


def put(corpus, target, data, max_len):
    if len(data) > max_len:
        return
    folder = os.path.join(corpus, target)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, hashlib.sha1(data).hexdigest())
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(data)


def indent_of(data):
    """msprobe writes with json.dump(indent=N); N is the spaces before the first key."""
    lines = data.split(b"\n", 2)
    if len(lines) < 2:
        return None
    return len(lines[1]) - len(lines[1].lstrip(b" "))


def trimmed(name, data, keep):
    doc = json.loads(data)
    if not isinstance(doc, dict):
        return None
    if name in ("dump.json", "debug.json") and isinstance(doc.get("data"), dict):
        doc["data"] = dict(list(doc["data"].items())[:keep])
    else:
        doc = dict(list(doc.items())[:keep])
    return json.dumps(doc, indent=indent_of(data)).encode()


def npy(dtype, shape, payload, version=(1, 0)):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (dtype, shape)
    size_bytes = 2 if version[0] == 1 else 4
    prefix = 6 + 2 + size_bytes
    pad = 64 - (prefix + len(header) + 1) % 64
    header = (header + " " * pad + "\n").encode("latin1")
    size = struct.pack("<H" if size_bytes == 2 else "<I", len(header))
    return b"\x93NUMPY" + bytes(version) + size + header + payload


def main():
    fixtures, corpus, max_len = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for root, _, files in os.walk(fixtures):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                data = f.read()
            if name in JSON_TARGETS:
                variants = [data]
                for keep in (1, 3):
                    try:
                        small = trimmed(name, data, keep)
                    except ValueError:
                        small = None
                    if small is not None:
                        variants.append(small)
                for v in variants:
                    put(corpus, JSON_TARGETS[name], v, max_len)
                    put(corpus, "roundtrip", v, max_len)
            elif name.endswith(".pt"):
                put(corpus, "tensor_pt", data, max_len)
                put(corpus, "roundtrip", data, max_len)
    made = [
        npy("<f4", "(2, 3)", struct.pack("<6f", 1, -2, 0.5, 3e38, -0.0, 7)),
        npy("<f2", "(4,)", b"\x00\x3c\x00\xc0\x00\x7c\x00\x00"),
        npy("|b1", "()", b"\x01"),
        npy("<i8", "(0, 5)", b""),
        npy(">f8", "(1,)", struct.pack(">d", 2.5)),
        npy("<u2", "(3,)", struct.pack("<3H", 1, 2, 65535), version=(2, 0)),
    ]
    for data in made:
        put(corpus, "tensor_npy", data, max_len)
        put(corpus, "roundtrip", data, max_len)


if __name__ == "__main__":
    main()
