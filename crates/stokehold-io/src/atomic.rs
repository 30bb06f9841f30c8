//! Atomic file writes and the writer lock of a folder, shared by every writer in this crate.
//!
//! A file is written under a hidden temporary name beside its target, `.<name>.tmp-<pid>-<n>`
//! (`n` counts temporary files within the process), synced, renamed into place, and the folder is
//! synced so the rename survives a crash. A [`TempFile`] dropped before [`TempFile::commit`]
//! removes its file. One naming convention for every writer means a killed run's leftovers are
//! recognisable: [`is_temp_name`] says whether a name is one, and which process wrote it.
//!
//! Cleaning: a writer that takes the folder lock ([`FolderLock`]), and a writer of single files
//! ([`TempFile::create`]), remove the temporary files of the convention beside their target that
//! are stale: their writer process is gone, or the file is older than the process now holding
//! that pid (the pid was reused). Linux only (`/proc/<pid>/stat`); elsewhere nothing is removed.
//! A live writer's files are never removed, even one that does not take the folder lock (a lone
//! TFRecord file or table written into the same folder). Processes in another pid namespace
//! (a container sharing the folder) look gone: do not share a folder across namespaces while
//! writing.

use std::fs::{self, File};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use stokehold_core::{Error, Result};

/// The marker between a target's name and the writer's pid in a temporary name.
pub const TEMP_MARK: &str = ".tmp-";
/// The lock file every folder writer holds while it writes.
pub const LOCK_NAME: &str = ".stokehold.lock";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The temporary name of `target` for this process: `<dir>/.<name>.tmp-<pid>-<n>`.
pub fn temp_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    target.with_file_name(format!(".{name}{TEMP_MARK}{}-{n}", std::process::id()))
}

/// The writer's pid when `name` is a temporary name of the convention (hidden, `.tmp-<pid>`
/// after the target's name; anything may follow, such as an index sidecar's `.idx`).
pub fn is_temp_name(name: &str) -> Option<u32> {
    if !name.starts_with('.') {
        return None;
    }
    let at = name.rfind(TEMP_MARK)?;
    let rest = &name[at + TEMP_MARK.len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse().ok()
}

/// When process `pid` started, if it runs (Linux: `/proc/<pid>/stat` field 22, clock ticks since
/// boot at the usual 100 Hz, plus the boot time from `/proc/stat`). `None`: not running.
/// Elsewhere every process is taken to run, and to have started at the epoch.
fn started(pid: u32) -> Option<std::time::SystemTime> {
    use std::time::{Duration, UNIX_EPOCH};
    if !cfg!(target_os = "linux") {
        return Some(UNIX_EPOCH);
    }
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3.
    let ticks: u64 = stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()?;
    let btime: u64 = fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
        })
        .unwrap_or(0);
    Some(UNIX_EPOCH + Duration::from_secs(btime) + Duration::from_millis(ticks * 10))
}

/// Whether a temporary file written by `pid`, last modified at `mtime`, is a leftover: its
/// writer is gone, or it predates the process now holding the pid (by over 2 s, for the
/// rounding of the start time).
fn stale(pid: u32, mtime: Option<std::time::SystemTime>) -> bool {
    match started(pid) {
        None => true,
        Some(start) => mtime.is_some_and(|m| m + std::time::Duration::from_secs(2) < start),
    }
}

/// Whether `name` is a temporary name of the convention whose writer is gone (see [`stale`]),
/// given the file's `mtime`.
pub fn is_stale_temp(name: &str, mtime: Option<std::time::SystemTime>) -> bool {
    is_temp_name(name).is_some_and(|pid| stale(pid, mtime))
}

/// Removes the stale temporary files of the convention in `dir` (see [`stale`]); returns how
/// many. Best effort: a file that cannot be removed is left.
pub fn clean_temps(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = is_temp_name(&name) else {
            continue;
        };
        let mtime = e.metadata().and_then(|m| m.modified()).ok();
        if stale(pid, mtime) && fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

/// Temporary files of the convention in `dir` (for "incomplete folder" messages).
pub fn count_temps(dir: &Path) -> usize {
    fs::read_dir(dir).map_or(0, |d| {
        d.flatten()
            .filter(|e| is_temp_name(&e.file_name().to_string_lossy()).is_some())
            .count()
    })
}

/// Syncs a folder so the renames in it are durable (directories cannot be opened for sync on
/// every OS; elsewhere a no-op).
pub fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))?;
    let _ = dir;
    Ok(())
}

/// A file being written under a temporary name; [`TempFile::commit`] puts it in place, drop
/// removes it.
#[derive(Debug)]
pub struct TempFile {
    tmp: PathBuf,
    dest: PathBuf,
    done: bool,
}

impl TempFile {
    /// Creates the temporary file of `dest` (after removing leftovers of dead writers beside it).
    pub fn create(dest: impl AsRef<Path>) -> Result<(TempFile, File)> {
        let dest = dest.as_ref().to_path_buf();
        if let Some(dir) = dest.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            clean_temps(dir);
        }
        Self::create_in_locked(dest)
    }

    /// Creates the temporary file of `dest` without cleaning (the caller cleaned the folder when
    /// it took its lock).
    pub fn create_in_locked(dest: impl AsRef<Path>) -> Result<(TempFile, File)> {
        let dest = dest.as_ref().to_path_buf();
        let tmp = temp_path(&dest);
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| Error::io(&tmp, e))?;
        Ok((
            TempFile {
                tmp,
                dest,
                done: false,
            },
            file,
        ))
    }

    /// The temporary path (for error messages and writers that reopen it).
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// The final path.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Syncs `file` (or, when the writer gave its handle away, the reopened temporary file),
    /// renames it over the target and syncs the folder.
    pub fn commit(mut self, file: Option<File>) -> Result<PathBuf> {
        let io = |e| Error::io(&self.tmp, e);
        match file {
            Some(f) => f.sync_all().map_err(io)?,
            None => File::open(&self.tmp)
                .and_then(|f| f.sync_all())
                .map_err(io)?,
        }
        fs::rename(&self.tmp, &self.dest).map_err(|e| Error::io(&self.dest, e))?;
        self.done = true;
        if let Some(dir) = self.dest.parent().filter(|d| !d.as_os_str().is_empty()) {
            sync_dir(dir)?;
        }
        Ok(self.dest.clone())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `bytes` to `dest` atomically.
pub fn write_atomic(dest: impl AsRef<Path>, bytes: &[u8]) -> Result<PathBuf> {
    let (t, mut f) = TempFile::create(dest)?;
    f.write_all(bytes).map_err(|e| Error::io(t.path(), e))?;
    t.commit(Some(f))
}

/// Writes a sidecar (an index beside its data) with [`write_atomic`], or, where the folder may
/// not be written (a read-only data set), nothing: `Ok(None)`, the caller keeps what it scanned
/// in memory. Any other failure is an error naming the sidecar.
pub fn write_sidecar(dest: impl AsRef<Path>, bytes: &[u8]) -> Result<Option<PathBuf>> {
    match write_atomic(dest, bytes) {
        Ok(p) => Ok(Some(p)),
        Err(Error::Io { source, .. })
            if matches!(
                source.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The exclusive writer lock of a folder: `flock` on `<dir>/.stokehold.lock`, held until dropped
/// (or the process dies). The file holds the holder's pid so that a refused writer can name it,
/// and is removed when the lock is released, so a finished folder holds no trace of it. A writer
/// that locked a file just removed by the previous holder sees that the path no longer names its
/// file and tries again, so two writers never both hold "the" lock.
#[derive(Debug)]
pub struct FolderLock {
    path: PathBuf,
    file: Option<File>,
}

impl FolderLock {
    /// Takes the lock of `dir` (which must exist) and removes the temporary files killed runs
    /// left there ([`clean_temps`]); a folder locked by another writer is refused with
    /// an error naming it and the holder's pid.
    pub fn take(dir: &Path) -> Result<FolderLock> {
        let path = dir.join(LOCK_NAME);
        loop {
            let mut file = File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| Error::io(&path, e))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(fs::TryLockError::WouldBlock) => {
                    let mut holder = String::new();
                    let _ = file.read_to_string(&mut holder);
                    let holder = holder.trim();
                    return Err(Error::invalid(format!(
                        "{} is being written by another writer (pid {}); two writers on one \
                         folder are refused",
                        dir.display(),
                        if holder.is_empty() { "unknown" } else { holder }
                    )));
                }
                Err(fs::TryLockError::Error(e)) => return Err(Error::io(&path, e)),
            }
            if !same_file(&file, &path) {
                continue; // the previous holder removed it after we opened it
            }
            let pid = std::process::id().to_string();
            let _ = file
                .set_len(0)
                .and_then(|_| file.rewind())
                .and_then(|_| file.write_all(pid.as_bytes()));
            clean_temps(dir);
            return Ok(FolderLock {
                path,
                file: Some(file),
            });
        }
    }
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        // Removed while still locked, then unlocked by closing.
        let _ = fs::remove_file(&self.path);
        drop(self.file.take());
    }
}

/// Whether `path` still names the open `file`.
fn same_file(file: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, path);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_parse() {
        let t = temp_path(Path::new("/d/shard-00001.stk"));
        let name = t.file_name().unwrap().to_str().unwrap();
        assert_eq!(is_temp_name(name), Some(std::process::id()));
        assert_eq!(is_temp_name(".x.tfrecord.tmp-12-3.idx"), Some(12));
        assert_eq!(is_temp_name("x.tmp-12"), None);
        assert_eq!(is_temp_name(".x.tmp-"), None);
        assert_eq!(is_temp_name("shard-00001.stk"), None);
    }

    #[test]
    fn dropped_temp_is_removed_committed_is_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("a.bin");
        let (t, _f) = TempFile::create(&dest).unwrap();
        let tmp = t.path().to_path_buf();
        assert!(tmp.exists());
        drop(t);
        assert!(!tmp.exists() && !dest.exists());
        write_atomic(&dest, b"hi").unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"hi");
        assert_eq!(count_temps(dir.path()), 0);
    }

    #[test]
    fn only_stale_temps_are_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        // Ours, fresh: a live writer's file stays.
        let live = dir.path().join(format!(".a{TEMP_MARK}{me}-0"));
        // A pid above Linux's largest (2^22): gone.
        let gone = dir.path().join(format!(".b{TEMP_MARK}5000000-0"));
        fs::write(&live, b"x").unwrap();
        fs::write(&gone, b"x").unwrap();
        assert_eq!(clean_temps(dir.path()), 1);
        assert!(live.exists() && !gone.exists());
        // Older than the process holding its pid (this one): the pid was reused.
        let old = dir.path().join(format!(".c{TEMP_MARK}{me}-1"));
        let f = File::create(&old).unwrap();
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1))
            .unwrap();
        assert_eq!(clean_temps(dir.path()), 1);
        assert!(!old.exists() && live.exists());
    }
}
