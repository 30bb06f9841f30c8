//! The table gather at batch sizes where its copy is split across threads: every result equals
//! a plain row-by-row copy, whatever the order of the indices, and bad indices are named.

use std::path::Path;
use std::sync::Arc;

use stokehold_core::rng::Rng;
use stokehold_core::{DType, Dataset, Example, Parallelism, Tensor};
use stokehold_io::table::{Table, TableWriter};

const ROWS: usize = 3000;
/// 1030 f32 = 4120 bytes: rows straddle pages, as real feature rows do.
const WIDTH: usize = 1030;

/// A table whose row i holds i * 10_000 + j (distinct bytes everywhere).
fn table(dir: &Path) -> Arc<Table> {
    let mut w = TableWriter::create(dir.join("feats.npy"), DType::F32, &[WIDTH]).unwrap();
    for s in (0..ROWS).step_by(500) {
        let v: Vec<f32> = (s..s + 500)
            .flat_map(|i| (0..WIDTH).map(move |j| (i * 10_000 + j) as f32))
            .collect();
        w.append(&Tensor::from_vec(vec![500, WIDTH], v).unwrap())
            .unwrap();
    }
    Arc::new(w.finish().unwrap())
}

/// What a gather must return: the rows copied one by one.
fn plain(table: &Table, idx: &[u64]) -> Vec<u8> {
    idx.iter()
        .flat_map(|&i| table.row(i).unwrap().data().to_vec())
        .collect()
}

fn index_sets() -> Vec<(&'static str, Vec<u64>)> {
    let mut rng = Rng::keyed(11, &[0]);
    let random: Vec<u64> = (0..1024).map(|_| rng.below(ROWS as u64)).collect();
    let mut sorted = random.clone();
    sorted.sort_unstable();
    let repeated: Vec<u64> = (0..1024).map(|k| [7, 7, 2999, 0][k % 4]).collect();
    let all: Vec<u64> = (0..ROWS as u64).rev().collect();
    vec![
        ("random", random),
        ("sorted", sorted),
        ("repeated", repeated),
        ("every row, reversed", all),
        ("one", vec![1234]),
        ("none", vec![]),
    ]
}

#[test]
fn take_equals_a_plain_copy_for_random_sorted_and_repeated_indices() {
    let dir = tempfile::tempdir().unwrap();
    let t = table(dir.path());
    for (what, idx) in index_sets() {
        let got = t.take(&idx).unwrap();
        assert_eq!(got.shape(), &[idx.len(), WIDTH], "{what}");
        assert_eq!(&got.data()[..], &plain(&t, &idx)[..], "{what}");
    }
}

#[test]
fn pipeline_gather_equals_a_plain_copy_on_one_and_several_threads() {
    let dir = tempfile::tempdir().unwrap();
    let t = table(dir.path());
    let (_, idx) = index_sets().remove(0);
    let ids = Tensor::from_vec(vec![idx.len()], idx.iter().map(|&i| i as i64).collect()).unwrap();
    let base = Dataset::from_columns(Example::new().with("id", ids)).unwrap();
    let want: Vec<Vec<u8>> = idx.chunks(300).map(|c| plain(&t, c)).collect();
    for threads in [None, Some(2), Some(4)] {
        let mut ds = base
            .batch(300, false)
            .unwrap()
            .gather(t.clone(), "id", "feats");
        if let Some(p) = threads {
            ds = ds.parallelize(Parallelism::Fixed(p), true);
        }
        let got: Vec<Vec<u8>> = ds
            .iter(0)
            .unwrap()
            .collect_all()
            .unwrap()
            .iter()
            .map(|b| b.tensor("t", "feats").unwrap().data().to_vec())
            .collect();
        assert_eq!(got, want, "{threads:?} threads");
    }
}

#[test]
fn out_of_range_in_a_large_batch_names_the_file_and_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let t = table(dir.path());
    let mut idx: Vec<u64> = (0..1000).collect();
    idx[700] = ROWS as u64 + 5;
    idx[900] = ROWS as u64 + 9;
    let e = t.take(&idx).unwrap_err().to_string();
    assert!(
        e.contains(&format!("index {}", ROWS + 5))
            && e.contains(&format!("length {ROWS}"))
            && e.contains("feats.npy"),
        "{e}"
    );
    let ids = Tensor::from_vec(vec![1000], idx.iter().map(|&i| i as i64).collect()).unwrap();
    let ds = Dataset::from_columns(Example::new().with("id", ids))
        .unwrap()
        .batch(1000, false)
        .unwrap()
        .gather(t, "id", "feats");
    let e = ds.get(0).unwrap_err().to_string();
    assert!(
        e.contains(&format!("index {}", ROWS + 5)) && e.contains("feats.npy"),
        "{e}"
    );
}
