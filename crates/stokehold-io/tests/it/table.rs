//! Tables: numpy-written files, the writer, the gather op in pipelines, and bad input.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stokehold_core::ops::gather::{Gather, KeyMap};
use stokehold_core::{DType, Dataset, DatasetIter, Example, Tensor};
use stokehold_io::table::{concat_npy, Table, TableWriter};

/// A `.npy` file with the header text numpy 2.4 writes (`np.save`), padded the way it pads.
pub fn npy_bytes(version: u8, dict: &str, data: &[u8]) -> Vec<u8> {
    let prefix = if version == 1 { 10 } else { 12 };
    let total = (prefix + dict.len() + 1).next_multiple_of(64);
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[version, 0]);
    let hlen = total - prefix;
    match version {
        1 => out.extend_from_slice(&(hlen as u16).to_le_bytes()),
        _ => out.extend_from_slice(&(hlen as u32).to_le_bytes()),
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out.extend_from_slice(data);
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A table of `n` rows of `width` f32 where row i holds i*1000 + j.
fn make_table(dir: &Path, n: usize, width: usize) -> Arc<Table> {
    let path = dir.join("feats.npy");
    let mut w = TableWriter::create(&path, DType::F32, &[width]).unwrap();
    for i in 0..n {
        let row: Vec<f32> = (0..width).map(|j| (i * 1000 + j) as f32).collect();
        w.append(&Tensor::from_vec(vec![1, width], row).unwrap())
            .unwrap();
    }
    Arc::new(w.finish().unwrap())
}

#[test]
fn opens_numpy_written_files_v1_and_v3() {
    let dir = tempfile::tempdir().unwrap();
    // np.save(p, np.arange(6, dtype='<f4').reshape(3, 2))
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }";
    let bytes = npy_bytes(1, dict, &f32_bytes(&[0., 1., 2., 3., 4., 5.]));
    assert_eq!(bytes.len(), 152, "numpy writes 152 bytes for this array");
    let t = Table::open(write(dir.path(), "a.npy", &bytes)).unwrap();
    assert_eq!(
        (t.len(), t.shape(), t.dtype()),
        (3, &[3usize, 2][..], DType::F32)
    );
    assert_eq!(t.row(2).unwrap().to_vec::<f32>().unwrap(), vec![4., 5.]);
    // np.lib.format.write_array(f, np.arange(6, dtype='<u2').reshape(3, 2), version=(3, 0))
    let dict = "{'descr': '<u2', 'fortran_order': False, 'shape': (3, 2), }";
    let data: Vec<u8> = (0u16..6).flat_map(|x| x.to_le_bytes()).collect();
    let t = Table::open(write(dir.path(), "b.npy", &npy_bytes(3, dict, &data))).unwrap();
    assert_eq!(t.header().unwrap().version, (3, 0));
    assert_eq!(
        t.take(&[2, 0]).unwrap().to_vec::<u16>().unwrap(),
        vec![4, 5, 0, 1]
    );
}

#[test]
fn writer_is_atomic_and_concat_joins_rows() {
    let dir = tempfile::tempdir().unwrap();
    let t = make_table(dir.path(), 5, 3);
    assert_eq!(
        t.row(4).unwrap().to_vec::<f32>().unwrap(),
        vec![4000., 4001., 4002.]
    );
    let names = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        names(dir.path()),
        vec!["feats.npy"],
        "no temp file left behind"
    );
    // A writer dropped before finish leaves nothing.
    let mut w = TableWriter::create(dir.path().join("half.npy"), DType::F32, &[3]).unwrap();
    w.append(&Tensor::from_vec(vec![1, 3], vec![1f32, 2., 3.]).unwrap())
        .unwrap();
    drop(w);
    assert_eq!(names(dir.path()), vec!["feats.npy"]);

    let second = write(
        dir.path(),
        "b.npy",
        &npy_bytes(
            1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
            &f32_bytes(&[7.; 6]),
        ),
    );
    let mut seen = Vec::new();
    let out = dir.path().join("all.npy");
    let all = concat_npy(&[t.path().to_path_buf(), second], &out, |d, n| {
        seen.push((d, n))
    })
    .unwrap();
    assert_eq!(all.shape(), &[7, 3]);
    assert_eq!(
        all.take(&[1, 5]).unwrap().to_vec::<f32>().unwrap(),
        vec![1000., 1001., 1002., 7., 7., 7.]
    );
    assert_eq!(seen.last(), Some(&(84, 84)));
    let bad = write(
        dir.path(),
        "c.npy",
        &npy_bytes(
            1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }",
            &f32_bytes(&[0.; 4]),
        ),
    );
    let e = concat_npy(&[out.clone(), bad], &dir.path().join("x.npy"), |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("c.npy") && e.contains("[4]") && e.contains("[3]"),
        "{e}"
    );
}

fn captions(ids: Vec<i64>) -> Dataset {
    let n = ids.len();
    let caption: Vec<i64> = (0..n as i64).collect();
    let cols = Example::new()
        .with("image_id", Tensor::from_vec(vec![n], ids).unwrap())
        .with("caption", Tensor::from_vec(vec![n], caption).unwrap());
    Dataset::from_columns(cols).unwrap()
}

#[test]
fn gather_after_shuffle_and_batch_matches_rows() {
    let dir = tempfile::tempdir().unwrap();
    let table = make_table(dir.path(), 20, 4);
    // Five captions per image, as in the example.
    let ids: Vec<i64> = (0..100).map(|c| c / 5).collect();
    let ds = captions(ids.clone())
        .shuffle(11)
        .batch(8, false)
        .unwrap()
        .gather(table.clone(), "image_id", "feats");
    let batches = ds.iter(1).unwrap().collect_all().unwrap();
    assert_eq!(batches.len(), 13);
    let mut order = Vec::new();
    for b in &batches {
        let id = b.tensor("t", "image_id").unwrap().to_vec::<i64>().unwrap();
        let feats = b.tensor("t", "feats").unwrap();
        assert_eq!(feats.shape(), &[id.len(), 4]);
        let got = feats.to_vec::<f32>().unwrap();
        for (k, i) in id.iter().enumerate() {
            let want: Vec<f32> = (0..4).map(|j| (*i as usize * 1000 + j) as f32).collect();
            assert_eq!(&got[k * 4..k * 4 + 4], &want[..]);
        }
        order.extend(b.tensor("t", "caption").unwrap().to_vec::<i64>().unwrap());
    }
    assert_ne!(order, (0..100).collect::<Vec<_>>(), "captions are shuffled");
    order.sort();
    assert_eq!(order, (0..100).collect::<Vec<_>>());

    // Gather per element, then batch: the same batches.
    let per_elem = captions(ids)
        .shuffle(11)
        .gather(table, "image_id", "feats")
        .batch(8, false)
        .unwrap();
    let again = per_elem.iter(1).unwrap().collect_all().unwrap();
    for (a, b) in batches.iter().zip(&again) {
        assert_eq!(
            a.tensor("t", "feats").unwrap(),
            b.tensor("t", "feats").unwrap()
        );
    }
}

#[test]
fn gather_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let table = make_table(dir.path(), 3, 2);
    let keys = Arc::new(
        KeyMap::from_tensor(&Tensor::strings(&["cat.jpg", "dog.jpg", "owl.jpg"])).unwrap(),
    );
    let cols = Example::new().with("image", Tensor::strings(&["owl.jpg", "cat.jpg", "bee.jpg"]));
    let g = Gather {
        table,
        index: "image".into(),
        output: "feats".into(),
        keys: Some(keys),
    };
    let ds = Dataset::from_columns(cols).unwrap().gather_with(g);
    assert_eq!(
        ds.get(0)
            .unwrap()
            .tensor("t", "feats")
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![2000., 2001.]
    );
    let e = ds.get(2).unwrap_err().to_string();
    assert!(e.contains("bee.jpg") && e.contains("image"), "{e}");
}

#[test]
fn index_out_of_range_names_index_and_length() {
    let dir = tempfile::tempdir().unwrap();
    let table = make_table(dir.path(), 20, 2);
    let ds = captions(vec![3, 19, 20, 4])
        .batch(4, false)
        .unwrap()
        .gather(table.clone(), "image_id", "feats");
    let e = ds.get(0).unwrap_err().to_string();
    assert!(
        e.contains("index 20") && e.contains("length 20") && e.contains("feats.npy"),
        "{e}"
    );
    let e = table.row(25).unwrap_err().to_string();
    assert!(e.contains("index 25") && e.contains("length 20"), "{e}");
    let e = captions(vec![-2])
        .gather(table, "image_id", "feats")
        .get(0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("-2") && e.contains("length 20"), "{e}");
}

#[test]
fn index_feature_of_wrong_dtype_is_a_schema_error() {
    let dir = tempfile::tempdir().unwrap();
    let table = make_table(dir.path(), 4, 2);
    let cols = Example::new().with(
        "image_id",
        Tensor::from_vec(vec![2], vec![1.0f32, 2.0]).unwrap(),
    );
    let ds = Dataset::from_columns(cols)
        .unwrap()
        .gather(table.clone(), "image_id", "feats");
    let e = ds.get(1).unwrap_err().to_string();
    assert!(
        e.contains("image_id")
            && e.contains("float32")
            && e.contains("integer")
            && e.contains("gather"),
        "{e}"
    );
    let e = captions(vec![1])
        .gather(table, "img", "feats")
        .get(0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"img\"") && e.contains("image_id"), "{e}");
}

#[test]
fn truncated_npy_names_expected_and_actual_size() {
    let dir = tempfile::tempdir().unwrap();
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }";
    let mut bytes = npy_bytes(1, dict, &f32_bytes(&[0.; 6]));
    bytes.truncate(bytes.len() - 5);
    let e = Table::open(write(dir.path(), "t.npy", &bytes))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t.npy") && e.contains("truncated") && e.contains("152") && e.contains("147"),
        "{e}"
    );
    let e = Table::open(write(dir.path(), "h.npy", &bytes[..40]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("h.npy") && e.contains("header"), "{e}");
    let e = Table::open(write(dir.path(), "e.npy", b""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("e.npy") && e.contains("magic"), "{e}");
}

#[test]
fn fortran_object_and_big_endian_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    // np.save(p, np.asfortranarray(np.arange(6.).reshape(2, 3)))
    let f = npy_bytes(
        1,
        "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }",
        &[0; 48],
    );
    let e = Table::open(write(dir.path(), "f.npy", &f))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("f.npy") && e.contains("Fortran-ordered") && e.contains("ascontiguousarray"),
        "{e}"
    );
    // np.save(p, np.array([1, 'a', None], dtype=object))
    let o = npy_bytes(
        1,
        "{'descr': '|O', 'fortran_order': False, 'shape': (3,), }",
        b"\x80\x04pickle",
    );
    let e = Table::open(write(dir.path(), "o.npy", &o))
        .unwrap_err()
        .to_string();
    assert!(e.contains("o.npy") && e.contains("object dtype"), "{e}");
    let b = npy_bytes(
        1,
        "{'descr': '>i2', 'fortran_order': False, 'shape': (4,), }",
        &[0; 8],
    );
    let e = Table::open(write(dir.path(), "b.npy", &b))
        .unwrap_err()
        .to_string();
    assert!(e.contains("big-endian") && e.contains("'>i2'"), "{e}");
}

#[test]
fn one_dimensional_tables_have_scalar_rows() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0i64..5).flat_map(|x| (x * 10).to_le_bytes()).collect();
    let p = write(
        dir.path(),
        "l.npy",
        &npy_bytes(
            1,
            "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }",
            &data,
        ),
    );
    let t = Arc::new(Table::open(p).unwrap());
    let r = t.row(3).unwrap();
    assert_eq!((r.shape(), r.to_vec::<i64>().unwrap()), (&[][..], vec![30]));
    let ds = captions(vec![4, 1])
        .batch(2, false)
        .unwrap()
        .gather(t, "image_id", "label");
    assert_eq!(
        ds.get(0)
            .unwrap()
            .tensor("t", "label")
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![40, 10]
    );
}

#[test]
fn table_from_a_fixed_shape_shard_feature() {
    use stokehold_core::Ragged;
    use stokehold_io::shard::{write_shards, WriteOptions};
    use stokehold_io::table::table_from_shards;
    let dir = tempfile::tempdir().unwrap();
    let n = 50usize;
    let emb: Vec<f32> = (0..n * 3).map(|x| x as f32).collect();
    let splits: Vec<u64> = (0..=n as u64).collect();
    let tok = Ragged::new(
        Tensor::from_vec(vec![n], vec![1i32; n]).unwrap(),
        splits.into(),
    )
    .unwrap();
    let mut tok_splits = vec![0u64];
    tok_splits.extend((1..=n as u64).map(|i| i * (i + 1) / 2));
    let vals = Tensor::from_vec(vec![n * (n + 1) / 2], vec![0i32; n * (n + 1) / 2]).unwrap();
    let varying = Ragged::new(vals, tok_splits.into()).unwrap();
    let cols = Example::new()
        .with("emb", Tensor::from_vec(vec![n, 3], emb).unwrap())
        .with("one", tok)
        .with("varying", varying);
    let ds = Dataset::from_columns(cols).unwrap();
    let shards = dir.path().join("shards");
    let opts = WriteOptions {
        shard_bytes: 1024,
        ..WriteOptions::default()
    };
    write_shards(&ds, &shards, opts, None).unwrap();
    let out = dir.path().join("emb.npy");
    let t = table_from_shards(&shards, "emb", &out, |_, _| {}).unwrap();
    assert_eq!(t.shape(), &[n, 3]);
    assert_eq!(
        t.row(49).unwrap().to_vec::<f32>().unwrap(),
        vec![147., 148., 149.]
    );
    let e = table_from_shards(&shards, "varying", dir.path().join("v.npy"), |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("no fixed shape"), "{e}");
    let e = table_from_shards(&shards, "nope", dir.path().join("v.npy"), |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("\"emb\""), "{e}");
}
