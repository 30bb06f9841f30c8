//! The messages of `tensorflow/core/example/{example,feature}.proto`, written by hand for prost
//! (no protoc needed). Field numbers and types follow the .proto files exactly, so the wire format
//! is TensorFlow's.

use std::collections::BTreeMap;

/// `tf.train.BytesList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BytesList {
    /// The byte strings.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub value: Vec<Vec<u8>>,
}

/// `tf.train.FloatList` (packed).
#[derive(Clone, PartialEq, prost::Message)]
pub struct FloatList {
    /// The floats.
    #[prost(float, repeated, tag = "1")]
    pub value: Vec<f32>,
}

/// `tf.train.Int64List` (packed).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Int64List {
    /// The integers.
    #[prost(int64, repeated, tag = "1")]
    pub value: Vec<i64>,
}

/// `tf.train.Feature`: one of the three lists.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Feature {
    /// The list held (none for an empty feature).
    #[prost(oneof = "Kind", tags = "1, 2, 3")]
    pub kind: Option<Kind>,
}

/// The `kind` oneof of [`Feature`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Kind {
    /// Byte strings.
    #[prost(message, tag = "1")]
    BytesList(BytesList),
    /// 32-bit floats.
    #[prost(message, tag = "2")]
    FloatList(FloatList),
    /// 64-bit integers.
    #[prost(message, tag = "3")]
    Int64List(Int64List),
}

/// `tf.train.Features`: a map from name to feature.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Features {
    /// The features by name, encoded in name order: a HashMap's order changes from map to map,
    /// which made two writes of the same examples differ byte for byte.
    #[prost(btree_map = "string, message", tag = "1")]
    pub feature: BTreeMap<String, Feature>,
}

/// `tf.train.Example`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Example {
    /// The features.
    #[prost(message, optional, tag = "1")]
    pub features: Option<Features>,
}

/// `tf.train.FeatureList`: a sequence of features.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FeatureList {
    /// The steps.
    #[prost(message, repeated, tag = "1")]
    pub feature: Vec<Feature>,
}

/// `tf.train.FeatureLists`: named sequences.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FeatureLists {
    /// The sequences by name.
    #[prost(btree_map = "string, message", tag = "1")]
    pub feature_list: BTreeMap<String, FeatureList>,
}

/// `tf.train.SequenceExample`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SequenceExample {
    /// Per-sequence features.
    #[prost(message, optional, tag = "1")]
    pub context: Option<Features>,
    /// Per-step features.
    #[prost(message, optional, tag = "2")]
    pub feature_lists: Option<FeatureLists>,
}
