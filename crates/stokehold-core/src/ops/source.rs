//! In-memory sources: columns held as one arena per feature, and `range`.

use std::sync::Arc;

use crate::dataset::MapDataset;
use crate::error::{Error, Result};
use crate::example::{Example, Value};
use crate::tensor::Tensor;

/// A dataset held in memory as columns: one contiguous buffer per feature (a dense `[n, ...]`
/// tensor, or a [`Ragged`](crate::Ragged) values buffer plus row splits). `get(i)` is a zero-copy
/// view of row `i` of each column: no allocation per element, no padding, no 2 GB limit.
#[derive(Clone, Debug)]
pub struct InMemory {
    columns: Example,
    len: u64,
}

impl InMemory {
    /// Builds the dataset from columns that must all have the same number of rows.
    pub fn new(columns: Example) -> Result<Self> {
        let mut len = None;
        for (name, value) in columns.iter() {
            let rows = value.rows().map_err(|_| {
                Error::invalid(format!("feature {name:?} is a scalar; a column needs rows"))
            })?;
            match len {
                None => len = Some((name.to_string(), rows)),
                Some((ref first, n)) if n != rows => {
                    return Err(Error::invalid(format!(
                    "features have different lengths: {first:?} has {n} rows, {name:?} has {rows}"
                )))
                }
                _ => {}
            }
        }
        let len = len.map_or(0, |(_, n)| n as u64);
        if columns.is_empty() {
            return Err(Error::invalid(
                "an in-memory dataset needs at least one feature",
            ));
        }
        Ok(InMemory { columns, len })
    }

    /// The columns (for callers that want the whole arena, e.g. `cache`).
    pub fn columns(&self) -> &Example {
        &self.columns
    }
}

impl MapDataset for InMemory {
    fn len(&self) -> u64 {
        self.len
    }

    fn get(&self, index: u64) -> Result<Example> {
        if self.len == 0 {
            return Err(Error::OutOfRange {
                index,
                len: 0,
                what: self.name(),
            });
        }
        self.columns.row((index % self.len) as usize)
    }

    /// Columns are dense, or ragged along axis 0 only: every batch stacks.
    fn batch_pads(&self) -> bool {
        true
    }

    fn get_batch(&self, indices: &[u64]) -> Result<Option<Example>> {
        if self.len == 0 || indices.is_empty() {
            return Ok(None);
        }
        let rows: Vec<usize> = indices.iter().map(|&i| (i % self.len) as usize).collect();
        let mut out = Example::new();
        for (name, column) in self.columns.iter() {
            match column.gather_rows(&rows)? {
                Some(v) => out.insert(name, v),
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    fn name(&self) -> String {
        let feats: Vec<_> = self
            .columns
            .iter()
            .map(|(n, v)| format!("{n}:{}", v.dtype()))
            .collect();
        format!("in_memory(n={}, [{}])", self.len, feats.join(","))
    }
}

/// The integers `0..n` as feature `"x"` (int64 scalars). Mostly for tests and examples.
#[derive(Clone, Debug)]
pub struct Range {
    n: u64,
}

impl Range {
    /// `0..n`.
    pub fn new(n: u64) -> Self {
        Range { n }
    }
}

impl MapDataset for Range {
    fn len(&self) -> u64 {
        self.n
    }

    fn get(&self, index: u64) -> Result<Example> {
        if self.n == 0 {
            return Err(Error::OutOfRange {
                index,
                len: 0,
                what: self.name(),
            });
        }
        // An int64 feature, as tf.data's range: a value past i64::MAX is an error, not negative.
        let x = crate::checked::to_i64("range", "the value", index % self.n)?;
        Ok(Example::new().with("x", Tensor::scalar(x)))
    }

    fn name(&self) -> String {
        format!("range({})", self.n)
    }
}

/// Builds an [`InMemory`] dataset from a list of examples, stacking each feature into one arena.
pub fn from_examples(examples: &[Example]) -> Result<InMemory> {
    if examples.is_empty() {
        return Err(Error::invalid(
            "from_examples needs at least one example to know the schema",
        ));
    }
    let columns = crate::example::stack_examples("from_list", examples)?;
    InMemory::new(columns)
}

/// Wraps a single value as a one-feature column set, for convenience in tests.
pub fn column(name: &str, value: impl Into<Value>) -> Example {
    Example::new().with(name, value)
}

/// A shared handle to an [`InMemory`] dataset.
pub type SharedInMemory = Arc<InMemory>;
