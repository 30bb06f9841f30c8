//! An object opened for reading by range ([`Object`]), and where a reader's bytes are
//! ([`Source`]: a local memory map or an object).

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use stokehold_core::{Error, Result};

use super::meta::Meta;

/// An object opened for reading by range: its size and version are fixed at open, and each read
/// checks it still has that version.
#[derive(Clone)]
pub struct Object {
    meta: Meta,
    backend: ObjectBackend,
}

#[derive(Clone)]
enum ObjectBackend {
    Local(Bytes),
    #[cfg(feature = "remote")]
    Remote(Arc<super::remote::RemoteObject>),
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Object").field("meta", &self.meta).finish()
    }
}

impl Object {
    /// Location, size and version.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.meta.size
    }

    /// The location (a path or URL), for errors.
    pub fn location(&self) -> &str {
        &self.meta.location
    }

    /// Whether the bytes come over the network (a reader may then batch its reads).
    pub fn is_remote(&self) -> bool {
        !matches!(self.backend, ObjectBackend::Local(_))
    }

    /// Bytes `range` of the object: exactly `range.end - range.start` bytes, or an error naming
    /// the location and the offset (past the end, a short body, a changed object).
    pub fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        check_range(&self.meta, &range)?;
        match &self.backend {
            ObjectBackend::Local(b) => Ok(b.slice(range.start as usize..range.end as usize)),
            #[cfg(feature = "remote")]
            ObjectBackend::Remote(r) => r.read_range(range),
        }
    }

    /// Several ranges at once: neighbouring ranges are merged into multi-MiB requests and the
    /// requests run concurrently (bounded). The result has one `Bytes` per range, in order.
    pub fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        for r in ranges {
            check_range(&self.meta, r)?;
        }
        match &self.backend {
            ObjectBackend::Local(b) => Ok(ranges
                .iter()
                .map(|r| b.slice(r.start as usize..r.end as usize))
                .collect()),
            #[cfg(feature = "remote")]
            ObjectBackend::Remote(r) => r.read_ranges(ranges),
        }
    }

    /// The whole object.
    pub fn read_all(&self) -> Result<Bytes> {
        self.read_range(0..self.meta.size)
    }

    /// Writes the whole object into `out`, streaming (one request for a remote object, resumed
    /// where a body breaks off); the number of bytes written is the object's size.
    pub fn copy_to(&self, out: &mut dyn std::io::Write) -> Result<u64> {
        match &self.backend {
            ObjectBackend::Local(b) => out
                .write_all(b)
                .map(|()| b.len() as u64)
                .map_err(|e| Error::io(&self.meta.location, e)),
            #[cfg(feature = "remote")]
            ObjectBackend::Remote(r) => r.copy_to(out),
        }
    }

    /// Copies the whole object to `dest` (written to a temporary name and renamed, so `dest`
    /// never holds a partial copy). The hook a local cache fills itself with.
    pub fn fetch_to(&self, dest: &Path) -> Result<()> {
        let data = self.read_all()?;
        crate::atomic::write_atomic(dest, &data).map(drop)
    }
}

fn check_range(meta: &Meta, r: &Range<u64>) -> Result<()> {
    if r.start > r.end || r.end > meta.size {
        return Err(Error::corrupt(
            &meta.location,
            r.start,
            format!(
                "range {}..{} is outside the object ({} bytes)",
                r.start, r.end, meta.size
            ),
        ));
    }
    Ok(())
}

/// Where a reader's bytes are: a local memory map (the fast path, unchanged from before the
/// seam), or an object read by range.
pub enum Source {
    /// A local file, memory-mapped; `file` is kept open for length checks (`fstat`).
    Mapped {
        /// The open file.
        file: Arc<std::fs::File>,
        /// The map.
        data: Bytes,
    },
    /// An object in a store.
    Remote(Object),
}

impl Object {
    /// A local file's bytes (a map) behind the object API.
    pub(super) fn local(meta: Meta, data: Bytes) -> Object {
        Object {
            meta,
            backend: ObjectBackend::Local(data),
        }
    }

    /// Opens the object at `url` (pinned to the version it has now).
    pub(super) fn open_url(url: &str) -> Result<Object> {
        #[cfg(feature = "remote")]
        {
            let r = super::remote::RemoteObject::open(url)?;
            Ok(Object {
                meta: r.meta().clone(),
                backend: ObjectBackend::Remote(Arc::new(r)),
            })
        }
        #[cfg(not(feature = "remote"))]
        Err(no_remote(url))
    }
}

#[cfg(not(feature = "remote"))]
pub(super) fn no_remote(url: &str) -> Error {
    Error::invalid(format!(
        "{url}: object-store URLs need stokehold-io's `remote` cargo feature (on in the wheel and \
         the CLI); this build reads local paths only"
    ))
}
