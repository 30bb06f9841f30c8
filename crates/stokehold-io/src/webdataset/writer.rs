//! Writing a dataset as WebDataset tar shards that the `webdataset` package reads
//! ([`write_webdataset`]), as its `ShardWriter` writes them.
//!
//! Each element is one sample: its `__key__` (a bytes scalar; else its position in the dataset,
//! `%09d`) and one member `<key>.<feature>` per other feature (features named `__...__` are left
//! out). A feature's name is the member's extension, and says how a value that is not bytes is
//! encoded, as webdataset's default encoders do:
//!
//! * a bytes scalar: as is, whatever the extension;
//! * `cls`, `cls2`, `class`, `count`, `index`, `inx`, `id`: an integer scalar as decimal text
//!   (Python's `str`);
//! * `txt`, `text`, `transcript`: a numeric scalar as text (a float as Python's `repr`, a bool as
//!   JSON's `true` / `false`);
//! * `npy`: any numeric tensor as a `.npy` file (`np.save`);
//! * `json`, `jsn`: a numeric tensor as JSON (`json.dumps`: a number, or nested lists).
//!
//! As webdataset, the rule comes from the extension's last dot-part. Anything else is an error
//! naming the element, the feature and what to do. A shard is complete when it holds `maxcount`
//! samples or `maxsize` bytes of member data (checked before each sample, as `ShardWriter`), and
//! is written under a temporary name and renamed into place ([`crate::atomic::TempFile`]): a
//! shard that has its final name is whole.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use stokehold_core::{DType, Dataset, Error, Example, Result, Tensor, Value};

use super::scan::key_and_ext;

/// Where shards end: webdataset's `ShardWriter` defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    /// Samples per shard at most (default 100,000).
    pub maxcount: u64,
    /// Member bytes per shard at most (default 3e9); a sample bigger than this is a shard alone.
    pub maxsize: u64,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            maxcount: 100_000,
            maxsize: 3_000_000_000,
        }
    }
}

/// Progress of a write: samples and member bytes so far, shards completed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteProgress {
    /// Samples written.
    pub samples: u64,
    /// Member data bytes written.
    pub bytes: u64,
    /// Shards completed.
    pub shards: u64,
}

/// The shard path `pattern` gives shard `k`: its one `%d` / `%0Nd` replaced by `k` (as
/// webdataset's `ShardWriter(pattern % k)`).
pub fn shard_name(pattern: &str, k: u64) -> Result<String> {
    let refuse = || {
        Error::invalid(format!(
            "write_webdataset(pattern={pattern:?}): must hold one %d or %0Nd for the shard number \
             (as webdataset's ShardWriter: 'out/shard-%06d.tar')"
        ))
    };
    let at = pattern.find('%').ok_or_else(refuse)?;
    let spec = &pattern[at + 1..];
    let digits = spec.bytes().take_while(u8::is_ascii_digit).count();
    if spec.as_bytes().get(digits) != Some(&b'd') || spec[digits + 1..].contains('%') {
        return Err(refuse());
    }
    let width: usize = match &spec[..digits] {
        "" => 0,
        w => w.parse().ok().filter(|&w| w <= 20).ok_or_else(refuse)?,
    };
    let num = if spec.starts_with('0') {
        format!("{k:0width$}")
    } else {
        format!("{k:width$}")
    };
    Ok(format!("{}{num}{}", &pattern[..at], &spec[digits + 1..]))
}

/// Writes `ds` as tar shards named by `pattern` ([`shard_name`]; shard numbers from 0), each
/// atomically; `progress` is called after each sample. Returns the shards' paths. An empty
/// dataset is one empty shard (as `ShardWriter` leaves one).
pub fn write_webdataset(
    ds: &Dataset,
    pattern: &str,
    opts: WriteOptions,
    progress: &mut dyn FnMut(&WriteProgress),
) -> Result<Vec<PathBuf>> {
    if opts.maxcount == 0 || opts.maxsize == 0 {
        return Err(Error::invalid(format!(
            "write_webdataset(maxcount={}, maxsize={}): both must be >= 1",
            opts.maxcount, opts.maxsize
        )));
    }
    shard_name(pattern, 0)?;
    let mut it = ds.iter(0)?;
    let mut p = WriteProgress::default();
    let mut done = Vec::new();
    let mut shard: Option<Shard> = None;
    let mut in_shard = (0u64, 0u64);
    let mut index = 0u64;
    while let Some(e) = it.next()? {
        let members = sample_members(&e, index)?;
        if shard.is_some() && (in_shard.0 >= opts.maxcount || in_shard.1 >= opts.maxsize) {
            done.push(shard.take().expect("checked").finish()?);
            p.shards += 1;
        }
        if shard.is_none() {
            shard = Some(Shard::create(&shard_name(pattern, done.len() as u64)?)?);
            in_shard = (0, 0);
        }
        let w = shard.as_mut().expect("set above");
        let mut size = 0u64;
        for (name, data) in &members {
            w.append(name, data)?;
            size += data.len() as u64;
        }
        in_shard = (in_shard.0 + 1, in_shard.1 + size);
        index += 1;
        p.samples += 1;
        p.bytes += size;
        progress(&p);
    }
    let last = match shard {
        Some(s) => s,
        None if done.is_empty() => Shard::create(&shard_name(pattern, 0)?)?,
        None => return Ok(done),
    };
    done.push(last.finish()?);
    p.shards += 1;
    progress(&p);
    Ok(done)
}

/// One shard being written under its temporary name.
struct Shard {
    tmp: crate::atomic::TempFile,
    tar: tar::Builder<BufWriter<File>>,
}

impl Shard {
    fn create(dest: &str) -> Result<Shard> {
        let dest = Path::new(dest);
        if let Some(dir) = dest.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let (tmp, file) = crate::atomic::TempFile::create(dest)?;
        let tar = tar::Builder::new(BufWriter::new(file));
        Ok(Shard { tmp, tar })
    }

    fn append(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o444);
        h.set_mtime(0);
        h.set_entry_type(tar::EntryType::Regular);
        self.tar
            .append_data(&mut h, name, data)
            .map_err(|e| Error::io(self.tmp.path(), e))
    }

    fn finish(self) -> Result<PathBuf> {
        let io = |e| Error::io(self.tmp.path(), e);
        let file = self
            .tar
            .into_inner()
            .map_err(io)?
            .into_inner()
            .map_err(|e| io(e.into_error()))?;
        self.tmp.commit(Some(file))
    }
}

/// The members of element `e` (the `index`-th written): `(name, data)` in feature order.
pub fn sample_members(e: &Example, index: u64) -> Result<Vec<(String, Vec<u8>)>> {
    let bad = |why: String| Error::schema("write_webdataset", format!("element {index}: {why}"));
    let key = match e.get("__key__") {
        Some(Value::Tensor(t)) if t.dtype() == DType::Bytes && t.len() == 1 => {
            String::from_utf8(t.string(0).unwrap_or_default().to_vec())
                .map_err(|_| bad("__key__ is not UTF-8".into()))?
        }
        Some(_) => return Err(bad("__key__ must be one bytes value".into())),
        None => format!("{index:09}"),
    };
    let mut out = Vec::new();
    for (name, v) in e.iter() {
        if name.starts_with("__") && name.ends_with("__") {
            continue;
        }
        let member = format!("{key}.{name}");
        // The reader must find this key and extension again.
        if key.is_empty() || key_and_ext(&member) != Some((&key, name)) {
            return Err(bad(format!(
                "member {member:?}: a key whose last path part holds a dot, or an empty key, \
                 would not read back as webdataset groups members"
            )));
        }
        let Value::Tensor(t) = v else {
            return Err(bad(format!(
                "feature {name:?} is ragged: write elements, not batches"
            )));
        };
        out.push((member, encode(t, name).map_err(bad)?));
    }
    Ok(out)
}

/// The bytes of value `t` as a member with extension `ext` (the rules in the module docs).
pub fn encode(t: &Tensor, ext: &str) -> std::result::Result<Vec<u8>, String> {
    let last = ext.rsplit('.').next().unwrap_or(ext).to_ascii_lowercase();
    if t.dtype() == DType::Bytes {
        return match (t.shape(), t.string(0)) {
            ([], Some(b)) => Ok(b.to_vec()),
            _ => Err(format!(
                "feature {ext:?}: bytes {:?} is not one value: give a bytes scalar",
                t.shape()
            )),
        };
    }
    let scalar_text = |ints_only: bool| -> std::result::Result<Vec<u8>, String> {
        if !t.shape().is_empty() {
            return Err(format!(
                "feature {ext:?}: {} {:?} is not a scalar: .{last} holds one value (name the \
                 feature npy or json for an array)",
                t.dtype(),
                t.shape()
            ));
        }
        let float = matches!(
            t.dtype(),
            DType::F16 | DType::BF16 | DType::F32 | DType::F64
        );
        if ints_only && (float || t.dtype() == DType::Bool) {
            return Err(format!(
                "feature {ext:?}: .{last} holds an integer, got {}",
                t.dtype()
            ));
        }
        Ok(json_text(t)?.into_bytes())
    };
    match last.as_str() {
        "cls" | "cls2" | "class" | "count" | "index" | "inx" | "id" => scalar_text(true),
        "txt" | "text" | "transcript" => scalar_text(false),
        "npy" => {
            let mut out = crate::table::npy::encode_header(t.dtype(), t.shape(), 0)
                .map_err(|e| e.to_string())?;
            out.extend_from_slice(t.data());
            Ok(out)
        }
        "json" | "jsn" => Ok(json_text(t)?.into_bytes()),
        _ => Err(format!(
            "feature {ext:?}: a {} {:?} value has no encoding for .{last}: give a bytes scalar, or \
             name the feature with an extension that says how (npy, json, cls, txt)",
            t.dtype(),
            t.shape()
        )),
    }
}

/// A numeric tensor as Python's `json.dumps` writes it (`str` for a scalar but for bools, which
/// are `True` / `False` in Python's `str` and `true` / `false` in JSON: JSON's are used).
fn json_text(t: &Tensor) -> std::result::Result<String, String> {
    let f = stokehold_core::cast::cast(t, DType::F64).map_err(|e| e.to_string())?;
    let vals = f.to_vec::<f64>().map_err(|e| e.to_string())?;
    let float = matches!(
        t.dtype(),
        DType::F16 | DType::BF16 | DType::F32 | DType::F64
    );
    let ints = if float {
        Vec::new()
    } else if t.dtype() == DType::U64 {
        let u = stokehold_core::cast::cast(t, DType::U64).map_err(|e| e.to_string())?;
        u.to_vec::<u64>()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|v| v.to_string())
            .collect()
    } else {
        let i = stokehold_core::cast::cast(t, DType::I64).map_err(|e| e.to_string())?;
        i.to_vec::<i64>()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|v| match t.dtype() {
                DType::Bool => (if *v != 0 { "true" } else { "false" }).to_string(),
                _ => v.to_string(),
            })
            .collect()
    };
    let item = |k: usize| -> std::result::Result<String, String> {
        if !float {
            return Ok(ints[k].clone());
        }
        let v = vals[k];
        if !v.is_finite() {
            return Ok(match v {
                v if v.is_nan() => "NaN",
                v if v > 0.0 => "Infinity",
                _ => "-Infinity",
            }
            .to_string());
        }
        // Python's repr: shortest round trip, with ".0" on integral values.
        let s = format!("{v:?}");
        Ok(s)
    };
    fn nest(
        shape: &[usize],
        at: &mut usize,
        item: &dyn Fn(usize) -> std::result::Result<String, String>,
    ) -> std::result::Result<String, String> {
        match shape.split_first() {
            None => {
                let s = item(*at)?;
                *at += 1;
                Ok(s)
            }
            Some((&n, rest)) => {
                let parts: std::result::Result<Vec<String>, String> =
                    (0..n).map(|_| nest(rest, at, item)).collect();
                Ok(format!("[{}]", parts?.join(", ")))
            }
        }
    }
    nest(t.shape(), &mut 0, &item)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_number_shards_as_printf() {
        assert_eq!(shard_name("a/s-%06d.tar", 12).unwrap(), "a/s-000012.tar");
        assert_eq!(shard_name("s%d.tar", 3).unwrap(), "s3.tar");
        for bad in ["s.tar", "s-%s.tar", "%d-%d.tar", "%06x"] {
            let err = shard_name(bad, 0).unwrap_err().to_string();
            assert!(err.contains("%d"), "{bad}: {err}");
        }
    }

    #[test]
    fn values_encode_as_webdatasets_default_encoders() {
        let t = |v: f64| Tensor::scalar(v);
        assert_eq!(encode(&Tensor::scalar(7i64), "cls").unwrap(), b"7");
        assert_eq!(encode(&t(1.0), "txt").unwrap(), b"1.0");
        assert_eq!(encode(&t(0.1), "x.json").unwrap(), b"0.1");
        let m = Tensor::from_vec(vec![2, 2], vec![1i32, 2, 3, 4]).unwrap();
        assert_eq!(encode(&m, "json").unwrap(), b"[[1, 2], [3, 4]]");
        assert_eq!(encode(&Tensor::scalar(true), "json").unwrap(), b"true");
        let npy = encode(&m, "npy").unwrap();
        assert!(npy.starts_with(b"\x93NUMPY") && npy.len() == 128 + 16);
        assert!(encode(&t(1.5), "cls").unwrap_err().contains("integer"));
        assert!(encode(&m, "jpg")
            .unwrap_err()
            .contains("npy, json, cls, txt"));
    }
}
