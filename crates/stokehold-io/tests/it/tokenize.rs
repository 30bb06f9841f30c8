//! `tokenize` (feature `tokenize`) through the conformance suite, alone, batched (a batch's
//! documents encoded into ragged rows) and packed with concat-then-split: the committed
//! tokenizer (testdata/tokenizer; the ids' equality with the Python `tokenizers` package is
//! python/tests/test_tokenize.py's).

use stokehold_core::ops::pack::{PackMode, PackOptions};
use stokehold_core::{testing, Dataset, Example, Tensor, Value};
use stokehold_io::tokenize::{load_tokenizer, tokenize_fn, TokenizeOptions};

const CUTS: usize = 12;

fn tokenizer() -> std::sync::Arc<tokenizers::Tokenizer> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/tokenizer/tokenizer.json"
    );
    load_tokenizer("tokenize", path).unwrap()
}

fn texts(n: usize) -> Dataset {
    let docs: Vec<String> = (0..n)
        .map(|i| format!("document {i}: café 東京 {} 🚀", "the data ".repeat(i % 7)))
        .collect();
    Dataset::from_columns(Example::new().with("text", Tensor::strings(&docs))).unwrap()
}

#[test]
fn tokenize_passes_the_conformance_suite_alone_batched_and_packed() {
    let opts = TokenizeOptions {
        eos_id: Some(3),
        ..Default::default()
    };
    let f = tokenize_fn("text", "ids", tokenizer(), &opts).unwrap();
    let ds = texts(40).map("tokenize", f.clone());
    testing::check("tokenize", &ds, CUTS);
    let batched = texts(40).batch(6, false).unwrap().map("tokenize", f);
    testing::check("batch.tokenize", &batched, CUTS);
    let first = batched.iter(0).unwrap().next().unwrap().unwrap();
    assert!(matches!(first.get("ids"), Some(Value::Ragged(r)) if r.rows() == 6));
    let packed = ds
        .pack(PackOptions {
            lengths: vec![("ids".into(), 16)],
            num_packing_bins: 1,
            mode: PackMode::ConcatThenSplit,
            meta_features: vec![],
            shuffle_bins: false,
            seed: 0,
            cu_seqlens: true,
        })
        .unwrap();
    testing::check("tokenize.pack[concat_then_split]", &packed, CUTS);
}

#[test]
fn a_broken_tokenizer_json_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, r#"{"model": {"type": "BPE", "vocab": 7}}"#).unwrap();
    let err = load_tokenizer("tokenize", path.to_str().unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("tokenizer.json") && err.contains("not a Hugging Face"),
        "{err}"
    );
    let err = load_tokenizer("tokenize", "{").unwrap_err().to_string();
    assert!(err.contains("the JSON given"), "{err}");
}
