"""Generate real msprobe dumps from a small transformer trained on CPU.

msprobe itself writes every file; this script only drives a model under
msprobe's PrecisionDebugger. The runs of tests/data/fixtures/runs were made
with it, and tests/python/test_against_msprobe.py makes its runs with it.
Needs: pip install mindstudio-probe torch (torch from PyPI runs on CPU; no GPU
or NPU is needed). Layouts:
  plain : <out>/step{N}/rank{R}|proc{pid}/dump.json   (msprobe's own)
  verl  : <out>/step_{g}/{stage}/step0/rank0/dump.json (verl's precision_debugger)

usage: python gen_msprobe_runs.py OUT --layout plain|verl --level L0|L1|mix
         --task statistics|tensor|md5 [--dtype fp32|bf16] [--seed S]
         [--steps N] [--ranks R] [--bug NAME] [--width W] [--layers L]
"""

import argparse
import json
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads, bug):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.heads = heads
        self.bug = bug

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(d, dim=-1)
        q = q.view(b, t, self.heads, -1).transpose(1, 2)
        k = k.view(b, t, self.heads, -1).transpose(1, 2)
        v = v.view(b, t, self.heads, -1).transpose(1, 2)
        scale = (q.shape[-1] ** -0.5) * (1.01 if self.bug == "attn_scale" else 1.0)
        att = torch.matmul(q, k.transpose(-1, -2)) * scale
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        att = att.masked_fill(mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        act = F.gelu(self.fc1(self.ln2(x)))
        if self.bug == "nan":
            act = act / (act - act)  # 0/0 and x/0: NaN and inf downstream
        return x + self.fc2(act)


class TinyLM(nn.Module):
    def __init__(self, vocab=64, d=32, layers=2, heads=4, bug=None):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(
            [Block(d, heads, bug if i == layers - 1 else None) for i in range(layers)]
        )
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


STAGES = ["actor_compute_log_prob", "ref_compute_log_prob", "actor_update"]


def config_file(task, level, dump_path, tmp):
    body = {
        "scope": [],
        "list": [],
        "data_mode": ["all"],
        "summary_mode": "md5" if task == "md5" else "statistics",
    }
    cfg = {
        "task": "statistics" if task == "md5" else task,
        "dump_path": dump_path,
        "rank": [],
        "step": [],
        "level": level,
        "async_dump": False,
    }
    cfg["statistics" if task == "md5" else task] = body
    path = os.path.join(tmp, "config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def run(args, rank, world):
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(args.seed)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    model = TinyLM(d=args.width, layers=args.layers, bug=args.bug).to(dtype)
    ref = TinyLM(d=args.width, layers=args.layers).to(dtype)
    ref.load_state_dict({k: v for k, v in model.state_dict().items()})
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1234 + rank)
    tmp = tempfile.mkdtemp()

    def stage_fn(name, ids):
        if name == "actor_update":
            logits = model(ids)
            loss = F.cross_entropy(
                logits.float().view(-1, logits.shape[-1]), ids.view(-1)
            )
            loss.backward()
            if world > 1:
                for p in model.parameters():
                    if p.grad is not None:
                        torch.distributed.all_reduce(p.grad)
            opt.step()
            opt.zero_grad()
        else:
            with torch.no_grad():
                net = model if name.startswith("actor") else ref
                torch.log_softmax(net(ids).float(), dim=-1)

    if args.layout == "plain":
        cfg = config_file(args.task, args.level, args.out, tmp)
        dbg = PrecisionDebugger(config_path=cfg)
        for _ in range(args.steps):
            ids = torch.randint(0, 64, (2, 8), generator=gen)
            dbg.start(model=model)
            stage_fn("actor_update", ids)
            dbg.stop()
            dbg.step()
        return
    # verl: one debugger session per (global step, stage), as verl's precision_debugger profiler does.
    for g in range(1, args.steps + 1):
        ids = torch.randint(0, 64, (2, 8), generator=gen)
        for st in STAGES:
            dump_path = os.path.join(args.out, f"step_{g}", st)
            cfg = config_file(args.task, args.level, dump_path, tmp)
            dbg = PrecisionDebugger(config_path=cfg)
            dbg.service.config.dump_path = dump_path
            dbg.start(model=model if st != "ref_compute_log_prob" else ref)
            stage_fn(st, ids)
            dbg.stop()
            svc = getattr(dbg, "service", None)
            if svc is not None and hasattr(svc, "reset_status"):
                svc.reset_status()
            PrecisionDebugger._instance = None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--layout", default="plain", choices=["plain", "verl"])
    p.add_argument("--level", default="mix")
    p.add_argument(
        "--task", default="statistics", choices=["statistics", "tensor", "md5"]
    )
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--bug", default=None)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    args = p.parse_args()
    if args.ranks > 1:
        import torch.multiprocessing as mp

        mp.spawn(_worker, args=(args,), nprocs=args.ranks, join=True)
    else:
        run(args, 0, 1)


def _worker(rank, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.distributed.init_process_group("gloo", rank=rank, world_size=args.ranks)
    run(args, rank, args.ranks)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
