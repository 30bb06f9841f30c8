//! `bucket_by_sequence_length`: tf.data's op of that name. Elements are sorted into buckets by
//! their length and each bucket is batched (padded) on its own, so a batch of 5 s clips is not
//! padded to the 180 s of the longest clip in the dataset.
//!
//! Semantics (tf.data's, checked value by value against TensorFlow's output in
//! `testdata/bucket`): with `boundaries = [b_0, ..., b_{n-1}]` (strictly increasing), an element
//! of length `L` goes to bucket `i` where `b_{i-1} <= L < b_i` (bucket 0 below `b_0`, bucket `n`
//! from `b_{n-1}` up; like tf.data, lengths must lie in the int32 range). Bucket `i` is batched by
//! `batch_sizes[i]` (`n + 1` entries): as soon as it holds that many elements they are emitted as
//! one padded batch (`padded_batch`'s padding, `<name>_lengths` features included). At the end of
//! the input the partial buckets follow in ascending bucket order (tf.data's `group_by_window`
//! kernel keeps its groups in a `std::map`), unless `drop_remainder`. `pad_to_bucket_boundary`
//! pads bucket `i` to `b_i - 1` instead of to its longest element and refuses elements of length
//! `>= b_{n-1}`; `no_padding` stacks as `batch` does (ragged when lengths differ).
//!
//! The one difference: tf.data fills every statically unknown axis with `b_i - 1` under
//! `pad_to_bucket_boundary`; stokehold elements have no static shapes, so it fills the `None`
//! axes of `padded_shapes` and, when the length is read from a feature, that feature's length
//! axis; other features pad to the longest in the batch.
//!
//! Built on `group_by_window` (key = bucket, window size = the bucket's batch size, the window
//! padded by `padded_batch`'s code): a stream, with that op's exact checkpoint and resume.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cast::PadValue;
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::example::{Example, Value};
use crate::ops::batch::BatchOptions;
use crate::ops::group_by_window::{key_fn, GroupByWindow, KeyFn, ReduceFn};

/// How an element's sequence length is found.
#[derive(Clone)]
pub enum ElementLength {
    /// The size of `feature` along `axis`.
    Feature {
        /// The feature.
        name: String,
        /// Its length axis.
        axis: usize,
    },
    /// A function of the element (tf.data's `element_length_func`), described by `label`.
    Func {
        /// The function.
        f: KeyFn,
        /// Its name in the op's label and errors.
        label: String,
    },
}

/// The arguments of `bucket_by_sequence_length` besides the length (tf.data's names).
#[derive(Clone, Debug, Default)]
pub struct BucketOptions {
    /// Strictly increasing bucket boundaries.
    pub boundaries: Vec<i64>,
    /// Batch size of each bucket: `boundaries.len() + 1` entries, each > 0.
    pub batch_sizes: Vec<usize>,
    /// Fixed padded shapes per feature (`None` axes pad to the longest, or to the boundary).
    pub padded_shapes: HashMap<String, Vec<Option<usize>>>,
    /// Padding value per feature.
    pub padding_values: HashMap<String, PadValue>,
    /// Padding value of the other features (`None`: zero, `b""` for bytes).
    pub default_value: Option<PadValue>,
    /// Pad bucket `i` to `boundaries[i] - 1`.
    pub pad_to_bucket_boundary: bool,
    /// Batch without padding (as `batch` does).
    pub no_padding: bool,
    /// Drop the partial batches at the end of the input.
    pub drop_remainder: bool,
}

impl BucketOptions {
    fn validate(&self, op: &str) -> Result<()> {
        let bad = |what: String| Err(Error::invalid(format!("{op}: {what}")));
        if self.batch_sizes.len() != self.boundaries.len() + 1 {
            return bad(format!(
                "bucket_batch_sizes has {} entries; must be len(bucket_boundaries) + 1 = {}",
                self.batch_sizes.len(),
                self.boundaries.len() + 1
            ));
        }
        if let Some(i) = self.batch_sizes.iter().position(|&b| b == 0) {
            return bad(format!("bucket_batch_sizes[{i}] = 0; must be > 0"));
        }
        if let Some(w) = self.boundaries.windows(2).find(|w| w[0] >= w[1]) {
            return bad(format!(
                "bucket_boundaries must be strictly increasing ({} then {})",
                w[0], w[1]
            ));
        }
        if self.pad_to_bucket_boundary && self.boundaries.is_empty() {
            return bad("pad_to_bucket_boundary needs at least one boundary".into());
        }
        if self.pad_to_bucket_boundary && self.boundaries[0] < 1 {
            return bad("pad_to_bucket_boundary needs boundaries >= 1".into());
        }
        Ok(())
    }

    /// Bucket of a length: the first `i` with `length < boundaries[i]`, else the last bucket.
    fn bucket(&self, length: i64) -> usize {
        self.boundaries.partition_point(|&b| b <= length)
    }
}

/// An [`ElementLength::Feature`] as a function of the element.
fn feature_length(name: String, axis: usize) -> KeyFn {
    key_fn(move |e: &Example, ctx| {
        let t = e.tensor(ctx.op, &name)?;
        t.shape().get(axis).map(|&n| n as i64).ok_or_else(|| {
            Error::schema(
                ctx.op,
                format!(
                    "element {}: feature {name:?} has shape {:?}, no axis {axis} to read the \
                     length from",
                    ctx.index,
                    t.shape()
                ),
            )
        })
    })
}

/// The padded batch of one bucket's window (`None` when `drop_remainder` drops it).
fn reduce_fn(opts: Arc<BucketOptions>, length_feature: Option<(String, usize)>) -> ReduceFn {
    Arc::new(move |bucket: i64, elements: &[Example], full: bool| {
        if opts.drop_remainder && !full {
            return Ok(None);
        }
        let b = bucket as usize;
        let size = opts.batch_sizes[b];
        if opts.no_padding {
            return BatchOptions::new(size, opts.drop_remainder)
                .make(elements)
                .map(Some);
        }
        let mut shapes = opts.padded_shapes.clone();
        if opts.pad_to_bucket_boundary {
            // validate() and the key function keep `b` below the last bucket.
            let to = (opts.boundaries[b] - 1) as usize;
            for shape in shapes.values_mut() {
                for d in shape.iter_mut().filter(|d| d.is_none()) {
                    *d = Some(to);
                }
            }
            if let Some((name, axis)) = &length_feature {
                if !shapes.contains_key(name) {
                    if let Some(Value::Tensor(t)) = elements[0].get(name) {
                        let mut shape = vec![None; t.shape().len()];
                        if *axis < shape.len() {
                            shape[*axis] = Some(to);
                        }
                        shapes.insert(name.clone(), shape);
                    }
                }
            }
        }
        BatchOptions::padded(
            size,
            opts.drop_remainder,
            shapes,
            opts.padding_values.clone(),
            opts.default_value.clone(),
        )
        .make(elements)
        .map(Some)
    })
}

impl Dataset {
    /// tf.data's `bucket_by_sequence_length` (see [`crate::ops::bucket`]): elements bucketed by
    /// `length`, each bucket padded and batched by its own batch size. A stream.
    pub fn bucket_by_sequence_length(
        &self,
        length: ElementLength,
        opts: BucketOptions,
    ) -> Result<Dataset> {
        let (f, what, length_feature) = match length {
            ElementLength::Feature { name, axis } => (
                feature_length(name.clone(), axis),
                format!("{name}[axis {axis}]"),
                Some((name, axis)),
            ),
            ElementLength::Func { f, label } => (f, label, None),
        };
        let mut flags = String::new();
        for (on, flag) in [
            (opts.pad_to_bucket_boundary, "pad_to_bucket_boundary"),
            (opts.no_padding, "no_padding"),
            (opts.drop_remainder, "drop_remainder"),
        ] {
            if on {
                flags.push_str(", ");
                flags.push_str(flag);
            }
        }
        let label = format!(
            "bucket_by_sequence_length[{what}](boundaries={:?}, batch_sizes={:?}{flags})",
            opts.boundaries, opts.batch_sizes
        );
        opts.validate(&label)?;
        let opts = Arc::new(opts);
        let key_opts = opts.clone();
        let key = key_fn(move |e, ctx| {
            let length = f(e, ctx)?;
            if i32::try_from(length).is_err() || length == i64::from(i32::MAX) {
                return Err(Error::invalid(format!(
                    "{}: element {}: length {length} is outside the int32 range tf.data buckets",
                    ctx.op, ctx.index
                )));
            }
            let b = key_opts.bucket(length);
            if key_opts.pad_to_bucket_boundary && b == key_opts.boundaries.len() {
                return Err(Error::invalid(format!(
                    "{}: element {}: length {length} >= the last boundary {}; with \
                     pad_to_bucket_boundary=True, elements must have length < \
                     max(bucket_boundaries)",
                    ctx.op,
                    ctx.index,
                    key_opts.boundaries[b - 1]
                )));
            }
            Ok(b as i64)
        });
        let size_opts = opts.clone();
        let sizes = Arc::new(move |bucket: i64| Ok(size_opts.batch_sizes[bucket as usize]));
        let reduce = reduce_fn(opts, length_feature);
        Ok(Dataset::from_iter(GroupByWindow::with_reduce(
            self.clone(),
            key,
            sizes,
            reduce,
            label,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::filter_fn;
    use crate::tensor::Tensor;

    fn clips(lengths: &[usize]) -> Dataset {
        let elements: Vec<Example> = lengths
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                Example::new().with("id", Tensor::scalar(i as i64)).with(
                    "seq",
                    Tensor::from_vec(vec![n], (0..n as i64).map(|k| i as i64 * 100 + k).collect())
                        .unwrap(),
                )
            })
            .collect();
        let cols = crate::example::stack_examples("t", &elements).unwrap();
        Dataset::from_columns(cols).unwrap()
    }

    fn opts(boundaries: Vec<i64>, batch_sizes: Vec<usize>) -> BucketOptions {
        BucketOptions {
            boundaries,
            batch_sizes,
            ..Default::default()
        }
    }

    fn seq() -> ElementLength {
        ElementLength::Feature {
            name: "seq".into(),
            axis: 0,
        }
    }

    fn ids(ds: &Dataset) -> Vec<Vec<i64>> {
        ds.iter(0)
            .unwrap()
            .collect_all()
            .unwrap()
            .iter()
            .map(|b| b.tensor("t", "id").unwrap().to_vec::<i64>().unwrap())
            .collect()
    }

    #[test]
    fn buckets_batch_by_their_own_sizes_and_flush_in_bucket_order() {
        // Lengths 4 1 2 5 0 7 -> buckets (boundaries 2, 5): 1 0 1 2 0 2.
        let ds = clips(&[4, 1, 2, 5, 0, 7])
            .bucket_by_sequence_length(seq(), opts(vec![2, 5], vec![2, 3, 2]))
            .unwrap();
        assert_eq!(ids(&ds), vec![vec![1, 4], vec![3, 5], vec![0, 2]]);
        let first = ds.iter(0).unwrap().next().unwrap().unwrap();
        assert_eq!(first.tensor("t", "seq").unwrap().shape(), &[2, 1]);
        assert_eq!(
            first
                .tensor("t", "seq_lengths")
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            vec![1, 0]
        );
    }

    #[test]
    fn pad_to_bucket_boundary_pads_to_boundary_minus_one_and_refuses_the_last_bucket() {
        let mut o = opts(vec![3, 6], vec![2, 2, 2]);
        o.pad_to_bucket_boundary = true;
        let ds = clips(&[1, 4])
            .bucket_by_sequence_length(seq(), o.clone())
            .unwrap();
        let all = ds.iter(0).unwrap().collect_all().unwrap();
        let shapes: Vec<&[usize]> = all
            .iter()
            .map(|b| b.tensor("t", "seq").unwrap().shape())
            .collect();
        assert_eq!(shapes, vec![&[1, 2][..], &[1, 5][..]]);
        let err = clips(&[1, 6])
            .bucket_by_sequence_length(seq(), o)
            .unwrap()
            .iter(0)
            .unwrap()
            .collect_all()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("element 1") && err.contains("length 6") && err.contains("bucket_by"),
            "{err}"
        );
    }

    #[test]
    fn bad_arguments_are_refused_by_name() {
        for (o, want) in [
            (
                opts(vec![2, 5], vec![2, 3]),
                "must be len(bucket_boundaries) + 1",
            ),
            (opts(vec![5, 2], vec![1, 1, 1]), "strictly increasing"),
            (opts(vec![2], vec![1, 0]), "bucket_batch_sizes[1] = 0"),
        ] {
            let err = clips(&[1])
                .bucket_by_sequence_length(seq(), o)
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains(want), "{err}");
        }
        let err = clips(&[1])
            .bucket_by_sequence_length(
                ElementLength::Feature {
                    name: "seq".into(),
                    axis: 1,
                },
                opts(vec![2], vec![1, 1]),
            )
            .unwrap()
            .iter(0)
            .unwrap()
            .collect_all()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no axis 1") && err.contains("element 0"),
            "{err}"
        );
    }

    #[test]
    fn resumes_at_every_cut() {
        let lengths = [4, 1, 7, 2, 9, 3, 3, 5, 12, 0, 6, 2, 8];
        for input in [
            clips(&lengths),
            clips(&lengths).filter("all", filter_fn(|_, _| Ok(true))),
        ] {
            let mut o = opts(vec![3, 6], vec![2, 3, 2]);
            for drop in [false, true] {
                o.drop_remainder = drop;
                let ds = input.bucket_by_sequence_length(seq(), o.clone()).unwrap();
                crate::testing::check_resume_at_every_cut("bucket", &ds);
            }
        }
    }
}
