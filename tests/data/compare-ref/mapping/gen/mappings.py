"""Writes the mapping YAMLs the cases use, from the target/golden dumps of make_runs.sh.

    python mappings.py RUNS OUTDIR

Row names are listed with msprobe's own reader (msprobe.core.compare.utils.read_op), so they
are exactly the "NPU Name" strings of the compare CSV.
"""

import json
import os
import re
import sys

import yaml
from msprobe.core.compare.utils import read_op


def rows(dump_json):
    data = json.load(open(dump_json))["data"]
    out = []
    for op_name, op_data in data.items():
        out.extend(item["full_op_name"] for item in read_op(op_data, op_name))
    return data, out


def rename(name):
    """target naming -> golden naming (blocks.N.{norm,up,down}.Block -> layers.N.{ln,fc1,fc2}.Layer)"""
    name = name.replace("Module.blocks.", "Module.layers.", 1)
    name = re.sub(r"^(Module\.layers\.\d+)\.norm\.", r"\1.ln.", name)
    name = re.sub(r"^(Module\.layers\.\d+)\.up\.", r"\1.fc1.", name)
    name = re.sub(r"^(Module\.layers\.\d+)\.down\.", r"\1.fc2.", name)
    name = re.sub(r"^(Module\.layers\.\d+)\.Block\.", r"\1.Layer.", name)
    return name


def compare_keys(data, all_rows):
    """What msprobe matches a bench row on: its name with the backward call counter replaced by
    the row's rank among that op's backward calls in dump order (ProcessDf.update_backward_call)."""
    seen = {}
    key_of_api = {}
    for op_name in data:
        parts = op_name.split(".")
        last, second = parts[-1], parts[-2]
        if "backward" not in (last, second) or "parameters_grad" in (last, second):
            key_of_api[op_name] = op_name
            continue
        stem = ".".join(parts[:-2])
        order = seen.get(stem, 0)
        seen[stem] = order + 1
        if second.isdigit():  # API: stem.N.backward
            key_of_api[op_name] = f"{stem}.{order}.backward"
        else:  # module: stem.backward.N
            key_of_api[op_name] = f"{stem}.backward.{order}" if last.isdigit() else op_name
    keys = {}
    for op_name, op_data in data.items():
        for item in read_op(op_data, op_name):
            full = item["full_op_name"]
            keys[full] = key_of_api[op_name] + full[len(op_name):]
    return keys


def dump(path, mapping):
    with open(path, "w") as f:
        yaml.safe_dump(mapping, f, sort_keys=False, width=1000)


def main():
    runs, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    _, t_rows = rows(os.path.join(runs, "mix_stats_target/step0/rank0/dump.json"))
    g_data, g_rows = rows(os.path.join(runs, "mix_stats_golden/step0/rank0/dump.json"))
    g_set = set(g_rows)

    # dm_full: every target row whose name differs, mapped to the golden row's name as dump.json
    # spells it (what a user writes).
    full = {r: rename(r) for r in t_rows if rename(r) != r}
    assert all(v in g_set for v in full.values())
    dump(os.path.join(out, "dm_full.yaml"), full)

    # dm_full_keys: the same pairing, but each value is the compare key msprobe gives that golden
    # row (backward API counters renumbered), so backward APIs pair with their own counterpart.
    keys = compare_keys(g_data, g_rows)
    fixed = {r: keys[rename(r)] for r in t_rows if keys[rename(r)] != r}
    dump(os.path.join(out, "dm_full_keys.yaml"), fixed)

    # dm_partial (target vs golden_diff): the user-style dm_full, plus gelu.1 -> relu.0 and
    # blocks.0.norm (LayerNorm) -> layers.0.ln (RMSNorm, which has no bias).
    partial = dict(full)
    for r in t_rows:
        if r.startswith("Functional.gelu.1."):
            partial[r] = r.replace("Functional.gelu.1.", "Functional.relu.0.", 1)
        if r.startswith("Module.blocks.0.norm.LayerNorm."):
            partial[r] = r.replace("Module.blocks.0.norm.LayerNorm.", "Module.layers.0.ln.RMSNorm.", 1)
    dump(os.path.join(out, "dm_partial.yaml"), partial)

    # dm_edge (target vs golden): how keys are looked up.
    edge = {
        # many target rows -> one golden row: both paired with it
        "Module.blocks.0.Block.forward.0.input.0": "Module.layers.0.Layer.forward.0.output.0",
        "Module.blocks.0.Block.forward.0.output.0": "Module.layers.0.Layer.forward.0.output.0",
        # dtype differs (int64 -> float32): paired anyway, -dm skips the dtype check
        "Functional.embedding.0.forward.input.0": "Functional.embedding.0.forward.input.1",
        # swap two rows that exist on both sides
        "Functional.linear.0.forward.input.0": "Functional.linear.1.forward.input.0",
        "Functional.linear.1.forward.input.0": "Functional.linear.0.forward.input.0",
        # a value no golden row has: the target row stays unmatched
        "Module.blocks.1.Block.forward.0.input.0": "Module.layers.1.Layer.forward.9.input.0",
        # not full row names (a module/API prefix, no counter, no suffix): never looked up
        "Module.blocks.1.up.Linear.forward.0": "Module.layers.1.fc1.Linear.forward.0",
        "Module.blocks.1.down.Linear": "Module.layers.1.fc2.Linear",
        "Module.blocks.1.norm.LayerNorm.forward.input.0": "Module.layers.1.ln.LayerNorm.forward.0.input.0",
        # a key no target row has: ignored
        "Module.nonexistent.Linear.forward.0.input.0": "Module.layers.0.fc1.Linear.forward.0.input.0",
    }
    dump(os.path.join(out, "dm_edge.yaml"), edge)

    # cell mappings: keys are the part between "Module."/"Cell." and ".forward."/".backward."/
    # ".parameters_grad." (the module path and class name), exact first, else substring rules.
    exact = {}
    for i in (0, 1):
        exact[f"blocks.{i}.norm.LayerNorm"] = f"layers.{i}.ln.LayerNorm"
        exact[f"blocks.{i}.up.Linear"] = f"layers.{i}.fc1.Linear"
        exact[f"blocks.{i}.down.Linear"] = f"layers.{i}.fc2.Linear"
        exact[f"blocks.{i}.Block"] = f"layers.{i}.Layer"
    dump(os.path.join(out, "cm_full.yaml"), exact)

    substring = {"blocks": "layers", "norm": "ln", "up": "fc1", "down": "fc2", "Block": "Layer"}
    dump(os.path.join(out, "cm_substring.yaml"), substring)

    cm_partial = dict(exact)
    cm_partial["blocks.0.norm.LayerNorm"] = "layers.0.ln.RMSNorm"
    cm_partial["gelu.1"] = "relu.0"  # an API's "cell name" is {api}.{counter}
    dump(os.path.join(out, "cm_partial.yaml"), cm_partial)


if __name__ == "__main__":
    main()
