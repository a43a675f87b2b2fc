//! One dump folder's JSON files into a unit's columns, on the threads the import gives it.
//!
//! A unit of one large dump.json is the common case (one rank's dump of one step), so the work
//! of one file is split where it can be: stack.json and construct.json are read beside
//! dump.json, its `data` is parsed in pieces
//! ([`parse_dump_in_pieces`](crate::read_dump::parse_dump_in_pieces)), its API families fill
//! their columns on their own threads while the round trip is checked on another. The rows,
//! columns and errors are those of reading it on one thread: errors of dump.json come first,
//! then those of stack.json, then construct.json's.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

use crate::columns::{ConstructColumns, DumpColumns, FamilySize, Origin, SourceRow, StackColumns, UnitColumns};
use crate::construct::{render_construct, take_apart_construct};
use crate::dump_file::{rebuilds_source, take_apart_read, DumpKind, Header, ParsedDump};
use crate::entry_ranges::take_apart_in_ranges;
use crate::error::{MsprobeError, Result};
use crate::json::{detect_layout, parse, Arena, Layout, Node, Value};
use crate::read_dump::{parse_dump_in_pieces, DumpDoc};
use crate::skeleton::skeleton_of;
use crate::stack::{render_stack, take_apart_stack};
use probelake_format::lake::UnitCounts;

/// What the source row keeps of a dump file read into the dump columns.
struct DumpRead {
    header: Header,
    layout: Layout,
    entries: usize,
    leaves: usize,
    skeleton: String,
    /// Whether the file is kept whole: its rows do not rebuild it byte for byte.
    kept_whole: bool,
}

/// Reads one dump file and its stack.json and construct.json into the unit's columns.
pub(crate) fn read_dump_files(files: &DumpFiles<'_>, columns: &mut UnitColumns, counts: &mut UnitCounts) -> Result<()> {
    let UnitColumns { dump, stack, construct, source, has_stack, has_construct, .. } = columns;
    let (read, sides) = if files.threads > 1 {
        std::thread::scope(|scope| {
            let sides = scope.spawn(|| read_side_files(files, stack, has_stack, construct, has_construct));
            let read = read_dump(files, dump);
            let sides = sides.join().unwrap_or_else(|_| Err(MsprobeError::Internal("side files' thread".into())));
            (read, sides)
        })
    } else {
        let read = read_dump(files, dump)?;
        (Ok(read), read_side_files(files, stack, has_stack, construct, has_construct))
    };
    let (read, (stack, construct)) = (read?, sides?);
    let bytes = files.dump;
    let h = &read.header;
    source.push(
        &SourceRow {
            file: files.file,
            kind: files.kind.as_str(),
            task: h.task.as_deref(),
            level: h.level.as_deref(),
            framework: h.framework.as_deref(),
            dump_data_dir: h.dump_data_dir.as_deref(),
            entries: read.entries as i64,
            leaves: read.leaves as i64,
            bytes: bytes.len() as i64,
            indent: stored_indent(files.relayout, read.layout),
            // Empty where the rows were read to be compared: only export lays it out again.
            skeleton: &read.skeleton,
            original: read.kept_whole.then_some(bytes),
            stack: stack.as_ref().map(|(f, l, o)| (*f, *l, o.as_deref())),
            construct: construct.as_ref().map(|(f, l, o)| (*f, *l, o.as_deref())),
        },
        files.origin,
    );
    counts.dump_files += 1;
    counts.entries += read.entries as u64;
    counts.leaves += read.leaves as u64;
    counts.json_bytes += bytes.len() as u64;
    if counts.task.is_none() {
        counts.task.clone_from(&h.task);
        counts.level.clone_from(&h.level);
        counts.framework.clone_from(&h.framework);
    }
    Ok(())
}

/// stack.json and construct.json, in that order.
fn read_side_files(
    files: &DumpFiles<'_>,
    stack: &mut StackColumns,
    has_stack: &mut bool,
    construct: &mut ConstructColumns,
    has_construct: &mut bool,
) -> Result<(SideFile, SideFile)> {
    let origin = files.origin;
    let stack = stack_file(files.stack, files.relayout, files.reading, stack, has_stack, origin)?;
    let construct = side_file(files.construct, files.relayout, files.reading, |doc, layout, out| {
        let rows = take_apart_construct(doc)?;
        render_construct(layout, &rows, out);
        for (i, row) in rows.iter().enumerate() {
            construct.push(i as i64, row, origin);
        }
        *has_construct |= !rows.is_empty();
        Ok("map")
    })?;
    Ok((stack, construct))
}

/// Reads the dump file into its families' columns.
fn read_dump(files: &DumpFiles<'_>, dump: &mut BTreeMap<String, DumpColumns>) -> Result<DumpRead> {
    let DumpFiles { path, origin, dump: bytes, .. } = *files;
    let started = std::time::Instant::now();
    let arena = Arena::new();
    // Twice as many pieces as threads where there are several: pieces of equal bytes take
    // unequal time, and stack.json's thread shares the cores with them; smaller pieces even
    // out where the last one ends.
    let piece_count = if files.threads > 1 { 2 * files.threads } else { files.threads };
    let mut pieces: Vec<Arena> = (0..piece_count).map(|_| Arena::new()).collect();
    // The rows' strings, an arena for each range of entries the walk may cut `data` into.
    let mut walk_arenas: Vec<Arena> = (0..files.threads.max(1)).map(|_| Arena::new()).collect();
    let DumpDoc { doc, layout, read } = parse_dump_in_pieces(bytes, &arena, &mut pieces, files.kind)
        .map_err(|error| MsprobeError::Syntax { file: path.to_path_buf(), error })?;
    let parsed_at = started.elapsed();
    // Rows read to be compared are never laid out again: they need no skeleton.
    let keep_skeleton = files.reading == Reading::Import;
    let mut parsed = if keep_skeleton && files.threads <= 1 {
        take_apart_read(&doc, read, bytes, files.kind, layout)
    } else if keep_skeleton {
        // The skeleton on a core of its own, beside the rows' ranges (`skeleton.rs`).
        std::thread::scope(|scope| {
            let skeleton = scope.spawn(|| skeleton_of(&doc, files.kind));
            let parsed = take_apart_in_ranges(&doc, read, bytes, files.kind, layout, &mut walk_arenas);
            let skeleton = skeleton.join().map_err(|_| MsprobeError::Internal("skeleton's thread".into()))?;
            parsed.map(|mut parsed| {
                parsed.skeleton = skeleton;
                parsed
            })
        })
    } else {
        take_apart_in_ranges(&doc, read, bytes, files.kind, layout, &mut walk_arenas)
    }
    .map_err(|e| e.in_file(path))?;
    let taken_apart_at = started.elapsed();

    let entries = data_entries(&doc);
    // Only families with a leaf get columns (and so a file); a family new to the unit gets
    // room for all of this file's rows of it, made by the thread that fills it (`fill_share`).
    let sizes = family_sizes(&parsed, entries);
    let new: Vec<&str> = sizes.iter().map(|(api, _)| *api).filter(|api| !dump.contains_key(*api)).collect();
    for api in &new {
        dump.insert(api.to_string(), DumpColumns::with_capacity(FamilySize::default()));
    }
    let families = dump
        .iter_mut()
        .map(|(api, columns)| {
            let size = sizes.iter().find(|(family, _)| family == api).map(|(_, size)| *size);
            let room = size.filter(|_| new.contains(&api.as_str()));
            Family { api: api.as_str(), columns, rows: size.map_or(0, |size| size.rows), room }
        })
        .collect();
    // The round trip is checked here, once, rather than trusted: whatever the rows cannot
    // rebuild byte for byte is kept whole. Rows read to be compared are never written back.
    let check = files.reading == Reading::Import;
    let rebuilds = fill_families(&parsed, entries, families, origin, files.threads, |p| {
        if check {
            rebuilds_source(p, bytes)
        } else {
            Ok(true)
        }
    })?;
    if !rebuilds {
        if files.relayout.is_some() {
            return Err(relayout_refused(path));
        }
        tracing::debug!(file = %path.display(), "dump file kept whole: its layout is not json.dump's");
    }
    tracing::debug!(
        file = %path.display(),
        parse = ?parsed_at,
        take_apart = ?(taken_apart_at - parsed_at),
        columns_and_check = ?(started.elapsed() - taken_apart_at),
        "dump file read"
    );
    Ok(DumpRead {
        header: std::mem::take(&mut parsed.header),
        layout,
        entries: parsed.names.len(),
        leaves: parsed.leaves.len(),
        skeleton: std::mem::take(&mut parsed.skeleton),
        kept_whole: !rebuilds,
    })
}

/// One family's columns, to be filled by one thread.
struct Family<'f> {
    api: &'f str,
    columns: &'f mut DumpColumns,
    /// The family's rows in this file.
    rows: usize,
    /// For a family new to the unit, its size in this file: the filling thread makes its
    /// columns with that room. The kernel zeroes their pages where they are first touched;
    /// made on the calling thread, they were a stretch of one core before the others started.
    room: Option<FamilySize>,
}

/// Pushes every row of `parsed` into its family's columns (`families`: each family there),
/// and runs `check` beside: the families are shared out over `threads` threads, in shares
/// of about equal rows. A family with `room` gets its columns made first.
fn fill_families(
    parsed: &ParsedDump<'_>,
    entries: &[(Cow<'_, str>, Node<'_>)],
    mut families: Vec<Family<'_>>,
    origin: Origin,
    threads: usize,
    check: impl FnOnce(&ParsedDump<'_>) -> Result<bool> + Send,
) -> Result<bool> {
    if threads <= 1 || families.len() < 2 {
        fill_share(parsed, entries, &mut families, origin)?;
        return check(parsed);
    }
    // Largest first, each to the share with the fewest rows so far.
    families.sort_by_key(|f| std::cmp::Reverse(f.rows));
    let mut shares: Vec<(usize, Vec<Family<'_>>)> = (0..threads).map(|_| (0, Vec::new())).collect();
    for family in families {
        if let Some(share) = shares.iter_mut().min_by_key(|s| s.0) {
            share.0 += family.rows;
            share.1.push(family);
        }
    }
    std::thread::scope(|scope| {
        let check = scope.spawn(|| check(parsed));
        let mut shares = shares.into_iter().filter(|s| !s.1.is_empty()).map(|s| s.1);
        let first = shares.next();
        let others: Vec<_> =
            shares.map(|mut share| scope.spawn(move || fill_share(parsed, entries, &mut share, origin))).collect();
        let mut result = first.map_or(Ok(()), |mut share| fill_share(parsed, entries, &mut share, origin));
        for other in others {
            let joined = other.join().unwrap_or_else(|_| Err(MsprobeError::Internal("columns' thread".into())));
            result = result.and(joined);
        }
        let checked = check.join().map_err(|_| MsprobeError::Internal("check's thread".into()))?;
        result?;
        checked
    })
}

/// Pushes the rows of the families in `share` into their columns.
fn fill_share(
    parsed: &ParsedDump<'_>,
    entries: &[(Cow<'_, str>, Node<'_>)],
    share: &mut [Family<'_>],
    origin: Origin,
) -> Result<()> {
    for family in share.iter_mut() {
        if let Some(size) = family.room.take() {
            *family.columns = DumpColumns::with_capacity(size);
        }
    }
    // An entry's leaves are consecutive rows: its family's columns are looked up once for all.
    for rows in parsed.leaves.chunk_by(|a, b| a.entry == b.entry) {
        let Some(first) = rows.first() else { continue };
        let name = parsed.names.get(first.entry).ok_or_else(|| MsprobeError::Internal("leaf without entry".into()))?;
        let Some(Family { columns, .. }) = share.iter_mut().find(|f| f.api == name.api) else { continue };
        let full = entry_name(entries, first.seq);
        for row in rows {
            columns.push(row, parsed.value(row), full, name, origin);
        }
    }
    Ok(())
}

/// The members of the document's `data` object (none if it has none).
fn data_entries<'d>(doc: &'d Node<'d>) -> &'d [(Cow<'d, str>, Node<'d>)] {
    match doc.value.get("data").map(|d| &d.value) {
        Some(Value::Object(entries)) => entries,
        _ => &[],
    }
}

fn entry_name<'d>(entries: &'d [(Cow<'d, str>, Node<'d>)], seq: i64) -> &'d str {
    entries.get(seq as usize).map_or("", |(k, _)| k.as_ref())
}

/// What each API family of a file adds to the dump columns, families in order of first leaf.
fn family_sizes<'p>(parsed: &'p ParsedDump<'_>, entries: &[(Cow<'_, str>, Node<'_>)]) -> Vec<(&'p str, FamilySize)> {
    let mut sizes: Vec<(&str, FamilySize)> = Vec::new();
    // An entry's leaves are consecutive rows of one family, looked up once for all.
    for rows in parsed.leaves.chunk_by(|a, b| a.entry == b.entry) {
        let Some(first) = rows.first() else { continue };
        let Some(name) = parsed.names.get(first.entry) else { continue };
        let at = match sizes.iter().position(|(api, _)| *api == name.api) {
            Some(at) => at,
            None => {
                sizes.push((name.api, FamilySize::default()));
                sizes.len() - 1
            }
        };
        let full = entry_name(entries, first.seq);
        for row in rows {
            sizes[at].1.add(full, &row.path, &row.item);
        }
    }
    sizes
}

/// What a dump folder is read for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// To be stored: every file is checked to rebuild byte for byte from its rows.
    Import,
    /// To be compared in memory: the rows alone, without the checks and side files that only
    /// a stored unit's export needs (construct.json), and without stack.json, which a
    /// comparison reads apart ([`read_unit_stacks`](crate::read_unit_stacks)).
    Compare,
}

/// One dump folder's JSON files, read from disk or captured in memory.
pub(crate) struct DumpFiles<'a> {
    /// Where the dump file is (or would be), for messages.
    pub path: &'a Path,
    /// The dump file's path relative to the layout's root.
    pub file: &'a str,
    pub kind: DumpKind,
    pub origin: Origin,
    pub dump: &'a [u8],
    pub stack: Option<(&'a Path, &'a [u8])>,
    pub construct: Option<(&'a Path, &'a [u8])>,
    /// The files are in json.dump's one-line layout but are to be stored as written with this
    /// indent (a running job serializes compactly, msprobe writes `indent=1`). Every file
    /// must then rebuild from its rows: a file kept whole would keep the one-line text.
    pub relayout: Option<u16>,
    pub reading: Reading,
    /// The threads reading the files may use.
    pub threads: usize,
}

pub(crate) type SideFile = Option<(&'static str, Option<i32>, Option<Vec<u8>>)>;

/// The indent a file is stored with: the one it is to be laid out with, else its own.
fn stored_indent(relayout: Option<u16>, layout: Layout) -> Option<i32> {
    relayout.or(layout.indent).map(i32::from)
}

/// Reads stack.json or construct.json if present: `take` collects rows and renders them back,
/// and the original is kept where that rendering differs.
pub(crate) fn side_file(
    file: Option<(&Path, &[u8])>,
    relayout: Option<u16>,
    reading: Reading,
    take: impl FnOnce(&crate::json::Node<'_>, Layout, &mut Vec<u8>) -> Result<&'static str>,
) -> Result<SideFile> {
    let Some((path, bytes)) = file else { return Ok(None) };
    let arena = Arena::new();
    let doc = parse(bytes, &arena).map_err(|error| MsprobeError::Syntax { file: path.to_path_buf(), error })?;
    let layout = detect_layout(bytes);
    let mut rebuilt = Vec::with_capacity(if reading == Reading::Import { bytes.len() } else { 0 });
    let format = take(&doc, layout, &mut rebuilt).map_err(|e| e.in_file(path))?;
    let original = (reading == Reading::Import && rebuilt != bytes).then(|| bytes.to_vec());
    if original.is_some() && relayout.is_some() {
        return Err(relayout_refused(path));
    }
    Ok(Some((format, stored_indent(relayout, layout), original)))
}

/// Takes a stack.json apart into the unit's stack columns (and, for an import, checks that it
/// rebuilds byte for byte).
pub(crate) fn stack_file(
    file: Option<(&Path, &[u8])>,
    relayout: Option<u16>,
    reading: Reading,
    columns: &mut StackColumns,
    has_stack: &mut bool,
    origin: Origin,
) -> Result<SideFile> {
    side_file(file, relayout, reading, |doc, layout, out| {
        let (format, rows) = take_apart_stack(doc)?;
        if reading == Reading::Import {
            render_stack(format, layout, &rows, out);
        }
        columns.push_file(&rows, origin);
        *has_stack |= !rows.is_empty();
        Ok(format.as_str())
    })
}

pub(crate) fn relayout_refused(path: &Path) -> MsprobeError {
    MsprobeError::Layout {
        path: path.to_path_buf(),
        message: "its rows do not rebuild the one-line text, so it cannot be stored for another layout; \
                  give it as msprobe writes it"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dump.json whose `Torch` family has an entry but no leaf, laid out as msprobe does.
    const DUMP: &str = r#"{
 "task": "statistics",
 "level": "L1",
 "framework": "pytorch",
 "dump_data_dir": null,
 "data": {
  "Functional.relu.0.forward": {
   "input_args": [
    {
     "type": "torch.Tensor",
     "dtype": "torch.float32",
     "shape": [
      2
     ],
     "Max": 1.5,
     "Min": 0.5,
     "Mean": 1.0,
     "Norm": 1.25,
     "requires_grad": false
    }
   ],
   "input_kwargs": {},
   "output": []
  },
  "Torch.empty.0.forward": {
   "input_args": [],
   "input_kwargs": {},
   "output": []
  }
 }
}"#;

    #[test]
    fn a_family_without_leaves_gets_no_columns_on_any_number_of_threads() {
        for threads in [1, 2, 3] {
            let files = DumpFiles {
                path: Path::new("step0/rank0/dump.json"),
                file: "step0/rank0/dump.json",
                kind: DumpKind::Dump,
                origin: Origin::default(),
                dump: DUMP.as_bytes(),
                stack: None,
                construct: None,
                relayout: None,
                reading: Reading::Import,
                threads,
            };
            let (mut columns, mut counts) = (UnitColumns::default(), UnitCounts::default());
            read_dump_files(&files, &mut columns, &mut counts).expect("reads");
            let families: Vec<&str> = columns.dump.keys().map(String::as_str).collect();
            assert_eq!(families, ["Functional"], "{threads} threads");
            assert_eq!((counts.entries, counts.leaves), (2, 1), "{threads} threads");
        }
    }
}
