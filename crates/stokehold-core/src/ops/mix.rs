//! `sample_from_datasets`: a weighted random mix of several datasets, by elements or by tokens.
//!
//! Step `t` of epoch `e` draws an input with probability proportional to its weight, from a
//! generator keyed by (seed, e, t): the same seed gives the same mix whatever the thread count.
//! Rules for exhausted inputs, explicit so nothing hangs: with `stop_on_empty`, the mix ends the
//! first time it draws an exhausted input (tf.data's `stop_on_empty_dataset=True`); without it, an
//! exhausted input is dropped and the weights of the rest are renormalised. The mix ends when no
//! input with a positive weight is left. Negative or non-finite weights are an error. Each input
//! runs the mix's epoch (`iter(e)` of the mix is `iter(e)` of every input).
//!
//! **By tokens** ([`MixBy::Tokens`]): the weights are shares of the tokens emitted, not of the
//! elements. The mix counts the tokens `c_k` it has taken from each input (an element's
//! [`token_count`]); with `T = sum c_k` and `w_k` the weights normalised over the live inputs, an
//! input's deficit is `d_k = w_k T - c_k`. Each step draws, keyed as above and with probability
//! proportional to `w_k`, among the live inputs whose deficit is `>= 0`: those at or below their
//! share. The deficits sum to 0, so that set is never empty, and so every `d_k >= -L` at all
//! times, `L` the longest element taken (the chosen input had `d_k >= 0` and loses at most one
//! element's tokens; the others only gain); hence also `d_k <= (K - 1) L` for `K` inputs. The
//! realised share of every input is within `(K - 1) L / T` of its weight: 3 sources of
//! 2,048-token rows are within 0.06 % after 10 M tokens, whatever the lengths. The state adds the
//! `K` token counts (exact integers); nothing else is kept.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{state_field, state_u64, Dataset, DatasetIter, IterDataset};
use crate::error::{Error, Result};
use crate::example::{Example, Value};
use crate::rng::{Rng, Stream};

const OP: &str = "sample_from_datasets";

/// What the weights are shares of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MixBy {
    /// Elements (tf.data's `sample_from_datasets`).
    Elements,
    /// Tokens: each element counts as its [`token_count`] in this feature.
    Tokens(String),
}

/// What the weights count, as the `by` argument spells it (`MixBy` adds the token feature).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MixUnit {
    /// `"elements"`.
    Elements,
    /// `"tokens"`.
    Tokens,
}

impl crate::choice::Choice for MixUnit {
    const ARG: &'static str = "by";
    const CHOICES: &'static [(&'static str, Self)] =
        &[("elements", MixUnit::Elements), ("tokens", MixUnit::Tokens)];
}

impl MixBy {
    /// `by` with its token feature (used by tokens only).
    pub fn new(unit: MixUnit, token_feature: &str) -> MixBy {
        match unit {
            MixUnit::Elements => MixBy::Elements,
            MixUnit::Tokens => MixBy::Tokens(token_feature.to_owned()),
        }
    }
}

/// The tokens an element holds in `feature`: its length ([`Value::length`], as `pack` measures
/// an element); for a packed row (the element also has
/// `{feature}_segment_ids`, as `pack` makes it), the positions whose segment id is not 0, so
/// padding is not counted.
pub fn token_count(e: &Example, feature: &str) -> Result<u64> {
    if let Some(Value::Tensor(seg)) = e.get(&format!("{feature}_segment_ids")) {
        let ids = seg.to_vec::<i32>().map_err(|err| {
            Error::schema(
                OP,
                format!("{feature}_segment_ids is not int32 segment ids: {err}"),
            )
        })?;
        return Ok(ids.iter().filter(|&&s| s != 0).count() as u64);
    }
    let n = match e.get(feature) {
        Some(v) => v.length(),
        None => {
            return Err(Error::schema(
                OP,
                format!(
                    "by tokens: an element has no feature {feature:?} to count tokens in (it has \
                     {:?}); pass token_feature= one of those",
                    e.names()
                ),
            ))
        }
    };
    Ok(n as u64)
}

/// The weighted mix.
pub struct Mix {
    inputs: Vec<Dataset>,
    weights: Vec<f64>,
    seed: u64,
    stop_on_empty: bool,
    by: MixBy,
    /// The token counts of the iterator that last took an element (or was restored), for
    /// [`mix_reports`].
    realised: Arc<[AtomicU64]>,
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
            tokens: vec![0; its.len()],
            its,
            weights: self.weights.clone(),
            seed: self.seed,
            epoch,
            step: 0,
            stop_on_empty: self.stop_on_empty,
            by: self.by.clone(),
            realised: self.realised.clone(),
            done: false,
        }))
    }

    /// By elements, the name is the one states were always saved under.
    fn name(&self) -> String {
        let by = match &self.by {
            MixBy::Elements => String::new(),
            MixBy::Tokens(f) => format!(", by=tokens({f:?})"),
        };
        format!(
            "sample_from_datasets(weights={:?}, seed={}, stop_on_empty={}{by})",
            self.weights, self.seed, self.stop_on_empty
        )
    }

    fn parents(&self) -> Vec<Dataset> {
        self.inputs.clone()
    }

    /// By tokens: `{"op", "weights", "tokens", "shares"}` (each input's tokens taken and share
    /// of them), as the iterator that last took an element saw them.
    fn mix_report(&self) -> Option<Json> {
        if self.by == MixBy::Elements {
            return None;
        }
        let tokens: Vec<u64> = self
            .realised
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = tokens.iter().sum();
        let shares: Vec<f64> = tokens
            .iter()
            .map(|&c| {
                if total == 0 {
                    0.0
                } else {
                    c as f64 / total as f64
                }
            })
            .collect();
        Some(
            json!({"op": self.name(), "weights": self.weights, "tokens": tokens, "shares": shares}),
        )
    }
}

/// The reports of the mixes by tokens in `ds` and its inputs ([`IterDataset::mix_report`]),
/// outermost first.
pub fn mix_reports(ds: &Dataset) -> Vec<Json> {
    let mut out: Vec<Json> = match ds {
        Dataset::Iter(i) => i.mix_report().into_iter().collect(),
        Dataset::Map(_) => Vec::new(),
    };
    for p in ds.parents() {
        out.extend(mix_reports(&p));
    }
    out
}

struct MixIter {
    its: Vec<Box<dyn DatasetIter>>,
    weights: Vec<f64>,
    exhausted: Vec<bool>,
    /// Tokens taken from each input this epoch (by tokens; zeros by elements).
    tokens: Vec<u64>,
    seed: u64,
    epoch: u64,
    step: u64,
    stop_on_empty: bool,
    by: MixBy,
    realised: Arc<[AtomicU64]>,
    done: bool,
}

impl MixIter {
    fn publish(&self) {
        for (c, &t) in self.realised.iter().zip(&self.tokens) {
            c.store(t, Ordering::Relaxed);
        }
    }

    fn live(&self, k: usize) -> bool {
        !self.exhausted[k] && self.weights[k] > 0.0
    }

    /// The inputs a step may draw: every live one by elements; by tokens, the live ones at or
    /// below their share (`w_k T - c_k W >= 0`, the deficit scaled by the live weight `W`).
    fn candidates(&self) -> Vec<usize> {
        let live: Vec<usize> = (0..self.its.len()).filter(|&k| self.live(k)).collect();
        if self.by == MixBy::Elements || live.is_empty() {
            return live;
        }
        let total_w: f64 = live.iter().map(|&k| self.weights[k]).sum();
        let total_t: f64 = live.iter().map(|&k| self.tokens[k] as f64).sum();
        let deficit = |k: usize| self.weights[k] * total_t - self.tokens[k] as f64 * total_w;
        let under: Vec<usize> = live
            .iter()
            .copied()
            .filter(|&k| deficit(k) >= 0.0)
            .collect();
        if !under.is_empty() {
            return under;
        }
        // Rounding can leave every deficit a hair below 0 (they sum to 0): take the largest.
        let best = live
            .iter()
            .copied()
            .max_by(|&a, &b| deficit(a).total_cmp(&deficit(b)))
            .expect("live is not empty");
        vec![best]
    }

    fn draw(&self) -> Option<usize> {
        let ks = self.candidates();
        let total: f64 = ks.iter().map(|&k| self.weights[k]).sum();
        if total <= 0.0 {
            return None;
        }
        // One generator per (seed, epoch, step): a retry after dropping an exhausted input
        // draws afresh, keyed the same way on restore.
        let u = Rng::for_element(self.seed, Stream::Mix, self.epoch, self.step).next_f64() * total;
        let mut acc = 0.0;
        for &k in &ks {
            acc += self.weights[k];
            if u < acc {
                return Some(k);
            }
        }
        ks.last().copied()
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
                    if let MixBy::Tokens(f) = &self.by {
                        self.tokens[k] += token_count(&e, f)?;
                        self.publish();
                    }
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
        let mut s = json!({
            "step": self.step, "done": self.done, "exhausted": self.exhausted, "inputs": inner,
        });
        if self.by != MixBy::Elements {
            s["tokens"] = json!(self.tokens);
        }
        s
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let k = self.its.len();
        let inner = state_field(state, "inputs")?
            .as_array()
            .filter(|a| a.len() == k)
            .ok_or_else(|| Error::State("sample_from_datasets: bad inputs field".into()))?;
        let exhausted: Vec<bool> = list_field(state, "exhausted", k)?;
        let tokens: Vec<u64> = match self.by {
            MixBy::Elements => vec![0; k],
            MixBy::Tokens(_) => list_field(state, "tokens", k)?,
        };
        for (it, s) in self.its.iter_mut().zip(inner) {
            it.set_state(s)?;
        }
        (self.exhausted, self.tokens) = (exhausted, tokens);
        self.publish();
        self.step = state_u64(state, "step")?;
        self.done = state_field(state, "done")?.as_bool().unwrap_or(false);
        Ok(())
    }
}

/// A state's list field of one value per input.
fn list_field<T: serde::de::DeserializeOwned>(
    state: &Json,
    name: &str,
    k: usize,
) -> Result<Vec<T>> {
    serde_json::from_value::<Vec<T>>(state_field(state, name)?.clone())
        .ok()
        .filter(|v| v.len() == k)
        .ok_or_else(|| {
            Error::State(format!(
                "sample_from_datasets: bad {name} field (one value per input, {k} inputs): {}",
                state_field(state, name)
                    .map(|v| v.to_string())
                    .unwrap_or_default()
            ))
        })
}

/// Mixes `inputs` at random with `weights`, by elements (see the module docs for the rules).
pub fn sample_from_datasets(
    inputs: Vec<Dataset>,
    weights: Vec<f64>,
    seed: u64,
    stop_on_empty: bool,
) -> Result<Dataset> {
    sample_from_datasets_by(inputs, weights, seed, stop_on_empty, MixBy::Elements)
}

/// Mixes `inputs` with `weights` as shares of what `by` counts (see the module docs).
pub fn sample_from_datasets_by(
    inputs: Vec<Dataset>,
    weights: Vec<f64>,
    seed: u64,
    stop_on_empty: bool,
    by: MixBy,
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
    if let MixBy::Tokens(f) = &by {
        if f.is_empty() {
            return Err(Error::invalid(
                "sample_from_datasets: by tokens needs a token feature name, not ''",
            ));
        }
    }
    let realised = (0..inputs.len()).map(|_| AtomicU64::new(0)).collect();
    Ok(Dataset::from_iter(Mix {
        inputs,
        weights,
        seed,
        stop_on_empty,
        by,
        realised,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Rng, Stream};
    use crate::tensor::Tensor;
    use crate::DType;
    use bytes::Bytes;

    static ZEROS: [u8; 4 * 4096] = [0; 4 * 4096];

    /// `n` documents of source `tag` with keyed lengths in `lo..=hi`: `{"tokens": int32 [len]}`
    /// (zero-copy views of one static buffer: the test counts tokens, it need not hold them)
    /// and `{"src": tag}`.
    fn docs(tag: i64, n: u64, lo: u64, hi: u64) -> Dataset {
        Dataset::range(n).map(
            "doc",
            crate::map_fn(move |e, ctx| {
                let r = Rng::for_element(tag as u64, Stream::Pack, ctx.epoch, ctx.index).next_f64();
                let len = (lo + (r * (hi - lo + 1) as f64) as u64).min(hi) as usize;
                let t = Tensor::new(DType::I32, vec![len], Bytes::from_static(&ZEROS[..4 * len]))?;
                Ok(e.with("tokens", t).with("src", Tensor::scalar(tag)))
            }),
        )
    }

    fn src_and_len(e: &Example) -> (usize, u64) {
        let s = e.tensor("t", "src").unwrap().to_vec::<i64>().unwrap()[0] as usize;
        (s, token_count(e, "tokens").unwrap())
    }

    #[test]
    fn token_shares_match_the_weights_within_the_bound_over_10m_tokens() {
        let weights = [0.5, 0.3, 0.2];
        // Lengths differ per source (a source of long documents must not win by elements).
        let ds = sample_from_datasets_by(
            vec![
                docs(0, 1 << 40, 1, 4096),
                docs(1, 1 << 40, 1, 64),
                docs(2, 1 << 40, 500, 1500),
            ],
            weights.to_vec(),
            3,
            false,
            MixBy::Tokens("tokens".into()),
        )
        .unwrap();
        let mut it = ds.iter(0).unwrap();
        let mut c = [0u64; 3];
        let mut total = 0u64;
        let mut worst = 0f64;
        while total < 10_000_000 {
            let (s, n) = src_and_len(&it.next().unwrap().unwrap());
            c[s] += n;
            total += n;
            for k in 0..3 {
                // The proven bound: |w_k T - c_k| <= (K - 1) L at every step.
                let d = (weights[k] * total as f64 - c[k] as f64).abs();
                worst = worst.max(d);
            }
        }
        assert!(worst <= 2.0 * 4096.0, "deficit {worst}");
        for k in 0..3 {
            let share = c[k] as f64 / total as f64;
            assert!(
                (share - weights[k]).abs() < 0.005 * weights[k],
                "{k}: {share}"
            );
        }
        assert_eq!(it.state()["tokens"], json!(c));
        let report = &mix_reports(&ds.batch(2, false).unwrap())[0];
        assert_eq!(report["tokens"], json!(c));
        let share = report["shares"][1].as_f64().unwrap();
        assert!((share - 0.3).abs() < 0.0015, "{report}");
        assert!(mix_reports(&docs(0, 3, 1, 2)).is_empty());
    }

    #[test]
    fn by_tokens_is_seeded_resumes_exactly_and_drops_an_exhausted_input() {
        let mix = |seed| {
            sample_from_datasets_by(
                vec![docs(0, 40, 1, 30), docs(1, 300, 1, 5)],
                vec![0.5, 0.5],
                seed,
                false,
                MixBy::Tokens("tokens".into()),
            )
            .unwrap()
        };
        let all: Vec<(usize, u64)> = crate::testing::run(&mix(1), 0)
            .iter()
            .map(src_and_len)
            .collect();
        assert_eq!(all.len(), 340, "every element of both inputs, then the end");
        assert_ne!(
            all,
            crate::testing::run(&mix(2), 0)
                .iter()
                .map(src_and_len)
                .collect::<Vec<_>>()
        );
        crate::testing::check("sample_from_datasets(by=tokens)", &mix(1), 40);
        // Not a round robin: draws among the inputs under their share are random.
        let firsts: Vec<usize> = all[..20].iter().map(|p| p.0).collect();
        assert!(firsts.windows(2).any(|w| w[0] == w[1]), "{firsts:?}");
    }

    #[test]
    fn token_counts_and_their_errors() {
        let row = Example::new()
            .with(
                "tokens",
                Tensor::from_vec(vec![4], vec![5i64, 6, 7, 0]).unwrap(),
            )
            .with(
                "tokens_segment_ids",
                Tensor::from_vec(vec![4], vec![1i32, 1, 2, 0]).unwrap(),
            );
        assert_eq!(
            token_count(&row, "tokens").unwrap(),
            3,
            "padding is not counted"
        );
        let scalar = Example::new().with("x", Tensor::scalar(3i64));
        assert_eq!(token_count(&scalar, "x").unwrap(), 1);
        let err = token_count(&scalar, "tokens").unwrap_err().to_string();
        assert!(
            err.contains("no feature \"tokens\"") && err.contains("[\"x\"]"),
            "{err}"
        );
        let by = MixBy::Tokens(String::new());
        assert!(sample_from_datasets_by(vec![Dataset::range(1)], vec![1.0], 0, false, by).is_err());
        let mix = sample_from_datasets_by(
            vec![Dataset::range(3)],
            vec![1.0],
            0,
            false,
            MixBy::Tokens("x".into()),
        )
        .unwrap();
        let mut it = mix.iter(0).unwrap();
        it.next().unwrap();
        let mut bad = it.state();
        bad["tokens"] = json!([1, 2]);
        let err = mix
            .iter(0)
            .unwrap()
            .set_state(&bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad tokens field"), "{err}");
    }
}
