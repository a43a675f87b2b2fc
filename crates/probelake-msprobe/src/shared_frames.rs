//! A `frames` column, each group's frames held once.
//!
//! stack.json lists a group's frames once for all its names; the `stack` table repeats them on
//! every name's row. On a real 10.7 MB dump (26 groups, 6,612 names) that is 9.6 MB of frame
//! text copied, where stack.json is 0.28 MB, and a comparison then printed each name's cell
//! anew. Read this way, rows of one group share their frames' dictionary keys, so
//! [`StackFrames::identity`](crate::StackFrames::identity) finds them equal without reading
//! their texts.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use arrow::array::{ArrayBuilder, ArrayRef, DictionaryArray, Int32Array, ListArray, StringBuilder};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, FieldRef, Int32Type, Schema, SchemaRef};
use arrow::error::ArrowError;
use probelake_format::schema::stack_schema;

/// Builds a list of `Dictionary(Int32, Utf8)`: rows whose frames are the very texts of the row
/// before (the names of one stack group, which borrow one parsed list) get that row's keys.
#[derive(Default)]
pub(crate) struct SharedFrames {
    texts: StringBuilder,
    keys: Vec<i32>,
    /// The list's offsets into `keys`, after the leading 0.
    ends: Vec<i32>,
    /// The last row's frames, as addresses and lengths, and where its keys start.
    last: Vec<(usize, usize)>,
    last_start: usize,
    /// More frames than `i32` offsets reach.
    overflow: bool,
}

impl SharedFrames {
    /// Appends a row. `same_source` says that the last row's frames, if any, still live where
    /// they were (rows of one parsed file): only then may equal addresses mean equal texts.
    pub(crate) fn push(&mut self, frames: &[Cow<'_, str>], same_source: bool) {
        let place = |f: &Cow<'_, str>| (f.as_ptr() as usize, f.len());
        let shared =
            same_source && frames.len() == self.last.len() && frames.iter().map(place).eq(self.last.iter().copied());
        if shared {
            self.keys.extend_from_within(self.last_start..self.last_start + frames.len());
        } else {
            self.last_start = self.keys.len();
            self.last.clear();
            for f in frames {
                let key = self.index(self.texts.len());
                self.keys.push(key);
                self.texts.append_value(f);
                self.last.push(place(f));
            }
        }
        let end = self.index(self.keys.len());
        self.ends.push(end);
    }

    /// `n` as a key or an offset; past `i32::MAX`, `finish` refuses the column.
    fn index(&mut self, n: usize) -> i32 {
        i32::try_from(n).unwrap_or_else(|_| {
            self.overflow = true;
            0
        })
    }

    /// The column, as [`StackFrames`](crate::StackFrames) reads it.
    pub(crate) fn finish(&mut self) -> Result<ArrayRef, ArrowError> {
        if std::mem::take(&mut self.overflow) {
            return Err(ArrowError::ComputeError("more stack frames than a list column holds".into()));
        }
        let values = Arc::new(self.texts.finish());
        let keys = Int32Array::from(std::mem::take(&mut self.keys));
        let dictionary = DictionaryArray::<Int32Type>::try_new(keys, values)?;
        let offsets = OffsetBuffer::new(std::iter::once(0).chain(std::mem::take(&mut self.ends)).collect());
        self.last.clear();
        Ok(Arc::new(ListArray::try_new(item_field(), offsets, Arc::new(dictionary), None)?))
    }
}

fn item_field() -> FieldRef {
    let dictionary = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    Arc::new(Field::new("item", dictionary, true))
}

/// [`stack_schema`] with `frames` as [`SharedFrames::finish`] gives it.
pub(crate) fn shared_frames_schema() -> SchemaRef {
    static S: OnceLock<SchemaRef> = OnceLock::new();
    S.get_or_init(|| {
        let stack = stack_schema();
        let fields = stack.fields().iter().map(|f| match f.name().as_str() {
            "frames" => Arc::new(Field::new("frames", DataType::List(item_field()), f.is_nullable())),
            _ => Arc::clone(f),
        });
        Arc::new(Schema::new(fields.collect::<Vec<_>>()))
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StackFrames;

    #[test]
    fn rows_of_one_list_share_their_keys() {
        let group: Vec<Cow<'_, str>> = vec!["File a.py, line 1, in f".into(), "File b.py, line 2, in g".into()];
        let equal_copy: Vec<Cow<'_, str>> = group.iter().map(|f| Cow::Owned(f.to_string())).collect();
        let other: Vec<Cow<'_, str>> = vec!["File c.py, line 3, in h".into()];
        let mut frames = SharedFrames::default();
        frames.push(&group, true);
        frames.push(&group, true);
        // Equal texts elsewhere, or rows of another file: their own keys, the same frames.
        frames.push(&equal_copy, true);
        frames.push(&group, false);
        frames.push(&other, true);
        frames.push(&[], true);
        let column = frames.finish().unwrap();
        assert_eq!(column.data_type(), shared_frames_schema().field_with_name("frames").unwrap().data_type());
        let read = StackFrames::new(column.as_ref()).expect("a list of dictionary strings");
        for (i, want) in [&group, &group, &group, &group, &other].into_iter().enumerate() {
            assert_eq!(read.row(i).unwrap(), *want);
        }
        assert_eq!(read.row(5).unwrap(), Vec::<Cow<'_, str>>::new());
        assert_eq!(read.identity(0), read.identity(1));
        assert_ne!(read.identity(1), read.identity(2));
        assert_ne!(read.identity(2), read.identity(3));
        assert_eq!(read.identity(0).map(<[i32]>::len), Some(2));
    }
}
