//! A table larger than 4 GiB: a sparse file, values written at offsets on both sides of 2 and 4
//! GiB and read back through `row`, `take` and the gather op. Skipped, with a message, where the
//! file system cannot hold such a file.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use stokehold_core::{DType, Dataset, Example, Tensor};
use stokehold_io::table::npy::encode_header;
use stokehold_io::table::Table;

const WIDTH: usize = 1024; // 4 KiB rows
const ROWS: usize = 1_200_000; // 4.58 GiB of data

fn row_value(i: usize, j: usize) -> f32 {
    (i as f32) + (j as f32) / 2048.0
}

#[test]
#[cfg(target_pointer_width = "64")]
fn table_over_4_gib() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.npy");
    let header = encode_header(DType::F32, &[ROWS, WIDTH], 0).unwrap();
    let rb = WIDTH * 4;
    let size = (header.len() + ROWS * rb) as u64;
    assert!(size > 4 << 30);
    // Rows below 2 GiB, across the 4 GiB byte boundary, just past it, and the last row.
    let four_gib_row = ((4usize << 30) - header.len()) / rb;
    let probes = [
        0,
        1,
        (2usize << 30) / rb,
        four_gib_row,
        four_gib_row + 1,
        ROWS - 1,
    ];
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let written = (|| -> std::io::Result<()> {
        file.write_all_at(&header, 0)?;
        file.set_len(size)?;
        for &i in &probes {
            let bytes: Vec<u8> = (0..WIDTH)
                .flat_map(|j| row_value(i, j).to_le_bytes())
                .collect();
            file.write_all_at(&bytes, (header.len() + i * rb) as u64)?;
        }
        file.sync_all()
    })();
    if let Err(e) = written {
        eprintln!(
            "SKIPPED table_over_4_gib: cannot make a sparse {size}-byte file in {}: {e}",
            dir.path().display()
        );
        return;
    }
    drop(file);
    let table = Arc::new(Table::open(&path).unwrap());
    assert_eq!(table.len(), ROWS as u64);
    let byte_at = |i: usize| header.len() + i * rb;
    assert!(byte_at(four_gib_row) < (4 << 30) && byte_at(four_gib_row + 1) > (4 << 30));
    for &i in &probes {
        let want: Vec<f32> = (0..WIDTH).map(|j| row_value(i, j)).collect();
        assert_eq!(
            table.row(i as u64).unwrap().to_vec::<f32>().unwrap(),
            want,
            "row {i}"
        );
    }
    // A row never written is a hole: zeros.
    assert!(table
        .row(ROWS as u64 / 3)
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .all(|v| *v == 0.0));
    // Batch gather across the boundary, in a pipeline, in reverse order.
    let ids: Vec<i64> = probes.iter().rev().map(|i| *i as i64).collect();
    let cols = Example::new().with(
        "id",
        Tensor::from_vec(vec![ids.len()], ids.clone()).unwrap(),
    );
    let ds = Dataset::from_columns(cols)
        .unwrap()
        .batch(ids.len(), false)
        .unwrap()
        .gather(table.clone(), "id", "f");
    let got = ds
        .get(0)
        .unwrap()
        .tensor("t", "f")
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for (k, i) in ids.iter().enumerate() {
        assert_eq!(got[k * WIDTH + 7], row_value(*i as usize, 7), "row {i}");
    }
    let e = table.row(ROWS as u64).unwrap_err().to_string();
    assert!(
        e.contains(&format!("index {ROWS}")) && e.contains(&format!("length {ROWS}")),
        "{e}"
    );
}
