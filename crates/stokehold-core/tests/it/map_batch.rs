//! `map(f)` under `batch`: over an input on storage, the input's batch path, cut into row views,
//! mapped and stacked again (`MapMap::get_batch`); a feature the function leaves alone keeps the
//! input's column. Over an in-memory input, the element path (zero-copy rows, one stack).
//! A function with a batch form (`map_batched`) maps the stacked input in one pass, over any
//! input, and falls back to rows, or to elements, where it cannot.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use stokehold_core::{
    map_fn, stack_examples, Dataset, Error, Example, MapDataset, Ragged, Result, Tensor, Value,
};

/// Ten elements: `x` (int64 scalar), `clip` (float32 of length 1 + i % 3: a ragged column),
/// `row` (float32 [2]).
fn columns() -> Example {
    let lens: Vec<u64> = (0..10).map(|i| 1 + i % 3).collect();
    let mut splits = vec![0u64];
    for l in &lens {
        splits.push(splits.last().unwrap() + l);
    }
    let total = *splits.last().unwrap() as usize;
    let values = Tensor::from_vec(vec![total], (0..total).map(|v| v as f32).collect()).unwrap();
    Example::new()
        .with(
            "x",
            Tensor::from_vec(vec![10], (0..10i64).collect()).unwrap(),
        )
        .with(
            "clip",
            Value::Ragged(Ragged::new(values, splits.into()).unwrap()),
        )
        .with(
            "row",
            Tensor::from_vec(vec![10, 2], (0..20).map(|v| v as f32 * 0.5).collect()).unwrap(),
        )
}

/// An in-memory dataset that answers as one on storage would (`prefetch_useful`), so that map
/// takes its batch path.
struct Stored(Arc<dyn MapDataset>);

impl MapDataset for Stored {
    fn len(&self) -> u64 {
        self.0.len()
    }

    fn get(&self, index: u64) -> Result<Example> {
        self.0.get(index)
    }

    fn get_batch(&self, indices: &[u64]) -> Result<Option<Example>> {
        self.0.get_batch(indices)
    }

    fn prefetch_useful(&self) -> bool {
        true
    }

    fn name(&self) -> String {
        "stored".into()
    }
}

fn stored(d: &Dataset) -> Dataset {
    let Dataset::Map(m) = d else {
        panic!("random access")
    };
    Dataset::Map(Arc::new(Stored(m.clone())))
}

/// Doubles `row`, adds `idx` (the element's global index) and `epoch`; leaves the other
/// features alone.
fn mapped(d: &Dataset) -> Dataset {
    d.map(
        "touch",
        map_fn(|mut e, c| {
            let row: Vec<f32> = e.tensor("t", "row")?.to_vec()?;
            let doubled: Vec<f32> = row.iter().map(|v| v * 2.0).collect();
            e.insert("row", Tensor::from_vec(vec![2], doubled)?);
            e.insert("idx", Tensor::scalar(c.index as i64));
            e.insert("epoch", Tensor::scalar(c.epoch as i64));
            Ok(e)
        }),
    )
}

#[test]
fn a_mapped_batch_equals_the_stacked_mapped_elements() {
    let ds = mapped(&stored(&Dataset::from_columns(columns()).unwrap()).shuffle(5));
    let Dataset::Map(m) = &ds else {
        panic!("map over a random-access input is random access")
    };
    // Global indices from two epochs (as `batch` asks for them), with a repeat.
    for indices in [vec![0u64, 1, 2, 3], vec![7, 13, 2, 19, 2], vec![11]] {
        let by_batch = m
            .get_batch(&indices)
            .unwrap()
            .expect("the input has a batch path");
        let elements: Vec<Example> = indices.iter().map(|&i| m.get(i).unwrap()).collect();
        assert_eq!(
            by_batch,
            stack_examples("batch", &elements).unwrap(),
            "{indices:?}"
        );
        let epochs: Vec<i64> = by_batch.tensor("t", "epoch").unwrap().to_vec().unwrap();
        let want: Vec<i64> = indices.iter().map(|&i| (i / 10) as i64).collect();
        assert_eq!(epochs, want);
    }
    // And through the batch op, which asks for the batch path first.
    let batches = ds.batch(4, false).unwrap();
    for b in 0..batches.len().unwrap() {
        let got = batches.get(b).unwrap();
        let n = got.tensor("t", "idx").unwrap().shape()[0] as u64;
        let elements: Vec<Example> = (b * 4..b * 4 + n).map(|i| ds.get(i).unwrap()).collect();
        assert_eq!(got, stack_examples("batch", &elements).unwrap());
    }
}

/// A dataset whose batch path always returns one prebuilt batch (clones share its buffers),
/// so a test can see whether a mapped batch reuses or copies a column.
struct OneBatch {
    batch: Example,
    rows: u64,
}

impl MapDataset for OneBatch {
    fn len(&self) -> u64 {
        self.rows
    }

    fn get(&self, index: u64) -> Result<Example> {
        self.batch.row(index as usize)
    }

    fn get_batch(&self, indices: &[u64]) -> Result<Option<Example>> {
        let whole: Vec<u64> = (0..self.rows).collect();
        Ok((indices == whole.as_slice()).then(|| self.batch.clone()))
    }

    fn prefetch_useful(&self) -> bool {
        true
    }

    fn name(&self) -> String {
        "one_batch".into()
    }
}

fn data_ptr(e: &Example, name: &str) -> *const u8 {
    e.tensor("t", name).unwrap().data().as_ptr()
}

#[test]
fn a_feature_the_function_leaves_alone_is_not_copied() {
    let batch = Example::new()
        .with("x", Tensor::from_vec(vec![4], vec![1i64, 2, 3, 4]).unwrap())
        .with("name", Tensor::strings(&["a", "bc", "", "def"]))
        .with(
            "row",
            Tensor::from_vec(vec![4, 2], (0..8).map(|v| v as f32).collect()).unwrap(),
        );
    let source = Arc::new(OneBatch {
        batch: batch.clone(),
        rows: 4,
    });
    let ds = mapped(&Dataset::Map(source));
    let got = ds.get_batch(&[0, 1, 2, 3]).unwrap();
    assert_eq!(
        data_ptr(&got, "x"),
        data_ptr(&batch, "x"),
        "x is the input's column"
    );
    assert_ne!(
        data_ptr(&got, "row"),
        data_ptr(&batch, "row"),
        "row was rewritten"
    );
    let elements: Vec<Example> = (0..4).map(|i| ds.get(i).unwrap()).collect();
    assert_eq!(got, stack_examples("batch", &elements).unwrap());
    let rows: Vec<f32> = got.tensor("t", "row").unwrap().to_vec().unwrap();
    assert_eq!(rows, (0..8).map(|v| v as f32 * 2.0).collect::<Vec<_>>());
    // A function that reshapes a feature in place (same bytes, new shape) gets it stacked.
    let flat = Dataset::Map(Arc::new(OneBatch { batch, rows: 4 })).map(
        "flatten",
        map_fn(|mut e, _| {
            let t = e.tensor("t", "row")?.reshape(vec![1, 2])?;
            e.insert("row", t);
            Ok(e)
        }),
    );
    let got = flat.get_batch(&[0, 1, 2, 3]).unwrap();
    assert_eq!(got.tensor("t", "row").unwrap().shape(), &[4, 1, 2]);
}

#[test]
fn over_memory_map_takes_the_element_path_and_copies_no_row_it_replaces() {
    // shuffle -> crop -> batch over an in-memory ragged arena: the batch is made from the
    // mapped elements (each a zero-copy view of its clip), never from a batch of whole clips.
    let ds = Dataset::from_columns(columns()).unwrap().shuffle(5).map(
        "first",
        map_fn(|mut e, _| {
            let first = e.tensor("t", "clip")?.to_vec::<f32>()?[0];
            e.insert("clip", Tensor::from_vec(vec![1], vec![first])?);
            Ok(e)
        }),
    );
    let Dataset::Map(m) = &ds else {
        panic!("random access")
    };
    assert!(m.get_batch(&[0, 1, 2]).unwrap().is_none(), "element path");
    let batches = ds.batch(4, false).unwrap();
    let mut seen = 0;
    for b in 0..batches.len().unwrap() {
        let got = batches.get(b).unwrap();
        let n = got.tensor("t", "x").unwrap().shape()[0] as u64;
        let elements: Vec<Example> = (b * 4..b * 4 + n).map(|i| ds.get(i).unwrap()).collect();
        assert_eq!(got, stack_examples("batch", &elements).unwrap());
        assert_eq!(got.tensor("t", "clip").unwrap().shape(), &[n as usize, 1]);
        seen += n;
    }
    assert_eq!(seen, 10);
}

#[test]
fn an_error_in_the_function_names_its_element() {
    let ds = Dataset::from_columns(columns()).unwrap().map(
        "fails_on_3",
        map_fn(|e, c| {
            if c.index == 3 {
                return Err(Error::invalid(format!("element {} refused", c.index)));
            }
            Ok(e)
        }),
    );
    let err = ds.batch(4, false).unwrap().get(0).unwrap_err().to_string();
    assert!(err.contains("element 3 refused"), "{err}");
}

#[test]
fn mapped_elements_that_do_not_stack_are_the_batchs_error() {
    let ds = Dataset::from_columns(columns()).unwrap().map(
        "square",
        map_fn(|mut e, c| {
            let n = 1 + c.index as usize % 2;
            e.insert("grid", Tensor::from_vec(vec![n, n], vec![0f32; n * n])?);
            Ok(e)
        }),
    );
    let err = ds.batch(4, false).unwrap().get(0).unwrap_err().to_string();
    assert!(err.contains("batch") && err.contains("\"grid\""), "{err}");
    assert!(err.contains("use padded_batch"), "{err}");
}

/// `row` doubled, element by element and as a batch form that counts its calls in `calls` and
/// declines batches whose first index is in `decline`.
fn doubled(d: &Dataset, calls: &Arc<AtomicUsize>, decline: &'static [u64]) -> Dataset {
    let calls = calls.clone();
    d.map_batched(
        "double",
        map_fn(|mut e, c| {
            if c.index == 17 {
                return Err(Error::invalid(format!("element {} refused", c.index)));
            }
            let row: Vec<f32> = e.tensor("t", "row")?.to_vec()?;
            let n = row.len();
            e.insert(
                "row",
                Tensor::from_vec(vec![n], row.iter().map(|v| v * 2.0).collect())?,
            );
            Ok(e)
        }),
        Arc::new(move |batch: &Example, c| {
            calls.fetch_add(1, Ordering::SeqCst);
            if decline.contains(&c.index) {
                return Ok(None);
            }
            let Some(Value::Tensor(t)) = batch.get("row") else {
                return Ok(None);
            };
            let v: Vec<f32> = t.to_vec::<f32>()?.iter().map(|v| v * 2.0).collect();
            let mut out = batch.clone();
            out.insert("row", Tensor::from_vec(t.shape().to_vec(), v)?);
            Ok(Some(out))
        }),
    )
}

fn get_batch(d: &Dataset, indices: &[u64]) -> Result<Option<Example>> {
    let Dataset::Map(m) = d else {
        panic!("random access")
    };
    m.get_batch(indices)
}

fn stacked_elements(d: &Dataset, indices: &[u64]) -> Example {
    let Dataset::Map(m) = d else {
        panic!("random access")
    };
    let elements: Vec<Example> = indices.iter().map(|&i| m.get(i).unwrap()).collect();
    stack_examples("batch", &elements).unwrap()
}

#[test]
fn a_batch_form_maps_the_stacked_input_in_one_pass_and_equals_the_element_path() {
    let calls = Arc::new(AtomicUsize::new(0));
    // In memory (no batch path of the input's own), shuffled, across two epochs.
    let ds = doubled(
        &Dataset::from_columns(columns()).unwrap().shuffle(5),
        &calls,
        &[],
    );
    for indices in [vec![0u64, 1, 2, 3], vec![13, 2, 19, 2]] {
        let batch = get_batch(&ds, &indices).unwrap().expect("a batch form");
        assert_eq!(batch, stacked_elements(&ds, &indices), "{indices:?}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one call per batch");
    // Through `batch`, the same batches as without the batch form.
    let plain = Dataset::from_columns(columns()).unwrap().map(
        "double",
        map_fn(|mut e, _| {
            let row: Vec<f32> = e.tensor("t", "row")?.to_vec()?;
            e.insert(
                "row",
                Tensor::from_vec(vec![2], row.iter().map(|v| v * 2.0).collect())?,
            );
            Ok(e)
        }),
    );
    let ds = doubled(&Dataset::from_columns(columns()).unwrap(), &calls, &[]);
    let batches = |d: &Dataset| {
        d.batch(4, false)
            .unwrap()
            .iter(0)
            .unwrap()
            .collect_all()
            .unwrap()
    };
    assert_eq!(batches(&ds), batches(&plain));
}

#[test]
fn a_declined_batch_is_mapped_row_by_row_and_an_error_names_its_element() {
    let calls = Arc::new(AtomicUsize::new(0));
    let ds = doubled(&Dataset::from_columns(columns()).unwrap(), &calls, &[4, 14]);
    let indices = [4u64, 5, 6];
    let batch = get_batch(&ds, &indices).unwrap().expect("rows, stacked");
    assert_eq!(batch, stacked_elements(&ds, &indices));
    // Declined, then element 17 (epoch 1, row 7) refuses: its own error, not the batch's.
    let err = get_batch(&ds, &[14, 15, 16, 17]).unwrap_err().to_string();
    assert!(err.contains("element 17 refused"), "{err}");
}

#[test]
fn input_elements_that_do_not_stack_are_mapped_one_by_one() {
    // `row` of 1 + i % 2 values and `img` of [2, 1 + i % 2]: `img` varies past axis 0, so the
    // input does not stack; the function never sees a batch, and each element's output stacks
    // as the batch op would stack it (here: a ragged `row`, and the error for `img`).
    let calls = Arc::new(AtomicUsize::new(0));
    let rows: Vec<Example> = (0..4)
        .map(|i| {
            let n = 1 + i % 2;
            Example::new()
                .with("row", Tensor::from_vec(vec![n], vec![i as f32; n]).unwrap())
                .with(
                    "img",
                    Tensor::from_vec(vec![2, n], vec![0u8; 2 * n]).unwrap(),
                )
        })
        .collect();
    let gen_rows = rows.clone();
    let src = Dataset::range(4).map(
        "rows",
        map_fn(move |e, _| Ok(gen_rows[e.tensor("t", "x")?.to_vec::<i64>()?[0] as usize].clone())),
    );
    let ds = doubled(&src, &calls, &[]);
    let err = get_batch(&ds, &[0, 1]).unwrap_err().to_string();
    assert!(err.contains("batch") && err.contains("img"), "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}
