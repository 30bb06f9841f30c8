//! `from_generator`: a source that calls an iterator factory (Python's `from_generator`).
//!
//! `factory(epoch)` makes the epoch's iterator; it is called on the first `next()` of an iterator
//! (not when the iterator is made, so that restoring a fresh iterator calls it once), and errors
//! from the factory or the iterator pass through unchanged. A stream of unknown length. Its state
//! is the number of elements yielded; `set_state` calls the factory again and skips that many, so
//! a resume is exact only when the generator yields the same sequence every time it is called for
//! an epoch (deterministic, or seeded by the epoch it is given).

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{state_u64, Dataset, DatasetIter, IterDataset};
use crate::error::{Error, Result};
use crate::example::Example;

/// The elements of one epoch, as a generator yields them.
pub type ExampleIter = Box<dyn Iterator<Item = Result<Example>> + Send>;

/// Makes the iterator of an epoch (the argument).
pub type GeneratorFactory = Arc<dyn Fn(u64) -> Result<ExampleIter> + Send + Sync>;

/// Builds a [`GeneratorFactory`] from a closure.
pub fn generator_fn(
    f: impl Fn(u64) -> Result<ExampleIter> + Send + Sync + 'static,
) -> GeneratorFactory {
    Arc::new(f)
}

/// A source from an iterator factory.
pub struct Generator {
    factory: GeneratorFactory,
    label: String,
}

impl Generator {
    /// A source calling `factory` (described as `label`).
    pub fn new(label: &str, factory: GeneratorFactory) -> Self {
        Generator {
            factory,
            label: format!("from_generator[{label}]"),
        }
    }
}

impl IterDataset for Generator {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(GeneratorIter {
            factory: self.factory.clone(),
            label: self.label.clone(),
            epoch,
            it: None,
            yielded: 0,
            skip: 0,
            done: false,
        }))
    }

    fn name(&self) -> String {
        self.label.clone()
    }
}

struct GeneratorIter {
    factory: GeneratorFactory,
    label: String,
    epoch: u64,
    /// The generator, once the first `next()` has called the factory.
    it: Option<ExampleIter>,
    /// Elements handed out (counting the ones skipped on a restore).
    yielded: u64,
    /// Elements the generator must skip when it starts (a restore).
    skip: u64,
    done: bool,
}

impl DatasetIter for GeneratorIter {
    fn next(&mut self) -> Result<Option<Example>> {
        if self.done {
            return Ok(None);
        }
        if self.it.is_none() {
            let mut it = (self.factory)(self.epoch)?;
            for k in 0..self.skip {
                if it.next().transpose()?.is_none() {
                    return Err(Error::State(format!(
                        "{}: the generator ended after {k} elements while restoring to {}; it \
                         must yield the same sequence each time for an exact resume",
                        self.label, self.skip
                    )));
                }
            }
            self.skip = 0;
            self.it = Some(it);
        }
        match self.it.as_mut().expect("started").next().transpose()? {
            Some(e) => {
                self.yielded += 1;
                Ok(Some(e))
            }
            None => {
                // Drop the generator now: it may hold resources (a Python frame, a file).
                self.done = true;
                self.it = None;
                Ok(None)
            }
        }
    }

    fn state(&self) -> Json {
        json!({ "yielded": self.yielded })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        self.yielded = state_u64(state, "yielded")?;
        self.skip = self.yielded;
        self.it = None;
        self.done = false;
        Ok(())
    }
}

impl Dataset {
    /// A stream from an iterator factory: `factory(epoch)` yields the epoch's elements (see
    /// [`crate::ops::generator`]: exact resume needs a generator that repeats its sequence).
    pub fn from_generator(label: &str, factory: GeneratorFactory) -> Dataset {
        Dataset::from_iter(Generator::new(label, factory))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn counting(n: u64, calls: Arc<AtomicU64>) -> GeneratorFactory {
        generator_fn(move |epoch| {
            calls.fetch_add(1, Ordering::SeqCst);
            let it = (0..n).map(move |i| {
                Ok(Example::new().with("x", Tensor::scalar((epoch * 100 + i) as i64)))
            });
            Ok(Box::new(it) as ExampleIter)
        })
    }

    fn xs(v: &[Example]) -> Vec<i64> {
        v.iter()
            .map(|e| e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0])
            .collect()
    }

    #[test]
    fn yields_each_epoch_and_resumes_by_skipping() {
        let calls = Arc::new(AtomicU64::new(0));
        let ds = Dataset::from_generator("count", counting(5, calls.clone()));
        assert_eq!(ds.len(), None);
        assert_eq!(
            xs(&ds.iter(2).unwrap().collect_all().unwrap()),
            [200, 201, 202, 203, 204]
        );
        let mut it = ds.iter(0).unwrap();
        it.next().unwrap();
        it.next().unwrap();
        let s = it.state();
        assert_eq!(s, json!({"yielded": 2}));
        let before = calls.load(Ordering::SeqCst);
        let mut again = ds.iter(0).unwrap();
        again.set_state(&s).unwrap();
        // Making and restoring an iterator does not call the factory; the first next() does.
        assert_eq!(calls.load(Ordering::SeqCst), before);
        assert_eq!(xs(&again.collect_all().unwrap()), [2, 3, 4]);
        assert_eq!(calls.load(Ordering::SeqCst), before + 1);
        assert_eq!(again.state(), json!({"yielded": 5}));
    }

    #[test]
    fn errors_pass_through_and_a_short_generator_is_a_state_error() {
        let ds = Dataset::from_generator(
            "bad",
            generator_fn(|_| {
                let it = (0..3).map(|i| {
                    if i == 1 {
                        Err(Error::Callback {
                            op: "gen".into(),
                            index: 1,
                            source: "generator raised".into(),
                        })
                    } else {
                        Ok(Example::new().with("x", Tensor::scalar(i as i64)))
                    }
                });
                Ok(Box::new(it) as ExampleIter)
            }),
        );
        let mut it = ds.iter(0).unwrap();
        assert!(it.next().unwrap().is_some());
        let Err(Error::Callback { source, .. }) = it.next() else {
            panic!("the generator's error, unchanged")
        };
        assert_eq!(source.to_string(), "generator raised");
        let failing =
            Dataset::from_generator("f", generator_fn(|_| Err(Error::invalid("no file"))));
        let err = failing.iter(0).unwrap().next().unwrap_err().to_string();
        assert!(err.contains("no file"), "{err}");
        let short = Dataset::from_generator("short", counting(2, Arc::new(AtomicU64::new(0))));
        let mut it = short.iter(0).unwrap();
        it.set_state(&json!({"yielded": 3})).unwrap();
        let err = it.next().unwrap_err().to_string();
        assert!(
            err.contains("from_generator[short]") && err.contains("after 2"),
            "{err}"
        );
    }
}
