//! Reading a leaf straight from its text where that text is exactly what [`Leaf::render`]
//! writes, as nearly every leaf msprobe writes is.
//!
//! The general way to a leaf's columns parses the object into a tree, takes the columns from
//! the tree, then renders them and compares the result with the file to learn whether the
//! leaf needs `raw` ([`Leaf::from_source`]): about 10,000 instructions a leaf, two fifths of an
//! import's. Reading the text in the order `render` would write it does all three at once:
//! each piece of the layout is compared as it is met, each value taken as it is passed, and
//! anything `render` would not have written (another layout or key order, an escape, an integer
//! statistic, a `class_type` record) declines, leaving the leaf to the general way. So a leaf
//! read here is, by construction, one whose columns render to its text: the same columns, and
//! no `raw`, that the general way gives.

use crate::json::{f64_is_written_as, number_end, plain_prefix, Arena, Layout};

use crate::leaf::{is_tensor_kind, parse_number, Leaf};
use crate::stored_leaf::{ReadLeaf, TextLeaf};

/// Reads leaves whose text is exactly [`Leaf::render`]'s in one layout, and declines every
/// other text, which the caller then parses the general way.
///
/// It remembers, per depth, the text `render` puts between a leaf's values (`,`, the line
/// break and indentation, the member name), so reading a leaf is a few comparisons of such
/// pieces and a pass over each value.
///
/// ```
/// use probelake_msprobe::json::Layout;
/// use probelake_msprobe::LeafReader;
/// let text = r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.5, "Min": -1.0, "Mean": 0.25, "Norm": 2.0, "requires_grad": false}"#;
/// let mut reader = LeafReader::new(Layout { indent: None });
/// let (leaf, len) = reader.read(text, 0, 3).unwrap();
/// assert_eq!((leaf.stats[0], leaf.shape, len), (Some(1.5), Some(vec![2]), text.len()));
/// // `1.50` is not how msprobe writes 1.5: that leaf keeps its text in `raw`, the general way.
/// assert!(reader.read(&text.replace("1.5", "1.50"), 0, 3).is_none());
/// ```
#[derive(Debug)]
pub struct LeafReader {
    layout: Layout,
    /// By depth, made when a leaf at that depth is first read.
    frames: Vec<Option<Frames>>,
}

impl LeafReader {
    /// A reader of leaves laid out in `layout`.
    pub fn new(layout: Layout) -> Self {
        LeafReader { layout, frames: Vec::new() }
    }

    /// Reads the leaf whose text starts at `text[pos]` if that text is exactly
    /// [`Leaf::render`]'s for it at `depth`; returns the leaf and the text's length.
    pub fn read<'a>(&mut self, text: &'a str, pos: usize, depth: usize) -> Option<(Leaf<'a>, usize)> {
        self.read_text(text, pos, depth).map(|(leaf, len)| (leaf.to_leaf(), len))
    }

    /// [`LeafReader::read`], the leaf kept as slices of `text`.
    pub(crate) fn read_text<'a>(&mut self, text: &'a str, pos: usize, depth: usize) -> Option<(TextLeaf<'a>, usize)> {
        // A depth's frames hold its indentation a dozen times over: made only once the text
        // opens a leaf there, they cost no more than a dozen times the text that shows it,
        // whatever indentation a hostile file declares on its second line.
        let made = self.frames.get(depth).is_some_and(Option::is_some);
        if !made && !self.opens_leaf(text.as_bytes(), pos, depth) {
            return None;
        }
        if self.frames.len() <= depth {
            self.frames.resize_with(depth + 1, || None);
        }
        let layout = self.layout;
        let frames = self.frames[depth].get_or_insert_with(|| Frames::new(layout, depth));
        let mut reader = Reader { text, bytes: text.as_bytes(), at: pos, frames };
        let leaf = reader.leaf()?;
        Some((leaf, reader.at - pos))
    }
}

impl LeafReader {
    /// Whether `bytes[pos..]` starts as `render` starts a leaf at `depth`: `{`, the line break
    /// and indentation, `"type": `.
    fn opens_leaf(&self, bytes: &[u8], pos: usize, depth: usize) -> bool {
        let Some(rest) = bytes.get(pos..).and_then(|b| b.strip_prefix(b"{")) else { return false };
        let rest = match self.layout.indent {
            None => rest,
            Some(n) => {
                let Some(spaces) = usize::from(n).checked_mul(depth + 1) else { return false };
                match rest.strip_prefix(b"\n") {
                    Some(line) if line.len() >= spaces && line[..spaces].iter().all(|&b| b == b' ') => &line[spaces..],
                    _ => return false,
                }
            }
        };
        rest.starts_with(b"\"type\": ")
    }
}

/// The members of a leaf after `type`, in the order [`Leaf::render`] writes them.
#[derive(Debug, Clone, Copy)]
enum Member {
    Value,
    Dtype,
    Shape,
    Md5,
    Max,
    Min,
    Mean,
    Norm,
    RequiresGrad,
    DataName,
}

impl Member {
    /// Every member, in declaration order: `Frames::members` is indexed by `member as usize`.
    const ALL: [Member; 10] = [
        Member::Value,
        Member::Dtype,
        Member::Shape,
        Member::Md5,
        Member::Max,
        Member::Min,
        Member::Mean,
        Member::Norm,
        Member::RequiresGrad,
        Member::DataName,
    ];

    /// Its quoted name and `: `, as `render` writes them.
    fn name(self) -> &'static [u8] {
        match self {
            Member::Value => b"\"value\": ",
            Member::Dtype => b"\"dtype\": ",
            Member::Shape => b"\"shape\": ",
            Member::Md5 => b"\"md5\": ",
            Member::Max => b"\"Max\": ",
            Member::Min => b"\"Min\": ",
            Member::Mean => b"\"Mean\": ",
            Member::Norm => b"\"Norm\": ",
            Member::RequiresGrad => b"\"requires_grad\": ",
            Member::DataName => b"\"data_name\": ",
        }
    }
}

/// What [`Leaf::render`] writes around the values of a leaf at one depth, piece by piece, made
/// with the same [`Layout`] calls it makes.
#[derive(Debug)]
struct Frames {
    /// `{`, the first line break, `"type": `.
    open: Vec<u8>,
    /// For each [`Member`]: `,`, the line break, the quoted name and `: `.
    members: [Vec<u8>; Member::ALL.len()],
    /// The last line break and `}`.
    close: Vec<u8>,
    /// A shape's `[` and first line break, the break between its items, and its last break
    /// and `]`.
    dims_open: Vec<u8>,
    dims_separator: Vec<u8>,
    dims_close: Vec<u8>,
}

impl Frames {
    fn new(layout: Layout, depth: usize) -> Self {
        let piece = |write: &dyn Fn(&mut Vec<u8>)| {
            let mut out = Vec::new();
            write(&mut out);
            out
        };
        Frames {
            open: piece(&|out| {
                out.push(b'{');
                layout.newline(out, depth + 1);
                out.extend_from_slice(b"\"type\": ");
            }),
            members: Member::ALL.map(|member| {
                piece(&|out| {
                    layout.separator(out, depth + 1);
                    out.extend_from_slice(member.name());
                })
            }),
            close: piece(&|out| {
                layout.newline(out, depth);
                out.push(b'}');
            }),
            dims_open: piece(&|out| {
                out.push(b'[');
                layout.newline(out, depth + 2);
            }),
            dims_separator: piece(&|out| layout.separator(out, depth + 2)),
            dims_close: piece(&|out| {
                layout.newline(out, depth + 1);
                out.push(b']');
            }),
        }
    }
}

/// A cursor over the text that moves only past what it expected to find.
struct Reader<'a, 'f> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    frames: &'f Frames,
}

impl<'a> Reader<'a, '_> {
    /// The leaf, in the member order of [`Leaf::render`].
    fn leaf(&mut self) -> Option<TextLeaf<'a>> {
        let frames = self.frames;
        self.literal(&frames.open)?;
        let kind = self.string()?;
        let mut leaf = TextLeaf { kind, ..TextLeaf::default() };
        if self.member(Member::Value) {
            // A tensor's `value` is not a column: `render` would not write it.
            if is_tensor_kind(kind) {
                return None;
            }
            leaf.value = Some(self.scalar()?);
            self.literal(&frames.close)?;
            return Some(leaf);
        }
        if self.member(Member::Dtype) {
            leaf.dtype = Some(self.string()?);
        }
        if self.member(Member::Shape) {
            leaf.shape = Some(self.dims()?);
        }
        // Without either, `render` writes the `value` form.
        if leaf.dtype.is_none() && leaf.shape.is_none() {
            return None;
        }
        // xor mode's checksum stands where the statistics would.
        let xor = self.member(Member::Md5);
        if xor {
            let md5 = self.string()?;
            if !md5.starts_with("0x") {
                return None;
            }
            leaf.md5 = Some(md5);
        } else {
            for (slot, member) in [Member::Max, Member::Min, Member::Mean, Member::Norm].into_iter().enumerate() {
                if !self.member(member) {
                    return None;
                }
                if let Some(value) = self.statistic()? {
                    leaf.stats[slot] = value;
                    leaf.present |= 1 << slot;
                }
            }
        }
        if self.member(Member::RequiresGrad) {
            leaf.requires_grad = Some(self.boolean()?);
        }
        if self.member(Member::DataName) {
            leaf.data_name = Some(self.string()?);
        }
        if !xor && self.member(Member::Md5) {
            let md5 = self.string()?;
            // `render` would move it where the statistics are.
            if md5.starts_with("0x") {
                return None;
            }
            leaf.md5 = Some(md5);
        }
        self.literal(&frames.close)?;
        Some(leaf)
    }

    /// Whether `member` comes next; if so, moves past its name.
    fn member(&mut self, member: Member) -> bool {
        let frames = self.frames;
        self.literal(&frames.members[member as usize]).is_some()
    }

    fn byte(&mut self, want: u8) -> Option<()> {
        (self.bytes.get(self.at) == Some(&want)).then(|| self.at += 1)
    }

    fn literal(&mut self, want: &[u8]) -> Option<()> {
        let end = self.at.checked_add(want.len())?;
        same_bytes(self.bytes.get(self.at..end)?, want).then(|| self.at = end)
    }

    /// A string that [`write_str`](crate::json::write_str) writes as it is: printable ASCII
    /// without quotes or backslashes. Anything else has an escape in its rendering.
    fn string(&mut self) -> Option<&'a str> {
        self.byte(b'"')?;
        let start = self.at;
        let len = plain_prefix(self.bytes.get(start..)?);
        self.at = start + len;
        self.byte(b'"')?;
        self.text.get(start..start + len)
    }

    /// A statistic: `null`, or a number written as [`write_f64`](crate::json::write_f64)
    /// writes the value it parses to (so not `5` for 5.0, nor `1.50`).
    fn statistic(&mut self) -> Option<Option<f64>> {
        if self.literal(b"null").is_some() {
            return Some(None);
        }
        let token =
            self.token(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E' | b'a'..=b'z' | b'A'..=b'Z'))?;
        // A value written as `token` parses to itself (the digits `write_f64` writes are
        // the shortest that round-trip): so a quick guess at the value is right exactly
        // when it is written as `token`, and only a wrong guess costs the exact parse.
        if let Some(guess) = quick_value(token.as_bytes()) {
            if f64_is_written_as(guess, token.as_bytes()) {
                return Some(Some(guess));
            }
        }
        let value = parse_number(token);
        f64_is_written_as(value, token.as_bytes()).then_some(Some(value))
    }

    /// A shape: integers written without a sign or leading zeros that `render` would not
    /// write, each fitting an `i64`; its text ([`dims`](crate::stored_leaf::dims) reads it).
    fn dims(&mut self) -> Option<&'a str> {
        let frames = self.frames;
        let start = self.at;
        if self.literal(b"[]").is_some() {
            return self.text.get(start..self.at);
        }
        self.literal(&frames.dims_open)?;
        loop {
            let token = self.token(|b| b.is_ascii_digit() || b == b'-')?;
            let digits = token.strip_prefix('-').unwrap_or(token);
            let canonical = match digits.as_bytes() {
                [b'0'] => digits.len() == token.len(),
                [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
                _ => false,
            };
            if !canonical {
                return None;
            }
            token.parse::<i64>().ok()?;
            if self.literal(&frames.dims_separator).is_none() {
                self.literal(&frames.dims_close)?;
                return self.text.get(start..self.at);
            }
        }
    }

    fn boolean(&mut self) -> Option<bool> {
        if self.literal(b"true").is_some() {
            Some(true)
        } else {
            self.literal(b"false").map(|()| false)
        }
    }

    /// A scalar's `value` that is one token: a number, a plain string, `true`, `false` or
    /// `null`, as its one-line text (what the general way stores). Arrays and objects decline.
    fn scalar(&mut self) -> Option<&'a str> {
        let start = self.at;
        match self.bytes.get(start)? {
            b'"' => {
                self.string()?;
            }
            b't' | b'f' => {
                self.boolean()?;
            }
            b'n' => self.literal(b"null")?,
            _ => self.at = number_end(self.bytes, start).ok()?,
        }
        self.text.get(start..self.at)
    }

    /// The run of bytes from here that `part` accepts; at least one.
    fn token(&mut self, part: impl Fn(u8) -> bool) -> Option<&'a str> {
        let start = self.at;
        let len = self.bytes.get(start..)?.iter().position(|&b| !part(b)).unwrap_or(self.bytes.len() - start);
        if len == 0 {
            return None;
        }
        self.at = start + len;
        self.text.get(start..self.at)
    }
}

/// `a == b` for the short pieces a leaf is read in (most 8 to 24 bytes), eight bytes at a
/// time in place of a call to `memcmp`, which cost more than the comparison.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() || n < 8 {
        return a == b;
    }
    let word = |s: &[u8], at: usize| s.get(at..).and_then(<[u8]>::first_chunk::<8>).map(|w| u64::from_ne_bytes(*w));
    let mut at = 0;
    while at + 8 <= n {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    // The last, partial word overlaps the one before it.
    at == n || word(a, n - 8) == word(b, n - 8)
}

/// Powers of ten that are exact in an f64.
const EXACT_POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

/// A close guess at the value of a decimal token (`-12.5`, `3.25e-05`): its digits as an
/// integer, scaled by an exact power of ten. Nearly always the correctly rounded value, but
/// not always (near a tie); `None` where the digits or the exponent do not fit the guess.
fn quick_value(token: &[u8]) -> Option<f64> {
    let (negative, mut rest) = match token.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, token),
    };
    let mut digits: u64 = 0;
    let mut count = 0usize;
    let mut exponent: i64 = 0;
    let mut seen_point = false;
    while let Some((&b, tail)) = rest.split_first() {
        match b {
            b'0'..=b'9' => {
                digits = digits.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
                count += 1;
                exponent -= i64::from(seen_point);
            }
            b'.' if !seen_point => seen_point = true,
            b'e' | b'E' => {
                let text = std::str::from_utf8(tail).ok()?;
                exponent = exponent.checked_add(text.strip_prefix('+').unwrap_or(text).parse::<i64>().ok()?)?;
                break;
            }
            _ => return None,
        }
        rest = tail;
    }
    if count == 0 || count > 19 {
        return None;
    }
    let scale = *EXACT_POW10.get(usize::try_from(exponent.unsigned_abs()).ok()?)?;
    let whole = digits as f64;
    let magnitude = if digits < 1 << 53 {
        // Both operands exact: one correctly rounded operation.
        if exponent < 0 {
            whole / scale
        } else {
            whole * scale
        }
    } else {
        // 17 digits do not fit an f64: correct the result by what rounding the digits lost
        // and by the operation's own error (both exact), which leaves it off only next to a tie.
        // `whole` is an integer below 2^64 (the digits are below 10^19): exact as a u64, and
        // the difference, under 2^11, exact as an f64 (i128 arithmetic went through software
        // conversions).
        let rounded = whole as u64;
        let lost = if digits >= rounded { (digits - rounded) as f64 } else { -((rounded - digits) as f64) };
        if exponent < 0 {
            let quotient = whole / scale;
            let remainder = (-quotient).mul_add(scale, whole);
            quotient + (remainder + lost) / scale
        } else {
            let product = whole * scale;
            let error = whole.mul_add(scale, -product);
            product + (error + lost * scale)
        }
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// The leaves [`parse_dump`](crate::parse_dump) read straight from a file's text with a
/// [`LeafReader`], in the order it met them; the document's
/// [`Value::Taken`](crate::json::Value::Taken) nodes hold their indexes. A file parsed in
/// pieces ([`parse_dump_in_pieces`](crate::read_dump::parse_dump_in_pieces)) has one list per piece, and
/// an index names its piece in its top bits ([`piece_index`]).
#[derive(Debug, Default)]
pub struct ReadLeaves<'a> {
    pub(crate) values: LeafValues<'a>,
    /// The arena the document was parsed into, which keeps the rows' `path` and `item` too:
    /// two allocations and two frees a leaf fewer.
    pub(crate) strings: Option<&'a Arena>,
}

/// Leaves read from a file, by [`piece_index`].
#[derive(Debug, Default)]
pub(crate) struct LeafValues<'a> {
    /// The leaves read outside the pieces (all of them where there are none).
    pub(crate) leaves: Vec<ReadLeaf<'a>>,
    /// Those read by each piece, in file order; then, a piece each, those the walk took apart
    /// from nodes (one piece, or one for each range of entries it walked).
    pub(crate) pieces: Vec<Vec<ReadLeaf<'a>>>,
}

impl ReadLeaves<'_> {
    /// How many leaves were read.
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }
}

/// The bits of a leaf's index that hold its piece number, at the top.
const PIECE_BITS: u32 = 8;

/// The bits of a leaf's index below its piece number.
const PIECE_SHIFT: u32 = usize::BITS - PIECE_BITS;

/// The index of the `local`th leaf of piece `piece` (0: outside the pieces, 1: the first
/// piece, …); `None` where `local` does not fit below the piece number.
pub(crate) fn piece_index(piece: usize, local: usize) -> Option<usize> {
    (local >> PIECE_SHIFT == 0 && piece >> PIECE_BITS == 0).then_some(piece << PIECE_SHIFT | local)
}

impl<'a> LeafValues<'a> {
    /// The leaf at `index` ([`piece_index`]).
    pub(crate) fn get(&self, index: usize) -> Option<&ReadLeaf<'a>> {
        let local = index & ((1 << PIECE_SHIFT) - 1);
        match index >> PIECE_SHIFT {
            0 => self.leaves.get(local),
            piece => self.pieces.get(piece - 1)?.get(local),
        }
    }

    /// How many leaves there are.
    pub(crate) fn len(&self) -> usize {
        self.leaves.len() + self.pieces.iter().map(Vec::len).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::json::parse;
    use crate::leaf::LeafSource;

    const LAYOUTS: [Layout; 4] =
        [Layout { indent: None }, Layout { indent: Some(1) }, Layout { indent: Some(2) }, Layout { indent: Some(4) }];

    /// Leaves of every form `render` writes, with values at the edges of each column.
    fn leaves() -> Vec<Leaf<'static>> {
        let tensor = |dtype: &'static str, shape: Vec<i64>, stats: [Option<f64>; 4]| Leaf {
            kind: Some("torch.Tensor".into()),
            dtype: Some(dtype.into()),
            shape: Some(shape),
            stats,
            requires_grad: Some(true),
            ..Leaf::default()
        };
        let scalar = |kind: &'static str, value: &'static str| Leaf {
            kind: Some(kind.into()),
            value: Some(value.into()),
            ..Leaf::default()
        };
        let mut out = vec![
            tensor("torch.float32", vec![2, 3], [Some(1.5), Some(-2.0), Some(0.1234000027179718), Some(3.0)]),
            tensor("torch.bfloat16", vec![], [Some(1e-5), Some(-0.0), Some(5e-324), Some(1.7976931348623157e308)]),
            tensor(
                "torch.float16",
                vec![0, -1, i64::MAX, i64::MIN],
                [Some(f64::NAN), Some(f64::INFINITY), Some(f64::NEG_INFINITY), None],
            ),
            tensor("torch.int64", vec![1], [None, None, None, None]),
            tensor("torch.float32", vec![4096, 1], [Some(1e16), Some(1e-4), Some(123456789.0), Some(0.00009999)]),
            scalar("int", "3"),
            scalar("float", "-1.5e-07"),
            scalar("bool", "true"),
            scalar("NoneType", "null"),
            scalar("str", "\"npu:0\""),
            scalar("slice", "0"),
        ];
        let mut md5 = tensor("torch.float32", vec![8], [Some(1.0), Some(0.0), Some(0.5), Some(2.0)]);
        md5.md5 = Some("0a1b2c3d".into());
        md5.data_name = Some("Functional.linear.0.forward.input.0.pt".into());
        out.push(md5.clone());
        md5.requires_grad = None;
        out.push(md5.clone());
        let mut xor = md5;
        xor.stats = [None; 4];
        xor.md5 = Some("0x1f2e3d4c5b6a7988".into());
        out.push(xor.clone());
        xor.dtype = None;
        out.push(xor);
        let mut only_dtype = tensor("torch.float32", vec![], [Some(2.0); 4]);
        only_dtype.shape = None;
        out.push(only_dtype);
        out
    }

    fn rendered(leaf: &Leaf<'_>, layout: Layout, depth: usize) -> String {
        let mut out = Vec::new();
        leaf.render(&mut out, layout, depth);
        String::from_utf8(out).unwrap()
    }

    /// What the general way makes of `text` (a leaf's text alone) at `depth`.
    fn general(text: &str, layout: Layout, depth: usize) -> Option<(Leaf<'static>, Option<usize>)> {
        let arena = Arena::new();
        let node = parse(text.as_bytes(), &arena).ok()?;
        let source = LeafSource { bytes: text.as_bytes(), layout, depth };
        let (leaf, exact) = Leaf::from_source(&node, &mut Default::default(), source).ok()?;
        Some((owned(&leaf), exact))
    }

    fn owned(leaf: &Leaf<'_>) -> Leaf<'static> {
        let own = |c: &Option<Cow<'_, str>>| c.as_deref().map(|s| Cow::Owned(s.to_string()));
        Leaf {
            kind: own(&leaf.kind),
            dtype: own(&leaf.dtype),
            shape: leaf.shape.clone(),
            stats: leaf.stats,
            requires_grad: leaf.requires_grad,
            md5: own(&leaf.md5),
            data_name: own(&leaf.data_name),
            value: own(&leaf.value),
            raw: own(&leaf.raw),
        }
    }

    /// Equal, NaN statistics included.
    fn same(a: &Leaf<'_>, b: &Leaf<'_>) -> bool {
        let bits = |l: &Leaf<'_>| l.stats.map(|s| s.map(f64::to_bits));
        Leaf { stats: [None; 4], ..owned(a) } == Leaf { stats: [None; 4], ..owned(b) } && bits(a) == bits(b)
    }

    #[test]
    fn every_form_render_writes_is_read_back_from_anywhere_in_a_text() {
        for leaf in leaves() {
            for layout in LAYOUTS {
                for depth in [2, 3, 6] {
                    let text = rendered(&leaf, layout, depth);
                    let padded = format!("[ {text},\n 1]");
                    let (read, len) = LeafReader::new(layout)
                        .read(&padded, 2, depth)
                        .unwrap_or_else(|| panic!("not read at depth {depth}, {layout:?}:\n{text}"));
                    assert!(same(&read, &leaf), "{text}\n{read:?}");
                    assert_eq!(len, text.len(), "{text}");
                    // The general way agrees: same columns, and the text is exactly theirs.
                    let (general, exact) = general(&text, layout, depth).unwrap();
                    assert!(same(&general, &read) && exact == Some(len), "{text}");
                }
            }
        }
    }

    /// Every text one edit away from a rendered leaf: the reader either declines it or reads
    /// exactly what the general way reads, with the text exactly the columns' rendering.
    #[test]
    fn what_it_reads_the_general_way_reads_too() {
        let mut accepted = 0;
        let mut declined = 0;
        for leaf in leaves() {
            for layout in LAYOUTS {
                let depth = 3;
                let text = rendered(&leaf, layout, depth);
                let bytes = text.as_bytes();
                let mut variants: Vec<Vec<u8>> = Vec::new();
                for i in 0..bytes.len() {
                    variants.push([&bytes[..i], &bytes[i + 1..]].concat());
                    for b in [b' ', b'\n', b'0', b'5', b'"', b',', b'e', b'-', b'.', b'\\'] {
                        variants.push([&bytes[..i], &[b][..], &bytes[i..]].concat());
                        let mut v = bytes.to_vec();
                        v[i] = b;
                        variants.push(v);
                    }
                }
                for v in variants {
                    let Ok(v) = String::from_utf8(v) else { continue };
                    let read = LeafReader::new(layout).read(&v, 0, depth);
                    let general = general(&v, layout, depth);
                    match read {
                        Some((read, len)) => {
                            accepted += 1;
                            let (general, exact) = general.unwrap_or_else(|| panic!("read, but not JSON:\n{v}"));
                            assert!(same(&read, &general), "{v}\n{read:?}\n{general:?}");
                            // Read text is the leaf's rendering; the general way must agree
                            // when the leaf is all there is (a shorter read leaves bytes over).
                            if len == v.len() {
                                assert_eq!(exact, Some(len), "{v}");
                            } else {
                                assert!(parse(&v.as_bytes()[..len], &Arena::new()).is_ok(), "{v}");
                            }
                        }
                        None => declined += 1,
                    }
                }
            }
        }
        // Both answers were exercised: many edits leave a text render writes (a digit for a
        // digit), most do not.
        assert!(accepted > 1000 && declined > accepted, "{accepted} read, {declined} declined");
    }

    #[test]
    fn declines_what_render_would_not_write() {
        let layout = Layout { indent: Some(1) };
        // At depth 3: members indented by 4 spaces, shape items by 5.
        let good = rendered(&leaves()[0], layout, 3);
        assert!(LeafReader::new(layout).read(&good, 0, 3).is_some());
        for (from, to) in [
            ("\"Max\": 1.5", "\"Max\": 1.50"),                             // not repr's spelling
            ("\"Min\": -2.0", "\"Min\": -2"),                              // an integer statistic
            ("\"Max\": 1.5", "\"Max\": true"),                             // a boolean statistic
            ("torch.float32", "torch.float\\u0033"),                       // an escape
            ("torch.float32", "torch.floät"),                              // non-ASCII, which json.dump escapes
            ("\"type\"", "\"class_type\""),                                // a P2POp-like record
            ("\"requires_grad\": true", "\"requires_grad\": 1"),           // not a boolean
            ("     2,", "     02,"),                                       // a shape with a leading zero
            ("\n    \"Max\"", "\n     \"Max\""),                           // one space too many
            ("\"dtype\": \"torch.float32\",\n    \"shape\"", "\"shape\""), // dtype left out: fine
        ] {
            let bad = good.replacen(from, to, 1);
            assert_ne!(bad, good, "{from}");
            let read = LeafReader::new(layout).read(&bad, 0, 3);
            // Without a dtype a tensor still renders as it reads; every other edit declines.
            assert_eq!(read.is_some(), from.starts_with("\"dtype\""), "{bad}");
        }
        // At another depth the same text is not render's.
        assert!(LeafReader::new(layout).read(&good, 0, 2).is_none());
        // Keys in another order.
        let swapped = good.replacen(
            "\"type\": \"torch.Tensor\",\n    \"dtype\": \"torch.float32\"",
            "\"dtype\": \"torch.float32\",\n    \"type\": \"torch.Tensor\"",
            1,
        );
        assert_ne!(swapped, good);
        assert!(LeafReader::new(layout).read(&swapped, 0, 3).is_none());
    }

    #[test]
    fn quick_guesses_are_right_and_a_wrong_one_would_not_be_taken() {
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut wrong = 0;
        for _ in 0..100_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            // float32 statistics widened, as msprobe writes them, at every finite scale.
            let bits = (rng >> 32) as u32;
            let v = f64::from(f32::from_bits(bits & 0x7f7f_ffff | bits << 31));
            let mut text = Vec::new();
            crate::json::write_f64(&mut text, v);
            let text = String::from_utf8(text).unwrap();
            wrong += usize::from(quick_value(text.as_bytes()).is_some_and(|g| g != v));
            // A guess an ulp off either way is not written as the token, so it is not taken.
            for off in [f64::from_bits(v.to_bits() + 1), f64::from_bits(v.to_bits().wrapping_sub(1))] {
                if v != 0.0 {
                    assert!(!f64_is_written_as(off, text.as_bytes()), "{off:e} passes as {text}");
                }
            }
            let leaf = format!(
                r#"{{"type": "t", "dtype": "d", "Max": {text}, "Min": {text}, "Mean": {text}, "Norm": {text}}}"#
            );
            let read = LeafReader::new(Layout { indent: None }).read(&leaf, 0, 0);
            let stats = read.map(|(leaf, _)| leaf.stats.map(|s| s.map(f64::to_bits)));
            assert_eq!(stats, Some([Some(v.to_bits()); 4]), "{text}");
        }
        // Off, if ever, only next to a tie.
        assert!(wrong < 10, "{wrong} wrong guesses");
        for (token, want) in [
            (&b"1e-05"[..], Some(1e-5)),
            (b"-2.5", Some(-2.5)),
            (b"3.5146727561950684", Some(3.5146727561950684)),
            (b"12345678901234567890", None),
            (b"1e400", None),
            (b"0.5e-9223372036854775808", None),
            (b"NaN", None),
        ] {
            assert_eq!(quick_value(token), want, "{}", String::from_utf8_lossy(token));
        }
    }

    #[test]
    fn frames_are_made_only_where_the_text_opens_a_leaf() {
        // A second line of 60,000 spaces declares that indentation; objects 400 deep that are
        // not leaves must not make frames of 60,000 x 400 spaces each.
        let mut reader = LeafReader::new(Layout { indent: Some(60_000) });
        let text = "{\n \"a\": {}}";
        for depth in [3, 100, 400] {
            assert!(reader.read(text, 0, depth).is_none());
        }
        assert!(reader.frames.iter().all(Option::is_none));
        // A leaf that is there gets its frames.
        let leaf = &leaves()[0];
        let layout = Layout { indent: Some(2) };
        let mut reader = LeafReader::new(layout);
        assert!(reader.read(&rendered(leaf, layout, 3), 0, 3).is_some());
        assert!(reader.frames[3].is_some());
    }

    #[test]
    fn members_are_listed_in_declaration_order() {
        for (i, member) in Member::ALL.into_iter().enumerate() {
            assert_eq!(member as usize, i, "{member:?}");
        }
    }

    #[test]
    fn pieces_compare_as_slices_do() {
        let text = b"0123456789abcdefghijklmnopqrstuvwxyz";
        for len in 0..text.len() {
            for from in 0..text.len() - len {
                let a = &text[from..from + len];
                assert!(same_bytes(a, &text[from..from + len]));
                for i in 0..len {
                    let mut b = a.to_vec();
                    b[i] ^= 1;
                    assert!(!same_bytes(a, &b), "{len} {from} {i}");
                }
                assert!(!same_bytes(a, &text[..len + 1]));
            }
        }
    }
}
