//! What the storage seam knows about a file or object before reading it.

/// What a listing or a `head` knows about one file or object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The location, as given or listed (a path or a full URL).
    pub location: String,
    /// Its size in bytes.
    pub size: u64,
    /// The object's version where the backend has one (S3's ETag or version id); `None` for
    /// local files.
    pub version: Option<String>,
}
