//! # stokehold-core
//!
//! The engine of stokehold: the element model ([`DType`], [`Tensor`], [`Ragged`], [`Example`]),
//! the dataset model ([`MapDataset`] for random access, [`IterDataset`] for streams, [`Dataset`]
//! for either), the ops, and the threads that run them. It knows nothing of file formats or
//! Python: `stokehold-io` adds formats, `stokehold-python` the bindings.
//!
//! ```
//! use stokehold_core::{Dataset, DatasetIter};
//! let ds = Dataset::range(100).shuffle(1).take(10).batch(5, false).unwrap().prefetch(2).unwrap();
//! let mut it = ds.iter(0).unwrap();
//! let first = it.next().unwrap().unwrap();
//! assert_eq!(first.tensor("t", "x").unwrap().shape(), &[5]);
//! ```
#![deny(missing_docs)]

pub mod alloc;
pub mod cast;
pub mod checked;
pub mod choice;
pub mod dataset;
pub mod dtype;
pub mod error;
pub mod example;
pub mod exec;
pub mod ops;
pub mod rng;
pub mod skip;
pub mod state;
pub mod suggest;
pub mod tensor;
pub mod testing;

pub use cast::PadValue;
pub use dataset::{Dataset, DatasetIter, Hint, IterDataset, MapDataset, MapIter, INFINITE};
pub use dtype::{DType, Scalar};
pub use error::{BoxError, Error, Result};
pub use example::{stack, stack_examples, Example, Ragged, Value};
pub use exec::{ExecOptions, Executor, Parallelism, AUTOTUNE};
pub use ops::batch::{BatchOptions, PadSpec};
pub use ops::filter::FilterFn;
pub use ops::generator::{generator_fn, ExampleIter, GeneratorFactory};
pub use ops::group_by_window::{key_fn, KeyFn, WindowSizeFn};
pub use ops::interleave::{interleave_fn, InterleaveFn};
pub use ops::map::{BatchMapFn, Ctx, MapFn, ScopeFn};
pub use ops::mix::{
    mix_reports, sample_from_datasets, sample_from_datasets_by, token_count, MixBy, MixUnit,
};
pub use ops::on_error::{ErrorLog, OnError};
pub use ops::plan::Epochs;
pub use ops::shard::ShardPolicy;
pub use ops::{filter_fn, map_fn};
pub use state::PipelineIter;
pub use tensor::Tensor;
