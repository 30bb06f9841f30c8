//! [`WebDataset`]: tar shards read at random through the sample list their headers give.

use std::path::{Path, PathBuf};

use stokehold_core::{Error, Example, MapDataset, Result, Tensor};

use super::scan::{scan, Sample};

/// WebDataset tar shards with random access: `len`, `get(i)`, global shuffle, checkpoints.
///
/// Each local shard is memory-mapped and its headers are read once when it is opened (data is
/// skipped, not read), giving the list of samples; `get(i)` then reads only sample `i`'s members.
/// A shard given as a URL is fetched whole when opened to read its headers (there is no index
/// sidecar yet), then read by range. Each element holds `__key__` and `__url__` (the shard's path
/// as given) as bytes, and one bytes feature per member, named by its extension, as webdataset
/// yields them. Samples that lack a member hold fewer features (batch them after a map that fills
/// them in, or select the features every sample has).
pub struct WebDataset {
    files: Vec<PathBuf>,
    objects: Vec<crate::storage::Object>,
    samples: Vec<Vec<Sample>>,
    /// `cum[k]` = samples in shards before `k`; one more entry than shards.
    cum: Vec<u64>,
}

impl WebDataset {
    /// Opens the tar shards `files` (in order), reading each one's headers.
    pub fn open<P: AsRef<Path>>(files: &[P]) -> Result<Self> {
        let mut ds = WebDataset {
            files: Vec::new(),
            objects: Vec::new(),
            samples: Vec::new(),
            cum: vec![0],
        };
        for f in files {
            let f = f.as_ref();
            let o = crate::storage::open_object(f)?;
            let samples = if o.is_remote() {
                scan(f, &o.read_all()?)?
            } else {
                scan(f, &o.read_range(0..o.size())?)?
            };
            ds.cum.push(ds.cum.last().unwrap() + samples.len() as u64);
            ds.samples.push(samples);
            ds.objects.push(o);
            ds.files.push(f.to_path_buf());
        }
        Ok(ds)
    }

    /// The samples of shard `k` (key and members).
    pub fn samples(&self, k: usize) -> &[Sample] {
        &self.samples[k]
    }
}

fn bytes_scalar(b: &[u8]) -> Tensor {
    Tensor::strings(&[b])
        .reshape(vec![])
        .expect("one string is a scalar")
}

impl MapDataset for WebDataset {
    fn len(&self) -> u64 {
        *self.cum.last().unwrap()
    }

    fn get(&self, index: u64) -> Result<Example> {
        let n = self.len();
        if n == 0 {
            return Err(Error::OutOfRange {
                index,
                len: 0,
                what: self.name(),
            });
        }
        let i = index % n;
        let k = self.cum.partition_point(|&c| c <= i) - 1;
        let s = &self.samples[k][(i - self.cum[k]) as usize];
        let url = self.files[k].to_string_lossy();
        let mut e = Example::new()
            .with("__key__", bytes_scalar(s.key.as_bytes()))
            .with("__url__", bytes_scalar(url.as_bytes()));
        for m in &s.members {
            let b = self.objects[k].read_range(m.offset..m.offset + m.len)?;
            e = e.with(&m.ext, bytes_scalar(&b));
        }
        Ok(e)
    }

    fn name(&self) -> String {
        match self.files.as_slice() {
            [one] => format!("webdataset({})", one.display()),
            many => format!("webdataset({} shards)", many.len()),
        }
    }
}
