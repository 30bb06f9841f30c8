//! The local shard cache: whole remote objects (shards, TFRecord files) kept in a folder on local
//! disk, under a byte cap, for random access and later epochs.
//!
//! ```no_run
//! # fn main() -> stokehold_core::Result<()> {
//! use std::io::Write;
//! use stokehold_io::storage::local_cache::LocalCache;
//!
//! let cache = LocalCache::open("/tmp/stokehold-cache", 10 << 30)?;
//! let shard = cache.get_or_fill("s3://bucket/train/shard-00000.skh", "\"etag-1\"", 5, |f| {
//!     f.write_all(b"bytes").map_err(|e| stokehold_core::Error::io("shard-00000.skh", e))
//! })?;
//! assert_eq!(&shard.map()?[..], b"bytes");
//! # Ok(())
//! # }
//! ```
//!
//! ## On disk
//! One flat folder. An entry is named `<h(key)>-<h(version)>-<size>.shard` (`h` is CRC-64 in hex):
//! the version (an ETag or generation) and the size are part of the name, so an object changed
//! remotely is a miss, never served stale, and the old entry of its key is removed on the next fill.
//! The folder's state is the folder: several processes share it with no index file to corrupt.
//!
//! * **Nothing in the folder is followed**: the folder is opened once ([`SafeDir`]) and must be a
//!   real folder (not a symbolic link), owned by this user or root, and not writable by group or
//!   others unless it has the sticky bit; it is created mode 0700. Every lock, entry and
//!   temporary file is then opened relative to that handle with `O_NOFOLLOW` and checked to be a
//!   regular file owned by this user or root; a symbolic link (or a FIFO, a folder, another
//!   user's file) under one of the cache's names is refused with an error naming it, never
//!   followed and never replaced: only its owner can remove it. So the doc example's folder under
//!   `/tmp` is refused if someone else made it first, not used.
//! * **Atomic fills**: a fill writes `.<entry>.tmp-<pid>-<n>` (the crate's [`crate::atomic`]
//!   convention), checks it holds exactly `size` bytes, fsyncs, renames it into place and syncs the
//!   folder. A process killed mid-fill leaves only a hidden temporary file, which no lookup reads.
//! * **Several processes**: fills of one key are serialised by an `flock` on one of
//!   [`FILL_STRIPES`] lock files (`.locks/NN`), so two processes asking for the same shard download
//!   it once; the second waits and then hits. Eviction and the space check run under the folder's
//!   `.index.lock`. Locks die with their process, so a killed process never wedges the cache.
//! * **Stale temporary files**: [`LocalCache::open`] removes the temporary files whose writer
//!   process is gone (never a live writer's; see [`SafeDir::clean_temps`]).
//! * **LRU**: a hit and a fill set the entry's mtime to now (the precise clock, not the kernel's
//!   coarse file times); eviction removes the oldest mtimes first. Removing a file another process
//!   has open or mapped is safe on Unix: its mapping stays valid until dropped.
//! * **Cap**: used bytes are the entries plus the declared sizes of fills in flight. Before a fill,
//!   entries are evicted until the new one fits. Fills in flight in other processes are never
//!   evicted, so while several run at once the folder may exceed the cap by at most those fills.
//! * **Cap smaller than one object**: refused with [`Error::InvalidArgument`] naming the object, its
//!   size and the cap. We chose a clear error over silently streaming without the cache: a
//!   cache that quietly stops caching turns every random read into a remote read, the slow tail the
//!   cache exists to avoid. Raise the cap or read that data without a cache.
//! * **Full disk**: a fill that fails with `ENOSPC`, `EDQUOT` or `EFBIG` (a file-size limit)
//!   removes its temporary file, evicts least recently used entries worth the object's size, and
//!   runs once more; failing again, the error names the cache folder, its cap and the bytes
//!   evicted. The disk can be fuller than the cap says because other files share it.
//! * **Read-only folder** (a read-only mount, or a folder this user cannot write): it opens
//!   read-only ([`LocalCache::is_read_only`]), takes no locks, cleans nothing, serves hits, and
//!   a miss is an error naming the folder.

use std::ffi::CString;
use std::fs::{self, File};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use stokehold_core::{Error, Result};

use crate::atomic;

/// Lock files that serialise fills by key (a key's stripe is its hash modulo this). 256 makes two
/// concurrent fills of different keys wait on each other rarely (read-ahead keeps a few in flight)
/// while bounding the lock files to a fixed, small set that is never removed (removing lock files
/// races with their takers).
pub const FILL_STRIPES: u64 = 256;
const INDEX_LOCK: &str = ".index.lock";
const LOCK_DIR: &str = ".locks";
const SUFFIX: &str = ".shard";

/// A folder opened once, checked (see [`SafeDir::open`]), and the one way the cache opens,
/// creates, renames and removes anything: every call is relative to the folder's handle
/// (`openat`, `mkdirat`, `renameat`, `unlinkat`, `symlinkat`) and never follows a symbolic link
/// (`O_NOFOLLOW`), so a link planted in the folder is refused, never followed, and the folder
/// cannot be swapped for another one under the cache.
#[derive(Debug)]
pub struct SafeDir {
    fd: OwnedFd,
    path: PathBuf,
}

fn cname(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a name"))
}

/// `r` of a libc call that returns -1 on failure.
fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn zeroed_stat() -> libc::stat {
    // SAFETY: `stat` is plain integers, for which all zero bytes are a valid value.
    unsafe { std::mem::zeroed() }
}

fn fstat(fd: libc::c_int) -> io::Result<libc::stat> {
    let mut st = zeroed_stat();
    // SAFETY: `st` is a valid, writable stat buffer; `fd` is open.
    cvt(unsafe { libc::fstat(fd, &mut st) })?;
    Ok(st)
}

fn mtime(st: &libc::stat) -> SystemTime {
    let secs = u64::try_from(st.st_mtime).unwrap_or(0);
    let nanos = u32::try_from(st.st_mtime_nsec).unwrap_or(0);
    UNIX_EPOCH + Duration::new(secs, nanos)
}

fn is_type(st: &libc::stat, t: libc::mode_t) -> bool {
    st.st_mode & libc::S_IFMT == t
}

/// Whether an error means "this process may not write here" (a read-only mount, or a folder
/// without write permission for this user).
fn is_read_only(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EROFS) | Some(libc::EACCES) | Some(libc::EPERM)
    )
}

/// The error for `path`, a symbolic link (or something else not of the cache's making) where the
/// cache expects its own file or folder.
fn refused(path: &Path, what: &str) -> Error {
    refused_fix(path, what, "remove it")
}

/// As [`refused`], with what to do about it.
fn refused_fix(path: &Path, what: &str, fix: &str) -> Error {
    Error::io(
        path,
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{what}; the cache never follows links or uses files it did not make in its \
                 folder: refused ({fix})"
            ),
        ),
    )
}

/// Checks that `st` (of `path`) is owned by this user or root: a file or folder another user
/// could have planted is refused.
fn check_owner(st: &libc::stat, path: &Path) -> Result<()> {
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if st.st_uid != me && st.st_uid != 0 {
        return Err(refused_fix(
            path,
            &format!(
                "owned by uid {}, not by this user (uid {me}) or root",
                st.st_uid
            ),
            "use a cache folder of your own",
        ));
    }
    Ok(())
}

impl SafeDir {
    /// Opens the folder `path`, creating it (mode 0700, its parents as usual) when `create`.
    /// Refused, with an error naming it: a symbolic link, not a folder, owned by another user
    /// than this one or root, or writable by group or others without the sticky bit (anyone
    /// who can write into the folder could plant names in it).
    pub fn open(path: &Path, create: bool) -> Result<SafeDir> {
        if create {
            use std::os::unix::fs::DirBuilderExt;
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            match fs::DirBuilder::new().mode(0o700).create(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists || is_read_only(&e) => {}
                Err(e) => return Err(Error::io(path, e)),
            }
        }
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::invalid(format!("{}: NUL in a path", path.display())))?;
        // SAFETY: `c` is a NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        let fd = match cvt(fd) {
            // SAFETY: a fresh descriptor this call owns.
            Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd) },
            Err(e) => return Err(Self::open_error(path, e)),
        };
        Self::checked(fd, path.to_path_buf())
    }

    fn open_error(path: &Path, e: io::Error) -> Error {
        let link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        if link {
            refused(path, "a symbolic link")
        } else {
            Error::io(path, e)
        }
    }

    fn checked(fd: OwnedFd, path: PathBuf) -> Result<SafeDir> {
        let st = fstat(fd.as_raw_fd()).map_err(|e| Error::io(&path, e))?;
        if !is_type(&st, libc::S_IFDIR) {
            return Err(refused(&path, "not a folder"));
        }
        check_owner(&st, &path)?;
        if st.st_mode & 0o022 != 0 && st.st_mode & libc::S_ISVTX == 0 {
            return Err(refused_fix(
                &path,
                &format!(
                    "writable by group or others (mode {:o}) without the sticky bit: anyone who \
                     can write into it could plant names in it",
                    st.st_mode & 0o7777
                ),
                "`chmod go-w` it, or use a folder of your own",
            ));
        }
        Ok(SafeDir { fd, path })
    }

    /// The folder's path (for messages and for readers that take a path).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder `name` inside this one, created (mode 0700) when `create` and missing, and
    /// checked as [`SafeDir::open`] checks.
    pub fn sub(&self, name: &str, create: bool) -> Result<SafeDir> {
        let path = self.path.join(name);
        let c = cname(name).map_err(|e| Error::io(&path, e))?;
        if create {
            // SAFETY: `c` is NUL-terminated, the handle open.
            if let Err(e) = cvt(unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), 0o700) }) {
                if e.kind() != io::ErrorKind::AlreadyExists && !is_read_only(&e) {
                    return Err(Error::io(&path, e));
                }
            }
        }
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: as above.
        match cvt(unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags) }) {
            // SAFETY: a fresh descriptor this call owns.
            Ok(fd) => Self::checked(unsafe { OwnedFd::from_raw_fd(fd) }, path),
            Err(e) => Err(self.refusal(name, e)),
        }
    }

    /// An `openat` error on `name`, told as a refusal when `name` is a symbolic link.
    fn refusal(&self, name: &str, e: io::Error) -> Error {
        let path = self.path.join(name);
        match self.lstat(name) {
            Some(st) if is_type(&st, libc::S_IFLNK) => refused(&path, "a symbolic link"),
            _ => Error::io(path, e),
        }
    }

    /// Opens the regular file `name` with `flags` (`O_RDONLY`, `O_RDWR | O_CREAT`, ...; mode
    /// 0644 when created), never through a link, and checks it is a regular file owned by this
    /// user or root. A missing file is `Ok(None)`.
    pub fn open_file(&self, name: &str, flags: libc::c_int) -> Result<Option<File>> {
        let path = self.path.join(name);
        let c = cname(name).map_err(|e| Error::io(&path, e))?;
        // O_NONBLOCK: a FIFO planted under the name must not block the open.
        let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: `c` is NUL-terminated, the handle open; the mode is read only with O_CREAT.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                flags,
                0o644 as libc::c_uint,
            )
        };
        let fd = match cvt(fd) {
            // SAFETY: a fresh descriptor this call owns.
            Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd) },
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.refusal(name, e)),
        };
        let st = fstat(fd.as_raw_fd()).map_err(|e| Error::io(&path, e))?;
        if !is_type(&st, libc::S_IFREG) {
            return Err(refused(&path, "not a regular file"));
        }
        check_owner(&st, &path)?;
        // Back to blocking reads and writes (O_NONBLOCK means nothing to a regular file, but a
        // caller may hand the file on).
        // SAFETY: plain fcntl on an open descriptor.
        unsafe {
            let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            if fl >= 0 {
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
            }
        }
        Ok(Some(File::from(fd)))
    }

    /// Creates the new file `name` (`O_EXCL`: never an existing file or link), readable and
    /// writable.
    pub fn create_new(&self, name: &str) -> Result<File> {
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL;
        self.open_file(name, flags)?
            .ok_or_else(|| Error::io(self.path.join(name), io::ErrorKind::NotFound.into()))
    }

    /// `lstat` of `name` (never through a link), `None` if it is missing.
    pub fn lstat(&self, name: &str) -> Option<libc::stat> {
        let c = cname(name).ok()?;
        let mut st = zeroed_stat();
        // SAFETY: valid buffer, NUL-terminated name, open handle.
        let r = unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        (r == 0).then_some(st)
    }

    /// Removes the file or link `name` (a link itself, never its target). Missing is fine.
    pub fn remove(&self, name: &str) -> Result<()> {
        let path = self.path.join(name);
        let c = cname(name).map_err(|e| Error::io(&path, e))?;
        // SAFETY: NUL-terminated name, open handle.
        match cvt(unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) }) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(path, e)),
        }
    }

    /// Renames `from` to `to`, both in this folder (replacing `to` atomically).
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        let path = self.path.join(to);
        let (a, b) = (
            cname(from).map_err(|e| Error::io(&path, e))?,
            cname(to).map_err(|e| Error::io(&path, e))?,
        );
        let fd = self.fd.as_raw_fd();
        // SAFETY: NUL-terminated names, open handle.
        cvt(unsafe { libc::renameat(fd, a.as_ptr(), fd, b.as_ptr()) })
            .map(drop)
            .map_err(|e| Error::io(path, e))
    }

    /// Makes `name` a symbolic link to `target`.
    pub fn symlink(&self, target: &Path, name: &str) -> Result<()> {
        let path = self.path.join(name);
        let t = CString::new(target.as_os_str().as_bytes())
            .map_err(|_| Error::invalid(format!("{}: NUL in a path", target.display())))?;
        let c = cname(name).map_err(|e| Error::io(&path, e))?;
        // SAFETY: NUL-terminated strings, open handle.
        cvt(unsafe { libc::symlinkat(t.as_ptr(), self.fd.as_raw_fd(), c.as_ptr()) })
            .map(drop)
            .map_err(|e| Error::io(path, e))
    }

    /// Syncs the folder, so that renames in it are durable.
    pub fn sync(&self) -> Result<()> {
        // SAFETY: fsync of an open descriptor.
        cvt(unsafe { libc::fsync(self.fd.as_raw_fd()) })
            .map(drop)
            .map_err(|e| Error::io(&self.path, e))
    }

    /// The names in the folder (best effort: an unreadable folder lists nothing). Listed through
    /// the handle, so a folder swapped in under the path is never the one listed.
    pub fn names(&self) -> Vec<String> {
        let mut out = Vec::new();
        let dot = c".";
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // SAFETY: a NUL-terminated name and an open handle; the new descriptor is handed to
        // `fdopendir`, which owns it from then on (closed by `closedir`, or here if it fails).
        unsafe {
            let fd = libc::openat(self.fd.as_raw_fd(), dot.as_ptr(), flags);
            if fd < 0 {
                return out;
            }
            let d = libc::fdopendir(fd);
            if d.is_null() {
                libc::close(fd);
                return out;
            }
            loop {
                let e = libc::readdir(d);
                if e.is_null() {
                    break;
                }
                let name = std::ffi::CStr::from_ptr((*e).d_name.as_ptr()).to_string_lossy();
                if name != "." && name != ".." {
                    out.push(name.into_owned());
                }
            }
            libc::closedir(d);
        }
        out
    }

    /// Removes the temporary files of dead writers ([`atomic::is_stale_temp`]); returns how many.
    pub fn clean_temps(&self) -> usize {
        let mut n = 0;
        for name in self.names() {
            let Some(st) = self.lstat(&name) else {
                continue;
            };
            if is_type(&st, libc::S_IFREG)
                && atomic::is_stale_temp(&name, Some(mtime(&st)))
                && self.remove(&name).is_ok()
            {
                n += 1;
            }
        }
        n
    }
}

/// A folder of cached whole objects under a byte cap (see the module docs).
#[derive(Debug, Clone)]
pub struct LocalCache {
    dir: PathBuf,
    cap: u64,
    root: Arc<SafeDir>,
    /// The stripe locks' folder; `None` when this process cannot write the cache folder (a
    /// read-only cache: hits only).
    locks: Option<Arc<SafeDir>>,
    /// Why the folder is read-only (for the error of a miss).
    read_only: Option<String>,
}

/// A cached object, open for reading. It stays readable even if another process evicts it.
#[derive(Debug)]
pub struct CachedFile {
    path: PathBuf,
    file: File,
    len: u64,
    hit: bool,
}

impl CachedFile {
    /// The entry's path in the cache folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The object's size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the object was already cached (false: this call filled it).
    pub fn was_hit(&self) -> bool {
        self.hit
    }

    /// Maps the whole object read-only. An empty object maps as an empty slice.
    pub fn map(&self) -> Result<memmap2::Mmap> {
        // SAFETY: cache entries are never written after their rename into place (a new version
        // gets a new name), so the mapped bytes cannot change under the reader.
        unsafe { memmap2::Mmap::map(&self.file) }.map_err(|e| Error::io(&self.path, e))
    }
}

/// CRC-64 of `s`, the hash in entry names (stable across releases, unlike std's hasher).
fn h64(s: &str) -> u64 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, s.as_bytes())
}

/// An entry's file name.
fn entry_name(key: &str, version: &str, size: u64) -> String {
    format!("{:016x}-{:016x}-{size}{SUFFIX}", h64(key), h64(version))
}

/// The size declared in an entry name, or in the temporary name of a fill of one.
fn declared_size(name: &str) -> Option<u64> {
    let stem = &name[..name.find(SUFFIX)?];
    stem.rsplit('-').next()?.parse().ok()
}

/// Whether `e` says the disk (or a quota, or a file-size limit) is full.
fn out_of_space(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if out_of_space_io(source))
}

fn out_of_space_io(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG)
    )
}

/// An open lock file, locked exclusively until dropped (or the process dies).
struct Held(#[allow(dead_code)] File);

/// Locks the lock file `name` of `dir`, creating it. A link or a file of another user under the
/// name is refused (never followed, never replaced: its owner must remove it).
fn lock(dir: &SafeDir, name: &str) -> Result<Held> {
    let f = dir
        .open_file(name, libc::O_RDWR | libc::O_CREAT)?
        .ok_or_else(|| Error::io(dir.path().join(name), io::ErrorKind::NotFound.into()))?;
    f.lock().map_err(|e| Error::io(dir.path().join(name), e))?;
    Ok(Held(f))
}

impl LocalCache {
    /// Opens (creating it) the cache folder `dir` with a cap of `cap_bytes`, and removes the
    /// temporary files of fills whose process is gone. A folder this process cannot write (a
    /// read-only mount, or no write permission) opens read-only: hits are served, a miss is an
    /// error naming the folder.
    pub fn open(dir: impl AsRef<Path>, cap_bytes: u64) -> Result<LocalCache> {
        let dir = dir.as_ref();
        // Absolute, so entry paths stay valid whatever the working folder.
        let abs = std::path::absolute(dir).map_err(|e| Error::io(dir, e))?;
        let root = Arc::new(SafeDir::open(&abs, true)?);
        let mut cache = LocalCache {
            dir: abs,
            cap: cap_bytes,
            root: Arc::clone(&root),
            locks: None,
            read_only: None,
        };
        // The index lock first: in a folder this process cannot write, taking it is what fails.
        let writable =
            lock(&root, INDEX_LOCK).and_then(|held| Ok((root.sub(LOCK_DIR, true)?, held)));
        match writable {
            Ok((locks, _index)) => {
                cache.locks = Some(Arc::new(locks));
                root.clean_temps();
            }
            Err(Error::Io { source, path }) if is_read_only(&source) => {
                cache.read_only = Some(format!("{}: {source}", path.display()));
            }
            Err(e) => return Err(e),
        }
        Ok(cache)
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The byte cap.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// Whether this process can only read the cache (see [`LocalCache::open`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only.is_some()
    }

    fn index_lock(&self) -> Result<Held> {
        lock(&self.root, INDEX_LOCK)
    }

    /// The cached object `key` at `version` of `size` bytes, if present (and marks it used).
    pub fn get(&self, key: &str, version: &str, size: u64) -> Result<Option<CachedFile>> {
        let name = entry_name(key, version, size);
        let Some(file) = self.root.open_file(&name, libc::O_RDONLY)? else {
            return Ok(None);
        };
        let path = self.dir.join(&name);
        let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
        if len != size {
            return Ok(None); // cannot happen with atomic fills; refuse rather than serve it
        }
        // LRU stamp; best effort (a read-only cache folder still serves hits).
        let _ = file.set_modified(SystemTime::now());
        Ok(Some(CachedFile {
            path,
            file,
            len,
            hit: true,
        }))
    }

    /// The cached object `key` at `version` (an ETag or generation: anything that changes when
    /// the object does) of `size` bytes; on a miss `fill` writes the whole object into the file
    /// it is given (empty, open for reading and writing), which is then checked to hold `size`
    /// bytes and published atomically. Concurrent callers for one key, in this or other
    /// processes, fill it once. When the disk is full (`ENOSPC`, a quota, a file-size limit),
    /// least recently used entries are evicted and `fill` runs once more, on an empty file.
    pub fn get_or_fill(
        &self,
        key: &str,
        version: &str,
        size: u64,
        mut fill: impl FnMut(&mut File) -> Result<()>,
    ) -> Result<CachedFile> {
        if size > self.cap {
            return Err(Error::invalid(format!(
                "{key} is {size} bytes, more than the whole local cache cap of {} bytes ({}); \
                 raise the cache cap or read this data without a cache",
                self.cap,
                self.dir.display()
            )));
        }
        if let Some(hit) = self.get(key, version, size)? {
            return Ok(hit);
        }
        let (Some(locks), None) = (&self.locks, &self.read_only) else {
            return Err(Error::io(
                &self.dir,
                io::Error::new(
                    io::ErrorKind::ReadOnlyFilesystem,
                    format!(
                        "the cache folder is read-only for this process ({}); {key} is not \
                         in it: warm the cache where it is writable, or open it writable",
                        self.read_only.as_deref().unwrap_or("")
                    ),
                ),
            ));
        };
        let stripe = h64(key) % FILL_STRIPES;
        let _fill_lock = lock(locks, &format!("{stripe:02x}"))?;
        if let Some(hit) = self.get(key, version, size)? {
            return Ok(hit); // another process filled it while we waited
        }
        let name = entry_name(key, version, size);
        match self.fill_once(key, &name, size, &mut fill) {
            Err(e) if out_of_space(&e) => {
                let freed = {
                    let _index = self.index_lock()?;
                    self.evict(size)?
                };
                self.fill_once(key, &name, size, &mut fill)
                    .map_err(|e| match e {
                        Error::Io { source, .. } if out_of_space_io(&source) => Error::io(
                            &self.dir,
                            io::Error::new(
                                source.kind(),
                                format!(
                                    "the disk under the cache folder (cap {} bytes) is full: \
                                     filling {key} ({size} bytes) failed ({source}), again after \
                                     evicting {freed} bytes of least recently used entries; \
                                     free space on that disk or lower the cache cap",
                                    self.cap
                                ),
                            ),
                        ),
                        other => other,
                    })
            }
            other => other,
        }
    }

    /// One fill of entry `name`: room made under the index lock, the temporary file written by
    /// `fill`, checked, synced and renamed into place. The temporary file is removed on error.
    fn fill_once(
        &self,
        key: &str,
        name: &str,
        size: u64,
        fill: &mut impl FnMut(&mut File) -> Result<()>,
    ) -> Result<CachedFile> {
        let tmp_name = atomic::temp_path(Path::new(name))
            .to_string_lossy()
            .into_owned();
        let tmp = Temp {
            dir: &self.root,
            name: tmp_name,
            done: false,
        };
        let mut file = {
            let _index = self.index_lock()?;
            self.drop_other_versions(key, name);
            self.make_room(size)?;
            self.root.create_new(&tmp.name)?
        };
        let tmp_path = self.dir.join(&tmp.name);
        fill(&mut file)?;
        let written = file.metadata().map_err(|e| Error::io(&tmp_path, e))?.len();
        if written != size {
            return Err(Error::corrupt(
                key,
                written,
                format!("cache fill wrote {written} bytes, the object's size is {size}"),
            ));
        }
        file.set_modified(SystemTime::now())
            .map_err(|e| Error::io(&tmp_path, e))?;
        file.sync_all().map_err(|e| Error::io(&tmp_path, e))?;
        self.root.rename(&tmp.name, name)?;
        tmp.published();
        self.root.sync()?;
        // The written handle, reopened read-only: the entry maps as the file it is.
        let file = self
            .root
            .open_file(name, libc::O_RDONLY)?
            .ok_or_else(|| Error::io(self.dir.join(name), io::ErrorKind::NotFound.into()))?;
        Ok(CachedFile {
            path: self.dir.join(name),
            file,
            len: size,
            hit: false,
        })
    }

    /// Removes the entries of `key` other than `keep` (older versions). Best effort.
    fn drop_other_versions(&self, key: &str, keep: &str) {
        let prefix = format!("{:016x}-", h64(key));
        for (name, _, _) in self.entries() {
            if name.starts_with(&prefix) && name != keep {
                let _ = self.root.remove(&name);
            }
        }
    }

    /// Entries (regular files only: anything else under an entry's name is never read) as
    /// (name, size, mtime).
    fn entries(&self) -> Vec<(String, u64, SystemTime)> {
        self.root
            .names()
            .into_iter()
            .filter(|n| !n.starts_with('.') && n.ends_with(SUFFIX))
            .filter_map(|name| {
                let st = self.root.lstat(&name)?;
                is_type(&st, libc::S_IFREG).then(|| (name, st.st_size as u64, mtime(&st)))
            })
            .collect()
    }

    /// Bytes the folder holds or has promised: entries plus the declared sizes of fills in flight.
    pub fn used_bytes(&self) -> u64 {
        let entries: u64 = self.entries().iter().map(|e| e.1).sum();
        entries + self.in_flight()
    }

    fn in_flight(&self) -> u64 {
        self.root
            .names()
            .iter()
            .filter_map(|name| {
                atomic::is_temp_name(name)?;
                declared_size(name)
            })
            .sum()
    }

    /// Evicts least recently used entries until `size` more bytes fit under the cap (or nothing
    /// evictable is left: only other processes' fills in flight hold the rest).
    fn make_room(&self, size: u64) -> Result<()> {
        let over = self
            .used_bytes()
            .saturating_add(size)
            .saturating_sub(self.cap);
        self.evict(over).map(drop)
    }

    /// Evicts least recently used entries until `bytes` are freed (or none is left); returns the
    /// bytes freed.
    fn evict(&self, bytes: u64) -> Result<u64> {
        let mut entries = self.entries();
        entries.sort_by(|a, b| (a.2, &a.0).cmp(&(b.2, &b.0)));
        let mut freed = 0u64;
        for (name, len, _) in entries {
            if freed >= bytes {
                break;
            }
            self.root.remove(&name)?;
            freed += len;
        }
        Ok(freed)
    }
}

/// A fill's temporary file in the cache folder, removed unless published.
struct Temp<'a> {
    dir: &'a SafeDir,
    name: String,
    done: bool,
}

impl Temp<'_> {
    fn published(mut self) {
        self.done = true;
    }
}

impl Drop for Temp<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.dir.remove(&self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_version_and_size() {
        let a = entry_name("s3://b/k", "v1", 10);
        assert_ne!(a, entry_name("s3://b/k", "v2", 10));
        assert_ne!(a, entry_name("s3://b/k", "v1", 11));
        assert_eq!(declared_size(&a), Some(10));
        assert_eq!(declared_size(&format!(".{a}.tmp-12-0")), Some(10));
    }
}
