//! `unbatch`: splits every element along axis 0 into its rows (tf.data's `unbatch`), and
//! `rebatch`, which is `unbatch` followed by `batch`.
//!
//! Every feature of an element must have the same leading size `b`; the element then gives `b`
//! rows. A dense `[b, ...]` feature gives rows of shape `[...]`, each a zero-copy view of the
//! element's bytes; a [`Ragged`](crate::Ragged) feature gives its rows as dense tensors (also
//! zero-copy views of its values). A rank-0 feature has no rows and is an error naming it; an
//! element whose features disagree on `b` is an error naming the element and the two features. An
//! element with `b = 0` gives nothing.
//!
//! Over a random-access input that knows its elements' leading size without reading them
//! ([`MapDataset::rows_per_element`]: `batch(n, drop_remainder=true)`, or any `batch(n)` whose
//! last batch is full, through shuffle/take/skip/repeat) the result is random access: row `i` is
//! row `i % n` of element `i / n`, checked when read. Otherwise it is a stream whose state is the
//! input's state before the element in progress plus the number of its rows already yielded;
//! restoring re-reads that one element.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{state_field, state_u64, Dataset, DatasetIter, IterDataset, MapDataset};
use crate::error::{Error, Result};
use crate::example::{stack_examples, Example, Value};

const OP: &str = "unbatch";

/// The leading size shared by every feature of `e` (element number `index` of the input).
pub fn element_rows(e: &Example, index: u64) -> Result<usize> {
    let mut first: Option<(&str, usize)> = None;
    for (name, v) in e.iter() {
        let rows = match v {
            Value::Tensor(t) if t.shape().is_empty() => {
                return Err(Error::schema(
                    OP,
                    format!(
                        "feature {name:?} of element {index} is a scalar (rank 0): it has no \
                         rows to split"
                    ),
                ))
            }
            v => v.rows()?,
        };
        match first {
            None => first = Some((name, rows)),
            Some((other, n)) if n != rows => {
                return Err(Error::schema(
                    OP,
                    format!(
                        "element {index}: feature {other:?} has {n} rows but feature {name:?} \
                         has {rows}; every feature must share the leading size"
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(first.map_or(0, |(_, n)| n))
}

/// Row `r` of every feature of `e`: zero-copy views (see [`Value::row`]).
fn row_of(e: &Example, r: usize) -> Result<Example> {
    e.row(r)
}

/// `unbatch` over a random-access input whose elements all have `rows` rows.
pub struct MapUnbatch {
    parent: Arc<dyn MapDataset>,
    rows: u64,
}

impl MapUnbatch {
    /// Unbatches `parent`, or `None` when its elements' leading size is not known up front (the
    /// caller then uses the stream, [`Unbatch`]).
    pub fn new(parent: Arc<dyn MapDataset>) -> Option<Self> {
        let rows = parent.rows_per_element()?;
        Some(MapUnbatch { parent, rows })
    }

    /// The parent's element holding row `index`, checked to have the promised size.
    fn element(&self, index: u64) -> Result<(Example, usize)> {
        let (j, r) = (index / self.rows, index % self.rows);
        let e = self.parent.get(j)?;
        let n = element_rows(&e, j)?;
        if n as u64 != self.rows {
            return Err(Error::schema(
                OP,
                format!(
                    "element {j} of {} has {n} rows, but that dataset promised {} per element",
                    self.parent.name(),
                    self.rows
                ),
            ));
        }
        Ok((e, r as usize))
    }
}

impl MapDataset for MapUnbatch {
    fn len(&self) -> u64 {
        let n = self.parent.len();
        if n == crate::INFINITE {
            return n;
        }
        n.saturating_mul(self.rows)
    }

    fn get(&self, index: u64) -> Result<Example> {
        if self.rows == 0 {
            return Err(Error::OutOfRange {
                index,
                len: 0,
                what: self.name(),
            });
        }
        let (e, r) = self.element(index)?;
        row_of(&e, r)
    }

    fn get_batch(&self, indices: &[u64]) -> Result<Option<Example>> {
        // Consecutive rows mostly share an element: read each distinct run's element once
        // instead of once per row (a batch over this op would otherwise read it `rows` times).
        if self.rows == 0 {
            return Ok(None);
        }
        let mut rows = Vec::with_capacity(indices.len());
        let mut current: Option<(u64, Example)> = None;
        for &i in indices {
            let j = i / self.rows;
            if current.as_ref().is_none_or(|(cj, _)| *cj != j) {
                let (e, _) = self.element(i)?;
                current = Some((j, e));
            }
            let (_, e) = current.as_ref().expect("set above");
            rows.push(row_of(e, (i % self.rows) as usize)?);
        }
        stack_examples("batch", &rows).map(Some)
    }

    fn name(&self) -> String {
        OP.into()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![Dataset::Map(self.parent.clone())]
    }
}

/// `unbatch` over any input (a stream).
pub struct Unbatch {
    parent: Dataset,
}

impl Unbatch {
    /// Unbatches `parent` as a stream.
    pub fn new(parent: Dataset) -> Self {
        Unbatch { parent }
    }
}

impl IterDataset for Unbatch {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        let inner = self.parent.iter(epoch)?;
        Ok(Box::new(UnbatchIter {
            before: inner.state(),
            inner,
            current: None,
            row: 0,
            seen: 0,
        }))
    }

    fn name(&self) -> String {
        OP.into()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }
}

struct UnbatchIter {
    inner: Box<dyn DatasetIter>,
    /// The input's state before the element in progress (or before the next one, when none is).
    before: Json,
    /// The element in progress and its number of rows.
    current: Option<(Example, usize)>,
    /// Rows of the element in progress already yielded; after a restore, rows to skip in the
    /// element about to be re-read.
    row: usize,
    /// Input elements read before the one in progress (for error messages).
    seen: u64,
}

impl DatasetIter for UnbatchIter {
    fn next(&mut self) -> Result<Option<Example>> {
        loop {
            if let Some((e, n)) = &self.current {
                if self.row < *n {
                    self.row += 1;
                    return row_of(e, self.row - 1).map(Some);
                }
                self.current = None;
                self.row = 0;
                self.seen += 1;
                self.before = self.inner.state();
            }
            let Some(e) = self.inner.next()? else {
                return Ok(None);
            };
            let n = element_rows(&e, self.seen)?;
            if self.row > n {
                return Err(Error::State(format!(
                    "{OP}: element {} has {n} rows, the state says {} were yielded",
                    self.seen, self.row
                )));
            }
            self.current = Some((e, n));
        }
    }

    fn state(&self) -> Json {
        json!({ "inner": self.before, "row": self.row, "seen": self.seen })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let before = state_field(state, "inner")?;
        self.inner.set_state(before)?;
        self.before = before.clone();
        self.row =
            crate::checked::to_usize("unbatch", "the state's row", state_u64(state, "row")?)?;
        self.seen = state_u64(state, "seen")?;
        // The element in progress is read again by the next `next()`, which skips `row` rows.
        self.current = None;
        Ok(())
    }
}

impl Dataset {
    /// tf.data's `unbatch`: every element split along axis 0 into its rows (see
    /// [`crate::ops::unbatch`]). Random access when the input is random access and knows its
    /// elements' leading size ([`MapDataset::rows_per_element`]); a stream otherwise.
    pub fn unbatch(&self) -> Dataset {
        self.on_base(|ds| {
            if let Dataset::Map(m) = ds {
                if let Some(u) = MapUnbatch::new(m.clone()) {
                    return Dataset::from_map(u);
                }
            }
            Dataset::from_iter(Unbatch::new(ds.clone()))
        })
    }

    /// tf.data's `rebatch(batch_size, drop_remainder)`: literally `unbatch()` then
    /// `batch(batch_size, drop_remainder)`, so batches of the new size that may span input
    /// elements. Over a random-access unbatch the batch reads each input element once per batch
    /// ([`MapUnbatch`]'s batch path); rows are zero-copy views until the batch copies them.
    pub fn rebatch(&self, batch_size: usize, drop_remainder: bool) -> Result<Dataset> {
        if batch_size == 0 {
            return Err(Error::invalid("rebatch(batch_size=0): must be > 0"));
        }
        self.unbatch().batch(batch_size, drop_remainder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;

    fn ids(es: &[Example], f: &str) -> Vec<i64> {
        es.iter()
            .flat_map(|e| e.tensor("t", f).unwrap().to_vec::<i64>().unwrap())
            .collect()
    }

    #[test]
    fn batch_then_unbatch_is_the_identity_and_keeps_random_access() {
        let ds = Dataset::range(10).batch(5, false).unwrap().unbatch();
        assert!(ds.is_random_access());
        assert_eq!(ds.len(), Some(10));
        let rows = ds.iter(0).unwrap().collect_all().unwrap();
        assert_eq!(ids(&rows, "x"), (0..10).collect::<Vec<_>>());
        assert_eq!(rows[3].tensor("t", "x").unwrap().shape(), &[] as &[usize]);
        assert_eq!(ds.get(7).unwrap(), rows[7]);
        // A short last batch: the leading size is not uniform, so a stream.
        let s = Dataset::range(10).batch(4, false).unwrap().unbatch();
        assert!(!s.is_random_access());
        let rows = s.iter(0).unwrap().collect_all().unwrap();
        assert_eq!(ids(&rows, "x"), (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn dense_rows_are_zero_copy_views() {
        let t = Tensor::from_vec(vec![2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
        let cols = Example::new().with("m", t.clone());
        let ds = Dataset::from_columns(Example::new().with(
            "m",
            Tensor::from_vec(vec![1, 2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap(),
        ))
        .unwrap();
        let rows = ds.unbatch().iter(0).unwrap().collect_all().unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[1].tensor("t", "m").unwrap().to_vec::<i32>().unwrap(),
            [4, 5, 6]
        );
        // Slicing a row out of an element points into the element's buffer.
        let row = row_of(&cols, 1).unwrap();
        let base = t.data().as_ptr() as usize;
        assert_eq!(
            row.tensor("t", "m").unwrap().data().as_ptr() as usize,
            base + 12
        );
    }

    #[test]
    fn ragged_rows_become_dense_and_streams_resume_mid_element() {
        let rows: Vec<Tensor> = [vec![1i64], vec![2, 3, 4], vec![5], vec![], vec![6, 7]]
            .into_iter()
            .map(|v| Tensor::from_vec(vec![v.len()], v).unwrap())
            .collect();
        let refs: Vec<&Tensor> = rows.iter().collect();
        let column = crate::example::stack("t", "v", &refs).unwrap();
        let batches = Dataset::from_columns(Example::new().with("v", column))
            .unwrap()
            .batch(2, false)
            .unwrap();
        let first = batches.get(0).unwrap();
        assert!(matches!(first.get("v"), Some(Value::Ragged(_))));
        for ds in [
            batches.unbatch(),
            batches
                .filter("all", crate::ops::filter_fn(|_, _| Ok(true)))
                .unbatch(),
        ] {
            let all = ds.iter(0).unwrap().collect_all().unwrap();
            let got: Vec<&Tensor> = all.iter().map(|e| e.tensor("t", "v").unwrap()).collect();
            assert_eq!(got, refs);
            crate::testing::check_resume_at_every_cut("unbatch", &ds);
        }
    }

    #[test]
    fn errors_name_the_feature_and_the_element() {
        let err = Dataset::range(3)
            .unbatch()
            .iter(0)
            .unwrap()
            .collect_all()
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"x\"") && err.contains("scalar"), "{err}");
        let e = Example::new()
            .with("a", Tensor::from_vec(vec![2], vec![1i64, 2]).unwrap())
            .with("b", Tensor::from_vec(vec![3], vec![1i64, 2, 3]).unwrap());
        let err = element_rows(&e, 5).unwrap_err().to_string();
        assert!(
            err.contains("element 5") && err.contains("\"a\"") && err.contains("\"b\""),
            "{err}"
        );
        assert!(Dataset::range(3).rebatch(0, false).is_err());
    }

    #[test]
    fn rebatch_regroups_rows_across_elements() {
        // tf.data: range(10).batch(3).rebatch(4) == [0..4] [4..8] [8, 9].
        let ds = Dataset::range(10)
            .batch(3, false)
            .unwrap()
            .rebatch(4, false)
            .unwrap();
        let b = ds.iter(0).unwrap().collect_all().unwrap();
        let got: Vec<Vec<i64>> = b
            .iter()
            .map(|e| e.tensor("t", "x").unwrap().to_vec().unwrap())
            .collect();
        assert_eq!(got, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]);
        // Random access end to end over full batches; the batch path reads elements once.
        let ra = Dataset::range(12)
            .batch(3, true)
            .unwrap()
            .rebatch(5, true)
            .unwrap();
        assert!(ra.is_random_access());
        assert_eq!(ra.len(), Some(2));
        assert_eq!(
            ra.get(1)
                .unwrap()
                .tensor("t", "x")
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            vec![5, 6, 7, 8, 9]
        );
    }
}
