//! Where things live inside a dataset: hive partition paths, file names, commit records.
//!
//! ```text
//! <root>/
//!   _probelake/manifest.json
//!   _probelake/commits/step=<int>/stage=<str>/rank=<int>.json
//!   _probelake/schema/<table>.parquet          no rows: the table's columns, typed, for readers
//!   dump/step=<int>/stage=<str>/rank=<int>/api=<family>/<uuid>.parquet
//!   tensor/step=<int>/stage=<str>/rank=<int>/api=<family>/<uuid>.parquet
//!   stack|construct|source/step=<int>/stage=<str>/rank=<int>/<uuid>.parquet
//! ```

use std::fmt;

use object_store::path::Path;
use serde::{Deserialize, Serialize};

/// Folder (relative to the dataset root) holding probelake's own metadata.
pub const META_DIR: &str = "_probelake";
/// The dataset manifest, relative to the root.
pub const MANIFEST_FILE: &str = "_probelake/manifest.json";
/// Folder of commit records, relative to the root.
pub const COMMITS_DIR: &str = "_probelake/commits";
/// Folder of the reader schemas (one empty Parquet file per table), relative to the root;
/// see [`crate::readers`].
pub const SCHEMA_DIR: &str = "_probelake/schema";
/// `stage` of dumps that carry none (msprobe's own layout).
pub const DEFAULT_STAGE: &str = "default";

/// The unit of visibility: one (step, stage, rank). It becomes visible all at once when its
/// commit record is written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Unit {
    /// verl's global step, or msprobe's `step{N}`; `-1` for verl's `step_unknown`.
    pub step: i64,
    /// verl's stage (`actor_update`, …) or [`DEFAULT_STAGE`].
    pub stage: String,
    /// The rank; `-1` for `proc{pid}` folders.
    pub rank: i64,
}

impl Unit {
    /// A unit from its parts.
    pub fn new(step: i64, stage: impl Into<String>, rank: i64) -> Self {
        Unit { step, stage: stage.into(), rank }
    }

    /// `step=1/stage=actor_update/rank=0`, with the stage percent-encoded.
    pub fn partition_path(&self) -> String {
        format!("step={}/stage={}/rank={}", self.step, encode_partition_value(&self.stage), self.rank)
    }

    /// The location of this unit's commit record.
    pub fn commit_path(&self, root: &Path) -> Path {
        child(
            root,
            &format!(
                "{COMMITS_DIR}/step={}/stage={}/rank={}.json",
                self.step,
                encode_partition_value(&self.stage),
                self.rank
            ),
        )
    }

    /// A fresh, unique data file path for `table` (and `api` family for partitioned tables).
    pub fn new_file_path(&self, root: &Path, table: Table, api: Option<&str>) -> Path {
        let mut rel = format!("{}/{}", table.name(), self.partition_path());
        if let Some(api) = api {
            rel.push_str("/api=");
            rel.push_str(&encode_partition_value(api));
        }
        rel.push('/');
        rel.push_str(&uuid::Uuid::new_v4().simple().to_string());
        rel.push_str(".parquet");
        child(root, &rel)
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {} / stage {} / rank {}", self.step, self.stage, self.rank)
    }
}

/// The tables of a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Table {
    /// One row per leaf of dump.json / debug.json.
    Dump,
    /// One row per entry name of stack.json.
    Stack,
    /// One row per node of construct.json.
    Construct,
    /// One row per tensor file of `dump_tensor_data/`.
    Tensor,
    /// One row per imported dump.json / debug.json: header, layout, skeleton.
    Source,
}

impl Table {
    /// Every table, in a fixed order.
    pub const ALL: [Table; 5] = [Table::Dump, Table::Stack, Table::Construct, Table::Tensor, Table::Source];

    /// The folder name, which is also the SQL table name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Dump => "dump",
            Table::Stack => "stack",
            Table::Construct => "construct",
            Table::Tensor => "tensor",
            Table::Source => "source",
        }
    }

    /// Whether files are further partitioned by `api` family.
    pub fn has_api_partition(self) -> bool {
        matches!(self, Table::Dump | Table::Tensor)
    }

    /// The table whose folder (and SQL) name is `name`.
    pub fn from_name(name: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// Joins a relative path (with `/` separators, segments already encoded) onto `root`.
///
/// Segments are taken as they are (`Path::parse`), not re-encoded: a hive value `a%20b` must
/// stay `a%20b` on every store.
pub fn child(root: &Path, rel: &str) -> Path {
    let joined = if root.as_ref().is_empty() { rel.to_string() } else { format!("{}/{rel}", root.as_ref()) };
    // Our own segments are always valid; anything else is encoded rather than refused.
    Path::parse(&joined).unwrap_or_else(|_| rel.split('/').fold(root.clone(), |p, seg| p.join(seg)))
}

/// Longest encoded partition value kept whole, in bytes. Most file systems limit a folder name
/// to 255 bytes, and encoding can triple a value's length (`é` is `%C3%A9`).
pub const MAX_ENCODED_VALUE: usize = 128;

/// Percent-encodes a partition value byte-wise, keeping `[A-Za-z0-9._-]`, as pyarrow and DuckDB
/// do. The result can never contain `/` or be `.`/`..`, so it can never leave its folder.
///
/// A value whose encoding would be longer than [`MAX_ENCODED_VALUE`] keeps an encoded prefix
/// and ends in `~` and 16 hex digits of a hash of the whole value (FNV-1a, 64 bits: stable
/// across versions, because a unit's commit record must be found again where it was written).
/// `~` is never kept by the encoding (it becomes `%7E`), so such a name cannot equal the
/// encoding of another value. probelake reads partition values from commit records, never from
/// these names, so only plain Parquet readers see the shortened value.
///
/// ```
/// use probelake_format::layout::{decode_partition_value, encode_partition_value, MAX_ENCODED_VALUE};
/// assert_eq!(encode_partition_value("actor_update"), "actor_update");
/// assert_eq!(encode_partition_value("a b/../é"), "a%20b%2F..%2F%C3%A9");
/// assert_eq!(encode_partition_value(".."), "%2E%2E");
/// assert_eq!(decode_partition_value("a%20b%2F..%2F%C3%A9").unwrap(), "a b/../é");
/// let long = encode_partition_value(&"é".repeat(1000));
/// assert!(long.len() <= MAX_ENCODED_VALUE && long.contains('~'));
/// ```
pub fn encode_partition_value(value: &str) -> String {
    if value.is_empty() {
        // Not a valid folder name; `%00` cannot come from a real (NUL-free) value.
        return "%00".to_string();
    }
    if value == "." || value == ".." {
        return value.bytes().map(|b| format!("%{b:02X}")).collect();
    }
    const HASH_SUFFIX: usize = 17;
    let shorten = encoded_len(value) > MAX_ENCODED_VALUE;
    let mut out = String::with_capacity(value.len().min(MAX_ENCODED_VALUE));
    for b in value.bytes() {
        let piece_len = if keeps(b) { 1 } else { 3 };
        if shorten && out.len() + piece_len > MAX_ENCODED_VALUE - HASH_SUFFIX {
            out.push_str(&format!("~{:016x}", fnv1a64(value.as_bytes())));
            return out;
        }
        if keeps(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A stage as one folder name of an output tree (compare writes `step{N}/{stage}/`): itself when
/// it is a plain name, as verl's stages are, else its [`encode_partition_value`], so that a stage
/// such as `../x` can never lead outside the output folder.
///
/// ```
/// use probelake_format::layout::stage_folder_name;
/// assert_eq!(stage_folder_name("actor_update"), "actor_update");
/// assert_eq!(stage_folder_name("../x"), "..%2Fx");
/// ```
pub fn stage_folder_name(stage: &str) -> String {
    let plain = !stage.is_empty()
        && stage != "."
        && stage != ".."
        && !stage.chars().any(|c| c == '/' || c == '\\' || c.is_control());
    if plain {
        stage.to_string()
    } else {
        encode_partition_value(stage)
    }
}

fn keeps(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

fn encoded_len(value: &str) -> usize {
    value.bytes().map(|b| if keeps(b) { 1 } else { 3 }).sum()
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Whether `path` (relative to the dataset root) has the shape of a data file of `unit`'s
/// `table`: `{table}/{partition path}/[api={family}/]{name}.parquet`, with no other segments.
/// Commit records naming anything else are refused, and replaced files are only deleted when
/// they pass, so a crafted record can neither read nor delete another unit's files or
/// probelake's own metadata.
pub fn is_unit_data_path(unit: &Unit, table: Table, api: Option<&str>, path: &str) -> bool {
    let Some(rest) = path.strip_prefix(table.name()).and_then(|r| r.strip_prefix('/')) else { return false };
    let Some(rest) = rest.strip_prefix(unit.partition_path().as_str()).and_then(|r| r.strip_prefix('/')) else {
        return false;
    };
    let name = match (table.has_api_partition(), api) {
        (true, Some(api)) => {
            let Some(name) = rest.strip_prefix(&format!("api={}/", encode_partition_value(api))) else { return false };
            name
        }
        (false, None) => rest,
        _ => return false,
    };
    !name.is_empty() && !name.starts_with('.') && name.ends_with(".parquet") && !name.contains(['/', '\\', '#', '%'])
}

/// Whether `path` (relative to the dataset root) is exactly where [`Unit::new_file_path`] puts
/// a data file of some unit:
/// `{table}/step={int}/stage={value}/rank={int}/[api={value}/]{uuid}.parquet`, with `table` one
/// of [`Table::ALL`], `api=` exactly for the tables that have it, integers and values written
/// as probelake writes them (no leading zeros, [`encode_partition_value`]'s encoding) and the
/// name a UUID's 32 lowercase hex digits.
///
/// Vacuum of a folder with no manifest, where no commit record says which files are
/// probelake's, removes only such files: a path that merely looks like one may be a user's.
///
/// ```
/// use probelake_format::layout::is_layout_data_path;
/// assert!(is_layout_data_path("dump/step=1/stage=a%20b/rank=0/api=Torch/0123456789abcdef0123456789abcdef.parquet"));
/// assert!(is_layout_data_path("stack/step=-1/stage=default/rank=3/0123456789abcdef0123456789abcdef.parquet"));
/// assert!(!is_layout_data_path("dump/step=1/stage=a%20b/rank=0/api=Torch/readme.parquet"));
/// assert!(!is_layout_data_path("stack/step=1/stage=a/rank=0/api=Torch/0123456789abcdef0123456789abcdef.parquet"));
/// ```
pub fn is_layout_data_path(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    let Some((name, folders)) = segments.split_last() else { return false };
    is_layout_folder_segments(folders) && folders.len() == layout_depth(folders) && is_data_file_name(name)
}

/// Whether `path` (relative to the dataset root) is a folder of the data layout, or a part of
/// one: `{table}`, `{table}/step={int}`, … down to the folder that holds a unit's (and family's)
/// files, each segment written as [`is_layout_data_path`] requires.
pub fn is_layout_folder(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    is_layout_folder_segments(&segments)
}

/// The number of folder segments above a data file of the table `folders` starts with (0 when
/// it names no table).
fn layout_depth(folders: &[&str]) -> usize {
    match folders.first().copied().and_then(Table::from_name) {
        Some(table) if table.has_api_partition() => 5,
        Some(_) => 4,
        None => 0,
    }
}

fn is_layout_folder_segments(segments: &[&str]) -> bool {
    let depth = layout_depth(segments);
    if depth == 0 || segments.len() > depth {
        return false;
    }
    segments.iter().enumerate().skip(1).all(|(i, segment)| match i {
        1 => segment.strip_prefix("step=").is_some_and(is_written_int),
        2 => segment.strip_prefix("stage=").is_some_and(is_encoded_partition_value),
        3 => segment.strip_prefix("rank=").is_some_and(is_written_int),
        4 => segment.strip_prefix("api=").is_some_and(is_encoded_partition_value),
        _ => false,
    })
}

/// `{32 lowercase hex digits}.parquet`: a simple-form v4 UUID, as [`Unit::new_file_path`] names
/// files.
fn is_data_file_name(name: &str) -> bool {
    name.strip_suffix(".parquet")
        .is_some_and(|stem| stem.len() == 32 && stem.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// An integer as `{}` writes an `i64`: no sign but `-`, no leading zeros.
fn is_written_int(text: &str) -> bool {
    text.parse::<i64>().is_ok_and(|n| n.to_string() == text)
}

/// Whether `text` is what [`encode_partition_value`] writes for some value: only kept bytes
/// and `%XX` (upper-case hex) for the others, at most [`MAX_ENCODED_VALUE`] bytes, or such a
/// prefix and `~` with 16 lower-case hex digits for a shortened value.
pub fn is_encoded_partition_value(text: &str) -> bool {
    if matches!(text, "%00" | "%2E" | "%2E%2E") {
        return true; // "", "." and "..", which are encoded whole
    }
    if text.is_empty() || text.len() > MAX_ENCODED_VALUE || text == "." || text == ".." {
        return false;
    }
    let (body, shortened) = match text.split_once('~') {
        Some((body, hash)) => {
            if hash.len() != 16 || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                return false;
            }
            (body, true)
        }
        None => (text, false),
    };
    let bytes = body.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if keeps(b) {
            decoded.push(b);
            i += 1;
            continue;
        }
        let upper_hex = |b: &u8| matches!(b, b'0'..=b'9' | b'A'..=b'F');
        let Some(hex) = bytes.get(i + 1..i + 3).filter(|h| b == b'%' && h.iter().all(upper_hex)) else {
            return false;
        };
        let Some(value) = std::str::from_utf8(hex).ok().and_then(|h| u8::from_str_radix(h, 16).ok()) else {
            return false;
        };
        if keeps(value) {
            return false; // the encoding keeps these bytes as they are
        }
        decoded.push(value);
        i += 3;
    }
    if shortened {
        // A shortened value's prefix may end inside a character, so it need not be UTF-8.
        !body.is_empty()
    } else {
        std::str::from_utf8(&decoded).is_ok()
    }
}

/// Reverses [`encode_partition_value`] (a shortened value gives back its prefix and hash, with
/// U+FFFD for a character the cut fell inside); `None` when the text is not valid encoded
/// UTF-8.
pub fn decode_partition_value(text: &str) -> Option<String> {
    if text == "%00" {
        return Some(String::new());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes.get(i) {
            Some(b'%') => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            Some(&b) => {
                out.push(b);
                i += 1;
            }
            None => break,
        }
    }
    match String::from_utf8(out) {
        Ok(value) => Some(value),
        // The prefix of a shortened value may end inside a character; its name must still
        // parse, or the unit it names would be committed and never listed.
        Err(e) if text.contains('~') && is_encoded_partition_value(text) => {
            Some(String::from_utf8_lossy(e.as_bytes()).into_owned())
        }
        Err(_) => None,
    }
}

/// Parses `step=1/stage=x/rank=0` (the unit part of a commit record path, without `.json`).
pub fn parse_unit_path(rel: &str) -> Option<Unit> {
    let mut parts = rel.split('/');
    let step = parts.next()?.strip_prefix("step=")?.parse().ok()?;
    let stage = decode_partition_value(parts.next()?.strip_prefix("stage=")?)?;
    let rank = parts.next()?.strip_prefix("rank=")?.parse().ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some(Unit { step, stage, rank })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_become_one_safe_folder_name() {
        assert_eq!(stage_folder_name("actor_update"), "actor_update");
        assert_eq!(stage_folder_name("ref compute é"), "ref compute é");
        for hostile in ["..", ".", "", "../../x", "a/b", "a\\b", "a\u{1b}[2J"] {
            let name = stage_folder_name(hostile);
            assert!(!name.contains('/') && name != ".." && name != "." && !name.is_empty(), "{hostile:?} -> {name}");
        }
    }

    #[test]
    fn partition_values_round_trip_and_stay_inside() {
        for v in ["", ".", "..", "a/b", "x y", "%", "é", "actor_update", "a..b", "-1"] {
            let enc = encode_partition_value(v);
            assert!(!enc.contains('/') && enc != "." && enc != ".." && !enc.is_empty(), "{v} -> {enc}");
            assert_eq!(decode_partition_value(&enc).as_deref(), Some(v), "{enc}");
        }
    }

    #[test]
    fn long_values_are_shortened_and_stay_distinct() {
        let a = encode_partition_value(&"x".repeat(300));
        let b = encode_partition_value(&("x".repeat(299) + "y"));
        assert!(a.len() <= MAX_ENCODED_VALUE && b.len() <= MAX_ENCODED_VALUE, "{a} {b}");
        assert_ne!(a, b);
        assert!(a.starts_with("xxxx") && a.contains('~'));
        let exact = "y".repeat(MAX_ENCODED_VALUE);
        assert_eq!(encode_partition_value(&exact), exact, "a value of exactly the limit is kept whole");
        let unicode = encode_partition_value(&"é".repeat(100));
        assert!(unicode.len() <= MAX_ENCODED_VALUE && !unicode.contains("%C~"), "{unicode}");
        // Hashes must never change: records written by earlier versions are found by them.
        assert_eq!(fnv1a64(b"probelake"), 0x8e7f_dd80_812a_a49a);
    }

    #[test]
    fn only_paths_of_the_unit_are_its_data_files() {
        let u = Unit::new(1, "a b", 0);
        let ok = "dump/step=1/stage=a%20b/rank=0/api=Torch/0123abcd.parquet";
        assert!(is_unit_data_path(&u, Table::Dump, Some("Torch"), ok));
        for bad in [
            "dump/step=1/stage=a%20b/rank=0/api=Torch/../../x.parquet",
            "dump/step=1/stage=a%20b/rank=0/api=Torch/x/y.parquet",
            "dump/step=2/stage=a%20b/rank=0/api=Torch/0123abcd.parquet",
            "dump/step=1/stage=a%20b/rank=0/api=Other/0123abcd.parquet",
            "_probelake/manifest.json",
            "dump/step=1/stage=a%20b/rank=0/api=Torch/.hidden.parquet",
            "dump/step=1/stage=a%20b/rank=0/api=Torch/x.json",
            "../dump/step=1/stage=a%20b/rank=0/api=Torch/0123abcd.parquet",
        ] {
            assert!(!is_unit_data_path(&u, Table::Dump, Some("Torch"), bad), "{bad}");
        }
        assert!(is_unit_data_path(&u, Table::Source, None, "source/step=1/stage=a%20b/rank=0/f.parquet"));
        assert!(!is_unit_data_path(&u, Table::Source, Some("x"), "source/step=1/stage=a%20b/rank=0/f.parquet"));
        let fresh = u.new_file_path(&Path::default(), Table::Tensor, Some("é/.."));
        assert!(is_unit_data_path(&u, Table::Tensor, Some("é/.."), fresh.as_ref()), "{fresh}");
    }

    #[test]
    fn layout_paths_are_exactly_those_probelake_writes() {
        let root = Path::default();
        for (unit, table, api) in [
            (Unit::new(1, "actor_update", 0), Table::Dump, Some("Functional")),
            (Unit::new(-1, "a b/../é", 12), Table::Tensor, Some("Torch")),
            (Unit::new(0, "", -1), Table::Dump, Some("")),
            (Unit::new(7, "..", 3), Table::Stack, None),
            (Unit::new(7, ".", 3), Table::Construct, None),
            (Unit::new(i64::MIN, "é".repeat(300), i64::MAX), Table::Source, None),
            (Unit::new(2, "x", 0), Table::Dump, Some("~".repeat(200).as_str())),
        ] {
            let written = unit.new_file_path(&root, table, api);
            assert!(is_layout_data_path(written.as_ref()), "{written}");
            let folder = written.as_ref().rsplit_once('/').map(|(folder, _)| folder).unwrap_or_default();
            assert!(is_layout_folder(folder), "{folder}");
            assert!(!is_layout_data_path(folder), "{folder}");
        }
        let name = "0123456789abcdef0123456789abcdef.parquet";
        let ok = format!("dump/step=1/stage=a/rank=0/api=Torch/{name}");
        assert!(is_layout_data_path(&ok));
        for bad in [
            format!("dumps/step=1/stage=a/rank=0/api=Torch/{name}"),
            format!("Dump/step=1/stage=a/rank=0/api=Torch/{name}"),
            format!("dump/step=01/stage=a/rank=0/api=Torch/{name}"),
            format!("dump/step=+1/stage=a/rank=0/api=Torch/{name}"),
            format!("dump/step=x/stage=a/rank=0/api=Torch/{name}"),
            format!("dump/step=1/stage=a b/rank=0/api=Torch/{name}"),
            format!("dump/step=1/stage=a%20/rank=0/api=Torch/{name}%"),
            format!("dump/step=1/stage=%61/rank=0/api=Torch/{name}"),
            format!("dump/step=1/stage=%2f/rank=0/api=Torch/{name}"),
            format!("dump/step=1/stage=/rank=0/api=Torch/{name}"),
            format!("dump/step=1/stage=../rank=0/api=Torch/{name}"),
            format!("dump/step=1/stage=a~0123/rank=0/api=Torch/{name}"),
            format!("dump/step=1/stage=a/rank=0/{name}"),
            format!("dump/step=1/stage=a/rank=0/api=Torch/extra/{name}"),
            format!("dump/step=1/rank=0/stage=a/api=Torch/{name}"),
            format!("stack/step=1/stage=a/rank=0/api=Torch/{name}"),
            format!("dump/step=1/stage=a/rank=0/api=Torch/{}", name.to_uppercase()),
            format!("dump/step=1/stage=a/rank=0/api=Torch/{name}#1"),
            format!("dump/step=1/stage=a/rank=0/api=Torch/{name}.bak"),
            format!("/dump/step=1/stage=a/rank=0/api=Torch/{name}"),
            format!("x/dump/step=1/stage=a/rank=0/api=Torch/{name}"),
            "dump/step=1/stage=a/rank=0/api=Torch/0123.parquet".to_string(),
            "dump/step=1/stage=a/rank=0/api=Torch/readme.parquet".to_string(),
            "dump/readme.parquet".to_string(),
            format!("dump/{name}"),
            format!("_probelake/schema/{name}"),
            String::new(),
        ] {
            assert!(!is_layout_data_path(&bad), "{bad}");
        }
        for folder in ["dump", "dump/step=1", "dump/step=1/stage=a", "stack/step=1/stage=a/rank=0"] {
            assert!(is_layout_folder(folder), "{folder}");
        }
        for folder in ["", "dumps", "dump/x", "dump/step=1/notes", "stack/step=1/stage=a/rank=0/api=x", "_probelake"] {
            assert!(!is_layout_folder(folder), "{folder}");
        }
    }

    #[test]
    fn units_with_long_stages_parse_back_wherever_the_cut_falls() {
        // For each of these, some prefixes of x put the cut inside a multi-byte character.
        for stage in [
            "::\u{80}\u{80}\u{80}\u{80}\u{80}\u{800}\u{10000}\u{10000}\u{10000}\u{10000}\u{10000}\u{10000}\u{10000}",
            &"é".repeat(60),
        ] {
            for extra in 0..4 {
                let stage = format!("{}{stage}", "x".repeat(extra));
                let p = Unit::new(0, &stage, 0).commit_path(&Path::from("d"));
                let rel = p.as_ref().trim_start_matches("d/_probelake/commits/").trim_end_matches(".json");
                assert!(rel.contains('~'), "{rel}");
                let parsed = parse_unit_path(rel).unwrap_or_else(|| panic!("{rel} does not parse"));
                assert_eq!((parsed.step, parsed.rank), (0, 0));
            }
        }
        assert_eq!(decode_partition_value("%F0%90~0123456789abcdef").as_deref(), Some("\u{FFFD}~0123456789abcdef"));
        // Not a shortened value: invalid UTF-8 stays refused.
        assert_eq!(decode_partition_value("%F0%90"), None);
    }

    #[test]
    fn unit_paths_parse_back() {
        let u = Unit::new(-1, "ref compute", 3);
        let root = Path::from("runs/a");
        let p = u.commit_path(&root);
        assert_eq!(p.as_ref(), "runs/a/_probelake/commits/step=-1/stage=ref%20compute/rank=3.json");
        let rel = p.as_ref().trim_start_matches("runs/a/_probelake/commits/").trim_end_matches(".json");
        assert_eq!(parse_unit_path(rel), Some(u));
    }
}
