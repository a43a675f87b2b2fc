//! A small driver for profiling the msprobe codec under `valgrind --tool=callgrind` or `perf`:
//! one step per process, so each profile holds only the step it is about.
//!
//! ```text
//! codec_profile synth  LAYERS TREE      # a SynthSpec::demo() tree with LAYERS layers
//! codec_profile import TREE DATASET     # msprobe::import of TREE into a fresh DATASET
//! codec_profile export DATASET OUT      # msprobe::export of DATASET into OUT (force)
//! codec_profile floats COUNT             # json::write_f64 of COUNT float32 values, as
//!                                        # msprobe's statistics are (import checks, compare cells)
//! ```
//!
//! docs/benchmarks.md ("How to run") shows how to build and use it, next to the figures it
//! produced.

use std::path::Path;

use probelake_format::Lake;
use probelake_msprobe::{self as msprobe, ExportOptions, ImportOptions, NoProgress};
use probelake_synth::{write_run, SynthSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (step, a, b) = match args.as_slice() {
        [step, a, b] => (step, a.as_str(), b.as_str()),
        [step, a] if step == "floats" => (step, a.as_str(), ""),
        _ => {
            return Err(
                "usage: codec_profile synth LAYERS TREE | import TREE DATASET | export DATASET OUT | floats COUNT"
                    .into(),
            )
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match step.as_str() {
        "synth" => {
            let spec = SynthSpec { layers: a.parse()?, ..SynthSpec::demo() };
            let report = write_run(&spec, Path::new(b))?;
            eprintln!("{} bytes, {} leaves", report.bytes, report.leaves);
        }
        "import" => {
            let lake = Lake::local(Path::new(b))?;
            let report = rt.block_on(msprobe::import(Path::new(a), &lake, &ImportOptions::default(), &NoProgress))?;
            eprintln!("imported {} units, {} bytes of dump files", report.units.len(), report.json_bytes);
        }
        "export" => {
            let lake = Lake::local(Path::new(a))?;
            let options = ExportOptions { force: true, ..Default::default() };
            rt.block_on(msprobe::export(&lake, Path::new(b), &options, &NoProgress))?;
            eprintln!("exported");
        }
        "floats" => {
            // A fixed xorshift stream of float32 values in [1.5, 3): 16–17 digit reprs.
            let mut state = 0x9e37_79b9_7f4a_7c15_u64;
            let (mut out, mut bytes) = (Vec::with_capacity(64), 0);
            for _ in 0..a.parse::<usize>()? {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let v = f64::from(f32::from_bits(((state >> 9) as u32 & 0x007f_ffff) | 0x3f00_0000)) * 3.0;
                out.clear();
                probelake_msprobe::json::write_f64(&mut out, v);
                bytes += out.len();
            }
            eprintln!("{bytes} bytes of floats");
        }
        other => return Err(format!("unknown step {other}").into()),
    }
    Ok(())
}
