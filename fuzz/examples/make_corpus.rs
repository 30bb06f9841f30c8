//! Writes the seed corpus of every fuzz target into `fuzz/corpus/<target>/`: a few valid inputs
//! made by stokehold's own encoders, and broken variants of them (truncated, a byte flipped, a
//! length field blown up), so every target starts deep in its parser. Run from the repository
//! root: `cargo run --manifest-path fuzz/Cargo.toml --example make_corpus`. The files are
//! committed; a rerun gives the same seeds up to the order of an Example's features (a protobuf
//! map, serialised in hash order). Seeds named `crash-*` are inputs that once crashed a target,
//! kept as regression seeds; a rerun leaves them.

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;
use stokehold_core::{Dataset, DatasetIter, Example, Ragged, Tensor, Value};
use stokehold_io::shard::format::{Compression, Kind, ShardFeature};
use stokehold_io::shard::{codec, ShardDataset, WriteOptions};
use stokehold_io::table::npy;
use stokehold_io::tfrecord::example::convert::{encode_example, to_proto};
use stokehold_io::tfrecord::example::proto;
use stokehold_io::tfrecord::index::{self, IndexEntry};
use stokehold_io::tfrecord::writer::frame_into;
use stokehold_core::DType;

fn example(i: usize) -> Example {
    let mut e = Example::new();
    e.insert("x", Value::Tensor(Tensor::scalar(i as i64)));
    let v: Vec<f32> = (0..i).map(|k| k as f32 * 0.5).collect();
    e.insert("v", Value::Tensor(Tensor::from_vec(vec![i], v).expect("v")));
    e.insert("s", Value::Tensor(Tensor::strings(&[vec![b'a'; i]])));
    e
}

/// Broken variants of a valid input: truncated at a third and two thirds, one byte flipped in the
/// middle, and a 0xff run where a length field usually is.
fn broken(valid: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![valid[..valid.len() / 3].to_vec(), valid[..2 * valid.len() / 3].to_vec()];
    let mut flip = valid.to_vec();
    if let Some(b) = flip.get_mut(valid.len() / 2) {
        *b ^= 0x5a;
    }
    out.push(flip);
    let mut big = valid.to_vec();
    for b in big.iter_mut().skip(1).take(4) {
        *b = 0xff;
    }
    out.push(big);
    out
}

fn write(target: &str, seeds: Vec<Vec<u8>>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    std::fs::create_dir_all(&dir).expect("corpus folder");
    // Inputs that once crashed a target (`crash-*`, kept as regression seeds) stay.
    for entry in std::fs::read_dir(&dir).expect("corpus folder") {
        let p = entry.expect("entry").path();
        if p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("seed-")) {
            std::fs::remove_file(p).expect("remove an old seed");
        }
    }
    for (i, s) in seeds.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:02}")), s).expect("write seed");
    }
    println!("{target}: {} seeds", seeds.len());
}

fn with_broken(valid: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut all = valid.clone();
    for v in &valid {
        all.extend(broken(v));
    }
    all
}

/// A PCM WAV (format 1, or 3 for float) of `frames` frames of a ramp, written by hand.
fn wav(channels: u16, bits: u16, float: bool, frames: usize) -> Vec<u8> {
    let block = channels as usize * bits as usize / 8;
    let data: Vec<u8> = (0..frames * block).map(|k| (k * 7 % 251) as u8).collect();
    let mut v = b"RIFF".to_vec();
    v.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
    v.extend_from_slice(b"WAVEfmt ");
    v.extend_from_slice(&16u32.to_le_bytes());
    v.extend_from_slice(&(if float { 3u16 } else { 1 }).to_le_bytes());
    v.extend_from_slice(&channels.to_le_bytes());
    v.extend_from_slice(&16000u32.to_le_bytes());
    v.extend_from_slice(&(16000 * block as u32).to_le_bytes());
    v.extend_from_slice(&(block as u16).to_le_bytes());
    v.extend_from_slice(&bits.to_le_bytes());
    v.extend_from_slice(b"data");
    v.extend_from_slice(&(data.len() as u32).to_le_bytes());
    v.extend_from_slice(&data);
    v
}

/// Audio seeds: small WAVs of every sample type, and the 0.1 s FLAC, MP3 and Ogg fixtures.
fn audio_seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![
        wav(1, 8, false, 64),
        wav(2, 16, false, 64),
        wav(2, 24, false, 32),
        wav(1, 32, false, 32),
        wav(1, 32, true, 32),
        wav(2, 64, true, 16),
    ];
    for f in ["tiny.flac", "tiny.mp3", "tiny.ogg", "opus.ogg", "adpcm.wav"] {
        let p = Path::new("testdata/audio").join(f);
        seeds.push(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())));
    }
    with_broken(seeds)
}

fn main() {
    // TFRecord framing: the first byte picks raise/skip, verify and compression (0: plain).
    let mut framed = vec![0u8];
    for i in 0..3 {
        frame_into(&mut framed, &encode_example(&example(i)).expect("encode"));
    }
    let mut skip = framed.clone();
    skip[0] = 1;
    write("tfrecord_framing", with_broken(vec![framed, skip]));

    let examples: Vec<Vec<u8>> = (0..3).map(|i| encode_example(&example(i)).expect("encode")).collect();
    write("example_parse", with_broken(examples.clone()));

    let ctx = to_proto(&example(2)).expect("proto").features;
    let steps = proto::FeatureList {
        feature: to_proto(&example(3)).expect("proto").features.expect("features").feature.into_values().collect(),
    };
    let seq = proto::SequenceExample {
        context: ctx,
        feature_lists: Some(proto::FeatureLists { feature_list: BTreeMap::from([("steps".to_string(), steps)]) }),
    };
    write("sequence_example", with_broken(vec![seq.encode_to_vec(), examples[1].clone()]));

    // Shard records: the first byte is the number of names (3: x, v, s).
    let schema: Vec<ShardFeature> = [("x", DType::I64), ("v", DType::F32), ("s", DType::Bytes)]
        .iter()
        .map(|&(name, dtype)| ShardFeature { name: name.into(), dtype, kind: Kind::Tensor, shape: None })
        .collect();
    let records: Vec<Vec<u8>> = (0..3)
        .map(|i| {
            let mut out = vec![3u8];
            codec::encode(&example(i), &schema, &mut out).expect("encode record");
            out
        })
        .collect();
    write("shard_record", with_broken(records));

    // Shard files and a manifest, from a real write (plain and zstd, ragged too).
    let tmp = std::env::temp_dir().join(format!("stokehold-corpus-{}", std::process::id()));
    let mut files = Vec::new();
    let mut manifests = Vec::new();
    for compression in [Compression::None, Compression::Zstd] {
        let dir = tmp.join(format!("{compression:?}"));
        let mut col = Example::new();
        let lens = [1u64, 3, 0, 2];
        let mut splits = vec![0u64];
        for l in lens {
            splits.push(splits.last().unwrap() + l);
        }
        let values = Tensor::from_vec(vec![6], (0..6).map(|v| v as f32).collect::<Vec<_>>()).expect("values");
        col.insert("r", Value::Ragged(Ragged::new(values, splits.into()).expect("ragged")));
        col.insert("x", Value::Tensor(Tensor::from_vec(vec![4], vec![7i64, 8, 9, 10]).expect("x")));
        let ds = Dataset::from_columns(col).expect("columns");
        let opts = WriteOptions { compression, shard_bytes: 1 << 20, threads: 1, overwrite: true, ..WriteOptions::default() };
        stokehold_io::shard::write_shards(&ds, &dir, opts, None).expect("write");
        let opened = ShardDataset::open(&dir).expect("open");
        let mut it = Dataset::from_map(opened).iter(0).expect("iter");
        while it.next().expect("read back").is_some() {}
        for entry in std::fs::read_dir(&dir).expect("folder") {
            let p = entry.expect("entry").path();
            let bytes = std::fs::read(&p).expect("read");
            if p.file_name().is_some_and(|n| n == "manifest.json") {
                manifests.push(bytes);
            } else {
                files.push(bytes);
            }
        }
    }
    files.sort();
    write("shard_file", with_broken(files));
    // The target pairs its manifest with the shard files of its own valid folder: that folder's
    // manifest first, then the manifests of the folders above (other files: refused early).
    let mut all = vec![stokehold_fuzz::valid_manifest()];
    all.extend(manifests);
    write("shard_manifest", with_broken(all));
    let _ = std::fs::remove_dir_all(&tmp);

    let headers = vec![
        npy::encode_header(DType::F32, &[6, 2], 0).expect("npy"),
        npy::encode_header(DType::I64, &[3], 0).expect("npy"),
        npy::encode_header(DType::U8, &[2, 3, 4], 0).expect("npy"),
    ];
    write("npy_header", with_broken(headers));

    let entries = [IndexEntry { offset: 0, len: 5 }, IndexEntry { offset: 21, len: 7 }];
    write("tfrecord_index", with_broken(vec![index::encode(&entries, 44), index::encode(&entries[..1], 21)]));

    // JSONL: the first byte picks inferred types (0) or a declared kind for every field.
    let text = "{\"a\": 1, \"s\": \"h\\u00e9\", \"m\": {\"f\": 2.5, \"l\": [1, 2]}}\n\n{\"a\": null}\n[1]\n{\"a\": 1e400}\n{\"a\": 18446744073709551616, \"m\": {\"l\": []}}";
    let jsonl_seeds: Vec<Vec<u8>> = (0u8..3).map(|mode| [vec![mode * 3], text.as_bytes().to_vec()].concat()).collect();
    write("jsonl", with_broken(jsonl_seeds));
    let lines = stokehold_io::jsonl::index::scan_lines(text.as_bytes());
    let jsonl_index = stokehold_io::jsonl::index::encode(&lines, text.len() as u64);
    write("jsonl_index", with_broken(vec![jsonl_index, stokehold_io::jsonl::index::encode(&lines[..1], 60)]));

    // WebDataset: the head of each fixture shard (written by webdataset's TarWriter, PAX headers).
    let wds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/webdataset");
    let heads: Vec<Vec<u8>> = [("shard-0.tar", 6144), ("shard-1.tar", 8192)]
        .iter()
        .map(|(name, n)| std::fs::read(wds.join(name)).expect("the webdataset fixture")[..*n].to_vec())
        .collect();
    write("webdataset_tar", with_broken(heads));
    // The member index sidecars of the same shards (what read_webdataset writes beside them).
    let indexes: Vec<Vec<u8>> = ["shard-0.tar", "shard-1.tar"]
        .iter()
        .map(|name| {
            let (path, data) = (wds.join(name), std::fs::read(wds.join(name)).expect("the webdataset fixture"));
            let listed = stokehold_io::webdataset::scan::list_members(&path, &data).expect("a good shard");
            stokehold_io::webdataset::index::encode(&listed, data.len() as u64)
        })
        .collect();
    write("webdataset_index", with_broken(indexes));

    // Audio: the decode target's first byte picks the resample rate, the window target's first
    // four give the start and the length.
    write("audio_decode", audio_seeds().into_iter().map(|s| [vec![2u8], s].concat()).collect());
    write(
        "audio_window",
        audio_seeds().into_iter().map(|s| [vec![0x10, 0x00, 0x00, 0x01], s].concat()).collect(),
    );
    // Images: the committed fixtures (testdata/image), each behind a mode byte for image_decode.
    let images: Vec<Vec<u8>> = ["baseline.jpg", "progressive.jpg", "gray.jpg", "rgba8.png", "gray16.png",
        "palette_trns.png", "la8.png", "lossless.webp", "lossy.webp", "alpha.webp", "huge.png", "zero.jpg"]
        .iter()
        .map(|n| std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/image").join(n)).expect("fixture"))
        .collect();
    write("image_probe", images.clone());
    let moded = images.iter().enumerate().map(|(i, b)| [vec![(i * 37) as u8], b.clone()].concat()).collect();
    write("image_decode", moded);

    // Parquet / Arrow IPC: the small fixtures of testdata/parquet behind a mode byte (even:
    // Parquet, odd: Arrow IPC), and their broken variants.
    let pq = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/parquet");
    let columnar: Vec<Vec<u8>> = [(0u8, "nullable.parquet"), (2, "unsupported.parquet"), (1, "data.arrows"),
        (3, "data.arrow"), (5, "hf_saved/data-00000-of-00001.arrow")]
        .iter()
        .map(|(mode, n)| [vec![*mode], std::fs::read(pq.join(n)).expect("the parquet fixtures")].concat())
        .collect();
    write("parquet", with_broken(columnar));

    // tokenizer.json: small tokenizers of three model kinds (WordLevel; byte-level BPE with a
    // template; Unigram with Metaspace), and their broken variants.
    let wordlevel = br#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,"model":{"type":"WordLevel","vocab":{"[UNK]":0,"hello":1,"world":2},"unk_token":"[UNK]"}}"#;
    let bpe = br#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[{"id":0,"content":"<s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],"normalizer":{"type":"NFC"},"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true},"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"pair":[{"Sequence":{"id":"A","type_id":0}},{"Sequence":{"id":"B","type_id":1}}],"special_tokens":{"<s>":{"id":"<s>","ids":[0],"tokens":["<s>"]}}},"decoder":null,"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,"end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,"ignore_merges":false,"vocab":{"<s>":0,"h":1,"e":2,"l":3,"o":4,"he":5},"merges":[["h","e"]]}}"#;
    let unigram = br#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,"pre_tokenizer":{"type":"Metaspace","replacement":"_","prepend_scheme":"always","split":true},"post_processor":null,"decoder":null,"model":{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0.0],["_",-1.0],["a",-2.0],["b",-2.5]],"byte_fallback":false}}"#;
    let tokenizers = vec![wordlevel.to_vec(), bpe.to_vec(), unigram.to_vec()];
    write("tokenizer_json", with_broken(tokenizers));
}
