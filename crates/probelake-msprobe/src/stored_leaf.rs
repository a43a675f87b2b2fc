//! How a taken-apart file keeps its leaves' values until they are pushed into columns.
//!
//! Nearly every leaf is read straight from the text ([`LeafReader`](crate::LeafReader)): such a
//! leaf is kept as a [`TextLeaf`], slices of the file and its statistics, about half the size of
//! a [`Leaf`] and without the shape's vector, which is read from the text again when the leaf
//! is pushed. A real 10.7 MB dump.json has 37,472 leaves, 33,460 of them with a shape: ~3.9 MB
//! less written (in fresh pages, which the kernel zeroes first) and 33,460 allocations and frees
//! fewer (docs/performance.md, "One file on every core"). The other leaves, taken apart from the
//! parsed document, are kept whole.

use std::borrow::Cow;

use crate::leaf::Leaf;

/// A leaf read from its text, which [`Leaf::render`] writes back byte for byte: so it has a
/// `type` and no `raw`.
#[derive(Debug, Clone, Default)]
pub(crate) struct TextLeaf<'a> {
    pub(crate) kind: &'a str,
    pub(crate) dtype: Option<&'a str>,
    /// The shape as the file writes it (`[]`, `[2, 3]`, or a dimension a line), each of its
    /// integers already checked to fit an `i64`: [`dims`] reads them.
    pub(crate) shape: Option<&'a str>,
    /// `Max`, `Min`, `Mean`, `Norm`, where `present` has their bit (1 << slot).
    pub(crate) stats: [f64; 4],
    pub(crate) present: u8,
    pub(crate) requires_grad: Option<bool>,
    pub(crate) md5: Option<&'a str>,
    pub(crate) data_name: Option<&'a str>,
    pub(crate) value: Option<&'a str>,
}

impl<'a> TextLeaf<'a> {
    /// The statistic in `slot`, if the leaf has it.
    pub(crate) fn stat(&self, slot: usize) -> Option<f64> {
        (self.present >> slot & 1 == 1).then(|| self.stats[slot])
    }

    /// The same leaf as a [`Leaf`].
    pub(crate) fn to_leaf(&self) -> Leaf<'a> {
        Leaf {
            kind: Some(Cow::Borrowed(self.kind)),
            dtype: self.dtype.map(Cow::Borrowed),
            shape: self.shape.map(|text| dims(text).collect()),
            stats: std::array::from_fn(|slot| self.stat(slot)),
            requires_grad: self.requires_grad,
            md5: self.md5.map(Cow::Borrowed),
            data_name: self.data_name.map(Cow::Borrowed),
            value: self.value.map(Cow::Borrowed),
            raw: None,
        }
    }
}

/// The integers of a shape's text that the reader checked (each token an `i64` that
/// `str::parse` reads), in order.
pub(crate) fn dims(text: &str) -> impl Iterator<Item = i64> + '_ {
    text.split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .filter(|token| !token.is_empty())
        // The reader refused every text where this fails: the default is never used.
        .map(|token| token.parse().unwrap_or_default())
}

/// A leaf's values as kept: read from its text, or taken apart from its node.
#[derive(Debug)]
pub(crate) enum StoredLeaf<'a> {
    Text(TextLeaf<'a>),
    /// Boxed: such leaves are few, and a [`Leaf`] is twice a [`TextLeaf`].
    Node(Box<Leaf<'a>>),
}

/// A leaf kept by a taken-apart file, with where its text is.
#[derive(Debug)]
pub(crate) struct ReadLeaf<'a> {
    pub(crate) leaf: StoredLeaf<'a>,
    /// The length of its text, which is its rendering at `depth` (0 where a leaf taken apart
    /// from its node renders otherwise).
    pub(crate) len: usize,
    pub(crate) depth: usize,
}

impl ReadLeaf<'_> {
    /// The leaf's `data_name`.
    pub(crate) fn data_name(&self) -> Option<&str> {
        match &self.leaf {
            StoredLeaf::Text(text) => text.data_name,
            StoredLeaf::Node(leaf) => leaf.data_name.as_deref(),
        }
    }
}

/// The values of one leaf of a [`ParsedDump`](crate::ParsedDump), as
/// [`ParsedDump::value`](crate::ParsedDump::value) gives them: give them to
/// [`DumpColumns::push`](crate::DumpColumns::push), or make a [`Leaf`] of them.
#[derive(Debug, Clone, Copy)]
pub struct LeafValue<'l, 'a>(pub(crate) Kept<'l, 'a>);

/// What a [`LeafValue`] points at.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kept<'l, 'a> {
    Text(&'l TextLeaf<'a>),
    Node(&'l Leaf<'a>),
}

impl<'l, 'a> LeafValue<'l, 'a> {
    /// The values of `read`.
    pub(crate) fn of(read: &'l ReadLeaf<'a>) -> Self {
        LeafValue(match &read.leaf {
            StoredLeaf::Text(text) => Kept::Text(text),
            StoredLeaf::Node(leaf) => Kept::Node(leaf),
        })
    }

    /// The values as a [`Leaf`] (which holds the shape in a vector of its own).
    pub fn to_leaf(self) -> Leaf<'a> {
        match self.0 {
            Kept::Text(text) => text.to_leaf(),
            Kept::Node(leaf) => leaf.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::{DumpColumns, FamilySize, LeafPlace, Origin};
    use crate::dump_file::tests::laid_out;
    use crate::dump_file::{take_apart_read, DumpKind};
    use crate::json::{Arena, Layout};
    use crate::name::parse_entry_name;
    use crate::read_dump::parse_dump;

    #[test]
    fn a_leaf_read_from_its_text_is_pushed_as_its_leaf_would_be() {
        for layout in [Layout { indent: None }, Layout::MSPROBE, Layout { indent: Some(4) }] {
            let bytes = laid_out(layout);
            let arena = Arena::new();
            let read = parse_dump(&bytes, &arena, DumpKind::Dump).unwrap();
            let parsed = take_apart_read(&read.doc, read.read, &bytes, DumpKind::Dump, read.layout).unwrap();
            let mut from_text = DumpColumns::with_capacity(FamilySize::default());
            let mut from_leaf = DumpColumns::with_capacity(FamilySize::default());
            let mut texts = 0;
            for row in &parsed.leaves {
                let name = parse_entry_name("Functional.linear.0.forward");
                let value = parsed.value(row);
                texts += usize::from(matches!(value.0, Kept::Text(_)));
                let origin = Origin { inner_step: Some(2), pid: None };
                from_text.push(row, value, "full", &name, origin);
                let place =
                    LeafPlace { seq: row.seq, leaf: row.leaf, section: &row.section, path: &row.path, item: &row.item };
                from_leaf.push_leaf(place, &value.to_leaf(), "full", &name, origin);
            }
            assert!(texts >= 4, "{texts} leaves read from the text in {layout:?}");
            assert_eq!(from_text.finish().unwrap(), from_leaf.finish().unwrap());
        }
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_kept_leaf_is_about_half_a_leaf() {
        let (kept, leaf) = (std::mem::size_of::<ReadLeaf<'_>>(), std::mem::size_of::<Leaf<'_>>());
        assert!(kept <= 152 && leaf >= 232, "{kept} bytes kept for a leaf of {leaf}");
    }

    #[test]
    fn dims_reads_every_layout_of_a_shape() {
        let all = |text: &str| dims(text).collect::<Vec<_>>();
        assert_eq!(all("[]"), Vec::<i64>::new());
        assert_eq!(all("[2, 3]"), vec![2, 3]);
        assert_eq!(all("[\n    4096,\n    0,\n    -1\n   ]"), vec![4096, 0, -1]);
        assert_eq!(all("[9223372036854775807, -9223372036854775808]"), vec![i64::MAX, i64::MIN]);
    }

    #[test]
    fn a_text_leaf_is_the_leaf_it_was_read_as() {
        let text = TextLeaf {
            kind: "torch.Tensor",
            dtype: Some("torch.float32"),
            shape: Some("[2, 3]"),
            stats: [1.5, 0.0, f64::NAN, 2.0],
            present: 0b1011,
            requires_grad: Some(false),
            md5: Some("0a1b2c3d"),
            ..TextLeaf::default()
        };
        let leaf = text.to_leaf();
        assert_eq!(leaf.kind.as_deref(), Some("torch.Tensor"));
        assert_eq!(leaf.shape, Some(vec![2, 3]));
        assert_eq!(
            leaf.stats.map(|s| s.map(f64::to_bits)),
            [Some(1.5f64.to_bits()), Some(0), None, Some(2f64.to_bits())]
        );
        assert_eq!((leaf.requires_grad, leaf.md5.as_deref(), leaf.raw), (Some(false), Some("0a1b2c3d"), None));
    }
}
