//! Parquet and Arrow IPC (issue 45 items 1-2): values equal to what pyarrow / datasets read from
//! the committed fixtures (testdata/parquet/make_fixtures.py), page-granular blocks, the decoded
//! cache's bound, nulls and defaults, unsupported types, Hugging Face folders and indices, broken
//! files named by file and position.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use stokehold_core::{Error, MapDataset, Tensor};
use stokehold_io::parquet::{open_arrow, open_parquet, ColumnarDataset, ColumnarOptions};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/parquet")
        .join(name)
}

fn expected() -> Json {
    serde_json::from_slice(&std::fs::read(fixture("expected.json")).unwrap()).unwrap()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Whether tensor `t` holds what pyarrow gave (`want`: a number, bool, string (bytes as hex) or
/// a list of them).
fn same(t: &Tensor, want: &Json) -> bool {
    let flat: Vec<Json> = match want {
        Json::Array(a) => a
            .iter()
            .flat_map(|x| match x {
                Json::Array(inner) => inner.clone(),
                other => vec![other.clone()],
            })
            .collect(),
        other => vec![other.clone()],
    };
    if t.len() != flat.len() {
        return false;
    }
    if t.dtype() == stokehold_core::DType::Bytes {
        return flat.iter().enumerate().all(|(i, w)| {
            let s = t.string(i).unwrap();
            w.as_str().is_some_and(|w| w.as_bytes() == s || w == hex(s))
        });
    }
    if t.dtype() == stokehold_core::DType::Bool {
        let v = t.to_vec::<bool>().unwrap();
        return flat.iter().zip(v).all(|(w, g)| w.as_bool() == Some(g));
    }
    use stokehold_core::DType;
    let v: Vec<f64> = match t.dtype() {
        DType::I32 => t
            .to_vec::<i32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::I64 => t
            .to_vec::<i64>()
            .unwrap()
            .into_iter()
            .map(|x| x as f64)
            .collect(),
        DType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::F64 => t.to_vec::<f64>().unwrap(),
        other => panic!("no comparison for {other}"),
    };
    flat.iter().zip(v).all(|(w, g)| w.as_f64() == Some(g))
}

fn check_picks(ds: &ColumnarDataset, picks: &Json, name: &str) {
    let picks = picks.as_object().unwrap();
    assert!(!picks.is_empty());
    for (i, row) in picks {
        let e = ds.get(i.parse().unwrap()).unwrap();
        for (col, want) in row.as_object().unwrap() {
            let t = e
                .tensor("t", col)
                .unwrap_or_else(|err| panic!("{name} row {i}: {err}"));
            assert!(
                same(t, want),
                "{name} row {i} column {col}: {t:?} vs {want}"
            );
        }
        assert_eq!(
            e.names().len(),
            row.as_object().unwrap().len(),
            "{name} row {i}"
        );
    }
}

#[test]
fn parquet_values_equal_pyarrows_with_and_without_page_index() {
    let want = expected();
    for name in ["paged", "nopage"] {
        let ds = open_parquet(&[fixture(&format!("{name}.parquet"))], &Default::default()).unwrap();
        assert_eq!(ds.len(), want[name]["rows"].as_u64().unwrap());
        check_picks(&ds, &want[name]["picks"], name);
        let e = ds.get(3).unwrap();
        assert_eq!(e.tensor("t", "vec").unwrap().shape(), &[3]);
        assert_eq!(e.tensor("t", "tokens").unwrap().shape(), &[3]);
        assert_eq!(e.tensor("t", "cat").unwrap().string(0), Some(&b"red"[..]));
        let layout = ds.layout();
        let (blocks, unit) = (layout[0].1, layout[0].2);
        if name == "paged" {
            // Pages of at most 100 rows in row groups of 250: 3 per row group.
            assert_eq!((blocks, unit), (12, "page"));
        } else {
            assert_eq!((blocks, unit), (4, "row group"));
        }
    }
}

#[test]
fn columns_project_and_reach_into_structs() {
    let opts = ColumnarOptions {
        columns: Some(vec!["meta.tag".into(), "id".into()]),
        ..Default::default()
    };
    let ds = open_parquet(&[fixture("paged.parquet")], &opts).unwrap();
    let e = ds.get(12).unwrap();
    let mut names = e.names();
    names.sort();
    assert_eq!(names, ["id", "meta.tag"]);
    assert_eq!(
        e.tensor("t", "meta.tag").unwrap().string(0),
        Some(&b"t5"[..])
    );
    let opts = ColumnarOptions {
        columns: Some(vec!["nope".into()]),
        ..Default::default()
    };
    let err = open_parquet(&[fixture("paged.parquet")], &opts)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("no column \"nope\"") && err.contains("meta.score"),
        "{err}"
    );
}

#[test]
fn the_decoded_cache_is_bounded_and_reused() {
    let path = fixture("paged.parquet");
    let tiny = ColumnarOptions {
        cache_bytes: Some(1),
        ..Default::default()
    };
    let ds = open_parquet(&[&path], &tiny).unwrap();
    for i in 0..ds.len() {
        ds.get(i).unwrap();
    }
    // In order, each of the 12 pages is decoded once even with room for one block.
    assert_eq!(ds.cache_stats().1, 12);
    for i in [0, 500, 0] {
        ds.get(i).unwrap();
    }
    assert_eq!(ds.cache_stats().1, 15);
    let roomy = open_parquet(&[&path], &Default::default()).unwrap();
    for i in [0, 500, 0, 501, 1] {
        roomy.get(i).unwrap();
    }
    assert_eq!(roomy.cache_stats(), (3, 2));
}

#[test]
fn nulls_are_errors_naming_column_and_row_unless_defaulted() {
    let path = fixture("nullable.parquet");
    let ds = open_parquet(&[&path], &Default::default()).unwrap();
    assert_eq!(
        ds.get(0)
            .unwrap()
            .tensor("t", "l")
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        [1]
    );
    let err = ds.get(2).unwrap_err().to_string();
    assert!(
        err.contains("column \"maybe\" is null at row 2 of") && err.contains("nullable.parquet"),
        "{err}"
    );
    let err = ds.get(1).unwrap_err().to_string();
    assert!(err.contains("column \"s.a\" is null at row 1"), "{err}");
    let only_l = ColumnarOptions {
        columns: Some(vec!["l".into()]),
        ..Default::default()
    };
    let err = open_parquet(&[&path], &only_l)
        .unwrap()
        .get(1)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("column \"l\" holds a null inside its list at row 1"),
        "{err}"
    );
    let opts = ColumnarOptions {
        columns: Some(vec!["maybe".into(), "s".into(), "l".into()]),
        defaults: vec![
            ("maybe".into(), serde_json::json!(-1)),
            ("s.a".into(), serde_json::json!(0)),
            ("l".into(), serde_json::json!([])),
        ],
        ..Default::default()
    };
    let ds = open_parquet(&[&path], &opts).unwrap();
    let e = ds.get(3).unwrap();
    assert_eq!(e.tensor("t", "s.a").unwrap().to_vec::<i32>().unwrap(), [0]);
    assert_eq!(e.tensor("t", "l").unwrap().shape(), &[0]);
    assert_eq!(
        ds.get(4)
            .unwrap()
            .tensor("t", "maybe")
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        [-1]
    );
    // A struct that is null itself nulls its children.
    assert!(ds
        .get(1)
        .unwrap_err()
        .to_string()
        .contains("null inside its list"));
    let e = open_parquet(
        &[&path],
        &ColumnarOptions {
            columns: Some(vec!["s".into()]),
            defaults: vec![("s.a".into(), serde_json::json!(7))],
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        e.get(1)
            .unwrap()
            .tensor("t", "s.a")
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        [7]
    );
}

#[test]
fn an_unsupported_type_names_its_column() {
    let path = fixture("unsupported.parquet");
    let err = open_parquet(&[&path], &Default::default()).err().unwrap();
    let text = err.to_string();
    assert!(
        text.contains("column \"day\" has Arrow type Date32"),
        "{text}"
    );
    assert!(text.contains("columns=[...]"), "{text}");
    let opts = ColumnarOptions {
        columns: Some(vec!["id".into()]),
        ..Default::default()
    };
    let ds = open_parquet(&[&path], &opts).unwrap();
    assert_eq!(ds.len(), 2);
}

#[test]
fn arrow_ipc_file_and_stream_read_alike() {
    let want = expected();
    for name in ["data.arrow", "data.arrows"] {
        let ds = open_arrow(&[fixture(name)], &Default::default()).unwrap();
        assert_eq!(ds.len(), 100, "{name}");
        assert_eq!(ds.layout()[0].1, 2, "{name}: two record batches");
        check_picks(&ds, &want["ipc"]["picks"], name);
    }
}

#[test]
fn hugging_face_folders_and_an_indices_mapping() {
    let want = expected();
    for name in ["hf_saved", "hf_shuffled"] {
        let ds = open_arrow(
            &[fixture(&format!("{name}/data-00000-of-00001.arrow"))],
            &Default::default(),
        )
        .unwrap();
        assert_eq!(ds.len(), want[name]["rows"].as_u64().unwrap());
        check_picks(&ds, &want[name]["picks"], name);
    }
    let indices: Vec<u64> = want["hf_indices"]["indices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let ds = open_arrow(
        &[fixture("hf_saved/data-00000-of-00001.arrow")],
        &Default::default(),
    )
    .unwrap()
    .with_indices(indices)
    .unwrap();
    check_picks(&ds, &want["hf_indices"]["picks"], "hf_indices");
    let bad = open_arrow(
        &[fixture("hf_saved/data-00000-of-00001.arrow")],
        &Default::default(),
    )
    .unwrap()
    .with_indices(vec![0, 50])
    .err()
    .unwrap()
    .to_string();
    assert!(
        bad.contains("index 50 (at position 1") && bad.contains("50 rows"),
        "{bad}"
    );
}

#[test]
fn a_truncated_footer_and_a_corrupt_page_name_file_and_position() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(fixture("paged.parquet")).unwrap();
    let cut = dir.path().join("cut.parquet");
    std::fs::write(&cut, &whole[..whole.len() - 5]).unwrap();
    match open_parquet(&[&cut], &Default::default()) {
        Err(Error::Corrupt {
            path,
            offset,
            reason,
        }) => {
            assert_eq!(path, cut);
            assert_eq!(offset, whole.len() as u64 - 5 - 8);
            assert!(reason.contains("not a readable Parquet file"), "{reason}");
        }
        other => panic!("{:?}", other.map(|d| d.len())),
    }
    // Garbage over the middle of row group 1's data: every row is read, none silently.
    let bad = dir.path().join("bad.parquet");
    let mut bytes = whole.clone();
    let mid = bytes.len() * 3 / 8;
    for b in &mut bytes[mid..mid + 400] {
        *b = 0xA5;
    }
    std::fs::write(&bad, &bytes).unwrap();
    let ds = open_parquet(&[&bad], &Default::default()).unwrap();
    let errors: Vec<String> = (0..ds.len())
        .filter_map(|i| ds.get(i).err().map(|e| e.to_string()))
        .collect();
    assert!(!errors.is_empty(), "corrupt data read without an error");
    assert!(
        errors
            .iter()
            .all(|e| e.contains("bad.parquet") && e.contains("row group")),
        "{errors:?}"
    );
}

#[test]
fn rows_read_from_many_threads_agree() {
    let ds = std::sync::Arc::new(
        open_parquet(
            &[fixture("paged.parquet"), fixture("nopage.parquet")],
            &ColumnarOptions {
                cache_bytes: Some(20_000),
                ..Default::default()
            },
        )
        .unwrap(),
    );
    assert_eq!(ds.len(), 2000);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let ds = ds.clone();
            s.spawn(move || {
                for k in 0..500u64 {
                    let i = (k * 7919 + t * 131) % 2000;
                    let e = ds.get(i).unwrap();
                    assert_eq!(
                        e.tensor("t", "id").unwrap().to_vec::<i64>().unwrap(),
                        [(i % 1000) as i64]
                    );
                }
            });
        }
    });
}
