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

/// Reverses [`encode_partition_value`] (a shortened value gives back its prefix and hash);
/// `None` when the text is not valid encoded UTF-8.
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
    String::from_utf8(out).ok()
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
    fn unit_paths_parse_back() {
        let u = Unit::new(-1, "ref compute", 3);
        let root = Path::from("runs/a");
        let p = u.commit_path(&root);
        assert_eq!(p.as_ref(), "runs/a/_probelake/commits/step=-1/stage=ref%20compute/rank=3.json");
        let rel = p.as_ref().trim_start_matches("runs/a/_probelake/commits/").trim_end_matches(".json");
        assert_eq!(parse_unit_path(rel), Some(u));
    }
}
