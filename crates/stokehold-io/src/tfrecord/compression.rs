//! Compression of TFRecord files: none, GZIP or ZLIB, as TensorFlow writes them.
//!
//! The whole file is one compressed stream (not one per record), so offsets in a compressed file
//! count bytes of the decompressed stream. The one rule for what a file is compressed with when
//! nobody says ("auto"): its name ([`Compression::from_path`]; [`Compression::resolve`] for a
//! list of files), used by Python's `TFRecordDataset` / `read_tfrecord` and every CLI verb that
//! reads TFRecords. Spellings parse through [`Choice`] (`"GZIP"`, `"gzip"`, `"none"`, `""`).
//! A file that does not decompress from its first byte on says what it looks like instead
//! ([`crate::sniff`]): an uncompressed TFRecord file named `.gz` gets a hint that
//! says how to read it.

use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::str::FromStr;

use flate2::read::{MultiGzDecoder, ZlibDecoder};
use flate2::write::{GzEncoder, ZlibEncoder};
use stokehold_core::choice::Choice;
use stokehold_core::{Error, Result};

/// Read buffer size: large enough that syscalls are amortised over many records.
const IO_BUF: usize = 1 << 20;

/// Compression of a whole TFRecord file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Plain records (the default, and the only kind that allows random access).
    #[default]
    None,
    /// A gzip stream (`compression_type="GZIP"`).
    Gzip,
    /// A zlib stream (`compression_type="ZLIB"`).
    Zlib,
}

impl std::fmt::Display for Compression {
    /// For people: `uncompressed`, `GZIP`, `ZLIB` (tf.data's names).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Compression::None => "uncompressed",
            Compression::Gzip => "GZIP",
            Compression::Zlib => "ZLIB",
        })
    }
}

impl Compression {
    /// TensorFlow's name: `""`, `"GZIP"` or `"ZLIB"`.
    pub fn tf_name(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => "GZIP",
            Compression::Zlib => "ZLIB",
        }
    }

    /// A guess from the file name: `.gz` is GZIP, `.zz`/`.zlib` is ZLIB, anything else none.
    pub fn from_path(path: &Path) -> Compression {
        match path.extension().and_then(|e| e.to_str()) {
            Some("gz" | "gzip") => Compression::Gzip,
            Some("zz" | "zlib") => Compression::Zlib,
            _ => Compression::None,
        }
    }

    /// Opens `path` for reading, decompressing as this compression says.
    pub fn open(self, path: &Path) -> Result<Box<dyn Read + Send>> {
        let f = crate::storage::reader(path, 0)?;
        Ok(self.wrap_reader(BufReader::with_capacity(IO_BUF, f)))
    }

    /// Wraps a reader of compressed bytes. A stream that fails to decompress from its first
    /// byte on says what it looks like instead ([`not_compressed_hint`]).
    pub fn wrap_reader<R: Read + Send + 'static>(self, r: R) -> Box<dyn Read + Send> {
        let raw = Head {
            inner: r,
            head: Vec::with_capacity(HEAD_BYTES),
        };
        match self {
            Compression::None => Box::new(raw.inner),
            // TensorFlow writes one gzip member; a multi-member reader also accepts `cat a.gz b.gz`.
            Compression::Gzip => Box::new(Explained {
                decoder: MultiGzDecoder::new(raw),
                kind: self,
                out: 0,
            }),
            Compression::Zlib => Box::new(Explained {
                decoder: ZlibDecoder::new(raw),
                kind: self,
                out: 0,
            }),
        }
    }

    /// Wraps a writer so that what is written to it ends up compressed in `w`.
    pub fn wrap_writer<W: Write + Send + 'static>(self, w: W) -> Box<dyn FinishWrite> {
        let level = flate2::Compression::default();
        match self {
            Compression::None => Box::new(BufWriter::with_capacity(IO_BUF, w)),
            Compression::Gzip => {
                Box::new(GzEncoder::new(BufWriter::with_capacity(IO_BUF, w), level))
            }
            Compression::Zlib => {
                Box::new(ZlibEncoder::new(BufWriter::with_capacity(IO_BUF, w), level))
            }
        }
    }
}

impl Choice for Compression {
    const ARG: &'static str = "compression";
    /// TensorFlow's names in any case (`"GZIP"`), `"none"`, and `""` as tf.data spells none.
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("none", Compression::None),
        ("gzip", Compression::Gzip),
        ("zlib", Compression::Zlib),
        ("", Compression::None),
    ];
    const IGNORE_CASE: bool = true;
}

impl FromStr for Compression {
    type Err = Error;

    /// [`Choice::parse`] for callers that have no op name (`"TFRecord"` stands in for it).
    fn from_str(s: &str) -> Result<Self> {
        <Compression as Choice>::parse("TFRecord", s)
    }
}

impl Compression {
    /// The compression of `files` spelled `spelling` for `op`: `"auto"` guesses each file's
    /// from its name ([`Compression::from_path`]) and refuses files that look differently
    /// compressed (one reader options value covers them all); anything else parses as a
    /// [`Choice`] (`"GZIP"`, `"none"`, ...).
    pub fn resolve<P: AsRef<Path>>(op: &str, spelling: &str, files: &[P]) -> Result<Compression> {
        if spelling != "auto" {
            return <Compression as Choice>::parse(op, spelling);
        }
        let Some(first) = files.first().map(AsRef::as_ref) else {
            return Ok(Compression::None);
        };
        let guess = Compression::from_path(first);
        if let Some(f) = files
            .iter()
            .map(AsRef::as_ref)
            .find(|f| Compression::from_path(f) != guess)
        {
            return Err(Error::invalid(format!(
                "{op}(compression='auto'): {} and {} look differently compressed ({} and {}, \
                 from their names); read them separately or say which",
                first.display(),
                f.display(),
                guess,
                Compression::from_path(f)
            )));
        }
        Ok(guess)
    }
}

/// The first bytes of a compressed file as they went by, kept so that a decoder that fails at
/// once can say what the file looks like.
struct Head<R> {
    inner: R,
    head: Vec<u8>,
}

/// How many first bytes [`Head`] keeps: what [`crate::sniff::guess`] looks at.
const HEAD_BYTES: usize = crate::sniff::HEAD_LEN;

impl<R: Read> Read for Head<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let want = HEAD_BYTES.saturating_sub(self.head.len()).min(n);
        self.head.extend_from_slice(&buf[..want]);
        Ok(n)
    }
}

/// A decoder that, failing before it produced a byte, adds what the file looks like and what to
/// do ([`not_compressed_hint`]) to its error.
struct Explained<D> {
    decoder: D,
    kind: Compression,
    out: u64,
}

/// The raw bytes a decoder has seen ([`Head`]).
trait RawHead {
    fn head(&self) -> &[u8];
}

impl<R: Read> RawHead for MultiGzDecoder<Head<R>> {
    fn head(&self) -> &[u8] {
        &self.get_ref().head
    }
}

impl<R: Read> RawHead for ZlibDecoder<Head<R>> {
    fn head(&self) -> &[u8] {
        &self.get_ref().head
    }
}

impl<D: Read + RawHead> Read for Explained<D> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.decoder.read(buf) {
            Ok(n) => {
                self.out += n as u64;
                Ok(n)
            }
            Err(e)
                if self.out == 0
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData
                    ) =>
            {
                let hint = not_compressed_hint(self.kind, self.decoder.head());
                Err(std::io::Error::new(e.kind(), format!("{e} ({hint})")))
            }
            Err(e) => Err(e),
        }
    }
}

/// Why a file read as `kind` did not decompress from its first byte, and what to do: the file
/// is not `kind`-compressed; it looks like [`crate::sniff::guess`] says, and the way to read it
/// follows from that (another compression, or another reader), never a guess that fails too.
pub fn not_compressed_hint(kind: Compression, head: &[u8]) -> String {
    use crate::sniff;
    let name = match kind {
        Compression::Gzip => "gzip",
        Compression::Zlib => "zlib",
        Compression::None => "compressed",
    };
    // Every reader's "auto" goes by the name, so a name is the fix that works everywhere
    // (`stokehold convert` and `write` have no flag for their inputs' compression).
    let (what, todo) = if sniff::is_tfrecord_frame(head) {
        let todo = format!(
            "read it uncompressed: drop {} from its name, or pass compression='' in Python or \
             --compression none to stokehold inspect, verify and bench",
            suffixes(kind)
        );
        ("an uncompressed TFRecord file".to_string(), todo)
    } else if let Some(hint) = compressed_hint(head) {
        return format!("the file is not {name}-compressed: it looks like {hint}");
    } else {
        let what = sniff::guess("", head).map_or("none of the formats stokehold knows", |g| g.what);
        (what.to_string(), "it is not a TFRecord file".to_string())
    };
    format!("the file is not {name}-compressed: it looks like {what}; {todo}")
}

/// When `head` starts a gzip or zlib stream: what it looks like and how to read it ("a
/// gzip-compressed file; read it as GZIP: end its name in .gz, ..."). For a file read
/// uncompressed whose first record does not frame, and for one read as the other compression.
pub fn compressed_hint(head: &[u8]) -> Option<String> {
    let c = if head.starts_with(&crate::sniff::GZIP_MAGIC) {
        Compression::Gzip
    } else if crate::sniff::is_zlib(head) {
        Compression::Zlib
    } else {
        return None;
    };
    let lower = c.tf_name().to_ascii_lowercase();
    Some(format!(
        "a {lower}-compressed file; read it as {c}: end its name in {}, or pass \
         compression='{c}' in Python or --compression {lower} to stokehold inspect, verify and \
         bench",
        suffixes(c)
    ))
}

/// The name endings [`Compression::from_path`] reads as `c`.
fn suffixes(c: Compression) -> &'static str {
    match c {
        Compression::Gzip => ".gz",
        Compression::Zlib => ".zz or .zlib",
        Compression::None => ".gz, .zz or .zlib",
    }
}

/// A writer whose stream must be finished explicitly (compressors write a trailer).
pub trait FinishWrite: Write + Send {
    /// Writes any trailer and flushes everything to the underlying writer.
    fn finish(self: Box<Self>) -> std::io::Result<()>;
}

impl<W: Write + Send> FinishWrite for BufWriter<W> {
    fn finish(mut self: Box<Self>) -> std::io::Result<()> {
        self.flush()
    }
}

impl<W: Write + Send> FinishWrite for GzEncoder<BufWriter<W>> {
    fn finish(self: Box<Self>) -> std::io::Result<()> {
        (*self).finish()?.flush()
    }
}

impl<W: Write + Send> FinishWrite for ZlibEncoder<BufWriter<W>> {
    fn finish(self: Box<Self>) -> std::io::Result<()> {
        (*self).finish()?.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_parse_in_any_case_through_choice() {
        for (s, c) in [
            ("GZIP", Compression::Gzip),
            ("zlib", Compression::Zlib),
            ("", Compression::None),
            ("None", Compression::None),
        ] {
            assert_eq!(s.parse::<Compression>().unwrap(), c);
        }
        let e = Compression::resolve("TFRecordDataset", "bz2", &["a"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "TFRecordDataset(compression='bz2'): must be one of 'none', 'gzip', 'zlib', ''"
            ),
            "{e}"
        );
    }

    #[test]
    fn auto_goes_by_the_names_and_refuses_a_mix() {
        assert_eq!(
            Compression::resolve("op", "auto", &["a.gz", "b.gz"]).unwrap(),
            Compression::Gzip
        );
        assert_eq!(
            Compression::resolve("op", "auto", &["a.zz"]).unwrap(),
            Compression::Zlib
        );
        assert_eq!(
            Compression::resolve::<&str>("op", "auto", &[]).unwrap(),
            Compression::None
        );
        let e = Compression::resolve("op", "auto", &["a.gz", "b.tfrecord"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a.gz and b.tfrecord look differently compressed"),
            "{e}"
        );
    }

    #[test]
    fn a_stream_that_is_not_compressed_says_what_it_looks_like() {
        let mut plain = Vec::new();
        let len = 3u64.to_le_bytes();
        plain.extend_from_slice(&len);
        plain.extend_from_slice(&crate::tfrecord::crc::masked_crc(&len).to_le_bytes());
        plain.extend_from_slice(b"abc\0\0\0\0");
        let mut out = Vec::new();
        let e = Compression::Gzip
            .wrap_reader(std::io::Cursor::new(plain.clone()))
            .read_to_end(&mut out)
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("not gzip-compressed: it looks like an uncompressed TFRecord file"),
            "{text}"
        );
        // A real gzip stream read as ZLIB: the hint names GZIP.
        let mut enc = GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&plain).unwrap();
        let gz = enc.finish().unwrap();
        let e = Compression::Zlib
            .wrap_reader(std::io::Cursor::new(gz.clone()))
            .read_to_end(&mut out)
            .unwrap_err();
        assert!(e.to_string().contains("compression='GZIP'"), "{e}");
        // A good stream decodes as before.
        out.clear();
        Compression::Gzip
            .wrap_reader(std::io::Cursor::new(gz))
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, plain);
    }
}
