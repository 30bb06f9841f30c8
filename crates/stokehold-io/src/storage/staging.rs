//! Writing a folder to an object store: the writers write into a local staging folder exactly as
//! they write a local folder, then every file is uploaded (multipart for large ones) and the
//! files that mark a folder complete (a shard folder's manifest) go last. A reader of the
//! half-uploaded prefix finds no manifest and reports an incomplete dataset; a failed upload
//! leaves no manifest either.

use std::path::{Path, PathBuf};

use stokehold_core::{Error, Result};

/// A staging folder under the system's temporary folder (`TMPDIR`), removed when dropped.
struct Staging(PathBuf);

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `write` on a fresh local folder, then uploads what it wrote under `remote` (a URL),
/// the files whose names are in `last` after all others. Returns `write`'s result.
pub fn write_staged<T>(
    remote: &Path,
    last: &[&str],
    write: impl FnOnce(&Path) -> Result<T>,
) -> Result<T> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir =
        std::env::temp_dir().join(format!("stokehold-upload-{}-{nanos:x}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let staging = Staging(dir);
    let out = write(&staging.0)?;
    let mut files = Vec::new();
    collect(&staging.0, &mut files)?;
    // Data before indexes (`x.tfrecord` before `x.tfrecord.idx`, whichever folder holds it), so
    // an index that is listed always has its file.
    files.sort_by_key(|p| (p.extension().is_some_and(|e| e == "idx"), p.clone()));
    let is_last = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| last.contains(&n))
    };
    let (tail, head): (Vec<PathBuf>, Vec<PathBuf>) = files.into_iter().partition(|p| is_last(p));
    let base = remote.to_string_lossy();
    let hook = super::upload_progress();
    let total: u64 = head
        .iter()
        .chain(&tail)
        .filter_map(|f| f.metadata().ok())
        .map(|m| m.len())
        .sum();
    let mut done = 0u64;
    for f in head.iter().chain(&tail) {
        let rel = f.strip_prefix(&staging.0).expect("listed under it");
        let rel = rel.to_string_lossy().replace('\\', "/");
        super::upload_with(f, Path::new(&super::join(&base, &rel)), &mut |n| {
            done += n;
            if let Some(h) = &hook {
                h(done, total);
            }
        })?;
    }
    Ok(out)
}

/// Where `local` (a path under the staging folder `staged`) ends up under `remote`.
pub fn remote_path(local: &Path, staged: &Path, remote: &Path) -> PathBuf {
    match local.strip_prefix(staged) {
        Ok(rel) => PathBuf::from(super::join(
            &remote.to_string_lossy(),
            &rel.to_string_lossy(),
        )),
        Err(_) => local.to_path_buf(),
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let p = e.path();
        let kind = e.file_type().map_err(|e| Error::io(&p, e))?;
        if kind.is_dir() {
            collect(&p, out)?;
        } else if kind.is_file() {
            // A writer's lock file or a leftover temporary is no part of the dataset.
            let name = e.file_name().to_string_lossy().into_owned();
            if crate::atomic::is_temp_name(&name).is_none() && name != crate::atomic::LOCK_NAME {
                out.push(p);
            }
        }
    }
    Ok(())
}
