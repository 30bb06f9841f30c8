//! Token files for language-model training: Megatron indexed datasets (`.bin` + `.idx`, every
//! dtype megatron-core writes) and flat token files (nanoGPT's uint16 `.bin`, `.npy`, OLMo-core's
//! headerless memmaps), memory-mapped, cut into windows of `seq_len + 1` tokens.
//!
//! Two orders: stokehold's own ([`read_tokens`] with [`Order::Shuffled`]: every window of every
//! file, globally shuffled by the project's keyed permutation, a fresh order each epoch, a
//! checkpoint is one position) and megatron-core's GPTDataset / BlendedDataset order
//! ([`Order::Megatron`]), rebuilt in Rust sample for sample (`gpt.rs`; numpy's RandomState in
//! `numpy_rng.rs`), so a model sees the same samples as under Megatron-LM.
//!
//! ```
//! # fn main() -> stokehold_core::Result<()> {
//! use stokehold_io::tokens::{read_tokens, Order};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("train.bin"); // nanoGPT: raw uint16 tokens
//! let ids: Vec<u8> = (0u16..100).flat_map(|t| t.to_le_bytes()).collect();
//! std::fs::write(&path, ids).unwrap();
//! let ds = read_tokens(&[path.as_path()], 9, Order::InFile, None)?;
//! assert_eq!(ds.len(), Some(11)); // (100 - 1) / 9 windows of 10 tokens, each overlapping the next by 1
//! assert_eq!(ds.get(1)?.tensor("t", "tokens")?.to_vec::<i64>()?[0], 9);
//! # Ok(()) }
//! ```

mod dataset;
mod file;
pub mod gpt;
pub mod idx;
pub mod numpy_rng;

use std::path::Path;

use stokehold_core::{DType, Dataset, Result};

pub use dataset::{MegatronSource, TokenDataset, FEATURE};
pub use file::TokenFile;

/// The order of a token dataset's windows.
#[derive(Clone, Debug)]
pub enum Order {
    /// stokehold's: all windows globally shuffled with `seed` (a new order each epoch).
    Shuffled {
        /// The shuffle's seed.
        seed: u64,
    },
    /// File after file, window after window.
    InFile,
    /// megatron-core's GPTDataset order (one file) or BlendedDataset (several, with weights).
    Megatron {
        /// GPTDataset's `random_seed` (numpy's RandomState takes 32 bits).
        seed: u32,
        /// GPTDataset's `num_samples` per file (`None`: one epoch of each).
        num_samples: Vec<Option<u64>>,
        /// The split's documents per file (`None`: all).
        documents: Vec<Option<std::ops::Range<u32>>>,
        /// Blend weights and size, for several files.
        blend: Option<(Vec<f64>, u64)>,
    },
}

/// Windows of `seq_len + 1` tokens over `paths` in `order`; `dtype` is the token type of
/// headerless flat files (a raw `.bin` defaults to uint16).
pub fn read_tokens(
    paths: &[&Path],
    seq_len: u64,
    order: Order,
    dtype: Option<DType>,
) -> Result<Dataset> {
    Ok(match order {
        Order::InFile => Dataset::from_map(TokenDataset::open(paths, seq_len, dtype)?),
        Order::Shuffled { seed } => {
            Dataset::from_map(TokenDataset::open(paths, seq_len, dtype)?).shuffle(seed)
        }
        Order::Megatron {
            seed,
            num_samples,
            documents,
            blend,
        } => {
            let sources: Vec<MegatronSource> = paths
                .iter()
                .enumerate()
                .map(|(i, p)| MegatronSource {
                    path: p,
                    documents: documents.get(i).cloned().flatten(),
                    num_samples: num_samples.get(i).copied().flatten(),
                })
                .collect();
            let blend = blend.as_ref().map(|(w, n)| (w.as_slice(), *n));
            Dataset::from_map(TokenDataset::megatron(
                &sources, seq_len, seed, blend, dtype,
            )?)
        }
    })
}
