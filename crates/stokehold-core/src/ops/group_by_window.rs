//! `group_by_window(key_fn, window_size)`: elements grouped by an int64 key, each full group
//! emitted as one stacked batch (tf.data's `group_by_window` with `reduce_func = lambda k, w:
//! w.batch(window_size)`).
//!
//! Elements join their key's group in arrival order. When a group reaches `window_size` elements
//! it is emitted at once, stacked as `batch` stacks elements, and the key starts a new group. At
//! the end of the input the partial groups are emitted in ascending key order, as tf.data's
//! kernel does (it keeps its groups in a `std::map`). With `key_feature`, every emitted window gets a scalar int64 feature of that name
//! holding its key, so a binding can hand the key to a reduce function.
//!
//! A stream. Its state is the input's state before the oldest buffered element, that element's
//! input position, the input position reached, and the buffered elements' positions grouped by key;
//! restoring reads the input again from the oldest buffered element (by index when the input is
//! random access) and keeps the saved positions. `key_fn` is not called again while restoring.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{state_field, state_u64, Dataset, DatasetIter, IterDataset};
use crate::error::{Error, Result};
use crate::example::{stack_examples, Example};
use crate::exec::Reservation;
use crate::ops::map::Ctx;
use crate::tensor::Tensor;

/// A function from an element to its group's key.
pub type KeyFn = Arc<dyn Fn(&Example, &Ctx) -> Result<i64> + Send + Sync>;

/// A window's size from its key (tf.data's `window_size_func`); an error (a user function's)
/// fails the element that opened the group.
pub type WindowSizeFn = Arc<dyn Fn(i64) -> Result<usize> + Send + Sync>;

/// Turns one window (its key, its elements in arrival order, whether it is full) into the element
/// emitted, or `None` to emit nothing (tf.data's `reduce_func` where it yields at most one
/// element; `bucket_by_sequence_length` pads windows with it).
pub type ReduceFn = Arc<dyn Fn(i64, &[Example], bool) -> Result<Option<Example>> + Send + Sync>;

/// Builds a [`KeyFn`] from a closure.
pub fn key_fn(f: impl Fn(&Example, &Ctx) -> Result<i64> + Send + Sync + 'static) -> KeyFn {
    Arc::new(f)
}

/// `group_by_window` over any input.
pub struct GroupByWindow {
    parent: Dataset,
    f: KeyFn,
    sizes: WindowSizeFn,
    reduce: Option<ReduceFn>,
    key_feature: Option<String>,
    label: String,
}

impl GroupByWindow {
    /// The general form: `sizes(key)` (> 0) elements per window, each window turned into an
    /// element by `reduce` (the label is used as given).
    pub fn with_reduce(
        parent: Dataset,
        f: KeyFn,
        sizes: WindowSizeFn,
        reduce: ReduceFn,
        label: String,
    ) -> Self {
        GroupByWindow {
            parent,
            f,
            sizes,
            reduce: Some(reduce),
            key_feature: None,
            label,
        }
    }

    /// Groups `parent` by `f` (described as `label`) into windows of `window_size` (> 0).
    pub fn new(
        parent: Dataset,
        f: KeyFn,
        window_size: usize,
        key_feature: Option<&str>,
        label: &str,
    ) -> Result<Self> {
        if window_size == 0 {
            return Err(Error::invalid(format!(
                "group_by_window[{label}](window_size=0): must be > 0"
            )));
        }
        let sizes: WindowSizeFn = Arc::new(move |_| Ok(window_size));
        Self::sized(
            parent,
            f,
            sizes,
            &format!("window_size={window_size}"),
            key_feature,
            label,
        )
    }

    /// Groups into windows of `sizes(key)` elements (tf.data's `window_size_func`), described
    /// as `sizes_label` (`window_size=4`, `window_size_func=f`).
    pub fn sized(
        parent: Dataset,
        f: KeyFn,
        sizes: WindowSizeFn,
        sizes_label: &str,
        key_feature: Option<&str>,
        label: &str,
    ) -> Result<Self> {
        if key_feature == Some("") {
            return Err(Error::invalid(format!(
                "group_by_window[{label}](key_feature=\"\"): the feature needs a name"
            )));
        }
        let key_part = key_feature.map_or(String::new(), |k| format!(", key_feature={k:?}"));
        Ok(GroupByWindow {
            parent,
            f,
            sizes,
            reduce: None,
            key_feature: key_feature.map(str::to_string),
            label: format!("group_by_window[{label}]({sizes_label}{key_part})"),
        })
    }
}

impl IterDataset for GroupByWindow {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        let inner = self.parent.iter(epoch)?;
        Ok(Box::new(GroupIter {
            parent: self.parent.clone(),
            epoch,
            f: self.f.clone(),
            sizes: self.sizes.clone(),
            reduce: self.reduce.clone(),
            key_feature: self.key_feature.clone(),
            label: self.label.clone(),
            inner,
            pos: 0,
            groups: Vec::new(),
            befores: BTreeMap::new(),
            exhausted: false,
            held: crate::exec::buffer_reservation(&self.parent),
        }))
    }

    fn name(&self) -> String {
        self.label.clone()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }
}

/// One key's partial window: (input position, element) in arrival order.
struct Group {
    key: i64,
    /// The window's size (`sizes(key)`).
    size: usize,
    items: Vec<(u64, Example)>,
}

struct GroupIter {
    parent: Dataset,
    epoch: u64,
    f: KeyFn,
    sizes: WindowSizeFn,
    reduce: Option<ReduceFn>,
    key_feature: Option<String>,
    label: String,
    inner: Box<dyn DatasetIter>,
    /// Input position of the next element to read.
    pos: u64,
    /// Partial windows, in the order their first elements arrived (the end of the input flushes
    /// them by ascending key).
    groups: Vec<Group>,
    /// The input's state before each buffered element (stream inputs only), by position.
    befores: BTreeMap<u64, Json>,
    exhausted: bool,
    /// The partial windows' bytes in the pipeline's memory budget.
    held: Reservation,
}

impl GroupIter {
    /// Stacks a finished window and adds the key feature (or hands it to `reduce`).
    fn emit(&mut self, g: Group) -> Result<Option<Example>> {
        for (p, e) in &g.items {
            self.befores.remove(p);
            self.held.release(e.nbytes());
        }
        let full = g.items.len() == g.size;
        let elements: Vec<Example> = g.items.into_iter().map(|(_, e)| e).collect();
        if let Some(reduce) = &self.reduce {
            return reduce(g.key, &elements, full);
        }
        let mut out = stack_examples(&self.label, &elements)?;
        if let Some(name) = &self.key_feature {
            if out.get(name).is_some() {
                return Err(Error::schema(
                    &self.label,
                    format!(
                        "key_feature {name:?} is already a feature of the elements; pick \
                         another name"
                    ),
                ));
            }
            out.insert(name, Tensor::scalar(g.key));
        }
        Ok(Some(out))
    }

    fn new_group(&self, key: i64) -> Result<Group> {
        let size = (self.sizes)(key)?;
        if size == 0 {
            return Err(Error::invalid(format!(
                "{}: window size of key {key} is 0; must be > 0",
                self.label
            )));
        }
        Ok(Group {
            key,
            size,
            items: Vec::with_capacity(size.min(super::PREALLOC_MAX)),
        })
    }

    fn add(&mut self, key: i64, pos: u64, e: Example) -> Result<Option<Group>> {
        let i = match self.groups.iter().position(|g| g.key == key) {
            Some(i) => i,
            None => {
                let g = self.new_group(key)?;
                self.groups.push(g);
                self.groups.len() - 1
            }
        };
        self.held.hold(e.nbytes());
        self.groups[i].items.push((pos, e));
        let full = self.groups[i].items.len() == self.groups[i].size;
        Ok(full.then(|| self.groups.remove(i)))
    }
}

impl DatasetIter for GroupIter {
    fn next(&mut self) -> Result<Option<Example>> {
        while !self.exhausted {
            let before = match self.parent {
                Dataset::Map(_) => None,
                Dataset::Iter(_) => Some(self.inner.state()),
            };
            let Some(e) = self.inner.next()? else {
                self.exhausted = true;
                break;
            };
            let pos = self.pos;
            self.pos += 1;
            let key = (self.f)(
                &e,
                &Ctx {
                    op: &self.label,
                    index: pos,
                    epoch: self.epoch,
                },
            )?;
            if let Some(before) = before {
                self.befores.insert(pos, before);
            }
            if let Some(full) = self.add(key, pos, e)? {
                if let Some(out) = self.emit(full)? {
                    return Ok(Some(out));
                }
            }
        }
        // The partial windows, lowest key first; a reduce may drop one (drop_remainder).
        loop {
            let lowest = self.groups.iter().enumerate().min_by_key(|(_, g)| g.key);
            let Some((i, _)) = lowest else {
                return Ok(None);
            };
            let g = self.groups.remove(i);
            if let Some(out) = self.emit(g)? {
                return Ok(Some(out));
            }
        }
    }

    fn state(&self) -> Json {
        let groups: Vec<Json> = self
            .groups
            .iter()
            .map(|g| json!([g.key, g.items.iter().map(|(p, _)| *p).collect::<Vec<_>>()]))
            .collect();
        // A stream input restarts before its oldest buffered element (or where it is now).
        let (from, inner) = match self.befores.first_key_value() {
            Some((p, s)) => (*p, s.clone()),
            None => (self.pos, self.inner.state()),
        };
        json!({
            "pos": self.pos,
            "from": from,
            "inner": inner,
            "exhausted": self.exhausted,
            "groups": groups,
        })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let bad = |what: &str| Error::State(format!("{}: bad {what} field", self.label));
        let pos = state_u64(state, "pos")?;
        let exhausted = state_field(state, "exhausted")?
            .as_bool()
            .ok_or_else(|| bad("exhausted"))?;
        let saved: Vec<(i64, Vec<u64>)> =
            serde_json::from_value(state_field(state, "groups")?.clone())
                .map_err(|_| bad("groups"))?;
        let mut groups: Vec<Group> = saved
            .iter()
            .map(|(key, _)| self.new_group(*key))
            .collect::<Result<_>>()?;
        let mut slot: BTreeMap<u64, usize> = BTreeMap::new();
        for (gi, (_, ps)) in saved.iter().enumerate() {
            for &p in ps {
                slot.insert(p, gi);
            }
        }
        self.befores.clear();
        match &self.parent {
            Dataset::Map(m) => {
                // Random access: the buffered elements by index (as `MapIter` numbers them).
                let n = m.len();
                let base = crate::checked::epoch_start("group_by_window", self.epoch, n)?;
                for (&p, &gi) in &slot {
                    groups[gi].items.push((p, m.get(base + p)?));
                }
                self.inner.set_state(state_field(state, "inner")?)?;
            }
            Dataset::Iter(_) => {
                // A stream: read again from the oldest buffered element up to `pos`.
                let from = state_u64(state, "from")?;
                self.inner.set_state(state_field(state, "inner")?)?;
                for p in from..pos {
                    let before = self.inner.state();
                    let e = self.inner.next()?.ok_or_else(|| {
                        Error::State(format!(
                            "{}: input ended at {p} while re-reading to {pos}",
                            self.label
                        ))
                    })?;
                    if let Some(&gi) = slot.get(&p) {
                        groups[gi].items.push((p, e));
                        self.befores.insert(p, before);
                    }
                }
            }
        }
        if groups.iter().map(|g| g.items.len()).sum::<usize>() != slot.len() {
            return Err(Error::State(format!(
                "{}: buffered positions not found in the input",
                self.label
            )));
        }
        self.held.release_all();
        self.held.hold(
            groups
                .iter()
                .flat_map(|g| &g.items)
                .map(|(_, e)| e.nbytes())
                .sum(),
        );
        self.groups = groups;
        self.pos = pos;
        self.exhausted = exhausted;
        Ok(())
    }
}

impl Dataset {
    /// tf.data's `group_by_window`: elements grouped by `f`'s int64 key, each group of
    /// `window_size` emitted as one stacked batch, the partial groups at the end of the input (see
    /// [`crate::ops::group_by_window`] for the order). `key_feature` adds the key as a scalar
    /// int64 feature of each window. A stream.
    pub fn group_by_window(
        &self,
        label: &str,
        f: KeyFn,
        window_size: usize,
        key_feature: Option<&str>,
    ) -> Result<Dataset> {
        Ok(Dataset::from_iter(GroupByWindow::new(
            self.clone(),
            f,
            window_size,
            key_feature,
            label,
        )?))
    }

    /// [`Dataset::group_by_window`] with a window size per key (tf.data's `window_size_func`),
    /// described as `sizes_label`.
    pub fn group_by_window_sized(
        &self,
        label: &str,
        f: KeyFn,
        sizes: WindowSizeFn,
        sizes_label: &str,
        key_feature: Option<&str>,
    ) -> Result<Dataset> {
        Ok(Dataset::from_iter(GroupByWindow::sized(
            self.clone(),
            f,
            sizes,
            sizes_label,
            key_feature,
            label,
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::filter_fn;

    fn x(e: &Example) -> i64 {
        e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0]
    }

    fn parity() -> KeyFn {
        key_fn(|e, _| Ok(x(e) % 2))
    }

    fn windows(ds: &Dataset) -> Vec<(Vec<i64>, i64)> {
        ds.iter(0)
            .unwrap()
            .collect_all()
            .unwrap()
            .iter()
            .map(|e| {
                let k = e.tensor("t", "key").unwrap().to_vec::<i64>().unwrap()[0];
                (e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap(), k)
            })
            .collect()
    }

    #[test]
    fn tf_data_documented_examples() {
        // tf.data docs: range(10).group_by_window(x % 2, reduce = batch(5), window_size=5)
        // -> [0 2 4 6 8] [1 3 5 7 9].
        let ds = Dataset::range(10)
            .group_by_window("parity", parity(), 5, Some("key"))
            .unwrap();
        assert_eq!(
            windows(&ds),
            vec![(vec![0, 2, 4, 6, 8], 0), (vec![1, 3, 5, 7, 9], 1)]
        );
        // window_size=3: [0 2 4] full at 4, [1 3 5] full at 5, then the partial [6 8], [7 9].
        let ds = Dataset::range(10)
            .group_by_window("parity", parity(), 3, Some("key"))
            .unwrap();
        assert_eq!(
            windows(&ds),
            vec![
                (vec![0, 2, 4], 0),
                (vec![1, 3, 5], 1),
                (vec![6, 8], 0),
                (vec![7, 9], 1)
            ]
        );
    }

    #[test]
    fn partial_windows_follow_their_first_elements() {
        // Keys 5, 3, 5 (full), 3, 5: partial windows [1, 3] (key 3, first at 1) then [4] (key 5).
        let keys = [5i64, 3, 5, 3, 5];
        let ds = Dataset::range(5)
            .group_by_window(
                "k",
                key_fn(move |e, _| Ok(keys[x(e) as usize])),
                2,
                Some("key"),
            )
            .unwrap();
        assert_eq!(
            windows(&ds),
            vec![(vec![0, 2], 5), (vec![1, 3], 3), (vec![4], 5)]
        );
    }

    #[test]
    fn resumes_at_every_cut_over_streams_and_random_access() {
        let key = key_fn(|e, _| Ok(x(e) % 3));
        for input in [
            Dataset::range(17),
            Dataset::range(17).filter("all", filter_fn(|_, _| Ok(true))),
        ] {
            let ds = input.group_by_window("m3", key.clone(), 4, None).unwrap();
            let all = ds.iter(0).unwrap().collect_all().unwrap();
            // Three full windows (at 9, 10, 11), then the partial ones of keys 0, 1, 2.
            assert_eq!(all.len(), 6);
            crate::testing::check_resume_at_every_cut("group_by_window", &ds);
        }
    }

    #[test]
    fn errors_name_the_op_and_argument() {
        let err = Dataset::range(3)
            .group_by_window("p", parity(), 0, None)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("window_size=0"), "{err}");
        let err = Dataset::range(3)
            .group_by_window("p", parity(), 2, Some("x"))
            .unwrap()
            .iter(0)
            .unwrap()
            .collect_all()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("group_by_window[p]") && err.contains("\"x\""),
            "{err}"
        );
        let boom = key_fn(|_, c| {
            Err(Error::Callback {
                op: c.op.to_string(),
                index: c.index,
                source: "no key".into(),
            })
        });
        let err = Dataset::range(3)
            .group_by_window("boom", boom, 2, None)
            .unwrap()
            .iter(0)
            .unwrap()
            .collect_all()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("group_by_window[boom]") && err.contains("element 0"),
            "{err}"
        );
    }
}
