//! What a file looks like, from its first bytes and its name, and what reads it: for errors that
//! find one kind of file where another was expected (a TFRecord folder given to `open_shards`, a
//! `.npy` file given to `load_audio`, a file `stokehold inspect` / `verify` find no TFRecord
//! frame in, a file named `.gz` that is not gzip). The one place that tells kinds of file apart:
//! a guess names the kind and the stokehold call that reads it; nothing here decides how a file
//! is read.
//!
//! ```
//! use stokehold_io::sniff::guess;
//! let g = guess("x.npy", b"\x93NUMPY\x01\x00").unwrap();
//! assert_eq!(g.what, "a NumPy .npy array");
//! assert!(guess("x.bin", b"\x00\x01\x02").is_none());
//! ```

use std::path::Path;

use crate::shard::format::{HEADER_MAGIC, MANIFEST_NAME, TMP_SUFFIX};

/// Bytes of a file's start that [`guess`] looks at (a tar header's `ustar` magic is at 257).
pub const HEAD_LEN: usize = 512;

/// At most this many files of a folder are opened to describe it (their first [`HEAD_LEN`]
/// bytes each): enough to see what a folder of shards or records holds, cheap for a huge one.
const FOLDER_SAMPLE: usize = 256;

/// A kind of file, in words, and the stokehold call that reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guess {
    /// What the file is: `a TFRecord file`, `a PNG image`.
    pub what: &'static str,
    /// How to read it (Python calls), or what to do with it.
    pub read_with: &'static str,
}

impl std::fmt::Display for Guess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "it looks like {} ({})", self.what, self.read_with)
    }
}

/// [`Guess::what`] of a tar archive: `stokehold inspect` / `verify` / `convert` read it as
/// WebDataset shards.
pub const TAR: &str = "a tar archive (a WebDataset shard)";
/// [`Guess::what`] of a JSON-lines file (plain, or named `.jsonl.gz` / `.jsonl.zst`).
pub const JSONL: &str = "a JSON-lines file";
/// [`Guess::what`] of a Megatron indexed dataset's `.idx` (its tokens are in the `.bin` beside).
pub const MEGATRON: &str = "a Megatron token index";
/// The first bytes of a zstd frame.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

const TFRECORD: &str =
    "read with stokehold.TFRecordDataset(files) or stokehold.tfrecord.read_tfrecord";
const READ_JSONL: &str = "read with stokehold.read_jsonl(files), typed fields and random access";
/// How audio files are read (the [`Guess::read_with`] of every audio kind).
pub const READ_AUDIO: &str = "read with stokehold.list_files(pattern).load_audio()";
/// How image files are read (the [`Guess::read_with`] of every image kind).
pub const READ_IMAGE: &str = "read with stokehold.list_files(pattern).load_image()";

/// The kind of the file named `name` whose first bytes are `head` (at least [`HEAD_LEN`] where
/// the file has them), or `None` when it is none the crate knows.
pub fn guess(name: &str, head: &[u8]) -> Option<Guess> {
    let g = |what, read_with| Some(Guess { what, read_with });
    let starts = |m: &[u8]| head.starts_with(m);
    let lower = name.to_ascii_lowercase();
    let named_tfrecord = [".tfrecord", ".tfrecords", ".tfrec"]
        .iter()
        .any(|s| lower.contains(s));
    if starts(HEADER_MAGIC) {
        return g(
            "a stokehold shard",
            "open the folder that holds it and its manifest.json with stokehold.open_shards",
        );
    }
    if starts(b"STKTFIX") {
        return g(
            "a TFRecord index sidecar",
            "TFRecordDataset uses it beside the TFRecord file it indexes",
        );
    }
    if starts(b"STKWDIX") {
        return g(
            "a WebDataset index sidecar",
            "read_webdataset uses it beside the tar shard it indexes",
        );
    }
    if starts(b"MMIDIDX\x00\x00") {
        return g(
            MEGATRON,
            "read with stokehold.read_tokens(prefix, seq_len): the .bin beside holds the tokens",
        );
    }
    if head.len() >= 262 && &head[257..262] == b"ustar" {
        return g(TAR, "read with stokehold.read_webdataset(paths)");
    }
    let named_jsonl = [".jsonl", ".ndjson"].iter().any(|s| lower.contains(s));
    if named_jsonl && (starts(&GZIP_MAGIC) || starts(&ZSTD_MAGIC)) {
        return g(JSONL, READ_JSONL);
    }
    if starts(b"\x93NUMPY") {
        return g(
            "a NumPy .npy array",
            "read with stokehold.open_table(path), or list_files(pattern).load_npy()",
        );
    }
    if starts(&GZIP_MAGIC) {
        return if named_tfrecord {
            g("a GZIP-compressed TFRecord file", TFRECORD)
        } else {
            g(
                "a GZIP-compressed file",
                "decompress it, or name what it holds",
            )
        };
    }
    if starts(b"PK\x03\x04") || starts(b"PK\x05\x06") {
        return g(
            "a zip archive (a NumPy .npz file is one)",
            "load its arrays (np.load) into stokehold.from_arrays",
        );
    }
    if starts(b"PAR1") {
        return g(
            "a Parquet file",
            "stokehold has no Parquet reader: load its columns (pyarrow) into stokehold.from_arrays",
        );
    }
    if is_tfrecord_frame(head) {
        return g("a TFRecord file", TFRECORD);
    }
    if let Some(kind) = audio_kind(head) {
        return g(kind, READ_AUDIO);
    }
    if let Some(kind) = image_kind(head) {
        return g(kind, READ_IMAGE);
    }
    if head.is_empty() {
        return g("an empty file", "nothing to read");
    }
    if is_zlib(head) {
        return g(
            "a zlib-compressed file",
            "decompress it, or name what it holds",
        );
    }
    if named_tfrecord {
        // Named so, but its first frame does not check out.
        return g(
            "a TFRecord file by its name (its first record's framing does not check out)",
            TFRECORD,
        );
    }
    let text = |what| g(what, "read its lines with stokehold.TextLineDataset(files)");
    match lower.rsplit('.').next() {
        Some("jsonl" | "ndjson") => g(JSONL, READ_JSONL),
        Some("json") => text("a JSON file"),
        Some("csv" | "tsv") => g(
            "a CSV file",
            "read with stokehold.CsvDataset(files, record_defaults), field_delim='\\t' for TSV",
        ),
        Some("txt") => text("a text file"),
        _ if head
            .iter()
            .all(|&b| b.is_ascii_graphic() || b.is_ascii_whitespace()) =>
        {
            text("text")
        }
        _ => None,
    }
}

/// The two first bytes of a gzip stream.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// A valid two-byte zlib header (deflate, its check bits a multiple of 31).
pub fn is_zlib(head: &[u8]) -> bool {
    head.len() >= 2
        && head[0] & 0x0f == 8
        && (u16::from(head[0]) << 8 | u16::from(head[1])) % 31 == 0
}

/// A TFRecord's first frame: an 8-byte length and its masked CRC32C.
pub fn is_tfrecord_frame(head: &[u8]) -> bool {
    head.len() >= 12
        && crate::tfrecord::crc::masked_crc(&head[..8])
            == u32::from_le_bytes([head[8], head[9], head[10], head[11]])
}

fn audio_kind(head: &[u8]) -> Option<&'static str> {
    let starts = |m: &[u8]| head.starts_with(m);
    if head.len() >= 12 && starts(b"RIFF") && &head[8..12] == b"WAVE" {
        Some("a WAV audio file")
    } else if starts(b"fLaC") {
        Some("a FLAC audio file")
    } else if starts(b"OggS") {
        Some("an Ogg audio file")
    } else if starts(b"ID3") || (head.len() >= 2 && head[0] == 0xFF && head[1] & 0xE0 == 0xE0) {
        Some("an MP3 audio file")
    } else {
        None
    }
}

/// The image decoder's own signature check where the crate has one (the `image` feature).
#[cfg(feature = "image")]
fn image_kind(head: &[u8]) -> Option<&'static str> {
    use crate::image::{sniff, Format, ImageError};
    match sniff(head) {
        Ok(Format::Jpeg) => Some("a JPEG image"),
        Ok(Format::Png) => Some("a PNG image"),
        Ok(Format::WebP) => Some("a WebP image"),
        Err(ImageError::Unsupported("GIF" | "BMP" | "TIFF" | "HEIF/AVIF" | "JPEG XL" | "QOI")) => {
            Some("an image in a format stokehold does not decode (JPEG, PNG and WebP are read)")
        }
        Err(_) => None,
    }
}

#[cfg(not(feature = "image"))]
fn image_kind(_head: &[u8]) -> Option<&'static str> {
    None
}

/// The first [`HEAD_LEN`] bytes of the regular file at `path` (empty if it cannot be read).
pub fn head_of(path: &Path) -> Vec<u8> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(HEAD_LEN);
    if let Ok((f, _)) = crate::storage::open_regular(path) {
        let _ = f.take(HEAD_LEN as u64).read_to_end(&mut buf);
    }
    buf
}

/// The guess for the local file at `path`, in words (`it looks like a .npy array (...)`), for
/// an error that could not read it as what was asked.
pub fn describe_file(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_string_lossy();
    guess(&name, &head_of(path)).map(|g| g.to_string())
}

/// What the local folder `dir`, which has no manifest, holds instead; `None` when it is empty,
/// holds stokehold's own shards, lock or temporary files (an interrupted write), or cannot be
/// listed.
pub fn describe_folder(dir: &Path) -> Option<String> {
    let mut names: Vec<(String, bool)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| {
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            (e.file_name().to_string_lossy().into_owned(), is_dir)
        })
        .collect();
    names.sort();
    let ours = |n: &str| {
        crate::atomic::is_temp_name(n).is_some()
            || n.ends_with(TMP_SUFFIX)
            || n == crate::atomic::LOCK_NAME
    };
    // Empty: a write that had not started yet leaves that too.
    if names.is_empty() || names.iter().any(|(n, _)| ours(n)) {
        return None;
    }
    // Kinds in order of first appearance, each with its count and first file.
    let mut kinds: Vec<(Guess, usize, String)> = Vec::new();
    let (mut folders, mut others) = (Vec::new(), Vec::new());
    for (name, is_dir) in names.iter().take(FOLDER_SAMPLE) {
        if *is_dir {
            folders.push(name.as_str());
            continue;
        }
        match guess(name, &head_of(&dir.join(name))) {
            Some(g) if g.what == "a stokehold shard" => return None,
            Some(g) => match kinds.iter_mut().find(|k| k.0 == g) {
                Some(k) => k.1 += 1,
                None => kinds.push((g, 1, name.clone())),
            },
            None => others.push(name.as_str()),
        }
    }
    let sampled = if names.len() > FOLDER_SAMPLE {
        format!(" (of its first {FOLDER_SAMPLE} entries)")
    } else {
        String::new()
    };
    let mut parts: Vec<String> = kinds
        .iter()
        .map(|(g, n, first)| format!("{n} like {first} ({}): {}", g.what, g.read_with))
        .collect();
    if !folders.is_empty() {
        parts.push(format!(
            "{} folder(s) ({}): open_shards wants the folder that holds {MANIFEST_NAME} itself",
            folders.len(),
            list(&folders)
        ));
    }
    if !others.is_empty() {
        parts.push(format!(
            "{} other file(s) ({}) of no kind stokehold knows",
            others.len(),
            list(&others)
        ));
    }
    Some(format!(
        "not a stokehold shard folder (no {MANIFEST_NAME}); it holds{sampled}: {}",
        parts.join("; ")
    ))
}

/// Up to three names, then how many more.
fn list(names: &[&str]) -> String {
    let mut s = names.iter().take(3).copied().collect::<Vec<_>>().join(", ");
    if names.len() > 3 {
        s.push_str(&format!(", ... {} more", names.len() - 3));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_told_apart() {
        let frame = {
            let mut b = 5u64.to_le_bytes().to_vec();
            b.extend(crate::tfrecord::crc::masked_crc(&b).to_le_bytes());
            b
        };
        assert_eq!(guess("a.bin", &frame).unwrap().what, "a TFRecord file");
        assert_eq!(
            guess("a.wav", b"RIFF\0\0\0\0WAVEfmt ").unwrap().what,
            "a WAV audio file"
        );
        assert_eq!(guess("a", b"fLaC\0").unwrap().what, "a FLAC audio file");
        assert_eq!(guess("a", b"PAR1").unwrap().what, "a Parquet file");
        assert_eq!(
            guess("t.tfrecord.gz", &[0x1f, 0x8b, 8]).unwrap().what,
            "a GZIP-compressed TFRecord file"
        );
        assert_eq!(
            guess("x.jsonl", b"{\"a\": 1}\n").unwrap().what,
            "a JSON-lines file"
        );
        assert_eq!(guess("x", b"").unwrap().what, "an empty file");
        let mut tar = vec![0u8; 512];
        tar[..5].copy_from_slice(b"a.txt");
        tar[257..263].copy_from_slice(b"ustar\0");
        assert_eq!(guess("s.tar", &tar).unwrap().what, TAR);
        assert_eq!(guess("x.jsonl.zst", &ZSTD_MAGIC).unwrap().what, JSONL);
        assert_eq!(guess("x.jsonl.gz", &GZIP_MAGIC).unwrap().what, JSONL);
        assert_eq!(
            guess("x.idx", b"MMIDIDX\x00\x00\x01").unwrap().what,
            MEGATRON
        );
        assert_eq!(guess("x.bin", b"hello world, plain").unwrap().what, "text");
        assert!(guess("x.bin", b"\x00\x01\x02\xfe").is_none());
        assert_eq!(
            guess("x", b"x\x9c\x03\x00").unwrap().what,
            "a zlib-compressed file"
        );
        assert!(guess("x.npz", b"PK\x03\x04").unwrap().what.contains("zip"));
        assert!(guess("x.tfrecord", b"garbage garbage")
            .unwrap()
            .what
            .contains("by its name"));
    }
}
