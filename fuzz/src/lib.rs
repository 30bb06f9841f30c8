//! The bodies of the fuzz targets, one function per parser of untrusted bytes. Each libFuzzer
//! target in `fuzz_targets/` is one line calling its function here, and `tests/corpus.rs` runs
//! every function over its committed seed corpus (`corpus/<target>/`), so CI executes them even
//! where cargo-fuzz is not installed. Every function must not panic on any input; where the
//! format has an encoder, what decodes must agree with it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use stokehold_core::{DType, Dataset, Example, Ragged, Tensor, Value};
use stokehold_io::shard::format::{self, Compression, Kind, Manifest, ShardEntry, ShardFeature};
use stokehold_io::shard::{codec, ShardDataset, WriteOptions};
use stokehold_io::table::npy;
use stokehold_io::tfrecord::example::convert::{decode_example, decode_sequence_example, encode_example};
use stokehold_io::tfrecord::index;
use stokehold_io::tfrecord::writer::frame_into;
use stokehold_io::tfrecord::{OnCorrupt, ReadOptions, RecordReader};

/// The targets: name and body (the names of `fuzz_targets/*.rs` and `corpus/*`).
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("tfrecord_framing", tfrecord_framing),
    ("example_parse", example_parse),
    ("sequence_example", sequence_example),
    ("shard_record", shard_record),
    ("shard_file", shard_file),
    ("shard_manifest", shard_manifest),
    ("npy_header", npy_header),
    ("tfrecord_index", tfrecord_index),
    ("megatron_idx", megatron_idx),
    ("audio_decode", audio_decode),
    ("audio_window", audio_window),
    ("image_decode", image_decode),
    ("image_probe", image_probe),
    ("jsonl", jsonl),
    ("jsonl_index", jsonl_index),
    ("webdataset_tar", webdataset_tar),
    ("webdataset_index", webdataset_index),
    ("parquet", parquet),
    ("tokenizer_json", tokenizer_json),
];

/// TFRecord framing: see `fuzz_targets/tfrecord_framing.rs` for the checks (kept there as it was).
pub fn tfrecord_framing(data: &[u8]) {
    use stokehold_io::tfrecord::Compression as C;
    let Some((&mode, body)) = data.split_first() else { return };
    let on_corrupt = if mode & 1 == 0 { OnCorrupt::Raise } else { OnCorrupt::Skip };
    let verify = mode & 2 == 0;
    let compression = match (mode >> 2) % 3 {
        0 => C::None,
        1 => C::Gzip,
        _ => C::Zlib,
    };
    let opts = ReadOptions { compression, verify, on_corrupt };
    let src = compression.wrap_reader(std::io::Cursor::new(body.to_vec()));
    let mut r = RecordReader::new("fuzz-input", src, opts);
    let mut steps = 0usize;
    loop {
        match r.next_ref() {
            Ok(Some((offset, rec))) => {
                if compression == C::None && verify {
                    // The record is framed exactly at its offset in the input.
                    let mut framed = Vec::new();
                    frame_into(&mut framed, rec);
                    let at = offset as usize;
                    assert_eq!(&body[at..at + framed.len()], &framed[..]);
                }
            }
            Ok(None) => break,
            Err(_) => {
                assert!(on_corrupt == OnCorrupt::Raise || compression != C::None);
                break;
            }
        }
        steps += 1;
        // Every record consumes 16 bytes and every skip at least 1 (of the decompressed stream,
        // which only for plain input is bounded by the input's size).
        assert!(compression != C::None || steps <= body.len() + 1, "no progress");
    }
    if compression == C::None {
        assert!(r.records() + r.skipped() <= body.len() as u64 + 1);
    }
}

/// tf.train.Example: the batch parser and prost never panic and agree (`example_parse.rs`); what
/// decodes re-encodes to an Example that decodes to the same values.
pub fn example_parse(data: &[u8]) {
    example_parse_checks(data);
    if let Ok(e) = decode_example(data) {
        let again = encode_example(&e).expect("a decoded example encodes");
        assert_eq!(decode_example(&again).expect("re-encoded decodes"), e);
    }
}

fn example_parse_checks(data: &[u8]) {
    use stokehold_io::tfrecord::example::convert::{decode_proto, feature_summary, feature_tensor};
    use stokehold_io::tfrecord::{ParseFeature as Spec, ParseSpec, Parser};
    let fixed = ParseSpec::new()
        .with("a", Spec::fixed(vec![2], DType::I64))
        .and_then(|s| s.with("b", Spec::fixed(vec![], DType::Bytes)))
        .and_then(|s| s.with("c", Spec::var(DType::F32)))
        .expect("valid spec");
    let _ = Parser::new(fixed).parse_batch(&[data, data]);
    let Ok(p) = decode_proto(data) else { return };
    let Some(features) = p.features else { return };
    let mut spec = ParseSpec::new();
    for (name, f) in &features.feature {
        let dtype = feature_summary(f).0.unwrap_or(DType::F32);
        spec.add(name, Spec::var(dtype)).expect("distinct names");
    }
    let Ok(parsed) = Parser::new(spec).parse_batch(&[data]) else { return };
    for (name, f) in &features.feature {
        let Some(Value::Ragged(col)) = parsed.get(name) else { panic!("no column {name:?}") };
        let got = col.row(0).expect("one row");
        let want = feature_tensor(f).expect("tensor");
        if !(got.is_empty() && want.is_empty()) {
            assert_eq!(got.data(), want.data(), "feature {name:?}");
            assert_eq!(got.offsets(), want.offsets(), "feature {name:?}");
        }
    }
}

/// tf.train.SequenceExample: decoding never panics.
pub fn sequence_example(data: &[u8]) {
    let _ = decode_sequence_example(data);
}

/// The shard record codec on arbitrary bytes, with 0-3 feature names: `decode` and the batch
/// `gather` never panic, and when both accept, gather's batch of two copies stacks what decode
/// read.
pub fn shard_record(data: &[u8]) {
    let Some((&n, rec)) = data.split_first() else { return };
    let names: Vec<Arc<str>> = ["x", "v", "s"][..usize::from(n % 4)]
        .iter()
        .map(|&s| Arc::from(s))
        .collect();
    let rec = Bytes::copy_from_slice(rec);
    let decoded = codec::decode(&rec, &names);
    let gathered = codec::gather(&[&rec[..], &rec[..]], &names);
    if let (Ok(e), Ok(Some(batch))) = (&decoded, &gathered) {
        for (name, v) in e.iter() {
            let (Value::Tensor(t), Some(Value::Tensor(b))) = (v, batch.get(name)) else { continue };
            assert_eq!(b.shape()[0], 2, "feature {name:?}");
            assert_eq!(&b.shape()[1..], t.shape(), "feature {name:?}");
        }
    }
    if let Ok(e) = decoded {
        // What decodes re-encodes (under the schema it implies) to a record that decodes equal.
        let Ok(schema) = schema_of(&e) else { return };
        let mut out = Vec::new();
        if codec::encode(&e, &schema, &mut out).is_ok() {
            let again = codec::decode(&Bytes::from(out), &names).expect("re-encoded decodes");
            assert_eq!(again, e);
        }
    }
}

fn schema_of(e: &Example) -> Result<Vec<ShardFeature>, ()> {
    e.iter()
        .map(|(name, v)| {
            let (dtype, kind) = match v {
                Value::Tensor(t) => (t.dtype(), Kind::Tensor),
                Value::Ragged(r) => (r.values().dtype(), Kind::Ragged),
            };
            Ok(ShardFeature { name: name.to_string(), dtype, kind, shape: None })
        })
        .collect()
}

/// A scratch folder per process, reused by every input (a fresh folder per input would make the
/// target slow without testing more).
fn scratch(name: &str) -> PathBuf {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    let root = ROOT.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("stokehold-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("scratch folder");
        d
    });
    let d = root.join(name);
    std::fs::create_dir_all(&d).expect("scratch folder");
    d
}

/// A small valid shard folder (dense, ragged and bytes features; zstd), written once.
fn valid_folder() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("valid");
        let n = 6usize;
        let mut ex = Example::new();
        let x = Tensor::from_vec(vec![n], (0..n as i64).collect()).expect("x");
        ex.insert("x", Value::Tensor(x));
        let values: Vec<f32> = (0..15).map(|v| v as f32).collect();
        let values = Tensor::from_vec(vec![15], values).expect("values");
        let splits: Vec<u64> = vec![0, 1, 3, 6, 10, 15, 15];
        ex.insert("v", Value::Ragged(Ragged::new(values, splits.into()).expect("ragged")));
        let strings: Vec<Vec<u8>> = (0..n).map(|i| vec![b'a' + i as u8; i]).collect();
        ex.insert("s", Value::Tensor(Tensor::strings(&strings)));
        let ds = Dataset::from_columns(ex).expect("columns");
        let opts = WriteOptions {
            compression: Compression::Zstd,
            shard_bytes: 64,
            threads: 1,
            overwrite: true,
            ..WriteOptions::default()
        };
        stokehold_io::shard::write_shards(&ds, &dir, opts, None).expect("write the valid folder");
        dir
    })
}

/// The manifest of the folder [`shard_manifest`] fuzzes the manifest of (for the seed corpus).
pub fn valid_manifest() -> Vec<u8> {
    std::fs::read(valid_folder().join(format::MANIFEST_NAME)).expect("the valid manifest")
}

/// Reads every record of an opened folder, element by element and as one batch.
fn read_all(dir: &Path) {
    let Ok(ds) = ShardDataset::open_with(dir, true) else { return };
    let len = stokehold_core::MapDataset::len(&ds).min(64);
    for i in 0..len {
        let _ = stokehold_core::MapDataset::get(&ds, i);
    }
    let all: Vec<u64> = (0..len).collect();
    let _ = stokehold_core::MapDataset::get_batch(&ds, &all);
}

/// A shard file (header, records, index, footer) of arbitrary bytes, listed by a manifest that
/// matches it (its size and CRC, the record count its footer claims), so parsing goes past the
/// whole-file checks into the footer, the index and every record.
pub fn shard_file(data: &[u8]) {
    let dir = scratch("file");
    let file = format::shard_name(0);
    std::fs::write(dir.join(&file), data).expect("write shard");
    let footer = data
        .len()
        .checked_sub(format::FOOTER_LEN)
        .and_then(|at| format::Footer::decode(&data[at..], Path::new(&file), 0).ok());
    let records = footer.map_or(0, |f| f.records);
    let valid = ShardDataset::open(valid_folder()).expect("the valid folder opens");
    let manifest = Manifest {
        num_records: records,
        shards: vec![ShardEntry {
            file,
            records,
            bytes: data.len() as u64,
            crc32c: format!("{:08x}", format::crc32c(data)),
            first_record: Some(0),
            index_crc32c: footer.map(|f| format!("{:08x}", f.index_crc)),
        }],
        ..valid.manifest().clone()
    };
    write_manifest(&dir, &serde_json::to_vec(&manifest).expect("manifest json"));
    read_all(&dir);
}

/// A manifest of arbitrary bytes beside the valid folder's shard files.
pub fn shard_manifest(data: &[u8]) {
    let dir = scratch("manifest");
    let valid = valid_folder();
    for entry in std::fs::read_dir(valid).expect("valid folder") {
        let entry = entry.expect("entry");
        let name = entry.file_name();
        if name != format::MANIFEST_NAME && !dir.join(&name).exists() {
            std::fs::copy(entry.path(), dir.join(&name)).expect("copy shard");
        }
    }
    write_manifest(&dir, data);
    read_all(&dir);
}

fn write_manifest(dir: &Path, data: &[u8]) {
    let mut f = std::fs::File::create(dir.join(format::MANIFEST_NAME)).expect("manifest");
    f.write_all(data).expect("write manifest");
}

/// The `.npy` header: parsing never panics; an accepted header's data length is computable or
/// refused, and a header the encoder makes for the parsed dtype and shape parses back the same.
pub fn npy_header(data: &[u8]) {
    let Ok(h) = npy::parse_header(data, Path::new("fuzz.npy")) else { return };
    let _ = h.data_len();
    if let Ok(again) = npy::encode_header(h.dtype, &h.shape, 0) {
        let back = npy::parse_header(&again, Path::new("fuzz.npy")).expect("encoded header parses");
        assert_eq!((back.dtype, &back.shape), (h.dtype, &h.shape));
    }
}

/// The TFRecord `.idx` sidecar: decoding never panics; accepted entries re-encode to the same
/// bytes.
pub fn tfrecord_index(data: &[u8]) {
    let Ok((entries, file_size)) = index::decode(Path::new("fuzz.idx"), data) else { return };
    assert_eq!(index::decode(Path::new("fuzz.idx"), &index::encode(&entries, file_size)).ok(), Some((entries, file_size)));
}

/// Audio (WAV, FLAC, MP3, Ogg Vorbis; the container is probed from the bytes): a whole decode
/// never panics, gives equally long channels, and (for a short clip) survives the mix down and a
/// resample to the rate picked by the first byte.
pub fn audio_decode(data: &[u8]) {
    use stokehold_io::audio::{decode, resample};
    let Some((&mode, body)) = data.split_first() else { return };
    let Ok(opened) = decode::open_bytes(Bytes::copy_from_slice(body), Path::new("fuzz.audio")) else { return };
    let info = opened.info().clone();
    let Ok(audio) = opened.decode(0, None) else { return };
    assert_eq!(audio.channels.len(), info.channels);
    assert!(audio.channels.iter().all(|c| c.len() == audio.frames()));
    // Resampling costs O(frames): only short clips, so the target stays fast.
    if audio.frames() <= 1 << 16 {
        let target = [8000, 11025, 16000, 22050, 44100, 48000][mode as usize % 6];
        let frames = audio.frames() as u64;
        let rate = audio.sample_rate as u64;
        // Absurd header rates are refused (an error, not an allocation).
        let Ok(out) = resample::resample(resample::mix_to_mono(audio), target) else { return };
        assert_eq!(out.channels.len(), 1);
        assert_eq!(out.frames() as u64, (frames * target as u64 + rate / 2) / rate);
    }
}

/// Audio window reads (the seek path): the first 4 bytes give the start frame and the length
/// (two little-endian u16); a window never panics and never returns more than it asked for.
pub fn audio_window(data: &[u8]) {
    use stokehold_io::audio::decode;
    if data.len() < 4 {
        return;
    }
    let start = u16::from_le_bytes([data[0], data[1]]) as u64;
    let len = u16::from_le_bytes([data[2], data[3]]) as u64;
    let Ok(opened) = decode::open_bytes(Bytes::copy_from_slice(&data[4..]), Path::new("fuzz.audio")) else { return };
    if let Ok(audio) = opened.decode(start, Some(len)) {
        assert!(audio.frames() as u64 <= len);
        assert!(audio.channels.iter().all(|c| c.len() == audio.frames()));
    }
}

/// Image decoding (JPEG, PNG, WebP, picked by signature): the first byte picks the channels,
/// the dtype and the layout. Never panics; a decoded image has the header's size and the
/// asked channels, and survives a random resized crop and a resize (1-pixel sides included).
/// The pixel limit is kept small so a valid huge header does not exhaust the fuzzer's memory.
pub fn image_decode(data: &[u8]) {
    use stokehold_io::image::{self as im, DecodeOptions, Interpolation, Layout};
    let Some((&mode, body)) = data.split_first() else { return };
    let channels = [0u8, 1, 3, 4][usize::from(mode & 3)];
    let opts = DecodeOptions {
        channels,
        dtype: if mode & 4 == 0 { DType::U8 } else { DType::U16 },
        layout: if mode & 8 == 0 { Layout::Hwc } else { Layout::Chw },
        max_pixels: 1 << 22,
    };
    let Ok(t) = im::decode(body, &opts) else { return };
    let info = im::probe(body).expect("a decodable image probes");
    let (h, w, c) = match opts.layout {
        Layout::Hwc => (t.shape()[0], t.shape()[1], t.shape()[2]),
        Layout::Chw => (t.shape()[1], t.shape()[2], t.shape()[0]),
    };
    assert_eq!((w as u32, h as u32), (info.width, info.height));
    assert_eq!(c, if channels == 0 { usize::from(info.channels) } else { usize::from(channels) });
    if opts.dtype != DType::U8 || opts.layout != Layout::Hwc || c == 2 {
        return;
    }
    let interp = [Interpolation::Nearest, Interpolation::Bilinear, Interpolation::Bicubic, Interpolation::Area]
        [usize::from(mode >> 4) % 4];
    let e = Example::new().with("x", t);
    let ctx = stokehold_core::Ctx { op: "fuzz", index: u64::from(mode), epoch: 0 };
    let f = im::random_resized_crop_fn("x", (7, 5), (0.08, 1.0), (0.75, 4.0 / 3.0), interp, 1);
    let out = f(e.clone(), &ctx).expect("crop of a decoded image");
    assert_eq!(out.tensor("t", "x").expect("x").shape(), &[7, 5, c]);
    let g = im::resize_fn("x", im::Size::Shorter(3), interp);
    g(e, &ctx).expect("resize of a decoded image");
}

/// Image headers alone (what `stokehold inspect` reads): never panics, and agrees with a decode
/// where the decode succeeds.
pub fn image_probe(data: &[u8]) {
    use stokehold_io::image::{self as im, DecodeOptions};
    let Ok(info) = im::probe(data) else { return };
    assert!(matches!(info.channels, 1..=4), "{info:?}");
    let opts = DecodeOptions { channels: 0, max_pixels: 1 << 20, ..DecodeOptions::default() };
    if let Ok(t) = im::decode(data, &opts) {
        assert_eq!((t.shape()[1] as u32, t.shape()[0] as u32), (info.width, info.height));
    }
}

/// JSONL lines (the first byte picks inferred types or one declared kind for every field): the
/// line scan, whose index round-trips, each line's JSON, field inference on the first object,
/// and every field's conversion on every line; a value that converts has its field's rank.
pub fn jsonl(data: &[u8]) {
    use stokehold_io::jsonl::{fields::infer_all, index as jindex, JsonField};
    let Some((&mode, body)) = data.split_first() else { return };
    let lines = jindex::scan_lines(body);
    let size = body.len() as u64;
    let again = jindex::decode(Path::new("fuzz.jsonl.idx"), &jindex::encode(&lines, size));
    assert_eq!(again.ok(), Some((lines.clone(), size)));
    const KINDS: [&str; 8] = ["", "int8", "uint64", "float32", "bool", "bytes", "float64[]", "int64[]"];
    let mut fields: Option<Vec<JsonField>> = None;
    for e in lines.iter().take(64) {
        let line = &body[e.offset as usize..(e.offset + e.len) as usize];
        let Ok(serde_json::Value::Object(o)) = serde_json::from_slice(line) else { continue };
        let fs = fields.get_or_insert_with(|| {
            let inferred = infer_all(&o).unwrap_or_default();
            match KINDS[mode as usize % KINDS.len()] {
                "" => inferred,
                kind => inferred.iter().filter_map(|f| JsonField::parse(&f.name, kind, None).ok()).collect(),
            }
        });
        for f in fs.iter() {
            if let Ok(t) = f.read(&o) {
                assert_eq!(t.shape().len(), f.list as usize);
                assert_eq!(t.dtype(), f.dtype);
            }
        }
    }
}

/// The JSONL line index sidecar on arbitrary bytes: what decodes re-encodes to the same entries.
pub fn jsonl_index(data: &[u8]) {
    use stokehold_io::jsonl::index as jindex;
    let Ok((entries, size)) = jindex::decode(Path::new("fuzz.idx"), data) else { return };
    assert_eq!(jindex::encode(&entries, size), data);
}

/// The Megatron `.idx` index (`tokens::idx`): the first 4 bytes give the `.bin`'s length, the
/// rest is the index. Parsing never panics nor allocates past the input; an accepted index has
/// as many pointers as lengths and every sequence inside the `.bin`.
pub fn megatron_idx(data: &[u8]) {
    use stokehold_io::tokens::idx;
    let Some((len, body)) = data.split_at_checked(4) else { return };
    let bin_len = u32::from_le_bytes(len.try_into().unwrap()) as u64;
    let Ok(ix) = idx::parse(body, Path::new("fuzz.idx"), bin_len) else { return };
    assert_eq!(ix.lengths.len(), ix.pointers.len());
    let width = ix.dtype.size().unwrap() as u64;
    for (&n, &p) in ix.lengths.iter().zip(&ix.pointers) {
        assert!(n >= 0 && p + n as u64 * width <= bin_len);
    }
    assert!(ix.documents.windows(2).all(|w| w[0] <= w[1]));
}

/// WebDataset tar shards: the header scan and the grouping into samples. Every member it lists
/// lies inside the input, and consecutive samples have different keys.
pub fn webdataset_tar(data: &[u8]) {
    let Ok(samples) = stokehold_io::webdataset::scan::scan(Path::new("fuzz.tar"), data) else { return };
    for s in &samples {
        assert!(!s.members.is_empty());
        for m in &s.members {
            assert!(m.offset.checked_add(m.len).is_some_and(|end| end <= data.len() as u64));
        }
    }
    assert!(samples.windows(2).all(|w| w[0].key != w[1].key));
}

/// The WebDataset member index sidecar (`webdataset::index`): decoding never panics nor allocates
/// past the input; an accepted index round-trips, lists members inside the file it describes, and
/// groups into samples (or a clear error) as a scan's list does.
pub fn webdataset_index(data: &[u8]) {
    use stokehold_io::webdataset::{index, scan};
    let Ok((listed, size)) = index::decode(Path::new("fuzz.idx"), data) else { return };
    assert_eq!(index::encode(&listed, size), data);
    assert!(listed.iter().all(|m| m.offset.checked_add(m.len).is_some_and(|end| end <= size)));
    if let Ok(samples) = scan::group(Path::new("fuzz.tar"), &listed) {
        assert!(samples.windows(2).all(|w| w[0].key != w[1].key));
    }
}

/// Parquet and Arrow IPC files on arbitrary bytes (first byte even: Parquet, odd: Arrow IPC; the
/// rest is the file): opening, planning and reading up to 512 rows never panics nor allocates
/// past what the input declares and holds; a row read holds every planned feature.
pub fn parquet(data: &[u8]) {
    use stokehold_core::MapDataset;
    use stokehold_io::parquet::file::{ObjectReader, ParquetFile};
    use stokehold_io::parquet::ipc::IpcFile;
    use stokehold_io::parquet::{Blocks, ColumnarDataset, ColumnarOptions};
    let Some((&mode, body)) = data.split_first() else { return };
    let path = Path::new("fuzz.parquet");
    let bytes = bytes::Bytes::copy_from_slice(body);
    let file: Box<dyn Blocks> = if mode % 2 == 0 {
        match ParquetFile::from_reader(path, ObjectReader::Memory(bytes), None) {
            Ok(f) => Box::new(f),
            Err(_) => return,
        }
    } else {
        match IpcFile::from_bytes(path, bytes, None) {
            Ok(f) => Box::new(f),
            Err(_) => return,
        }
    };
    let opts = ColumnarOptions { cache_bytes: Some(1 << 20), ..Default::default() };
    let Ok(ds) = ColumnarDataset::new("fuzz", vec![file], &opts) else { return };
    let features = ds.plan().leaves.len();
    for i in 0..ds.len().min(512) {
        if let Ok(e) = ds.get(i) {
            assert_eq!(e.names().len(), features);
        }
    }
}

/// A `tokenizer.json` (`stokehold_io::tokenize::load_tokenizer`, the `tokenizers` crate's
/// parser): loading arbitrary JSON never panics; a tokenizer that loads encodes a few texts
/// (ASCII, Unicode, empty), with and without special tokens and truncation, through
/// `tokenize_fn` on a batch, without panicking.
pub fn tokenizer_json(data: &[u8]) {
    use stokehold_io::tokenize::{load_tokenizer, tokenize_fn, TokenizeOptions};
    let Ok(text) = std::str::from_utf8(data) else { return };
    if !text.trim_start().starts_with('{') {
        return;
    }
    let Ok(tok) = load_tokenizer("tokenize", text) else { return };
    let docs = Tensor::strings(&["hello world", "caf\u{e9} \u{6771}\u{4eac} \u{1f680}", ""]);
    for (special, max_length) in [(true, None), (false, Some(4))] {
        let opts = TokenizeOptions { add_special_tokens: special, eos_id: Some(0), max_length, ..Default::default() };
        let Ok(f) = tokenize_fn("text", "ids", tok.clone(), &opts) else { continue };
        let ctx = stokehold_core::Ctx { op: "tokenize", index: 0, epoch: 0 };
        let _ = f(Example::new().with("text", docs.clone()), &ctx);
    }
}
