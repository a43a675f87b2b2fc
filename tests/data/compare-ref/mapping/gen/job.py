"""One tiny training step under msprobe's PrecisionDebugger (adapted from probelake's
tests/python/msprobe_job.py), in one of three model variants that compute the same ops but name
modules differently, so that `msprobe compare -dm/-cm` has something to map.

    python job.py DUMP_PATH --variant target|golden|golden_diff [--task statistics|tensor]
        [--summary-mode statistics|md5] [--level mix|L0|L1] [--data-mode all|forward]

target:      embed, blocks.{0,1} = Block(norm, up, down), head.proj; block: gelu
golden:      embed, layers.{0,1} = Layer(ln, fc1, fc2),   head.proj; same ops, same order
golden_diff: as golden, but layers.1 uses relu instead of gelu and has an extra
             `h * 1.0` (Tensor.__mul__) before fc2, and layers.0.ln is a (different-class)
             RMSNorm: some rows cannot be paired whatever the mapping says.
Weights: target seed 0, golden seeds 1 (so statistics differ); input ids are the same.
Writes DUMP_PATH/step0/rank0/{dump,stack,construct}.json (a process group of one, as
msprobe_job.py does, so the folder is rank0 and the bytes are reproducible).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):  # target naming
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.up(self.norm(x)))
        return x + self.down(h) * 0.5


class RMSNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Layer(nn.Module):  # golden naming
    def __init__(self, d: int, act: str = "gelu", extra: bool = False, rms: bool = False) -> None:
        super().__init__()
        self.ln = RMSNorm(d) if rms else nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)
        self.act = act
        self.extra = extra

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(self.ln(x))
        h = F.gelu(h) if self.act == "gelu" else F.relu(h)
        if self.extra:
            h = h * 1.0
        return x + self.fc2(h) * 0.5


class Head(nn.Module):
    def __init__(self, d: int, vocab: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class TargetModel(nn.Module):
    def __init__(self, d: int, vocab: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(2))
        self.head = Head(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class GoldenModel(nn.Module):
    def __init__(self, d: int, vocab: int, diff: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(
            [
                Layer(d, rms=diff),
                Layer(d, act="relu" if diff else "gelu", extra=diff),
            ]
        )
        self.head = Head(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for b in self.layers:
            x = b(x)
        return self.head(x)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("dump_path")
    p.add_argument("--variant", required=True, choices=["target", "golden", "golden_diff"])
    p.add_argument("--task", default="statistics", choices=["statistics", "tensor"])
    p.add_argument("--summary-mode", default="statistics", choices=["statistics", "md5"])
    p.add_argument("--level", default="mix", choices=["L0", "L1", "mix"])
    p.add_argument("--data-mode", default="all", choices=["all", "forward", "backward"])
    p.add_argument("--width", type=int, default=4)
    p.add_argument("--vocab", type=int, default=8)
    p.add_argument("--tokens", type=int, default=3)
    args = p.parse_args()

    torch.set_num_threads(1)
    folder = tempfile.mkdtemp()
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{folder}/group", rank=0, world_size=1
    )
    from msprobe.pytorch import PrecisionDebugger

    cfg = {
        "task": args.task,
        "dump_path": args.dump_path,
        "rank": [],
        "step": [],
        "level": args.level,
        "async_dump": False,
        args.task: {
            "scope": [],
            "list": [],
            "data_mode": [args.data_mode],
            "summary_mode": args.summary_mode,
        },
    }
    cfg_path = os.path.join(folder, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)

    torch.manual_seed(0 if args.variant == "target" else 1)
    if args.variant == "target":
        model = TargetModel(args.width, args.vocab)
    else:
        model = GoldenModel(args.width, args.vocab, diff=args.variant == "golden_diff")
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, args.vocab, (1, args.tokens), generator=gen)

    dbg = PrecisionDebugger(config_path=cfg_path)
    dbg.start(model=model)
    out = model(ids)
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), ids.reshape(-1))
    loss.backward()
    dbg.stop()
    dbg.step()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
