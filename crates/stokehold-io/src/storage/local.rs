//! The local fast path: files are memory-mapped exactly as the readers did before the seam.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use stokehold_core::{Error, Result};

use super::{Meta, Source};

/// Maps the regular file at `path` read-only. Refuses what is no regular file before opening it:
/// opening a FIFO for reading blocks until a writer appears.
pub(super) fn map(path: &Path) -> Result<Source> {
    let kind = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if !kind.is_file() {
        return Err(Error::corrupt(
            path,
            0,
            format!("not a regular file ({:?})", kind.file_type()),
        ));
    }
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    if kind.len() == 0 {
        // mmap refuses an empty file.
        return Ok(Source::Mapped {
            file: Arc::new(file),
            data: Bytes::new(),
        });
    }
    // SAFETY: the map is read-only; a file changed underneath by another process can show
    // inconsistent bytes, which the formats' checksums catch, but never unsafety in this process
    // beyond what any mmap reader accepts (documented in docs/FORMAT.md).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage);
    Ok(Source::Mapped {
        file: Arc::new(file),
        data: Bytes::from_owner(map),
    })
}

pub(super) fn head(path: &Path) -> Result<Option<Meta>> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(Meta {
            location: path.to_string_lossy().into_owned(),
            size: m.len(),
            version: None,
        })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// The regular files matching `pattern`, sorted.
pub(super) fn list(pattern: &str) -> Result<Vec<Meta>> {
    let matches =
        glob::glob(pattern).map_err(|e| Error::invalid(format!("bad pattern {pattern:?}: {e}")))?;
    let mut out = Vec::new();
    for m in matches {
        let p = m.map_err(|e| {
            let path = e.path().to_path_buf();
            Error::io(path, e.into())
        })?;
        if let Ok(md) = std::fs::metadata(&p) {
            if md.is_file() {
                out.push(Meta {
                    location: p.to_string_lossy().into_owned(),
                    size: md.len(),
                    version: None,
                });
            }
        }
    }
    // By path components, as `list_files` always sorted.
    out.sort_by(|a, b| Path::new(&a.location).cmp(Path::new(&b.location)));
    Ok(out)
}
