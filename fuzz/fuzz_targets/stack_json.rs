//! stack.json (grouped and by-name formats), as import reads it: JSON parse, take-apart into
//! rows, and the render that import compares with the input.
//!
//! Property: any input is either read or rejected with an error; nothing panics, aborts or
//! runs out of memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use probelake_msprobe::json::{detect_layout, parse, Arena};
use probelake_msprobe::{render_stack, take_apart_stack};

fuzz_target!(|bytes: &[u8]| {
    let arena = Arena::new();
    let Ok(doc) = parse(bytes, &arena) else { return };
    let layout = detect_layout(bytes);
    if let Ok((format, rows)) = take_apart_stack(&doc) {
        let mut rebuilt = Vec::with_capacity(bytes.len());
        render_stack(format, layout, &rows, &mut rebuilt);
    }
});
