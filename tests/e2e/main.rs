//! End-to-end tests: the real `probelake` binary over real msprobe output
//! (`tests/data/fixtures`) and over data it synthesizes.

mod affinity;
mod bad_input;
mod captured;
mod cli;
#[cfg(feature = "cluster")]
mod cluster;
mod compare;
mod compare_mapping;
mod compare_pairs;
mod concurrency;
mod crash;
mod divergence;
mod fixtures;
mod leaves;
mod moto;
mod plot;
mod roundtrip;
mod s3;
mod slt;
mod sql;
mod synth;
mod synth_shape;
mod writer;
