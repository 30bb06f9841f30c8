//! Every buffer that holds elements counts their bytes in the pipeline's memory budget, through
//! one `Reservation`, and gives them back when it lets them go or is dropped.

use stokehold_core::ops::pack::{PackMode, PackOptions};
use stokehold_core::{key_fn, map_fn, Dataset, DatasetIter, ExecOptions, Executor, Tensor};

/// `n` elements, each an int64 `"x"` and a 1 KiB `"pad"` of `i % 7` zeros-and-ones.
fn kib_elements(n: u64) -> Dataset {
    Dataset::range(n).map(
        "pad",
        map_fn(|mut e, ctx| {
            e.insert(
                "pad",
                Tensor::from_vec(vec![128], vec![ctx.index as i64; 128])?,
            );
            Ok(e)
        }),
    )
}

/// Runs `ds` on its own executor: budget bytes in use after `k` elements, then after the
/// iterator is dropped.
fn used_after(ds: &Dataset, k: usize) -> (usize, usize) {
    let exec = Executor::new(ExecOptions::default());
    let mut it = exec.iter(ds, 0).unwrap();
    for _ in 0..k {
        it.next().unwrap().unwrap();
    }
    let during = exec.budget().used();
    drop(it);
    (during, exec.budget().used())
}

#[test]
fn a_shuffle_buffer_counts_what_it_holds() {
    let ds = kib_elements(500).shuffle_buffer(100, 3).unwrap();
    let (during, after) = used_after(&ds, 10);
    // 100 buffered elements of 1,032 bytes each (the pad and "x").
    assert!((100 * 1024..=101 * 1040).contains(&during), "{during}");
    assert_eq!(after, 0);
}

#[test]
fn group_by_window_counts_its_partial_windows() {
    let ds = kib_elements(500)
        .group_by_window(
            "mod10",
            key_fn(|e, _| Ok(e.tensor("t", "x")?.to_vec::<i64>()?[0] % 10)),
            30,
            None,
        )
        .unwrap();
    let (during, after) = used_after(&ds, 1);
    // The first window closes at the 291st element: 290 others are buffered with it gone.
    assert!(during >= 200 * 1024, "{during}");
    assert_eq!(after, 0);
}

#[test]
fn pack_counts_its_open_rows() {
    let opts = PackOptions {
        lengths: vec![("pad".into(), 512)],
        num_packing_bins: 8,
        mode: PackMode::FirstFit,
        meta_features: Vec::new(),
        shuffle_bins: false,
        seed: 0,
        cu_seqlens: false,
    };
    let ds = kib_elements(200).pack(opts).unwrap();
    let (during, after) = used_after(&ds, 1);
    assert!(during >= 1024, "{during}");
    assert_eq!(after, 0);
}
