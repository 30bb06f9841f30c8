//! `window(size, shift, stride, drop_remainder)`: sliding windows, each stacked into one element.
//!
//! tf.data's `window` yields a dataset per window; here window `k` is ONE element, its input
//! elements stacked as `batch` stacks them (what tf.data users get from
//! `window(...).flat_map(lambda w: w.batch(size))`). Window `k` holds the input elements
//! `k*shift + j*stride` for `j < size` that exist; windows start at every `k*shift` inside the
//! input, so the last few are partial (`range(7).window(3, shift=2)`: `[0,1,2] [2,3,4] [4,5,6]
//! [6]`) unless `drop_remainder` keeps only full ones.
//!
//! Over a random-access input the result is random access (window `k` of epoch `e` reads the
//! input's epoch `e` by index, through its batch path). Over a stream it keeps the input elements
//! from the current window's start to its end, each with the input's state before it; the state is
//! the window number plus the input's state before the first element still kept, so restoring
//! re-reads at most one window span (`(size - 1) * stride + 1` elements).

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{
    state_field, state_u64, Dataset, DatasetIter, IterDataset, MapDataset, INFINITE,
};
use crate::error::{Error, Result};
use crate::example::{stack_examples, Example};

/// The arguments of `window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowSpec {
    /// Elements per window (> 0).
    pub size: u64,
    /// Input elements between the starts of consecutive windows (> 0).
    pub shift: u64,
    /// Input elements between consecutive elements of a window (> 0).
    pub stride: u64,
    /// Keep only full windows.
    pub drop_remainder: bool,
}

impl WindowSpec {
    /// Checks the arguments; `shift = None` means `size` (tf.data's default).
    pub fn new(size: u64, shift: Option<u64>, stride: u64, drop_remainder: bool) -> Result<Self> {
        let shift = shift.unwrap_or(size);
        for (arg, v) in [("size", size), ("shift", shift), ("stride", stride)] {
            if v == 0 {
                return Err(Error::invalid(format!("window({arg}=0): must be > 0")));
            }
        }
        if (size - 1).checked_mul(stride).is_none() {
            return Err(Error::invalid(format!(
                "window(size={size}, stride={stride}): the window spans more than 2^64 elements"
            )));
        }
        Ok(WindowSpec {
            size,
            shift,
            stride,
            drop_remainder,
        })
    }

    /// Offset of a window's last element from its first.
    fn span(&self) -> u64 {
        (self.size - 1) * self.stride
    }

    /// Windows over an input of `n` elements.
    pub fn count(&self, n: u64) -> u64 {
        if n == INFINITE {
            return INFINITE;
        }
        if self.drop_remainder {
            match n.checked_sub(self.span()) {
                Some(room) if room > 0 => (room - 1) / self.shift + 1,
                _ => 0,
            }
        } else {
            n.div_ceil(self.shift)
        }
    }

    fn label(&self) -> String {
        format!(
            "window(size={}, shift={}, stride={}, drop_remainder={})",
            self.size, self.shift, self.stride, self.drop_remainder
        )
    }
}

/// `window` over a random-access input.
pub struct MapWindow {
    parent: Arc<dyn MapDataset>,
    spec: WindowSpec,
}

impl MapWindow {
    /// Windows of `parent`.
    pub fn new(parent: Arc<dyn MapDataset>, spec: WindowSpec) -> Self {
        MapWindow { parent, spec }
    }

    /// The parent's global indices of window `index`.
    fn indices(&self, index: u64) -> Result<Vec<u64>> {
        let (n, len) = (self.parent.len(), self.len());
        if len == 0 {
            return Err(Error::OutOfRange {
                index,
                len: 0,
                what: self.name(),
            });
        }
        let (base, k, end) = if n == INFINITE {
            (0, index, INFINITE)
        } else {
            ((index / len) * n, index % len, n)
        };
        let start = k.checked_mul(self.spec.shift).ok_or_else(|| {
            Error::invalid(format!(
                "{}: window {index} is past the index range",
                self.name()
            ))
        })?;
        Ok((0..self.spec.size)
            .map(|j| start.saturating_add(j * self.spec.stride))
            .take_while(|&i| i < end)
            .map(|i| base + i)
            .collect())
    }
}

impl MapDataset for MapWindow {
    fn len(&self) -> u64 {
        self.spec.count(self.parent.len())
    }

    fn get(&self, index: u64) -> Result<Example> {
        let indices = self.indices(index)?;
        if let Some(b) = self.parent.get_batch(&indices)? {
            return Ok(b);
        }
        if self.parent.prefetch_useful() {
            crate::dataset::hint_batch(&*self.parent, &indices);
        }
        let elements = indices
            .iter()
            .map(|&i| self.parent.get(i))
            .collect::<Result<Vec<_>>>()?;
        stack_examples(&self.name(), &elements)
    }

    fn rows_per_element(&self) -> Option<u64> {
        let n = self.parent.len();
        // Every window is full when partial ones are dropped or none can be partial.
        let full = self.spec.drop_remainder
            || n == INFINITE
            || self.len() == 0
            || (self.len() - 1) * self.spec.shift + self.spec.span() < n;
        full.then_some(self.spec.size)
    }

    fn name(&self) -> String {
        self.spec.label()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![Dataset::Map(self.parent.clone())]
    }
}

/// `window` over a stream.
pub struct IterWindow {
    parent: Dataset,
    spec: WindowSpec,
}

impl IterWindow {
    /// Windows of the stream `parent`.
    pub fn new(parent: Dataset, spec: WindowSpec) -> Self {
        IterWindow { parent, spec }
    }
}

impl IterDataset for IterWindow {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(WindowIter {
            inner: self.parent.iter(epoch)?,
            spec: self.spec,
            label: self.spec.label(),
            k: 0,
            pos: 0,
            buf: VecDeque::new(),
            exhausted: false,
            done: false,
        }))
    }

    fn name(&self) -> String {
        self.spec.label()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn len(&self) -> Option<u64> {
        self.parent.len().map(|n| self.spec.count(n))
    }
}

struct WindowIter {
    inner: Box<dyn DatasetIter>,
    spec: WindowSpec,
    label: String,
    /// The next window's number.
    k: u64,
    /// Input position of the next element to read.
    pos: u64,
    /// (input position, input state before it, element) from the next window's start on.
    buf: VecDeque<(u64, Json, Example)>,
    exhausted: bool,
    /// A partial window was refused (`drop_remainder`): no later window can be full.
    done: bool,
}

impl WindowIter {
    /// Reads one input element, keeping it when it is at or past `keep_from`.
    fn pull(&mut self, keep_from: u64) -> Result<()> {
        let before = self.inner.state();
        match self.inner.next()? {
            Some(e) => {
                if self.pos >= keep_from {
                    self.buf.push_back((self.pos, before, e));
                }
                self.pos += 1;
            }
            None => self.exhausted = true,
        }
        Ok(())
    }
}

impl DatasetIter for WindowIter {
    fn next(&mut self) -> Result<Option<Example>> {
        if self.done {
            return Ok(None);
        }
        let start = self.k.saturating_mul(self.spec.shift);
        while self.buf.front().is_some_and(|(p, _, _)| *p < start) {
            self.buf.pop_front();
        }
        while !self.exhausted && self.pos < start {
            self.pull(start)?;
        }
        let last = start.saturating_add(self.spec.span());
        while !self.exhausted && self.pos <= last {
            self.pull(start)?;
        }
        // The buffer holds positions start..pos contiguously.
        let picked: Vec<Example> = (0..self.spec.size)
            .map(|j| start.saturating_add(j * self.spec.stride))
            .take_while(|&p| p < self.pos)
            .map(|p| self.buf[(p - start) as usize].2.clone())
            .collect();
        if picked.is_empty() || (self.spec.drop_remainder && (picked.len() as u64) < self.spec.size)
        {
            self.done = true;
            return Ok(None);
        }
        self.k += 1;
        stack_examples(&self.label, &picked).map(Some)
    }

    fn state(&self) -> Json {
        match self.buf.front() {
            // Restoring re-reads the kept elements from the first one on.
            Some((p, before, _)) => json!({
                "k": self.k, "pos": p, "inner": before, "exhausted": false, "done": self.done,
            }),
            None => json!({
                "k": self.k, "pos": self.pos, "inner": self.inner.state(),
                "exhausted": self.exhausted, "done": self.done,
            }),
        }
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        self.inner.set_state(state_field(state, "inner")?)?;
        self.k = state_u64(state, "k")?;
        self.pos = state_u64(state, "pos")?;
        self.exhausted = state_field(state, "exhausted")?.as_bool().unwrap_or(false);
        self.done = state_field(state, "done")?.as_bool().unwrap_or(false);
        self.buf.clear();
        Ok(())
    }
}

impl Dataset {
    /// tf.data's `window(size, shift=None, stride=1, drop_remainder=False)`, each window stacked
    /// into one element as `batch` stacks elements (see [`crate::ops::window`]). `shift = None`
    /// means `size`. Random access over a random-access input; a stream otherwise.
    pub fn window(
        &self,
        size: u64,
        shift: Option<u64>,
        stride: u64,
        drop_remainder: bool,
    ) -> Result<Dataset> {
        let spec = WindowSpec::new(size, shift, stride, drop_remainder)?;
        Ok(self.on_base(|ds| match ds {
            Dataset::Map(m) => Dataset::from_map(MapWindow::new(m.clone(), spec)),
            Dataset::Iter(_) => Dataset::from_iter(IterWindow::new(ds.clone(), spec)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::filter_fn;

    fn windows(ds: &Dataset) -> Vec<Vec<i64>> {
        ds.iter(0)
            .unwrap()
            .collect_all()
            .unwrap()
            .iter()
            .map(|e| e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap())
            .collect()
    }

    /// Both the random-access and the stream implementation.
    fn both(n: u64, size: u64, shift: Option<u64>, stride: u64, drop: bool) -> Vec<Vec<i64>> {
        let ra = Dataset::range(n).window(size, shift, stride, drop).unwrap();
        let stream = Dataset::range(n)
            .filter("all", filter_fn(|_, _| Ok(true)))
            .window(size, shift, stride, drop)
            .unwrap();
        assert!(ra.is_random_access() && !stream.is_random_access());
        let (a, b) = (windows(&ra), windows(&stream));
        assert_eq!(a, b, "random access vs stream");
        assert_eq!(ra.len(), Some(a.len() as u64));
        a
    }

    #[test]
    fn tf_data_documented_examples() {
        // tf.data docs: range(7).window(3, shift=2, stride=1) -> [0,1,2] [2,3,4] [4,5,6] [6].
        assert_eq!(
            both(7, 3, Some(2), 1, false),
            vec![vec![0, 1, 2], vec![2, 3, 4], vec![4, 5, 6], vec![6]]
        );
        // window(3, shift=1, stride=2, drop_remainder=True) -> [0,2,4] [1,3,5] [2,4,6].
        assert_eq!(
            both(7, 3, Some(1), 2, true),
            vec![vec![0, 2, 4], vec![1, 3, 5], vec![2, 4, 6]]
        );
        // window(2) (shift = size) -> [0,1] [2,3] [4,5] [6]; with drop_remainder, no [6].
        assert_eq!(
            both(7, 2, None, 1, false),
            vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6]]
        );
        assert_eq!(both(7, 2, None, 1, true).len(), 3);
        // window(3, shift=1, drop_remainder=True) -> [0,1,2] ... [4,5,6].
        assert_eq!(both(7, 3, Some(1), 1, true).len(), 5);
    }

    #[test]
    fn shift_past_the_span_skips_elements_and_edges_are_empty() {
        assert_eq!(
            both(10, 2, Some(4), 1, false),
            vec![vec![0, 1], vec![4, 5], vec![8, 9]]
        );
        assert_eq!(
            both(9, 2, Some(4), 1, false),
            vec![vec![0, 1], vec![4, 5], vec![8]]
        );
        assert!(both(0, 3, None, 1, false).is_empty());
        assert!(both(2, 3, Some(1), 1, true).is_empty());
        assert_eq!(both(1, 3, Some(1), 5, false), vec![vec![0]]);
    }

    #[test]
    fn stream_state_resumes_at_every_cut() {
        let ds = Dataset::range(11)
            .filter("all", filter_fn(|_, _| Ok(true)))
            .window(4, Some(3), 2, false)
            .unwrap();
        crate::testing::check_resume_at_every_cut("window stream", &ds);
    }

    #[test]
    fn zero_arguments_are_named() {
        for (args, name) in [
            ((0, None, 1), "size"),
            ((2, Some(0), 1), "shift"),
            ((2, None, 0), "stride"),
        ] {
            let err = Dataset::range(3)
                .window(args.0, args.1, args.2, false)
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains(&format!("window({name}=0)")), "{err}");
        }
    }
}
