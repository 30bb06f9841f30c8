//! The one error type of the core crate.
//!
//! Every variant carries what a caller needs to act: the op path (`"map[2] -> batch"`), the element
//! index, the file and offset. Bindings map variants to a Python exception tree in one place.

use std::path::PathBuf;

/// A boxed error from user code (a Rust closure or a Python callable), kept intact so that the
/// bindings can re-raise the original exception.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result alias used across stokehold.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a pipeline.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument was out of its domain (batch size 0, unknown dtype, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An element did not have the features, dtypes or shapes an op needs.
    #[error("schema error in {op}: {reason}")]
    Schema {
        /// The op that found the mismatch.
        op: String,
        /// What was expected and what was found.
        reason: String,
    },
    /// An index past the end of a random-access dataset or table.
    #[error("index {index} out of range for {what} of length {len}")]
    OutOfRange {
        /// The index asked for.
        index: u64,
        /// The length of the thing indexed.
        len: u64,
        /// What was indexed.
        what: String,
    },
    /// An I/O error on a named file.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Bytes on disk that do not decode.
    #[error("{path}: corrupt data at offset {offset}: {reason}")]
    Corrupt {
        /// The file involved.
        path: PathBuf,
        /// Byte offset of the bad record or structure.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// A user function (Rust closure or Python callable) failed on an element.
    #[error("user function in {op} failed on element {index}: {source}")]
    Callback {
        /// The op path of the failing function.
        op: String,
        /// Index of the element the function ran on.
        index: u64,
        /// The function's own error, unchanged.
        #[source]
        source: BoxError,
    },
    /// Saved iterator state that does not fit this pipeline.
    #[error("cannot restore iterator state: {0}")]
    State(String),
    /// The host interrupted a consumer waiting for an element (Ctrl-C in Python); the source is
    /// the host's own error, handed back unchanged. See [`crate::exec::interrupt`].
    #[error("interrupted while waiting for an element: {0}")]
    Interrupted(#[source] BoxError),
    /// The pipeline was stopped (iterator dropped, or used across a fork).
    #[error("cancelled: {0}")]
    Cancelled(String),
    /// The OS refused a resource the pipeline needs to run, such as a thread (too many threads
    /// in the process, out of memory for a stack): not a file's error.
    #[error("{op}: could not start a thread: {source}")]
    Resource {
        /// The op that needed it.
        op: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A worker thread panicked; the message is the panic payload.
    #[error("worker thread in {op} panicked: {message}")]
    Panic {
        /// The op whose worker panicked.
        op: String,
        /// The panic payload, when it was a string.
        message: String,
    },
}

impl Error {
    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    /// Shorthand for [`Error::Schema`].
    pub fn schema(op: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Schema {
            op: op.into(),
            reason: reason.into(),
        }
    }

    /// [`Error::Resource`] for a thread `op` could not start.
    pub fn thread(op: impl Into<String>, source: std::io::Error) -> Self {
        Error::Resource {
            op: op.into(),
            source,
        }
    }

    /// Shorthand for [`Error::Io`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Shorthand for [`Error::Corrupt`].
    pub fn corrupt(path: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            path: path.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// Turns a caught panic payload into an error.
    pub fn from_panic(op: &str, payload: Box<dyn std::any::Any + Send>) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".into());
        Error::Panic {
            op: op.into(),
            message,
        }
    }
}
