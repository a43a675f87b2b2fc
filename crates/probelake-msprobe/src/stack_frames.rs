//! Reading the `frames` column of a decoded `stack` batch without copying its texts.
//!
//! A stack group's frames are repeated on the row of every name in the group, so the column is
//! best decoded as a dictionary ([`FetchedFile::decode_columns`] with `&["frames"]`): each
//! distinct frame is then held once, and rows are runs of keys into it. Copied out per row,
//! frames were a third of an export's page faults and most of the time a comparison spent
//! reading its stacks.
//!
//! [`FetchedFile::decode_columns`]: probelake_format::lake::FetchedFile::decode_columns

use std::borrow::Cow;
use std::ops::Range;

use arrow::array::{Array, AsArray, Int32Array, ListArray, StringArray};
use arrow::datatypes::Int32Type;

/// The frame texts of a `frames` list column, borrowed from its batch.
///
/// ```
/// # use std::sync::Arc;
/// use arrow::array::{ListBuilder, StringBuilder};
/// use probelake_msprobe::StackFrames;
///
/// let mut frames = ListBuilder::new(StringBuilder::new());
/// frames.values().append_value("File a.py, line 1, in f");
/// frames.append(true);
/// frames.append(false);
/// let frames = frames.finish();
///
/// let frames = StackFrames::new(&frames).expect("a list of strings");
/// assert_eq!(frames.row(0).unwrap(), ["File a.py, line 1, in f"]);
/// assert!(frames.row(1).unwrap().is_empty()); // a null list has no frames
/// assert!(frames.row(2).is_none()); // past the end
/// ```
pub struct StackFrames<'b> {
    list: &'b ListArray,
    texts: FrameTexts<'b>,
}

enum FrameTexts<'b> {
    Plain(&'b StringArray),
    Dictionary(&'b Int32Array, &'b StringArray),
}

impl<'b> StackFrames<'b> {
    /// The column's frames; `None` when it is not a list of strings, plain or
    /// `Dictionary(Int32, Utf8)`.
    pub fn new(frames: &'b dyn Array) -> Option<Self> {
        let list = frames.as_list_opt::<i32>()?;
        let values = list.values().as_ref();
        let texts = match values.as_string_opt::<i32>() {
            Some(plain) => FrameTexts::Plain(plain),
            None => {
                let dictionary = values.as_dictionary_opt::<Int32Type>()?;
                FrameTexts::Dictionary(dictionary.keys(), dictionary.values().as_string_opt::<i32>()?)
            }
        };
        Some(StackFrames { list, texts })
    }

    /// The frames of row `i`, innermost first. A null list has none and a null frame is empty.
    /// `None` where the row, its offsets or a key are out of range (a damaged file).
    pub fn row(&self, i: usize) -> Option<Vec<Cow<'b, str>>> {
        self.values_of(i)?.map(|j| self.frame(j)).collect()
    }

    /// What row `i`'s frames are made of, for telling repeated lists apart cheaply: two rows of
    /// the same column with equal identities hold equal frames. `None` where the column is not
    /// a dictionary without null keys, or the row is out of range.
    pub fn identity(&self, i: usize) -> Option<&'b [i32]> {
        let FrameTexts::Dictionary(keys, _) = self.texts else { return None };
        if keys.null_count() > 0 {
            return None;
        }
        keys.values().get(self.values_of(i)?)
    }

    /// The positions of row `i`'s frames among the list's values.
    fn values_of(&self, i: usize) -> Option<Range<usize>> {
        if i >= self.list.len() {
            return None;
        }
        if self.list.is_null(i) {
            return Some(0..0);
        }
        list_range(self.list.value_offsets(), i)
    }

    fn frame(&self, j: usize) -> Option<Cow<'b, str>> {
        let (texts, at) = match self.texts {
            FrameTexts::Plain(texts) => (texts, j),
            FrameTexts::Dictionary(keys, _) if j >= keys.len() => return None,
            FrameTexts::Dictionary(keys, _) if keys.is_null(j) => return Some(Cow::Borrowed("")),
            FrameTexts::Dictionary(keys, texts) => (texts, usize::try_from(keys.value(j)).ok()?),
        };
        if at >= texts.len() {
            return None;
        }
        Some(Cow::Borrowed(if texts.is_null(at) { "" } else { texts.value(at) }))
    }
}

/// The value positions of list row `i` from its `offsets`; `None` where they are out of range
/// or negative (a damaged file).
pub(super) fn list_range(offsets: &[i32], i: usize) -> Option<Range<usize>> {
    let (&start, &end) = offsets.get(i).zip(offsets.get(i + 1))?;
    Some(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
}

#[cfg(test)]
mod tests {
    use arrow::array::{ListBuilder, StringDictionaryBuilder};

    use super::*;

    #[test]
    fn dictionary_rows_with_equal_identities_hold_equal_frames() {
        let mut builder = ListBuilder::new(StringDictionaryBuilder::<Int32Type>::new());
        let lists: [&[&str]; 4] = [&["f", "g"], &["h"], &["f", "g"], &[]];
        for frames in lists {
            frames.iter().for_each(|f| builder.values().append_value(f));
            builder.append(true);
        }
        builder.append(false);
        let frames = builder.finish();
        let frames = StackFrames::new(&frames).expect("a list of dictionary strings");
        for (i, want) in lists.iter().enumerate() {
            assert_eq!(frames.row(i).expect("in range"), *want);
        }
        assert_eq!(frames.identity(0), frames.identity(2));
        assert_ne!(frames.identity(0), frames.identity(1));
        assert_eq!(frames.identity(3), Some(&[][..]));
        assert_eq!((frames.row(4).expect("null row"), frames.identity(4)), (vec![], Some(&[][..])));
        assert_eq!((frames.row(5), frames.identity(5)), (None, None));
    }

    #[test]
    fn plain_frames_have_no_identity() {
        let mut builder = ListBuilder::new(arrow::array::StringBuilder::new());
        builder.values().append_value("f");
        builder.values().append_null();
        builder.append(true);
        let frames = builder.finish();
        let frames = StackFrames::new(&frames).expect("a list of strings");
        assert_eq!(frames.row(0).expect("in range"), ["f", ""]);
        assert_eq!(frames.identity(0), None);
        let not_a_list = arrow::array::Int32Array::from(vec![1]);
        assert!(StackFrames::new(&not_a_list).is_none());
    }
}
