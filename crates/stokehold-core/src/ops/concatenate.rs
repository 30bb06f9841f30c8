//! `concatenate`: one dataset after another. Two finite random-access inputs give a
//! random-access result (epoch `e` is epoch `e` of the first, then epoch `e` of the second);
//! otherwise a stream. Inputs must yield the same features: a mismatch surfaces in the first op
//! that needs them to agree (batch), naming the feature.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{
    state_field, state_u64, Dataset, DatasetIter, IterDataset, MapDataset, INFINITE,
};
use crate::error::Result;
use crate::example::Example;

/// `concatenate` over two finite random-access inputs.
pub struct MapConcat {
    a: Arc<dyn MapDataset>,
    b: Arc<dyn MapDataset>,
}

impl MapDataset for MapConcat {
    fn len(&self) -> u64 {
        self.a.len() + self.b.len()
    }

    fn get(&self, index: u64) -> Result<Example> {
        let (la, lb) = (self.a.len(), self.b.len());
        let (epoch, i) = crate::checked::wrap_index(index, la + lb, || self.name())?;
        if i < la {
            self.a
                .get(crate::checked::global_index("concatenate", epoch, la, i)?)
        } else {
            self.b.get(crate::checked::global_index(
                "concatenate",
                epoch,
                lb,
                i - la,
            )?)
        }
    }

    fn name(&self) -> String {
        "concatenate".into()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![Dataset::Map(self.a.clone()), Dataset::Map(self.b.clone())]
    }
}

/// `concatenate` over streams.
pub struct IterConcat {
    a: Dataset,
    b: Dataset,
}

impl IterDataset for IterConcat {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(ConcatIter {
            b: self.b.clone(),
            epoch,
            part: 0,
            inner: self.a.iter(epoch)?,
        }))
    }

    fn name(&self) -> String {
        "concatenate".into()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.a.clone(), self.b.clone()]
    }

    fn len(&self) -> Option<u64> {
        Some(self.a.len()?.saturating_add(self.b.len()?))
    }
}

struct ConcatIter {
    b: Dataset,
    epoch: u64,
    part: u64,
    inner: Box<dyn DatasetIter>,
}

impl DatasetIter for ConcatIter {
    fn next(&mut self) -> Result<Option<Example>> {
        loop {
            if let Some(e) = self.inner.next()? {
                return Ok(Some(e));
            }
            if self.part == 1 {
                return Ok(None);
            }
            self.part = 1;
            self.inner = self.b.iter(self.epoch)?;
        }
    }

    fn state(&self) -> Json {
        json!({ "part": self.part, "inner": self.inner.state() })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let part = state_u64(state, "part")?;
        if part == 1 && self.part == 0 {
            self.inner = self.b.iter(self.epoch)?;
        }
        self.part = part;
        self.inner.set_state(state_field(state, "inner")?)
    }
}

impl Dataset {
    /// This dataset's elements, then `other`'s.
    pub fn concatenate(&self, other: &Dataset) -> Dataset {
        match (self, other) {
            (Dataset::Map(a), Dataset::Map(b)) if a.len() != INFINITE && b.len() != INFINITE => {
                Dataset::from_map(MapConcat {
                    a: a.clone(),
                    b: b.clone(),
                })
            }
            _ => Dataset::from_iter(IterConcat {
                a: self.clone(),
                b: other.clone(),
            }),
        }
    }
}
