//! `TokenDataset`: windows of `seq_len + 1` tokens over token files, random access.

use std::ops::Range;
use std::path::Path;

use stokehold_core::{DType, Error, Example, MapDataset, Result, Tensor};

use super::file::TokenFile;
use super::gpt::{self, GptIndex};

/// The feature every element has: `seq_len + 1` token ids as int64 (inputs are `[:-1]`,
/// labels `[1:]`).
pub const FEATURE: &str = "tokens";

/// One file's windows.
#[derive(Debug)]
struct Part {
    file: TokenFile,
    index: GptIndex,
}

#[derive(Debug)]
enum Layout {
    /// The parts' samples one after another (`cum[k]`: the first sample of part `k`).
    Concat(Vec<u64>),
    /// megatron's `BlendedDataset`: (part, sample of the part) per sample.
    Blend(Vec<(u16, u64)>),
}

/// A Megatron-ordered source of a blend: a file, its documents (sequence ids) and the number of
/// samples asked of it (`None`: one epoch).
#[derive(Clone, Debug)]
pub struct MegatronSource<'a> {
    /// Megatron prefix, `.bin` or `.idx`, or a flat file.
    pub path: &'a Path,
    /// The split's sequences (`None`: all).
    pub documents: Option<Range<u32>>,
    /// GPTDataset's `num_samples`.
    pub num_samples: Option<u64>,
}

/// Windows of `seq_len + 1` tokens cut from token files (one token shared between consecutive
/// windows, as megatron's GPTDataset cuts them), in file order ([`TokenDataset::open`]) or in
/// megatron-core's GPTDataset / BlendedDataset order ([`TokenDataset::megatron`]).
#[derive(Debug)]
pub struct TokenDataset {
    parts: Vec<Part>,
    layout: Layout,
    seq_len: u64,
    name: String,
}

fn names(paths: &[&Path]) -> String {
    match paths {
        [one] => one.display().to_string(),
        many => format!("{} files", many.len()),
    }
}

impl TokenDataset {
    /// Every window of every file, file after file, in order (stokehold's order shuffles this
    /// with [`Dataset::shuffle`](stokehold_core::Dataset::shuffle)). `dtype` is the token type
    /// of headerless flat files.
    pub fn open(paths: &[&Path], seq_len: u64, dtype: Option<DType>) -> Result<TokenDataset> {
        let mut parts = Vec::with_capacity(paths.len());
        let mut cum = vec![0u64];
        for p in paths {
            let file = TokenFile::open(p, dtype)?;
            let n = file.sequence_lengths().len() as u32;
            let index = gpt::in_order(file.sequence_lengths(), 0..n, seq_len)
                .map_err(|e| Error::invalid(format!("{}: {e}", p.display())))?;
            cum.push(cum.last().unwrap() + index.len());
            parts.push(Part { file, index });
        }
        Ok(TokenDataset {
            parts,
            layout: Layout::Concat(cum),
            seq_len,
            name: format!("read_tokens({}, seq_len={seq_len})", names(paths)),
        })
    }

    /// megatron-core's order: one source is a `GPTDataset` (`seed`, `seq_len`, its documents and
    /// `num_samples`), several are a `BlendedDataset` of such with `weights` and `size` samples.
    pub fn megatron(
        sources: &[MegatronSource],
        seq_len: u64,
        seed: u32,
        blend: Option<(&[f64], u64)>,
        dtype: Option<DType>,
    ) -> Result<TokenDataset> {
        let mut parts = Vec::with_capacity(sources.len());
        for s in sources {
            let file = TokenFile::open(s.path, dtype)?;
            let n = file.sequence_lengths().len() as u32;
            let docs = s.documents.clone().unwrap_or(0..n);
            let index = gpt::megatron(file.sequence_lengths(), docs, seq_len, seed, s.num_samples)
                .map_err(|e| Error::invalid(format!("{}: {e}", s.path.display())))?;
            parts.push(Part { file, index });
        }
        let paths: Vec<&Path> = sources.iter().map(|s| s.path).collect();
        let layout = match (blend, parts.len()) {
            (None, 1) => Layout::Concat(vec![0, parts[0].index.len()]),
            (Some((weights, size)), k) if weights.len() == k => {
                let order = gpt::blend(weights, size)?;
                if let Some((d, s)) = order
                    .iter()
                    .find(|(d, s)| *s >= parts[*d as usize].index.len())
                {
                    return Err(Error::invalid(format!(
                        "read_tokens(order=megatron): the blend asks for sample {s} of {}, which has {}; \
                         give it a larger num_samples",
                        paths[*d as usize].display(), parts[*d as usize].index.len()
                    )));
                }
                Layout::Blend(order)
            }
            _ => {
                return Err(Error::invalid(format!(
                    "read_tokens(order=megatron): {} files need one weight each and a size",
                    parts.len()
                )))
            }
        };
        Ok(TokenDataset {
            parts,
            layout,
            seq_len,
            name: format!(
                "read_tokens({}, seq_len={seq_len}, order=megatron(seed={seed}))",
                names(&paths)
            ),
        })
    }

    /// Tokens per element (`seq_len + 1`).
    pub fn window(&self) -> usize {
        self.seq_len as usize + 1
    }

    /// The opened files.
    pub fn files(&self) -> impl Iterator<Item = &TokenFile> {
        self.parts.iter().map(|p| &p.file)
    }

    /// Appends the tokens of sample `i` (< len) to `out`.
    fn read(&self, i: u64, out: &mut Vec<i64>) -> Result<()> {
        let (k, s) = match &self.layout {
            Layout::Concat(cum) => stokehold_core::checked::locate(cum, i),
            Layout::Blend(order) => (order[i as usize].0 as usize, order[i as usize].1),
        };
        let Part { file, index } = &self.parts[k];
        let s = index.sample(s) as usize;
        let ([beg, beg_off], [end, end_off]) = (index.samples[s], index.samples[s + 1]);
        for pos in beg..=end {
            let seq = index.documents[pos as usize] as usize;
            let offset = if pos == beg { beg_off } else { 0 };
            let stop = if pos < end {
                file.sequence_lengths()[seq].max(0) as u64
            } else {
                end_off + 1
            };
            file.read(seq, offset, stop - offset, out)?;
        }
        debug_assert_eq!(out.len() % self.window(), 0);
        Ok(())
    }

    fn check(&self, index: u64) -> Result<u64> {
        match self.len() {
            0 => Err(Error::OutOfRange {
                index,
                len: 0,
                what: self.name(),
            }),
            n => Ok(index % n),
        }
    }
}

impl MapDataset for TokenDataset {
    fn len(&self) -> u64 {
        match &self.layout {
            Layout::Concat(cum) => *cum.last().unwrap(),
            Layout::Blend(order) => order.len() as u64,
        }
    }

    fn get(&self, index: u64) -> Result<Example> {
        let mut out = Vec::with_capacity(self.window());
        self.read(self.check(index)?, &mut out)?;
        Ok(Example::new().with(FEATURE, Tensor::from_vec(vec![self.window()], out)?))
    }

    fn get_batch(&self, indices: &[u64]) -> Result<Option<Example>> {
        let mut out = Vec::with_capacity(self.window() * indices.len());
        for &i in indices {
            self.read(self.check(i)?, &mut out)?;
        }
        let t = Tensor::from_vec(vec![indices.len(), self.window()], out)?;
        Ok(Some(Example::new().with(FEATURE, t)))
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}
