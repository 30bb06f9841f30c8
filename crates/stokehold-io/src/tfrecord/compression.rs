//! Compression of TFRecord files: none, GZIP or ZLIB, as TensorFlow writes them.
//!
//! The whole file is one compressed stream (not one per record), so offsets in a compressed file
//! count bytes of the decompressed stream.

use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::str::FromStr;

use flate2::read::{MultiGzDecoder, ZlibDecoder};
use flate2::write::{GzEncoder, ZlibEncoder};
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

    /// Wraps a reader of compressed bytes.
    pub fn wrap_reader<R: Read + Send + 'static>(self, r: R) -> Box<dyn Read + Send> {
        match self {
            Compression::None => Box::new(r),
            // TensorFlow writes one gzip member; a multi-member reader also accepts `cat a.gz b.gz`.
            Compression::Gzip => Box::new(MultiGzDecoder::new(r)),
            Compression::Zlib => Box::new(ZlibDecoder::new(r)),
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

impl FromStr for Compression {
    type Err = Error;

    /// Accepts TensorFlow's names (`""`, `"GZIP"`, `"ZLIB"`) in any case, and `"none"`.
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "" | "none" => Ok(Compression::None),
            "gzip" | "gz" => Ok(Compression::Gzip),
            "zlib" => Ok(Compression::Zlib),
            _ => Err(Error::invalid(format!(
                "unknown TFRecord compression {s:?}; expected \"\", \"NONE\", \"GZIP\" or \"ZLIB\""
            ))),
        }
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
