//! `pack`: variable-length sequences packed into fixed-length rows, first-fit, best-fit or
//! concat-then-split, with Grain's semantics (`FirstFitPackIterDataset`,
//! `BestFitPackIterDataset`, `ConcatThenSplitIterDataset`: [`cts`]).
//!
//! * `lengths` (Grain's `length_struct`) names the features to pack and each one's row length.
//!   An element's length in a feature is its size along axis 0 (1 for a scalar); other features
//!   of the elements are dropped.
//! * `num_packing_bins` rows are open at once. Each element, in input order, goes into a row where
//!   every one of its features still fits: the first such row (first-fit) or the fullest one, the
//!   row whose packed lengths summed over the features are largest (best-fit; ties to the lowest
//!   row). When no open row fits it, the open rows that hold anything are emitted, in row order
//!   (or a keyed shuffle of it with `shuffle_bins`), and a new set of rows starts with that
//!   element. At the end of the input the open rows are emitted the same way.
//! * A row of feature `f` is `[lengths[f], ...trailing axes]`, the elements' values one after
//!   another, zero padded; `f_segment_ids` (int32 `[lengths[f]]`) numbers the elements of the
//!   row from 1 (0 = padding) and `f_positions` (int32) counts 0, 1, ... within each element (0
//!   in padding). With `cu_seqlens`, `f_cu_seqlens` (int32 `[lengths[f] + 1]`) is the start
//!   of each non-empty element, then of the padding if any, then `lengths[f]` repeated: fixed
//!   length so rows stack. For a batch `[B, L]` flattened to `B * L` tokens,
//!   `unique(cu + L * arange(B)[:, None])` is flash-attention's varlen `cu_seqlens` (strictly
//!   increasing from 0 to `B * L`; the padding of a row is one sequence).
//!   `meta_features` are packed without these.
//! * An element longer than its row in some feature is an error (Grain: "must be truncated to
//!   max length"); truncate it first (concat-then-split cuts it instead).
//! * `shuffle_bins` permutes each emitted set of rows with a generator keyed by (seed, epoch,
//!   rows emitted before the set); Grain draws its permutation with numpy, so the packing is
//!   Grain's but the shuffled order is not bit-identical to Grain's.
//!
//! A stream. Its state is Grain's: the input's state before the first element of the set of rows
//! being emitted (or being filled), how many of its rows were emitted, and the count of rows
//! emitted; restoring re-reads the input from there and packs again (deterministic, so the same
//! rows), reading at most one set of rows' worth of elements.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{state_field, state_u64, Dataset, DatasetIter, IterDataset};
use crate::error::{Error, Result};
use crate::example::Example;
use crate::exec::Reservation;
use crate::rng::{Rng, Stream};
use crate::tensor::Tensor;

mod cts;
mod rows;

use rows::{build_row, read_item, Item, Row};
pub use rows::{PackMode, PackOptions};

/// Rows emitted from one set: their order and how many went out.
struct Ready {
    rows: Vec<Row>,
    order: Vec<usize>,
    next: usize,
    /// Input state and position before the set's first element.
    from: (Json, u64),
}

/// `pack` over any input.
pub struct Pack {
    parent: Dataset,
    opts: Arc<PackOptions>,
    label: String,
}

impl IterDataset for Pack {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        if self.opts.mode == PackMode::ConcatThenSplit {
            let inner = self.parent.iter(epoch)?;
            let it = cts::CtsIter::new(inner, self.opts.clone(), self.label.clone());
            return Ok(Box::new(it));
        }
        Ok(Box::new(PackIter {
            inner: self.parent.iter(epoch)?,
            opts: self.opts.clone(),
            label: self.label.clone(),
            epoch,
            pos: 0,
            open: Vec::new(),
            open_from: None,
            ready: None,
            counter: 0,
            skip: 0,
            exhausted: false,
            held: crate::exec::buffer_reservation(&self.parent),
            ready_bytes: 0,
        }))
    }

    fn name(&self) -> String {
        self.label.clone()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }
}

struct PackIter {
    inner: Box<dyn DatasetIter>,
    opts: Arc<PackOptions>,
    label: String,
    epoch: u64,
    /// Input position of the next element.
    pos: u64,
    /// The open rows (only those holding something).
    open: Vec<Row>,
    /// Input state and position before the open set's first element.
    open_from: Option<(Json, u64)>,
    ready: Option<Ready>,
    /// Rows emitted so far this epoch.
    counter: u64,
    /// Rows of the next ready set already emitted before a restore.
    skip: usize,
    exhausted: bool,
    /// The open and ready rows' bytes in the pipeline's memory budget; the ready set's part.
    held: Reservation,
    ready_bytes: usize,
}

impl PackIter {
    /// The row `item` goes into (`open.len()` for a new row), or `None` when none fits.
    fn place(&self, item: &Item) -> Option<usize> {
        let fits = |r: &Row| {
            r.used
                .iter()
                .zip(&item.lens)
                .zip(&self.opts.lengths)
                .all(|((u, n), (_, max))| u + n <= *max)
        };
        let candidates = self.open.iter().enumerate().filter(|(_, r)| fits(r));
        let found = match self.opts.mode {
            // (Concat-then-split runs its own iterator, `cts`.)
            PackMode::FirstFit | PackMode::ConcatThenSplit => candidates.map(|(i, _)| i).next(),
            // max_by_key keeps the last of equal keys; reversing keeps the lowest row.
            PackMode::BestFit => candidates
                .rev()
                .max_by_key(|(_, r)| r.used.iter().sum::<usize>())
                .map(|(i, _)| i),
        };
        found.or((self.open.len() < self.opts.num_packing_bins).then_some(self.open.len()))
    }

    fn add(&mut self, item: Item, row: usize) {
        if row == self.open.len() {
            self.open.push(Row {
                items: Vec::new(),
                used: vec![0; item.lens.len()],
            });
        }
        let r = &mut self.open[row];
        for (u, n) in r.used.iter_mut().zip(&item.lens) {
            *u += n;
        }
        self.held.hold(item.values.iter().map(Tensor::nbytes).sum());
        r.items.push(item);
    }

    /// Moves the open rows to `ready`, in their emission order.
    fn finalize(&mut self) -> Result<()> {
        let rows = std::mem::take(&mut self.open);
        let from = self.open_from.take().expect("an open set has a start");
        let mut order: Vec<usize> = (0..rows.len()).collect();
        if self.opts.shuffle_bins {
            Rng::for_element(self.opts.seed, Stream::Pack, self.epoch, self.counter)
                .shuffle(&mut order);
        }
        if self.skip > rows.len() {
            return Err(Error::State(format!(
                "{}: state says {} rows of a set of {} were emitted",
                self.label,
                self.skip,
                rows.len()
            )));
        }
        let next = std::mem::take(&mut self.skip);
        self.counter += next as u64;
        self.ready_bytes = self.held.held();
        self.ready = Some(Ready {
            rows,
            order,
            next,
            from,
        });
        Ok(())
    }

    /// Reads input until a set of rows is ready (or the input ends with nothing open).
    fn fill(&mut self) -> Result<()> {
        while self.ready.is_none() && !self.exhausted {
            let before = (self.inner.state(), self.pos);
            let Some(e) = self.inner.next()? else {
                self.exhausted = true;
                if !self.open.is_empty() {
                    self.finalize()?;
                }
                break;
            };
            let index = self.pos;
            self.pos += 1;
            let item = read_item(&self.label, &self.opts, &e, index, false)?;
            let row = match self.place(&item) {
                Some(row) => row,
                None => {
                    // Nothing fits: emit the open set; the element starts the next one.
                    self.finalize()?;
                    0
                }
            };
            if self.open.is_empty() {
                self.open_from = Some(before);
            }
            self.add(item, row);
        }
        Ok(())
    }
}

impl DatasetIter for PackIter {
    fn next(&mut self) -> Result<Option<Example>> {
        self.fill()?;
        let Some(ready) = &mut self.ready else {
            return Ok(None);
        };
        let row = ready.order[ready.next];
        ready.next += 1;
        let done = ready.next == ready.rows.len();
        let ready = self.ready.as_ref().expect("checked above");
        let out = build_row(&self.label, &self.opts, &ready.rows[row]);
        self.counter += 1;
        if done {
            self.ready = None;
            self.held.release(std::mem::take(&mut self.ready_bytes));
        }
        out.map(Some)
    }

    fn state(&self) -> Json {
        // Just restored (nothing read yet), `skip` rows of the next set are still owed.
        let ((from, from_pos), next, counter) = match (&self.ready, &self.open_from) {
            (Some(r), _) => (r.from.clone(), r.next, self.counter),
            (None, Some(f)) => (f.clone(), 0, self.counter),
            (None, None) => (
                (self.inner.state(), self.pos),
                self.skip,
                self.counter + self.skip as u64,
            ),
        };
        json!({"from": from, "from_pos": from_pos, "next_row": next, "counter": counter})
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let next = state_u64(state, "next_row")?;
        let counter = state_u64(state, "counter")?;
        if next > counter {
            return Err(Error::State(format!(
                "{}: next_row {next} > counter {counter}",
                self.label
            )));
        }
        self.inner.set_state(state_field(state, "from")?)?;
        self.pos = state_u64(state, "from_pos")?;
        self.open.clear();
        self.open_from = None;
        self.ready = None;
        self.held.release_all();
        self.ready_bytes = 0;
        self.exhausted = false;
        self.counter = counter - next;
        self.skip = next as usize;
        Ok(())
    }
}

impl Dataset {
    /// Grain's first-fit / best-fit packing (see [`crate::ops::pack`]). A stream.
    pub fn pack(&self, opts: PackOptions) -> Result<Dataset> {
        let mode = crate::choice::Choice::name(opts.mode);
        let lengths: Vec<String> = opts
            .lengths
            .iter()
            .map(|(n, l)| format!("{n}={l}"))
            .collect();
        let shuffle = if opts.shuffle_bins {
            format!(", shuffle_bins(seed={})", opts.seed)
        } else {
            String::new()
        };
        let bins = match opts.mode {
            PackMode::ConcatThenSplit => String::new(),
            _ => format!(", num_packing_bins={}", opts.num_packing_bins),
        };
        let label = format!("pack[{mode}]({}{bins}{shuffle})", lengths.join(", "));
        let bad = |what: String| Err(Error::invalid(format!("{label}: {what}")));
        if opts.num_packing_bins == 0 {
            return bad("num_packing_bins=0: must be > 0".into());
        }
        if opts.mode == PackMode::ConcatThenSplit
            && (opts.num_packing_bins != 1 || opts.shuffle_bins)
        {
            return bad(
                "concat_then_split fills one row at a time: num_packing_bins must be 1 \
                        and shuffle_bins false"
                    .into(),
            );
        }
        if opts.lengths.is_empty() {
            return bad("lengths is empty: name at least one feature to pack".into());
        }
        if let Some((n, _)) = opts.lengths.iter().find(|(_, l)| *l == 0) {
            return bad(format!("lengths[{n:?}] = 0: must be > 0"));
        }
        if let Some(m) = opts
            .meta_features
            .iter()
            .find(|m| !opts.lengths.iter().any(|(n, _)| n == *m))
        {
            return bad(format!("meta feature {m:?} is not in lengths"));
        }
        for (i, (n, _)) in opts.lengths.iter().enumerate() {
            if opts.lengths[..i].iter().any(|(m, _)| m == n) {
                return bad(format!("feature {n:?} appears twice in lengths"));
            }
        }
        Ok(Dataset::from_iter(Pack {
            parent: self.clone(),
            opts: Arc::new(opts),
            label,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::ops::filter_fn;

    /// Elements with "tok" = [i*10, i*10+1, ...] of the given lengths.
    fn seqs(lengths: &[usize]) -> Dataset {
        let elements: Vec<Example> = lengths
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let v: Vec<i64> = (0..n as i64).map(|k| i as i64 * 10 + k).collect();
                Example::new()
                    .with("tok", Tensor::from_vec(vec![n], v).unwrap())
                    .with("id", Tensor::scalar(i as i64))
            })
            .collect();
        Dataset::from_columns(crate::example::stack_examples("t", &elements).unwrap()).unwrap()
    }

    fn opts(len: usize, bins: usize, mode: PackMode) -> PackOptions {
        PackOptions {
            lengths: vec![("tok".into(), len)],
            num_packing_bins: bins,
            mode,
            meta_features: vec![],
            shuffle_bins: false,
            seed: 0,
            cu_seqlens: false,
        }
    }

    fn col(e: &Example, name: &str) -> Vec<i64> {
        let t = e.tensor("t", name).unwrap();
        match t.dtype() {
            DType::I32 => t
                .to_vec::<i32>()
                .unwrap()
                .into_iter()
                .map(i64::from)
                .collect(),
            _ => t.to_vec::<i64>().unwrap(),
        }
    }

    #[test]
    fn first_fit_fills_the_first_row_that_fits_with_grains_outputs() {
        // Lengths 3, 2, 1, 4 into rows of 4, 2 bins open.
        let ds = seqs(&[3, 2, 1, 4])
            .pack(opts(4, 2, PackMode::FirstFit))
            .unwrap();
        let rows = ds.iter(0).unwrap().collect_all().unwrap();
        // 0 (3) -> row 0; 1 (2) -> row 1; 2 (1) -> row 0 (full); 3 (4) fits nowhere -> emit.
        assert_eq!(rows.len(), 3);
        assert_eq!(col(&rows[0], "tok"), vec![0, 1, 2, 20]);
        assert_eq!(col(&rows[0], "tok_segment_ids"), vec![1, 1, 1, 2]);
        assert_eq!(col(&rows[0], "tok_positions"), vec![0, 1, 2, 0]);
        assert_eq!(col(&rows[1], "tok"), vec![10, 11, 0, 0]);
        assert_eq!(col(&rows[1], "tok_segment_ids"), vec![1, 1, 0, 0]);
        assert_eq!(col(&rows[2], "tok"), vec![30, 31, 32, 33]);
        assert!(
            rows[0].get("id").is_none(),
            "features not in lengths are dropped"
        );
    }

    #[test]
    fn best_fit_takes_the_fullest_row_that_fits() {
        // Rows of 6, 2 bins: 0 (2) -> r0; 1 (5) fits only r1; 2 (1) fits both: first-fit takes
        // r0, best-fit the fuller r1.
        let ff = seqs(&[2, 5, 1])
            .pack(opts(6, 2, PackMode::FirstFit))
            .unwrap();
        let bf = seqs(&[2, 5, 1])
            .pack(opts(6, 2, PackMode::BestFit))
            .unwrap();
        let ff = ff.iter(0).unwrap().collect_all().unwrap();
        let bf = bf.iter(0).unwrap().collect_all().unwrap();
        assert_eq!(col(&ff[0], "tok"), vec![0, 1, 20, 0, 0, 0]);
        assert_eq!(col(&bf[0], "tok"), vec![0, 1, 0, 0, 0, 0]);
        assert_eq!(col(&bf[1], "tok"), vec![10, 11, 12, 13, 14, 20]);
        assert_eq!(col(&bf[1], "tok_segment_ids"), vec![1, 1, 1, 1, 1, 2]);
        assert_eq!(col(&bf[1], "tok_positions"), vec![0, 1, 2, 3, 4, 0]);
    }

    #[test]
    fn scalars_pack_as_length_one_and_meta_features_get_no_segments() {
        let mut o = opts(5, 1, PackMode::FirstFit);
        o.lengths.push(("id".into(), 3));
        o.meta_features = vec!["id".into()];
        let rows = seqs(&[2, 2, 3])
            .pack(o)
            .unwrap()
            .iter(0)
            .unwrap()
            .collect_all()
            .unwrap();
        assert_eq!(col(&rows[0], "id"), vec![0, 1, 0]);
        assert!(rows[0].get("id_segment_ids").is_none());
        assert_eq!(col(&rows[1], "tok"), vec![20, 21, 22, 0, 0]);
    }

    #[test]
    fn too_long_and_bad_arguments_are_errors() {
        let err = seqs(&[2, 7])
            .pack(opts(4, 2, PackMode::BestFit))
            .unwrap()
            .iter(0)
            .unwrap()
            .collect_all()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("element 1") && err.contains("length 7 > its row length 4"),
            "{err}"
        );
        let err = seqs(&[1])
            .pack(opts(4, 0, PackMode::FirstFit))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("num_packing_bins=0"), "{err}");
    }

    #[test]
    fn resumes_at_every_cut_shuffled_or_not() {
        let lengths = [3, 1, 5, 2, 2, 6, 1, 1, 4, 3, 2, 5, 1];
        for input in [
            seqs(&lengths),
            seqs(&lengths).filter("all", filter_fn(|_, _| Ok(true))),
        ] {
            for mode in [PackMode::FirstFit, PackMode::BestFit] {
                for shuffle in [false, true] {
                    let mut o = opts(6, 3, mode);
                    o.shuffle_bins = shuffle;
                    o.seed = 5;
                    let ds = input.pack(o).unwrap();
                    crate::testing::check_resume_at_every_cut("pack", &ds);
                }
            }
        }
    }

    #[test]
    fn every_token_is_emitted_once_in_order_within_its_row() {
        let lengths = [3, 1, 5, 2, 2, 6, 1, 1, 4, 3, 2, 5, 1];
        let ds = seqs(&lengths).pack(opts(6, 3, PackMode::BestFit)).unwrap();
        let mut tokens: Vec<i64> = Vec::new();
        for row in ds.iter(0).unwrap().collect_all().unwrap() {
            let seg = col(&row, "tok_segment_ids");
            tokens.extend(
                col(&row, "tok")
                    .iter()
                    .zip(&seg)
                    .filter(|(_, s)| **s > 0)
                    .map(|(t, _)| *t),
            );
        }
        tokens.sort_unstable();
        let mut want: Vec<i64> = lengths
            .iter()
            .enumerate()
            .flat_map(|(i, &n)| (0..n as i64).map(move |k| i as i64 * 10 + k))
            .collect();
        want.sort_unstable();
        assert_eq!(tokens, want);
    }

    fn cts(len: usize) -> PackOptions {
        PackOptions {
            num_packing_bins: 1,
            cu_seqlens: true,
            ..opts(len, 1, PackMode::ConcatThenSplit)
        }
    }

    #[test]
    fn concat_then_split_cuts_documents_into_full_rows_with_grains_segments() {
        // Lengths 3, 6, 2 into rows of 4: [0 0 0 1][1 1 1 1][1 2 2 -]: each piece of a cut
        // document is a new segment whose positions start at 0 (Grain's rule).
        let rows = seqs(&[3, 6, 2])
            .pack(cts(4))
            .unwrap()
            .iter(0)
            .unwrap()
            .collect_all()
            .unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(col(&rows[0], "tok"), vec![0, 1, 2, 10]);
        assert_eq!(col(&rows[0], "tok_segment_ids"), vec![1, 1, 1, 2]);
        assert_eq!(col(&rows[0], "tok_positions"), vec![0, 1, 2, 0]);
        assert_eq!(col(&rows[0], "tok_cu_seqlens"), vec![0, 3, 4, 4, 4]);
        assert_eq!(col(&rows[1], "tok"), vec![11, 12, 13, 14]);
        assert_eq!(col(&rows[1], "tok_positions"), vec![0, 1, 2, 3]);
        assert_eq!(col(&rows[1], "tok_cu_seqlens"), vec![0, 4, 4, 4, 4]);
        assert_eq!(col(&rows[2], "tok"), vec![15, 20, 21, 0]);
        assert_eq!(col(&rows[2], "tok_segment_ids"), vec![1, 2, 2, 0]);
        assert_eq!(col(&rows[2], "tok_positions"), vec![0, 0, 1, 0]);
        // The padding is one more sequence, then the row length repeats.
        assert_eq!(col(&rows[2], "tok_cu_seqlens"), vec![0, 1, 3, 4, 4]);
    }

    #[test]
    fn concat_then_split_resumes_at_every_cut_and_keeps_every_token_once() {
        let lengths = [3, 1, 0, 9, 2, 2, 6, 1, 1, 4, 13, 2, 5, 1];
        for input in [
            seqs(&lengths),
            seqs(&lengths).filter("all", filter_fn(|_, _| Ok(true))),
        ] {
            let ds = input.pack(cts(4)).unwrap();
            crate::testing::check_resume_at_every_cut("pack", &ds);
            let mut tokens = Vec::new();
            let rows = ds.iter(0).unwrap().collect_all().unwrap();
            for row in &rows[..rows.len() - 1] {
                assert!(
                    col(row, "tok_segment_ids").iter().all(|s| *s > 0),
                    "full rows"
                );
            }
            for row in rows {
                let seg = col(&row, "tok_segment_ids");
                let tok = col(&row, "tok");
                tokens.extend(
                    tok.iter()
                        .zip(&seg)
                        .filter(|(_, s)| **s > 0)
                        .map(|(t, _)| *t),
                );
            }
            let want: Vec<i64> = lengths
                .iter()
                .enumerate()
                .flat_map(|(i, &n)| (0..n as i64).map(move |k| i as i64 * 10 + k))
                .collect();
            assert_eq!(tokens, want, "in input order");
        }
    }

    #[test]
    fn concat_then_split_checks_its_arguments_and_its_state() {
        let err = seqs(&[1])
            .pack(opts(4, 2, PackMode::ConcatThenSplit))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("num_packing_bins must be 1"), "{err}");
        let ds = seqs(&[3, 6, 2]).pack(cts(4)).unwrap();
        let mut it = ds.iter(0).unwrap();
        it.next().unwrap();
        let mut state = it.state();
        state["remainder"] = json!([[2, 99]]);
        let err = ds
            .iter(0)
            .unwrap()
            .set_state(&state)
            .unwrap_err()
            .to_string();
        assert!(err.contains("do not fit element 0"), "{err}");
    }

    #[test]
    fn a_meta_feature_longer_than_its_row_is_an_error_naming_the_element() {
        let mut o = cts(4);
        o.lengths.push(("id".into(), 1));
        o.meta_features = vec!["id".into()];
        // ids are scalars (length 1): they fit; every row holds one piece per element.
        let rows = seqs(&[3, 3])
            .pack(o.clone())
            .unwrap()
            .iter(0)
            .unwrap()
            .collect_all()
            .unwrap();
        assert_eq!(col(&rows[0], "tok"), vec![0, 1, 2, 0]);
        assert_eq!(col(&rows[0], "id"), vec![0]);
        assert_eq!(col(&rows[1], "id"), vec![1]);
        o.lengths[0].0 = "id".into();
        o.lengths[1].0 = "tok".into();
        o.meta_features = vec!["tok".into()];
        let err = seqs(&[1, 3])
            .pack(o)
            .unwrap()
            .iter(0)
            .unwrap()
            .collect_all();
        let err = err.unwrap_err().to_string();
        assert!(
            err.contains("element 1: meta feature \"tok\" has length 3 > its row length 1"),
            "{err}"
        );
    }
}
