//! A JSON parser for the dialect msprobe writes: RFC 8259 plus the bare `NaN`, `Infinity` and
//! `-Infinity` tokens of CPython's `allow_nan=True`.
//!
//! It keeps what a byte-exact re-export needs and serde_json drops: object members in file order
//! (duplicates too), number tokens as written (`5` is not `5.0`), and the byte offset of every
//! value, so later checks can name the place that failed.

use std::borrow::Cow;

use bumpalo::Bump;

use super::words::{control_bytes, splat, unflagged_prefix, zero_bytes};

/// Objects nested deeper than this are refused (msprobe itself stops at 400).
pub const MAX_DEPTH: usize = 512;

/// A parsed JSON value with the byte offset where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node<'a> {
    /// Byte offset of the value's first character in the input.
    pub pos: usize,
    /// The value.
    pub value: Value<'a>,
}

/// A JSON value. Number tokens and strings borrow from the input; a string whose escapes
/// unescaping changed, and every array and object, live in the document's [`Arena`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// A number token exactly as written, including `NaN`, `Infinity`, `-Infinity`.
    Number(&'a str),
    /// A string, unescaped (always [`Cow::Borrowed`]: from the input or from the arena).
    Str(Cow<'a, str>),
    /// An array.
    Array(&'a [Node<'a>]),
    /// An object, members in file order (duplicate keys kept).
    Object(&'a [(Cow<'a, str>, Node<'a>)]),
    /// `$`: the place of a leaf in a probelake skeleton. Only [`parse_skeleton`] produces it.
    Hole,
    /// An object the caller read itself while it was parsed (see [`parse_taking`]): its text,
    /// and the number the caller gave it. Only [`parse_taking`] produces it; the writers lay it
    /// out from `text` like the object it is.
    Taken {
        /// The object's text in the input, braces included.
        text: &'a str,
        /// The caller's number for what it read.
        index: usize,
    },
}

impl<'a> Value<'a> {
    /// The member `key` of an object (the first one, if repeated).
    pub fn get(&self, key: &str) -> Option<&Node<'a>> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A short name of the value's JSON type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::Str(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) | Value::Taken { .. } => "an object",
            Value::Hole => "a leaf placeholder",
        }
    }
}

/// One step of a path into a JSON document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSegment {
    /// An object member.
    Key(String),
    /// An array element.
    Index(usize),
}

/// Keys longer than this many characters are cut in [`format_path`].
const MAX_KEY_CHARS: usize = 80;

/// Renders a path as `$.data["Functional.linear.0.forward"].input_args[0]`.
pub fn format_path(path: &[PathSegment]) -> String {
    let mut out = String::from("$");
    for seg in path {
        match seg {
            PathSegment::Key(k) if is_plain_key(k) && k.len() <= MAX_KEY_CHARS => {
                out.push('.');
                out.push_str(k);
            }
            PathSegment::Key(k) => {
                out.push_str("[\"");
                // A path names a place for a person to find; a hostile key of megabytes would
                // make the message that long, so long keys are cut.
                let shown = match k.char_indices().nth(MAX_KEY_CHARS) {
                    Some((cut, _)) => Cow::Owned(format!("{}…", &k[..cut])),
                    None => Cow::Borrowed(k.as_str()),
                };
                for c in shown.chars() {
                    match c {
                        '\\' => out.push_str("\\\\"),
                        '"' => out.push_str("\\\""),
                        c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
                        c => out.push(c),
                    }
                }
                out.push_str("\"]");
            }
            PathSegment::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

fn is_plain_key(k: &str) -> bool {
    !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Why a document could not be parsed, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// Byte offset of the problem.
    pub offset: usize,
    /// 1-based line of `offset`.
    pub line: usize,
    /// 1-based column (in bytes) of `offset`.
    pub column: usize,
    /// Where in the document the parser was.
    pub path: String,
    /// What was wrong.
    pub message: String,
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at byte {} (line {}, column {}), inside {}",
            self.message, self.offset, self.line, self.column, self.path
        )
    }
}

impl std::error::Error for SyntaxError {}

struct RawError {
    offset: usize,
    message: String,
    /// Collected innermost first while the error travels up the recursion.
    path: Vec<PathSegment>,
}

type Parsed<T> = std::result::Result<T, RawError>;

/// Where a parsed document's arrays, objects and unescaped strings are kept, in a few large
/// blocks freed at once when the arena is dropped. A dump.json holds a few containers per
/// leaf; allocated and freed one by one, they were 5% of an import's instructions
/// (docs/benchmarks.md).
#[derive(Debug, Default)]
pub struct Arena(Bump);

impl Arena {
    /// An empty arena; it takes memory only when a document needs it.
    pub fn new() -> Self {
        Arena::default()
    }

    /// A copy of `s` kept in the arena, for text made from a document that lives as long.
    pub fn alloc_str(&self, s: &str) -> &str {
        self.0.alloc_str(s)
    }
}

/// Parses one JSON document (any whitespace around it allowed) into `arena`.
///
/// ```
/// use probelake_msprobe::json::{parse, Arena, Value};
/// let arena = Arena::new();
/// let doc = parse(br#"{"Max": NaN, "shape": [2, 3]}"#, &arena).unwrap();
/// assert_eq!(doc.value.get("Max").unwrap().value, Value::Number("NaN"));
/// ```
pub fn parse<'a>(input: &'a [u8], arena: &'a Arena) -> Result<Node<'a>, SyntaxError> {
    parse_with(input, arena, false, None)
}

/// Parses a probelake skeleton: JSON in which `$` stands for a leaf stored elsewhere.
pub fn parse_skeleton<'a>(input: &'a [u8], arena: &'a Arena) -> Result<Node<'a>, SyntaxError> {
    parse_with(input, arena, true, None)
}

/// Where an object starts, as [`parse_taking`] shows it to its caller.
#[derive(Debug, Clone, Copy)]
pub struct ObjectStart<'a, 'k> {
    /// The whole input.
    pub text: &'a str,
    /// Byte offset of the object's `{`.
    pub pos: usize,
    /// Its nesting depth: 0 for the document itself, 1 for a value inside it, …
    pub depth: usize,
    /// The member name it is the value of, if it is an object member.
    pub key: Option<&'k str>,
}

/// What the caller of [`parse_taking`] read of an object: the object's length in bytes and
/// the number the caller gives it, kept in its [`Value::Taken`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TakenObject {
    /// The object's length in bytes, braces included.
    pub len: usize,
    /// The caller's number for it.
    pub index: usize,
}

/// The caller's reader of [`parse_taking`].
pub type TakeObject<'a, 'f> = dyn for<'k> FnMut(ObjectStart<'a, 'k>) -> Option<TakenObject> + 'f;

/// [`parse`], offering each object to `take` before parsing it. Where `take` reads the object
/// itself it answers with its length, which must end a whole JSON object (the parser goes on
/// after it without looking inside); the document then holds a [`Value::Taken`] there instead
/// of the object's members.
///
/// A caller that knows the common shape of an object can read it much faster than a general
/// parser builds it, and declines (answers `None`) whatever else comes.
///
/// ```
/// use probelake_msprobe::json::{parse_taking, Arena, TakenObject, Value};
/// let arena = Arena::new();
/// let doc = parse_taking(br#"[{"a": 1}, {"b": 2}]"#, &arena, &mut |at| {
///     at.text[at.pos..].starts_with(r#"{"a": 1}"#).then_some(TakenObject { len: 8, index: 7 })
/// })
/// .unwrap();
/// let Value::Array(items) = doc.value else { panic!() };
/// assert_eq!(items[0].value, Value::Taken { text: r#"{"a": 1}"#, index: 7 });
/// assert!(matches!(items[1].value, Value::Object(_)));
/// ```
pub fn parse_taking<'a>(
    input: &'a [u8],
    arena: &'a Arena,
    take: &mut TakeObject<'a, '_>,
) -> Result<Node<'a>, SyntaxError> {
    parse_with(input, arena, false, Some(take))
}

fn parse_with<'a>(
    input: &'a [u8],
    arena: &'a Arena,
    holes: bool,
    take: Option<&mut TakeObject<'a, '_>>,
) -> Result<Node<'a>, SyntaxError> {
    let text = match std::str::from_utf8(input) {
        Ok(t) => t,
        Err(e) => {
            return Err(locate(
                input,
                RawError { offset: e.valid_up_to(), message: "invalid UTF-8".into(), path: Vec::new() },
            ))
        }
    };
    parse_text(text, arena, holes, take, None).map(|(node, _)| node)
}

/// Parses the document `text`, with `splice`'s members in place of its object's text; whether
/// they were put in place too.
pub(super) fn parse_text<'a>(
    text: &'a str,
    arena: &'a Arena,
    holes: bool,
    take: Option<&mut TakeObject<'a, '_>>,
    splice: Option<Splice<'a>>,
) -> Result<(Node<'a>, bool), SyntaxError> {
    let input = text.as_bytes();
    let spliced = splice.is_some();
    let mut parser = Parser { text, bytes: input, pos: 0, holes, arena: &arena.0, take, piece: None, splice };
    let result = parser.skip_ws().and_then(|()| parser.value()).and_then(|node| {
        parser.skip_ws()?;
        if parser.pos < parser.bytes.len() {
            return Err(parser.error("unexpected data after the end of the document"));
        }
        Ok(node)
    });
    let node = result.map_err(|e| locate(input, e))?;
    Ok((node, spliced && parser.splice.is_none()))
}

/// Parses a piece of an object's members, from the member name at `start` to `bounds`' end:
/// the members, and where the piece ends (the next piece's first member, or the object's `}`).
/// `None` where the text there is not such a piece.
pub(super) fn parse_piece<'a>(
    text: &'a str,
    arena: &'a Arena,
    start: usize,
    bounds: PieceBounds,
    take: Option<&mut TakeObject<'a, '_>>,
) -> Option<(Members<'a>, usize)> {
    let depth = bounds.depth.checked_sub(1)?;
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        pos: start,
        holes: false,
        arena: &arena.0,
        take,
        piece: Some(bounds),
        splice: None,
    };
    // The containers around the piece, as the parser of the whole document has them open; the
    // outer ones are never closed here.
    let mut stack: Vec<Frame<'a>> =
        (0..depth).map(|_| Frame::Object { pos: start, start: 0, key: Cow::Borrowed("") }).collect();
    let key = parser.member_name().ok()?;
    parser.skip_ws().ok()?;
    stack.push(Frame::Object { pos: start, start: 0, key });
    let node = parser.value_iter(&mut stack, &mut Scratch::default()).ok()?;
    match node.value {
        Value::Object(members) => Some((members, parser.pos)),
        _ => None,
    }
}

fn locate(input: &[u8], raw: RawError) -> SyntaxError {
    let offset = raw.offset.min(input.len());
    let before = &input[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let mut path = raw.path;
    path.reverse();
    SyntaxError { offset, line, column: offset - line_start + 1, path: format_path(&path), message: raw.message }
}

/// A container being parsed. Its finished children wait in the parser's shared
/// [`Scratch`] from `start` on, and move into an arena slice of exactly their number when it
/// closes: no container is grown and copied as it fills.
enum Frame<'a> {
    Array { pos: usize, start: usize },
    Object { pos: usize, start: usize, key: Cow<'a, str> },
}

/// The children of all open containers, innermost last.
#[derive(Default)]
struct Scratch<'a> {
    items: Vec<Node<'a>>,
    members: Vec<(Cow<'a, str>, Node<'a>)>,
}

/// The path to where the parser stopped, innermost first, for an error message.
fn error_path(stack: &[Frame<'_>], scratch: &Scratch<'_>) -> Vec<PathSegment> {
    // An array's children end where the next inner array's begin.
    let mut items_end = scratch.items.len();
    let mut path = Vec::with_capacity(stack.len());
    for frame in stack.iter().rev() {
        path.push(match frame {
            Frame::Array { start, .. } => {
                let index = items_end - start;
                items_end = *start;
                PathSegment::Index(index)
            }
            Frame::Object { key, .. } => PathSegment::Key(key.to_string()),
        });
    }
    path
}

/// The number of spaces from `i` on, counted eight at a time; at least 1 when `bytes[i]` is one.
fn spaces_at(bytes: &[u8], i: usize) -> usize {
    let rest = bytes.get(i..).unwrap_or_default();
    let n = unflagged_prefix(rest, |w| w ^ splat(b' '));
    if n + 8 <= rest.len() {
        n
    } else {
        n.max(1)
    }
}

/// The number of bytes from `i` on, eight at a time, before the first that a string's fast
/// path must look at: a quote, a backslash or a control character. Stops short near the end;
/// the caller's byte loop takes over from there.
fn plain_run(bytes: &[u8], i: usize) -> usize {
    unflagged_prefix(bytes.get(i..).unwrap_or_default(), |w| {
        zero_bytes(w ^ splat(b'"')) | zero_bytes(w ^ splat(b'\\')) | control_bytes(w)
    })
}

struct Parser<'a, 't, 'f> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    holes: bool,
    arena: &'a Bump,
    take: Option<&'t mut TakeObject<'a, 'f>>,
    /// Where this parser reads a [piece](super::pieces) of an object's members, not a document.
    piece: Option<PieceBounds>,
    /// Members parsed as pieces, spliced in where their object's first member starts.
    splice: Option<Splice<'a>>,
}

/// An object's members, in file order.
pub(super) type Members<'a> = &'a [(Cow<'a, str>, Node<'a>)];

/// Where a parser reading a piece of an object's members stops.
#[derive(Debug, Clone, Copy)]
pub(super) struct PieceBounds {
    /// The depth of the object's members (the number of containers open around them).
    pub(super) depth: usize,
    /// The next piece's first member: the piece ends where a `,` between members at `depth`
    /// leads to it. `None` for the last piece, which ends at the object's `}`.
    pub(super) stop: Option<usize>,
}

/// The members of one object, parsed in pieces ([`super::pieces`]), for [`parse_text`] to put
/// in place of the object's text.
#[derive(Debug)]
pub(super) struct Splice<'a> {
    /// Where the object's first member starts.
    pub(super) first_member: usize,
    /// The depth of the object's members.
    pub(super) depth: usize,
    /// The members, piece by piece, in file order.
    pub(super) members: Vec<Members<'a>>,
    /// Where the object's `}` is.
    pub(super) end: usize,
}

impl<'a> Parser<'a, '_, '_> {
    fn error(&self, message: impl Into<String>) -> RawError {
        RawError { offset: self.pos, message: message.into(), path: Vec::new() }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) -> Parsed<()> {
        loop {
            match self.peek() {
                // An indented file is a quarter spaces, in runs after each newline.
                Some(b' ') => self.pos += spaces_at(self.bytes, self.pos),
                Some(b'\n' | b'\r' | b'\t') => self.pos += 1,
                _ => return Ok(()),
            }
        }
    }

    fn expect_byte(&mut self, want: u8, what: &str) -> Parsed<()> {
        match self.peek() {
            Some(b) if b == want => {
                self.pos += 1;
                Ok(())
            }
            Some(b) => Err(self.error(format!("expected {what}, found {}", describe(b)))),
            None => Err(self.error(format!("expected {what}, found the end of the file"))),
        }
    }

    /// Parses one value. Iterative, with an explicit stack, so a deeply nested document
    /// costs heap, not the caller's thread stack.
    fn value(&mut self) -> Parsed<Node<'a>> {
        let mut stack: Vec<Frame<'a>> = Vec::new();
        let mut scratch = Scratch::default();
        let result = self.value_iter(&mut stack, &mut scratch);
        result.map_err(|mut e| {
            // Innermost first, as the error travels outwards.
            e.path.extend(error_path(&stack, &scratch));
            e
        })
    }

    fn value_iter(&mut self, stack: &mut Vec<Frame<'a>>, scratch: &mut Scratch<'a>) -> Parsed<Node<'a>> {
        'value: loop {
            let pos = self.pos;
            let mut done = match self.peek() {
                Some(b'{') | Some(b'[') => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(self.error(format!("nesting deeper than {MAX_DEPTH} levels")));
                    }
                    let is_object = self.peek() == Some(b'{');
                    if let Some(node) = is_object.then(|| self.taken(stack)).flatten() {
                        node
                    } else {
                        self.pos += 1;
                        self.skip_ws()?;
                        if is_object {
                            if self.peek() == Some(b'}') {
                                self.pos += 1;
                                Node { pos, value: Value::Object(&[]) }
                            } else if let Some(members) = self.spliced(stack.len() + 1) {
                                Node { pos, value: Value::Object(members) }
                            } else {
                                let key = self.member_name()?;
                                stack.push(Frame::Object { pos, start: scratch.members.len(), key });
                                self.skip_ws()?;
                                continue 'value;
                            }
                        } else if self.peek() == Some(b']') {
                            self.pos += 1;
                            Node { pos, value: Value::Array(&[]) }
                        } else {
                            stack.push(Frame::Array { pos, start: scratch.items.len() });
                            continue 'value;
                        }
                    }
                }
                Some(b'"') => Node { pos, value: Value::Str(self.string()?) },
                Some(b't') => Node { pos, value: self.literal("true", Value::Bool(true))? },
                Some(b'f') => Node { pos, value: self.literal("false", Value::Bool(false))? },
                Some(b'n') => Node { pos, value: self.literal("null", Value::Null)? },
                Some(b'N') => Node { pos, value: self.literal("NaN", Value::Number("NaN"))? },
                Some(b'I') => Node { pos, value: self.literal("Infinity", Value::Number("Infinity"))? },
                Some(b'-') if self.bytes.get(pos + 1) == Some(&b'I') => {
                    Node { pos, value: self.literal("-Infinity", Value::Number("-Infinity"))? }
                }
                Some(b'-' | b'0'..=b'9') => Node { pos, value: Value::Number(self.number()?) },
                Some(b'$') if self.holes => {
                    self.pos += 1;
                    Node { pos, value: Value::Hole }
                }
                Some(b) => return Err(self.error(format!("expected a value, found {}", describe(b)))),
                None => return Err(self.error("expected a value, found the end of the file")),
            };
            // Attach the finished value to its container; close containers that end here.
            loop {
                let depth = stack.len();
                let Some(frame) = stack.last_mut() else {
                    return Ok(done);
                };
                self.skip_ws()?;
                match frame {
                    Frame::Array { .. } => {
                        scratch.items.push(done);
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws()?;
                                continue 'value;
                            }
                            Some(b']') => self.pos += 1,
                            Some(b) => {
                                return Err(
                                    self.error(format!("expected ',' or ']' in an array, found {}", describe(b)))
                                )
                            }
                            None => return Err(self.error("unterminated array: the file ends inside it")),
                        }
                    }
                    Frame::Object { key, .. } => {
                        scratch.members.push((std::mem::take(key), done));
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws()?;
                                if let Some(piece) = self.piece.filter(|p| p.depth == depth) {
                                    match piece.stop {
                                        Some(stop) if self.pos == stop => return Ok(self.piece_end(stack, scratch)),
                                        Some(stop) if self.pos > stop => {
                                            return Err(self.error("a piece missed its end"))
                                        }
                                        _ => {}
                                    }
                                }
                                *key = self.member_name()?;
                                self.skip_ws()?;
                                continue 'value;
                            }
                            Some(b'}') if self.piece.is_some_and(|p| p.depth == depth) => {
                                return match self.piece.and_then(|p| p.stop) {
                                    None => Ok(self.piece_end(stack, scratch)),
                                    Some(_) => Err(self.error("a piece ended before its end")),
                                };
                            }
                            Some(b'}') => self.pos += 1,
                            Some(b) => {
                                return Err(
                                    self.error(format!("expected ',' or '}}' in an object, found {}", describe(b)))
                                )
                            }
                            None => return Err(self.error("unterminated object: the file ends inside it")),
                        }
                    }
                }
                let arena = self.arena;
                done = match stack.pop() {
                    Some(Frame::Array { pos, start }) => {
                        Node { pos, value: Value::Array(arena.alloc_slice_fill_iter(scratch.items.drain(start..))) }
                    }
                    Some(Frame::Object { pos, start, .. }) => {
                        Node { pos, value: Value::Object(arena.alloc_slice_fill_iter(scratch.members.drain(start..))) }
                    }
                    None => return Err(self.error("internal parser error")),
                };
            }
        }
    }

    /// The members of the object whose first member starts here, at `depth`, if they were
    /// parsed as pieces; the parser moves past the object's `}`.
    fn spliced(&mut self, depth: usize) -> Option<&'a [(Cow<'a, str>, Node<'a>)]> {
        let splice = self.splice.as_ref()?;
        if splice.first_member != self.pos || splice.depth != depth || self.bytes.get(splice.end) != Some(&b'}') {
            return None;
        }
        let splice = self.splice.take()?;
        self.pos = splice.end + 1;
        let members: Vec<(Cow<'a, str>, Node<'a>)> =
            splice.members.iter().flat_map(|piece| piece.iter().cloned()).collect();
        Some(self.arena.alloc_slice_fill_iter(members))
    }

    /// The members a piece parsed, as one object's: where the piece ends, with the parser at
    /// its end.
    fn piece_end(&mut self, stack: &[Frame<'a>], scratch: &mut Scratch<'a>) -> Node<'a> {
        let (pos, start) = match stack.last() {
            Some(Frame::Object { pos, start, .. }) => (*pos, *start),
            _ => (self.pos, scratch.members.len()),
        };
        Node { pos, value: Value::Object(self.arena.alloc_slice_fill_iter(scratch.members.drain(start..))) }
    }

    /// Offers the object starting here to the caller's reader; if it read it, moves past it.
    fn taken(&mut self, stack: &[Frame<'a>]) -> Option<Node<'a>> {
        let take = self.take.as_mut()?;
        let key = match stack.last() {
            Some(Frame::Object { key, .. }) => Some(key.as_ref()),
            _ => None,
        };
        let pos = self.pos;
        let taken = take(ObjectStart { text: self.text, pos, depth: stack.len(), key })?;
        // A reader that claims bytes past the end, or a cut inside a character, is ignored
        // rather than trusted: the parser reads the object itself.
        let text = self.text.get(pos..pos.checked_add(taken.len)?)?;
        if !(text.starts_with('{') && text.ends_with('}')) {
            return None;
        }
        self.pos = pos + taken.len;
        Some(Node { pos, value: Value::Taken { text, index: taken.index } })
    }

    fn literal(&mut self, word: &str, value: Value<'a>) -> Parsed<Value<'a>> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("expected a value (invalid literal)"))
        }
    }

    /// Reads `"name"` and the `:` after it.
    fn member_name(&mut self) -> Parsed<Cow<'a, str>> {
        if self.peek() != Some(b'"') {
            let found = self.peek().map_or("the end of the file".to_string(), describe);
            return Err(self.error(format!("expected a member name in quotes, found {found}")));
        }
        let key = self.string()?;
        self.skip_ws()?;
        self.expect_byte(b':', "':' after a member name")?;
        Ok(key)
    }

    fn number(&mut self) -> Parsed<&'a str> {
        let start = self.pos;
        match number_end(self.bytes, start) {
            Ok(end) => {
                self.pos = end;
                Ok(&self.text[start..end])
            }
            Err((at, message)) => {
                self.pos = at;
                Err(self.error(message))
            }
        }
    }

    fn string(&mut self) -> Parsed<Cow<'a, str>> {
        let start = self.pos + 1;
        let mut i = start;
        // Fast path: no escapes, borrow the slice.
        i += plain_run(self.bytes, i);
        while let Some(&b) = self.bytes.get(i) {
            match b {
                b'"' => {
                    self.pos = i + 1;
                    return Ok(Cow::Borrowed(&self.text[start..i]));
                }
                b'\\' => break,
                0..=0x1f => {
                    self.pos = i;
                    return Err(self.error("control character inside a string"));
                }
                _ => i += 1,
            }
        }
        let mut out = String::from(&self.text[start..i]);
        loop {
            let Some(&b) = self.bytes.get(i) else {
                self.pos = i;
                return Err(self.error("unterminated string: the file ends inside it"));
            };
            match b {
                b'"' => {
                    self.pos = i + 1;
                    // Into the arena: nothing in it is dropped, so an owned string would leak.
                    return Ok(Cow::Borrowed(self.arena.alloc_str(&out)));
                }
                b'\\' => {
                    self.pos = i;
                    let esc = self.bytes.get(i + 1).copied();
                    i += 2;
                    match esc {
                        Some(b'"') => out.push('"'),
                        Some(b'\\') => out.push('\\'),
                        Some(b'/') => out.push('/'),
                        Some(b'b') => out.push('\u{8}'),
                        Some(b'f') => out.push('\u{c}'),
                        Some(b'n') => out.push('\n'),
                        Some(b'r') => out.push('\r'),
                        Some(b't') => out.push('\t'),
                        Some(b'u') => {
                            let hi = self.hex4(i)?;
                            i += 4;
                            let code = if (0xd800..0xdc00).contains(&hi) {
                                if self.bytes.get(i..i + 2) != Some(b"\\u") {
                                    return Err(self.error("unpaired surrogate in a \\u escape"));
                                }
                                let lo = self.hex4(i + 2)?;
                                if !(0xdc00..0xe000).contains(&lo) {
                                    return Err(self.error("unpaired surrogate in a \\u escape"));
                                }
                                i += 6;
                                0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                            } else {
                                hi
                            };
                            match char::from_u32(code) {
                                Some(c) => out.push(c),
                                None => return Err(self.error("unpaired surrogate in a \\u escape")),
                            }
                        }
                        _ => return Err(self.error("invalid escape in a string")),
                    }
                }
                0..=0x1f => {
                    self.pos = i;
                    return Err(self.error("control character inside a string"));
                }
                _ => {
                    // Copy a run of plain bytes (UTF-8 already validated).
                    let run_start = i;
                    while let Some(&c) = self.bytes.get(i) {
                        if c == b'"' || c == b'\\' || c < 0x20 {
                            break;
                        }
                        i += 1;
                    }
                    out.push_str(&self.text[run_start..i]);
                }
            }
        }
    }

    fn hex4(&self, at: usize) -> Parsed<u32> {
        let digits = self.bytes.get(at..at + 4).ok_or_else(|| self.error("truncated \\u escape"))?;
        let mut v = 0u32;
        for &d in digits {
            let n = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.error("invalid \\u escape")),
            };
            v = v * 16 + u32::from(n);
        }
        Ok(v)
    }
}

/// Where the JSON number (`-? int frac? exp?`) that starts at `bytes[start]` ends, or where and
/// why it is not one. The parser and the leaf reader (`msprobe::LeafReader`) both read numbers
/// by it.
pub(crate) fn number_end(bytes: &[u8], start: usize) -> Result<usize, (usize, &'static str)> {
    let digits = |from: usize| bytes.get(from..).map_or(0, |b| b.iter().take_while(|d| d.is_ascii_digit()).count());
    let mut i = start;
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    match bytes.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i += digits(i),
        _ => return Err((i, "invalid number: expected a digit")),
    }
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        match digits(i) {
            0 => return Err((i, "invalid number: expected a digit after '.'")),
            n => i += n,
        }
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        match digits(i) {
            0 => return Err((i, "invalid number: expected a digit in the exponent")),
            n => i += n,
        }
    }
    Ok(i)
}

fn describe(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("'{}'", b as char)
    } else {
        format!("byte 0x{b:02x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_scans_stop_where_a_byte_scan_would() {
        // Every stop byte at every offset of a buffer longer than two words, after plain
        // ASCII or UTF-8 bytes, from every start: the word scan stops at the first stop byte,
        // or earlier only where fewer than eight bytes are left.
        for filler in [b'a', 0x80, 0xc3, b'~'] {
            for stop in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
                for at in 0..20 {
                    let mut bytes = vec![filler; 20];
                    bytes[at] = stop;
                    for from in 0..=at {
                        let run = plain_run(&bytes, from);
                        assert!(run == at - from || (run < at - from && from + run + 8 > bytes.len()), "{at} {from}");
                    }
                }
            }
        }
        // Spaces are counted in steps that never pass the run's end; repeated, they reach it.
        for len in 1..20 {
            for from in 0..len {
                let mut bytes = vec![b' '; len];
                bytes.push(b'x');
                let mut at = from;
                while bytes[at] == b' ' {
                    let step = spaces_at(&bytes, at);
                    assert!(step >= 1 && at + step <= len, "{len} {from}");
                    at += step;
                }
                assert_eq!(at, len);
            }
        }
    }

    #[test]
    fn keeps_tokens_order_and_duplicates() {
        let arena = Arena::new();
        let doc = parse(br#"{"b": 5, "a": 5.0, "b": -Infinity, "s": "\u00e9\ud83d\ude00"}"#, &arena).unwrap();
        let Value::Object(m) = &doc.value else { panic!() };
        let keys: Vec<&str> = m.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(keys, ["b", "a", "b", "s"]);
        assert_eq!(m[0].1.value, Value::Number("5"));
        assert_eq!(m[1].1.value, Value::Number("5.0"));
        assert_eq!(m[2].1.value, Value::Number("-Infinity"));
        assert_eq!(m[3].1.value.as_str(), Some("é😀"));
    }

    #[test]
    fn unescaped_strings_are_borrowed_from_the_arena() {
        // An owned string inside the arena would never be freed.
        let arena = Arena::new();
        let doc = parse(br#"{"a\tb": ["x\"y", "plain"]}"#, &arena).unwrap();
        let Value::Object(members) = &doc.value else { panic!() };
        assert!(matches!(&members[0].0, Cow::Borrowed("a\tb")));
        let Value::Array(items) = &members[0].1.value else { panic!() };
        assert!(matches!(&items[0].value, Value::Str(Cow::Borrowed("x\"y"))));
        assert!(matches!(&items[1].value, Value::Str(Cow::Borrowed("plain"))));
    }

    #[test]
    fn errors_name_offset_line_and_path() {
        let arena = Arena::new();
        let e = parse(b"{\n \"data\": {\n  \"x\": [1, 2,]\n }\n}", &arena).unwrap_err();
        assert_eq!(e.line, 3);
        assert_eq!(e.path, "$.data.x[2]");
        assert!(e.message.contains("expected a value"), "{e}");
        let e = parse(b"{\"a\": [1, 2", &arena).unwrap_err();
        assert_eq!(e.offset, 11);
        assert!(e.message.contains("unterminated"), "{e}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let doc = "[".repeat(10_000) + &"]".repeat(10_000);
        let e = parse(doc.as_bytes(), &Arena::new()).unwrap_err();
        assert!(e.message.contains("nesting deeper"), "{e}");
    }

    #[test]
    fn numbers_by_the_grammar() {
        let whole = |t: &str| number_end(t.as_bytes(), 0) == Ok(t.len());
        for good in ["0", "-0", "12", "1.5", "-0.25e+10", "3E7", "1e-05"] {
            assert!(whole(good), "{good}");
        }
        for bad in ["", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1.5.2", "--1", "0x10"] {
            assert!(!whole(bad), "{bad}");
        }
    }

    #[test]
    fn rejects_garbage() {
        for bad in [&b""[..], b"nul", b"{\"a\" 1}", b"[1 2]", b"\xff\xfe", b"01", b"1.", b"\"a\x01\"", b"{} x"] {
            assert!(parse(bad, &Arena::new()).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
