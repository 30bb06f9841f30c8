//! `pack(mode="concat_then_split")`: Grain's `ConcatThenSplitIterDataset` (with its default
//! `split_full_length_features=True` and no BOS handling), the packing torchtitan and MaxText
//! use for language-model pretraining.
//!
//! Elements are joined, in input order, into a buffer row until some feature no longer fits;
//! the element that overflows is cut there (every non-meta feature at the row's end), the
//! buffer is emitted and the element's tail (the *remainder*) starts the next row. With one
//! feature every row is full but the input's last. A meta feature is never cut: an element
//! whose meta feature does not fit goes to the next row whole, and each part of a cut element
//! carries all of it. With several features, a feature that fits is kept whole in the part
//! that goes into the row (Grain 0.2.18 cuts a remainder's fitting feature at its length, not
//! its end, which repeats or drops tokens; the fixtures compared with Grain's rows have one
//! cut feature, alone or beside a meta feature).
//!
//! Segments and positions are Grain's: each piece of an element in a row is a segment
//! (numbered from 1), and positions count from 0 in every piece, so the tail of a cut
//! document starts a new segment at position 0 in the next row (a model attends within
//! each row's pieces; no attention crosses rows). A zero-length element joining a row takes a
//! segment number and no tokens, as in Grain.
//!
//! State (Grain's `_CtsState`): the input's state before the remainder's element (or before
//! the next element when there is none), the remainder's slice of each feature, and whether
//! the row packed since was emitted; restoring re-reads the remainder's element and re-packs at
//! most one row. The carry-over in a checkpoint is therefore one element's input state plus two
//! integers per feature, whatever the row length.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use super::rows::{build_row, read_item, Item, PackOptions, Row};
use crate::dataset::{state_field, state_u64, DatasetIter};
use crate::error::{Error, Result};
use crate::example::Example;

/// An element, or the part of it not yet packed.
struct Piece {
    /// The whole element's features (in `lengths` order) and lengths.
    item: Item,
    /// The part left: `[start, stop)` of each feature (meta features: all of it).
    slices: Vec<(usize, usize)>,
    /// Input state and position before the element.
    from: (Json, u64),
}

impl Piece {
    /// The part `[start, stop)` of each feature as an `Item` for [`build_row`].
    fn cut(&self, slices: &[(usize, usize)]) -> Result<Item> {
        let mut values = Vec::with_capacity(slices.len());
        for (t, (&(a, b), &n)) in self
            .item
            .values
            .iter()
            .zip(slices.iter().zip(&self.item.lens))
        {
            values.push(if a == 0 && b == n {
                t.clone()
            } else if t.shape().is_empty() {
                // A scalar counts one; its cut parts are all of it or nothing.
                t.reshape(vec![1])?.slice_rows(a, b)?
            } else {
                t.slice_rows(a, b)?
            });
        }
        Ok(Item {
            values,
            lens: slices.iter().map(|(a, b)| b - a).collect(),
            index: self.item.index,
        })
    }
}

pub(super) struct CtsIter {
    inner: Box<dyn DatasetIter>,
    opts: Arc<PackOptions>,
    label: String,
    /// Input position of the next element.
    pos: u64,
    /// The row packed, not yet emitted.
    packed: Option<Example>,
    /// What is left of a cut element (or a whole element that did not fit).
    remainder: Option<Piece>,
    exhausted: bool,
    /// The checkpoint: input state and position, the remainder's slices, rows emitted since.
    mark: Mark,
}

/// Grain's `_CtsState`.
#[derive(Clone)]
struct Mark {
    from: (Json, u64),
    slices: Option<Vec<(usize, usize)>>,
    emitted: u64,
}

impl CtsIter {
    pub(super) fn new(
        inner: Box<dyn DatasetIter>,
        opts: Arc<PackOptions>,
        label: String,
    ) -> CtsIter {
        let from = (inner.state(), 0);
        CtsIter {
            inner,
            opts,
            label,
            pos: 0,
            packed: None,
            remainder: None,
            exhausted: false,
            mark: Mark {
                from,
                slices: None,
                emitted: 0,
            },
        }
    }

    fn checkpoint(&mut self) {
        self.mark = match &self.remainder {
            None => Mark {
                from: (self.inner.state(), self.pos),
                slices: None,
                emitted: 0,
            },
            Some(r) => Mark {
                from: r.from.clone(),
                slices: Some(r.slices.clone()),
                emitted: 0,
            },
        };
    }

    /// Adds as much of `piece` to `buf` as fits (Grain's `_maybe_add_to_buffer`): `None` when
    /// all of it went in, else what is left (all of it when nothing went in).
    fn add(&self, piece: Piece, buf: &mut Row) -> Result<Option<Piece>> {
        let mut cut = piece.slices.clone();
        let mut split = false;
        for (f, (name, max)) in self.opts.lengths.iter().enumerate() {
            let (a, b) = piece.slices[f];
            let avail = max - buf.used[f];
            if b - a <= avail {
                continue;
            }
            if self.opts.meta_features.contains(name) {
                // Never cut: the whole element waits for the next row.
                return Ok(Some(piece));
            }
            split = true;
            cut[f].1 = a + avail;
        }
        if !split {
            let item = piece.cut(&piece.slices)?;
            push(buf, item);
            return Ok(None);
        }
        let meta = |f: usize| self.opts.meta_features.contains(&self.opts.lengths[f].0);
        if (0..cut.len()).all(|f| meta(f) || cut[f].1 == 0) {
            // Grain: nothing of a whole element fits; all of it waits.
            return Ok(Some(piece));
        }
        push(buf, piece.cut(&cut)?);
        let slices = (0..cut.len())
            .map(|f| {
                if meta(f) {
                    piece.slices[f]
                } else {
                    (cut[f].1, piece.slices[f].1)
                }
            })
            .collect();
        Ok(Some(Piece { slices, ..piece }))
    }

    fn read(&mut self) -> Result<Option<Piece>> {
        let from = (self.inner.state(), self.pos);
        let Some(e) = self.inner.next()? else {
            return Ok(None);
        };
        let index = self.pos;
        self.pos += 1;
        let item = read_item(&self.label, &self.opts, &e, index, true)?;
        let slices = item.lens.iter().map(|&n| (0, n)).collect();
        Ok(Some(Piece { item, slices, from }))
    }

    /// Grain's `__next__` after its queue ran dry: fills one row. (Grain's loop reads the
    /// next element only once the remainder is all in the row, so the input never ends with a
    /// remainder left: its code for that case never runs, and has no counterpart here.)
    fn fill(&mut self) -> Result<()> {
        self.checkpoint();
        let mut buf = Row {
            items: Vec::new(),
            used: vec![0; self.opts.lengths.len()],
        };
        loop {
            if let Some(r) = self.remainder.take() {
                let fresh = buf.items.is_empty();
                self.remainder = self.add(r, &mut buf)?;
                if let Some(r) = &self.remainder {
                    if fresh && buf.items.is_empty() {
                        return Err(self.never_fits(r));
                    }
                    break;
                }
            }
            let Some(p) = self.read()? else {
                self.exhausted = true;
                break;
            };
            self.remainder = self.add(p, &mut buf)?;
            if self.remainder.is_some() {
                break;
            }
        }
        if !buf.items.is_empty() {
            self.packed = Some(build_row(&self.label, &self.opts, &buf)?);
        }
        Ok(())
    }

    /// An element that fits no row: only a meta feature can do that, and `read_item` rejects
    /// those; a remainder restored from a state that does not match its element can.
    fn never_fits(&self, r: &Piece) -> Error {
        Error::State(format!(
            "{}: element {} (slices {:?}) does not fit an empty row",
            self.label, r.item.index, r.slices
        ))
    }
}

fn push(buf: &mut Row, item: Item) {
    for (u, n) in buf.used.iter_mut().zip(&item.lens) {
        *u += n;
    }
    buf.items.push(item);
}

impl DatasetIter for CtsIter {
    fn next(&mut self) -> Result<Option<Example>> {
        if self.packed.is_none() && !self.exhausted {
            self.fill()?;
        }
        match self.packed.take() {
            Some(row) => {
                self.mark.emitted += 1;
                Ok(Some(row))
            }
            None => {
                self.checkpoint();
                Ok(None)
            }
        }
    }

    fn state(&self) -> Json {
        let slices = self
            .mark
            .slices
            .as_ref()
            .map(|s| s.iter().map(|(a, b)| json!([a, b])).collect::<Vec<_>>());
        json!({
            "from": self.mark.from.0,
            "from_pos": self.mark.from.1,
            "remainder": slices,
            "emitted": self.mark.emitted,
        })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let emitted = state_u64(state, "emitted")?;
        if emitted > 1 {
            return Err(Error::State(format!(
                "{}: emitted {emitted} > 1 row since the last checkpoint",
                self.label
            )));
        }
        let slices = match state_field(state, "remainder")? {
            Json::Null => None,
            s => Some(self.slices(s)?),
        };
        let from = state_field(state, "from")?.clone();
        let from_pos = state_u64(state, "from_pos")?;
        self.inner.set_state(&from)?;
        self.pos = from_pos;
        self.packed = None;
        self.remainder = None;
        self.exhausted = false;
        if let Some(slices) = slices {
            let Some(mut p) = self.read()? else {
                return Err(Error::State(format!(
                    "{}: the state's remainder element {from_pos} is past the input's end",
                    self.label
                )));
            };
            let ok = slices
                .iter()
                .zip(&p.item.lens)
                .all(|(&(a, b), &n)| a <= b && b <= n);
            if !ok {
                return Err(Error::State(format!(
                    "{}: the state's remainder slices {slices:?} do not fit element {from_pos} \
                     (lengths {:?})",
                    self.label, p.item.lens
                )));
            }
            p.slices = slices;
            p.from = (from, from_pos);
            self.remainder = Some(p);
        }
        self.checkpoint();
        for _ in 0..emitted {
            self.next()?;
        }
        Ok(())
    }
}

impl CtsIter {
    fn slices(&self, s: &Json) -> Result<Vec<(usize, usize)>> {
        let bad = || {
            Error::State(format!(
                "{}: remainder {s} is not one [start, stop] per feature",
                self.label
            ))
        };
        let list = s.as_array().ok_or_else(bad)?;
        if list.len() != self.opts.lengths.len() {
            return Err(bad());
        }
        list.iter()
            .map(|p| {
                let a = p.get(0).and_then(Json::as_u64).ok_or_else(bad)?;
                let b = p.get(1).and_then(Json::as_u64).ok_or_else(bad)?;
                Ok((
                    usize::try_from(a).map_err(|_| bad())?,
                    usize::try_from(b).map_err(|_| bad())?,
                ))
            })
            .collect()
    }
}
