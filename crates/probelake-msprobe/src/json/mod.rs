//! JSON as msprobe writes it: a parser that keeps order, number tokens and byte offsets, and
//! writers that reproduce CPython's `json.dump` byte for byte.

mod parse;
mod pieces;
mod pretty;
mod render;
mod words;

pub(crate) use parse::number_end;
pub use parse::{
    format_path, parse, parse_skeleton, parse_taking, Arena, Node, ObjectStart, PathSegment, SyntaxError, TakeObject,
    TakenObject, Value, MAX_DEPTH,
};
pub use pieces::{parse_in_pieces, PieceParse};
pub use pretty::{
    detect_layout, write_compact, write_node, write_node_instead, ArrayWriter, FillHole, Layout, ObjectWriter,
    WriteInstead,
};
pub(crate) use render::{decimal, plain_prefix};
pub use render::{f64_is_written_as, push_f64, write_f64, write_i64, write_str};
