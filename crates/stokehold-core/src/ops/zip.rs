//! `zip`: elements of several datasets side by side, merged into one example.
//!
//! Features are merged in order; each input may carry a prefix (`"a/"`) to keep names apart, and a
//! name that still clashes is a schema error naming both inputs. The result ends with the shortest
//! input (tf.data's rule). All inputs random-access: the result is random-access (epoch `e` of the
//! zip is epoch `e` of each input).

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{state_field, Dataset, DatasetIter, IterDataset, MapDataset, INFINITE};
use crate::error::{Error, Result};
use crate::example::{example_to_json, examples_from_state, Example};

fn merge(op: &str, prefixes: &[String], parts: Vec<Example>) -> Result<Example> {
    let mut out = Example::new();
    for (k, part) in parts.into_iter().enumerate() {
        for (name, value) in part.iter() {
            let full = format!("{}{name}", prefixes[k]);
            if out.get(&full).is_some() {
                return Err(Error::schema(
                    op,
                    format!("feature {full:?} of input {k} clashes with an earlier input; give the inputs prefixes"),
                ));
            }
            out.insert(&full, value.clone());
        }
    }
    Ok(out)
}

fn label(inputs: &[Dataset], prefixes: &[String]) -> String {
    let p: Vec<_> = prefixes.iter().map(|p| format!("{p:?}")).collect();
    format!("zip({} inputs, prefixes=[{}])", inputs.len(), p.join(","))
}

/// `zip` over random-access inputs.
pub struct MapZip {
    inputs: Vec<Arc<dyn MapDataset>>,
    prefixes: Vec<String>,
    label: String,
}

impl MapDataset for MapZip {
    fn len(&self) -> u64 {
        self.inputs.iter().map(|d| d.len()).min().unwrap_or(0)
    }

    fn get(&self, index: u64) -> Result<Example> {
        let len = self.len();
        if len == 0 {
            return Err(Error::OutOfRange {
                index,
                len,
                what: self.label.clone(),
            });
        }
        let (epoch, i) = if len == INFINITE {
            (0, index)
        } else {
            (index / len, index % len)
        };
        let parts = self
            .inputs
            .iter()
            .map(|d| {
                let n = d.len();
                d.get(if n == INFINITE {
                    i
                } else {
                    crate::checked::global_index("zip", epoch, n, i)?
                })
            })
            .collect::<Result<Vec<_>>>()?;
        merge(&self.label, &self.prefixes, parts)
    }

    fn name(&self) -> String {
        self.label.clone()
    }

    fn parents(&self) -> Vec<Dataset> {
        self.inputs
            .iter()
            .map(|d| Dataset::Map(d.clone()))
            .collect()
    }
}

/// `zip` over streams.
pub struct IterZip {
    inputs: Vec<Dataset>,
    prefixes: Arc<Vec<String>>,
    label: String,
}

impl IterDataset for IterZip {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        let its = self
            .inputs
            .iter()
            .map(|d| d.iter(epoch))
            .collect::<Result<Vec<_>>>()?;
        Ok(Box::new(ZipIter {
            its,
            prefixes: self.prefixes.clone(),
            label: self.label.clone(),
            done: false,
            taken: Vec::new(),
        }))
    }

    fn name(&self) -> String {
        self.label.clone()
    }

    fn parents(&self) -> Vec<Dataset> {
        self.inputs.clone()
    }

    fn len(&self) -> Option<u64> {
        self.inputs
            .iter()
            .map(|d| d.len())
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .min()
            .or(Some(0))
    }
}

struct ZipIter {
    its: Vec<Box<dyn DatasetIter>>,
    prefixes: Arc<Vec<String>>,
    label: String,
    done: bool,
    /// The parts taken from the first inputs when a later one was interrupted (Ctrl-C while it
    /// waited): the next call goes on from them, and a state taken meanwhile carries them.
    taken: Vec<Example>,
}

impl DatasetIter for ZipIter {
    fn next(&mut self) -> Result<Option<Example>> {
        if self.done || self.its.is_empty() {
            return Ok(None);
        }
        let mut parts = std::mem::take(&mut self.taken);
        parts.reserve(self.its.len() - parts.len());
        for k in parts.len()..self.its.len() {
            match self.its[k].next() {
                Ok(Some(e)) => parts.push(e),
                Ok(None) => {
                    // Elements already taken from earlier inputs are dropped, as in tf.data.
                    self.done = true;
                    return Ok(None);
                }
                Err(e) => {
                    if matches!(e, Error::Interrupted(_)) {
                        self.taken = parts;
                    }
                    return Err(e);
                }
            }
        }
        merge(&self.label, &self.prefixes, parts).map(Some)
    }

    fn state(&self) -> Json {
        let inner: Vec<Json> = self.its.iter().map(|i| i.state()).collect();
        let mut state = json!({ "done": self.done, "inputs": inner });
        if !self.taken.is_empty() {
            state["taken"] = self.taken.iter().map(example_to_json).collect();
        }
        state
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let inner = state_field(state, "inputs")?
            .as_array()
            .filter(|a| a.len() == self.its.len())
            .ok_or_else(|| Error::State(format!("{}: bad inputs field", self.label)))?;
        let taken: Vec<Example> = examples_from_state(state, "taken")?;
        if taken.len() >= self.its.len() {
            return Err(Error::State(format!(
                "{}: the state holds {} parts of a zip of {}",
                self.label,
                taken.len(),
                self.its.len()
            )));
        }
        for (it, s) in self.its.iter_mut().zip(inner) {
            it.set_state(s)?;
        }
        self.done = state_field(state, "done")?.as_bool().unwrap_or(false);
        self.taken = taken;
        Ok(())
    }
}

impl Dataset {
    /// Zips `inputs`, merging their features (names must not clash; see [`Dataset::zip_prefixed`]).
    pub fn zip(inputs: Vec<Dataset>) -> Dataset {
        Dataset::zip_prefixed(inputs.into_iter().map(|d| (String::new(), d)).collect())
    }

    /// Zips `inputs`, prefixing each input's feature names with its string.
    pub fn zip_prefixed(inputs: Vec<(String, Dataset)>) -> Dataset {
        let (prefixes, inputs): (Vec<String>, Vec<Dataset>) = inputs.into_iter().unzip();
        let label = label(&inputs, &prefixes);
        let maps: Option<Vec<_>> = inputs.iter().map(|d| d.as_map().cloned()).collect();
        match maps {
            Some(maps) if !maps.is_empty() => Dataset::from_map(MapZip {
                inputs: maps,
                prefixes,
                label,
            }),
            _ => Dataset::from_iter(IterZip {
                inputs,
                prefixes: Arc::new(prefixes),
                label,
            }),
        }
    }
}
