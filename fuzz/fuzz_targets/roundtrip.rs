//! The exporter's round trip, in memory: what import stores as rows (rather than as the
//! original bytes) must export back to the same bytes and re-import to the same rows.
//!
//! Import keeps a file as rows only when rendering those rows reproduces the input; export
//! then renders from the stored values. Property, for each file kind the input imports as:
//! - dump.json: the skeleton and leaf values render back to the input, and taking the output
//!   apart again gives the same skeleton and the same leaves;
//! - stack.json / construct.json: rows render back to the input and re-read equal;
//! - .pt / .npy: data plus metadata (through its stored JSON form) write back to the input
//!   and re-read equal.
//!
//! Any mismatch panics, which libFuzzer reports as a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;
use probelake_msprobe::json::{detect_layout, parse, Arena, Layout};
use probelake_msprobe::{
    parse_dump, rebuilds_source, render, render_construct, render_stack, take_apart, take_apart_construct, take_apart_read,
    take_apart_source, take_apart_stack, DumpDoc, DumpKind,
};
use probelake_msprobe::tensor_file::{read_tensor_file, write_tensor_file, ContainerMeta};
use probelake_fuzz::fix_zip_crcs;

fuzz_target!(|bytes: &[u8]| {
    let arena = Arena::new();
    if let Ok(doc) = parse(bytes, &arena) {
        let layout = detect_layout(bytes);
        dump_round_trip(bytes, &doc, layout);
        stack_round_trip(bytes, &doc, layout);
        construct_round_trip(bytes, &doc, layout);
    }
    // CRCs fixed as in the tensor_pt target, so that mutated archives get past the check.
    let mut tensor = bytes.to_vec();
    fix_zip_crcs(&mut tensor);
    tensor_round_trip(&tensor);
});

fn dump_round_trip(bytes: &[u8], doc: &probelake_msprobe::json::Node<'_>, layout: Layout) {
    for kind in [DumpKind::Dump, DumpKind::Debug] {
        // What import does: leaves read straight from the text where it is what export would
        // write, the others checked against the file's own bytes.
        let read_arena = Arena::new();
        let DumpDoc { doc: read_doc, layout: read_layout, read } =
            parse_dump(bytes, &read_arena, kind).expect("a file that parses plainly fails to parse with leaves read");
        assert_eq!(read_layout, layout);
        let taken = take_apart_read(&read_doc, read, bytes, kind, layout);
        // A plain parse takes it apart to the same rows, or refuses it the same way.
        let plain = take_apart_source(doc, bytes, kind, layout);
        let parsed = match (plain, taken) {
            (Ok(plain), Ok(taken)) => {
                assert_eq!((&plain.skeleton, &plain.header), (&taken.skeleton, &taken.header));
                assert_eq!(plain.leaves.len(), taken.leaves.len());
                for (a, b) in plain.leaves.iter().zip(&taken.leaves) {
                    assert_eq!(format!("{:?}", plain.value(a).to_leaf()), format!("{:?}", taken.value(b).to_leaf()));
                    assert_eq!((a.seq, a.leaf, &a.path, &a.item, a.exact_len), (b.seq, b.leaf, &b.path, &b.item, b.exact_len));
                }
                taken
            }
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string());
                continue;
            }
            (a, b) => panic!("taken apart one way only: {:?} / {:?}", a.err(), b.err()),
        };
        if !matches!(rebuilds_source(&parsed, bytes), Ok(true)) {
            continue; // import keeps this file whole
        }
        let mut exported = Vec::with_capacity(bytes.len());
        let leaves: Vec<_> = parsed.leaves.iter().map(|l| parsed.value(l).to_leaf()).collect();
        render(&parsed.skeleton, parsed.layout, &leaves, &mut exported)
            .expect("export of an imported dump file fails");
        assert!(exported == bytes, "export of an imported dump file differs from its input");

        let arena = Arena::new();
        let again = parse(&exported, &arena).expect("exported dump file does not parse");
        let reparsed = take_apart(&again, kind, detect_layout(&exported)).expect("exported dump file is refused");
        assert_eq!(reparsed.skeleton, parsed.skeleton);
        assert_eq!(reparsed.header, parsed.header);
        assert_eq!(reparsed.leaves.len(), parsed.leaves.len());
        for (a, b) in reparsed.leaves.iter().zip(&parsed.leaves) {
            // Debug text, not `==`: NaN statistics must compare equal to themselves, and
            // -0.0 must still differ from 0.0.
            assert_eq!(format!("{:?}", reparsed.value(a).to_leaf()), format!("{:?}", parsed.value(b).to_leaf()));
            assert_eq!((a.seq, a.leaf, &a.section, &a.path, &a.item), (b.seq, b.leaf, &b.section, &b.path, &b.item));
        }
    }
}

fn stack_round_trip(bytes: &[u8], doc: &probelake_msprobe::json::Node<'_>, layout: Layout) {
    let Ok((format, rows)) = take_apart_stack(doc) else { return };
    let mut exported = Vec::with_capacity(bytes.len());
    render_stack(format, layout, &rows, &mut exported);
    if exported != bytes {
        return; // import keeps this file whole
    }
    let arena = Arena::new();
    let again = parse(&exported, &arena).expect("exported stack.json does not parse");
    let (format_again, rows_again) = take_apart_stack(&again).expect("exported stack.json is refused");
    assert_eq!(format_again, format);
    assert_eq!(rows_again, rows);
}

fn construct_round_trip(bytes: &[u8], doc: &probelake_msprobe::json::Node<'_>, layout: Layout) {
    let Ok(rows) = take_apart_construct(doc) else { return };
    let mut exported = Vec::with_capacity(bytes.len());
    render_construct(layout, &rows, &mut exported);
    if exported != bytes {
        return; // import keeps this file whole
    }
    let arena = Arena::new();
    let again = parse(&exported, &arena).expect("exported construct.json does not parse");
    assert_eq!(take_apart_construct(&again).expect("exported construct.json is refused"), rows);
}

fn tensor_round_trip(bytes: &[u8]) {
    // No extension: the reader picks .pt or .npy by magic bytes, as for an odd file name.
    let Ok((data, meta)) = read_tensor_file("fuzz", bytes) else { return };
    match write_tensor_file(&data, &meta) {
        Ok(rebuilt) if rebuilt == bytes => {}
        _ => return, // import keeps this file whole
    }
    let stored = meta.to_json().expect("tensor metadata does not serialise");
    let restored = ContainerMeta::from_json(&stored).expect("stored tensor metadata does not parse");
    let exported = write_tensor_file(&data, &restored).expect("export of an imported tensor file fails");
    assert!(exported == bytes, "export of an imported tensor file differs from its input");
    let (data_again, meta_again) = read_tensor_file("fuzz", &exported).expect("exported tensor file is refused");
    assert_eq!(data_again, data);
    assert_eq!(meta_again, meta);
}
