//! dump.json / debug.json, as import reads them: JSON parse, layout detection, the take-apart
//! into header, entry names and leaves, and the render that import compares with the input.
//!
//! Property: any input either parses and takes apart or is rejected with an error; nothing
//! panics, aborts or runs out of memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use probelake_msprobe::json::{detect_layout, parse, Arena};
use probelake_msprobe::{rebuilds_source, take_apart_source, DumpKind};

fuzz_target!(|bytes: &[u8]| {
    let arena = Arena::new();
    let Ok(doc) = parse(bytes, &arena) else { return };
    let layout = detect_layout(bytes);
    for kind in [DumpKind::Dump, DumpKind::Debug] {
        if let Ok(parsed) = take_apart_source(&doc, bytes, kind, layout) {
            let _ = rebuilds_source(&parsed, bytes);
        }
    }
});
