//! Python callables as map and filter functions.
//!
//! The function runs with the GIL taken only for its own duration (`Python::attach`); callers of
//! the pipeline release the GIL around all Rust work, so a prefetch thread can run Python while
//! the consumer waits. The function's exception travels as a boxed `PyErr` inside
//! [`Error::Callback`] and is re-raised as itself at the boundary (see `errors::to_pyerr`).

use std::sync::Arc;

use pyo3::prelude::*;
use stokehold_core::{Ctx, Error, Example, FilterFn, MapFn};

use crate::convert::{dict_to_example, example_to_dict};

fn callback_error(ctx: &Ctx, err: PyErr) -> Error {
    Error::Callback {
        op: ctx.op.to_string(),
        index: ctx.index,
        source: Box::new(err),
    }
}

/// A Python callable `dict -> dict` as a map function.
pub fn py_map_fn(f: Py<PyAny>) -> MapFn {
    Arc::new(move |e: Example, ctx: &Ctx| {
        Python::attach(|py| {
            let run = || -> PyResult<Example> {
                let out = f.bind(py).call1((example_to_dict(py, e)?,))?;
                dict_to_example(py, &out)
            };
            run().map_err(|err| callback_error(ctx, err))
        })
    })
}

/// A Python callable `dict -> bool` as a filter predicate.
pub fn py_filter_fn(f: Py<PyAny>) -> FilterFn {
    Arc::new(move |e: &Example, ctx: &Ctx| {
        Python::attach(|py| {
            let run = || -> PyResult<bool> {
                f.bind(py)
                    .call1((example_to_dict(py, e.clone())?,))?
                    .is_truthy()
            };
            run().map_err(|err| callback_error(ctx, err))
        })
    })
}
