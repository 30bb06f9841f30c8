//! Writes the shard-format fixtures of `testdata/shard/`: for each per-record compression (none,
//! lz4, zstd) a tiny folder of format version 1 with dense, ragged and bytes features spread over
//! several shards. `tests/it/shard_compat.rs` checks that today's reader reads them exactly, so a
//! reader change that breaks old data fails a test. Run from the repository root when the format
//! version changes (keep the old folders; add the new version's beside them):
//! `cargo run -p stokehold-io --example make_shard_fixtures`.

use std::path::Path;

use stokehold_core::{Dataset, Example, Ragged, Tensor, Value};
use stokehold_io::shard::{write_shards, Compression, WriteOptions};

/// Records in each fixture; the test rebuilds the same values with [`fixture_example`].
const N: usize = 7;

/// Column `x`: int64 `i`; `img`: uint8 `[2, 3]` filled with `i`; `v`: float32 ragged of length
/// `i % 4`, values `i + k / 2`; `s`: bytes `"r" * i`.
fn fixture_columns() -> Example {
    let mut e = Example::new();
    e.insert(
        "x",
        Value::Tensor(Tensor::from_vec(vec![N], (0..N as i64).collect()).unwrap()),
    );
    let img: Vec<u8> = (0..N).flat_map(|i| [i as u8; 6]).collect();
    e.insert(
        "img",
        Value::Tensor(Tensor::from_vec(vec![N, 2, 3], img).unwrap()),
    );
    let mut splits = vec![0u64];
    let mut values = Vec::new();
    for i in 0..N {
        for k in 0..i % 4 {
            values.push(i as f32 + k as f32 / 2.0);
        }
        splits.push(values.len() as u64);
    }
    let values = Tensor::from_vec(vec![values.len()], values).unwrap();
    e.insert(
        "v",
        Value::Ragged(Ragged::new(values, splits.into()).unwrap()),
    );
    let strings: Vec<Vec<u8>> = (0..N).map(|i| vec![b'r'; i]).collect();
    e.insert("s", Value::Tensor(Tensor::strings(&strings)));
    e
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/shard");
    for (name, compression) in [
        ("v1-none", Compression::None),
        ("v1-lz4", Compression::Lz4),
        ("v1-zstd", Compression::Zstd),
    ] {
        let dir = root.join(name);
        let ds = Dataset::from_columns(fixture_columns()).unwrap();
        let opts = WriteOptions {
            compression,
            // Small shards: the fixture spans several files.
            shard_bytes: 400,
            threads: 1,
            overwrite: true,
            ..WriteOptions::default()
        };
        let m = write_shards(&ds, &dir, opts, None).unwrap();
        println!(
            "{}: {} shards, {} records",
            dir.display(),
            m.shards.len(),
            m.num_records
        );
    }
}
