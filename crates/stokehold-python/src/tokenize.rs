//! Binding of `tokenize` (`stokehold_io::tokenize`): a `#[pymethods]` block of the native
//! `Dataset`. The tokenizer.json is read and parsed with the GIL released; the map runs
//! natively on the pipeline's threads, by the loaders' one rule for parallel maps
//! ([`map_on_error_par`]).

use pyo3::prelude::*;
use stokehold_io::tokenize::{load_tokenizer, tokenize_fn, IdType, Side, TokenizeOptions};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};
use crate::options::Wrap;
use crate::skips::map_on_error_par;

#[pymethods]
impl PyDataset {
    /// Token ids of the text in feature `feature` into feature `out` (see `Dataset.tokenize`).
    #[pyo3(signature = (feature, tokenizer, out, *, add_special_tokens, bos_id, eos_id,
        max_length, truncation_side, dtype, num_parallel_calls, deterministic))]
    #[allow(clippy::too_many_arguments)]
    fn tokenize(
        &self,
        py: Python<'_>,
        feature: &str,
        tokenizer: &str,
        out: &str,
        add_special_tokens: bool,
        bos_id: Option<u32>,
        eos_id: Option<u32>,
        max_length: Option<usize>,
        truncation_side: Wrap<Side>,
        dtype: Wrap<IdType>,
        num_parallel_calls: Option<i64>,
        deterministic: Option<bool>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let op = "tokenize";
            let side = ok(py, truncation_side.get(op))?;
            let dtype = ok(py, dtype.get(op))?;
            let tok = ok(py, py.detach(|| load_tokenizer(op, tokenizer)))?;
            let opts = TokenizeOptions {
                add_special_tokens,
                bos_id,
                eos_id,
                max_length,
                side,
                dtype,
            };
            let f = ok(py, tokenize_fn(feature, out, tok, &opts))?;
            let label = format!("{op}:{out}");
            let det = deterministic.unwrap_or(true);
            let ds = self.dataset();
            map_on_error_par(py, ds, op, &label, f, "raise", num_parallel_calls, det)
        })
    }
}
