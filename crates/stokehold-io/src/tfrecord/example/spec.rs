//! Feature specs, as in `tf.io`: what to take out of each `tf.train.Example`.
//!
//! * [`ParseFeature::FixedLen`]: exactly `prod(shape)` values per example (a default fills in when
//!   the feature is missing); per example a tensor of `shape`, per batch `[batch, *shape]`.
//! * [`ParseFeature::VarLen`]: any number of values; per example a 1-D tensor, per batch a ragged
//!   column (values + row splits), never padded.
//!
//! The dtype is the wire type: `int64` (Int64List), `float32` (FloatList) or `bytes` (BytesList).

use stokehold_core::{DType, Error, Result, Tensor};

/// How to parse one feature.
#[derive(Clone, Debug, PartialEq)]
pub enum ParseFeature {
    /// A fixed number of values, reshaped to `shape`.
    FixedLen {
        /// Shape of the feature in one example (`[]` for a scalar).
        shape: Vec<usize>,
        /// `int64`, `float32` or `bytes`.
        dtype: DType,
        /// Used when an example lacks the feature: one value (repeated) or `prod(shape)` values,
        /// of `dtype`. Without it a missing feature is an error.
        default: Option<Tensor>,
    },
    /// Any number of values (a ragged column per batch).
    VarLen {
        /// `int64`, `float32` or `bytes`.
        dtype: DType,
    },
}

impl ParseFeature {
    /// A fixed-length feature without a default.
    pub fn fixed(shape: Vec<usize>, dtype: DType) -> Self {
        ParseFeature::FixedLen {
            shape,
            dtype,
            default: None,
        }
    }

    /// A variable-length feature.
    pub fn var(dtype: DType) -> Self {
        ParseFeature::VarLen { dtype }
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        match self {
            ParseFeature::FixedLen { dtype, .. } | ParseFeature::VarLen { dtype } => *dtype,
        }
    }

    /// Values per example for fixed-length features.
    pub fn fixed_count(&self) -> Option<usize> {
        match self {
            ParseFeature::FixedLen { shape, .. } => Some(shape.iter().product()),
            ParseFeature::VarLen { .. } => None,
        }
    }
}

/// The features to parse, in output order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParseSpec {
    features: Vec<(String, ParseFeature)>,
}

impl ParseSpec {
    /// An empty spec.
    pub fn new() -> Self {
        ParseSpec::default()
    }

    /// Builder-style: adds feature `name`, checking dtype and default.
    pub fn with(mut self, name: &str, spec: ParseFeature) -> Result<Self> {
        self.add(name, spec)?;
        Ok(self)
    }

    /// Adds feature `name`, checking dtype and default.
    pub fn add(&mut self, name: &str, spec: ParseFeature) -> Result<()> {
        let dtype = spec.dtype();
        if !matches!(dtype, DType::I64 | DType::F32 | DType::Bytes) {
            return Err(Error::invalid(format!(
                "feature {name:?}: tf.train.Example holds int64, float32 or bytes, not {dtype}"
            )));
        }
        if let ParseFeature::FixedLen { shape, .. } = &spec {
            // Refused here so that no later size (values per record, bytes per batch) wraps.
            let bytes = shape
                .iter()
                .try_fold(1usize, |acc, &d| acc.checked_mul(d))
                .and_then(|n| n.checked_mul(8));
            if bytes.is_none_or(|b| b > isize::MAX as usize) {
                return Err(Error::invalid(format!(
                    "feature {name:?}: FixedLen{shape:?} holds more values than fit in memory \
                     (the shape's product overflows)"
                )));
            }
        }
        if self.features.iter().any(|(n, _)| n == name) {
            return Err(Error::invalid(format!(
                "feature {name:?} is in the spec twice"
            )));
        }
        if let ParseFeature::FixedLen {
            default: Some(d),
            shape,
            ..
        } = &spec
        {
            let n: usize = shape.iter().product();
            if d.dtype() != dtype || (d.len() != 1 && d.len() != n) {
                return Err(Error::invalid(format!(
                    "feature {name:?}: default must be 1 or {n} values of {dtype}, got {}{:?}",
                    d.dtype(),
                    d.shape()
                )));
            }
        }
        self.features.push((name.to_string(), spec));
        Ok(())
    }

    /// (name, spec) pairs in order.
    pub fn features(&self) -> &[(String, ParseFeature)] {
        &self.features
    }

    /// Number of features.
    pub fn len(&self) -> usize {
        self.features.len()
    }

    /// True when there are no features.
    pub fn is_empty(&self) -> bool {
        self.features.is_empty()
    }

    /// Short text for op names: `label:int64[],data:bytes[?]`.
    pub fn describe(&self) -> String {
        let parts: Vec<_> = self
            .features
            .iter()
            .map(|(n, s)| match s {
                ParseFeature::FixedLen { shape, dtype, .. } => format!("{n}:{dtype}{shape:?}"),
                ParseFeature::VarLen { dtype } => format!("{n}:{dtype}[?]"),
            })
            .collect();
        parts.join(",")
    }
}
