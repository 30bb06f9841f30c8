//! What every packer shares: the op's arguments, an element's packed features ([`Item`]), an
//! open row ([`Row`]), reading an element ([`read_item`]) and building a row with its
//! `_segment_ids`, `_positions` and `_cu_seqlens` ([`build_row`]). `pack.rs` (first-fit,
//! best-fit) and `cts.rs` (concat-then-split) use them; neither uses the other's.

use bytes::Bytes;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::example::Example;
use crate::tensor::Tensor;

/// How a row is chosen for an element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackMode {
    /// The first open row it fits in.
    FirstFit,
    /// The fullest open row it fits in.
    BestFit,
    /// Joined and cut into full rows (Grain's `ConcatThenSplitIterDataset`, [`cts`]).
    ConcatThenSplit,
}

impl crate::choice::Choice for PackMode {
    const ARG: &'static str = "mode";
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("first_fit", PackMode::FirstFit),
        ("best_fit", PackMode::BestFit),
        ("concat_then_split", PackMode::ConcatThenSplit),
    ];
}

/// The arguments of `pack`.
#[derive(Clone, Debug)]
pub struct PackOptions {
    /// Feature -> row length, in output order (Grain's `length_struct`).
    pub lengths: Vec<(String, usize)>,
    /// Rows open at once (> 0; concat-then-split fills one row at a time and takes 1).
    pub num_packing_bins: usize,
    /// First-fit, best-fit or concat-then-split.
    pub mode: PackMode,
    /// Features packed without `_segment_ids` / `_positions`.
    pub meta_features: Vec<String>,
    /// Emit each set of rows in a keyed random order.
    pub shuffle_bins: bool,
    /// The key of that order.
    pub seed: u64,
    /// Also emit `f_cu_seqlens` (int32 `[lengths[f] + 1]`) for every feature with segments.
    pub cu_seqlens: bool,
}

/// One element's packed features (in `lengths` order) and their lengths.
pub(super) struct Item {
    pub(super) values: Vec<Tensor>,
    pub(super) lens: Vec<usize>,
    /// Input position of the element (for errors).
    pub(super) index: u64,
}

/// An open row: its elements and the length used in each feature.
#[derive(Default)]
pub(super) struct Row {
    pub(super) items: Vec<Item>,
    pub(super) used: Vec<usize>,
}

/// The element's packed features (in `lengths` order), numeric; each no longer than its row,
/// or with `split` (concat-then-split cuts them), each meta feature. The dtype and trailing
/// axes are checked against the row's as the row is built ([`build_row`]).
pub(super) fn read_item(
    label: &str,
    opts: &PackOptions,
    e: &Example,
    index: u64,
    split: bool,
) -> Result<Item> {
    let mut item = Item {
        values: Vec::with_capacity(opts.lengths.len()),
        lens: Vec::with_capacity(opts.lengths.len()),
        index,
    };
    for (name, max) in &opts.lengths {
        let t = e.tensor(label, name)?;
        if t.dtype() == DType::Bytes {
            return Err(Error::schema(
                label,
                format!("feature {name:?} is bytes; pack takes numeric features"),
            ));
        }
        let n = t.length();
        if n > *max && (!split || opts.meta_features.contains(name)) {
            let (what, hint) = match split {
                true => ("meta feature", ""),
                false => (
                    "feature",
                    ", or pack with mode=\"concat_then_split\", which cuts it",
                ),
            };
            return Err(Error::invalid(format!(
                "{label}: element {index}: {what} {name:?} has length {n} > its row length \
                 {max}; truncate it first{hint}"
            )));
        }
        item.lens.push(n);
        item.values.push(t.clone());
    }
    Ok(item)
}

/// One output row of `row`'s elements, each feature of the dtype and trailing axes of the
/// row's first element (as Grain's rows): the packed features, zero padded, with `_segment_ids`, `_positions` and (asked for)
/// `_cu_seqlens` for every feature not in `meta_features`.
pub(super) fn build_row(label: &str, opts: &PackOptions, row: &Row) -> Result<Example> {
    let shapes: Vec<(DType, Vec<usize>)> = row.items[0]
        .values
        .iter()
        .map(|t| (t.dtype(), t.shape().get(1..).unwrap_or(&[]).to_vec()))
        .collect();
    let mut out = Example::new();
    let mut aux = Vec::new();
    for (f, (name, len)) in opts.lengths.iter().enumerate() {
        let (dtype, trailing) = &shapes[f];
        // Sized by an argument (the packed length): checked, an error instead of an abort.
        let op = "pack";
        let what = format_args!("feature {name:?} packed to {len}");
        let width = crate::alloc::checked_bytes(
            op,
            what,
            trailing.iter().product::<usize>(),
            dtype.size().unwrap_or(1),
        )?;
        let mut values = crate::alloc::try_zeroed_vec(
            op,
            what,
            crate::alloc::checked_bytes(op, what, *len, width)?,
        )?;
        let mut seg = crate::alloc::try_filled(op, what, 0i32, *len)?;
        let mut positions = crate::alloc::try_filled(op, what, 0i32, *len)?;
        let mut cu = Vec::new();
        let mut start = 0;
        for (k, item) in row.items.iter().enumerate() {
            let n = item.lens[f];
            let t = &item.values[f];
            let rest = t.shape().get(1..).unwrap_or(&[]);
            if t.dtype() != *dtype || trailing.as_slice() != rest {
                return Err(Error::schema(
                    label,
                    format!(
                        "element {}: feature {name:?} is {}{:?}, the row holds {dtype} \
                         [n, {trailing:?}]",
                        item.index,
                        t.dtype(),
                        t.shape()
                    ),
                ));
            }
            values[start * width..(start + n) * width].copy_from_slice(t.data());
            for p in 0..n {
                seg[start + p] = k as i32 + 1;
                positions[start + p] = p as i32;
            }
            if n > 0 {
                cu.push(start as i32);
            }
            start += n;
        }
        let mut shape = vec![*len];
        shape.extend_from_slice(trailing);
        out.insert(name, Tensor::new(*dtype, shape, Bytes::from(values))?);
        if !opts.meta_features.contains(name) {
            aux.push((format!("{name}_segment_ids"), seg));
            aux.push((format!("{name}_positions"), positions));
            if opts.cu_seqlens {
                aux.push((
                    format!("{name}_cu_seqlens"),
                    cu_seqlens(op, what, cu, start, *len)?,
                ));
            }
        }
    }
    for (name, v) in aux {
        out.insert(&name, Tensor::from_vec(vec![v.len()], v)?);
    }
    Ok(out)
}

/// A row's `cu_seqlens` for flash-attention's varlen kernels: the start of each non-empty
/// segment (`starts`), the start of the padding when the row is not full (`used < len`: the padding
/// counts as one more sequence, so that the rows of a batch flattened to `[B * len]` are covered
/// end to end), then `len` repeated up to `len + 1` values (zero-length sequences), a fixed
/// shape so that batches stack.
fn cu_seqlens(
    op: &str,
    what: std::fmt::Arguments<'_>,
    starts: Vec<i32>,
    used: usize,
    len: usize,
) -> Result<Vec<i32>> {
    let mut cu = crate::alloc::try_filled(op, what, len as i32, len + 1)?;
    let mut ends = starts;
    if used < len {
        ends.push(used as i32);
    }
    for (c, s) in cu.iter_mut().zip(ends) {
        *c = s;
    }
    Ok(cu)
}
