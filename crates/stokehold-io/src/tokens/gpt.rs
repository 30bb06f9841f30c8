//! megatron-core's `GPTDataset` index building, step for step (`gpt_dataset.py`,
//! `_build_document_sample_shuffle_indices`, and `helpers.cpp`'s `build_sample_idx` and
//! `build_blending_indices`), so that stokehold's `order="megatron"` yields the very samples
//! megatron-core does (`testdata/tokens/megatron_samples.json`, made by megatron-core itself).
//!
//! * document index: the split's documents repeated once per epoch and shuffled with
//!   `numpy.random.RandomState(seed)`; when the last epoch is needed for fewer than 80 % of an
//!   epoch's samples, the first `epochs - 1` and the last are shuffled separately.
//! * sample index: a walk over the document index cutting windows of `seq_len + 1` tokens that
//!   overlap by one (the last token of a window is the first of the next), as `(position in the
//!   document index, offset)` pairs.
//! * shuffle index: the samples shuffled by the same `RandomState` (the final epoch's separately
//!   when its documents were).
//!
//! Megatron's `add_extra_token_to_sequence` (true by default) and drop-the-last-partial-sample
//! (its default for every split) are fixed here.

use std::ops::Range;

use stokehold_core::{Error, Result};

use super::numpy_rng::RandomState;

/// The three indices of a `GPTDataset`.
#[derive(Clone, Debug)]
pub struct GptIndex {
    /// Document ids in the order their tokens are read.
    pub documents: Vec<u32>,
    /// Start of each sample (and the end of the last): position in `documents`, token offset.
    pub samples: Vec<[u64; 2]>,
    /// Sample `i` of the dataset is `samples[shuffle[i]]`; `None`: in order.
    pub shuffle: Option<Vec<u64>>,
}

impl GptIndex {
    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.samples.len().saturating_sub(1) as u64
    }

    /// True when no sample fits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Which entry of `samples` sample `i` (< len) starts at.
    pub fn sample(&self, i: u64) -> u64 {
        match &self.shuffle {
            Some(s) => s[i as usize],
            None => i,
        }
    }
}

/// Tokens in `documents` of `sizes`, checked.
fn tokens_in(op: &str, sizes: &[i32], documents: &Range<u32>) -> Result<u64> {
    let mut sum = 0u64;
    for d in documents.clone() {
        let n = *sizes.get(d as usize).ok_or_else(|| {
            Error::invalid(format!(
                "{op}: document {d} is past the file's {} sequences",
                sizes.len()
            ))
        })?;
        sum += n.max(0) as u64;
    }
    Ok(sum)
}

fn check_seq_len(op: &str, seq_len: u64) -> Result<()> {
    if seq_len < 2 || seq_len > i32::MAX as u64 / 2 {
        return Err(Error::invalid(format!(
            "{op}: seq_len {seq_len} is out of range (2 ..= {})",
            i32::MAX / 2
        )));
    }
    Ok(())
}

/// megatron-core's indices for `documents` of a file whose sequences have `sizes` tokens.
pub fn megatron(
    sizes: &[i32],
    documents: Range<u32>,
    seq_len: u64,
    seed: u32,
    num_samples: Option<u64>,
) -> Result<GptIndex> {
    let op = "read_tokens(order=megatron)";
    check_seq_len(op, seq_len)?;
    let per_epoch = tokens_in(op, sizes, &documents)?;
    if per_epoch < 2 {
        return Err(Error::invalid(format!(
            "{op}: documents {documents:?} hold {per_epoch} tokens; a sample needs at least 2"
        )));
    }
    let mut epochs = 1u64;
    if let Some(n) = num_samples {
        let wanted = n
            .checked_mul(seq_len)
            .and_then(|t| t.checked_add(1))
            .ok_or_else(|| Error::invalid(format!("{op}: num_samples {n} x seq_len overflows")))?;
        epochs = wanted.div_ceil(per_epoch).max(1);
    }
    let mut separate_final = false;
    let mut sans_final = 0;
    if epochs > 1 {
        let n = num_samples.unwrap_or(0);
        sans_final = ((epochs - 1) * per_epoch - 1) / seq_len;
        let from_final = n.saturating_sub(sans_final);
        let per_epoch_samples = (per_epoch - 1) / seq_len;
        // megatron's threshold: `int(0.80 * num_samples_per_epoch)`, a float product truncated.
        separate_final = from_final < (0.80 * per_epoch_samples as f64) as u64;
    }
    let docs: Vec<u32> = documents.collect();
    let mut rng = RandomState::new(seed);
    let documents = if separate_final {
        let mut first = document_index(&docs, epochs - 1, &mut rng)?;
        first.extend(document_index(&docs, 1, &mut rng)?);
        first
    } else {
        document_index(&docs, epochs, &mut rng)?
    };
    let samples = sample_index(sizes, &documents, seq_len, epochs * per_epoch)?;
    let total = samples.len() as u64 - 1;
    let first = if separate_final { sans_final } else { total };
    let mut shuffle: Vec<u64> = (0..first).collect();
    rng.shuffle(&mut shuffle);
    if first < total {
        let mut last: Vec<u64> = (first..total).collect();
        rng.shuffle(&mut last);
        shuffle.extend(last);
    }
    Ok(GptIndex {
        documents,
        samples,
        shuffle: Some(shuffle),
    })
}

/// The windows of `documents` read in order, once, unshuffled (stokehold's own order shuffles
/// them afterwards with the project's keyed permutation).
pub fn in_order(sizes: &[i32], documents: Range<u32>, seq_len: u64) -> Result<GptIndex> {
    let op = "read_tokens";
    check_seq_len(op, seq_len)?;
    let per_epoch = tokens_in(op, sizes, &documents)?;
    let documents: Vec<u32> = documents.collect();
    let samples = if per_epoch <= seq_len {
        vec![[0, 0]] // not one whole window: no samples
    } else {
        sample_index(sizes, &documents, seq_len, per_epoch)?
    };
    Ok(GptIndex {
        documents,
        samples,
        shuffle: None,
    })
}

/// `_build_document_index` for one run of `epochs`: the documents repeated, then shuffled.
fn document_index(docs: &[u32], epochs: u64, rng: &mut RandomState) -> Result<Vec<u32>> {
    let n = (docs.len() as u64)
        .checked_mul(epochs)
        .filter(|&n| n <= i32::MAX as u64)
        .ok_or_else(|| {
            Error::invalid(format!(
                "read_tokens(order=megatron): {} documents x {epochs} epochs pass megatron's \
                 int32 document index",
                docs.len()
            ))
        })?;
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..epochs {
        out.extend_from_slice(docs);
    }
    rng.shuffle(&mut out);
    Ok(out)
}

/// `build_sample_idx` (helpers.cpp) with `drop_last_partial_sequence` and one extra token.
fn sample_index(
    sizes: &[i32],
    documents: &[u32],
    seq_len: u64,
    tokens: u64,
) -> Result<Vec<[u64; 2]>> {
    let num_samples = (tokens - 1) / seq_len;
    let mut out = Vec::with_capacity(num_samples as usize + 1);
    out.push([0, 0]);
    let (mut at, mut offset) = (0usize, 0i64);
    let window = seq_len as i64 + 1;
    while (out.len() as u64) <= num_samples {
        let mut remaining = window;
        while remaining != 0 {
            let doc_len = sizes[documents[at] as usize].max(0) as i64 - offset;
            remaining -= doc_len;
            if remaining <= 0 {
                offset += remaining + doc_len - 1;
                remaining = 0;
            } else {
                if at + 1 == documents.len() {
                    // The token count says this cannot happen; a file that changed under us can.
                    return Err(Error::invalid(
                        "read_tokens: the documents ran out inside a sample (the token count \
                         and the sequence lengths disagree)",
                    ));
                }
                at += 1;
                offset = 0;
            }
        }
        out.push([at as u64, offset as u64]);
    }
    Ok(out)
}

/// `build_blending_indices` (helpers.cpp): for each of `size` samples, the source whose share
/// lags its weight most, and that source's next sample. `weights` are normalized as megatron's
/// `normalize` does (numpy's pairwise sum, so that the quotients are bit-equal).
pub fn blend(weights: &[f64], size: u64) -> Result<Vec<(u16, u64)>> {
    if weights.is_empty()
        || weights.len() > 32767
        || weights.iter().any(|w| w.is_nan() || *w <= 0.0)
    {
        return Err(Error::invalid(format!(
            "read_tokens(order=megatron): blend weights must be 1 ..= 32767 positive numbers, got {weights:?}"
        )));
    }
    let total = pairwise_sum(weights);
    let w: Vec<f64> = weights.iter().map(|x| x / total).collect();
    let mut taken = vec![0u64; w.len()];
    let mut out = Vec::with_capacity(size as usize);
    for i in 0..size {
        let x = (i as f64).max(1.0);
        let (mut best, mut best_err) = (0, w[0] * x - taken[0] as f64);
        for (d, wd) in w.iter().enumerate().skip(1) {
            let err = wd * x - taken[d] as f64;
            if err > best_err {
                (best, best_err) = (d, err);
            }
        }
        out.push((best as u16, taken[best]));
        taken[best] += 1;
    }
    Ok(out)
}

/// numpy's `pairwise_sum` for float64 (`numpy.sum` of a contiguous array).
fn pairwise_sum(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        return a.iter().fold(0.0, |s, x| s + x);
    }
    if n <= 128 {
        let mut r: [f64; 8] = a[..8].try_into().unwrap();
        let mut i = 8;
        while i < n - n % 8 {
            for k in 0..8 {
                r[k] += a[i + k];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for x in &a[i..] {
            res += x;
        }
        return res;
    }
    let mut n2 = n / 2;
    n2 -= n2 % 8;
    pairwise_sum(&a[..n2]) + pairwise_sum(&a[n2..])
}
