//! The local fast path: files are memory-mapped exactly as the readers did before the seam.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use stokehold_core::{Error, Result};

use super::{Meta, Source};

/// Opens the regular file at `path` for reading, and its size: the one way every reader and CLI
/// verb opens a local file. Anything else is refused with an error naming the path: a FIFO
/// (opening one for reading blocks until a writer appears, and Ctrl-C cannot end that wait), a
/// character device (`/dev/zero` reads forever), a directory, a socket. The open itself never
/// blocks (`O_NONBLOCK`, which regular files ignore), and the kind is checked on the opened
/// file (`fstat`), so a path swapped between a check and the open is caught too.
pub fn open_regular(path: &Path) -> Result<(File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        // A folder where a file was expected: a loader mapped over folder names.
        let hint = if meta.is_dir() {
            format!(
                "; to read the files in it, list them: stokehold.list_files(\"{}/*\")",
                path.display()
            )
        } else {
            String::new()
        };
        return Err(Error::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("not a regular file ({}){hint}", kind_of(&meta.file_type())),
            ),
        ));
    }
    Ok((file, meta.len()))
}

/// The whole regular file at `path` (see [`open_regular`]), its size checked against the
/// element ceiling before anything is allocated.
pub fn read_regular(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let (mut file, len) = open_regular(path)?;
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    let what = format_args!("reading {} whole", path.display());
    let mut buf = stokehold_core::alloc::try_vec::<u8>("read", what, len)?;
    // At most the size it had when opened (a file growing meanwhile is read as it was).
    (&mut file)
        .take(len as u64)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(path, e))?;
    Ok(buf)
}

/// What a file type is, in words.
fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// Maps the regular file at `path` read-only ([`open_regular`]).
pub(super) fn map(path: &Path) -> Result<Source> {
    let (file, len) = open_regular(path)?;
    if len == 0 {
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
