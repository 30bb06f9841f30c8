//! Whole remote objects for a reader that goes through them in order: once a reader's record
//! reads have been sequential for [`RUN`] reads in a row, the object being read is fetched whole
//! (one `GET`) and the next ones are fetched ahead in the background by [`ReadAhead`], so a
//! sequential epoch over a remote shard folder costs about one request per shard instead of one
//! per record or batch. Random access (reads far apart) keeps the reader's ranged reads.
//!
//! "Sequential" is judged on the reader's record numbers: a read within [`NEAR`] records of the
//! one before continues a run, so the slightly out-of-order reads of parallel workers, each
//! claiming a run of consecutive records, count as sequential; a shuffled read almost never does.
//!
//! After `fork()` (a DataLoader worker) the child never touches the parent's read-ahead, whose
//! threads it does not have (waiting on them would hang): it starts a read-ahead of its own.
//!
//! Memory: the object being read and the one before it (workers straddling a boundary) are held,
//! plus up to `depth` in flight: at most `depth + 2` objects. Objects larger than
//! [`MAX_WHOLE`] are never fetched whole.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use stokehold_core::Result;

use super::read_ahead::ReadAhead;
use super::Object;

/// Sequential reads in a row before objects are fetched whole: few enough that a sequential epoch
/// pays a handful of ranged reads once, enough that a shuffled read (whose neighbours are
/// random) practically never switches.
pub const RUN: u32 = 4;

/// Records apart that still count as in order: parallel map workers claim runs of up to 16
/// consecutive records each, so with a few workers consecutive reads land a few dozen apart.
pub const NEAR: u64 = 64;

/// Objects behind the read-ahead's next one that a read may lag and still be read by range
/// instead of restarting the read-ahead there (a new epoch, a jump back, or any read once the
/// read-ahead reached the end, restarts it).
const LAG: usize = 3;

/// Objects larger than this are read by range even sequentially: `depth + 2` of them are held in
/// memory, and a sequential object read already moves multi-MiB requests.
pub const MAX_WHOLE: u64 = 256 << 20;

/// Bytes fetched ahead at most (the depth is this over the largest object, from 1 to 4):
/// enough to hide a request's latency behind the decoding of the objects before it.
pub const AHEAD_BYTES: u64 = 256 << 20;

/// The objects of one reader (e.g. a shard folder's shards, in dataset order), served whole when
/// its reads go in order (see the module docs).
pub struct StreamAhead {
    objects: Vec<Object>,
    depth: usize,
    whole: bool,
    /// The process that made it: its state and read-ahead threads belong to that process.
    pid: u32,
    state: Mutex<State>,
    /// A forked child's own reader (made in the child, for its pid). The parent never locks it,
    /// so a fork cannot copy it locked.
    forked: Mutex<Option<(u32, Arc<StreamAhead>)>>,
}

struct State {
    last: Option<u64>,
    run: u32,
    held: VecDeque<(usize, Bytes)>,
    /// The read-ahead and the object its next item is.
    ahead: Option<(usize, ReadAhead<Bytes>)>,
}

impl StreamAhead {
    /// Serves `objects` (remote ones; a local object is never fetched ahead).
    pub fn new(objects: Vec<Object>) -> Self {
        let largest = objects.iter().map(Object::size).max().unwrap_or(0);
        let whole = largest <= MAX_WHOLE && objects.iter().all(Object::is_remote);
        let depth = (AHEAD_BYTES / largest.max(1)).clamp(1, 4) as usize;
        StreamAhead {
            objects,
            depth,
            whole,
            pid: std::process::id(),
            forked: Mutex::new(None),
            state: Mutex::new(State {
                last: None,
                run: 0,
                held: VecDeque::new(),
                ahead: None,
            }),
        }
    }

    /// Notes a read of record `pos` (the reader's numbering, increasing through the objects),
    /// which lies in object `k`; `Some(object k's bytes)` when reads have been sequential (or
    /// object `k` is held already), `None` to read by range.
    pub fn read(&self, k: usize, pos: u64) -> Result<Option<Bytes>> {
        if !self.whole || k >= self.objects.len() {
            return Ok(None);
        }
        let pid = std::process::id();
        if pid != self.pid {
            return self.in_child(pid).read(k, pos);
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let near = st.last.is_some_and(|l| l.abs_diff(pos) <= NEAR);
        st.run = if near { st.run.saturating_add(1) } else { 0 };
        st.last = Some(pos);
        if let Some((_, b)) = st.held.iter().find(|(j, _)| *j == k) {
            return Ok(Some(b.clone()));
        }
        if st.run < RUN {
            return Ok(None);
        }
        if let Some((next, _)) = &st.ahead {
            if k < *next && *next - k <= LAG && *next < self.objects.len() {
                // A worker a little behind the others (the objects it wants were let go):
                // read by range rather than restart the read-ahead behind everyone.
                return Ok(None);
            }
        }
        if st.ahead.as_ref().is_none_or(|(next, _)| *next != k) {
            // Starting, or jumped (a new epoch, a resumed iterator): read ahead from `k`. The
            // old read-ahead's fetches finish in the background and are dropped.
            let objects: Vec<Object> = self.objects[k..].to_vec();
            let ahead = ReadAhead::new(objects.len(), self.depth, move |j| objects[j].read_all());
            st.ahead = Some((k, ahead));
        }
        let (next, ahead) = st.ahead.as_mut().expect("set above");
        let got = ahead.next().expect("object k is in the read-ahead");
        *next += 1;
        let got = got?;
        st.held.push_back((k, got.clone()));
        if st.held.len() > 2 {
            st.held.pop_front();
        }
        Ok(Some(got))
    }

    /// This (forked) process's own reader of the same objects.
    fn in_child(&self, pid: u32) -> Arc<StreamAhead> {
        let mut g = self.forked.lock().unwrap_or_else(|e| e.into_inner());
        match &*g {
            Some((p, s)) if *p == pid => s.clone(),
            _ => {
                let s = Arc::new(StreamAhead::new(self.objects.clone()));
                *g = Some((pid, s.clone()));
                s
            }
        }
    }
}
