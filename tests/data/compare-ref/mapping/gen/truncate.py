"""Derives a pair for the -fm "rows dropped" case from one tensor dump: target = the dump's last
KEEP APIs, golden = the same minus its very last API (a strict prefix of target). Copies only the
.pt files the kept entries name, and filters stack.json/construct.json to the kept keys.

    python truncate.py RUN_RANK_DIR OUT_CASE_DIR [KEEP]
"""

import json
import os
import shutil
import sys


def walk(obj, out):
    if isinstance(obj, dict):
        if isinstance(obj.get("data_name"), str):
            out.add(obj["data_name"])
        for v in obj.values():
            walk(v, out)
    elif isinstance(obj, list):
        for v in obj:
            walk(v, out)


def write(src, dest, keys):
    os.makedirs(os.path.join(dest, "dump_tensor_data"), exist_ok=True)
    dump = json.load(open(os.path.join(src, "dump.json")))
    dump["data"] = {k: dump["data"][k] for k in keys}
    with open(os.path.join(dest, "dump.json"), "w") as f:
        json.dump(dump, f, indent=1)
    for name in ("stack.json", "construct.json"):
        d = json.load(open(os.path.join(src, name)))
        if name == "stack.json":
            # msprobe 26 stack.json: {"0": [[names...], [frames...]], ...}
            kept = {}
            for idx, (names, frames) in d.items():
                names = [n for n in names if n in keys]
                if names:
                    kept[idx] = [names, frames]
            d = kept
        else:
            d = {k: v for k, v in d.items() if k in keys}
        with open(os.path.join(dest, name), "w") as f:
            json.dump(d, f, indent=1)
    files = set()
    walk(dump["data"], files)
    for fn in sorted(files):
        shutil.copy(os.path.join(src, "dump_tensor_data", fn), os.path.join(dest, "dump_tensor_data", fn))


def main():
    src, out = sys.argv[1], sys.argv[2]
    keep = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    keys = list(json.load(open(os.path.join(src, "dump.json")))["data"])[-keep:]
    write(src, os.path.join(out, "target"), keys)
    write(src, os.path.join(out, "golden"), keys[:-1])


if __name__ == "__main__":
    main()
