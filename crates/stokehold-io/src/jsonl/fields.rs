//! Which fields of a JSON line become which features, and how one JSON value becomes a tensor.
//!
//! A field is named by its key, or by a dotted path into nested objects (`"a.b"` is `{"a": {"b":
//! ...}}`; a key that itself holds the dot is found first). Numbers become the field's dtype
//! exactly or not at all (`1.5` into `int64` is an error, as an integer past the dtype's range);
//! strings become bytes (UTF-8); booleans `bool`; a list of numbers, strings or booleans a rank-1
//! tensor (ragged across rows). `null` and a missing field take the field's default, or fail.

use serde_json::{Map, Value};
use stokehold_core::cast::{fill_value, PadValue};
use stokehold_core::tensor::aligned_bytes;
use stokehold_core::{DType, Error, Result, Tensor};

/// One feature read from each line.
#[derive(Clone, Debug, PartialEq)]
pub struct JsonField {
    /// The field's name, dotted for nested objects (`"meta.score"`).
    pub name: String,
    /// Its dtype (`bytes` for strings).
    pub dtype: DType,
    /// A list per line (rank 1) rather than one value (rank 0).
    pub list: bool,
    /// What a line without the field (or with `null`) holds; `None`: such a line is an error.
    pub default: Option<Value>,
}

/// A field as the user asks for it: by name, its type given (`"int64"`, `"float32[]"` for a
/// list) or to be inferred from the first line, and an optional default (JSON).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldRequest {
    /// The field's (dotted) name.
    pub name: String,
    /// `None`: inferred from the first line; else a dtype name, `[]` appended for a list.
    pub kind: Option<String>,
    /// The default, as JSON (`None`: no default).
    pub default: Option<Value>,
}

impl JsonField {
    /// A field of `kind` (`"int64"`, `"float32[]"`, `"bytes"`: core's dtype names, `[]` for a
    /// list), its default checked against it.
    pub fn parse(name: &str, kind: &str, default: Option<Value>) -> Result<Self> {
        let (base, list) = match kind.strip_suffix("[]") {
            Some(b) => (b, true),
            None => (kind, false),
        };
        let dtype: DType = base
            .parse()
            .map_err(|e| Error::invalid(format!("read_jsonl: field {name:?}: {e}")))?;
        let f = JsonField {
            name: name.to_string(),
            dtype,
            list,
            default: None,
        };
        if let Some(d) = &default {
            f.convert(d)
                .map_err(|e| Error::invalid(format!("read_jsonl: default of {e}")))?;
        }
        Ok(JsonField { default, ..f })
    }

    /// The field's kind as [`JsonField::parse`] reads it: `int64`, `float64[]`.
    pub fn kind(&self) -> String {
        format!("{}{}", self.dtype, if self.list { "[]" } else { "" })
    }

    /// The tensor of this field in line `obj` (an object); the error text names the field and
    /// says what is wrong, the caller adds the file and line.
    pub fn read(&self, obj: &Map<String, Value>) -> std::result::Result<Tensor, String> {
        match lookup(obj, &self.name) {
            Some(v) if !v.is_null() => self.convert(v),
            found => match &self.default {
                Some(d) => self.convert(d),
                None => Err(format!(
                    "field {:?} is {} and has no default (give one: defaults={{{:?}: ...}})",
                    self.name,
                    if found.is_some() { "null" } else { "missing" },
                    self.name
                )),
            },
        }
    }

    /// `v` as this field's tensor.
    pub fn convert(&self, v: &Value) -> std::result::Result<Tensor, String> {
        let items: Vec<&Value> = match (v, self.list) {
            (Value::Array(a), true) => a.iter().collect(),
            (other, false) if !other.is_array() && !other.is_object() => vec![other],
            (other, _) => {
                return Err(format!(
                    "field {:?} ({}) holds {}",
                    self.name,
                    self.kind(),
                    short(other)
                ))
            }
        };
        let shape = if self.list { vec![items.len()] } else { vec![] };
        if self.dtype == DType::Bytes {
            let mut strings = Vec::with_capacity(items.len());
            for it in items {
                match it {
                    Value::String(s) => strings.push(s.as_bytes()),
                    other => return Err(self.mismatch(other)),
                }
            }
            let t = Tensor::strings(&strings);
            return t.reshape(shape).map_err(|e| e.to_string());
        }
        let mut out = Vec::with_capacity(items.len() * 8);
        for it in items {
            let pv = match it {
                Value::Bool(b) => PadValue::Bool(*b),
                Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                    (Some(i), _) => PadValue::Int(i),
                    (None, Some(u)) => PadValue::UInt(u),
                    _ => PadValue::Float(n.as_f64().unwrap_or(f64::NAN)),
                },
                other => return Err(self.mismatch(other)),
            };
            let b = fill_value("read_jsonl", &self.name, self.dtype, Some(&pv))
                .map_err(|_| self.mismatch(it))?;
            out.extend_from_slice(&b);
        }
        Tensor::new(self.dtype, shape, aligned_bytes(out)).map_err(|e| e.to_string())
    }

    fn mismatch(&self, v: &Value) -> String {
        let hint = match v {
            Value::Number(n) if n.is_f64() => "float64",
            Value::Number(_) => "int64",
            Value::String(_) => "bytes",
            Value::Bool(_) => "bool",
            _ => return format!("field {:?} ({}) holds {}", self.name, self.kind(), short(v)),
        };
        let list = if self.list { "[]" } else { "" };
        format!(
            "field {:?} ({}) holds {}, which {} cannot hold exactly; declare its type: \
             fields={{{:?}: \"{hint}{list}\"}}",
            self.name,
            self.kind(),
            short(v),
            self.dtype,
            self.name
        )
    }
}

/// The first 60 characters of `v` as JSON, for errors.
fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s,
    }
}

/// The value at dotted `name` in `obj`: the key itself, else the first dot that splits it into an
/// object's key and a name inside that object.
pub fn lookup<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    if let Some(v) = obj.get(name) {
        return Some(v);
    }
    name.match_indices('.')
        .find_map(|(i, _)| match obj.get(&name[..i]) {
            Some(Value::Object(inner)) => lookup(inner, &name[i + 1..]),
            _ => None,
        })
}

/// The fields of `obj` (the first line) when none are named: every key, nested objects flattened
/// to dotted names, each typed as [`infer`] says.
pub fn infer_all(obj: &Map<String, Value>) -> std::result::Result<Vec<JsonField>, String> {
    let mut out = Vec::new();
    flatten(obj, "", &mut out)?;
    Ok(out)
}

fn flatten(
    obj: &Map<String, Value>,
    prefix: &str,
    out: &mut Vec<JsonField>,
) -> std::result::Result<(), String> {
    for (k, v) in obj {
        let name = format!("{prefix}{k}");
        match v {
            Value::Object(inner) => flatten(inner, &format!("{name}."), out)?,
            _ => out.push(infer(&name, v)?),
        }
    }
    Ok(())
}

/// The field `name` typed by its value `v` in the first line: an integer `int64` (`uint64` past
/// int64's range), a float `float64`, a string `bytes`, a boolean `bool`; a list the same for its
/// items (a list with a float in it `float64[]`, an empty list `float64[]`).
pub fn infer(name: &str, v: &Value) -> std::result::Result<JsonField, String> {
    let scalar = |v: &Value| match v {
        Value::Bool(_) => Some(DType::Bool),
        Value::Number(n) if n.is_i64() => Some(DType::I64),
        Value::Number(n) if n.is_u64() => Some(DType::U64),
        Value::Number(_) => Some(DType::F64),
        Value::String(_) => Some(DType::Bytes),
        _ => None,
    };
    let undeclared = |why: &str| {
        format!(
            "field {name:?} {why} in the first line, so its type cannot be inferred; declare it: \
             fields={{{name:?}: \"int64\"}} (or \"float32\", \"bytes\", \"int64[]\" for a list)"
        )
    };
    let (dtype, list) = match v {
        Value::Array(items) => {
            let kinds: Option<Vec<DType>> = items.iter().map(scalar).collect();
            let Some(kinds) = kinds else {
                return Err(undeclared("holds a list of lists, objects or nulls"));
            };
            let d = match kinds.first() {
                None => DType::F64,
                Some(&k) if kinds.iter().all(|&x| x == k) => k,
                Some(_)
                    if kinds
                        .iter()
                        .all(|&x| matches!(x, DType::I64 | DType::U64 | DType::F64)) =>
                {
                    DType::F64
                }
                Some(_) => return Err(undeclared("holds a list of mixed types")),
            };
            (d, true)
        }
        Value::Null => return Err(undeclared("is null")),
        other => (scalar(other).expect("objects are flattened"), false),
    };
    Ok(JsonField {
        name: name.to_string(),
        dtype,
        list,
        default: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn dotted_names_walk_nested_objects_and_a_dotted_key_wins() {
        let o = obj(json!({"a": {"b": {"c": 1}}, "x.y": 2, "x": {"y": 3}}));
        assert_eq!(lookup(&o, "a.b.c"), Some(&json!(1)));
        assert_eq!(lookup(&o, "x.y"), Some(&json!(2)));
        assert_eq!(lookup(&o, "a.q"), None);
    }

    #[test]
    fn inference_and_exact_conversion() {
        let o = obj(json!({"i": 3, "f": 1.5, "s": "é", "l": [1, 2.5], "n": {"m": true}}));
        let kinds: Vec<_> = infer_all(&o)
            .unwrap()
            .iter()
            .map(|f| (f.name.clone(), f.kind()))
            .collect();
        let want = [("f", "float64"), ("i", "int64"), ("l", "float64[]")];
        for (n, k) in want {
            assert!(kinds.contains(&(n.into(), k.into())), "{kinds:?}");
        }
        assert!(kinds.contains(&("n.m".into(), "bool".into())));
        let f = JsonField::parse("i", "int8", None).unwrap();
        assert_eq!(f.convert(&json!(-5)).unwrap().to_vec::<i8>().unwrap(), [-5]);
        let err = f.convert(&json!(300)).unwrap_err();
        assert!(
            err.contains("int8 cannot hold exactly") && err.contains("int64"),
            "{err}"
        );
        let err = f.convert(&json!(1.5)).unwrap_err();
        assert!(err.contains("\"float64\""), "{err}");
    }
}
