//! Token files (issue 46 item 1): megatron-core's GPTDataset / BlendedDataset order sample for
//! sample against `testdata/tokens/megatron_samples.json` (made by megatron-core itself, see
//! `make_fixtures.py` there), numpy's RandomState shuffle, flat files, bad input.

use std::path::{Path, PathBuf};

use serde_json::Value;
use stokehold_core::{DType, Dataset, Error};
use stokehold_io::tokens::numpy_rng::RandomState;
use stokehold_io::tokens::{read_tokens, Order, TokenFile};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/tokens")
}

fn fixture() -> Value {
    let text = std::fs::read_to_string(dir().join("megatron_samples.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ids(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

fn all_tokens(ds: &Dataset) -> Vec<Vec<i64>> {
    (0..ds.len().unwrap())
        .map(|i| {
            ds.get(i)
                .unwrap()
                .tensor("t", "tokens")
                .unwrap()
                .to_vec::<i64>()
                .unwrap()
        })
        .collect()
}

#[test]
fn numpy_random_state_shuffle_is_bit_exact() {
    for case in fixture()["numpy_shuffles"].as_array().unwrap() {
        let n = case["n"].as_u64().unwrap();
        let mut perm: Vec<i64> = (0..n as i64).collect();
        RandomState::new(case["seed"].as_u64().unwrap() as u32).shuffle(&mut perm);
        assert_eq!(perm, ids(&case["perm"]), "seed {} n {n}", case["seed"]);
    }
}

#[test]
fn megatron_order_equals_megatron_core_sample_for_sample() {
    let f = fixture();
    let cases = f["cases"].as_array().unwrap();
    assert!(cases.len() >= 3);
    for case in cases {
        let path = dir().join(case["file"].as_str().unwrap());
        let docs = ids(&case["documents"]);
        let order = Order::Megatron {
            seed: case["seed"].as_u64().unwrap() as u32,
            num_samples: vec![case["num_samples"].as_u64()],
            documents: vec![Some(docs[0] as u32..docs[1] as u32)],
            blend: None,
        };
        let seq_len = case["seq_len"].as_u64().unwrap();
        let ds = read_tokens(&[path.as_path()], seq_len, order, None).unwrap();
        let want: Vec<Vec<i64>> = case["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(ids)
            .collect();
        assert_eq!(ds.len(), Some(want.len() as u64), "{case:?}");
        assert_eq!(
            all_tokens(&ds),
            want,
            "seed {} seq_len {seq_len}",
            case["seed"]
        );
        // get_batch stacks the same samples.
        let b = ds
            .get_batch(&[0, 2, 1])
            .unwrap()
            .tensor("t", "tokens")
            .unwrap()
            .to_vec::<i64>()
            .unwrap();
        assert_eq!(b, [&want[0][..], &want[2], &want[1]].concat());
    }
}

#[test]
fn megatron_blend_equals_megatron_core_blended_dataset() {
    let f = fixture();
    let b = &f["blend"];
    let paths: Vec<PathBuf> = b["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| dir().join(p.as_str().unwrap()))
        .collect();
    let paths: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
    let weights: Vec<f64> = b["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_f64().unwrap())
        .collect();
    let order = Order::Megatron {
        seed: b["seed"].as_u64().unwrap() as u32,
        num_samples: ids(&b["num_samples"])
            .into_iter()
            .map(|n| Some(n as u64))
            .collect(),
        documents: vec![None, None],
        blend: Some((weights, b["size"].as_u64().unwrap())),
    };
    let ds = read_tokens(&paths, b["seq_len"].as_u64().unwrap(), order, None).unwrap();
    let want: Vec<Vec<i64>> = b["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| ids(&s[1]))
        .collect();
    assert_eq!(all_tokens(&ds), want);
}

#[test]
fn megatron_files_read_every_dtype_code_and_their_documents() {
    let a = TokenFile::open(dir().join("corpus_a"), None).unwrap();
    assert_eq!(a.dtype(), DType::U16);
    assert_eq!(
        a.document_indices().unwrap().len(),
        a.sequence_lengths().len() + 1
    );
    let b = TokenFile::open(dir().join("corpus_b.idx"), None).unwrap();
    assert_eq!(b.dtype(), DType::I32);
    // Every code megatron-core has, rewritten into a copy of corpus_a's index and data.
    let tmp = tempfile::tempdir().unwrap();
    let idx = std::fs::read(dir().join("corpus_a.idx")).unwrap();
    let lens = a.sequence_lengths().to_vec();
    let mut first = Vec::new();
    a.read(0, 0, lens[0] as u64, &mut first).unwrap();
    for (code, dtype) in [
        (1u8, DType::U8),
        (2, DType::I8),
        (3, DType::I16),
        (4, DType::I32),
        (5, DType::I64),
        (6, DType::F64),
        (7, DType::F32),
        (8, DType::U16),
    ] {
        let w = dtype.size().unwrap();
        let (mut bin, mut new_idx) = (Vec::new(), idx.clone());
        new_idx[17] = code;
        let n = lens.len();
        let mut ptr = 0u64;
        for (i, &l) in lens.iter().enumerate() {
            new_idx[34 + 4 * n + 8 * i..34 + 4 * n + 8 * i + 8]
                .copy_from_slice(&(ptr as i64).to_le_bytes());
            ptr += l as u64 * w as u64;
        }
        for t in 0..ptr / w as u64 {
            let v = (t % 100) as u8; // fits every type
            bin.extend(std::iter::once(v).chain(std::iter::repeat_n(0, w - 1)));
            if matches!(dtype, DType::F32 | DType::F64) {
                let len = bin.len();
                let f: Vec<u8> = if w == 4 {
                    (v as f32).to_le_bytes().to_vec()
                } else {
                    (v as f64).to_le_bytes().to_vec()
                };
                bin[len - w..].copy_from_slice(&f);
            }
        }
        let p = tmp.path().join(format!("c{code}"));
        std::fs::write(p.with_extension("idx"), &new_idx).unwrap();
        std::fs::write(p.with_extension("bin"), &bin).unwrap();
        let f = TokenFile::open(&p, None).unwrap();
        assert_eq!(f.dtype(), dtype);
        let mut got = Vec::new();
        f.read(0, 0, 5, &mut got).unwrap();
        assert_eq!(got, [0, 1, 2, 3, 4], "code {code}");
    }
}

#[test]
fn flat_files_cut_overlapping_windows_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let raw = tmp.path().join("train.bin");
    std::fs::write(
        &raw,
        (0u16..50)
            .flat_map(|t| t.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let ds = read_tokens(&[raw.as_path()], 7, Order::InFile, None).unwrap();
    assert_eq!(ds.len(), Some(7)); // (50 - 1) / 7
    let w = all_tokens(&ds);
    assert_eq!(w[0], (0..8).collect::<Vec<i64>>());
    assert_eq!(w[6], (42..50).collect::<Vec<i64>>());
    // A headerless .npy (OLMo-core's memmaps) needs its dtype; a real .npy carries it.
    let olmo = tmp.path().join("part-0.npy");
    std::fs::write(
        &olmo,
        (0u32..50)
            .flat_map(|t| t.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let e = read_tokens(&[olmo.as_path()], 7, Order::InFile, None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("part-0.npy") && e.contains("dtype='uint32'"),
        "{e}"
    );
    let ds2 = read_tokens(&[olmo.as_path()], 7, Order::InFile, Some(DType::U32)).unwrap();
    assert_eq!(all_tokens(&ds2), w);
    let npy = tmp.path().join("ids.npy");
    let mut w_ = stokehold_io::table::TableWriter::create(&npy, DType::U32, &[]).unwrap();
    w_.append(&stokehold_core::Tensor::from_vec(vec![50], (0u32..50).collect()).unwrap())
        .unwrap();
    w_.finish().unwrap();
    let ds3 = read_tokens(&[npy.as_path()], 7, Order::InFile, None).unwrap();
    assert_eq!(all_tokens(&ds3), w);
    // Two files: the first's windows, then the second's.
    let both = read_tokens(&[raw.as_path(), npy.as_path()], 7, Order::InFile, None).unwrap();
    assert_eq!(all_tokens(&both), [w.clone(), w.clone()].concat());
    // stokehold's order: the same windows, shuffled, a different order each epoch.
    let sh = read_tokens(
        &[raw.as_path(), npy.as_path()],
        7,
        Order::Shuffled { seed: 3 },
        None,
    )
    .unwrap();
    let mut got = all_tokens(&sh);
    assert_ne!(got, all_tokens(&both));
    got.sort();
    let mut want = all_tokens(&both);
    want.sort();
    assert_eq!(got, want);
}

fn corrupt(e: Error) -> String {
    assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
    e.to_string()
}

#[test]
fn bad_token_files_are_named_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = std::fs::read(dir().join("corpus_a.idx")).unwrap();
    let bin = std::fs::read(dir().join("corpus_a.bin")).unwrap();
    let put = |name: &str, i: &[u8], b: &[u8]| {
        let p = tmp.path().join(name);
        std::fs::write(p.with_extension("idx"), i).unwrap();
        std::fs::write(p.with_extension("bin"), b).unwrap();
        p
    };
    // A truncated .bin: the last sequence runs past its end.
    let p = put("short", &idx, &bin[..bin.len() - 2]);
    let e = corrupt(TokenFile::open(&p, None).unwrap_err());
    assert!(
        e.contains("short.idx") && e.contains("sequence 59") && e.contains("past"),
        "{e}"
    );
    // A lying header: a sequence count of 2^60 is refused before anything is allocated.
    let mut lie = idx.clone();
    lie[18..26].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let e = corrupt(TokenFile::open(put("lie", &lie, &bin), None).unwrap_err());
    assert!(
        e.contains("lie.idx") && e.contains("sequence count 1152921504606846976"),
        "{e}"
    );
    let mut lie = idx.clone();
    lie[26..34].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = corrupt(TokenFile::open(put("lie2", &lie, &bin), None).unwrap_err());
    assert!(e.contains("document count"), "{e}");
    let mut bad = idx.clone();
    bad[17] = 9;
    let e = corrupt(TokenFile::open(put("code", &bad, &bin), None).unwrap_err());
    assert!(e.contains("dtype code 9"), "{e}");
    let e = corrupt(
        TokenFile::open(
            put(
                "magic",
                b"MMIDIDX\x00\x01 and more bytes than a header needs",
                &bin,
            ),
            None,
        )
        .unwrap_err(),
    );
    assert!(e.contains("MMIDIDX"), "{e}");
    let e = corrupt(TokenFile::open(put("tiny", &idx[..20], &bin), None).unwrap_err());
    assert!(e.contains("header"), "{e}");
    // A negative length.
    let mut neg = idx.clone();
    neg[34..38].copy_from_slice(&(-5i32).to_le_bytes());
    let e = corrupt(TokenFile::open(put("neg", &neg, &bin), None).unwrap_err());
    assert!(e.contains("sequence 0: -5 tokens"), "{e}");
    // A flat file of an odd number of bytes.
    let odd = tmp.path().join("odd.bin");
    std::fs::write(&odd, [1u8, 0, 2]).unwrap();
    let e = corrupt(TokenFile::open(&odd, None).unwrap_err());
    assert!(
        e.contains("odd.bin") && e.contains("not a whole number"),
        "{e}"
    );
    // A missing file names it.
    let e = TokenFile::open(tmp.path().join("nope.bin"), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope.bin"), "{e}");
    // Too few tokens for megatron's order, a blend without weights: named.
    let order = Order::Megatron {
        seed: 1,
        num_samples: vec![None, None],
        documents: vec![],
        blend: None,
    };
    let a = dir().join("corpus_a");
    let e = read_tokens(&[a.as_path(), a.as_path()], 8, order, None)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("weight"), "{e}");
}
