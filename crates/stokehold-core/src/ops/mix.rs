//! `sample_from_datasets`: a weighted random mix of several datasets.
//!
//! Step `t` of epoch `e` draws an input with probability proportional to its weight, from a
//! generator keyed by (seed, e, t): the same seed gives the same mix whatever the thread count.
//! Rules for exhausted inputs, explicit so nothing hangs: with `stop_on_empty`, the mix ends the
//! first time it draws an exhausted input (tf.data's `stop_on_empty_dataset=True`); without it, an
//! exhausted input is dropped and the weights of the rest are renormalised. The mix ends when no
//! input with a positive weight is left. Negative or non-finite weights are an error.

use serde_json::{json, Value as Json};

use crate::dataset::{state_field, state_u64, Dataset, DatasetIter, IterDataset};
use crate::error::{Error, Result};
use crate::example::Example;
use crate::rng::{Rng, Stream};

/// The weighted mix.
pub struct Mix {
    inputs: Vec<Dataset>,
    weights: Vec<f64>,
    seed: u64,
    stop_on_empty: bool,
}

impl IterDataset for Mix {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        let its = self
            .inputs
            .iter()
            .map(|d| d.iter(epoch))
            .collect::<Result<Vec<_>>>()?;
        Ok(Box::new(MixIter {
            exhausted: vec![false; its.len()],
            its,
            weights: self.weights.clone(),
            seed: self.seed,
            epoch,
            step: 0,
            stop_on_empty: self.stop_on_empty,
            done: false,
        }))
    }

    fn name(&self) -> String {
        format!(
            "sample_from_datasets(weights={:?}, seed={}, stop_on_empty={})",
            self.weights, self.seed, self.stop_on_empty
        )
    }

    fn parents(&self) -> Vec<Dataset> {
        self.inputs.clone()
    }
}

struct MixIter {
    its: Vec<Box<dyn DatasetIter>>,
    weights: Vec<f64>,
    exhausted: Vec<bool>,
    seed: u64,
    epoch: u64,
    step: u64,
    stop_on_empty: bool,
    done: bool,
}

impl MixIter {
    fn draw(&self) -> Option<usize> {
        let live = |k: usize| !self.exhausted[k] && self.weights[k] > 0.0;
        let total: f64 = (0..self.its.len())
            .filter(|&k| live(k))
            .map(|k| self.weights[k])
            .sum();
        if total <= 0.0 {
            return None;
        }
        // One generator per (seed, epoch, step) and retry count: a retry after dropping an
        // exhausted input draws afresh, keyed the same way on restore.
        let u = Rng::for_element(self.seed, Stream::Mix, self.epoch, self.step).next_f64() * total;
        let mut acc = 0.0;
        let mut last = None;
        for k in (0..self.its.len()).filter(|&k| live(k)) {
            acc += self.weights[k];
            last = Some(k);
            if u < acc {
                return Some(k);
            }
        }
        last
    }
}

impl DatasetIter for MixIter {
    fn next(&mut self) -> Result<Option<Example>> {
        while !self.done {
            let Some(k) = self.draw() else {
                self.done = true;
                break;
            };
            match self.its[k].next()? {
                Some(e) => {
                    self.step += 1;
                    return Ok(Some(e));
                }
                None => {
                    self.exhausted[k] = true;
                    if self.stop_on_empty {
                        self.done = true;
                    }
                }
            }
        }
        Ok(None)
    }

    fn state(&self) -> Json {
        let inner: Vec<Json> = self.its.iter().map(|i| i.state()).collect();
        json!({ "step": self.step, "done": self.done, "exhausted": self.exhausted, "inputs": inner })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let inner = state_field(state, "inputs")?
            .as_array()
            .filter(|a| a.len() == self.its.len())
            .ok_or_else(|| Error::State("sample_from_datasets: bad inputs field".into()))?;
        for (it, s) in self.its.iter_mut().zip(inner) {
            it.set_state(s)?;
        }
        self.exhausted = serde_json::from_value(state_field(state, "exhausted")?.clone())
            .map_err(|e| Error::State(format!("sample_from_datasets: bad exhausted field: {e}")))?;
        self.step = state_u64(state, "step")?;
        self.done = state_field(state, "done")?.as_bool().unwrap_or(false);
        Ok(())
    }
}

/// Mixes `inputs` at random with `weights` (see the module docs for the rules).
pub fn sample_from_datasets(
    inputs: Vec<Dataset>,
    weights: Vec<f64>,
    seed: u64,
    stop_on_empty: bool,
) -> Result<Dataset> {
    if inputs.len() != weights.len() {
        return Err(Error::invalid(format!(
            "sample_from_datasets: {} inputs but {} weights",
            inputs.len(),
            weights.len()
        )));
    }
    if let Some(w) = weights.iter().find(|w| !w.is_finite() || **w < 0.0) {
        return Err(Error::invalid(format!(
            "sample_from_datasets: weight {w} is not a finite number >= 0"
        )));
    }
    Ok(Dataset::from_iter(Mix {
        inputs,
        weights,
        seed,
        stop_on_empty,
    }))
}
