//! Python call stacks for stack.json, modelled on the `train_tiny.py` script that produced the
//! fixtures in tests/data/fixtures (same file, line numbers and library frames).

/// Where in the toy model a call happens; every site has one distinct stack per context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Site {
    Embed,
    Ln1,
    Qkv,
    Scores,
    Mask,
    Softmax,
    AttnOut,
    Proj,
    Res1,
    Ln2,
    Fc1,
    Gelu,
    Fc2,
    Res2,
    LnF,
    Head,
    Loss,
    LogSoftmax,
    Sgd,
    /// Module pre-hook stacks (Mix): the module's call line.
    ModEmbed,
    ModBlock,
    ModLn1,
    ModQkv,
    ModProj,
    /// `act = F.gelu(self.fc1(self.ln2(x)))` calls both ln2 and fc1 from one line.
    ModLn2Fc1,
    ModFc2,
    /// `return self.head(self.ln_f(x))` likewise.
    ModTop,
}

/// How the script was driven: this changes the outer frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct StackCtx {
    pub(crate) train: bool,
    pub(crate) verl: bool,
    /// Modules are hooked (levels L0 and mix), which changes how torch calls them.
    pub(crate) hooked_modules: bool,
    /// Started through `torch.multiprocessing.spawn` (more than one rank).
    pub(crate) spawned: bool,
}

const SCRIPT: &str = "/workspace/train_tiny.py";
const TORCH: &str = "/usr/local/lib/python3.11/site-packages/torch";

fn script(line: u32, func: &str, code: &str) -> String {
    format!("File {SCRIPT}, line {line}, in {func}, \n {code}")
}

fn lib(path: &str, line: u32, func: &str, code: &str) -> String {
    format!("File {TORCH}/{path}, line {line}, in {func}, \n {code}")
}

/// The frames `nn.Module.__call__` adds between a caller and `forward`; `hooked` modules (all
/// but the root model, at level mix) take torch's slow path through `inner()`.
fn call_frames(hooked: bool, out: &mut Vec<String>) {
    if hooked {
        out.push(lib("nn/modules/module.py", 1841, "inner", "result = forward_call(*args, **kwargs)"));
        out.push(lib("nn/modules/module.py", 1893, "_call_impl", "return inner()"));
    } else {
        out.push(lib("nn/modules/module.py", 1798, "_call_impl", "return forward_call(*args, **kwargs)"));
    }
    out.push(lib("nn/modules/module.py", 1787, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"));
}

fn pre_hook_frames(out: &mut Vec<String>) {
    out.push(lib(
        "nn/modules/module.py",
        1820,
        "inner",
        "args_kwargs_result = hook(self, args, kwargs)  # type: ignore[misc]",
    ));
    out.push(lib("nn/modules/module.py", 1893, "_call_impl", "return inner()"));
    out.push(lib("nn/modules/module.py", 1787, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"));
}

/// Frames from `stage_fn` outwards.
fn outer_frames(ctx: StackCtx, model_call: bool, out: &mut Vec<String>) {
    if model_call {
        if ctx.train {
            out.push(script(93, "stage_fn", "logits = model(ids)"));
        } else {
            out.push(script(105, "stage_fn", "torch.log_softmax(net(ids).float(), dim=-1)"));
        }
    }
    if ctx.verl {
        out.push(script(126, "run", "stage_fn(st, ids)"));
    } else {
        out.push(script(113, "run", "stage_fn(\"actor_update\", ids)"));
    }
    if ctx.spawned {
        out.push(script(159, "_worker", "run(args, rank, args.ranks)"));
        out.push(lib("multiprocessing/spawn.py", 89, "_wrap", "fn(i, *args)"));
        let mp = "/usr/local/lib/python3.11/multiprocessing";
        out.push(format!("File {mp}/process.py, line 108, in run, \n self._target(*self._args, **self._kwargs)"));
        out.push(format!("File {mp}/process.py, line 314, in _bootstrap, \n self.run()"));
        out.push(format!("File {mp}/spawn.py, line 135, in _main, \n return self._bootstrap(parent_sentinel)"));
        out.push(format!("File {mp}/spawn.py, line 122, in spawn_main, \n exitcode = _main(fd, parent_sentinel)"));
    } else {
        out.push(script(152, "main", "run(args, 0, 1)"));
        out.push(script(164, "<module>", "main()"));
    }
}

/// Library frame of the functional call inside an `nn` module's forward.
fn module_forward_frame(site: Site) -> Option<String> {
    Some(match site {
        Site::Embed => lib("nn/modules/sparse.py", 189, "forward", "return F.embedding("),
        Site::Ln1 | Site::Ln2 | Site::LnF => lib("nn/modules/normalization.py", 228, "forward", "return F.layer_norm("),
        Site::Qkv | Site::Proj | Site::Fc1 | Site::Fc2 | Site::Head => {
            lib("nn/modules/linear.py", 134, "forward", "return F.linear(input, self.weight, self.bias)")
        }
        _ => return None,
    })
}

/// The line of the block or model `forward` that (directly or via a submodule) made the call,
/// and whether that line is inside `Block.forward` (true) or `TinyLM.forward` (false).
fn caller_line(site: Site) -> Option<(u32, &'static str, bool)> {
    Some(match site {
        Site::Embed | Site::ModEmbed => (60, "x = self.embed(ids)", false),
        Site::ModBlock => (62, "x = blk(x)", false),
        Site::LnF | Site::Head | Site::ModTop => (63, "return self.head(self.ln_f(x))", false),
        Site::Ln1 | Site::ModLn1 => (33, "h = self.ln1(x)", true),
        Site::Qkv | Site::ModQkv => (34, "q, k, v = self.qkv(h).split(d, dim=-1)", true),
        Site::Scores => (39, "att = torch.matmul(q, k.transpose(-1, -2)) * scale", true),
        Site::Mask => (41, "att = att.masked_fill(mask, float(\"-inf\"))", true),
        Site::Softmax => (42, "att = F.softmax(att, dim=-1)", true),
        Site::AttnOut => (43, "y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)", true),
        Site::Proj | Site::Res1 | Site::ModProj => (44, "x = x + self.proj(y)", true),
        Site::Ln2 | Site::Fc1 | Site::Gelu | Site::ModLn2Fc1 => (45, "act = F.gelu(self.fc1(self.ln2(x)))", true),
        Site::Fc2 | Site::Res2 | Site::ModFc2 => (48, "return x + self.fc2(act)", true),
        Site::Loss | Site::LogSoftmax | Site::Sgd => return None,
    })
}

/// The stack msprobe records for `site`, innermost frame first.
pub(crate) fn frames(site: Site, ctx: StackCtx) -> Vec<String> {
    let mut out = Vec::with_capacity(20);
    match site {
        Site::Loss => {
            out.push(script(
                94,
                "stage_fn",
                "loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), ids.view(-1))",
            ));
            outer_frames(ctx, false, &mut out);
            return out;
        }
        Site::LogSoftmax => {
            out.push(script(105, "stage_fn", "torch.log_softmax(net(ids).float(), dim=-1)"));
            outer_frames(ctx, false, &mut out);
            return out;
        }
        Site::Sgd => {
            out.push(lib("optim/sgd.py", 379, "_single_tensor_sgd", "param.add_(grad, alpha=-lr)"));
            out.push(lib("optim/sgd.py", 303, "sgd", "func("));
            out.push(lib("optim/sgd.py", 128, "step", "sgd("));
            out.push(lib("optim/optimizer.py", 79, "_use_grad", "ret = func(*args, **kwargs)"));
            out.push(lib("optim/optimizer.py", 567, "wrapper", "out = func(*args, **kwargs)"));
            out.push(script(100, "stage_fn", "opt.step()"));
            outer_frames(ctx, false, &mut out);
            return out;
        }
        _ => {}
    }
    let is_module = matches!(
        site,
        Site::ModEmbed
            | Site::ModBlock
            | Site::ModLn1
            | Site::ModQkv
            | Site::ModProj
            | Site::ModLn2Fc1
            | Site::ModFc2
            | Site::ModTop
    );
    if is_module {
        pre_hook_frames(&mut out);
    } else if let Some(f) = module_forward_frame(site) {
        out.push(f);
        call_frames(ctx.hooked_modules, &mut out);
    }
    if let Some((line, code, in_block)) = caller_line(site) {
        out.push(script(line, "forward", code));
        if in_block {
            call_frames(ctx.hooked_modules, &mut out);
            out.push(script(62, "forward", "x = blk(x)"));
        }
        call_frames(false, &mut out);
    }
    outer_frames(ctx, true, &mut out);
    out
}
