//! `gather`: looks rows of a table up by an index feature and adds them as a new feature.
//!
//! A table is any dense `[N, ...]` [`Tensor`] behind the [`GatherTable`] trait; `stokehold-io`
//! provides one over a memory-mapped `.npy` file, so the rows come straight from the page cache.
//! The output's shape is the index's shape followed by the row shape:
//!
//! * a scalar index (gather before `batch`) gives a zero-copy view of the row; `batch` then copies
//!   each row once into the batch buffer;
//! * an index of shape `[b]` (gather after `batch`) fills one preallocated `[b, ...]` buffer with
//!   one `memcpy` per row.
//!
//! Either way a row is copied once from the page cache, never more. The op is a plain `map`, so it
//! keeps random access and composes with a global shuffle of the referencing dataset.
//!
//! ```
//! use std::sync::Arc;
//! use stokehold_core::{Dataset, Example, Tensor};
//! use stokehold_core::ops::gather::InMemoryTable;
//! let table = Arc::new(InMemoryTable::new(Tensor::from_vec(vec![3, 2], vec![0f32, 1., 2., 3., 4., 5.]).unwrap()).unwrap());
//! let ids = Tensor::from_vec(vec![4], vec![2i64, 0, 2, 1]).unwrap();
//! let ds = Dataset::from_columns(Example::new().with("id", ids)).unwrap()
//!     .shuffle(1).batch(4, false).unwrap().gather(table, "id", "feat");
//! let b = ds.get(0).unwrap();
//! assert_eq!(b.tensor("t", "feat").unwrap().shape(), &[4, 2]);
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use crate::dataset::Dataset;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::example::Example;
use crate::exec::copy::copy_rows;
use crate::ops::map::{Ctx, MapFn};
use crate::tensor::Tensor;

/// A table of rows that `gather` reads: a dense tensor of shape `[N, ...]`.
pub trait GatherTable: Send + Sync + 'static {
    /// What errors call the table, e.g. `"table /data/feats.npy"`.
    fn name(&self) -> String;
    /// All rows as one dense tensor (typically a zero-copy view of a memory map).
    fn rows(&self) -> &Tensor;
    /// Rows `indices` (shape `indices.shape() ++ row_shape`) read by the table itself, for a
    /// table whose rows are not in memory (a `.npy` in an object store, read by range); `None`,
    /// the default, gathers from [`GatherTable::rows`].
    fn take(&self, indices: &Tensor, feature: &str, op: &str) -> Option<Result<Tensor>> {
        let _ = (indices, feature, op);
        None
    }
}

/// A table held in memory (or any tensor already built), named `"in-memory table"`.
pub struct InMemoryTable(Tensor);

impl InMemoryTable {
    /// Wraps a dense tensor of rank >= 1.
    pub fn new(rows: Tensor) -> Result<Self> {
        check_table(&rows, "in-memory table")?;
        Ok(InMemoryTable(rows))
    }
}

impl GatherTable for InMemoryTable {
    fn name(&self) -> String {
        "in-memory table".into()
    }
    fn rows(&self) -> &Tensor {
        &self.0
    }
}

/// Checks that `rows` can serve as a table: dense, fixed-size dtype, rank >= 1.
pub fn check_table(rows: &Tensor, name: &str) -> Result<()> {
    if rows.dtype() == DType::Bytes || rows.shape().is_empty() {
        return Err(Error::invalid(format!(
            "{name}: a table needs a fixed-size dtype and rank >= 1, got {}{:?}",
            rows.dtype(),
            rows.shape()
        )));
    }
    Ok(())
}

/// Maps keys (integers or byte strings) to table rows.
#[derive(Clone, Debug, Default)]
pub struct KeyMap {
    ints: HashMap<i128, u64>,
    strings: HashMap<Vec<u8>, u64>,
}

impl KeyMap {
    /// Key `keys[i]` maps to row `i`. `keys` is a rank-1 integer or bytes tensor; a duplicate key
    /// is an error naming it and both rows.
    pub fn from_tensor(keys: &Tensor) -> Result<Self> {
        if keys.shape().len() != 1 {
            return Err(Error::invalid(format!(
                "keys must be rank 1, got shape {:?}",
                keys.shape()
            )));
        }
        let mut map = KeyMap::default();
        let dup = |k: String, a: u64, b: usize| {
            Error::invalid(format!("duplicate key {k} at rows {a} and {b}"))
        };
        if keys.dtype() == DType::Bytes {
            for i in 0..keys.len() {
                let k = keys.string(i).expect("in range").to_vec();
                if let Some(prev) = map.strings.insert(k.clone(), i as u64) {
                    return Err(dup(format!("{:?}", String::from_utf8_lossy(&k)), prev, i));
                }
            }
        } else {
            for (i, k) in int_values(keys, "keys", "key map")?.into_iter().enumerate() {
                if let Some(prev) = map.ints.insert(k, i as u64) {
                    return Err(dup(k.to_string(), prev, i));
                }
            }
        }
        Ok(map)
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.ints.len() + self.strings.len()
    }

    /// True when there are no keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows of the keys in `keys` (same shape), or an error naming the first unknown key.
    pub fn rows_of(&self, keys: &Tensor, feature: &str, op: &str) -> Result<Tensor> {
        let missing = |k: String| {
            Error::schema(
                op,
                format!("key {k} of feature {feature:?} is not in the key map"),
            )
        };
        let rows: Vec<i64> = if keys.dtype() == DType::Bytes {
            (0..keys.len())
                .map(|i| {
                    let k = keys.string(i).expect("in range");
                    let r = self.strings.get(k);
                    r.map(|r| *r as i64)
                        .ok_or_else(|| missing(format!("{:?}", String::from_utf8_lossy(k))))
                })
                .collect::<Result<_>>()?
        } else {
            int_values(keys, feature, op)?
                .into_iter()
                .map(|k| {
                    self.ints
                        .get(&k)
                        .map(|r| *r as i64)
                        .ok_or_else(|| missing(k.to_string()))
                })
                .collect::<Result<_>>()?
        };
        Tensor::from_vec(keys.shape().to_vec(), rows)
    }
}

/// Reads an integer tensor of any integer dtype as exact i128 values (every u64 and i64 fits);
/// other dtypes are a schema error naming the feature and `op`.
pub fn int_values(t: &Tensor, feature: &str, op: &str) -> Result<Vec<i128>> {
    macro_rules! conv {
        ($t:ty) => {
            t.to_vec::<$t>()?.into_iter().map(i128::from).collect()
        };
    }
    Ok(match t.dtype() {
        DType::U8 => conv!(u8),
        DType::I8 => conv!(i8),
        DType::U16 => conv!(u16),
        DType::I16 => conv!(i16),
        DType::U32 => conv!(u32),
        DType::I32 => conv!(i32),
        DType::U64 => conv!(u64),
        DType::I64 => conv!(i64),
        other => {
            return Err(Error::schema(
                op,
                format!(
                    "index feature {feature:?} has dtype {other}; gather needs an integer dtype"
                ),
            ))
        }
    })
}

/// Rows `indices` of `table`: shape `indices.shape() ++ row_shape`. A scalar index returns a
/// zero-copy view; otherwise each row is copied once into one preallocated buffer.
pub fn gather_rows(
    table: &dyn GatherTable,
    indices: &Tensor,
    feature: &str,
    op: &str,
) -> Result<Tensor> {
    if let Some(taken) = table.take(indices, feature, op) {
        return taken;
    }
    let rows = table.rows();
    let n = rows.shape()[0] as u64;
    let idx = int_values(indices, feature, op)?;
    let check = |i: i128| -> Result<usize> {
        match u64::try_from(i) {
            Err(_) => Err(Error::invalid(format!(
                "{op}: negative index {i} in feature {feature:?} into {} of length {n}",
                table.name()
            ))),
            Ok(index) if index >= n => Err(Error::OutOfRange {
                index,
                len: n,
                what: table.name(),
            }),
            Ok(index) => Ok(index as usize),
        }
    };
    let row_shape = &rows.shape()[1..];
    if indices.shape().is_empty() {
        let i = check(idx[0])?;
        return rows.slice_rows(i, i + 1)?.reshape(row_shape.to_vec());
    }
    let rb = rows.row_bytes();
    // Every index is checked before any row is copied: the first bad one (in order) is the error.
    let idx = idx.into_iter().map(check).collect::<Result<Vec<usize>>>()?;
    let buf = copy_rows(rows.data(), rb, &idx);
    let mut shape = indices.shape().to_vec();
    shape.extend_from_slice(row_shape);
    Tensor::new(rows.dtype(), shape, bytes::Bytes::from(buf))
}

/// Options of the gather op.
#[derive(Clone)]
pub struct Gather {
    /// The table to read rows from.
    pub table: Arc<dyn GatherTable>,
    /// The feature holding row indices (or keys, with `keys`).
    pub index: String,
    /// The feature the rows are written to.
    pub output: String,
    /// When set, `index` holds keys looked up through this map.
    pub keys: Option<Arc<KeyMap>>,
}

impl Gather {
    /// The op as a map function.
    pub fn into_fn(self) -> MapFn {
        Arc::new(move |mut e: Example, ctx: &Ctx| {
            let t = e.tensor(ctx.op, &self.index)?;
            let rows = match &self.keys {
                Some(k) => {
                    let r = k.rows_of(t, &self.index, ctx.op)?;
                    gather_rows(&*self.table, &r, &self.index, ctx.op)
                }
                None => gather_rows(&*self.table, t, &self.index, ctx.op),
            };
            let rows = rows.map_err(|err| at_element(err, ctx))?;
            e.insert(&self.output, rows);
            Ok(e)
        })
    }

    fn label(&self) -> String {
        let by = if self.keys.is_some() { "key" } else { "index" };
        format!(
            "gather({}, {by}={}, output={})",
            self.table.name(),
            self.index,
            self.output
        )
    }
}

/// Adds the element index to errors that lack context.
fn at_element(err: Error, ctx: &Ctx) -> Error {
    match err {
        Error::OutOfRange { index, len, what } => Error::OutOfRange {
            index,
            len,
            what: format!("{what} (in {}, element {})", ctx.op, ctx.index),
        },
        other => other,
    }
}

impl Dataset {
    /// Adds feature `output` = rows of `table` at the integer indices in feature `index`
    /// (a scalar per element, or `[b]` after `batch`).
    pub fn gather(&self, table: Arc<dyn GatherTable>, index: &str, output: &str) -> Dataset {
        self.gather_with(Gather {
            table,
            index: index.into(),
            output: output.into(),
            keys: None,
        })
    }

    /// [`Dataset::gather`] with any options (e.g. a key map).
    pub fn gather_with(&self, g: Gather) -> Dataset {
        let label = g.label();
        self.map(&label, g.into_fn())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> InMemoryTable {
        InMemoryTable::new(Tensor::from_vec(vec![4, 3], (0..12).collect::<Vec<i32>>()).unwrap())
            .unwrap()
    }

    #[test]
    fn scalar_and_batch_indices() {
        let t = table();
        let one = gather_rows(&t, &Tensor::scalar(2u8), "i", "g").unwrap();
        assert_eq!(one.shape(), &[3]);
        assert_eq!(one.to_vec::<i32>().unwrap(), vec![6, 7, 8]);
        let idx = Tensor::from_vec(vec![2, 2], vec![3i64, 0, 1, 3]).unwrap();
        let many = gather_rows(&t, &idx, "i", "g").unwrap();
        assert_eq!(many.shape(), &[2, 2, 3]);
        assert_eq!(
            many.to_vec::<i32>().unwrap(),
            vec![9, 10, 11, 0, 1, 2, 3, 4, 5, 9, 10, 11]
        );
        assert!(
            many.as_slice::<i32>().unwrap().is_some(),
            "batch buffer is aligned"
        );
    }

    #[test]
    fn out_of_range_and_negative_and_wrong_dtype() {
        let t = table();
        let e = gather_rows(
            &t,
            &Tensor::from_vec(vec![2], vec![1u32, 4]).unwrap(),
            "i",
            "g",
        )
        .unwrap_err();
        let s = e.to_string();
        assert!(s.contains("index 4") && s.contains("length 4"), "{s}");
        let s = gather_rows(&t, &Tensor::scalar(-1i16), "i", "g")
            .unwrap_err()
            .to_string();
        assert!(s.contains("-1") && s.contains("length 4"), "{s}");
        // A u64 above i64::MAX is out of range, reported as itself (not as a negative number).
        let s = gather_rows(&t, &Tensor::scalar(u64::MAX), "i", "g")
            .unwrap_err()
            .to_string();
        assert!(
            s.contains(&u64::MAX.to_string()) && s.contains("length 4"),
            "{s}"
        );
        let s = gather_rows(&t, &Tensor::scalar(1.0f32), "image_id", "g")
            .unwrap_err()
            .to_string();
        assert!(
            s.contains("image_id") && s.contains("float32") && s.contains("integer"),
            "{s}"
        );
    }

    #[test]
    fn key_maps_keep_u64_and_negative_keys_apart() {
        let m =
            KeyMap::from_tensor(&Tensor::from_vec(vec![2], vec![u64::MAX, 5]).unwrap()).unwrap();
        let r = m.rows_of(&Tensor::scalar(u64::MAX), "k", "g").unwrap();
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![0]);
        let e = m.rows_of(&Tensor::scalar(-1i64), "k", "g").unwrap_err();
        assert!(e.to_string().contains("key -1"), "{e}");
    }

    #[test]
    fn key_map_lookup_and_duplicates() {
        let keys = Tensor::strings(&["a", "b", "c", "d"]);
        let m = KeyMap::from_tensor(&keys).unwrap();
        let r = m.rows_of(&Tensor::strings(&["d", "a"]), "k", "g").unwrap();
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![3, 0]);
        let s = m
            .rows_of(&Tensor::strings(&["zz"]), "k", "g")
            .unwrap_err()
            .to_string();
        assert!(s.contains("zz"), "{s}");
        let dup = KeyMap::from_tensor(&Tensor::from_vec(vec![3], vec![5i64, 6, 5]).unwrap());
        let s = dup.unwrap_err().to_string();
        assert!(s.contains("key 5") && s.contains("rows 0 and 2"), "{s}");
    }
}
