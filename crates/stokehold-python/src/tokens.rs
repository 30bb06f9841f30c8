//! Token files from Python (`python/stokehold/tokens.py` holds the API and its documentation).
//! The GIL is released while the files are opened and the sample index is built.

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use stokehold_core::{DType, Error};
use stokehold_io::tokens::{read_tokens, Order};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};

/// The order argument, parsed once: `"shuffle"`, `"sequential"` or `"megatron"`.
fn order(
    name: &str,
    seed: u64,
    num_samples: Vec<Option<u64>>,
    documents: Vec<Option<(u32, u32)>>,
    blend: Option<(Vec<f64>, u64)>,
) -> stokehold_core::Result<Order> {
    Ok(match name {
        "shuffle" => Order::Shuffled { seed },
        "sequential" => Order::InFile,
        "megatron" => Order::Megatron {
            seed: u32::try_from(seed).map_err(|_| {
                Error::invalid(format!(
                    "read_tokens: order='megatron' takes a seed in 0 ..= 2**32 - 1 (numpy's \
                     RandomState), got {seed}"
                ))
            })?,
            num_samples,
            documents: documents
                .into_iter()
                .map(|d| d.map(|(a, b)| a..b))
                .collect(),
            blend,
        },
        other => {
            return Err(Error::invalid(format!(
                "read_tokens: order must be 'shuffle', 'sequential' or 'megatron', got {other:?}"
            )))
        }
    })
}

#[pymethods]
impl PyDataset {
    /// Windows of `seq_len + 1` tokens of token files, in `order`.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    fn read_tokens(
        py: Python<'_>,
        files: Vec<PathBuf>,
        seq_len: u64,
        order_name: String,
        seed: u64,
        num_samples: Vec<Option<u64>>,
        documents: Vec<Option<(u32, u32)>>,
        blend: Option<(Vec<f64>, u64)>,
        dtype: Option<String>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let order = ok(py, order(&order_name, seed, num_samples, documents, blend))?;
            let dtype = match dtype {
                None => None,
                Some(d) => Some(ok(py, d.parse::<DType>())?),
            };
            let paths: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
            let ds = ok(py, py.detach(|| read_tokens(&paths, seq_len, order, dtype)))?;
            Ok(PyDataset::from_dataset(ds))
        })
    }
}
