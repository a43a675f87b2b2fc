//! Parameters of the toy model: torch-style initialisation and the per-step drift that stands
//! in for training.

use crate::model::Dims;
use crate::tensor::{derive, Rng};

/// One transformer block's parameters, in `named_parameters()` order.
#[derive(Clone)]
pub(crate) struct BlockParams {
    pub(crate) ln1_w: Vec<f32>,
    pub(crate) ln1_b: Vec<f32>,
    pub(crate) qkv_w: Vec<f32>,
    pub(crate) qkv_b: Vec<f32>,
    pub(crate) proj_w: Vec<f32>,
    pub(crate) proj_b: Vec<f32>,
    pub(crate) ln2_w: Vec<f32>,
    pub(crate) ln2_b: Vec<f32>,
    pub(crate) fc1_w: Vec<f32>,
    pub(crate) fc1_b: Vec<f32>,
    pub(crate) fc2_w: Vec<f32>,
    pub(crate) fc2_b: Vec<f32>,
}

/// All parameters of the model.
#[derive(Clone)]
pub(crate) struct Params {
    pub(crate) embed: Vec<f32>,
    pub(crate) blocks: Vec<BlockParams>,
    pub(crate) lnf_w: Vec<f32>,
    pub(crate) lnf_b: Vec<f32>,
    pub(crate) head_w: Vec<f32>,
    pub(crate) head_b: Vec<f32>,
}

/// torch's default `nn.Linear` init: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
fn linear_init(rng: &mut Rng, din: usize, dout: usize) -> (Vec<f32>, Vec<f32>) {
    let bound = 1.0 / (din as f32).sqrt();
    let w = (0..din * dout).map(|_| rng.uniform() * bound).collect();
    let b = (0..dout).map(|_| rng.uniform() * bound).collect();
    (w, b)
}

impl Params {
    pub(crate) fn init(dims: &Dims, seed: u64) -> Self {
        let mut rng = Rng::new(derive(seed, 1));
        let embed = (0..dims.vocab * dims.d).map(|_| rng.normal()).collect();
        let d = dims.d;
        let blocks = (0..dims.layers)
            .map(|_| {
                let (qkv_w, qkv_b) = linear_init(&mut rng, d, 3 * d);
                let (proj_w, proj_b) = linear_init(&mut rng, d, d);
                let (fc1_w, fc1_b) = linear_init(&mut rng, d, dims.f());
                let (fc2_w, fc2_b) = linear_init(&mut rng, dims.f(), d);
                BlockParams {
                    ln1_w: vec![1.0; d],
                    ln1_b: vec![0.0; d],
                    qkv_w,
                    qkv_b,
                    proj_w,
                    proj_b,
                    ln2_w: vec![1.0; d],
                    ln2_b: vec![0.0; d],
                    fc1_w,
                    fc1_b,
                    fc2_w,
                    fc2_b,
                }
            })
            .collect();
        let (head_w, head_b) = linear_init(&mut rng, d, dims.vocab);
        Params { embed, blocks, lnf_w: vec![1.0; d], lnf_b: vec![0.0; d], head_w, head_b }
    }

    /// Every parameter tensor, in `named_parameters()` order.
    pub(crate) fn tensors_mut(&mut self) -> Vec<&mut Vec<f32>> {
        let mut v = vec![&mut self.embed];
        for b in &mut self.blocks {
            v.extend([
                &mut b.ln1_w,
                &mut b.ln1_b,
                &mut b.qkv_w,
                &mut b.qkv_b,
                &mut b.proj_w,
                &mut b.proj_b,
                &mut b.ln2_w,
                &mut b.ln2_b,
                &mut b.fc1_w,
                &mut b.fc1_b,
                &mut b.fc2_w,
                &mut b.fc2_b,
            ]);
        }
        v.extend([&mut self.lnf_w, &mut self.lnf_b, &mut self.head_w, &mut self.head_b]);
        v
    }

    /// The weights "after training up to global step `g`": a small deterministic drift per
    /// step, so consecutive steps differ a little, as in a real run. Independent of any bug.
    pub(crate) fn at_step(&self, seed: u64, g: i64) -> Params {
        let mut p = self.clone();
        let mut rng = Rng::new(derive(seed, 0x5eed_0000 ^ g as u64));
        let drift = 0.004 * (g.unsigned_abs().min(1000) as f32).sqrt();
        for t in p.tensors_mut() {
            let scale = t.iter().fold(0f32, |m, v| m.max(v.abs())).max(0.05);
            for v in t.iter_mut() {
                *v += drift * scale * rng.uniform();
            }
        }
        p
    }
}

/// Token ids for one (global step, rank): shared by all stages of that step, like verl.
pub(crate) fn token_ids(dims: &Dims, seed: u64, g: i64, rank: usize) -> Vec<i64> {
    let mut rng = Rng::new(derive(seed, 0x1d5 ^ ((g as u64) << 16) ^ rank as u64));
    (0..dims.n()).map(|_| (rng.next_u64() % dims.vocab as u64) as i64).collect()
}
