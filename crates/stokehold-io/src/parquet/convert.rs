//! Arrow arrays as stokehold elements: the one conversion that Parquet and Arrow IPC share.
//!
//! The rules ([`plan`] checks them once per schema, naming the column it refuses):
//! * integers, floats (`float16` too) and booleans: scalars of the same dtype;
//! * `utf8` / `large_utf8` / `utf8_view` / `binary` / `large_binary` / `binary_view` /
//!   `fixed_size_binary`: `bytes` scalars (strings as their UTF-8 bytes);
//! * `fixed_size_list<T, n>` (nested too): dense axes `[n, ...]`;
//! * `list<T>` / `large_list<T>` of any of the above: a rank-1 (or `[len, n, ...]`) tensor per row,
//!   ragged across rows when batched; a list of variable lists is refused;
//! * `struct`: flattened, a child named `"parent.child"`;
//! * dictionary-encoded columns: decoded to their values;
//! * anything else (dates, decimals, maps, unions, null columns) is an error naming the column and
//!   its type.
//!
//! **Nulls**: a row whose column (or an enclosing struct) is null takes the column's default when
//! one is given (a JSON value, converted as `read_jsonl` converts one), and is otherwise an error
//! naming the column, the file and the row; a null *inside* a list is always an error.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use serde_json::Value as Json;
use stokehold_core::{DType, Example, Tensor};

use crate::jsonl::JsonField;

/// One feature of each element: a leaf column of the (projected) schema.
#[derive(Clone, Debug)]
pub struct Leaf {
    /// Its name: the column's, structs' children joined with dots (`"meta.score"`).
    pub name: String,
    /// Child indices from the record batch's column down through structs.
    path: Vec<usize>,
    /// Its dtype.
    pub dtype: DType,
    /// Axes of each row inside the element (fixed-size lists), after the list axis if any.
    pub inner: Vec<usize>,
    /// A variable-length list per row (rank `1 + inner.len()`).
    pub list: bool,
    /// The Arrow type as the file declares it, for descriptions.
    pub arrow_type: String,
    /// What a null row holds (converted once), or `None`: a null row is an error.
    default: Option<Tensor>,
}

impl Leaf {
    /// The element's shape for this feature (`None` for the list axis).
    pub fn shape(&self) -> Vec<Option<usize>> {
        let mut s: Vec<Option<usize>> = if self.list { vec![None] } else { vec![] };
        s.extend(self.inner.iter().map(|&d| Some(d)));
        s
    }
}

/// The features of a schema, in column order: the leaves `plan` found.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// The leaves, in order.
    pub leaves: Vec<Leaf>,
}

fn dtype_of(dt: &DataType) -> Option<DType> {
    Some(match dt {
        DataType::Boolean => DType::Bool,
        DataType::Int8 => DType::I8,
        DataType::Int16 => DType::I16,
        DataType::Int32 => DType::I32,
        DataType::Int64 => DType::I64,
        DataType::UInt8 => DType::U8,
        DataType::UInt16 => DType::U16,
        DataType::UInt32 => DType::U32,
        DataType::UInt64 => DType::U64,
        DataType::Float16 => DType::F16,
        DataType::Float32 => DType::F32,
        DataType::Float64 => DType::F64,
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => DType::Bytes,
        DataType::Dictionary(_, v) => return dtype_of(v),
        _ => return None,
    })
}

/// The dtype and fixed axes of a dense row type (a scalar or fixed-size lists of one).
fn dense(dt: &DataType) -> Option<(DType, Vec<usize>)> {
    match dt {
        DataType::FixedSizeList(f, n) => {
            let (d, mut inner) = dense(f.data_type())?;
            inner.insert(0, usize::try_from(*n).ok()?);
            Some((d, inner))
        }
        other => dtype_of(other).map(|d| (d, Vec::new())),
    }
}

fn unsupported(name: &str, dt: &DataType) -> String {
    format!(
        "column {name:?} has Arrow type {dt}, which stokehold does not read (it reads integers, \
         floats, booleans, strings and binary, fixed-size and variable lists of them, structs \
         and dictionary-encoded columns); leave it out with columns=[...]"
    )
}

/// The leaves of `schema` (every column, structs flattened) and their defaults (JSON by leaf
/// name), or an error naming the first column whose type is not read or a default that does
/// not fit its column.
pub fn plan(schema: &Schema, defaults: &[(String, Json)]) -> Result<Plan, String> {
    let mut leaves = Vec::new();
    for (i, f) in schema.fields().iter().enumerate() {
        walk(f, f.name().clone(), vec![i], &mut leaves)?;
    }
    for (i, l) in leaves.iter().enumerate() {
        if leaves[..i].iter().any(|o| o.name == l.name) {
            return Err(format!(
                "two columns are both read as {:?} (a struct's child and a column named with a \
                 dot); leave one out with columns=[...]",
                l.name
            ));
        }
    }
    for (name, d) in defaults {
        let Some(leaf) = leaves.iter_mut().find(|l| &l.name == name) else {
            let names: Vec<&str> = leaves.iter().map(|l| l.name.as_str()).collect();
            return Err(format!(
                "a default for {name:?}, which is not among the columns read ({})",
                names.join(", ")
            ));
        };
        if !leaf.inner.is_empty() {
            return Err(format!(
                "a default for {name:?}, a fixed-size list column: only scalar and list \
                 columns take defaults"
            ));
        }
        let kind = format!("{}{}", leaf.dtype, if leaf.list { "[]" } else { "" });
        let field = JsonField::parse(name, &kind, Some(d.clone())).map_err(|e| e.to_string())?;
        leaf.default = Some(field.convert(d)?);
    }
    Ok(Plan { leaves })
}

/// Every leaf name of `schema` (structs flattened to `a.b`), whatever its type.
pub fn leaf_names(schema: &Schema) -> Vec<String> {
    fn names(f: &Field, name: String, out: &mut Vec<String>) {
        match f.data_type() {
            DataType::Struct(children) if !children.is_empty() => {
                for c in children {
                    names(c, format!("{name}.{}", c.name()), out);
                }
            }
            _ => out.push(name),
        }
    }
    let mut out = Vec::new();
    for f in schema.fields() {
        names(f, f.name().clone(), &mut out);
    }
    out
}

fn walk(f: &Field, name: String, path: Vec<usize>, out: &mut Vec<Leaf>) -> Result<(), String> {
    let dt = f.data_type();
    let leaf = |dtype, inner, list| Leaf {
        name: name.clone(),
        path: path.clone(),
        dtype,
        inner,
        list,
        arrow_type: dt.to_string(),
        default: None,
    };
    match dt {
        DataType::Struct(children) => {
            if children.is_empty() {
                return Err(unsupported(&name, dt));
            }
            for (j, c) in children.iter().enumerate() {
                let mut p = path.clone();
                p.push(j);
                walk(c, format!("{name}.{}", c.name()), p, out)?;
            }
            Ok(())
        }
        DataType::List(c) | DataType::LargeList(c) => match dense(c.data_type()) {
            Some((d, inner)) => {
                out.push(leaf(d, inner, true));
                Ok(())
            }
            None => Err(unsupported(&name, dt)),
        },
        other => match dense(other) {
            Some((d, inner)) => {
                out.push(leaf(d, inner, false));
                Ok(())
            }
            None => Err(unsupported(&name, dt)),
        },
    }
}

/// A leaf's values for every row of a block, in the form rows are cut from: fixed-width bytes or
/// strings, `items` values per row (the product of the fixed axes).
#[derive(Clone, Debug)]
enum Values {
    Fixed { data: Bytes, width: usize },
    Strings { data: Bytes, offsets: Arc<[u64]> },
}

/// One leaf column of a decoded block, ready to cut rows from.
#[derive(Clone, Debug)]
pub struct Column {
    values: Values,
    /// Nulls among the values (items of a list, or rows).
    value_nulls: Option<NullBuffer>,
    /// For a list column: item offsets per row (`rows + 1`).
    offsets: Option<Arc<[u64]>>,
    /// Null rows (the column's or an enclosing struct's).
    row_nulls: Option<NullBuffer>,
    bytes: usize,
}

/// A decoded block of rows: one [`Column`] per leaf.
#[derive(Debug)]
pub struct Block {
    /// The leaf columns, in plan order.
    pub columns: Vec<Column>,
    /// Rows in the block.
    pub rows: usize,
}

impl Block {
    /// Bytes the block holds (what the cache counts).
    pub fn nbytes(&self) -> usize {
        self.columns.iter().map(|c| c.bytes).sum::<usize>() + 64
    }
}

fn union(a: Option<&NullBuffer>, b: Option<&NullBuffer>) -> Option<NullBuffer> {
    NullBuffer::union(a, b)
}

/// `batch` converted to the plan's columns (dictionary columns decoded, struct nulls carried down
/// to their leaves), or an error naming the column.
pub fn block(plan: &Plan, batch: &RecordBatch) -> Result<Block, String> {
    let mut columns = Vec::with_capacity(plan.leaves.len());
    for leaf in &plan.leaves {
        let mut arr: ArrayRef = batch.column(leaf.path[0]).clone();
        let mut nulls = arr.logical_nulls();
        for &j in &leaf.path[1..] {
            let s = arr.as_struct();
            arr = s.column(j).clone();
            nulls = union(nulls.as_ref(), arr.logical_nulls().as_ref());
        }
        let (values, value_nulls, offsets) = if leaf.list {
            let (child, offs): (ArrayRef, Vec<u64>) = match arr.data_type() {
                DataType::List(_) => {
                    let l = arr.as_list::<i32>();
                    let o = l.value_offsets().iter().map(|&o| o as u64).collect();
                    (l.values().clone(), o)
                }
                DataType::LargeList(_) => {
                    let l = arr.as_list::<i64>();
                    let o = l.value_offsets().iter().map(|&o| o as u64).collect();
                    (l.values().clone(), o)
                }
                other => return Err(unsupported(&leaf.name, other)),
            };
            let (v, n) = values(&leaf.name, &child, leaf.dtype)?;
            (v, n, Some(Arc::from(offs)))
        } else {
            let (v, n) = values(&leaf.name, &arr, leaf.dtype)?;
            (v, n, None)
        };
        let bytes = match &values {
            Values::Fixed { data, .. } => data.len(),
            Values::Strings { data, offsets } => data.len() + offsets.len() * 8,
        } + offsets.as_ref().map_or(0, |o: &Arc<[u64]>| o.len() * 8);
        columns.push(Column {
            values,
            value_nulls,
            offsets,
            row_nulls: nulls,
            bytes,
        });
    }
    Ok(Block {
        columns,
        rows: batch.num_rows(),
    })
}

/// The values of a dense array (scalars, or fixed-size lists of them) flattened to items, and
/// their nulls at any level, spread to items.
fn values(
    name: &str,
    arr: &ArrayRef,
    dtype: DType,
) -> Result<(Values, Option<NullBuffer>), String> {
    if let DataType::FixedSizeList(_, n) = arr.data_type() {
        let l = arr.as_fixed_size_list();
        let n = *n as usize;
        let child = l.values().slice(l.value_offset_at(0), l.len() * n);
        let (v, inner) = values(name, &child, dtype)?;
        let outer = l.logical_nulls().map(|nb| {
            let bits: Vec<bool> = (0..l.len() * n).map(|i| nb.is_valid(i / n)).collect();
            NullBuffer::from(bits)
        });
        return Ok((v, union(outer.as_ref(), inner.as_ref())));
    }
    let decoded;
    let arr = if let Some(d) = arr.as_any_dictionary_opt() {
        let keys = arrow_array::UInt64Array::from(
            d.normalized_keys()
                .into_iter()
                .map(|k| k as u64)
                .collect::<Vec<_>>(),
        );
        decoded = arrow_select::take::take(d.values().as_ref(), &keys, None)
            .map_err(|e| format!("column {name:?}: decoding its dictionary: {e}"))?;
        let nulls = union(
            arr.logical_nulls().as_ref(),
            decoded.logical_nulls().as_ref(),
        );
        let (v, _) = values(name, &decoded, dtype)?;
        return Ok((v, nulls));
    } else {
        arr
    };
    let nulls = arr.logical_nulls();
    let fixed = |buf: &arrow_buffer::Buffer, width: usize| Values::Fixed {
        data: Bytes::from_owner(buf.clone()),
        width,
    };
    let strings = |items: &mut dyn Iterator<Item = Option<&[u8]>>, n: usize| {
        let mut data = Vec::new();
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0u64);
        for s in items {
            data.extend_from_slice(s.unwrap_or_default());
            offsets.push(data.len() as u64);
        }
        Values::Strings {
            data: Bytes::from(data),
            offsets: offsets.into(),
        }
    };
    macro_rules! prim {
        ($t:ty) => {{
            let p = arr.as_primitive::<$t>();
            fixed(
                p.values().inner(),
                std::mem::size_of::<<$t as ArrowPrimitiveType>::Native>(),
            )
        }};
    }
    macro_rules! offs {
        ($a:expr) => {{
            let a = $a;
            let o = a.value_offsets();
            let (lo, hi) = (o[0] as usize, o[o.len() - 1] as usize);
            Values::Strings {
                data: Bytes::from_owner(a.values().slice_with_length(lo, hi - lo)),
                offsets: o.iter().map(|&x| (x as usize - lo) as u64).collect(),
            }
        }};
    }
    let v = match arr.data_type() {
        DataType::Boolean => {
            let b = arr.as_boolean();
            let bytes: Vec<u8> = (0..b.len()).map(|i| b.value(i) as u8).collect();
            Values::Fixed {
                data: Bytes::from(bytes),
                width: 1,
            }
        }
        DataType::Int8 => prim!(Int8Type),
        DataType::Int16 => prim!(Int16Type),
        DataType::Int32 => prim!(Int32Type),
        DataType::Int64 => prim!(Int64Type),
        DataType::UInt8 => prim!(UInt8Type),
        DataType::UInt16 => prim!(UInt16Type),
        DataType::UInt32 => prim!(UInt32Type),
        DataType::UInt64 => prim!(UInt64Type),
        DataType::Float16 => prim!(Float16Type),
        DataType::Float32 => prim!(Float32Type),
        DataType::Float64 => prim!(Float64Type),
        DataType::Utf8 => offs!(arr.as_string::<i32>()),
        DataType::LargeUtf8 => offs!(arr.as_string::<i64>()),
        DataType::Binary => offs!(arr.as_binary::<i32>()),
        DataType::LargeBinary => offs!(arr.as_binary::<i64>()),
        DataType::Utf8View => {
            let a = arr.as_string_view();
            strings(&mut a.iter().map(|s| s.map(str::as_bytes)), a.len())
        }
        DataType::BinaryView => {
            let a = arr.as_binary_view();
            strings(&mut a.iter(), a.len())
        }
        DataType::FixedSizeBinary(_) => {
            let a = arr.as_fixed_size_binary();
            strings(&mut a.iter(), a.len())
        }
        other => return Err(unsupported(name, other)),
    };
    if dtype_of(arr.data_type()) != Some(dtype) {
        return Err(format!(
            "column {name:?} holds {} in this block where the schema says {dtype}",
            arr.data_type()
        ));
    }
    Ok((v, nulls))
}

impl Column {
    /// Items `a..b` (flattened values) as a tensor of `shape`.
    fn items(&self, dtype: DType, a: usize, b: usize, shape: Vec<usize>) -> Result<Tensor, String> {
        match &self.values {
            Values::Fixed { data, width } => {
                let (lo, hi) = (a * width, b * width);
                if hi > data.len() {
                    return Err(format!("items {a}..{b} past the column's values"));
                }
                Tensor::new(dtype, shape, data.slice(lo..hi)).map_err(|e| e.to_string())
            }
            Values::Strings { data, offsets } => {
                if b >= offsets.len() {
                    return Err(format!("items {a}..{b} past the column's values"));
                }
                let (lo, hi) = (offsets[a], offsets[b]);
                let o: Arc<[u64]> = offsets[a..=b].iter().map(|&x| x - lo).collect();
                Tensor::strings_from_parts(shape, data.slice(lo as usize..hi as usize), o)
                    .map_err(|e| e.to_string())
            }
        }
    }
}

/// Row `row` of `block` as an element; errors (a null row without a default, a null item) name
/// the column and the row (`at(row)` says where the row is: file and row number).
pub fn element(
    plan: &Plan,
    block: &Block,
    row: usize,
    at: &dyn Fn(usize) -> String,
) -> Result<Example, String> {
    let mut ex = Example::new();
    for (leaf, col) in plan.leaves.iter().zip(&block.columns) {
        ex.insert(&leaf.name, value(leaf, col, row, at)?);
    }
    Ok(ex)
}

fn value(
    leaf: &Leaf,
    col: &Column,
    row: usize,
    at: &dyn Fn(usize) -> String,
) -> Result<Tensor, String> {
    if col.row_nulls.as_ref().is_some_and(|n| n.is_null(row)) {
        return match &leaf.default {
            Some(d) => Ok(d.clone()),
            None => Err(format!(
                "column {:?} is null at {} and has no default (give one: defaults={{{:?}: ...}}, \
                 or leave the column out)",
                leaf.name,
                at(row),
                leaf.name
            )),
        };
    }
    let per: usize = leaf.inner.iter().product();
    let (lo, hi, mut shape) = match &col.offsets {
        Some(o) => {
            let (lo, hi) = (o[row] as usize, o[row + 1] as usize);
            (lo, hi, vec![hi.saturating_sub(lo)])
        }
        None => (row, row + 1, vec![]),
    };
    shape.extend_from_slice(&leaf.inner);
    let (a, b) = (lo * per, hi * per);
    if let Some(n) = &col.value_nulls {
        if (col.offsets.is_some() || !leaf.inner.is_empty()) && (a..b).any(|i| n.is_null(i)) {
            return Err(format!(
                "column {:?} holds a null inside its list at {}; nulls inside lists are not read",
                leaf.name,
                at(row)
            ));
        }
    }
    col.items(leaf.dtype, a, b, shape)
}

/// A one-line description of the features, `name: dtype[shape]` each (`?` for a list axis), as
/// `inspect` prints them.
pub fn describe(plan: &Plan) -> Vec<String> {
    plan.leaves
        .iter()
        .map(|l| {
            let dims: Vec<String> = l
                .shape()
                .iter()
                .map(|d| d.map_or("?".to_string(), |d| d.to_string()))
                .collect();
            format!(
                "{}: {}[{}] (arrow {})",
                l.name,
                l.dtype,
                dims.join(", "),
                l.arrow_type
            )
        })
        .collect()
}
